"""capacity-trace.py [VARIANT]: the capacity run of bench/guest.py (KSM only, once), with
one line per admitted worker: the full scan (of its convergence window) of the last change
of pages_sharing, the scans and ksmd CPU of the window, and pages_sharing after each full
scan. Runs in a bench guest as root, like guest.py:

    VM_NODES=1 VM_QEMU_OPTS="-icount shift=0,sleep=off -smp 1" \\
        KERNEL=build/bench/out/run/arch/x86/boot/bzImage sh scripts/vm.sh 'python3 bench/capacity-trace.py'

It shows where a run's full scans go: the bulk of a new worker's pages merge in the first
scan of its window, and what merges later keeps the window open (guest.py's converge()
waits for 2 full scans without a change).
"""
import sys
import time

sys.path.insert(0, 'bench')
import guest  # noqa: E402


def converge(max_scans=60):
    c0 = guest.counters()
    guest.ksm('run', 1)
    s0 = last_scan = s_last = c0['full_scans']
    trace, last = [], -1
    while True:
        time.sleep(0.02)
        sharing, scans = guest.ksm('pages_sharing'), guest.ksm('full_scans')
        if scans != last_scan:
            trace.append(sharing)
            last_scan = scans
        if sharing != last:
            last, s_last = sharing, scans
        elif scans >= s_last + 2 and scans >= s0 + 3:
            break
        if scans > s0 + max_scans:
            break
    d = guest.delta(c0, guest.counters())
    print('WINDOW last_change_scan %d scans %d cpu %.2f trace %s' % (
        s_last - s0, guest.ksm('full_scans') - s0, d['cpu'], ' '.join(map(str, trace))), flush=True)
    return 0, s_last - s0, d['cpu'], d


guest.converge = converge
guest.bench_capacity(1, sys.argv[1] if len(sys.argv) > 1 else 'def')
