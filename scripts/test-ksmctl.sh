#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Tests for tools/vm/ksmctl, kselftest TAP output.
# Usage: ksmctl_test.sh PATH/TO/ksmctl      (run as root)
# Exit: 0 all passed, 1 a test failed, 4 skipped (kernel lacks the feature).

K=${1:?usage: ksmctl_test.sh PATH/TO/ksmctl}
KSM=/sys/kernel/mm/ksm
NTESTS=45
n=0
failed=0
TMP=$(mktemp -d) || exit 1
BG=
ZBG=
DPIDS=
CGPIDS=
CGDIRS=
CGMOUNTED=
old_run=
old_zero=

# shellcheck disable=SC2317  # invoked by trap
cleanup() {
	[ -n "$BG" ] && kill "$BG" 2>/dev/null
	[ -n "$ZBG" ] && kill "$ZBG" 2>/dev/null
	[ -n "$DPIDS" ] && pkill -P "${DPIDS%% *}" && kill $DPIDS 2>/dev/null
	[ -n "$CGPIDS" ] && kill $CGPIDS 2>/dev/null && wait $CGPIDS 2>/dev/null
	for d in $CGDIRS; do rmdir "$d"; done
	[ -n "$CGMOUNTED" ] && umount /sys/fs/cgroup
	[ -n "$old_zero" ] && echo "$old_zero" >"$KSM/use_zero_pages"
	if [ -n "$old_run" ]; then
		echo "$old_pages" >"$KSM/pages_to_scan"
		echo "$old_sleep" >"$KSM/sleep_millisecs"
		echo "$old_run" >"$KSM/run"
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=1
	fi
}

skip() {
	n=$((n + 1))
	echo "ok $n - $1 # SKIP $2"
}

# wait for "$1" (a background ksmctl run) to have exec'd "$2" (30 s: a TCG guest on a
# host busy with kernel builds, as in make check, runs 10-50x slower than an idle one)
wait_comm() {
	i=0
	while [ $i -lt 300 ]; do
		[ "$(cat /proc/"$1"/comm 2>/dev/null)" = "$2" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# value of $KSM/$1, or "-" (as ksmctl prints it) if the kernel lacks it
ksm_value() {
	cat "$KSM/$1" 2>/dev/null || echo -
}

# run "$@" as nobody (uid and gid 65534, no groups), to see what ksmctl cannot read
as_nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}

# what ksmd and process $1 are doing, as TAP comments, when a test waited for ksmd in vain
ksmd_report() {
	for f in run sleep_millisecs pages_to_scan full_scans pages_scanned pages_skipped; do
		printf '# %s %s\n' $f "$(ksm_value $f)"
	done
	for p in $(pgrep -x ksmd) "$1"; do
		printf '# pid %s: %s, state %s, wchan %s\n' "$p" "$(cat /proc/"$p"/comm)" \
			"$(sed -n 's/^State:\t//p' /proc/"$p"/status)" "$(cat /proc/"$p"/wchan)"
	done 2>/dev/null
	sed 's/^/# /' /proc/"$1"/ksm_stat 2>/dev/null
}

# the value of the "$2 N" line of /proc/$1/ksm_stat, nothing if there is none
proc_stat_key() {
	sed -n "s/^$2 //p" /proc/"$1"/ksm_stat 2>/dev/null
}

echo "TAP version 13"

if [ ! -d $KSM ]; then
	echo "1..0 # SKIP kernel without CONFIG_KSM ($KSM missing)"
	exit 4
fi
if [ ! -x "$K" ]; then
	echo "1..0 # SKIP $K not built"
	exit 4
fi
"$K" run true 2>"$TMP/err"
if [ $? -eq 125 ]; then
	echo "1..0 # SKIP no per-process KSM: $(cat "$TMP/err")"
	exit 4
fi

# turn ksmd on, restore its settings at the end
old_run=$(cat "$KSM"/run)
old_sleep=$(cat "$KSM"/sleep_millisecs)
old_pages=$(cat "$KSM"/pages_to_scan)
echo 10 >"$KSM"/sleep_millisecs
echo 5000 >"$KSM"/pages_to_scan
echo 1 >"$KSM"/run

echo "1..$NTESTS"

# --- run ---
"$K" run ksmctl-no-such-command-$$ 2>"$TMP/err"
rc=$?
[ $rc -eq 127 ] && grep -q "ksmctl-no-such-command" "$TMP/err"
ok $? "run: command not found exits 127 with a message (got $rc)"

printf '#!/bin/sh\nexit 0\n' >"$TMP/noexec"
chmod 644 "$TMP/noexec"
"$K" run "$TMP/noexec" 2>/dev/null
rc=$?
[ $rc -eq 126 ]
ok $? "run: command not executable exits 126 (got $rc)"

"$K" run -- sh -c 'exit 3'
rc=$?
[ $rc -eq 3 ]
ok $? "run -- CMD: exit status of CMD is passed on (got $rc)"

"$K" run sh -c 'cat /proc/self/ksm_stat' >"$TMP/stat"
rc=$?
if grep -q '^ksm_merge_type' /proc/self/ksm_stat; then
	[ $rc -eq 0 ] && grep -qx 'ksm_merge_type process' "$TMP/stat"
	ok $? "run: launched command has ksm_merge_type process"
else
	skip "run: launched command has ksm_merge_type process" \
		"ksm_stat has no ksm_merge_type line"
fi

[ $rc -eq 0 ] && grep -qx 'ksm_merge_any: yes' "$TMP/stat"
ok $? "run: PR_GET_MEMORY_MERGE is 1 in the command (ksm_merge_any: yes)"

"$K" run sh -c 'sh -c "cat /proc/self/ksm_stat"' >"$TMP/stat2"
grep -qx 'ksm_merge_any: yes' "$TMP/stat2"
ok $? "run: the setting is inherited by children of the command"

# --- status ---
# (the background processes of the tests live for an hour and are killed when done: a
# fixed lifetime ran out under a loaded TCG guest while tests still looked for them)
"$K" run sleep 3600 &
BG=$!
wait_comm $BG sleep
ok $? "run: background command started (pid $BG)"

"$K" status >"$TMP/status" 2>"$TMP/err"
rc=$?
[ $rc -eq 0 ]
ok $? "status: exits 0 (got $rc)"

r=0
for f in run pages_shared pages_sharing general_profit full_scans; do
	grep -Eq "^$f +-?[0-9]+" "$TMP/status" || r=1
done
ok $r "status: shows the five global values"

grep -Eq '^ +PID +COMMAND +MERGE_TYPE +MERGING_PAGES +ZERO_PAGES +RMAP_ITEMS +PROFIT$' \
	"$TMP/status"
ok $? "status: table header"

grep -Eq "^ *$BG +sleep +process +[0-9]+ +([0-9]+|-) +[0-9]+ +-?[0-9.]+[KMGTPE]?$" \
	"$TMP/status"
ok $? "status: launched process listed with merge type process"

"$K" status $BG >"$TMP/status1"
rc=$?
[ $rc -eq 0 ] && grep -Eq "^ *$BG +sleep +process " "$TMP/status1"
ok $? "status PID: shows the given process"

"$K" status 12abc >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && grep -q "not a process ID" "$TMP/err"
ok $? "status: non-numeric PID exits 1 with a message (got $rc)"

"$K" status 2147483647 >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && grep -q "no such process" "$TMP/err"
ok $? "status: non-existent PID exits 1 with a message (got $rc)"

if command -v python3 >/dev/null 2>&1; then
	"$K" status --json >"$TMP/json" &&
	python3 -c 'import json,sys; json.load(sys.stdin)' <"$TMP/json" &&
	python3 -c '
import json, sys
d = json.load(sys.stdin)
p = [p for p in d["processes"] if p["pid"] == int(sys.argv[1])]
assert p and p[0]["merge_type"] in ("process", None)
assert isinstance(d["full_scans"], int)
' $BG <"$TMP/json"
	ok $? "status --json: valid JSON with the launched process"
else
	skip "status --json: valid JSON with the launched process" \
		"no python3"
fi

if command -v setpriv >/dev/null 2>&1; then
	as_nobody "$K" status >"$TMP/unpriv" 2>&1
	rc=$?
	[ $rc -eq 0 ] &&
	grep -Eq '^[1-9][0-9]* process(es)? not readable \(run as root\)$' \
		"$TMP/unpriv"
	ok $? "status as nobody: unreadable processes are counted"
else
	skip "status as nobody: unreadable processes are counted" \
		"no setpriv"
fi

# --- zero pages, pages_scanned ---
# A process that "ksmctl run" launches maps 8 MiB of private anonymous memory
# and writes a 0 into each page: with use_zero_pages=1, ksmd replaces these
# empty pages with the zero page and counts them in ksm_zero_pages.
if [ ! -e "$KSM"/ksm_zero_pages ] || [ ! -e "$KSM"/use_zero_pages ]; then
	skip "zero pages: ksmd merges the empty pages of a launched process" \
		"kernel without $KSM/ksm_zero_pages"
elif ! command -v python3 >/dev/null 2>&1; then
	skip "zero pages: ksmd merges the empty pages of a launched process" \
		"no python3"
else
	old_zero=$(cat "$KSM"/use_zero_pages)
	echo 1 >"$KSM"/use_zero_pages
	"$K" run python3 -c '
import mmap, time
m = mmap.mmap(-1, 8 << 20, mmap.MAP_PRIVATE)
m.madvise(mmap.MADV_NOHUGEPAGE)
for i in range(0, len(m), mmap.PAGESIZE):
	m[i] = 0
time.sleep(3600)
' &
	ZBG=$!
	zp=0
	why=
	if wait_comm $ZBG python3; then
		i=0
		while [ $i -lt 1200 ]; do
			zp=$(proc_stat_key $ZBG ksm_zero_pages)
			[ "${zp:-0}" -ge 2048 ] && break
			sleep 0.1
			i=$((i + 1))
		done
	else
		why="python3 not started after 30 s"
	fi
	[ "${zp:-0}" -ge 2048 ] || ksmd_report $ZBG
	[ "${zp:-0}" -ge 2048 ]
	ok $? "zero pages: ksmd merges the 2048 empty pages of a launched process (ksm_zero_pages ${zp:-none}${why:+: $why})"
fi

# stop ksmd: pages_scanned and the zero pages then stand still
echo 0 >"$KSM"/run

zb=$(ksm_value ksm_zero_pages) sb=$(ksm_value pages_scanned)
[ -n "$ZBG" ] && pb=$(proc_stat_key $ZBG ksm_zero_pages)
"$K" status >"$TMP/zstatus"
za=$(ksm_value ksm_zero_pages) sa=$(ksm_value pages_scanned)
[ -n "$ZBG" ] && pa=$(proc_stat_key $ZBG ksm_zero_pages)

v=$(awk '$1 == "ksm_zero_pages" { print $2 }' "$TMP/zstatus")
[ -n "$v" ] && { [ "$v" = "$zb" ] || [ "$v" = "$za" ]; }
ok $? "status: ksm_zero_pages line as in sysfs (got ${v:-none}, sysfs $zb/$za)"

v=$(awk '$1 == "pages_scanned" { print $2 }' "$TMP/zstatus")
[ -n "$v" ] && [ "$v" = "$sb" ] && [ "$v" = "$sa" ]
ok $? "status: pages_scanned line as in sysfs (got ${v:-none}, sysfs $sb/$sa)"

# smart scan and the scan-time advisor (kernels without them show "-")
r=0
for f in pages_skipped smart_scan pages_to_scan; do
	v=$(awk -v f=$f '$1 == f { print $2 }' "$TMP/zstatus")
	[ "$v" = "$(ksm_value $f)" ] || { r=1; echo "# $f: status ${v:-none}, sysfs $(ksm_value $f)"; }
done
mode=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$KSM"/advisor_mode 2>/dev/null)
v=$(awk '$1 == "advisor_mode" { print $2 }' "$TMP/zstatus")
[ "$v" = "${mode:--}" ] || { r=1; echo "# advisor_mode: status ${v:-none}, sysfs ${mode:--}"; }
ok $r "status: pages_skipped, smart_scan, pages_to_scan, advisor_mode as in sysfs"

if [ -n "$ZBG" ]; then
	v=$(awk -v p=$ZBG '$1 == p { print $5 }' "$TMP/zstatus")
	[ -n "$v" ] && { [ "$v" = "$pb" ] || [ "$v" = "$pa" ]; }
	ok $? "status: ZERO_PAGES is ksm_zero_pages of ksm_stat (got ${v:-none}, ksm_stat $pb/$pa)"
else
	skip "status: ZERO_PAGES is ksm_zero_pages of ksm_stat" \
		"no process with zero pages"
fi

if command -v python3 >/dev/null 2>&1; then
	zb=$(ksm_value ksm_zero_pages) sb=$(ksm_value pages_scanned)
	[ -n "$ZBG" ] && pb=$(proc_stat_key $ZBG ksm_zero_pages)
	"$K" status --json >"$TMP/zjson"
	rc=$?
	za=$(ksm_value ksm_zero_pages) sa=$(ksm_value pages_scanned)
	[ -n "$ZBG" ] && pa=$(proc_stat_key $ZBG ksm_zero_pages)
	[ $rc -eq 0 ] && python3 -c '
import json, sys
d = json.load(sys.stdin)
sysfs = [None if v == "-" else int(v) for v in sys.argv[1:]]
assert d["ksm_zero_pages"] in sysfs[0:2], d["ksm_zero_pages"]
assert d["pages_scanned"] == sysfs[2] == sysfs[3], d["pages_scanned"]
assert d["processes"] and all("zero_pages" in p for p in d["processes"])
' "$zb" "$za" "$sb" "$sa" <"$TMP/zjson"
	ok $? "status --json: ksm_zero_pages, pages_scanned and per-process zero_pages"

	if [ -n "$ZBG" ]; then
		[ $rc -eq 0 ] && python3 -c '
import json, sys
d = json.load(sys.stdin)
p = [p for p in d["processes"] if p["pid"] == int(sys.argv[1])]
assert p and p[0]["zero_pages"] in (int(sys.argv[2]), int(sys.argv[3])), p
' $ZBG "$pb" "$pa" <"$TMP/zjson"
		ok $? "status --json: zero_pages is ksm_zero_pages of ksm_stat ($pb/$pa)"
	else
		skip "status --json: zero_pages is ksm_zero_pages of ksm_stat" \
			"no process with zero pages"
	fi
else
	skip "status --json: ksm_zero_pages, pages_scanned and per-process zero_pages" \
		"no python3"
	skip "status --json: zero_pages is ksm_zero_pages of ksm_stat" \
		"no python3"
fi

echo 1 >"$KSM"/run
if [ -n "$ZBG" ]; then
	kill $ZBG 2>/dev/null
	wait $ZBG 2>/dev/null
	ZBG=
	echo "$old_zero" >"$KSM"/use_zero_pages
	old_zero=
fi

# --- status --cgroup: two cgroups of enabled processes ---
cg_skip() {
	for t in "status --cgroup: one row per cgroup, with its process count" \
		 "status --cgroup --json: sums of the per-process values, sorted by profit" \
		 "status --cgroup as nobody: unreadable processes counted in their cgroup" \
		 "status --cgroup: bad option exits 2, bad PID 1" \
		 "status --prometheus: promtool check metrics finds no problem" \
		 "status --prometheus: per-cgroup samples equal status --cgroup --json" \
		 "status --prometheus as nobody: unreadable counted, no value made up" \
		 "status --prometheus --per-process: a series per process" \
		 "status --prometheus: a cgroup with KSM off is at 0, not absent" \
		 "status -o: a reader never sees a partial file" \
		 "status --prometheus: label values escaped, bytes not UTF-8 replaced (promtool)"; do
		skip "$t" "$1"
	done
}
# cgroup_run CGROUP: start a process with KSM on in CGROUP, 8 MiB of identical bytes
cgroup_run() {
	sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" run python3 -c "$3"' sh "$1" "$K" \
		'import time; b = b"\x6b" * (8 << 20); time.sleep(3600)' &
	CGPIDS="$CGPIDS $!"
}
if ! command -v python3 >/dev/null 2>&1; then
	cg_skip "no python3"
elif ! grep -q cgroup2 /proc/filesystems; then
	cg_skip "kernel without cgroup v2 (CONFIG_CGROUPS)"
else
	if ! grep -q '^0::' /proc/self/cgroup || [ ! -e /sys/fs/cgroup/cgroup.procs ]; then
		mount -t cgroup2 cgroup2 /sys/fs/cgroup && CGMOUNTED=1
	fi
	a=/sys/fs/cgroup/ksmctl-a.$$ b=/sys/fs/cgroup/ksmctl-b.$$
	mkdir "$a" "$b" && CGDIRS="$a $b"
	cgroup_run "$a"
	cgroup_run "$a"
	cgroup_run "$b"
	# each one merged (ksmd is fast), then ksmd stopped (run 0 keeps the merges): a still
	# picture for the tables to agree on
	i=0
	while [ $i -lt 300 ]; do
		m=0
		for p in $CGPIDS; do
			v=$(proc_stat_key "$p" ksm_merging_pages)
			if [ "${v:-0}" -gt 0 ]; then m=$((m + 1)); else unmerged=$p; fi
		done
		[ $m -eq 3 ] && break
		sleep 0.1
		i=$((i + 1))
	done
	# the tests below then fail: say why here
	[ $m -eq 3 ] || { echo "# $m of 3 cgroup processes merged in 30 s"; ksmd_report "$unmerged"; }
	echo 0 >"$KSM"/run
	"$K" status --cgroup >"$TMP/cg" 2>&1
	rc=$?
	[ $rc -eq 0 ] &&
	grep -Eq '^PROCS +MERGING_PAGES +ZERO_PAGES +RMAP_ITEMS +PROFIT +UNREADABLE +CGROUP$' "$TMP/cg" &&
	grep -Eq "^ +2 +[0-9]+ +([0-9]+|-) +[0-9]+ +-?[0-9.]+[KMGTPE]? +0  /ksmctl-a\.$$\$" "$TMP/cg" &&
	grep -Eq "^ +1 +[0-9]+ +([0-9]+|-) +[0-9]+ +-?[0-9.]+[KMGTPE]? +0  /ksmctl-b\.$$\$" "$TMP/cg"
	r=$?
	ok $r "status --cgroup: one row per cgroup, with its process count"
	[ $r -eq 0 ] || sed 's/^/# /' "$TMP/cg"

	"$K" status --json >"$TMP/pj" && "$K" status --cgroup --json >"$TMP/cj" &&
	python3 -c '
import json, sys
procs = json.load(open(sys.argv[1]))["processes"]
cgs = json.load(open(sys.argv[2]))["cgroups"]
keys = ("merging_pages", "zero_pages", "rmap_items", "profit")
def cgroup(pid):
    for l in open("/proc/%d/cgroup" % pid):
        if l.startswith("0::"):
            return l[3:].strip()
sums = {}
for p in procs:
    s = sums.setdefault(cgroup(p["pid"]), dict(n=0, **{k: 0 for k in keys}))
    s["n"] += 1
    for k in keys:
        s[k] = None if s[k] is None or p[k] is None else s[k] + p[k]
rows = {c["cgroup"]: c for c in cgs}
for path, want in ((sys.argv[3], 2), (sys.argv[4], 1)):
    c, s = rows[path], sums[path]
    assert c["processes"] == want == s["n"], (path, c, s)
    assert c["merging_pages"] > 0, c
    for k in keys:
        assert c[k] == s[k], (path, k, c[k], s[k])
for path, s in sums.items():
    assert rows[path]["processes"] == s["n"], path
profits = [c["profit"] for c in cgs if c["profit"] is not None]
assert profits == sorted(profits, reverse=True), profits
' "$TMP/pj" "$TMP/cj" "/ksmctl-a.$$" "/ksmctl-b.$$"
	ok $? "status --cgroup --json: sums of the per-process values, sorted by profit"

	if command -v setpriv >/dev/null 2>&1; then
		as_nobody "$K" status --cgroup >"$TMP/cgn" 2>&1
		rc=$?
		[ $rc -eq 0 ] &&
		grep -Eq "^ +0 +- +- +- +- +2  /ksmctl-a\.$$\$" "$TMP/cgn" &&
		grep -Eq "^ +0 +- +- +- +- +1  /ksmctl-b\.$$\$" "$TMP/cgn"
		ok $? "status --cgroup as nobody: unreadable processes counted in their cgroup"
	else
		skip "status --cgroup as nobody: unreadable processes counted in their cgroup" \
			"no setpriv"
	fi

	"$K" status --cgroup --bogus >/dev/null 2>&1
	rc=$?
	"$K" status --cgroup 12abc >/dev/null 2>&1
	r=$?
	[ $rc -eq 2 ] && [ $r -eq 1 ]
	ok $? "status --cgroup: bad option exits 2 (got $rc), bad PID 1 (got $r)"

	# --- status --prometheus, on the same still picture ---
	"$K" status --prometheus >"$TMP/prom"
	rc=$?
	if ! command -v promtool >/dev/null 2>&1; then
		skip "status --prometheus: promtool check metrics finds no problem" \
			"no promtool (Debian's prometheus package)"
	else
		[ $rc -eq 0 ] && promtool check metrics <"$TMP/prom" >"$TMP/lint" 2>&1
		r=$?
		ok $r "status --prometheus: promtool check metrics finds no problem"
		[ $r -eq 0 ] || sed 's/^/# /' "$TMP/lint"
	fi

	# prom_samples FILE: "name cgroup value" per sample with a cgroup label
	prom_samples() {
		sed -n 's/^\(ksm_cgroup_[a-z_]*\){cgroup="\([^"]*\)"} \(-*[0-9]*\)$/\1 \2 \3/p' "$1"
	}
	prom_samples "$TMP/prom" >"$TMP/ps"
	python3 -c '
import json, sys
cgs = json.load(open(sys.argv[1]))["cgroups"]
got = {}
for line in open(sys.argv[2]):
    name, path, value = line.split()
    got[(name, path)] = int(value)
names = {"processes": "processes", "unreadable": "unreadable_processes",
         "merging_pages": "merging_pages", "zero_pages": "zero_pages",
         "rmap_items": "rmap_items", "profit": "profit_bytes"}
want = {}
ours = (sys.argv[3], sys.argv[4])
for c in cgs:
    for k, n in names.items():
        if c[k] is not None and c["cgroup"] in ours:
            want[("ksm_cgroup_" + n, c["cgroup"])] = c[k]
got = {k: v for k, v in got.items() if k[1] in ours}
assert got == want, (sorted(set(got.items()) ^ set(want.items())))
assert len(got) == 12, got
assert got[("ksm_cgroup_processes", sys.argv[3])] == 2
assert got[("ksm_cgroup_merging_pages", sys.argv[3])] > 0
' "$TMP/cj" "$TMP/ps" "/ksmctl-a.$$" "/ksmctl-b.$$"
	ok $? "status --prometheus: per-cgroup samples equal status --cgroup --json"

	if command -v setpriv >/dev/null 2>&1; then
		as_nobody "$K" status --prometheus >"$TMP/promn" 2>&1
		rc=$?
		[ $rc -eq 0 ] &&
		grep -qx "ksm_cgroup_unreadable_processes{cgroup=\"/ksmctl-a\.$$\"} 2" "$TMP/promn" &&
		grep -qx "ksm_cgroup_processes{cgroup=\"/ksmctl-a\.$$\"} 0" "$TMP/promn" &&
		! grep -q "^ksm_cgroup_merging_pages{cgroup=\"/ksmctl-a\.$$\"}" "$TMP/promn" &&
		grep -Eq '^ksm_unreadable_processes [3-9]|^ksm_unreadable_processes [1-9][0-9]' "$TMP/promn"
		ok $? "status --prometheus as nobody: unreadable counted, no value made up"
	else
		skip "status --prometheus as nobody: unreadable counted, no value made up" "no setpriv"
	fi

	"$K" status --prometheus --per-process >"$TMP/pp"
	rc=$?
	r=0
	for p in $CGPIDS; do
		grep -Eq "^ksm_process_merging_pages\{pid=\"$p\",comm=\"python3\"\} [1-9]" "$TMP/pp" || r=1
	done
	[ $rc -eq 0 ] && [ $r -eq 0 ] && ! grep -q '^ksm_process_' "$TMP/prom"
	ok $? "status --prometheus --per-process: a series per process"

	# a cgroup whose one process runs with KSM off: at 0 for Prometheus (a unit that
	# turns KSM off drops to 0 rather than vanishing), still left out of --cgroup
	o=/sys/fs/cgroup/ksmctl-off.$$
	if mkdir "$o"; then
		CGDIRS="$CGDIRS $o"
		sh -c 'echo $$ >"$1/cgroup.procs" && exec sleep 3600' sh "$o" &
		CGPIDS="$CGPIDS $!"
		wait_comm $! sleep
		"$K" status -p >"$TMP/po" && "$K" status --cgroup --json >"$TMP/oj"
		rc=$?
		r=0
		for m in processes unreadable_processes merging_pages zero_pages rmap_items \
			 profit_bytes; do
			grep -qx "ksm_cgroup_$m{cgroup=\"/ksmctl-off\.$$\"} 0" "$TMP/po" || r=1
		done
		[ $rc -eq 0 ] && [ $r -eq 0 ] && ! grep -q "ksmctl-off" "$TMP/oj"
		r=$?
		ok $r "status --prometheus: a cgroup with KSM off is at 0, not absent"
		[ $r -eq 0 ] || grep -e ksmctl-off "$TMP/po" "$TMP/oj" | sed 's/^/# /'
	else
		skip "status --prometheus: a cgroup with KSM off is at 0, not absent" "mkdir $o failed"
	fi

	# a writer replaces the file 100 times while a reader reads it in a loop: every read
	# is a whole file (as many families as the first, ending with a sample line of the
	# last family, ksm_cgroup_profit_bytes, and a newline), and no temporary file is left
	mkdir "$TMP/tf"
	"$K" status -p -o "$TMP/tf/ksm.prom" &&
	python3 -c '
import os, re, subprocess, sys
k, f = sys.argv[1], sys.argv[2]
ref = open(f).read()
end = re.compile(r"\nksm_cgroup_profit_bytes\{cgroup=\"[^\n]*\"\} -?[0-9]+\n\Z")
w = subprocess.Popen(["sh", "-c", "i=0; while [ $i -lt 100 ]; do \"$0\" status -p -o \"$1\" || exit 1; i=$((i+1)); done", k, f])
try:
    while w.poll() is None:
        data = open(f).read()
        assert data.count("# TYPE ") == ref.count("# TYPE ") and end.search(data), data[-300:]
finally:
    if w.poll() is None:
        w.kill()
    w.wait()
assert w.returncode == 0 and end.search(ref), ref[-300:]
assert os.listdir(os.path.dirname(f)) == ["ksm.prom"], os.listdir(os.path.dirname(f))
' "$K" "$TMP/tf/ksm.prom"
	ok $? "status -o: a reader never sees a partial file"

	# a cgroup whose name has a quote, a backslash and a byte that is not UTF-8, and a
	# program whose comm is cut inside a UTF-8 character: escaped and replaced (U+FFFD)
	q=$(printf '/sys/fs/cgroup/ksmctl-q"\\\377.%s' $$)
	u=$(printf '\303\261\303\261\303\261\303\261\303\261\303\261\303\261\303\261')
	if mkdir "$q"; then
		CGDIRS="$CGDIRS $q"
		cp "$(command -v sleep)" "$TMP/$u"
		sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" run "$3" 3600' sh "$q" "$K" "$TMP/$u" &
		CGPIDS="$CGPIDS $!"
		wait_comm $! "$(printf '\303\261\303\261\303\261\303\261\303\261\303\261\303\261\303')"
		"$K" status -p --per-process >"$TMP/pq"
		rc=$?
		if command -v promtool >/dev/null 2>&1; then
			promtool check metrics <"$TMP/pq" >"$TMP/lint" 2>&1
		else
			: >"$TMP/lint"
		fi
		r=$?
		[ $rc -eq 0 ] && [ $r -eq 0 ] &&
		grep -q "^ksm_cgroup_processes{cgroup=\"/ksmctl-q\\\\\"\\\\\\\\$(printf '\357\277\275').$$\"} 1\$" "$TMP/pq" &&
		grep -q "comm=\"$(printf '\303\261\303\261\303\261\303\261\303\261\303\261\303\261\357\277\275')\"}" "$TMP/pq"
		r=$?
		ok $r "status --prometheus: label values escaped, bytes not UTF-8 replaced (promtool)"
		[ $r -eq 0 ] || { grep -a -e ksmctl-q -e 'comm=' "$TMP/pq"; cat "$TMP/lint"; } | sed 's/^/# /'
	else
		skip "status --prometheus: label values escaped, bytes not UTF-8 replaced (promtool)" \
			"cannot make a cgroup named with a byte that is not UTF-8"
	fi

	echo 1 >"$KSM"/run
	kill $CGPIDS 2>/dev/null
	wait $CGPIDS 2>/dev/null
	CGPIDS=
	rmdir $CGDIRS && CGDIRS=
fi

# --- watch ---
"$K" watch -n 2 0.1 >"$TMP/watch"
rc=$?
[ $rc -eq 0 ] && [ "$(wc -l <"$TMP/watch")" -eq 3 ] &&
	head -n 1 "$TMP/watch" | grep -q 'TIME.*GENERAL_PROFIT.*PAGES_SHARING' &&
	[ "$(grep -Ec '^[0-9]{2}:[0-9]{2}:[0-9]{2} ' "$TMP/watch")" -eq 2 ]
ok $? "watch -n 2: header and two lines"

# the header names the twelve columns, the lines are aligned with it
hdr='^ +TIME +GENERAL_PROFIT +PAGES_SHARED +PAGES_SHARING +ZERO_PAGES +FULL_SCANS'
hdr="$hdr +PAGES_SCANNED +PAGES_SKIPPED +PAGES_TO_SCAN +D_SHARING +D_SCANS +D_SCANNED\$"
head -n 1 "$TMP/watch" | grep -Eq "$hdr" &&
	awk 'NR == 1 { w = length($0) } NF != 12 || length($0) != w { bad = 1 }
	     END { exit bad }' "$TMP/watch"
ok $? "watch: ZERO_PAGES, PAGES_SCANNED, PAGES_SKIPPED, PAGES_TO_SCAN columns, lines aligned"

r=0
for i in 0 -1 abc 1x; do
	"$K" watch -n 1 -- "$i" >/dev/null 2>&1
	[ $? -eq 2 ] || r=1
done
ok $r "watch: bad interval exits 2"

"$K" watch -n 0 >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "watch: bad count exits 2"

# --- status --domain: one row per merge domain ---
if [ -z "$(proc_stat_key $BG ksm_merge_domain)" ]; then
	skip "status --domain: one row per merge domain, as ksm_stat has them" \
		"no ksm_merge_domain in ksm_stat (a kernel without merge domains)"
else
	# a shell and its two children in one domain, a process in a domain of its own
	"$K" run sh -c 'sleep 3600 & sleep 3600 & wait' &
	DPIDS=$!
	"$K" run sleep 3600 &
	DPIDS="$DPIDS $!"
	wait_comm $! sleep
	i=0
	# (30 s: should the shell fork its second sleep after the wait, the cleanup's pkill -P
	# would miss it, and a sleep 3600 would keep the test's stdout open for an hour)
	while [ "$(pgrep -c -P "${DPIDS%% *}")" -lt 2 ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	"$K" status --json >"$TMP/pd" && "$K" status --domain --json >"$TMP/dd" &&
	python3 -c '
import json, subprocess, sys
procs = json.load(open(sys.argv[1]))["processes"]
doms = {d["domain"]: d for d in json.load(open(sys.argv[2]))["domains"]}
sh, one = int(sys.argv[3]), int(sys.argv[4])
kids = [int(p) for p in subprocess.check_output(["pgrep", "-P", str(sh)]).split()]
dom = {p["pid"]: p["merge_domain"] for p in procs}
count = {}
for p in procs:
    count[p["merge_domain"]] = count.get(p["merge_domain"], 0) + 1
assert {d: doms[d]["processes"] for d in doms} == count, (doms, count)
assert len(kids) == 2 and all(dom[k] == dom[sh] for k in kids), (dom, kids)
assert dom[sh] > 0 and dom[one] > 0 and dom[sh] != dom[one], dom
assert doms[dom[sh]]["processes"] == 3 and doms[dom[one]]["processes"] == 1, doms
' "$TMP/pd" "$TMP/dd" $DPIDS
	r=$?
	ok $r "status --domain: one row per merge domain, as ksm_stat has them"
	[ $r -eq 0 ] || sed 's/^/# /' "$TMP/dd"
	pkill -P "${DPIDS%% *}"
	kill $DPIDS 2>/dev/null
	wait $DPIDS 2>/dev/null
	DPIDS=
fi

# --- usage ---
r=0
for args in "" "bogus" "run" "status --bogus" "-x" "status -j -p" "status --per-process" "status -o" \
	"status -d -c" "status -d -p"; do
	# shellcheck disable=SC2086
	"$K" $args >/dev/null 2>&1
	[ $? -eq 2 ] || r=1
done
ok $r "usage errors exit 2"

"$K" status -p -o "$TMP/no-such-dir/ksm.prom" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && grep -q "no-such-dir/ksm.prom" "$TMP/err" && [ ! -e "$TMP/no-such-dir" ]
ok $? "status -o into a missing directory: exits 1 naming the file"

# a write error (the file size limit) fails the command and keeps the old file
"$K" status -p -o "$TMP/w.prom" && cp "$TMP/w.prom" "$TMP/w.old" &&
	(trap '' XFSZ; ulimit -f 1; "$K" status -p --per-process -o "$TMP/w.prom") 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && grep -q "write error" "$TMP/err" && cmp -s "$TMP/w.prom" "$TMP/w.old" &&
	[ -z "$(ls "$TMP" | grep 'w\.prom\.tmp')" ]
ok $? "status -o: a write error exits 1, the old file kept, no temporary file left (got $rc)"

# only a regular file is replaced; the new one is readable by all (node_exporter)
ln -s "$TMP/w.old" "$TMP/l.prom"
"$K" status -p -o "$TMP/l.prom" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && [ -L "$TMP/l.prom" ] && grep -q "not a regular file" "$TMP/err" &&
	[ "$(stat -c %a "$TMP/w.prom")" = 644 ]
ok $? "status -o: a symlink is not replaced (got $rc); the file written is mode 644"

"$K" --help >"$TMP/help"
rc=$?
[ $rc -eq 0 ] && grep -q 'ksmctl run' "$TMP/help" &&
	grep -q 'ksmctl status' "$TMP/help" && grep -q 'ksmctl watch' "$TMP/help"
ok $? "--help exits 0 and shows all commands"

kill $BG 2>/dev/null
wait $BG 2>/dev/null
"$K" status $BG >/dev/null 2>&1
[ $? -eq 1 ]
ok $? "status: process that exited is reported as an error"
BG=

[ $n -eq $NTESTS ] || { echo "# ran $n tests, planned $NTESTS"; failed=1; }
exit $failed
