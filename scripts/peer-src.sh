#!/bin/sh
# peer-src.sh: unpack Debian's linux-source-6.12 into build/bench/peer-src, the third
# kernel of `make bench`: mainline's own per-process KSM, smart scan and advisor, as a
# user would get them by upgrading. Unpacked once per version of the package.
set -eu
tarball=/usr/src/linux-source-6.12.tar.xz
d=build/bench; top=$d/peer-src
[ -f $tarball ] || { echo "peer-src.sh: no $tarball: run 'make deps'" >&2; exit 1; }
stamp=$(stat -c '%s %Y' $tarball)
if [ "$(cat $d/peer-src.stamp 2>/dev/null)" = "$stamp" ] && [ -f $top/Makefile ]; then
	echo "peer-src.sh: $top is up to date ($(make -s -C $top kernelversion))"
	exit 0
fi
rm -rf $top $d/peer-src.stamp $d/linux-source-6.12; mkdir -p $d
tar -xJf $tarball -C $d
mv $d/linux-source-6.12 $top
echo "$stamp" > $d/peer-src.stamp
echo "peer-src.sh: unpacked $(basename $tarball) ($(dpkg-query -W -f '${Version}' linux-source-6.12)) into $top ($(make -s -C $top kernelversion))"
