#!/bin/sh
# system-image.sh KERNEL_DEB OUTDIR: the Debian 12 machine of `make system`. A bookworm root
# made by debootstrap from Debian's archive (cached in build/system/base, made again only
# when the package list changes), KERNEL_DEB installed in it with apt-get install (Debian's postinst
# and initramfs hooks run), the checks (system/checks.sh and the programs in
# build/system/opt) as a systemd unit. Debian's own cloud kernel and GRUB's update-grub are
# there too, as on the machines the package is for (the checks install next to that kernel
# and remove again). OUTDIR gets disk.img (root, ext4), swap.img,
# vmlinuz and initrd.img (the installed /boot files) and kernel.release.
set -eu
[ $# = 2 ] || { echo "usage: system-image.sh KERNEL_DEB OUTDIR" >&2; exit 2; }
deb=$1 out=$2
[ -f "$deb" ] || { echo "system-image.sh: no package $deb: run 'make deb' first" >&2; exit 1; }
pkgs="systemd-sysv udev dbus apparmor initramfs-tools zstd kmod procps util-linux python3 criu
 iproute2 linux-base libnuma1 prometheus-node-exporter curl linux-image-cloud-amd64 grub2-common"
base=build/system/base
key=$(echo "bookworm $pkgs" | sha256sum | cut -c1-16)
if [ "$(cat $base.key 2>/dev/null)" != "$key" ]; then
	echo "system-image.sh: debootstrap bookworm into $base (about 2 min)"
	rm -rf $base $base.key; mkdir -p build/system
	debootstrap --variant=minbase --include="$(echo $pkgs | tr ' ' ,)" bookworm $base \
		"${DEBIAN_MIRROR:-http://deb.debian.org/debian}" > build/system/debootstrap.log 2>&1 ||
		{ tail -n 5 build/system/debootstrap.log >&2; echo "system-image.sh: debootstrap failed: see build/system/debootstrap.log" >&2; exit 1; }
	rm -rf $base/var/cache/apt/archives/*.deb
	echo "$key" > $base.key
fi
mkdir -p "$out"; root=$out/root
rm -rf "$root"; cp -a $base "$root"

# The machine: its name, root and swap on virtio disks, no login on the serial console (the
# checks own it), the checks as the boot target.
echo ksm-system > "$root/etc/hostname"
printf '/dev/vda / ext4 defaults 0 1\n/dev/vdb none swap sw 0 0\n' > "$root/etc/fstab"
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
mkdir -p "$root/opt/ksm"
cp system/checks.sh "$root/opt/ksm/"
[ ! -d build/system/opt ] || cp -a build/system/opt/. "$root/opt/ksm/"
cat > "$root/etc/systemd/system/ksm-checks.service" <<'EOF'
[Unit]
Description=Checks of the per-process KSM series (TAP on the second serial port)
After=multi-user.target

[Service]
# exec, not oneshot: the start job ends when the checks start, so that the boot can finish
# (systemctl is-system-running --wait) while they run
Type=exec
ExecStart=/bin/sh /opt/ksm/checks.sh /dev/ttyS1
ExecStopPost=/bin/systemctl poweroff --no-block
EOF
cat > "$root/etc/systemd/system/ksm-checks.target" <<'EOF'
[Unit]
Description=The Debian system and the checks of the per-process KSM series
Requires=multi-user.target ksm-checks.service
After=multi-user.target
AllowIsolate=yes
EOF

# ksmctl's metrics for node_exporter's textfile collector, as man/ksmctl.8 sets them up
cat > "$root/etc/systemd/system/ksm-metrics.service" <<'EOF'
[Unit]
Description=KSM metrics for node_exporter
[Service]
Type=oneshot
ExecStart=/opt/ksm/ksmctl status --prometheus -o /var/lib/prometheus/node-exporter/ksm.prom
EOF
cat > "$root/etc/systemd/system/ksm-metrics.timer" <<'EOF'
[Unit]
Description=KSM metrics for node_exporter, every 30 s
[Timer]
OnBootSec=30s
OnUnitActiveSec=30s
[Install]
WantedBy=timers.target
EOF
mkdir -p "$root/etc/systemd/system/timers.target.wants"
ln -sf ../ksm-metrics.timer "$root/etc/systemd/system/timers.target.wants/ksm-metrics.timer"

# The kernel, as an administrator installs it: apt inside the system, hooks and all.
cp "$deb" "$root/tmp/"
umnt() { for m in dev/pts dev sys proc; do ! mountpoint -q "$root/$m" || umount "$root/$m"; done; }
trap umnt EXIT INT TERM
mount -t proc proc "$root/proc"; mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"; mount --bind /dev/pts "$root/dev/pts"
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y --no-install-recommends \
	"/tmp/${deb##*/}" > "$out/apt.log" 2>&1 ||
	{ cat "$out/apt.log" >&2; echo "system-image.sh: apt-get install ./${deb##*/} failed in the image" >&2; exit 1; }
umnt; trap - EXIT INT TERM
rm -f "$root/tmp/${deb##*/}"
rel=$(dpkg-deb -f "$deb" Package | sed 's/^linux-image-//')
[ -f "$root/boot/vmlinuz-$rel" ] && [ -f "$root/boot/initrd.img-$rel" ] ||
	{ cat "$out/apt.log" >&2; echo "system-image.sh: no /boot/vmlinuz-$rel or initrd.img-$rel after apt-get install" >&2; exit 1; }
cp "$root/boot/vmlinuz-$rel" "$out/vmlinuz"; cp "$root/boot/initrd.img-$rel" "$out/initrd.img"
echo "$rel" > "$out/kernel.release"

rm -f "$out/disk.img" "$out/swap.img"
mkfs.ext4 -q -L root -d "$root" "$out/disk.img" 3G
truncate -s 1G "$out/swap.img"; mkswap -q "$out/swap.img"
echo "system-image.sh: $out/disk.img: Debian 12 with linux-image-$rel ($(du -sm "$root" | cut -f1) MiB used)"
