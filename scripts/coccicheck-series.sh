#!/bin/sh
# coccicheck-series.sh: `make coccicheck MODE=report` (every semantic patch of
# scripts/coccinelle) on the .c and .h files that the series changes, and no others: M= names
# a directory with copies of them (Documentation/dev-tools/coccinelle.rst: M= limits the
# check to a directory). Fails on a report about a line the series adds. The report is cached
# per content of those files and of the semantic patches.
set -eu
src=build/src out=$PWD/build/out/lint tmp=$PWD/build/lint/cocci
[ -f $out/.config ] || { echo "coccicheck-series.sh: no $out/.config: run 'BUILD_TARGET=prepare make kernel CONFIG=test OUT=build/out/lint'" >&2; exit 1; }
command -v spatch >/dev/null || { echo "coccicheck-series.sh: no spatch: run 'make deps-check'" >&2; exit 1; }
rm -rf $tmp; mkdir -p $tmp/files
files=$(git -C $src diff --name-only --diff-filter=AM base..HEAD -- '*.c' '*.h')
for f in $files; do mkdir -p $tmp/files/${f%/*}; cp $src/$f $tmp/files/$f; done
key=$( { cd $tmp/files && find . -type f | LC_ALL=C sort | xargs sha256sum; cd "$OLDPWD/$src" &&
	find scripts/coccinelle scripts/coccicheck -type f | LC_ALL=C sort | xargs sha256sum; spatch --version; } |
	sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ksm-series-lint/cocci-$key
if [ -f "$cache/report.txt" ]; then
	echo "coccicheck-series.sh: cached report ($cache)"
else
	echo "coccicheck-series.sh: $(echo $files | wc -w) files, $(find $src/scripts/coccinelle -name '*.cocci' | wc -l) semantic patches"
	make -s -C $src O="$out" coccicheck MODE=report M="$tmp/files" J=2 > $tmp/coccicheck.log 2>&1 ||
		{ cat $tmp/coccicheck.log; echo "coccicheck-series.sh: make coccicheck failed" >&2; exit 1; }
	grep -v -e '^/usr/bin/spatch ' $tmp/coccicheck.log | grep "^$tmp/files/" | sed "s@^$tmp/files/@@" > $tmp/report.txt || true
	mkdir -p "$cache" && cp $tmp/report.txt "$cache/"
fi
[ -f $tmp/report.txt ] || cp "$cache/report.txt" $tmp/
echo "coccicheck-series.sh: $(wc -l < $tmp/report.txt) reports on these files:"
cat $tmp/report.txt
sh scripts/added-lines.sh > $tmp/added.txt
# A report is "FILE:LINE:COLS: text": the series' if LINE is one it adds.
awk -F: 'FILENAME == ARGV[1] { a[$1 ":" $2] = 1; next } a[$1 ":" $2] { print "NEW: " $0; bad++ } END { exit bad > 0 }' \
	$tmp/added.txt $tmp/report.txt
