#!/bin/sh
# demo.sh (runs in the guest): the seed-process pattern of an orchestrator.
# "ksmctl run" turns on per-process KSM and execs a shell that starts 4 python3 workers
# with identical memory; "ksmctl watch" follows ksmd, "ksmctl status" shows the result.
set -eu
ksm=/sys/kernel/mm/ksm
ksmctl=${KSMCTL:-build/ksmctl}
[ -d $ksm ] || { echo "demo.sh: kernel lacks $ksm (CONFIG_KSM=y needed)"; exit 1; }
[ -e $ksm/general_profit ] || { echo "demo.sh: kernel lacks $ksm/general_profit: is the series applied (make run builds build/src from patches/)?"; exit 1; }
echo 10000 > $ksm/pages_to_scan; echo 10 > $ksm/sleep_millisecs; echo 1 > $ksm/run
pids=/tmp/demo.pids; : > $pids
worker='import time; b = b"\x5a" * (32 << 20); time.sleep(600)'
echo "demo.sh: \$ ksmctl run sh -c '4 x python3: 32 MiB of identical bytes each'"
"$ksmctl" run sh -c 'for i in 1 2 3 4; do python3 -c "$1" & echo $! >> "$2"; done; wait' sh "$worker" $pids &
echo "demo.sh: \$ ksmctl watch -n ${DEMO_WATCH:-8} 2"
"$ksmctl" watch -n "${DEMO_WATCH:-8}" 2
echo "demo.sh: \$ ksmctl status"
"$ksmctl" status
for p in $(cat $pids); do
	echo "--- /proc/$p/ksm_stat"; cat /proc/$p/ksm_stat
done
sharing=$(cat $ksm/pages_sharing) profit=$(cat $ksm/general_profit)
kill $(cat $pids) 2>/dev/null || true
[ "$sharing" -gt 0 ] || { echo "demo.sh: FAIL: nothing was merged"; exit 1; }
echo "demo.sh: OK: $sharing pages merged, general_profit $profit bytes"
