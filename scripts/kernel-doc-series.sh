#!/bin/sh
# kernel-doc-series.sh: scripts/kernel-doc -none -Wall on every file of the series (build/src,
# base..HEAD) that has kernel-doc comments. -Wall is 6.12's (6.1's kernel-doc has no -W
# options): Debian's linux-source-6.12 lends its script. Fails on a warning that the base
# tree does not have, on any warning about a comment the series adds or changes (an added
# line between the comment's "/**" and the line the warning names), and on a non-static
# function that the series adds without a kernel-doc comment.
set -eu
src=build/src tmp=build/lint/kernel-doc tarball=/usr/src/linux-source-6.12.tar.xz
# 6.12's script, unpacked once per version of the package (~9 s) next to the lint lists
kdir=${XDG_CACHE_HOME:-$HOME/.cache}/ksm-series-lint/kernel-doc-6.12
kd=$kdir/linux-source-6.12/scripts/kernel-doc
[ -f $tarball ] || { echo "kernel-doc-series.sh: no $tarball: run 'make deps-check'" >&2; exit 1; }
if [ "$(cat "$kdir/.stamp" 2>/dev/null)" != "$(stat -c '%s %Y' $tarball)" ]; then
	rm -rf "$kdir"; mkdir -p "$kdir"
	tar -xJf $tarball -C "$kdir" --occurrence=1 linux-source-6.12/scripts/kernel-doc
	stat -c '%s %Y' $tarball > "$kdir/.stamp"
fi
rm -rf $tmp; mkdir -p $tmp/base
sh scripts/added-lines.sh > $tmp/added.txt
files=$(git -C $src diff --name-only base..HEAD -- '*.c' '*.h' | while read -r f; do
	! grep -q '^/\*\*' $src/$f || echo $f; done)
for f in $files; do
	mkdir -p $tmp/base/${f%/*}
	git -C $src show base:$f > $tmp/base/$f 2>/dev/null || rm -f $tmp/base/$f
done
(cd $tmp/base && for f in $files; do [ ! -f $f ] || perl "$kd" -none -Wall $f; done) > $tmp/base.txt 2>&1
(cd $src && [ -z "$files" ] || perl "$kd" -none -Wall $files) > $tmp/series.txt 2>&1
echo "kernel-doc-series.sh: $(echo $files | wc -w) files: $(wc -l < $tmp/base.txt) warnings before the series, $(wc -l < $tmp/series.txt) after"
rc=0
new=$(sh scripts/new-warnings.sh $tmp/base.txt $tmp/series.txt) || { printf '%s\n' "$new"; rc=1; }
# first_comment FILE LINE: the line of the last "/**" at or before LINE of FILE
first_comment() { head -n "$2" "$src/$1" | grep -n '^/\*\*' | tail -n 1 | cut -d: -f1; }
# Old warnings too, if they are about a comment that the series touched.
bad=$(grep -E '^[^ :]+:[0-9]+: ' $tmp/series.txt | while IFS=: read -r f l rest; do
	s=$(first_comment "$f" "$l"); [ -n "$s" ] || continue
	! printf '%s\n' "$new" | grep -qxF "NEW: $f:$l:$rest" || continue
	! awk -F: -v f="$f" -v s="$s" -v l="$l" '$1 == f && $2 >= s && $2 <= l { x = 1 } END { exit !x }' \
		$tmp/added.txt || echo "CHANGED: $f:$l:$rest (the series changed lines $s-$l)"
done)
# Functions the series adds that other files can call: a "/**" comment must end just above.
# (Their first lines are among the lines the series adds, $tmp/added.txt.)
bad="$bad${bad:+
}$(awk -F: -v src=$src '$1 ~ /\.c$/ && $1 !~ /^(tools|Documentation)\// { want[$1, $2] = 1; files[$1] = 1 }
	END { for (f in files) { n = 0; while ((getline l < (src "/" f)) > 0) { n++
		if ((f, n) in want && l ~ /^[a-z][a-z_0-9 *]*[ *][a-z_0-9]+\(/ &&
		    l !~ /^(static|SYSCALL|EXPORT|DEFINE|__)/) print f, n } } }' $tmp/added.txt |
	while read -r f l; do
		s=$(first_comment "$f" "$l")
		[ -n "$s" ] && [ "$(sed -n "$((l - 1))p" "$src/$f")" = " */" ] &&
			! sed -n "$((s + 1)),$((l - 2))p" "$src/$f" | grep -q '\*/' ||
			echo "UNDOCUMENTED: $f:$l: $(sed -n "${l}p" "$src/$f") has no kernel-doc comment"
	done)"
[ -z "$bad" ] || { printf '%s\n' "$bad" | sed '/^$/d'; rc=1; }
exit $rc
