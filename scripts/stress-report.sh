#!/bin/sh
# stress-report.sh COMMAND LOG CONSOLE SECONDS: markdown table of a stress run from its guest
# output LOG (TAP per program, "# stat KEY VALUE" lines) and its console log.  A second table
# has the counts of the unmerge checks (sparse, PROT_NONE, uffd-wp) of the programs that have them,
# a third one ksm_mm's result and counts ("# count FEATURE KEY VALUE") per mm feature (FEATURE@domain
# for the merge_scope=domain round).
set -eu
[ $# = 4 ] || { echo "usage: stress-report.sh COMMAND LOG CONSOLE SECONDS" >&2; exit 2; }
cmd=$1 log=$2 con=$3 secs=$4
splats=$(sh scripts/check-splat.sh "$con" 2>/dev/null && echo 0 || echo 1)
leaks=$(grep -c 'unreferenced object' "$con" "$log" | awk -F: '{ n += $NF } END { print n + 0 }')
echo "Last run: \`$cmd\`, $(date -u +%Y-%m-%d), kernel $(sed -n 's/.*Linux version \([^ ]*\).*/\1/p' "$con" | head -n 1)" \
	"(debug test config: Debian's mm options, KASAN, lockdep, DEBUG_VM, DEBUG_VM_MAPLE_TREE, DEBUG_LIST, kmemleak), QEMU TCG -smp 2, ${secs} s in all."
echo
echo "| program | results ok/not ok/skip | operations | processes | pages verified | faults injected | signals sent | data mismatches |"
echo "|---|---|---|---|---|---|---|---|"
tr -d '\r' < "$log" | awk '
BEGIN {
	nx = split("sparse_reservations sparse_unmerged untouched_pages_checked prot_none_unmerged " \
		"uffd_wp_ranges uffd_wp_unmerged uffd_wp_merged_pages uffd_wp_lost unmerge_ksm_pages_left", x)
}
function flush(  i, row) {
	if (prog == "") return
	printf "| %s | %d/%d/%d | %d | %d | %d | %d | %d | %d |\n", prog, ok, nok, sk,
		s["operations"], s["processes"], s["pages_verified"], s["faults_injected"],
		s["signals_sent"], s["mismatches"]
	for (i = 1; i <= nx; i++)
		if (x[i] in s) row = 1
	if (row) {
		rows = rows "| " prog
		for (i = 1; i <= nx; i++) rows = rows " | " s[x[i]] + 0
		rows = rows " |\n"
	}
	for (k in s) { tot[k] += s[k]; delete s[k] }
	tok += ok; tnok += nok; tsk += sk; ok = nok = sk = 0
}
/^### / { flush(); prog = $2; sfx = prog ~ /@/ ? substr(prog, index(prog, "@")) : ""; next }
prog ~ /^ksm_mm(@|$)/ && /^(not )?ok [0-9]+ [a-z_]+:/ {
	f = $0; sub(/^(not )?ok [0-9]+ /, "", f); sub(/:.*/, "", f); f = f sfx
	feat[++nf] = f
	res[f] = /^not ok/ ? "**not ok**" : /# *[Ss][Kk][Ii][Pp]/ ? "skip: " substr($0, index($0, "SKIP") + 5) : "ok"
}
/^ok [0-9]+.*# *[Ss][Kk][Ii][Pp]/ { sk++; next }
/^ok [0-9]+/ { ok++; next }
/^not ok [0-9]+/ { nok++; next }
/^# stat [a-z_]+ [0-9]+$/ { s[$3] += $4 }
/^# count [a-z_]+ [a-z_0-9]+ -?[0-9]+$/ { f = $3 sfx; cnt[f] = cnt[f] (cnt[f] == "" ? "" : ", ") $4 " " $5 }
END {
	flush()
	printf "| **all** | %d/%d/%d | %d | %d | %d | %d | %d | %d |\n", tok, tnok, tsk,
		tot["operations"], tot["processes"], tot["pages_verified"], tot["faults_injected"],
		tot["signals_sent"], tot["mismatches"]
	if (nf) {
		print "\n| mm feature (ksm_mm) | result | counts |"
		print "|---|---|---|"
		for (i = 1; i <= nf; i++)
			printf "| %s | %s | %s |\n", feat[i], res[feat[i]], cnt[feat[i]]
	}
	if (rows == "") exit
	print "\n| program | sparse reservations | sparse ones unmerged | untouched pages checked |" \
		" PROT_NONE unmerges | uffd-wp ranges | uffd-wp unmerges | merged uffd-wp pages unmerged |" \
		" uffd-wp pages that lost the bit | KSM pages left by an unmerge |"
	print "|---|---|---|---|---|---|---|---|---|---|"
	printf "%s", rows
}'
echo
echo "Kernel splats on the console: $splats. Leak reports (kmemleak): $leaks."
