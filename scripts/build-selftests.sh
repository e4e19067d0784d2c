#!/bin/sh
# build-selftests.sh SRC OUT: the KSM selftests of the tree SRC
# (tools/testing/selftests/vm/ksm_*.c), each built into OUT against SRC's own uapi headers
# (headers_install into OUT/hdr), with the helper unit ksm_util.c where it includes ksm_util.h:
# the programs `make check` runs in its guest and `make system` in the Debian machine.
set -eu
[ $# = 2 ] || { echo "usage: build-selftests.sh SRC OUT" >&2; exit 2; }
src=$1 out=$2
mkdir -p "$out"
make -s -C "$src" O="$(cd "$out" && pwd)/hdr" headers_install
vm=$src/tools/testing/selftests/vm
for f in "$vm"/ksm_*.c; do
	[ "$f" != "$vm/ksm_util.c" ] || continue
	unit=; ! grep -q '"ksm_util.h"' "$f" || unit=$vm/ksm_util.c
	gcc -Wall -O2 -I"$src" -isystem "$out/hdr/usr/include" -I"$src/tools/testing/selftests" \
		-o "$out/$(basename "$f" .c)" "$f" $unit -lrt -lpthread -lnuma
done
