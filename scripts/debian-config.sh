#!/bin/sh
# debian-config.sh SRC OUTDIR [FLAVOUR]: OUTDIR/.config = Debian's own configuration of
# FLAVOUR (cloud-amd64, the default, or amd64; from linux-config-6.1) + olddefconfig on SRC,
# changed only where a build outside Debian's packaging must change it, and with
# DEBUG_INFO=0 in the environment without debug info (so without BTF). Prints the whole
# diff against Debian's file and fails on any other difference.
set -eu
[ $# -ge 2 ] || { echo "usage: debian-config.sh SRC OUTDIR [cloud-amd64|amd64]" >&2; exit 2; }
src=$1 out=$2 flavour=${3:-cloud-amd64}
deb=/usr/src/linux-config-6.1/config.amd64_none_$flavour.xz
[ -f "$deb" ] || { echo "debian-config.sh: no $deb: install linux-config-6.1 (make deps), FLAVOUR is cloud-amd64 or amd64" >&2; exit 1; }
[ -f "$src/Makefile" ] || { echo "debian-config.sh: no kernel tree at $src: run 'make src'" >&2; exit 1; }
command -v pahole >/dev/null || { echo "debian-config.sh: no pahole (Debian builds BTF): run 'make deps'" >&2; exit 1; }
mkdir -p "$out"
xz -dc "$deb" > "$out/debian.config"
cp "$out/debian.config" "$out/.config"
# The one change of ours: the release gets "-ksm", so that the package installs next to
# Debian's kernels (6.1.0-N-FLAVOUR) and /lib/modules/6.1.N-ksm is its own.
"$src/scripts/config" --file "$out/.config" --set-str LOCALVERSION -ksm
# DEBUG_INFO=0: an administrator's kernel without the -dbg package (half the build time);
# BTF is made from the debug info, so it goes too, and what depends on it.
case ${DEBUG_INFO:-1} in
1) nodebug= ;;
0) "$src/scripts/config" --file "$out/.config" --disable DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT \
	--enable DEBUG_INFO_NONE
   nodebug='-DEBUG_INFO y
-DEBUG_INFO_BTF y
-DEBUG_INFO_BTF_MODULES y
-DEBUG_INFO_COMPRESSED n
-DEBUG_INFO_REDUCED n
-DEBUG_INFO_SPLIT n
-GDB_SCRIPTS n
-MODULE_ALLOW_BTF_MISMATCH y
-PAHOLE_HAS_LANG_EXCLUDE y
-PAHOLE_HAS_SPLIT_BTF y
DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT y -> n
DEBUG_INFO_NONE n -> y' ;;
*) echo "debian-config.sh: DEBUG_INFO is 1 (Debian's, the default) or 0, not '$DEBUG_INFO'" >&2; exit 2 ;;
esac
# CC=gcc-12: Debian's compiler by the name Debian's config records (CC_VERSION_TEXT).
make -s -C "$src" O="$(cd "$out" && pwd)" CC=gcc-12 olddefconfig
# What Debian's packaging sets outside its config files, and a custom build gets by default:
# the build salt (Debian: its ABI name), module signing with a key made at build time
# (Debian signs with its own key afterwards) and the trusted keys (Debian: its UEFI certs).
allowed='LOCALVERSION "" -> "-ksm"
+BUILD_SALT ""
+MODULE_SIG_ALL y
+MODULE_SIG_KEY "certs/signing_key.pem"
+SYSTEM_TRUSTED_KEYS ""'
[ -z "$nodebug" ] || allowed="$allowed
$nodebug"
"$src/scripts/diffconfig" "$out/debian.config" "$out/.config" | sed 's/^ //' > "$out/debian-config.diff"
echo "debian-config.sh: .config = Debian's $flavour config of $(sed -n 's/^# Linux.* \([0-9.]*\) Kernel Configuration/\1/p' "$out/debian.config") + these changes:"
sed 's/^/  /' "$out/debian-config.diff"
other=$(printf '%s\n' "$allowed" | grep -vxF -f - "$out/debian-config.diff" || true)
missing=$(grep -vxF -f "$out/debian-config.diff" <<EOF || true
$allowed
EOF
)
[ -z "$other$missing" ] || {
	[ -z "$other" ] || printf 'debian-config.sh: differs from Debian where it must not:\n%s\n' "$other" >&2
	[ -z "$missing" ] || printf 'debian-config.sh: expected change not made:\n%s\n' "$missing" >&2
	exit 1
}
echo "debian-config.sh: every other of Debian's options kept: $(grep -c "=y$" "$out/.config") built in, $(grep -c "=m$" "$out/.config") modules"
