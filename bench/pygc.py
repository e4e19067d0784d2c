"""pygc.py: the motivating workload, a prefork server in a garbage-collected language.

    python3 bench/pygc.py RECORDS PRIVATE_MIB

The parent builds an object graph of RECORDS records (dicts, lists, strings, ints and
floats: about 560 bytes each, 64+ MiB for 120000), prints "PARENT pid graph_kib", then
reads commands on stdin: "fork" starts one worker (prints "FORKED pid"), which walks the whole graph (reference
count writes unshare nearly every page of it), allocates PRIVATE_MIB of data of its own
(per-request state: random bytes, unique), prints "READY pid" and idles. EOF or "exit" ends it.
No KSM call anywhere: per-process KSM is switched on from outside (launcher prctl+exec).
"""
import os
import random
import signal
import sys


def rss_kib():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE') // 1024


def build(records):
    graph = []
    for i in range(records):
        graph.append({
            'id': i,
            'name': 'user-%08d' % i,
            'email': 'user%d@example.org' % i,
            'tags': ['tag%d' % (i % 97), 'group%d' % (i % 13), str(i % 7)],
            'score': i * 0.25,
            'history': [i, i + 1, i * 3],
            'meta': {'created': 1700000000 + i, 'active': i % 2 == 0},
        })
    return graph


def walk(graph):
    """Touch every object: each access writes its reference count."""
    total = 0
    for rec in graph:
        for value in rec.values():
            if isinstance(value, list):
                for item in value:
                    total += 1 if item else 0
            elif isinstance(value, dict):
                for v in value.values():
                    total += 1 if v else 0
            else:
                total += 1 if value else 0
    return total


def worker(graph, private_mib):
    with open('/proc/self/oom_score_adj', 'w') as f:
        f.write('500\n')       # under memory pressure the master survives, a worker goes
    walk(graph)
    rnd, state = random.Random(os.getpid()), bytearray(private_mib << 20)
    for off in range(0, len(state), 1 << 20):     # 1 MiB at a time: no transient copy
        state[off:off + (1 << 20)] = rnd.randbytes(1 << 20)
    sys.stdout.write('READY %d\n' % os.getpid())
    sys.stdout.flush()
    while state is not None:
        signal.pause()


def main():
    records, private_mib = int(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # no zombies; the driver counts READY
    before = rss_kib()
    graph = build(records)
    sys.stdout.write('PARENT %d %d\n' % (os.getpid(), rss_kib() - before))
    sys.stdout.flush()
    for line in sys.stdin:
        if line.strip() != 'fork':
            break
        pid = os.fork()
        if pid == 0:
            worker(graph, private_mib)
            os._exit(0)
        sys.stdout.write('FORKED %d\n' % pid)
        sys.stdout.flush()
    os.killpg(0, signal.SIGKILL) if os.getpid() == os.getpgid(0) else None


if __name__ == '__main__':
    main()
