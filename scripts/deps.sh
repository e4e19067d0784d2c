#!/bin/sh
# deps.sh [run|check|bench|deb|system|all]: install the Debian packages that a purpose needs (apt-get
# --no-install-recommends, as root), or print the apt-get line that does (not root).
#   run    make run/tree/kernel/vm: unpack the base, build a kernel, boot it, the demo
#   check  make check/stress: + 6.12 (upstream selftests), s390 cross compiler, checkpatch's
#          python, man pages, Sphinx, libraries of the selftests, sparse, coccinelle (and
#          ocaml: two of its semantic patches have OCaml scripts), pahole for Debian's config,
#          promtool (prometheus) for ksmctl's metrics
#   bench  make bench: + 6.12 (the peer kernel), matplotlib for the plot
#   deb    make deb: + Debian's configs, gcc-12 by its name, pahole (BTF), dpkg-dev,
#          build-essential and fakeroot (what dpkg-buildpackage of bindeb-pkg checks for)
#   system make system: + debootstrap, qemu-img (the overlay each boot writes to), mkfs.ext4,
#          6.12 and libnuma for the selftests it runs
set -eu
run="linux-source-6.1 git make gcc libc6-dev bc bison flex libelf-dev libssl-dev xz-utils
 ccache qemu-system-x86 busybox-static python3"
check="linux-source-6.12 linux-config-6.1 gcc-12 dwarves gcc-s390x-linux-gnu kmod rsync cpio libcap-dev
 libnuma-dev python3-ply python3-git perl groff-base man-db python3-sphinx python3-sphinx-rtd-theme
 sparse coccinelle ocaml prometheus"
bench="linux-source-6.12 rsync libnuma-dev python3-matplotlib"
deb="linux-config-6.1 gcc-12 dwarves dpkg-dev build-essential fakeroot kmod cpio rsync"
system="debootstrap qemu-utils e2fsprogs linux-source-6.12 libnuma-dev"
case ${1:-all} in
run) pkgs=$run;;
check) pkgs="$run $check";;
bench) pkgs="$run $bench";;
deb) pkgs="$run $deb";;
system) pkgs="$run $system";;
all) pkgs="$run $check $bench $deb $system";;
*) echo "usage: deps.sh [run|check|bench|deb|system|all]" >&2; exit 2;;
esac
missing=
for p in $pkgs; do
	case " $missing " in *" $p "*) continue;; esac
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
line="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages for '${1:-all}':$missing" >&2
	echo "deps.sh: run as root: apt-get update && $line" >&2
	exit 1
fi
echo "deps.sh: installing for '${1:-all}':$missing"
apt-get update -q
DEBIAN_FRONTEND=noninteractive $line -q
