"""report.py DIR ICOUNT REPS: read the BENCH lines of DIR/{base,patched,patched-cap,
patched-dom,nodom,peer,peer-cap}.console and DIR/timing, write bench/results.md (tables:
median and spread of each measure, ratios patched/base, patched/6.12 and patched/the
series without merge domains) and bench/results.png."""
import os
import platform
import statistics
import subprocess
import sys

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    vals = {}
    with open(path, errors='replace') as f:
        for line in f:
            line = line.strip('\r\n')
            if line.startswith('BENCH '):
                _, name, value = line.split(None, 2)
                vals.setdefault(name, []).append(value)
    return vals


def nums(d, name):
    return [float(v) for v in d.get(name, [])]


def med(d, name):
    v = nums(d, name)
    return statistics.median(v) if v else None


def spread(d, name):
    """Half the range, in % of the median."""
    v = nums(d, name)
    m = statistics.median(v) if v else 0
    return (max(v) - min(v)) / 2 / m * 100 if v and m else 0.0


def cell(d, name, fmt='%.1f'):
    v = nums(d, name)
    if not v:
        return 'n/a on base' if d is BASE else 'n/a'
    return (fmt % statistics.median(v)) + ' ±%.1f%%' % spread(d, name) + (
        '' if len(v) > 1 else ' (1 run)')


def ratio(a, b):
    return a / b if a is not None and b else None


def rcell(x, fmt='%.4f'):
    return fmt % x if x is not None else '–'


def goal(x, limit):
    """Whether a measured x meets the goal x <= limit."""
    if x is None:
        return 'n/a'
    return 'met' if x <= limit else '**NOT met**'


def ms_fmt(d, name):
    """Enough decimals for a time in ms, from µs to minutes."""
    m = med(d, name)
    return '%.1f' if m is not None and m >= 100 else '%.3f'


def rsmall(x):
    """A ratio that may be orders of magnitude below 1."""
    return rcell(x, '%.4f' if x is None or x >= 0.01 else '%.1e')


def size(gib):
    return '%d TiB' % (gib >> 10) if gib >= 1024 and not gib % 1024 else '%d GiB' % gib


out_dir, icount, reps = sys.argv[1], sys.argv[2], sys.argv[3]
BASE = load(os.path.join(out_dir, 'base.console'))
PATCHED = load(os.path.join(out_dir, 'patched.console'))
for g in ('patched-cap', 'patched-dom'):
    for k, v in load(os.path.join(out_dir, g + '.console')).items():
        PATCHED.setdefault(k, []).extend(v)
NODOM = load(os.path.join(out_dir, 'nodom.console'))   # the series without merge domains
PEER = load(os.path.join(out_dir, 'peer.console'))
for k, v in load(os.path.join(out_dir, 'peer-cap.console')).items():
    PEER.setdefault(k, []).extend(v)
B, P, Q = BASE, PATCHED, PEER
if set(B.get('kernel.patched', [])) != {'0'} or set(P.get('kernel.patched', [])) != {'1'}:
    sys.exit('report.py: the base guest must run a kernel without the series and the patched '
             'guests one with it (kernel.patched: base %s, patched %s)' % (
                 B.get('kernel.patched'), P.get('kernel.patched')))
for need in ('py.nksm.pss_mib', 'hot.off.mmap_munmap_ns', 'cap.nksm.workers'):
    if need not in B or need not in P:
        sys.exit('report.py: %s missing from the guest output in %s' % (need, out_dir))
for d, need in ((P, 'cap.ksm_ss0.workers'), (P, 'py.ksm_adv.steady_scan_s'),
                (P, 'py.ksm_adv0.steady_scan_s'), (Q, 'py.ksm_adv0.steady_scan_s'),
                (Q, 'cap.ksm_def.workers'), (Q, 'py.ksm.pss_after_mib'),
                (P, 'py.ksm_dom.saved_pages'), (P, 'py2.domain.saved_pages'),
                (NODOM, 'py.ksm.steady_ksmd_cpu_ms_per_scan'), (NODOM, 'hot.on.mmap_munmap_ns'),
                (NODOM, 'ksmd.merge_128MiB.madvise_s')):
    if need not in d:
        sys.exit('report.py: %s missing from the guest output in %s' % (need, out_dir))
timing = []
with open(os.path.join(out_dir, 'timing')) as f:
    for line in f:
        name, secs = line.rsplit(None, 1)
        timing.append((name, int(secs) if secs.isdigit() else 0))

qemu = subprocess.run(['qemu-system-x86_64', '--version'], stdout=subprocess.PIPE,
                      text=True).stdout.splitlines()[0]
cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), '?')
rev = subprocess.run(['git', 'describe', '--always', '--dirty'], stdout=subprocess.PIPE,
                     text=True).stdout.strip()
# a run from a dirty tree names what was not committed (untracked files too: a new script a
# run used), so that its figures can be traced
dirty = subprocess.run(['git', 'status', '--porcelain'], stdout=subprocess.PIPE,
                       text=True).stdout.splitlines()
dirty = [l[3:] for l in dirty if l[3:] not in ('bench/results.md', 'bench/results.png', 'README.md')]
if dirty:
    rev += ' (uncommitted: %s)' % ', '.join(dirty)
par = {k[6:]: v[0] for k, v in P.items() if k.startswith('param.')}

L = []
w = L.append
w('# Benchmark results: per-process KSM, base 6.1 vs patched 6.1 vs 6.12')
w('')
w('Command: `make bench` (scripts/bench.sh, BENCH_REPS=%s) at %s, repo %s.' % (
    reps, subprocess.run(['date', '-u', '+%Y-%m-%d %H:%M UTC'], stdout=subprocess.PIPE,
                         text=True).stdout.strip(), rev))
w('Each cell: median of %s runs ± half the range (min..max) in %% of the median. '
  'Ratios: patched/base of the medians.' % reps)
w('')
w('| setting | value |')
w('| --- | --- |')
w('| kernels | base = %s without the series (build/bench/base-src), patched = %s (build/bench/src = base + patches/), 6.12 = %s (Debian\'s linux-source-6.12, build/bench/peer-src); same fragments `config/base.config config/ksm.config config/bench.config` (tinyconfig + fragments, no debug options, -O2 as Debian builds) |' % (B['kernel.release'][0], P['kernel.release'][0], Q['kernel.release'][0]))
w('| QEMU | %s: `-accel tcg -cpu max -smp 1 -m 2G -icount %s`, host root over 9p (scripts/vm.sh) |' % (qemu, icount))
w('| time | guest CLOCK_MONOTONIC under `-icount shift=0`: 1 ns of virtual time per guest instruction, independent of host load; `sleep=off`: idle time is skipped (ksmd sleeps cost no wall time). `-smp 1` (SMP bring-up hangs under -icount with this QEMU) |')
w('| host | %s, %d cores (guests run in parallel, one host thread each) |' % (cpu, os.cpu_count()))
w('| ksmd | pages_to_scan %s, sleep_millisecs %s (stopped, run=0, during hot-path and control-path timings) |' % (par['ksmd_pages_to_scan'], par['ksmd_sleep_millisecs']))
w('| python workload | bench/pygc.py: parent builds %s records (dicts, lists, strings: %s MiB of graph), forks %s workers; each walks the whole graph (reference-count writes) and holds %s MiB of private random data, then idles |' % (par['records'], cell(P, 'py.nksm.graph_mib'), par['workers'], par['private_mib']))
w('')

# 1. python
w('## 1. Forked Python workers (the motivating case)')
w('')
w('| measure | base, no KSM | patched, no KSM | patched, KSM by launcher (prctl + exec), merged |')
w('| --- | --- | --- | --- |')
w('| sum of PSS, parent + %s workers (MiB) | %s | %s | %s (before merging: %s) |' % (
    par['workers'], cell(B, 'py.nksm.pss_mib'), cell(P, 'py.nksm.pss_mib'),
    cell(P, 'py.ksm.pss_after_mib'), cell(P, 'py.ksm.pss_mib')))
w('| MemTotal − MemAvailable, workload (MiB) | %s | %s | %s (before merging: %s) |' % (
    cell(B, 'py.nksm.used_mib'), cell(P, 'py.nksm.used_mib'),
    cell(P, 'py.ksm.used_after_mib'), cell(P, 'py.ksm.used_mib')))
for name, label, fmt in (('pages_sharing', 'pages_sharing', '%.0f'),
                         ('pages_shared', 'pages_shared', '%.0f'),
                         ('general_profit_mib', 'general_profit (MiB)', '%.1f'),
                         ('converge_s', 'time until merging converges (s, from ksmd start)', '%.2f'),
                         ('converge_full_scans', 'full scans until it converges', '%.0f'),
                         ('ksmd_cpu_s', 'ksmd CPU time (s, until convergence is detected)', '%.2f')):
    w('| %s | n/a on base | – | %s |' % (label, cell(P, 'py.ksm.' + name, fmt)))
pss_saved = 1 - med(P, 'py.ksm.pss_after_mib') / med(P, 'py.nksm.pss_mib')
used_saved = 1 - med(P, 'py.ksm.used_after_mib') / med(P, 'py.nksm.used_mib')
w('| memory saved vs no KSM | | | **%.1f%%** of PSS, %.1f%% of MemTotal − MemAvailable |' % (
    pss_saved * 100, used_saved * 100))
w('')
w('Capacity: workers admitted into a memory cgroup of %s MiB (memory.max; parent included) '
  'while memory.current + the peak of one new worker fits; with KSM, ksmd converges '
  'before the next worker starts (bench/guest.py bench_capacity).' % par['cap_budget_mib'])
w('')
w('| measure | base, no KSM | patched, no KSM | patched, KSM |')
w('| --- | --- | --- | --- |')
w('| workers that fit | %s | %s | %s |' % (cell(B, 'cap.nksm.workers', '%.0f'),
  cell(P, 'cap.nksm.workers', '%.0f'), cell(P, 'cap.ksm.workers', '%.0f')))
w('| peak of one new worker (MiB) | %s | %s | %s |' % (cell(B, 'cap.nksm.worker_peak_mib'),
  cell(P, 'cap.nksm.worker_peak_mib'), cell(P, 'cap.ksm.worker_peak_mib')))
w('| memory.current at the end (MiB) | %s | %s | %s |' % (cell(B, 'cap.nksm.used_mib'),
  cell(P, 'cap.nksm.used_mib'), cell(P, 'cap.ksm.used_mib')))
cap_gain = med(P, 'cap.ksm.workers') / med(P, 'cap.nksm.workers') - 1
capped = max(nums(P, 'cap.ksm.capped') or [0])
w('| capacity gain with KSM | | | **%+.0f%%**%s |' % (cap_gain * 100,
  ' (hit the cap of %s workers: a lower bound)' % par['cap_max'] if capped else ''))
w('')

# 2. dedup
w('## 2. Dedup efficiency against the physical limit')
w('')
w('Duplicates present = distinct anonymous physical pages − distinct contents among them '
  '(`ksmbench dupscan`: /proc/PID/pagemap + /proc/PID/mem, before ksmd starts); merged = '
  'physical pages freed (the same scan after convergence; synthetic: pages mapped to a '
  'KSM page − distinct KSM pages, via /proc/kpageflags). The limit is 1.0.')
w('')
w('| workload | pages scanned | duplicates present | merged | efficiency |')
w('| --- | --- | --- | --- | --- |')
w('| python (section 1) | %s | %s | %s | **%s** |' % (cell(P, 'dedup.py.anon_pages', '%.0f'),
  cell(P, 'dedup.py.duplicates', '%.0f'), cell(P, 'dedup.py.saved_pages', '%.0f'),
  cell(P, 'dedup.py.efficiency', '%.4f')))
w('| synthetic: 2048 unique pages, 256 contents x 8, 64 x 32 (known: 3776) | %s | %s | %s | **%s** |' % (
  cell(P, 'dedup.synth.pages', '%.0f'), cell(P, 'dedup.synth.duplicates', '%.0f'),
  cell(P, 'dedup.synth.saved_pages', '%.0f'), cell(P, 'dedup.synth.efficiency', '%.4f')))
w('')
w('Base kernel: n/a (needs PR_SET_MEMORY_MERGE).')
w('')

# 3. ksmd throughput
w('## 3. ksmd throughput: prctl vs madvise')
w('')
w('`ksm_tests -P -s 128 -t 0|1` (series selftest): time for ksmd to merge 128 MiB of '
  'identical pages, merging asked by madvise (0) or prctl (1).')
w('')
mad_p, prc_p = med(P, 'ksmd.merge_128MiB.madvise_s'), med(P, 'ksmd.merge_128MiB.prctl_s')
mad_b = med(B, 'ksmd.merge_128MiB.madvise_s')
w('| measure | base | patched | ratio |')
w('| --- | --- | --- | --- |')
w('| madvise, s | %s | %s | patched/base %s |' % (cell(B, 'ksmd.merge_128MiB.madvise_s', '%.3f'),
  cell(P, 'ksmd.merge_128MiB.madvise_s', '%.3f'), rcell(ratio(mad_p, mad_b))))
w('| prctl, s | n/a on base | %s | **prctl/madvise %s** |' % (
  cell(P, 'ksmd.merge_128MiB.prctl_s', '%.3f'), rcell(ratio(prc_p, mad_p))))
w('')

# 4. hot paths
ops = [('mmap_munmap', 'mmap + munmap, 16 pages'), ('brk', 'brk grow + shrink, 64 pages'),
       ('fork_exit', 'fork + _exit + waitpid'), ('mremap', 'mremap grow (may move) + shrink'),
       ('page_fault', 'anonymous page fault (per page, 4 MiB)')]
w('## 4. Hot paths')
w('')
w('ns per operation (`ksmbench hot off|on`). Feature off: runs on both kernels. Feature on: '
  'the process called PR_SET_MEMORY_MERGE first (ksmd stopped: this is the cost of marking '
  'VMAs and registering with ksmd, not of scanning); compared with the base kernel (off).')
w('')
if nums(B, 'hot.randomize_va_space') and nums(P, 'hot.randomize_va_space'):
    w('Address space layout randomization off (`randomize_va_space` 0) while they run: under '
      '-icount the time of fork + exit is the instructions it runs, and they follow the '
      'layout (how many page tables the process has); with ASLR, runs of one kernel spread '
      'over ±3%.')
else:
    w('**With ASLR on** (this run predates `randomize_va_space` 0 for the hot paths): fork + '
      'exit varies by ±3% between runs of one kernel with the layout; its ratio here is noise '
      'at that scale (README, "Benchmarks").')
w('')
w('| operation | base (off) | patched, off | ratio off | patched, on | ratio on/base |')
w('| --- | --- | --- | --- | --- | --- |')
hot = []
for op, label in ops:
    b, po, pn = med(B, 'hot.off.%s_ns' % op), med(P, 'hot.off.%s_ns' % op), med(P, 'hot.on.%s_ns' % op)
    hot.append((op, ratio(po, b), ratio(pn, b)))
    w('| %s | %s | %s | **%s** | %s | **%s** |' % (label, cell(B, 'hot.off.%s_ns' % op),
      cell(P, 'hot.off.%s_ns' % op), rcell(ratio(po, b)), cell(P, 'hot.on.%s_ns' % op),
      rcell(ratio(pn, b))))
w('| VMAs after 10,000 adjacent anonymous mmaps | %s | %s | | %s | goal: equal to base |' % (
  cell(B, 'hot.off.vmas_after_10000_mmaps', '%.0f'), cell(P, 'hot.off.vmas_after_10000_mmaps', '%.0f'),
  cell(P, 'hot.on.vmas_after_10000_mmaps', '%.0f')))
w('')

# 5. control path
w('## 5. Control path')
w('')
up, um = med(P, 'ctl.unmerge_256MiB.prctl_ms'), med(P, 'ctl.unmerge_256MiB.madvise_ms')
def vs_peer(name):
    return 'patched/6.12 %s' % rcell(ratio(med(P, name), med(Q, name)))


w('| measure | base | patched | 6.12 | ratio |')
w('| --- | --- | --- | --- | --- |')
w('| prctl(PR_SET_MEMORY_MERGE, 1) on a process with %s VMAs, µs | n/a on base | %s | %s | %s |' % (
  '%.0f' % med(P, 'ctl.vmas'), cell(P, 'ctl.enable_10000_vmas_us'), cell(Q, 'ctl.enable_10000_vmas_us'),
  vs_peer('ctl.enable_10000_vmas_us')))
w('| disable: prctl(PR_SET_MEMORY_MERGE, 0), 256 MiB merged (%s pages freed by KSM), ms | n/a on base | %s | %s | **prctl/madvise %s**, %s |' % (
  '%.0f' % med(P, 'ctl.prctl.saved_pages'), cell(P, 'ctl.unmerge_256MiB.prctl_ms', '%.2f'),
  cell(Q, 'ctl.unmerge_256MiB.prctl_ms', '%.2f'), rcell(ratio(up, um)), vs_peer('ctl.unmerge_256MiB.prctl_ms')))
dense = ratio(um, med(B, 'ctl.unmerge_256MiB.madvise_ms'))
w('| madvise(MADV_UNMERGEABLE) of the same 256 MiB, ms | %s | %s | %s | patched/base **%s** (goal ≤ 1.02: %s), %s |' % (
  cell(B, 'ctl.unmerge_256MiB.madvise_ms', '%.2f'), cell(P, 'ctl.unmerge_256MiB.madvise_ms', '%.2f'),
  cell(Q, 'ctl.unmerge_256MiB.madvise_ms', '%.2f'), rcell(dense), goal(dense, 1.02),
  vs_peer('ctl.unmerge_256MiB.madvise_ms')))
w('')
SPARSE = (1, 64, 1024)
w('Sparse reservations (`ksmbench sparse madvise|prctl GIB`): GIB GiB mapped `MAP_NORESERVE`, '
  '64 pages touched (evenly spread, the same content) and merged into one KSM page, the rest '
  'never touched; timed: `MADV_UNMERGEABLE` of the whole reservation (one mergeable VMA), or '
  '`prctl(PR_SET_MEMORY_MERGE, 0)` of the process holding it; all 64 pages checked unmerged '
  'afterwards. Goal: the cost follows the pages present, not the size of the reservation: '
  '1 TiB ≤ 10 ms, 1 TiB / 64 GiB ≤ 1.5 (patched).')
w('')
w('| measure | base | patched | 6.12 | ratio |')
w('| --- | --- | --- | --- | --- |')
sp = {}
for gib in SPARSE:
    mk, pk = 'ctl.unmerge_sparse_%dGiB.madvise_ms' % gib, 'ctl.unmerge_sparse_%dGiB.prctl_ms' % gib
    sp[gib] = (med(B, mk), med(P, mk), med(P, pk))
    w('| madvise(MADV_UNMERGEABLE), %s reservation, ms | %s | %s | %s | patched/base %s, %s |' % (
      size(gib), cell(B, mk, ms_fmt(B, mk)), cell(P, mk, ms_fmt(P, mk)), cell(Q, mk, ms_fmt(Q, mk)),
      rsmall(ratio(sp[gib][1], sp[gib][0])), vs_peer(mk)))
    w('| prctl(PR_SET_MEMORY_MERGE, 0), %s reservation, ms | n/a on base | %s | %s | prctl/madvise %s, %s |' % (
      size(gib), cell(P, pk, ms_fmt(P, pk)), cell(Q, pk, ms_fmt(Q, pk)), rcell(ratio(sp[gib][2], sp[gib][1])),
      vs_peer(pk)))
big, mid = sp[SPARSE[-1]], sp[SPARSE[-2]]
growth = [ratio(big[i], mid[i]) for i in range(3)]   # madvise base, madvise patched, prctl patched
w('| %s / %s, madvise | %s | **%s** | | goal ≤ 1.5 (patched): %s |' % (
  size(SPARSE[-1]), size(SPARSE[-2]), rcell(growth[0], '%.2f'), rcell(growth[1], '%.2f'), goal(growth[1], 1.5)))
w('| %s / %s, prctl | n/a on base | **%s** | | goal ≤ 1.5 (patched): %s |' % (
  size(SPARSE[-1]), size(SPARSE[-2]), rcell(growth[2], '%.2f'), goal(growth[2], 1.5)))
w('| %s, madvise and prctl, ms | | **%s**, **%s** | | goal ≤ 10 ms (patched): %s, %s |' % (
  size(SPARSE[-1]), rcell(big[1], '%.3f'), rcell(big[2], '%.3f'), goal(big[1], 10), goal(big[2], 10)))
w('')

# 6. ksmd's cost
adv_t = float(par['adv_target_s'])
w('## 6. What ksmd costs: smart scan and the scan-time advisor, patched 6.1 vs 6.12')
w('')
w('The workloads of section 1 with KSM, on the patched kernel with `smart_scan` 0 and 1 (its '
  'default), on 6.12 with its defaults (smart scan on), and on both with the advisor '
  '(`advisor_mode` scan-time, `advisor_target_scan_time` %.0f s of virtual time, other advisor '
  'knobs at their defaults: it starts from `advisor_min_pages_to_scan` 500 instead of the %s '
  'pages_to_scan of the other columns), with smart scan on and off. Variants other than the '
  'defaults ran once (1 run); CPU: ksmd\'s process CPU clock (the scheduler\'s runtime, ns, '
  'clock_getcpuclockid()). "After convergence": %s more full '
  'scans of the merged workload, what ksmd costs while nothing changes (with the advisor: '
  'after it settled).' % (adv_t, par['ksmd_pages_to_scan'], 'six'))
w('')
COLS = [('patched, smart_scan 0', P, 'ksm_ss0'), ('patched (smart_scan 1)', P, 'ksm'),
        ('6.12', Q, 'ksm'), ('patched, advisor', P, 'ksm_adv'), ('6.12, advisor', Q, 'ksm_adv'),
        ('patched, advisor, smart_scan 0', P, 'ksm_adv0'), ('6.12, advisor, smart_scan 0', Q, 'ksm_adv0')]
def variant_table(title, prefix, cols, rows):
    """One row per (key, label, format), one column per (label, guest data, variant)."""
    w(title)
    w('')
    w('| measure | ' + ' | '.join(c[0] for c in cols) + ' |')
    w('|' + ' --- |' * (len(cols) + 1))
    for key, label, fmt in rows:
        w('| %s | %s |' % (label, ' | '.join(cell(d, '%s.%s.%s' % (prefix, v, key), fmt)
                                           for _, d, v in cols)))
    w('')


variant_table('Python workers (section 1):', 'py', COLS, (
    ('converge_full_scans', 'full scans until merging converges', '%.0f'),
    ('converge_pages_scanned', 'pages scanned until it converges', '%.0f'),
    ('converge_pages_skipped', 'pages skipped until it converges', '%.0f'),
    ('ksmd_cpu_s', 'ksmd CPU until it converges (s)', '%.2f'),
    ('converge_s', 'time until it converges (s)', '%.2f'),
    ('saved_pages', 'memory saved (pages freed)', '%.0f'),
    ('settle_scans', 'advisor: full scans until pages_to_scan settled (3 scans unchanged, at most %d)'
     % int(par.get('adv_settle_max', 30)), '%.0f'),
    ('steady_ksmd_cpu_ms_per_scan', 'after convergence: ksmd CPU per full scan (ms)', '%.1f'),
    ('steady_pages_scanned_per_scan', 'after convergence: pages scanned per full scan', '%.0f'),
    ('steady_pages_skipped_per_scan', 'after convergence: pages skipped per full scan', '%.0f'),
    ('steady_scan_s', 'after convergence: time of a full scan (s, median)', '%.2f'),
    ('steady_ksmd_cpu_pct', 'after convergence: ksmd CPU (% of one CPU)', '%.1f'),
    ('pages_to_scan', 'pages_to_scan at the end', '%.0f')))
CAPCOLS = [('patched, smart_scan 0', P, 'ksm_ss0'), ('patched (smart_scan 1)', P, 'ksm'),
           ('6.12', Q, 'ksm_def'), ('patched, advisor', P, 'ksm_adv'), ('6.12, advisor', Q, 'ksm_adv')]
variant_table('Capacity run (section 1: workers admitted one by one, ksmd converging after each). '
              'A window (one new worker) stays open until 2 full scans changed nothing; ksmd CPU '
              'is counted two ways: until the end of the first full scan by which 99% of what the '
              'window merged had merged (the cost of absorbing a worker), and over the whole run. '
              'The difference is late pairs: pages that become identical to an old, unmerged page '
              'merge when both are processed in one scan, within 27 full scans with this series\' '
              'smart scan (phases line up) and maybe never on 6.12 (each page keeps its own phase); '
              'each such page keeps a window open for up to 9 more scans (bench/capacity-trace.py '
              'shows them scan by scan):',
              'cap', CAPCOLS, (
                  ('workers', 'workers that fit', '%.0f'),
                  ('ksmd_cpu99_s', 'ksmd CPU until 99% of each new worker\'s merges (s)', '%.2f'),
                  ('late_pages', '... pages merged after that, within the windows', '%.0f'),
                  ('ksmd_cpu_s', 'ksmd CPU over the run: each window until 2 full scans without a change (s)', '%.2f'),
                  ('full_scans', 'full scans', '%.0f'),
                  ('pages_scanned', 'pages scanned', '%.0f'),
                  ('pages_skipped', 'pages skipped', '%.0f'),
                  ('used_mib', 'memory.current at the end (MiB)', '%.1f'),
                  ('time_s', 'time of the run (s)', '%.1f')))


def cap(d, v, key):
    return med(d, 'cap.%s.%s' % (v, key))


def py(d, v, key):
    return med(d, 'py.%s.%s' % (v, key))


ss_cpu = ratio(cap(P, 'ksm', 'ksmd_cpu99_s'), cap(P, 'ksm_ss0', 'ksmd_cpu99_s'))
ss_cpu_all = ratio(cap(P, 'ksm', 'ksmd_cpu_s'), cap(P, 'ksm_ss0', 'ksmd_cpu_s'))
ss_mem = ratio(cap(P, 'ksm', 'workers'), cap(P, 'ksm_ss0', 'workers'))
ss_py_cpu = ratio(py(P, 'ksm', 'steady_ksmd_cpu_ms_per_scan'), py(P, 'ksm_ss0', 'steady_ksmd_cpu_ms_per_scan'))
ss_py_mem = ratio(py(P, 'ksm', 'saved_pages'), py(P, 'ksm_ss0', 'saved_pages'))
pq_cpu = ratio(cap(P, 'ksm', 'ksmd_cpu99_s'), cap(Q, 'ksm_def', 'ksmd_cpu99_s'))
pq_cpu_all = ratio(cap(P, 'ksm', 'ksmd_cpu_s'), cap(Q, 'ksm_def', 'ksmd_cpu_s'))
pq_mem = ratio(cap(P, 'ksm', 'workers'), cap(Q, 'ksm_def', 'workers'))
pq_py_cpu = ratio(py(P, 'ksm', 'ksmd_cpu_s'), py(Q, 'ksm', 'ksmd_cpu_s'))
pq_py_mem = ratio(py(P, 'ksm', 'saved_pages'), py(Q, 'ksm', 'saved_pages'))
adv = {(n, v): (py(d, v, 'steady_scan_s'), py(d, v, 'steady_ksmd_cpu_pct'),
                py(d, v, 'steady_ksmd_cpu_ms_per_scan'))
       for v in ('ksm_adv0', 'ksm_adv') for n, d in (('patched', P), ('6.12', Q))}


def within(x, target, tol):
    return 'n/a' if x is None else ('met' if abs(x - target) <= tol * target else '**NOT met**')


def atleast(x, limit):
    return 'n/a' if x is None else ('met' if x >= limit else '**NOT met**')


w('| goal | measured | |')
w('| --- | --- | --- |')
w('| smart scan: ksmd CPU ≤ 0.75 × smart_scan 0 (capacity run, until 99%% of each worker\'s merges) | %s | %s |' % (rcell(ss_cpu), goal(ss_cpu, 0.75)))
w('| ... the same over the whole run (each window until 2 full scans without a change) | %s | not a goal |' % rcell(ss_cpu_all))
w('| ... with ≥ 98%% of its memory saved (workers that fit, ratio) | %s | %s |' % (rcell(ss_mem), atleast(ss_mem, 0.98)))
w('| smart scan, python after convergence: ksmd CPU per full scan, ratio to smart_scan 0 | %s | %s |' % (rcell(ss_py_cpu), goal(ss_py_cpu, 0.75)))
w('| ... memory saved, ratio to smart_scan 0 | %s | %s |' % (rcell(ss_py_mem), atleast(ss_py_mem, 0.98)))
w('| patched ≤ 6.12 on ksmd CPU (capacity run, until 99%% of each worker\'s merges), patched/6.12 | %s | %s |' % (rcell(pq_cpu), goal(pq_cpu, 1.0)))
w('| ... the same over the whole run (each window until 2 full scans without a change; the late pairs below) | %s | not a goal |' % rcell(pq_cpu_all))
w('| ... at ≥ 6.12\'s saving (workers that fit, patched/6.12) | %s | %s |' % (rcell(pq_mem), atleast(pq_mem, 1.0)))
w('| patched ≤ 6.12 on ksmd CPU until the python workload converges, patched/6.12 | %s | %s |' % (rcell(pq_py_cpu), goal(pq_py_cpu, 1.0)))
w('| ... at ≥ 6.12\'s saving (pages freed, patched/6.12) | %s | %s |' % (rcell(pq_py_mem), atleast(pq_py_mem, 1.0)))
for (n, v), (t, c, ms) in adv.items():
    if v == 'ksm_adv0':
        w('| advisor (%s, smart_scan 0): full scan within ±20%% of %.0f s | %s s | %s |' % (
            n, adv_t, rcell(t, '%.2f'), within(t, adv_t, 0.2)))
        w('| advisor (%s, smart_scan 0): ksmd CPU ≤ advisor_max_cpu (70%%) | %s%% | %s |' % (
            n, rcell(c, '%.1f'), goal(c, 70)))
    else:
        # the advisor never goes below 10% CPU: the longest scan it can reach is what
        # a full scan costs at 10% CPU
        w('| advisor (%s, smart scan on): full scan, s (longest reachable at the 10%% CPU floor: %s s) | %s s | %s |' % (
            n, rcell(ms / 100 if ms else None, '%.2f'), rcell(t, '%.2f'),
            'n/a' if t is None or not ms else ('target above the floor' if ms / 100 < adv_t * 0.8
                                               else within(t, adv_t, 0.2))))
        w('| advisor (%s, smart scan on): ksmd CPU ≤ advisor_max_cpu (70%%) | %s%% | %s |' % (
            n, rcell(c, '%.1f'), goal(c, 70)))
w('')
w('The advisor keeps ksmd between 10%% CPU and `advisor_max_cpu`: with smart scan on, a '
  'full scan of the merged Python workload costs %s ms of CPU (patched), so no setting of '
  'pages_to_scan can make it last %.0f s without dropping below 10%% CPU; the variant with '
  'smart_scan 0, whose full scan costs %s ms every time, is the one whose target is reachable '
  'in this guest.' % (rcell(adv[('patched', 'ksm_adv')][2], '%.0f'), adv_t,
                      rcell(adv[('patched', 'ksm_adv0')][2], '%.0f')))
w('')

# 7. merge domains
w('## 7. Merge domains (patches 39-43, patched only)')
w('')
w('The python workload is one merge domain (its launcher enables KSM, the parent forks the '
  'workers): with `merge_scope=domain` it should save what it saves with `global`, at the '
  'same ksmd cost. Two copies of it, each started by its own launcher, are two domains: with '
  '`domain` each saves what one copy saves alone and no page is shared between the copies; '
  'with `global` the copies also merge with each other. cross pages = anonymous pages of '
  'each copy summed, minus the distinct physical pages of both (ksmbench dupscan after '
  'convergence): pages mapped in both copies.')
w('')
dom_mem = ratio(py(P, 'ksm_dom', 'saved_pages'), py(P, 'ksm', 'saved_pages'))
dom_cpu = ratio(py(P, 'ksm_dom', 'ksmd_cpu_s'), py(P, 'ksm', 'ksmd_cpu_s'))
dom_scan = ratio(py(P, 'ksm_dom', 'steady_ksmd_cpu_ms_per_scan'), py(P, 'ksm', 'steady_ksmd_cpu_ms_per_scan'))
one = py(P, 'ksm_dom', 'saved_pages')
two_dom = ratio(med(P, 'py2.domain.saved_pages'), 2 * one if one else None)
two_glob = ratio(med(P, 'py2.global.saved_pages'), 2 * one if one else None)
cross_dom = med(P, 'py2.domain.cross_pages')
w('| measure | global | domain | domain/global | goal |')
w('| --- | --- | --- | --- | --- |')
w('| python, one domain: pages freed by merging | %s | %s | %s | ≥ 0.99: %s |' % (
  cell(P, 'py.ksm.saved_pages', '%.0f'), cell(P, 'py.ksm_dom.saved_pages', '%.0f'), rcell(dom_mem), atleast(dom_mem, 0.99)))
w('| python, one domain: ksmd CPU until converged (s) | %s | %s | %s | ≤ 1.02: %s |' % (
  cell(P, 'py.ksm.ksmd_cpu_s', '%.2f'), cell(P, 'py.ksm_dom.ksmd_cpu_s', '%.2f'), rcell(dom_cpu), goal(dom_cpu, 1.02)))
w('| python, one domain: ksmd CPU per full scan after convergence (ms) | %s | %s | %s | not a goal |' % (
  cell(P, 'py.ksm.steady_ksmd_cpu_ms_per_scan'), cell(P, 'py.ksm_dom.steady_ksmd_cpu_ms_per_scan'), rcell(dom_scan)))
w('| two copies: pages freed by merging | %s | %s | | |' % (
  cell(P, 'py2.global.saved_pages', '%.0f'), cell(P, 'py2.domain.saved_pages', '%.0f')))
w('| two copies: pages freed / 2 × one copy alone (domain) | %s | %s | | domain within 0.99..1.01: %s |' % (
  rcell(two_glob), rcell(two_dom), within(two_dom, 1.0, 0.01)))
w('| two copies: cross pages (mapped in both copies) | %s | %s | | domain 0: %s |' % (
  cell(P, 'py2.global.cross_pages', '%.0f'), cell(P, 'py2.domain.cross_pages', '%.0f'),
  'n/a' if cross_dom is None else ('met' if cross_dom == 0 else '**NOT met**')))
w('| two copies: merge_domains after convergence | %s | %s | | |' % (
  cell(P, 'py2.global.merge_domains', '%.0f'), cell(P, 'py2.domain.merge_domains', '%.0f')))
w('| two copies: ksmd CPU until converged (s) | %s | %s | | |' % (
  cell(P, 'py2.global.ksmd_cpu_s', '%.2f'), cell(P, 'py2.domain.ksmd_cpu_s', '%.2f')))
w('')
w('What merge domains cost with `merge_scope=global` (the default): the patched kernel '
  'against the series without patches 39-43 (build/bench/nodom-src, same config), the same '
  'benchmarks as sections 1, 3 and 4 (%s).' % NODOM['kernel.release'][0])
w('')
w('| measure | without domains | patched | patched/without | goal |')
w('| --- | --- | --- | --- | --- |')
nodom = []
for name, label, fmt in (
        [('hot.%s.%s_ns' % (k, op), '%s, feature %s (ns)' % (label, k), '%.1f')
         for op, label in ops for k in ('off', 'on')]
        + [('ksmd.merge_128MiB.madvise_s', 'ksmd merges 128 MiB, madvise (s)', '%.3f'),
           ('ksmd.merge_128MiB.prctl_s', 'ksmd merges 128 MiB, prctl (s)', '%.3f'),
           ('py.ksm.steady_ksmd_cpu_ms_per_scan', 'python: ksmd CPU per full scan after convergence (ms)', '%.1f'),
           ('py.ksm.ksmd_cpu_s', 'python: ksmd CPU until converged (s)', '%.2f'),
           ('py.ksm.pages_sharing', 'python: pages_sharing', '%.0f')]):
    r = ratio(med(P, name), med(NODOM, name))
    limit = 1.01 if name.startswith(('hot.', 'ksmd.', 'py.ksm.steady')) else None
    if limit:
        nodom.append(r)
    w('| %s | %s | %s | %s | %s |' % (label, cell(NODOM, name, fmt), cell(P, name, fmt), rcell(r),
      '≤ 1.01: %s' % goal(r, limit) if limit else 'not a goal'))
w('')

# pipeline
w('## Where the time goes (host wall clock, this run)')
w('')
w('| step | seconds |')
w('| --- | --- |')
for name, secs in timing:
    w('| %s | %d |' % (name, secs))
w('')
w('Virtual seconds per section (one guest, all repetitions): ' + ', '.join(
    '%s %s' % (k[8:-2], '/'.join('%.0f' % float(x) for x in v)) for k, v in sorted(P.items())
    if k.startswith('section.')) + ' (patched); ' + ', '.join(
    '%s %s' % (k[8:-2], '/'.join('%.0f' % float(x) for x in v)) for k, v in sorted(B.items())
    if k.startswith('section.')) + ' (base); ' + ', '.join(
    '%s %s' % (k[8:-2], '/'.join('%.0f' % float(x) for x in v)) for k, v in sorted(Q.items())
    if k.startswith('section.')) + ' (6.12); ' + ', '.join(
    '%s %s' % (k[8:-2], '/'.join('%.0f' % float(x) for x in v)) for k, v in sorted(NODOM.items())
    if k.startswith('section.')) + ' (without merge domains).')
w('')

# key figures
offs = [r for _, r, _ in hot if r]
ons = [r for _, _, r in hot if r]
w('## Key figures')
w('')
w('- memory saved by KSM (python, %s workers): **%.1f%%** of PSS (%.0f → %.0f MiB), %.1f%% of MemTotal − MemAvailable' % (
  par['workers'], pss_saved * 100, med(P, 'py.nksm.pss_mib'), med(P, 'py.ksm.pss_after_mib'), used_saved * 100))
w('- capacity in %s MiB: %.0f → %.0f workers, **%+.0f%%**' % (par['cap_budget_mib'],
  med(P, 'cap.nksm.workers'), med(P, 'cap.ksm.workers'), cap_gain * 100))
w('- dedup efficiency: python %.4f, synthetic %.4f (limit 1.0)' % (
  med(P, 'dedup.py.efficiency'), med(P, 'dedup.synth.efficiency')))
w('- hot paths, feature off, patched/base: %.4f .. %.4f (goal ≤ 1.01); feature on: %.4f .. %.4f' % (
  min(offs), max(offs), min(ons), max(ons)))
w('- ksmd merge time prctl/madvise: %.4f (goal 1)' % ratio(prc_p, mad_p))
w('- control path: enable on %.0f VMAs %.0f µs; unmerge 256 MiB prctl %.1f ms vs madvise %.1f ms (ratio %.3f)' % (
  med(P, 'ctl.vmas'), med(P, 'ctl.enable_10000_vmas_us'), up, um, up / um))
w('- smart scan, capacity run: ksmd CPU smart_scan 1 / 0 = %s (goal ≤ 0.75), workers %s; python after convergence: CPU per scan %s, memory %s' % (
  rcell(ss_cpu), rcell(ss_mem), rcell(ss_py_cpu), rcell(ss_py_mem)))
w('- patched vs 6.12: capacity ksmd CPU until 99%% of each worker\'s merges %s (over the whole run %s), workers %s; python ksmd CPU until converged %s, memory %s (goal: CPU ≤ 1 at saving ≥ 1)' % (
  rcell(pq_cpu), rcell(pq_cpu_all), rcell(pq_mem), rcell(pq_py_cpu), rcell(pq_py_mem)))
w('- merge domains: python in one domain saves %s of what it saves with global (goal ≥ 0.99) at %s of the ksmd CPU (goal ≤ 1.02); two copies in two domains save %s of twice what one copy saves alone, %s pages mapped in both copies (global: %s, %s pages)' % (
  rcell(dom_mem), rcell(dom_cpu), rcell(two_dom), rcell(cross_dom, '%.0f'), rcell(two_glob),
  rcell(med(P, 'py2.global.cross_pages'), '%.0f')))
w('- merge domains with merge_scope=global, patched / the series without them: hot paths, ksmd merging and ksmd per full scan %s .. %s (goal ≤ 1.01)' % (
  rcell(min(r for r in nodom if r)), rcell(max(r for r in nodom if r))))
w('- advisor, target %.0f s, smart_scan 0: full scan %s s patched, %s s 6.12; ksmd CPU %s%% patched, '
  '%s%% 6.12 (goals: ±20%%, ≤ 70%%); smart scan on: %s s patched, %s s 6.12 (10%% CPU floor)' % (
      adv_t, rcell(adv[('patched', 'ksm_adv0')][0], '%.2f'), rcell(adv[('6.12', 'ksm_adv0')][0], '%.2f'),
      rcell(adv[('patched', 'ksm_adv0')][1], '%.1f'), rcell(adv[('6.12', 'ksm_adv0')][1], '%.1f'),
      rcell(adv[('patched', 'ksm_adv')][0], '%.2f'), rcell(adv[('6.12', 'ksm_adv')][0], '%.2f')))
w('- unmerge of a %s reservation with 64 merged pages: madvise %s ms on base, %s ms patched, prctl %s ms '
  '(goal ≤ 10 ms); %s / %s patched: madvise %s, prctl %s (goal ≤ 1.5); dense 256 MiB patched/base %s '
  '(goal ≤ 1.02)' % (size(SPARSE[-1]), rcell(big[0], '%.1f'), rcell(big[1], '%.3f'), rcell(big[2], '%.3f'),
                     size(SPARSE[-1]), size(SPARSE[-2]), rcell(growth[1], '%.2f'), rcell(growth[2], '%.2f'),
                     rcell(dense)))
w('')
w('![results](results.png)')
with open('bench/results.md', 'w') as f:
    f.write('\n'.join(L) + '\n')

# README: the command, the settings and the key figures, between the bench: markers
def block(first):
    """Lines from the one starting with first up to the next blank line."""
    i = next(n for n, line in enumerate(L) if line.startswith(first))
    return L[i:L.index('', i)]


summary = (L[2:4] + [''] + block('| setting |') + ['', 'Key figures:', ''] + block('- memory saved')
           + ['', 'Host wall clock of this run:', ''] + block('| step |'))
with open('README.md') as f:
    readme = f.read()
a, b = readme.find('<!-- bench:begin -->'), readme.find('<!-- bench:end -->')
if a >= 0 and b > a:
    readme = readme[:a] + '<!-- bench:begin -->\n' + '\n'.join(summary) + '\n' + readme[b:]
    with open('README.md', 'w') as f:
        f.write(readme)

# plot
fig, ax = plt.subplots(2, 3, figsize=(18, 8))
a = ax[0][0]
x = range(len(hot))
for off, label, key in ((-0.2, 'feature off', 'off'), (0.2, 'feature on', 'on')):
    vals = [((r if key == 'off' else rn) - 1) * 100 for _, r, rn in hot]
    err = [(spread(P, 'hot.%s.%s_ns' % (key, op)) ** 2 + spread(B, 'hot.off.%s_ns' % op) ** 2) ** 0.5
           for op, _, _ in hot]
    a.bar([i + off for i in x], vals, 0.4, yerr=err, capsize=3, label=label)
a.axhline(0, color='k', lw=0.8)
a.axhspan(-1, 1, color='g', alpha=0.12, label='goal: within 1%')
a.set_xticks(list(x))
a.set_xticklabels([o for o, _, _ in hot], rotation=20)
a.set_ylabel('patched vs base, %')
a.set_title('4. hot paths: patched/base - 1 (icount time)')
a.legend(fontsize=8)
a = ax[0][1]
labels = ['base\nno KSM', 'patched\nno KSM', 'patched\nKSM merged']
pss = [med(B, 'py.nksm.pss_mib'), med(P, 'py.nksm.pss_mib'), med(P, 'py.ksm.pss_after_mib')]
used = [med(B, 'py.nksm.used_mib'), med(P, 'py.nksm.used_mib'), med(P, 'py.ksm.used_after_mib')]
a.bar([i - 0.2 for i in range(3)], pss, 0.4, label='sum of PSS')
a.bar([i + 0.2 for i in range(3)], used, 0.4, label='MemTotal − MemAvailable')
a.set_xticks(range(3))
a.set_xticklabels(labels)
a.set_ylabel('MiB')
a.set_title('1. python: parent + %s workers (memory saved %.0f%%)' % (par['workers'], pss_saved * 100))
a.legend(fontsize=8)
a = ax[1][0]
caps = [med(B, 'cap.nksm.workers'), med(P, 'cap.nksm.workers'), med(P, 'cap.ksm.workers')]
a.bar(range(3), caps, color=['gray', 'gray', 'tab:green'])
for i, c in enumerate(caps):
    a.text(i, c, '%.0f' % c, ha='center', va='bottom')
a.set_xticks(range(3))
a.set_xticklabels(labels)
a.set_title('1. capacity: workers in %s MiB (%+.0f%%)' % (par['cap_budget_mib'], cap_gain * 100))
a = ax[1][1]
names = ['ksmd merge\n128 MiB (s)', 'unmerge\n256 MiB (s)']
a.bar([-0.2, 0.8], [mad_p, um / 1000], 0.4, label='madvise')
a.bar([0.2, 1.2], [prc_p, up / 1000], 0.4, label='prctl')
a.set_xticks([0, 1])
a.set_xticklabels(names)
a.set_ylabel('s (virtual)')
a.set_title('3+5. prctl vs madvise (patched)')
a.legend(fontsize=8)
a = ax[0][2]
vals = [cap(d, v, 'ksmd_cpu99_s') or 0 for _, d, v in CAPCOLS]
a.bar(range(len(CAPCOLS)), vals, color=['gray', 'tab:green', 'tab:blue', 'tab:olive', 'tab:cyan'])
for i, (c, (_, d, v)) in enumerate(zip(vals, CAPCOLS)):
    a.text(i, c, '%.0f s\n%.0f w' % (c, cap(d, v, 'workers') or 0), ha='center', va='bottom', fontsize=8)
a.set_xticks(range(len(CAPCOLS)))
a.set_xticklabels([c[0].replace(', ', '\n').replace(' (', '\n(') for c in CAPCOLS], fontsize=8)
a.set_ylabel('ksmd CPU, s (virtual)')
a.set_title('6. capacity run: ksmd CPU until 99% merged (workers that fit)')
a = ax[1][2]
vals = [py(d, v, 'steady_ksmd_cpu_ms_per_scan') or 0 for _, d, v in COLS]
a.bar(range(len(COLS)), vals, color=['gray', 'tab:green', 'tab:blue', 'tab:olive', 'tab:cyan'])
a.set_xticks(range(len(COLS)))
a.set_xticklabels([c[0].replace(', ', '\n').replace(' (', '\n(') for c in COLS], fontsize=8)
a.set_ylabel('ms per full scan (virtual)')
a.set_title('6. python, after convergence: ksmd CPU per full scan')
fig.suptitle('per-process KSM on 6.1: `make bench`, %s runs each, QEMU TCG -icount %s' % (reps, icount))
fig.tight_layout()
fig.savefig('bench/results.png', dpi=80)
print('report.py: wrote bench/results.md and bench/results.png')
