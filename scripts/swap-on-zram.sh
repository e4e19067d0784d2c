#!/bin/sh
# swap-on-zram.sh CMD...: run CMD (in the guest) with 256 MiB of swap on /dev/zram0, as a
# Debian machine has swap; the selftests that swap KSM pages out skip without any.
set -eu
sys=/sys/block/zram0
if [ ! -w $sys/disksize ] || grep -q '^/dev/zram0 ' /proc/swaps; then
	echo "swap-on-zram.sh: /dev/zram0 missing (CONFIG_ZRAM) or in use: running without it" >&2
	exec "$@"
fi
echo 256M > $sys/disksize
mkswap /dev/zram0 > /dev/null
swapon /dev/zram0
rc=0; "$@" || rc=$?
swapoff /dev/zram0
echo 1 > $sys/reset
exit $rc
