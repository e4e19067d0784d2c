#!/bin/sh
# demo.sh (runs in the guest): the seed-process pattern. A launcher turns on per-process
# KSM and execs a shell that starts 4 workers with identical memory; show what KSM merged.
set -eu
ksm=/sys/kernel/mm/ksm
launch=${KSM_LAUNCH:-build/ksm-launch}
[ -d $ksm ] || { echo "demo.sh: kernel lacks $ksm (CONFIG_KSM=y needed)"; exit 1; }
[ -e $ksm/general_profit ] || { echo "demo.sh: kernel lacks $ksm/general_profit: is the series applied (make run builds build/src from patches/)?"; exit 1; }
echo 10000 > $ksm/pages_to_scan; echo 10 > $ksm/sleep_millisecs; echo 1 > $ksm/run
pids=/tmp/demo.pids; : > $pids
worker='import time; b = b"\x5a" * (32 << 20); time.sleep(600)'
"$launch" sh -c 'for i in 1 2 3 4; do python3 -c "$1" & echo $! >> "$2"; done; wait' sh "$worker" $pids &
echo "demo.sh: 4 workers x 32 MiB of identical bytes, launched with PR_SET_MEMORY_MERGE; waiting for ksmd"
i=0; last=-1
while [ $i -lt 120 ]; do   # until pages_sharing stops growing (or 120 s)
	sleep 1; i=$((i + 1)); now=$(cat $ksm/pages_sharing)
	[ "$now" -gt 0 ] && [ "$now" = "$last" ] && break
	last=$now
done
for p in $(cat $pids); do
	echo "--- /proc/$p/ksm_stat"; cat /proc/$p/ksm_stat
done
for f in pages_shared pages_sharing general_profit; do echo "$ksm/$f: $(cat $ksm/$f)"; done
kill $(cat $pids) 2>/dev/null || true
[ "$(cat $ksm/pages_sharing)" -gt 0 ] || { echo "demo.sh: FAIL: nothing was merged"; exit 1; }
echo "demo.sh: OK: pages were merged"
