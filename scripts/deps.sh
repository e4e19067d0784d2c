#!/bin/sh
# deps.sh: install the Debian packages the harness needs (apt-get when root).
set -eu
pkgs="linux-source-6.1 linux-source-6.12 linux-config-6.1 git make gcc bc bison flex libelf-dev libssl-dev cpio xz-utils
 ccache qemu-system-x86 gcc-s390x-linux-gnu busybox-static kmod rsync libcap-dev
 libnuma-dev python3 python3-ply python3-git perl groff-base man-db
 python3-matplotlib python3-sphinx python3-sphinx-rtd-theme"
missing=
for p in $pkgs; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages:$missing" >&2
	echo "deps.sh: run as root: apt-get update && apt-get install -y$missing" >&2
	exit 1
fi
echo "deps.sh: installing:$missing"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
