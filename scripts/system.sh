#!/bin/sh
# system.sh [KERNEL_DEB]: make system. The Debian 12 machine (system-image.sh) with the
# linux-image package of `make deb` (or KERNEL_DEB), booted under QEMU from its installed
# /boot files, systemd as PID 1; ksm-checks.service writes TAP to the second serial port.
# Passes when every check passed and the console has no kernel splat.
set -eu
# the package make deb made last (the newest; an older series' may still be there)
deb=${1:-$(ls -t build/deb/linux-image-*-ksm_*_amd64.deb 2>/dev/null | grep -v -- -dbg_ | head -n 1)}
[ -n "$deb" ] || { echo "system.sh: no build/deb/linux-image-*-ksm_*.deb: run 'make deb' first" >&2; exit 1; }
name=$(dpkg-deb -f "$deb" Package)
out=build/system/${name#linux-image-}
start=$(date +%s)
# The programs the checks run, built here (the machine has Debian 12's libc, as this one),
# the series' from build/src (also for a KERNEL_DEB of another kernel).
# system/*.c link the series' helper unit, tools/testing/selftests/vm/ksm_util.[ch].
sh scripts/src.sh
unit=build/src/tools/testing/selftests/vm
mkdir -p build/system/opt
for p in criu-ksm ksm-worker; do
	gcc -O2 -Wall -Wextra -Werror -I$unit -o build/system/opt/$p system/$p.c $unit/ksm_util.c
done
make -s --no-print-directory build/ksmctl && cp build/ksmctl build/system/opt/
# The series' selftests against its uapi headers, and upstream 6.12's (upstream-selftests.sh)
sh scripts/build-selftests.sh build/src build/system/selftests
cp build/system/selftests/ksm_* build/system/opt/
sh scripts/upstream-selftests.sh
mkdir -p build/system/opt/upstream
cp build/upstream/ksm_functional_tests build/upstream/ksm_tests build/system/opt/upstream/
# The image is made again when the package, the checks or the image script changed.
key=$( { cat "$deb" scripts/system-image.sh system/* $unit/ksm_util.[ch]; find build/system/opt -type f | sort | xargs cat; } |
	sha256sum | cut -c1-16)
if [ "$(cat $out/image.key 2>/dev/null)" != "$key" ] || [ ! -f $out/disk.img ]; then
	sh scripts/system-image.sh "$deb" $out
	echo "$key" > $out/image.key
else
	echo "system.sh: reusing $out/disk.img ($name, checks unchanged)"
fi
made=$(date +%s)
# Each boot writes to an overlay: the image stays as it was made.
rm -f $out/run.qcow2 $out/console.log $out/tap.log
qemu-img create -q -f qcow2 -b disk.img -F raw $out/run.qcow2
echo "system.sh: booting $name (TCG, timeout ${VM_TIMEOUT:-1800}s); console: $out/console.log, TAP: $out/tap.log"
rc=0
timeout -k 10 "${VM_TIMEOUT:-1800}" qemu-system-x86_64 -accel tcg -cpu max $(sh scripts/qemu-topology.sh) \
	-display none -monitor none -no-reboot </dev/null \
	-serial file:$out/console.log -serial file:$out/tap.log \
	-kernel $out/vmlinuz -initrd $out/initrd.img -device virtio-rng-pci \
	-drive file=$out/run.qcow2,if=virtio,format=qcow2 -drive file=$out/swap.img,if=virtio,format=raw \
	-append "root=/dev/vda rw console=ttyS0 systemd.unit=ksm-checks.target panic=-1 watchdog_thresh=60 rcupdate.rcu_cpu_stall_timeout=120" \
	|| rc=$?
[ $rc != 124 ] || echo "system.sh: the machine timed out after ${VM_TIMEOUT:-1800}s; see $out/console.log" >&2
cat $out/tap.log
echo "system.sh: image $((made - start))s, boot and checks $(( $(date +%s) - made ))s"
splat=0; sh scripts/check-splat.sh $out/console.log || splat=1
grep -q '^1\.\.[0-9]' $out/tap.log || { echo "system.sh: the checks never finished; see $out/console.log" >&2; exit 1; }
! grep -q '^not ok' $out/tap.log && [ $splat = 0 ] || { echo "system.sh: FAILED" >&2; exit 1; }
echo "system.sh: OK"
