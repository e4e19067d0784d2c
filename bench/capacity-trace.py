"""capacity-trace.py [VARIANT]: the capacity run of bench/guest.py (KSM only, once), with
three lines per admitted worker: the full scan (of its convergence window) of the last
change of pages_sharing, the scans, ksmd CPU and the CPU until 99% of its merges
(guest.converge()) of the window; pages_sharing after each full scan; ksmd CPU seconds
since the window began after each full scan. Runs in a bench guest as root, like guest.py:

    VM_NODES=1 VM_QEMU_OPTS="-icount shift=0,sleep=off -smp 1" \\
        KERNEL=build/bench/out/run/arch/x86/boot/bzImage sh scripts/vm.sh 'python3 bench/capacity-trace.py'

It shows where a run's full scans go: the bulk of a new worker's pages merge in the first
scan of its window, and what merges later keeps the window open (guest.py's converge()
waits for 2 full scans without a change).
"""
import sys

sys.path.insert(0, 'bench')
import guest  # noqa: E402

converge = guest.converge


def traced(max_scans=60):
    r = converge(max_scans)
    d, tr = r[3], r[3]['trace']
    print('WINDOW last_change_scan %d scans %d cpu %.2f cpu99 %.2f late %d' % (
        r[1], d['full_scans'], d['cpu'], d['cpu99'], d['late_pages']), flush=True)
    print('  pages_sharing %s' % ' '.join(str(x[0]) for x in tr), flush=True)
    print('  ksmd_cpu_s    %s' % ' '.join('%.2f' % (x[1] - tr[0][1]) for x in tr), flush=True)
    return r


guest.converge = traced
guest.bench_capacity(1, sys.argv[1] if len(sys.argv) > 1 else 'def')
