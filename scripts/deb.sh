#!/bin/sh
# deb.sh [FLAVOUR]: Debian packages of the series (build/src) with Debian's configuration
# of FLAVOUR (cloud-amd64, the default, or amd64), made by the tree's own `make bindeb-pkg`
# (ccache, -j2) in build/deb/FLAVOUR: linux-image-6.1.N-ksm and linux-headers-6.1.N-ksm
# (+ -dbg and linux-libc-dev, which bindeb-pkg makes too) land in build/deb/.
# DEBUG_INFO=0 in the environment: the same without debug info, BTF and the -dbg package.
set -eu
flavour=${1:-cloud-amd64}
src=build/src out=build/deb/$flavour
[ "${DEBUG_INFO:-1}" = 1 ] || out=$out-nodebuginfo
sh scripts/src.sh
sh scripts/debian-config.sh $src $out $flavour
export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ksm-series-ccache}" CCACHE_BASEDIR="$PWD"
# With debug info ccache hashes the compiler's directory (it lands in the objects) unless
# a prefix map removes it: mapped away, the -dbg package names paths relative to the
# clone (build/deb/FLAVOUR, ../../src/mm/ksm.c) and another clone hits the same cache.
export KCFLAGS="-fdebug-prefix-map=$PWD/=" KAFLAGS="-fdebug-prefix-map=$PWD/="
# A whole Debian kernel with debug info is about 3 GiB of cache, next to the test kernels'
[ "$(ccache -k max_size 2>/dev/null)" = 12.0G ] || ccache -M 12G >/dev/null
# Debian's own kernels build with gcc-12 and the archive date; the package version names
# the base and the series: 6.1.N-1+ksm<patches>.g<commit of patches/>[.dirty].
kver=$(make -s -C $src kernelversion)
n=$(grep -v cover-letter patches/series | grep -c .)
rev=$(git log -1 --format=%h -- patches 2>/dev/null || echo none)
[ -z "$(git status --porcelain patches 2>/dev/null)" ] || rev=$rev.dirty
pkgver=$kver-1+ksm$n.g$rev
[ "${DEBUG_INFO:-1}" = 1 ] || pkgver=$pkgver.nodebuginfo
export KDEB_PKGVERSION=$pkgver KDEB_CHANGELOG_DIST=bookworm
export DEBFULLNAME="$(git config user.name || echo harness)" DEBEMAIL="$(git config user.email || echo harness@localhost)"
export KBUILD_BUILD_USER=harness KBUILD_BUILD_HOST=harness
# LOCALVERSION set (empty): setlocalversion adds no "+" for a git tree (build/src is one),
# so the release is 6.1.N-ksm, as from Debian's tarball.
export LOCALVERSION=
if [ "${DEBUG_INFO:-1}" = 1 ]; then took="122 min on 2 cores, a warm one 38 min"; else took="48 min on 2 cores"; fi
echo "deb.sh: building $pkgver ($flavour) in $out; a cold one (empty compiler cache, ~6300 objects) took $took"
start=$(date +%s)
rm -f build/deb/*"_${pkgver}_"*.deb
touch $out/.harness-start
make -s -C $src O="$(cd $out && pwd)" CC="ccache gcc-12" -j2 bindeb-pkg > $out/bindeb-pkg.log 2>&1 & pid=$!
# the object count of the last complete build, for the progress lines
of=; [ ! -s $out.objects ] || of=" of $(cat $out.objects)"
i=0
while kill -0 $pid 2>/dev/null; do
	sleep 1; i=$((i + 1))
	[ $((i % 30)) = 0 ] || continue
	echo "deb.sh: building ${out#build/deb/}: $(( $(date +%s) - start ))s, $(find $out -name '*.o' -newer $out/.harness-start | wc -l)$of objects built"
done
rc=0; wait $pid || rc=$?
[ $rc = 0 ] || { tail -n 20 $out/bindeb-pkg.log >&2; echo "deb.sh: bindeb-pkg failed (exit $rc): see $out/bindeb-pkg.log" >&2; exit $rc; }
find $out -name '*.o' -newer $out/.harness-start | wc -l > $out.objects
echo "deb.sh: built in $(( $(date +%s) - start ))s ($(cat $out.objects) objects):"
ls -s --block-size=M build/deb/*"_${pkgver}_"*.deb
echo "deb.sh: install with: apt install ./$(ls build/deb/linux-image-*-ksm_"${pkgver}"_amd64.deb)"
