#!/bin/sh
# stress-guest.sh SECONDS [ITERATIONS] (guest): run the stress suite (build/stress/*) for about
# SECONDS in all, then check for kernel memory leaks.  kselftest TAP output, one plan per
# program, and "# stat seconds N" after each (its wall time: programs have fixed costs beyond
# -d, and the leak scan takes long on the debug kernel); exit 1 if any program failed.
# ITERATIONS is passed on as -i (see each program).
# NAME@domain runs NAME again with merge_scope=domain (merge domains, patches 39-43): each
# process that enables KSM is a domain of its own, so several domains are merged at once.
set -eu
secs=${1:?usage: stress-guest.sh SECONDS [ITERATIONS]}
iter=${2:+-i $2}
ksm=/sys/kernel/mm/ksm
rc=0

# scope SCOPE: set merge_scope, which may change only while nothing is merged (run=2 first);
# run is restored whether or not that worked.
scope() {
	[ -w $ksm/merge_scope ] || return 1
	r=$(cat $ksm/run) ok=0
	{ echo 2 > $ksm/run && echo "$1" > $ksm/merge_scope; } || ok=1
	echo "$r" > $ksm/run
	return $ok
}

# Share of SECONDS per program, in percent.
for p in ksm_stress:30 ksm_prctl_fuzz:12 ksm_faults:12 ksm_signals:12 ksm_mm:14 ksm_enter_race:5 \
	 ksm_stress@domain:10 ksm_mm@domain:5; do
	name=${p%:*} d=$(( secs * ${p#*:} / 100 )) prog=${p%%[@:]*}
	[ -x build/stress/$prog ] || { echo "stress-guest.sh: build/stress/$prog missing: run 'make stress-progs'"; exit 1; }
	echo "### $name -d $d $iter"
	case $name in *@*)
		if ! scope "${name#*@}"; then
			echo "1..0 # SKIP no $ksm/merge_scope (merge domains) or it cannot be set"
			continue
		fi
	esac
	s=0 t=$(date +%s); build/stress/$prog -d $d $iter || s=$?
	echo "# stat seconds $(( $(date +%s) - t ))"
	case $s in 0|4) ;; *) echo "# stress-guest.sh: $name exited with $s"; rc=1;; esac
	case $name in *@*) scope global || { echo "# stress-guest.sh: merge_scope not back to global"; rc=1; }; esac
done
echo "### kmemleak"
echo "1..1"
t=$(date +%s)
if out=$(sh scripts/kmemleak-check.sh); then echo "ok 1 kmemleak: no leaks after the stress suite"
elif [ $? = 4 ]; then echo "ok 1 kmemleak # SKIP $out"
else printf '%s\n' "$out" | sed 's/^/# /'; echo "not ok 1 kmemleak: leaks after the stress suite"; rc=1; fi
echo "# stat seconds $(( $(date +%s) - t ))"
exit $rc
