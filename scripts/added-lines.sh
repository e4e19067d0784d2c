#!/bin/sh
# added-lines.sh [RANGE]: "file:line" for every line that RANGE of build/src (default
# base..HEAD: the series) adds or changes, numbered as in its last commit: the lines that a
# report must not be about.
set -eu
src=build/src range=${1:-base..HEAD}
git -C "$src" rev-parse -q --verify base >/dev/null ||
	{ echo "added-lines.sh: $src has no tag 'base': run 'make src'" >&2; exit 1; }
git -C "$src" diff -U0 --no-color "$range" | awk '
	/^\+\+\+ b\// { f = substr($0, 7); next }
	/^@@/ { split($3, a, ","); l = substr(a[1], 2); next }
	/^\+/ { print f ":" l; l++ }'
