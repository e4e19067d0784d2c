#!/bin/sh
# new-warnings.sh BASE SERIES: the warnings of SERIES that BASE does not have. Both are lists
# of "[OBJECT: ]file:line[:col]: warning: text" lines; a warning is its object, file and
# text (lines move), and BASE's copies of one are matched one for one. Prints "NEW: <line>" for each; exit 1 if any.
set -eu
[ $# = 2 ] || { echo "usage: new-warnings.sh BASE SERIES" >&2; exit 2; }
awk 'function key(l) { sub(/:[0-9]+(:[0-9]+)?: /, ": ", l); return l }
	FILENAME == ARGV[1] { n[key($0)]++; next }
	n[key($0)] > 0 { n[key($0)]--; next }
	{ print "NEW: " $0; bad++ }
	END { exit bad > 0 }' "$1" "$2"
