#!/bin/sh
# vm.sh CMD [FILE...]: boot $KERNEL under QEMU with the host root shared read-only over 9p,
# run CMD in the guest (cwd = this repo), exit with CMD's status; the console log is kept.
set -eu
[ $# -ge 1 ] || { echo "usage: vm.sh CMD [FILE...]" >&2; exit 2; }
cmd=$1; shift
kernel=${KERNEL:-build/out/test/arch/x86/boot/bzImage}
[ -f "$kernel" ] || { echo "vm.sh: no kernel $kernel: run 'make kernel CONFIG=test' (or set KERNEL=)" >&2; exit 1; }
for f in "$@"; do [ -e "$f" ] || { echo "vm.sh: guest needs $f, which does not exist" >&2; exit 1; }; done
mkdir -p build/vm build/logs
repo=$PWD; cmdfile=$repo/build/vm/cmd.$$.sh
log=${VM_LOG:-build/logs/vm-$(date +%Y%m%d-%H%M%S)-$$.log}
printf '%s\n' "$cmd" > "$cmdfile"
accel=${VM_ACCEL:-tcg}
# TCG runs a debug kernel 10-50x slower than hardware, slower still on a busy host: scale
# the soft lockup (2 x watchdog_thresh) and RCU stall detectors to it, or they fire at boot.
# pci=noacpi: PCI interrupts routed by the PIIX router, not by ACPI _PRT methods, which the
# KASAN+kmemleak kernel ran for 30-40 s each until ACPICA's loop timeout left the virtio
# devices without an interrupt (and the 9p root mount waiting forever).
# VM_PCI_ACPI=1 keeps ACPI PCI routing: 6.12 with pci=noacpi cannot claim the BARs inside
# the ACPI host bridge window, and without its virtio devices has no root.
tcg_slack="watchdog_thresh=60 rcupdate.rcu_cpu_stall_timeout=120"
[ "${VM_PCI_ACPI:-}" ] || tcg_slack="$tcg_slack pci=noacpi"
[ "$accel" = auto ] && accel=$(sh scripts/kvm-probe.sh "$kernel")
topo=$(sh scripts/qemu-topology.sh)   # VM_MEM, VM_NODES
echo "vm.sh: booting $kernel (accel $accel, timeout ${VM_TIMEOUT:-600}s), console log: $log"
start=$(date +%s); rc=0
timeout -k 10 "${VM_TIMEOUT:-600}" qemu-system-x86_64 -accel "$accel" -cpu ${VM_CPU:-max} $topo \
	-display none -monitor none -serial "file:$log" -no-reboot </dev/null \
	-kernel "$kernel" -device virtio-rng-pci \
	-fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=root,mount_tag=root ${VM_QEMU_OPTS:-} \
	-append "console=ttyS0 panic=-1 printk.time=1 root=root rootfstype=9p rootflags=trans=virtio,version=9p2000.L,msize=262144 ro init=$repo/scripts/guest-init.sh harness_dir=$repo harness_cmd=$cmdfile $tcg_slack ${VM_APPEND:-}" \
	|| rc=$?
rm -f "$cmdfile"
[ "$rc" = 124 ] && echo "vm.sh: guest timed out after ${VM_TIMEOUT:-600}s (VM_TIMEOUT= to change); see $log" >&2
[ "${VM_QUIET:-}" ] || sed -n '/^VM-CMD-START/,/^VM-EXIT-STATUS/p' "$log" | sed '1d'
status=$(sed -n 's/^VM-EXIT-STATUS: \([0-9]*\).*/\1/p' "$log" | tail -n 1)
echo "vm.sh: guest ran $(( $(date +%s) - start ))s; log: $log"
splat=0; sh scripts/check-splat.sh "$log" || splat=1
[ -n "$status" ] || { echo "vm.sh: guest never reported its exit status (crash/timeout?); see $log" >&2; exit 1; }
[ $splat = 0 ] || [ "$status" != 0 ] || status=1
exit "$status"
