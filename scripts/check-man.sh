#!/bin/sh
# check-man.sh [PAGE...]: every man page (default man/*) must format with no warning
# from groff -ww and man --warnings. Run from a man tree so .so links resolve.
set -eu
[ $# -gt 0 ] || set -- man/*
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for p in "$@"; do
	sec=${p##*.}; mkdir -p "$tmp/man$sec"; cp "$p" "$tmp/man$sec/"
done
bad=0
for p in "$@"; do
	page=man${p##*.}/${p##*/}
	out=$(cd "$tmp" && { groff -ww -man -z "$page" 2>&1; MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null; })
	if [ -n "$out" ]; then
		echo "check-man.sh: $p:"; echo "$out"; bad=1
	else
		echo "check-man.sh: $p: clean"
	fi
done
exit $bad
