#!/bin/sh
# stress-guest.sh SECONDS [ITERATIONS] (guest): run the stress suite (build/stress/*) for about
# SECONDS in all, then check for kernel memory leaks.  kselftest TAP output, one plan per
# program; exit 1 if any program failed.  ITERATIONS is passed on as -i (see each program).
set -eu
secs=${1:?usage: stress-guest.sh SECONDS [ITERATIONS]}
iter=${2:+-i $2}
rc=0
ksm=/sys/kernel/mm/ksm
# merge_scope SCOPE: as the knob wants, with nothing merged (run 2 first; the programs start ksmd)
merge_scope() { echo 2 > $ksm/run && echo "$1" > $ksm/merge_scope; }
# Share of SECONDS per program, in percent; "@domain": with merge_scope domain (merge domains,
# patch 37: each process that enables KSM for itself in a domain of its own, forks in their
# parent's), where the kernel has it.
for p in ksm_stress:28 ksm_prctl_fuzz:12 ksm_faults:12 ksm_signals:12 ksm_mm:16 \
	 ksm_stress@domain:12 ksm_mm@domain:8; do
	name=${p%:*} d=$(( secs * ${p#*:} / 100 )) prog=${p%%[@:]*}
	[ -x build/stress/$prog ] || { echo "stress-guest.sh: build/stress/$prog missing: run 'make stress-progs'"; exit 1; }
	case $name in *@domain)
		[ -e $ksm/merge_scope ] || { echo "### $name: no merge_scope in this kernel, not run"; continue; }
		merge_scope domain || { echo "# stress-guest.sh: cannot set merge_scope domain"; rc=1; continue; }
	esac
	echo "### $name -d $d $iter"
	s=0; build/stress/$prog -d $d $iter || s=$?
	case $s in 0|4) ;; *) echo "# stress-guest.sh: $name exited with $s"; rc=1;; esac
	case $name in *@domain)
		echo "# stress-guest.sh: merge_domains $(cat $ksm/merge_domains) at the end of $name"
		merge_scope global || { echo "# stress-guest.sh: cannot set merge_scope global"; rc=1; }
	esac
done
echo "### kmemleak"
echo "1..1"
if out=$(sh scripts/kmemleak-check.sh); then echo "ok 1 kmemleak: no leaks after the stress suite"
elif [ $? = 4 ]; then echo "ok 1 kmemleak # SKIP $out"
else printf '%s\n' "$out" | sed 's/^/# /'; echo "not ok 1 kmemleak: leaks after the stress suite"; rc=1; fi
exit $rc
