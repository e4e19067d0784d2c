#!/bin/sh
# check-splat.sh LOG: exit 1, naming the line, if a kernel message in the console LOG is a splat.
set -eu
[ -r "${1:-}" ] || { echo "usage: check-splat.sh CONSOLE-LOG" >&2; exit 2; }
# Only kernel lines (printk timestamp "[  12.345678] ") count, so test output cannot trigger it.
pat='BUG:|WARNING:|Oops|KASAN|possible circular locking|inconsistent lock state|INFO: possible'
pat="$pat|suspicious RCU usage|Kernel panic|blocked for more than|unreferenced object|UBSAN"
pat="$pat|general protection fault|Call Trace:|kmemleak: [0-9]+ new suspected memory leaks"
# An OOM report (memcg tests provoke them on purpose) carries a stack trace that is not a
# bug: a "Call Trace:" within 4 lines after "invoked oom-killer:" does not count.
m=$(awk -v pat="$pat" '
	!/^\[ *[0-9]+\.[0-9]+\] / { next }
	/invoked oom-killer:/ { oom = NR }
	/Call Trace:/ && oom && NR - oom <= 4 { next }
	$0 ~ pat { print NR ":" $0; exit }' "$1")
if [ -n "$m" ]; then
	echo "check-splat.sh: kernel splat in $1 at line $m" >&2
	exit 1
fi
