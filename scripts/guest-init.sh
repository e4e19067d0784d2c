#!/bin/sh
# guest-init.sh: PID 1 of the guest (root = host root over 9p, read-only).
# Mounts the basics, runs the command file $harness_cmd in $harness_dir with sh -c,
# prints "VM-EXIT-STATUS: <rc>" and reboots (QEMU runs with -no-reboot, so it exits).
# No `set -e` here on purpose: PID 1 must never exit.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb LANG=C.UTF-8
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm /dev/pts 2>/dev/null
# The repo may sit below one of the tmpfs mounts (a CI clone in /tmp, say): bind it
# aside first and move it back to its own path on top of the tmpfs afterwards.
mkdir -p /dev/.repo && mount --bind "${harness_dir:-/}" /dev/.repo
for d in /tmp /run /var/tmp /root /dev/shm; do mount -t tmpfs -o mode=1777 tmpfs "$d"; done
if [ ! -d "${harness_dir:-/}/scripts" ]; then
	mkdir -p "$harness_dir" && mount --move /dev/.repo "$harness_dir"
fi
chmod 700 /root
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# kmemleak (kmemleak=on): no background scans slowing the emulated guest at random moments;
# tests scan when they want a verdict (scripts/kmemleak-check.sh).
echo scan=off 2>/dev/null > /sys/kernel/debug/kmemleak
echo "VM-CMD-START"
cd "${harness_dir:-/}" && sh -c "$(cat "${harness_cmd:-/dev/null}")"
echo "VM-EXIT-STATUS: $?"
sync
busybox reboot -f || echo b > /proc/sysrq-trigger
sleep 10
