#!/bin/sh
# system/checks.sh TAPDEV: runs in the Debian machine of `make system` as ksm-checks.service,
# once the system is up; writes TAP to TAPDEV (the second serial port), then the unit powers
# the machine off.
set -u
exec > "$1" 2>&1
n=0 fail=0 skipped=0
skip() { n=$((n + 1)); skipped=$((skipped + 1)); echo "ok $n - $1 # SKIP $2"; }
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $*"; }
check() { # NAME CMD...: ok when CMD succeeds; its output as TAP comments
	name=$1; shift
	if out=$("$@" 2>&1); then ok "$name"; else not_ok "$name"; fi
	[ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/# /'
}
ksm() { echo "$2" > /sys/kernel/mm/ksm/$1; }
wait_for() { # SECONDS CMD...: until CMD succeeds
	t=$1; shift
	while ! "$@" 2>/dev/null; do [ $t -gt 0 ] || return 1; sleep 1; t=$((t - 1)); done
}
echo "TAP version 13"
echo "# kernel $(uname -r), $(uname -v)"

check "systemd is PID 1" sh -c '[ "$(cat /proc/1/comm)" = systemd ]'
check "the system came up: systemctl is-system-running" sh -c \
	'state=$(systemctl is-system-running --wait); echo "$state"; systemctl --failed --no-legend; [ "$state" = running ]'
check "AppArmor is the LSM and enabled, its profiles loaded" sh -c \
	'cat /sys/kernel/security/lsm; echo; [ "$(cat /sys/module/apparmor/parameters/enabled)" = Y ] &&
	 aa-status --enabled && aa-status | head -n 3'
check "swap is on: the virtio disk of fstab" sh -c 'cat /proc/swaps; grep -q "^/dev/vdb " /proc/swaps'
check "KSM is there: /sys/kernel/mm/ksm" sh -c 'ls /sys/kernel/mm/ksm | tr "\n" " "; [ -d /sys/kernel/mm/ksm ]'

# The selftests, each as a systemd service: the series' own and upstream 6.12's.
selftest() { # NAME DIR CMD...: one result from the exit status (4: skip); failures as comments
	name=$1 dir=$2; shift 2
	out=$(systemd-run --quiet --wait --pipe --property=WorkingDirectory=$dir "$@" 2>&1); rc=$?
	case $rc in
	0) ok "$name";;
	4) skip "$name" "$(printf '%s\n' "$out" | tail -n 1)";;
	*) not_ok "$name (exit $rc)";;
	esac
	printf '%s\n' "$out" | grep -E '^(not ok|# Totals|# SKIP|Bail out)' | sed 's/^/# /'
	# a failure that is no TAP result (it did not start, it crashed): its last words
	[ $rc = 0 ] || [ $rc = 4 ] || printf '%s\n' "$out" | grep -q -E '^not ok|^Bail out' ||
		printf '%s\n' "$out" | tail -n 3 | sed 's/^/# /'
}
for t in prctl unmerge accounting keep scan domain; do
	selftest "selftest: ksm_${t}_tests" /opt/ksm /opt/ksm/ksm_${t}_tests
done
for t in 0 1; do
	selftest "selftest: ksm_tests -M -p 10 -t $t" /opt/ksm /opt/ksm/ksm_tests -M -p 10 -t $t
	selftest "selftest: ksm_tests -U -t $t" /opt/ksm /opt/ksm/ksm_tests -U -t $t
	selftest "selftest: ksm_tests -Z -p 10 -z 1 -t $t" /opt/ksm /opt/ksm/ksm_tests -Z -p 10 -z 1 -t $t
done
# (an absolute path: systemd looks a relative one up in PATH, not in WorkingDirectory;
# the directory is for the test, which execs ./ksm_functional_tests)
selftest "upstream 6.12: ksm_functional_tests" /opt/ksm/upstream /opt/ksm/upstream/ksm_functional_tests

# The orchestrator's case: two services started by systemd, the first through `ksmctl run`
# in its ExecStart (systemd 252 has no MemoryKSM=), the second without; per-cgroup profit.
has_prctl() { /opt/ksm/ksmctl run -- /bin/true 2>/dev/null; }
cgroup_field() { # CGROUP FIELD: from ksmctl status --json --cgroup; 0 when no process is in it
	/opt/ksm/ksmctl status --json --cgroup | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(next((c[sys.argv[2]] or 0 for c in d["cgroups"] if c["cgroup"] == sys.argv[1]), 0))' "$1" "$2"
}
merged_on() { [ "$(cgroup_field /system.slice/ksm-on.service merging_pages)" -ge 8000 ]; }
services() {
	ksm pages_to_scan 1000; ksm sleep_millisecs 20; ksm run 1
	cat /sys/kernel/mm/ksm/general_profit > /run/ksm-profit-before   # check() runs us in a subshell
	systemd-run --quiet --unit=ksm-on /opt/ksm/ksmctl run -- /opt/ksm/ksm-worker dup 32
	systemd-run --quiet --unit=ksm-off /opt/ksm/ksm-worker dup 32
	wait_for 120 merged_on || { /opt/ksm/ksmctl status --cgroup; return 1; }
	/opt/ksm/ksmctl status --cgroup | grep -e CGROUP -e 'ksm-o[nf]*\.service'
	on=$(cgroup_field /system.slice/ksm-on.service profit)
	off=$(cgroup_field /system.slice/ksm-off.service merging_pages)
	echo "ksm-on.service: profit $on bytes; ksm-off.service: $off merged pages"
	[ "$on" -gt 0 ] && [ "$off" = 0 ]
}
# node_exporter (Debian's, textfile collector on) serves what ksm-metrics.service (ksmctl
# status --prometheus, every 30 s from its timer; started here once more so as not to
# wait) wrote: the ksm-on unit's profit under its cgroup label, the ksm-off unit at 0 (its
# process runs with KSM off: there, not absent), no scrape error.
node_exporter() {
	systemctl is-active --quiet ksm-metrics.timer || { systemctl status ksm-metrics.timer; return 1; }
	systemctl start ksm-metrics.service || return 1
	wait_for 60 curl -sf -o /run/metrics http://localhost:9100/metrics || { echo "no node_exporter on :9100"; return 1; }
	grep -e 'ksm_cgroup_[a-z_]*{cgroup="/system.slice/ksm-o[nf]*.service"}' -e '^node_textfile_scrape_error' \
		-e '^node_textfile_mtime_seconds' /run/metrics
	# node_exporter writes large values as floats (3.3028672e+07): awk compares them
	on=$(sed -n 's|^ksm_cgroup_profit_bytes{cgroup="/system.slice/ksm-on.service"} ||p' /run/metrics)
	awk -v v="${on:-0}" 'BEGIN { exit !(v + 0 > 0) }' && grep -qx 'node_textfile_scrape_error 0' /run/metrics &&
		grep -qx 'ksm_cgroup_processes{cgroup="/system.slice/ksm-off.service"} 0' /run/metrics &&
		grep -qx 'ksm_cgroup_merging_pages{cgroup="/system.slice/ksm-off.service"} 0' /run/metrics &&
		grep -qx 'ksm_cgroup_profit_bytes{cgroup="/system.slice/ksm-off.service"} 0' /run/metrics
}
stop_services() {
	before=$(cat /run/ksm-profit-before)
	systemctl stop ksm-on ksm-off
	wait_for 30 profit_back "$before" ||
		{ echo "general_profit $(cat /sys/kernel/mm/ksm/general_profit) after the stop, $before before"; return 1; }
	echo "general_profit: $before before, $(cat /sys/kernel/mm/ksm/general_profit) after systemctl stop"
}
profit_back() { [ "$(cat /sys/kernel/mm/ksm/general_profit)" -le $(($1 + 1048576)) ]; }

# AppArmor: what an exec into a profile does to per-process KSM, which a secure exec
# (AT_SECURE) ends. AppArmor makes an exec a secure exec only when a confined task changes
# profile with environment scrubbing (Px, Cx, change_onexec): from unconfined, an exec that
# a profile attaches to by path, and aa-exec -p (what systemd's AppArmorProfile= does),
# are not; nor is a px (non-scrubbing) transition.
aa_profile() { # NAME PROGRAM RULES...: load profile NAME attached to PROGRAM
	name=$1 prog=$2; shift 2
	{ printf '%s\n' 'abi <abi/3.0>,' 'include <tunables/global>' "profile $name $prog {" \
		'  include <abstractions/base>' '  /opt/ksm/* mr,' '  owner @{PROC}/@{pid}/ksm_stat r,'
	  for r in "$@"; do printf '  %s\n' "$r"; done; echo '}'; } > /etc/apparmor.d/$name
	apparmor_parser -r /etc/apparmor.d/$name
}
in_service() { systemd-run --quiet --wait --pipe "$@"; }
apparmor() {
	cp /opt/ksm/ksm-worker /opt/ksm/ksm-worker-confined
	cp /opt/ksm/ksmctl /opt/ksm/ksmctl-px; cp /opt/ksm/ksmctl /opt/ksm/ksmctl-Px
	aa_profile ksm-worker-confined /opt/ksm/ksm-worker-confined || return 1
	aa_profile ksmctl-px /opt/ksm/ksmctl-px '/opt/ksm/ksm-worker-confined px,' || return 1
	aa_profile ksmctl-Px /opt/ksm/ksmctl-Px '/opt/ksm/ksm-worker-confined Px,' || return 1
	keeps="at_secure 0 merge_any 1 merge_type process" ends="at_secure 1 merge_any 0 merge_type none"
	r=0
	for c in "no profile:$keeps:/opt/ksm/ksmctl run -- /opt/ksm/ksm-worker state" \
		 "unconfined, exec of a program a profile attaches to:$keeps:/opt/ksm/ksmctl run -- /opt/ksm/ksm-worker-confined state" \
		 "unconfined, aa-exec -p (change_onexec):$keeps:/opt/ksm/ksmctl run -- aa-exec -p ksm-worker-confined -- /opt/ksm/ksm-worker state" \
		 "profile -> profile, px:$keeps:/opt/ksm/ksmctl-px run -- /opt/ksm/ksm-worker-confined state" \
		 "profile -> profile, Px (scrubbing):$ends:/opt/ksm/ksmctl-Px run -- /opt/ksm/ksm-worker-confined state"; do
		what=${c%%:*} rest=${c#*:}; want=${rest%%:*} cmd=${rest#*:}
		got=$(in_service $cmd)
		echo "$what: $got"
		[ "$got" = "$want" ] || { echo "  expected: $want"; r=1; }
	done
	return $r
}

# Swap: a service whose memory is limited (MemoryMax=) has its merged pages swapped out
# and back in, every byte checked (system/ksm-worker.c swap).
swap() {
	ksm pages_to_scan 1000; ksm sleep_millisecs 20; ksm run 1
	systemd-run --quiet --wait --pipe --property=MemoryMax=64M --property=MemorySwapMax=1G \
		/opt/ksm/ksmctl run -- /opt/ksm/ksm-worker swap 32
}

for c in "services: ksmctl run in one unit's ExecStart: its cgroup has the profit, the other none:services" \
	 "node_exporter: the textfile collector serves ksmctl's metrics, ksm-on's profit under its cgroup, ksm-off at 0:node_exporter" \
	 "services: systemctl stop gives general_profit back:stop_services" \
	 "AppArmor: Px (a secure exec) ends per-process KSM; attach, aa-exec -p from unconfined and px keep it:apparmor" \
	 "swap: a MemoryMax= service's merged pages swapped out and in, every byte intact:swap"; do
	name=${c%:*} fn=${c##*:}
	if ! has_prctl; then skip "$name" "no PR_SET_MEMORY_MERGE in this kernel"; continue; fi
	check "$name" $fn
done

# CRIU: an incremental checkpoint (pre-dump, then dump with --track-mem: soft-dirty tracking)
# of a KSM-enabled process whose pages are rewritten between the two and merged by ksmd
# before the dump; restored, the process checks every byte (system/criu-ksm.c).
criu_ksm() { # prctl|madvise
	d=/var/tmp/criu-$1
	rm -rf $d; mkdir -p $d/pre $d/dump
	ksm pages_to_scan 1000; ksm sleep_millisecs 20; ksm run 1
	setsid /opt/ksm/criu-ksm $1 $d < /dev/null > $d/out 2>&1 & pid=$!
	if ! wait_for 10 test -f $d/ready; then
		wait $pid; rc=$?; cat $d/out
		[ $rc = 4 ] && echo "SKIP: no PR_SET_MEMORY_MERGE in this kernel"
		return 1
	fi
	criu pre-dump -t $pid -D $d/pre --track-mem -o pre.log || { tail -n 5 $d/pre/pre.log; return 1; }
	kill -USR1 $pid
	wait_for 10 test -f $d/rewritten || { echo "never rewrote its pages"; return 1; }
	wait_for 60 sh -c "[ \$(cat /proc/$pid/ksm_merging_pages) -ge 63 ]" ||
		{ echo "ksmd merged $(cat /proc/$pid/ksm_merging_pages) of 64 pages in 60 s"; return 1; }
	echo "merged before the dump: $(cat /proc/$pid/ksm_merging_pages) pages"
	criu dump -t $pid -D $d/dump --prev-images-dir ../pre --track-mem -o dump.log ||
		{ tail -n 5 $d/dump/dump.log; return 1; }
	wait $pid 2>/dev/null
	criu restore -D $d/dump -d -o restore.log || { tail -n 5 $d/dump/restore.log; return 1; }
	kill -USR2 $pid
	wait_for 10 test -f $d/state || { echo "the restored process gave no result"; return 1; }
	echo "restored: $(cat $d/result); $(cat $d/state)"
	grep -qx "intact 64" $d/result
}
for mode in madvise prctl; do
	if out=$(criu_ksm $mode 2>&1); then ok "CRIU: pre-dump, merge, dump, restore of a process with KSM by $mode: every byte intact"
	elif printf '%s\n' "$out" | grep -q '^SKIP: '; then
		skip "CRIU with KSM by $mode" "$(printf '%s\n' "$out" | sed -n 's/^SKIP: //p')"
	else not_ok "CRIU: pre-dump, merge, dump, restore of a process with KSM by $mode: every byte intact"
	fi
	printf '%s\n' "$out" | grep -v '^SKIP: ' | sed 's/^/# /'
done

# The console is checked for splats by system.sh; the kernel log of the whole run also for
# what is not a splat (a KSM-related message at warning level or above).
# (-o cat: the messages alone, without the host name, which has "ksm" in it)
check "journalctl -k: no KSM-related message at warning level or above since boot" sh -c \
	'journalctl -k -b -p warning -q --no-pager -o cat | grep -i ksm && exit 1;
	echo "$(journalctl -k -b -p warning -q --no-pager | wc -l) kernel messages at warning or above, none about KSM"'

# The package as an administrator has it: next to Debian's own kernel, GRUB's default once
# update-grub has run (version sort: 6.1.N-ksm > 6.1.0-N-cloud-amd64), and `apt remove`
# takes it out again and makes Debian's kernel the default. Last: it removes the running
# kernel's modules (the disk is a throwaway overlay).
grub_default() { sed -n 's/^[[:space:]]*linux[[:space:]]\{1,\}\([^ ]*\).*/\1/p' /boot/grub/grub.cfg | head -n 1; }
apt_grub() {
	rel=$(uname -r)
	dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\n' 'linux-image-*'
	debian=$(dpkg-query -W -f '${Package}\n' 'linux-image-6.1.0-*' | sed 's/^linux-image-//' | head -n 1)
	[ -n "$debian" ] && [ -f "/boot/vmlinuz-$debian" ] || { echo "no Debian kernel next to $rel"; return 1; }
	mkdir -p /boot/grub && update-grub 2>&1 | grep -e '^Found linux' || return 1
	echo "GRUB's default: $(grub_default)"
	[ "$(grub_default)" = "/boot/vmlinuz-$rel" ] || return 1
	DEBIAN_FRONTEND=noninteractive apt-get remove -y "linux-image-$rel" > /run/apt-remove.log 2>&1 ||
		{ tail -n 5 /run/apt-remove.log; return 1; }
	grep -e '^Removing' /run/apt-remove.log
	echo "after apt remove: GRUB's default $(grub_default); $(ls /boot | tr '\n' ' ')"
	echo "left in /lib/modules/$rel: $(ls "/lib/modules/$rel" 2>/dev/null | tr '\n' ' ')"
	[ "$(grub_default)" = "/boot/vmlinuz-$debian" ] && [ ! -e "/boot/vmlinuz-$rel" ] &&
		[ ! -e "/boot/initrd.img-$rel" ] && [ "$(find "/lib/modules/$rel" -name '*.ko*' 2>/dev/null | wc -l)" = 0 ] &&
		! dpkg-query -W -f '${db:Status-Abbrev}\n' "linux-image-$rel" 2>/dev/null | grep -q '^ii'
}
check "apt: the package sits next to Debian's kernel, is GRUB's default, apt remove takes it out" apt_grub

echo "1..$n"
echo "# $((n - fail - skipped)) passed, $fail failed, $skipped skipped"
