#!/bin/sh
# kmemleak-check.sh (guest): scan for kernel memory leaks now; print them and exit 1 if
# kmemleak reports any, exit 4 (skip) if kmemleak is not running (boot with kmemleak=on).
set -eu
f=/sys/kernel/debug/kmemleak
if ! [ -w $f ] || ! echo scan > $f 2>/dev/null; then
	echo "kmemleak-check.sh: kmemleak is off: needs CONFIG_DEBUG_KMEMLEAK, debugfs and kmemleak=on"
	exit 4
fi
# kmemleak ignores objects younger than 5 s; a second scan confirms the first.
sleep 6
echo scan > $f
leaks=$(cat $f)
[ -z "$leaks" ] || { printf '%s\n' "$leaks"; echo "kmemleak-check.sh: kernel memory leaks (above)"; exit 1; }
echo "kmemleak-check.sh: no leaks"
