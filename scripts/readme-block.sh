#!/bin/sh
# readme-block.sh NAME FILE: replace the generated block NAME of README.md (between the lines
# "<!-- NAME:begin -->" and "<!-- NAME:end -->") with the contents of FILE.
set -eu
[ $# = 2 ] && [ -r "$2" ] || { echo "usage: readme-block.sh NAME FILE" >&2; exit 2; }
grep -q "^<!-- $1:begin -->" README.md ||
	{ echo "readme-block.sh: README.md has no <!-- $1:begin --> line" >&2; exit 1; }
awk -v name="$1" -v file="$2" '
	$0 == "<!-- " name ":begin -->" { print; while ((getline l < file) > 0) print l; skip = 1; next }
	$0 == "<!-- " name ":end -->" { skip = 0 }
	!skip' README.md > README.md.tmp
mv README.md.tmp README.md
