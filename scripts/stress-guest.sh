#!/bin/sh
# stress-guest.sh SECONDS [ITERATIONS] (guest): run the stress suite (build/stress/*) for about
# SECONDS in all, then check for kernel memory leaks.  kselftest TAP output, one plan per
# program; exit 1 if any program failed.  ITERATIONS is passed on as -i (see each program).
set -eu
secs=${1:?usage: stress-guest.sh SECONDS [ITERATIONS]}
iter=${2:+-i $2}
rc=0
# Share of SECONDS per program, in percent.
for p in ksm_stress:30 ksm_prctl_fuzz:15 ksm_faults:15 ksm_signals:15 ksm_mm:20 ksm_enter_race:5; do
	name=${p%:*} d=$(( secs * ${p#*:} / 100 ))
	[ -x build/stress/$name ] || { echo "stress-guest.sh: build/stress/$name missing: run 'make stress-progs'"; exit 1; }
	echo "### $name -d $d $iter"
	s=0; build/stress/$name -d $d $iter || s=$?
	case $s in 0|4) ;; *) echo "# stress-guest.sh: $name exited with $s"; rc=1;; esac
done
echo "### kmemleak"
echo "1..1"
if out=$(sh scripts/kmemleak-check.sh); then echo "ok 1 kmemleak: no leaks after the stress suite"
elif [ $? = 4 ]; then echo "ok 1 kmemleak # SKIP $out"
else printf '%s\n' "$out" | sed 's/^/# /'; echo "not ok 1 kmemleak: leaks after the stress suite"; rc=1; fi
exit $rc
