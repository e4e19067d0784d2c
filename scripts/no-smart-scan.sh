#!/bin/sh
# no-smart-scan.sh CMD...: run CMD with /sys/kernel/mm/ksm/smart_scan 0, then put the knob
# back; exit with CMD's status. For upstream 6.12's ksm_tests -N, which marks its second
# page mergeable two full scans after the first and then waits two more: with smart scan
# (6.7+) the first page can be skipped in the scan that meets the second, which fails the
# test on 6.12 itself (11 of 20 runs in a two-node guest; 0 of 20 with smart_scan 0).
set -eu
knob=/sys/kernel/mm/ksm/smart_scan
[ -e $knob ] || { echo "no-smart-scan.sh: $knob missing: a kernel without smart scan" >&2; exit 1; }
old=$(cat $knob)
echo 0 > $knob
rc=0; "$@" || rc=$?
echo "$old" > $knob
exit $rc
