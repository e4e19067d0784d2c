"""guest.py (runs in the guest as root): every benchmark, REPS times; prints "BENCH name value".

    python3 bench/guest.py REPS [SECTION[:VARIANT[:REPS]]...]
    sections: hot python dedup ksmd ctl capacity two (two copies of python, global and domain)
    variants (python, capacity): def = the kernel's defaults, ss0 = smart_scan 0, adv =
    scan-time advisor, adv0 = the advisor with smart_scan 0; a variant runs with KSM only
    (no "nksm" run); none: both, defaults. A variant's measures are named py.ksm_VARIANT.*
    and cap.ksm_VARIANT.*

Benchmarks that need the series run only when the kernel has it (general_profit exists);
a benchmark that cannot run makes the exit status non-zero.
"""
import os
import select
import subprocess
import sys
import time

KSM = '/sys/kernel/mm/ksm/'
BIN = os.environ.get('BENCH_BIN', 'build/bench')
PATCHED = os.path.exists(KSM + 'general_profit')
SERIES = PATCHED and os.uname().release.startswith('6.1.')   # this series, not a peer
PAGE = os.sysconf('SC_PAGE_SIZE')
RECORDS = 60000        # python object graph: 64+ MiB (checked)
WORKERS = 4            # python workers for the memory figures
PRIVATE_MIB = 24       # unique data per worker (per-request state)
KSMD = {'pages_to_scan': 4000, 'sleep_millisecs': 20}
CAP_BUDGET_MIB = 384   # memory.max of the capacity cgroup
CAP_MAX = 24           # capacity is reported as ">= CAP_MAX" beyond this (bounded time)
SPARSE_GIB = (1, 64, 1024)  # reservations with 64 merged pages: unmerge cost vs size
STEADY_SCANS = 6       # full scans after convergence: ksmd's cost when nothing changes
ADV_TARGET_S = 5       # advisor_target_scan_time of the adv variants (virtual seconds)
ADV_SETTLE_MAX = 30    # full scans the advisor may take to settle before "after convergence"
VARIANTS = {           # knobs of each variant; None: the kernel's defaults
    None: {},
    'def': {},
    'ss0': {'smart_scan': 0},
    'adv': {'advisor_target_scan_time': ADV_TARGET_S},
    # smart scan off: a full scan costs the same every time, so the advisor has a fixed
    # target to reach (with smart scan the cost falls as pages age, see settle())
    'adv0': {'smart_scan': 0, 'advisor_target_scan_time': ADV_TARGET_S},
    # merge domains (patches 39-43): the workload is one domain (the launcher enables KSM,
    # the parent forks the workers), so it should save what it saves with global
    'dom': {'merge_scope': 'domain'},
}


def out(name, value):
    print('BENCH %s %s' % (name, value), flush=True)


def ksm(name, value=None):
    if value is None:
        with open(KSM + name) as f:
            return int(f.read())
    with open(KSM + name, 'w') as f:
        f.write('%d\n' % value)


def ksm_opt(name):
    """A counter or knob of /sys/kernel/mm/ksm, None when the kernel lacks it."""
    try:
        return ksm(name)
    except FileNotFoundError:
        return None


def ksm_str(name, value):
    with open(KSM + name, 'w') as f:
        f.write(value + '\n')


def set_variant(variant):
    """Defaults first (advisor off, smart scan as booted), then the variant's knobs."""
    if os.path.exists(KSM + 'advisor_mode'):
        ksm_str('advisor_mode', 'none')
    for k, v in KSMD.items():
        ksm(k, v)
    if os.path.exists(KSM + 'smart_scan'):
        ksm('smart_scan', 1)
    if os.path.exists(KSM + 'merge_scope'):
        set_scope('global')
    for k, v in VARIANTS[variant].items():
        if not os.path.exists(KSM + k):
            raise SystemExit('guest.py: variant %s needs %s, which this kernel lacks' % (variant, k))
        if k == 'merge_scope':
            set_scope(v)
        else:
            ksm(k, v)
    if 'advisor_target_scan_time' in VARIANTS[variant]:
        ksm_str('advisor_mode', 'scan-time')


def set_scope(scope):
    """merge_scope (global or domain); it may change only while nothing is merged, so
    unmerge everything first when it is not already the one asked for."""
    with open(KSM + 'merge_scope') as f:
        if '[%s]' % scope in f.read():
            return
    run_knob = ksm('run')
    ksm('run', 2)
    ksm_str('merge_scope', scope)
    ksm('run', run_knob)


def counters():
    """ksmd's CPU seconds and the scan counters, to subtract two readings."""
    return {'cpu': ksmd_cpu(), 'full_scans': ksm('full_scans'),
            'pages_scanned': ksm_opt('pages_scanned'), 'pages_skipped': ksm_opt('pages_skipped'),
            't': time.monotonic()}


def delta(a, b):
    return {k: (b[k] - a[k] if a[k] is not None and b[k] is not None else None) for k in a}


def meminfo():
    m = {}
    with open('/proc/meminfo') as f:
        for line in f:
            k, v = line.split(':')
            m[k] = int(v.split()[0])
    return m


def used_kib():
    m = meminfo()
    return m['MemTotal'] - m['MemAvailable']


def pss_kib(pids):
    total = 0
    for pid in pids:
        with open('/proc/%d/smaps_rollup' % pid) as f:
            total += sum(int(l.split()[1]) for l in f if l.startswith('Pss:'))
    return total


KSMD_CLOCK = []


def ksmd_cpu():
    """ksmd's CPU time in seconds, from its process CPU clock (clock_getcpuclockid(): the
    scheduler's runtime in ns). /proc/PID/stat gives it in 10 ms clock ticks: the difference
    of two readings is off by up to a tick, 0.6% of the ~1.6 s the 6 full scans of the
    steady measure cost."""
    for pid in [p for p in os.listdir('/proc') if p.isdigit()] if not KSMD_CLOCK else []:
        try:
            with open('/proc/%s/stat' % pid) as f:
                if f.read().split()[1] == '(ksmd)':
                    KSMD_CLOCK.append(((~int(pid)) << 3) | 2)   # CPUCLOCK_SCHED, process
                    break
        except OSError:
            continue
    if not KSMD_CLOCK:
        raise SystemExit('guest.py: no ksmd thread')
    return time.clock_gettime_ns(KSMD_CLOCK[0]) / 1e9


def scan(pids):
    """(distinct anonymous physical pages, distinct contents) of pids: ksmbench dupscan."""
    r = run([BIN + '/ksmbench', 'dupscan'] + [str(p) for p in pids], quiet=True).split()
    return int(r[1]), int(r[2])


def converge(max_scans=60):
    """Start ksmd; wait until pages_sharing is unchanged for 2 full scans.
    Returns (seconds, full scans) until the last change, ksmd CPU seconds, and the
    counters' changes until convergence was detected, with three more: trace, (pages_sharing,
    ksmd CPU seconds) at the start and after each full scan; cpu99, ksmd CPU seconds until
    the end of the first full scan by which 99% of what the window merged had merged; and
    late_pages, what merged after that scan."""
    c0 = counters()
    ksm('run', 1)
    last, t_last, s_last = -1, 0.0, c0['full_scans']
    trace, seen = [(ksm('pages_sharing'), c0['cpu'])], c0['full_scans']
    while True:
        time.sleep(0.05)
        sharing, scans = ksm('pages_sharing'), ksm('full_scans')
        if scans != seen:
            seen = scans
            trace.append((sharing, ksmd_cpu()))
        if sharing != last:
            last, t_last, s_last = sharing, time.monotonic() - c0['t'], scans
        elif scans >= s_last + 2 and scans >= c0['full_scans'] + 3:
            break
        if scans > c0['full_scans'] + max_scans:
            raise SystemExit('guest.py: merging did not converge in %d full scans' % max_scans)
    d = delta(c0, counters())
    d['trace'] = trace
    final = trace[-1][0]
    for sharing, cpu in trace:
        if final - sharing <= 0.01 * (final - trace[0][0]):
            d['cpu99'], d['late_pages'] = cpu - c0['cpu'], final - sharing
            break
    return t_last, s_last - c0['full_scans'], d['cpu'], d


def next_scan():
    """Wait for the next full scan to end."""
    s = ksm('full_scans')
    while ksm('full_scans') == s:
        time.sleep(0.01)


def settle(max_scans=ADV_SETTLE_MAX):
    """Full scans until the advisor left pages_to_scan unchanged for 3 scans in a row (at
    most max_scans); returns their number."""
    last, same, n = ksm('pages_to_scan'), 0, 0
    while same < 3 and n < max_scans:
        next_scan()
        n += 1
        cur = ksm('pages_to_scan')
        same, last = (same + 1 if cur == last else 0), cur
    return n


def steady(scans=STEADY_SCANS):
    """ksmd running on a converged workload: (counters' changes over `scans` full scans,
    the duration of each, virtual s)."""
    next_scan()                         # from the start of a full scan
    c0, times = counters(), []
    while len(times) < scans:
        t = time.monotonic()
        next_scan()
        times.append(time.monotonic() - t)
    return delta(c0, counters()), times


class Server:
    """The python prefork server, launched with or without per-process KSM."""

    def __init__(self, use_ksm, cgroup=None):
        cmd = ['python3', 'bench/pygc.py', str(RECORDS), str(PRIVATE_MIB)]
        if use_ksm:
            cmd = [BIN + '/ksmbench', 'exec'] + cmd
        pre = None
        if cgroup:
            def pre():
                with open(cgroup + '/cgroup.procs', 'w') as f:
                    f.write('0\n')
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, start_new_session=True, preexec_fn=pre)
        line = self.p.stdout.readline().split()
        if not line or line[0] != 'PARENT':
            raise SystemExit('guest.py: pygc.py did not start: %r' % line)
        self.pids = [int(line[1])]
        self.graph_kib = int(line[2])
        if self.graph_kib < 64 << 10:
            raise SystemExit('guest.py: graph is only %d KiB, want >= 64 MiB' % self.graph_kib)

    def fork(self):
        """One more worker; returns False if it died (OOM kill) before it was ready."""
        self.p.stdin.write('fork\n')
        self.p.stdin.flush()
        line = self.p.stdout.readline().split()
        if len(line) != 2 or line[0] != 'FORKED':
            raise SystemExit('guest.py: pygc.py did not fork: %r' % line)
        pid = int(line[1])
        while not select.select([self.p.stdout], [], [], 0.2)[0]:
            if not alive(pid):
                return False
        line = self.p.stdout.readline().split()
        if line != ['READY', str(pid)]:
            raise SystemExit('guest.py: worker %d: %r' % (pid, line))
        self.pids.append(pid)
        return True

    def stop(self):
        """Kill the parent and its workers; return once they all have released memory."""
        try:
            os.killpg(self.p.pid, 9)
        except ProcessLookupError:
            pass
        self.p.wait()
        for pid in self.pids[1:]:
            for _ in range(400):
                if not alive(pid):
                    break
                time.sleep(0.05)


def alive(pid):
    """pid exists and has not exited (a zombie has released its memory)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] not in 'ZX'
    except OSError:
        return False


def bench_hot(reps):
    # Address space layout randomization off: under -icount the time of fork + exit is the
    # instructions it runs, which follow the layout (how many page tables the process has):
    # with ASLR, 12 runs of the same kernel spread over 285-302 us (+-3%), without it over
    # 276.1-276.5 us (+-0.1%), so only the latter tells 0.5% apart.
    with open('/proc/sys/kernel/randomize_va_space') as f:
        aslr = f.read().strip()
    set_aslr('0')
    out('hot.randomize_va_space', 0)
    try:
        for _ in range(reps):
            run([BIN + '/ksmbench', 'hot', 'off', '20000'])
            if PATCHED:
                run([BIN + '/ksmbench', 'hot', 'on', '20000'])
    finally:
        set_aslr(aslr)


def set_aslr(value):
    with open('/proc/sys/kernel/randomize_va_space', 'w') as f:
        f.write(value + '\n')


def bench_python(reps, variant=None):
    ksm('run', 2)
    modes = ('nksm', 'ksm') if PATCHED else ('nksm',)
    if variant:
        modes = ('ksm',)
    for k in range(reps):
        for mode in modes:
            set_variant(variant)
            ksm('run', 0)
            s = Server(mode == 'ksm')
            for _ in range(WORKERS):
                if not s.fork():
                    raise SystemExit('guest.py: a python worker died')
            time.sleep(0.5)
            p = 'py.%s%s.' % (mode, '_' + variant if variant else '')
            out(p + 'graph_mib', round(s.graph_kib / 1024, 1))
            out(p + 'pss_mib', round(pss_kib(s.pids) / 1024, 1))
            used = [used_kib()]
            if mode == 'ksm':
                before, contents = scan(s.pids)
                dups = before - contents
                t, scans, cpu, d = converge()
                for name in ('pages_scanned', 'pages_skipped'):
                    if d[name] is not None:
                        out(p + 'converge_' + name, d[name])
                if variant and variant.startswith('adv'):
                    out(p + 'settle_scans', settle())
                d, times = steady()
                out(p + 'steady_ksmd_cpu_ms_per_scan', round(d['cpu'] * 1000 / len(times), 1))
                out(p + 'steady_scan_s', round(sorted(times)[len(times) // 2], 2))
                out(p + 'steady_ksmd_cpu_pct', round(d['cpu'] * 100 / sum(times), 1))
                for name in ('pages_scanned', 'pages_skipped'):
                    if d[name] is not None:
                        out(p + 'steady_%s_per_scan' % name, d[name] // len(times))
                out(p + 'pages_to_scan', ksm('pages_to_scan'))
                ksm('run', 0)
                after = scan(s.pids)[0]
                time.sleep(0.5)
                out(p + 'pss_after_mib', round(pss_kib(s.pids) / 1024, 1))
                used.append(used_kib())
                out(p + 'pages_sharing', ksm('pages_sharing'))
                out(p + 'pages_shared', ksm('pages_shared'))
                out(p + 'general_profit_mib', round(ksm('general_profit') / 2**20, 1))
                out(p + 'converge_s', round(t, 2))
                out(p + 'converge_full_scans', scans)
                out(p + 'ksmd_cpu_s', round(cpu, 2))
                out(p + 'saved_pages', before - after)
                if not variant:
                    out('dedup.py.anon_pages', before)
                    out('dedup.py.duplicates', dups)
                    out('dedup.py.saved_pages', before - after)
                    out('dedup.py.efficiency', round((before - after) / dups, 4))
            s.stop()
            ksm('run', 2)
            time.sleep(0.5)
            idle = used_kib()   # MemTotal - MemAvailable without the workload
            for u, name in zip(used, ('used_mib', 'used_after_mib')):
                out(p + name, round((u - idle) / 1024, 1))


def bench_two(reps, variant=None):
    """Two copies of the python workload, each launched with KSM on by its own launcher, so
    that each is a merge domain of its own with merge_scope=domain: what the two save
    together with global and with domain, and how many anonymous pages of one copy are
    also mapped in the other after merging (cross_pages: 0 when nothing merges across)."""
    if not os.path.exists(KSM + 'merge_scope'):
        raise SystemExit('guest.py: two: this kernel has no merge_scope')
    for _ in range(reps):
        for scope in ('global', 'domain'):
            ksm('run', 2)
            set_variant(None)
            set_scope(scope)
            ksm('run', 0)
            copies = [Server(True), Server(True)]
            for s in copies:
                for _ in range(WORKERS):
                    if not s.fork():
                        raise SystemExit('guest.py: a python worker died')
            time.sleep(0.5)
            pids = copies[0].pids + copies[1].pids
            before = scan(pids)[0]
            t, scans, cpu, d = converge()
            ksm('run', 0)
            after = scan(pids)[0]
            each = [scan(s.pids)[0] for s in copies]
            p = 'py2.%s.' % scope
            out(p + 'saved_pages', before - after)
            out(p + 'cross_pages', sum(each) - after)
            out(p + 'pages_sharing', ksm('pages_sharing'))
            out(p + 'merge_domains', ksm('merge_domains'))
            out(p + 'converge_s', round(t, 2))
            out(p + 'ksmd_cpu_s', round(cpu, 2))
            for s in copies:
                s.stop()
            ksm('run', 2)
            time.sleep(0.5)
    set_scope('global')


def run(cmd, quiet=False):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if not quiet:
        sys.stdout.write(r.stdout)
        sys.stdout.flush()
    if r.returncode:
        raise SystemExit('guest.py: %s failed (exit %d)' % (' '.join(cmd), r.returncode))
    return r.stdout


def bench_dedup(reps):
    if PATCHED:
        for _ in range(reps):
            run([BIN + '/ksmbench', 'synth'])


def bench_ksmd(reps):
    for _ in range(reps):
        for t in ('0', '1') if PATCHED else ('0',):
            o = run([BIN + '/ksm_tests', '-P', '-s', '128', '-t', t])
            secs = [l.split()[2] for l in o.splitlines() if l.startswith('Total time:')]
            if not secs:
                raise SystemExit('guest.py: ksm_tests -P -t %s printed no time' % t)
            out('ksmd.merge_128MiB.%s_s' % ('madvise' if t == '0' else 'prctl'), secs[0])


def bench_ctl(reps):
    for k in range(reps):
        if PATCHED:
            run([BIN + '/ksmbench', 'enable', '10000'])
            run([BIN + '/ksmbench', 'unmerge', 'prctl', '256'])
        run([BIN + '/ksmbench', 'unmerge', 'madvise', '256'])
        # base and 6.12: unmerging 1 TiB visits every address, about a minute per run:
        # once is enough there
        for gib in SPARSE_GIB:
            if gib >= 1024 and k and not SERIES:
                continue
            for how in ('madvise', 'prctl') if PATCHED else ('madvise',):
                run([BIN + '/ksmbench', 'sparse', how, str(gib)])


def bench_capacity(reps, variant=None):
    """Workers that fit in a memory cgroup of CAP_BUDGET_MIB, parent included.

    Admission control, as a scheduler does it: one more worker starts while the cgroup's
    memory.current plus the peak one new worker takes before merging stays within the
    budget (memory.max = the budget too: an OOM kill also ends the count). With KSM,
    ksmd runs to convergence before the next worker is admitted."""
    cg = '/sys/fs/cgroup'
    if not os.path.exists(cg + '/cgroup.controllers'):
        subprocess.run(['mount', '-t', 'cgroup2', 'none', cg], check=True)
    with open(cg + '/cgroup.subtree_control', 'w') as f:
        f.write('+memory\n')
    budget = CAP_BUDGET_MIB << 20
    modes = ('nksm', 'ksm') if PATCHED else ('nksm',)
    if variant:
        modes = ('ksm',)
    for k in range(reps):
        for mode in modes:
            g = '%s/cap%d%s%s' % (cg, k, mode, variant or '')
            set_variant(variant)
            os.mkdir(g)
            with open(g + '/memory.max', 'w') as f:
                f.write('%d\n' % budget)
            ksm('run', 2)
            ksm('run', 0)
            t, c0 = time.monotonic(), counters()
            s = Server(mode == 'ksm', g)
            n, peak, cpu99, late = 0, 0, 0.0, 0
            p = 'cap.%s%s.' % (mode, '_' + variant if variant else '')
            while n < CAP_MAX:
                cur = cg_read(g, 'memory.current')
                if n and cur + peak > budget:
                    break
                if not s.fork() or oom_kills(g):
                    break
                n += 1
                peak = max(peak, cg_read(g, 'memory.current') - cur)
                if mode == 'ksm':
                    d = converge()[3]
                    cpu99 += d['cpu99']
                    late += d['late_pages']
                    ksm('run', 0)
            d = delta(c0, counters())
            out(p + 'workers', n)
            out(p + 'worker_peak_mib', round(peak / 2**20, 1))
            out(p + 'used_mib', round(cg_read(g, 'memory.current') / 2**20, 1))
            out(p + 'capped', int(n >= CAP_MAX))
            out(p + 'time_s', round(time.monotonic() - t, 1))
            if mode == 'ksm':
                out(p + 'ksmd_cpu_s', round(d['cpu'], 2))
                out(p + 'ksmd_cpu99_s', round(cpu99, 2))
                out(p + 'late_pages', late)
                out(p + 'full_scans', d['full_scans'])
                for name in ('pages_scanned', 'pages_skipped'):
                    if d[name] is not None:
                        out(p + name, d[name])
            s.stop()
            ksm('run', 2)
            for _ in range(200):      # killed workers may still be exiting
                with open(g + '/cgroup.events') as f:
                    if 'populated 0' in f.read():
                        break
                time.sleep(0.05)
            os.rmdir(g)


def cg_read(g, name):
    with open('%s/%s' % (g, name)) as f:
        return int(f.read())


def oom_kills(g):
    with open(g + '/memory.events') as f:
        return sum(int(l.split()[1]) for l in f if l.startswith('oom_kill '))


def main():
    reps = int(sys.argv[1])
    sections = sys.argv[2:] or ['hot', 'python', 'dedup', 'ksmd', 'ctl', 'capacity']
    out('kernel.patched', int(PATCHED))
    out('kernel.release', os.uname().release)
    for k, v in (('records', RECORDS), ('workers', WORKERS), ('private_mib', PRIVATE_MIB),
                 ('cap_budget_mib', CAP_BUDGET_MIB), ('cap_max', CAP_MAX)):
        out('param.' + k, v)
    for k, v in KSMD.items():
        ksm(k, v)
        out('param.ksmd_' + k, v)
    out('param.smart_scan', ksm_opt('smart_scan'))
    out('param.adv_target_s', ADV_TARGET_S)
    out('param.adv_settle_max', ADV_SETTLE_MAX)
    for spec in sections:
        sec, variant, n = (spec.split(':') + ['', ''])[:3]
        t = time.monotonic()
        if variant:
            globals()['bench_' + sec](int(n or reps), variant)
        else:
            globals()['bench_' + sec](reps)
        out('section.%s_s' % spec.replace(':', '_'), round(time.monotonic() - t, 1))
        print('guest.py: %s done' % spec, file=sys.stderr, flush=True)


if __name__ == '__main__':
    main()
