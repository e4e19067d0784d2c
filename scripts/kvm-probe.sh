#!/bin/sh
# kvm-probe.sh: print "kvm" if a KVM guest verifiably boots and runs `true` within 60 s,
# else "tcg". Cached in build/vm/accel (delete it to probe again). Used by VM_ACCEL=auto.
set -eu
cache=build/vm/accel
if [ ! -s $cache ]; then
	mkdir -p build/vm
	if [ -w /dev/kvm ] && VM_ACCEL=kvm VM_TIMEOUT=60 VM_QUIET=1 VM_LOG=build/logs/kvm-probe.log \
		sh scripts/vm.sh true >/dev/null 2>&1; then echo kvm; else echo tcg; fi > $cache
fi
cat $cache
