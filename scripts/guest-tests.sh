#!/bin/sh
# guest-tests.sh (runs in the test VM): run scripts/guest-tests.list plus every unlisted
# build/selftests/ksm_* program; print one "RESULT: ok|not ok|skip NAME" line per result.
set -eu
list=scripts/guest-tests.list
out=/tmp/guest-test.out
run() { # KIND NAME COMMAND
	kind=$1 name=$2 cmd=$3 rc=0 t0=$(date +%s)
	echo "### $name: $cmd"
	sh -c "$cmd" > $out 2>&1 < /dev/null || rc=$?
	cat $out
	echo "#### $name: $(( $(date +%s) - t0 ))s"
	if [ "$kind" = tap ]; then
		# A skip names its reason; kselftest programs often print it on the line before.
		# A failure gets the first and the last diagnostic since the last result (no counts),
		# after " # why: ", so that check.sh's summary says what went wrong.
		awk -v n="$name" '/^(not )?ok [0-9]+/ { r = /^not/ ? "not ok" : "ok"
			if (r == "ok" && / # [Ss][Kk][Ii][Pp]/) r = "skip"
			d = $0; sub(/^(not )?ok [0-9]+ *-? */, "", d)
			if (r == "skip" && prev != "") d = d " (" prev ")"
			if (r == "not ok" && why != "") d = d " # why: " substr(why (last != why ? " ... " last : ""), 1, 400)
			print "RESULT: " r " " n ": " d; prev = why = last = ""; next }
			!/^(TAP version|1\.\.)/ && NF { prev = $0; sub(/^# */, "", prev); sub(/[ \t]+$/, "", prev)
				if (/^# / && !/^# (count|stat) /) { if (why == "") why = prev; last = prev } }' $out
		grep -qE '^1\.\.[0-9]+' $out || echo "RESULT: not ok $name: printed no TAP plan"
		case $rc in 0|4) ;; *) echo "RESULT: not ok $name: exit status $rc";; esac
	else
		case $rc in 0) echo "RESULT: ok $name";; 4) echo "RESULT: skip $name";;
			*) echo "RESULT: not ok $name: exit status $rc";; esac
	fi
}
grep -vE '^(#|$)' $list | while read -r kind name cmd; do run "$kind" "$name" "$cmd"; done
for p in build/selftests/ksm_*; do
	[ -x "$p" ] || continue
	grep -qE "^[a-z]+ [^ ]+ (.* )?$p( |$)" $list || run tap "${p##*/}" "$p"
done
echo "### guest-tests.sh done"
