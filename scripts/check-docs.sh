#!/bin/sh
# check-docs.sh [RANGE]: build the documents that RANGE of build/src (default base..HEAD)
# changes as `make htmldocs` does, with SPHINXDIRS = the narrowest directories that hold them:
# those of the .rst files it changes, and those whose "kernel-doc::" directives read a source
# file in which it changes a kernel-doc comment. Then validate the ABI files
# (scripts/get_abi.pl). A warning or error about a changed file fails, but for references
# to documents outside SPHINXDIRS, which a partial build cannot resolve.
set -eu
src=build/src range=${1:-base..HEAD}
files=$(git -C $src diff --name-only --diff-filter=AM "$range")
# Sources in which an added line falls inside a "/** ... */" comment.
docsrc=$(sh scripts/added-lines.sh "$range" | grep -E '\.[ch]:' | awk -F: -v src=$src '
	$1 != f { close(src "/" f); f = $1; n = 0; in_doc = 0 }
	{ while (n < $2 && (getline l < (src "/" f)) > 0) {
		n++; if (l ~ /^[ \t]*\/\*\*/) in_doc = 1; cur = in_doc; if (l ~ /\*\//) in_doc = 0 }
	  if (cur) print f }' | sort -u | paste -sd' ')
dirs=$( { printf '%s\n' $files | sed -n 's@^Documentation/\(.*\)/[^/]*\.rst$@\1@p'
	for f in $docsrc; do grep -rl --include='*.rst' "kernel-doc:: *$f\$" $src/Documentation |
		sed "s@^$src/Documentation/\(.*\)/[^/]*\.rst\$@\1@"; done; } | sort -u | paste -sd' ')
echo "check-docs.sh: $range: SPHINXDIRS=\"$dirs\" (kernel-doc comments changed in: ${docsrc:-none})"
rc=0
out=$( { [ -z "$dirs" ] || make -s -C $src O="$PWD/build/out/docs" SPHINXDIRS="$dirs" htmldocs &&
	perl $src/scripts/get_abi.pl validate --dir $src/Documentation/ABI; } 2>&1) || rc=$?
printf '%s\n' "$out"
[ $rc = 0 ] || { echo "check-docs.sh: the documentation build failed"; exit 1; }
for f in $files; do
	if printf '%s\n' "$out" | grep -F -A2 "$f" | grep -v -e 'unknown document' -e 'undefined label' |
		grep -q -e WARNING -e ERROR -e Warning -e 'warning:'; then
		printf '%s\n' "$out" | grep -F "$f" | grep -v -e 'unknown document' -e 'undefined label' |
			awk '!seen[$0]++ { print "NEW: " $0 }'
		rc=1
	fi
done
exit $rc
