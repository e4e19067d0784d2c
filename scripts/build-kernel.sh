#!/bin/sh
# build-kernel.sh SRC OUTDIR FRAGMENT...: tinyconfig + fragments -> x86_64 bzImage in OUTDIR (ccache, -j2).
set -eu
[ $# -ge 3 ] || { echo "usage: build-kernel.sh SRC OUTDIR FRAGMENT..." >&2; exit 2; }
src=$1; mkdir -p "$2"; out=$(cd "$2" && pwd); shift 2
[ -f "$src/Makefile" ] || { echo "build-kernel.sh: no kernel tree at $src: run 'make tree'" >&2; exit 1; }
export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ksm-series-ccache}" CCACHE_BASEDIR="$PWD"
export KBUILD_BUILD_TIMESTAMP="2023-01-01" KBUILD_BUILD_USER=harness KBUILD_BUILD_HOST=harness
mk() { make -s -C "$src" O="$out" ARCH="${ARCH:-x86_64}" CC="ccache ${CROSS_COMPILE:-}gcc" -j2 "$@"; }
start=$(date +%s)
# Objects built from another source tree would have stale dependencies: start afresh.
[ "$(cat "$out/.harness-src" 2>/dev/null || (cd "$src" && pwd -P))" = "$(cd "$src" && pwd -P)" ] ||
	{ echo "build-kernel.sh: $out was built from another tree; cleaning it"; rm -rf "$out"; mkdir -p "$out"; }
(cd "$src" && pwd -P) > "$out/.harness-src"
echo "build-kernel.sh: $src -> $out ($*)"
# The .config follows from the fragments, the tree's Kconfig files and tinyconfig's own
# fragments: when none of them changed, keep it, so that an unchanged tree builds nothing
# (a rewritten .config makes make re-sync the config and relink: ~1 min of each bisect step).
key=$( { cat "$@"; echo "${ARCH:-x86_64}"; cd "$src" && find . \( -name 'Kconfig*' -o -path '*/configs/tiny*.config' \) \
	-not -path './.git/*' -print | LC_ALL=C sort | xargs cat; } | sha256sum)
if [ -f "$out/.config" ] && [ "$(cat "$out/.harness-config" 2>/dev/null)" = "$key" ]; then
	echo "build-kernel.sh: fragments and Kconfig unchanged: keeping $out/.config"
else
rm -f "$out/.harness-config"
mk tinyconfig >/dev/null
"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$@" >/dev/null
mk olddefconfig >/dev/null
# Every option the fragments ask for (the last request wins) must be in .config.
awk '/^CONFIG_[A-Za-z0-9_]+=/{o=$0; sub(/=.*/,"",o); want[o]=$0}
     /^# CONFIG_[A-Za-z0-9_]+ is not set/{want[$2]="unset"}
     END{for (o in want) print o, want[o]}' "$@" | while read -r opt line; do
	if [ "$line" = unset ]; then
		! grep -q "^$opt=" "$out/.config" || { echo "build-kernel.sh: $opt should be unset but .config has $(grep "^$opt=" "$out/.config")" >&2; exit 1; }
	elif ! grep -qx "$line" "$out/.config"; then
		echo "build-kernel.sh: requested $line but .config has: $(grep "$opt[= ]" "$out/.config" || echo nothing)" >&2
		echo "build-kernel.sh: fix its dependencies in config/*.config" >&2; exit 1
	fi
done
echo "$key" > "$out/.harness-config"
fi
# A committed tree (HEAD, nothing modified) whose build of this target in $out succeeded:
# nothing to do, and make would still take ~20 s to find that out.
built="$key ${BUILD_TARGET:-bzImage} $(git -C "$src" rev-parse HEAD 2>/dev/null || echo none)"
clean=$(git -C "$src" status --porcelain -uno 2>/dev/null || echo dirty)
if [ -z "$clean" ] && [ "$(cat "$out/.harness-built" 2>/dev/null)" = "$built" ]; then
	echo "build-kernel.sh: $out is up to date ($src at $(git -C "$src" rev-parse --short HEAD), same fragments)"
	exit 0
fi
rm -f "$out/.harness-built"
# A line every 15 s (make -s prints nothing for minutes): objects built so far, and how
# many the last build in $out had in all.
touch "$out/.harness-start"
mk ${BUILD_TARGET:-bzImage} & pid=$!
total=$(cat "$out/.harness-objs" 2>/dev/null || true) i=0
while kill -0 $pid 2>/dev/null; do
	sleep 1; i=$((i + 1))
	[ $((i % 15)) = 0 ] || continue
	echo "build-kernel.sh: building ${out##*/}: $(( $(date +%s) - start ))s, $(find "$out" -name '*.o' \
		-newer "$out/.harness-start" | wc -l) objects built${total:+ (of $total objects in all)}"
done
rc=0; wait $pid || rc=$?
[ $rc = 0 ] || { echo "build-kernel.sh: building $out failed (make exit $rc)" >&2; exit $rc; }
find "$out" -name '*.o' | wc -l > "$out/.harness-objs"
# Only a build of the committed tree stands for HEAD: one with local changes does not.
[ -n "$clean" ] || echo "$built" > "$out/.harness-built"
echo "build-kernel.sh: built $out in $(( $(date +%s) - start ))s ($(sed -n 's/^# Linux.* \([0-9.]*\) Kernel Configuration/\1/p' "$out/.config"))"
