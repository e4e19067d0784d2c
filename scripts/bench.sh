#!/bin/sh
# bench.sh (make bench): build the base kernel (no series), the patched kernel and the
# peer (Debian's linux-source-6.12) from the same config fragments, and the series without
# its merge-domain patches (what they cost with merge_scope=global), run bench/guest.py on
# the four under QEMU -icount (virtual time), then write bench/results.md and
# bench/results.png with bench/report.py.
# BENCH_REPS (3) repetitions of each benchmark; BENCH_ICOUNT (shift=0,sleep=off).
set -eu
reps=${BENCH_REPS:-3}
icount=${BENCH_ICOUNT:-shift=0,sleep=off}
frags="config/base.config config/guest.config config/ksm.config config/bench.config"
out=build/bench; mkdir -p $out; : > $out/timing
start=$(date +%s); t=$start
lap() { now=$(date +%s); echo "$1 $((now - t))" >> $out/timing; t=$now; }

sh scripts/bench-src.sh; lap "trees: base + patches/, pristine base, the series without merge domains"
sh scripts/build-kernel.sh $out/src $out/out/run $frags; lap "build the patched kernel"
sh scripts/build-kernel.sh $out/base-src $out/out/base-run $frags; lap "build the base kernel"
sh scripts/build-kernel.sh $out/nodom-src $out/out/nodom-run $frags; lap "build the kernel without merge domains"
sh scripts/peer-src.sh; lap "tree: linux-source-6.12"
sh scripts/build-kernel.sh $out/peer-src $out/out/peer-run $frags; lap "build the 6.12 kernel"
# ksmbench links the series' helper unit, as the stress programs do
unit=$out/src/tools/testing/selftests/vm
gcc -Wall -O2 -I$unit -o $out/ksmbench bench/ksmbench.c $unit/ksm_util.c
gcc -Wall -O2 -I$out/src -I$out/src/tools/testing/selftests -o $out/ksm_tests \
	$out/src/tools/testing/selftests/vm/ksm_tests.c -lrt -lpthread -lnuma
lap "build ksmbench and ksm_tests"

# One QEMU per guest: under -icount QEMU runs a guest on one host thread, so the guests
# share the 2 cores; capacity, the longest, runs apart. Variants (smart_scan 0, advisor)
# run once each: they are compared with the kernel's defaults, which run $reps times.
boot() {
	name=$1 kernel=$out/out/$2/arch/x86/boot/bzImage; shift 2
	pci_acpi=; case $name in peer*) pci_acpi=1;; esac
	VM_MEM=2G VM_NODES=1 VM_TIMEOUT=${BENCH_TIMEOUT:-2400} VM_QUIET=1 VM_LOG=$out/$name.console VM_PCI_ACPI=$pci_acpi \
	VM_QEMU_OPTS="-icount $icount -smp 1" KERNEL=$kernel \
		sh scripts/vm.sh "python3 bench/guest.py $reps $*" > $out/$name.vm 2>&1
	echo "guest $name $(sed -n 's/^vm.sh: guest ran \([0-9]*\)s.*/\1/p' $out/$name.vm)" >> $out/timing
}
echo "bench.sh: running the benchmarks in 7 guests ($reps repetitions each; logs in $out/)"
boot base base-run & b=$!
boot patched run hot python dedup ksmd ctl python:ss0:1 python:adv:1 python:adv0:1 & p=$!
boot patched-cap run capacity capacity:ss0:1 capacity:adv:1 & c=$!
boot peer peer-run hot python dedup ksmd ctl python:adv:1 python:adv0:1 & q=$!
boot peer-cap peer-run capacity:def:1 capacity:adv:1 & r=$!
boot patched-dom run python:dom two & m=$!
boot nodom nodom-run hot python ksmd & n=$!
fail=
wait $b || fail="$fail base"
wait $p || fail="$fail patched"
wait $c || fail="$fail patched-cap"
wait $q || fail="$fail peer"
wait $r || fail="$fail peer-cap"
wait $m || fail="$fail patched-dom"
wait $n || fail="$fail nodom"
lap "benchmarks (guests in parallel)"
if [ -n "$fail" ]; then
	for g in $fail; do
		echo "bench.sh: the $g guest failed: see $out/$g.vm and $out/$g.console" >&2
		tail -n 5 $out/$g.vm >&2
	done
	exit 1
fi
echo "total $(( $(date +%s) - start ))" >> $out/timing
/usr/bin/python3 bench/report.py $out "$icount" "$reps"
echo "bench.sh: wrote bench/results.md and bench/results.png in $(( $(date +%s) - start ))s"
