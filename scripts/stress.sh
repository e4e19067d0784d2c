#!/bin/sh
# stress.sh [SECONDS [ITERATIONS]]: run the stress suite (stress/*.c, scripts/stress-guest.sh)
# for about SECONDS (default 600) in one boot of the debug test kernel with kmemleak on,
# then write the report (build/logs/stress-report.md, README's stress table).
set -eu
secs=${1:-600} iter=${2:-}
case $secs$iter in *[!0-9]*|'') echo "stress.sh: SECONDS and ITERATIONS must be numbers" >&2; exit 2;; esac
sh scripts/src.sh
make -s --no-print-directory kernel CONFIG=test
make -s --no-print-directory stress-progs
log=build/logs/stress.log con=build/logs/stress-console.log
start=$(date +%s) rc=0
KERNEL=build/out/test/arch/x86/boot/bzImage VM_LOG=$con VM_TIMEOUT=$((secs + 1500)) \
VM_APPEND=kmemleak=on \
	sh scripts/vm.sh "sh scripts/stress-guest.sh $secs $iter" > $log 2>&1 || rc=$?
cat $log
sh scripts/stress-report.sh "make stress DURATION=$secs${iter:+ ITERATIONS=$iter}" $log $con \
	$(( $(date +%s) - start )) > build/logs/stress-report.md
sh scripts/readme-block.sh stress build/logs/stress-report.md
cat build/logs/stress-report.md
[ $rc = 0 ] || { echo "stress.sh: FAILED (guest exit $rc); see $log and $con" >&2; exit 1; }
echo "stress.sh: OK"
