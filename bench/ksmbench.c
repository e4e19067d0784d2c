// SPDX-License-Identifier: GPL-2.0
/*
 * ksmbench: microbenchmarks for the per-process KSM series (run in the guest as root).
 *
 *   ksmbench hot off|on ITER     hot paths: mmap+munmap, brk, fork+exit, mremap, page
 *                                fault; "on" enables PR_SET_MEMORY_MERGE first. Also the
 *                                VMA count after 10,000 adjacent anonymous mmaps.
 *   ksmbench enable NVMAS        time of prctl enable on a process with NVMAS VMAs
 *   ksmbench unmerge prctl|madvise MIB   merge MIB of pages, then time the unmerge
 *   ksmbench sparse prctl|madvise GIB    a GIB GiB reservation, 64 pages touched and merged:
 *                                time the unmerge of the whole reservation
 *   ksmbench synth               dedup efficiency on pages with a known duplicate count
 *   ksmbench exec CMD ARGS...    PR_SET_MEMORY_MERGE, then execvp CMD (the launcher)
 *   ksmbench dupscan PID...      "DUPSCAN pages contents": distinct anonymous physical pages
 *                                mapped by the PIDs, and their distinct contents
 *
 * Output: "BENCH name value" lines; exit status non-zero if a benchmark could not run.
 * Times are CLOCK_MONOTONIC in the guest (virtual time under QEMU -icount).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdint.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "ksm_util.h"

/* /proc/<pid>/pagemap: file-backed or shared anonymous */
#define PM_FILE		(1ULL << 61)

static long pgsz;

static void die(const char *what)
{
	fprintf(stderr, "ksmbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ksm_read(), but a benchmark without its sysfs file cannot go on. */
static long ksm_value(const char *name)
{
	long v = ksm_read(name);
	char path[128];

	if (v < 0) {
		snprintf(path, sizeof(path), KSM_SYSFS "%s", name);
		die(path);
	}
	return v;
}

/*
 * ksm_write() of run, but a benchmark that cannot start or stop ksmd cannot
 * go on. Not a knob_set(): the benchmarks start and stop ksmd, nothing is
 * restored.
 */
static void ksm_run(const char *val)
{
	int err = ksm_write("run", val);

	if (err) {
		errno = err;
		die(KSM_SYSFS "run");
	}
}

static void merge_on(void)
{
	if (prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0))
		die("prctl(PR_SET_MEMORY_MERGE, 1) (kernel without the series?)");
}

/* Run ksmd until pages_sharing has not changed for two full scans; returns it. */
static long ksm_converge(int max_scans)
{
	long scans0 = ksm_value("full_scans"), last = -1, last_scan = scans0, s, sc;

	ksm_run("1");
	for (;;) {
		usleep(20000);
		s = ksm_value("pages_sharing");
		sc = ksm_value("full_scans");
		if (s != last) {
			last = s;
			last_scan = sc;
		} else if (sc >= last_scan + 2 && sc >= scans0 + 3) {
			break;
		}
		if (sc > scans0 + max_scans) {
			fprintf(stderr, "ksmbench: merging did not converge in %d full scans\n", max_scans);
			exit(1);
		}
	}
	ksm_run("0");
	return last;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/*
 * Physical pages saved among the npg pages at p, p + stride pages, p + 2 * stride pages...
 * (stride 1: the range [p, p + npg pages)): pages mapped to a KSM page that another of these
 * pages maps too, minus the distinct KSM pages they map; *mapped = the pages so counted.
 * Exact for these pages, whatever else the process (stack, libc data: all mergeable after
 * prctl) merged. KPF_KSM (kpageflags bit 21) alone cannot tell: 6.12's fs/proc/page.c
 * tests it as `mapping & PAGE_MAPPING_KSM`, true for every anonymous page; only KSM maps
 * one anonymous page at two addresses of a process.
 */
static long saved_in_range(char *p, long npg, long stride, long *mapped)
{
	long *pfns = calloc(npg, sizeof(long)), n = 0, uniq = 0, shared = 0;
	uint64_t e, fl;

	if (!pfns)
		die("calloc");
	for (long i = 0; i < npg; i++) {
		uint64_t pfn;

		if (pagemap_read(p + i * stride * pgsz, 1, &e))
			die("pagemap");
		pfn = e & PM_PFN;
		if (!(e & PM_PRESENT) || !pfn)
			continue;
		if (kpageflags_read(pfn, &fl))
			die("kpageflags");
		if (fl & (1ULL << KPF_KSM))
			pfns[n++] = pfn;
	}
	qsort(pfns, n, sizeof(long), cmp_long);
	for (long i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && pfns[j] == pfns[i]; j++)
			;
		if (j - i > 1) {
			shared += j - i;
			uniq++;
		}
	}
	free(pfns);
	if (mapped)
		*mapped = shared;
	return shared - uniq;
}

/* VMAs of this process that intersect [p, p + len) */
static int vmas_in(const void *p, size_t len)
{
	int n = range_vmas(p, len, NULL);

	if (n < 0)
		die("/proc/self/maps");
	return n;
}

static int count_vmas(void)
{
	return vmas_in(NULL, ULONG_MAX);
}

/* Each benchmark returns the mean time of one operation in ns. */
static double b_mmap(long iter)
{
	double t = now_ns();

	for (long i = 0; i < iter; i++) {
		char *p = mmap(NULL, 16 * pgsz, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			die("mmap");
		if (munmap(p, 16 * pgsz))
			die("munmap");
	}
	return (now_ns() - t) / iter;
}

static double b_brk(long iter)
{
	char *base = sbrk(0);
	double t = now_ns();

	for (long i = 0; i < iter; i++) {
		if (brk(base + 64 * pgsz) || brk(base))
			die("brk");
	}
	return (now_ns() - t) / iter;
}

static double b_fork(long iter)
{
	double t = now_ns();

	for (long i = 0; i < iter; i++) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			die("fork");
		if (!pid)
			_exit(0);
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
			die("waitpid");
	}
	return (now_ns() - t) / iter;
}

static double b_mremap(long iter)
{
	char *p = mmap(NULL, pgsz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t;

	if (p == MAP_FAILED)
		die("mmap");
	p[0] = 1;
	t = now_ns();
	for (long i = 0; i < iter; i++) {
		/* grow (may move), then shrink back */
		p = mremap(p, pgsz, 8 * pgsz, MREMAP_MAYMOVE);
		if (p == MAP_FAILED)
			die("mremap grow");
		p = mremap(p, 8 * pgsz, pgsz, 0);
		if (p == MAP_FAILED)
			die("mremap shrink");
	}
	t = (now_ns() - t) / iter;
	munmap(p, pgsz);
	return t;
}

/* Page faults: touch every page of a fresh 4 MiB mapping; ns per fault. */
static double b_fault(long iter)
{
	long npg = (4 << 20) / pgsz;
	double t = 0;

	for (long i = 0; i < iter; i++) {
		char *p = mmap(NULL, npg * pgsz, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		double t0;

		if (p == MAP_FAILED)
			die("mmap");
		madvise(p, npg * pgsz, MADV_NOHUGEPAGE);
		t0 = now_ns();
		for (long j = 0; j < npg; j++)
			p[j * pgsz] = 1;
		t += now_ns() - t0;
		munmap(p, npg * pgsz);
	}
	return t / (iter * npg);
}

/* 10,000 adjacent anonymous mmaps (MAP_FIXED_NOREPLACE, same flags): how many VMAs? */
static int adjacent_vmas(int n)
{
	char *area = mmap(NULL, (n + 2) * pgsz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int before, after;

	if (area == MAP_FAILED)
		die("mmap");
	munmap(area, (n + 2) * pgsz);	/* a free hole, guard pages on both sides stay free */
	before = count_vmas();
	for (int i = 1; i <= n; i++)
		if (mmap(area + i * pgsz, pgsz, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED)
			die("mmap fixed");
	after = count_vmas();
	munmap(area + pgsz, n * pgsz);
	return after - before;
}

static int hot(const char *mode, long iter)
{
	int on = !strcmp(mode, "on");

	if (on)
		merge_on();
	/* warm up: libc, page tables, first faults */
	b_mmap(iter / 10 + 1);
	b_fault(1);
	printf("BENCH hot.%s.mmap_munmap_ns %.1f\n", mode, b_mmap(iter));
	printf("BENCH hot.%s.brk_ns %.1f\n", mode, b_brk(iter));
	printf("BENCH hot.%s.fork_exit_ns %.1f\n", mode, b_fork(iter / 20 + 1));
	printf("BENCH hot.%s.mremap_ns %.1f\n", mode, b_mremap(iter));
	printf("BENCH hot.%s.page_fault_ns %.1f\n", mode, b_fault(iter / 100 + 1));
	printf("BENCH hot.%s.vmas_after_10000_mmaps %d\n", mode, adjacent_vmas(10000));
	return 0;
}

/* prctl enable on a process with n VMAs (alternating protections: no VMA merges). */
static int enable(int n)
{
	char *area = mmap(NULL, n * pgsz, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t;

	if (area == MAP_FAILED)
		die("mmap");
	for (int i = 0; i < n; i += 2)
		if (mprotect(area + i * pgsz, pgsz, PROT_READ | PROT_WRITE))
			die("mprotect");
	printf("BENCH ctl.vmas %d\n", count_vmas());
	t = now_ns();
	merge_on();
	t = now_ns() - t;
	printf("BENCH ctl.enable_%d_vmas_us %.1f\n", n, t / 1e3);
	return 0;
}

/* Merge mib MiB of duplicate pages (prctl or madvise), then time the unmerge. */
static int unmerge(const char *how, long mib)
{
	long npg = (mib << 20) / pgsz, mapped;
	int use_prctl = !strcmp(how, "prctl");
	char *p = mmap(NULL, npg * pgsz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t;

	if (p == MAP_FAILED)
		die("mmap");
	madvise(p, npg * pgsz, MADV_NOHUGEPAGE);
	for (long i = 0; i < npg; i++)	/* 64 distinct contents, each npg/64 times */
		memset(p + i * pgsz, 'a' + i % 64, pgsz);
	ksm_run("2");		/* nothing else merged */
	if (use_prctl)
		merge_on();
	else if (madvise(p, npg * pgsz, MADV_MERGEABLE))
		die("madvise(MADV_MERGEABLE)");
	ksm_converge(40);
	printf("BENCH ctl.%s.saved_pages %ld\n", how, saved_in_range(p, npg, 1, &mapped));
	if (mapped < npg * 99 / 100) {
		fprintf(stderr, "ksmbench: only %ld of %ld pages merged\n", mapped, npg);
		return 1;
	}
	t = now_ns();
	if (use_prctl ? prctl(PR_SET_MEMORY_MERGE, 0, 0, 0, 0) :
			madvise(p, npg * pgsz, MADV_UNMERGEABLE))
		die("unmerge");
	t = now_ns() - t;
	saved_in_range(p, npg, 1, &mapped);
	if (mapped) {
		fprintf(stderr, "ksmbench: pages still merged after the %s unmerge\n", how);
		return 1;
	}
	printf("BENCH ctl.unmerge_%ldMiB.%s_ms %.2f\n", mib, how, t / 1e6);
	munmap(p, npg * pgsz);
	return 0;
}

/*
 * Unmerge of a sparse reservation: gib GiB mapped MAP_NORESERVE, 64 pages touched, evenly
 * spread, all with the same content and merged into one KSM page; then time
 * MADV_UNMERGEABLE of the whole reservation, or PR_SET_MEMORY_MERGE 0, which must cost
 * what is present, not the size.
 *
 * Timed state: one mergeable VMA of gib GiB holding the 64 KSM pages (checked), the whole
 * process marked for prctl. To get there, each touched page is made mergeable on its own
 * while ksmd merges them (a VMA apiece), then MADV_MERGEABLE of the whole reservation
 * merges the VMAs back into one: ksmd never scans the holes, which a ksmd that visits
 * every address (the base kernel's) would take about as long as the old unmerge to do,
 * twice per run. prctl enable comes last, ksmd stopped.
 */
static int sparse(const char *how, long gib)
{
	const long n = 64;
	size_t len = (size_t)gib << 30;
	long stride = len / n / pgsz, mapped, saved;
	int use_prctl = !strcmp(how, "prctl");
	char *p;
	double t;

	if (gib < 1 || (!use_prctl && strcmp(how, "madvise")))
		return fprintf(stderr, "ksmbench: sparse prctl|madvise GIB (GIB >= 1)\n"), 2;
	if (use_prctl && prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0) < 0)
		die("prctl(PR_GET_MEMORY_MERGE) (kernel without the series?)");
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	madvise(p, len, MADV_NOHUGEPAGE);
	for (long i = 0; i < n; i++)
		memset(p + i * stride * pgsz, 'k', pgsz);
	ksm_run("2");		/* nothing else merged */
	for (long i = 0; i < n; i++)
		if (madvise(p + i * stride * pgsz, pgsz, MADV_MERGEABLE))
			die("madvise(MADV_MERGEABLE) of a page");
	ksm_converge(40);
	saved = saved_in_range(p, n, stride, &mapped);
	if (mapped != n || saved != n - 1) {
		fprintf(stderr, "ksmbench: %ld of the %ld pages merged, %ld saved (want %ld)\n",
			mapped, n, saved, n - 1);
		return 1;
	}
	if (madvise(p, len, MADV_MERGEABLE))
		die("madvise(MADV_MERGEABLE)");
	if (vmas_in(p, len) != 1) {
		fprintf(stderr, "ksmbench: the reservation is %d VMAs, not one\n", vmas_in(p, len));
		return 1;
	}
	if (use_prctl)
		merge_on();
	t = now_ns();
	if (use_prctl ? prctl(PR_SET_MEMORY_MERGE, 0, 0, 0, 0) : madvise(p, len, MADV_UNMERGEABLE))
		die("unmerge");
	t = now_ns() - t;
	saved_in_range(p, n, stride, &mapped);
	if (mapped) {
		fprintf(stderr, "ksmbench: %ld of the %ld pages still merged after the %s unmerge\n",
			mapped, n, how);
		return 1;
	}
	for (long i = 0; i < n; i++)
		if (p[i * stride * pgsz] != 'k' || p[(i * stride + 1) * pgsz - 1] != 'k') {
			fprintf(stderr, "ksmbench: page %ld lost its content in the unmerge\n", i);
			return 1;
		}
	printf("BENCH ctl.unmerge_sparse_%ldGiB.%s_ms %.3f\n", gib, how, t / 1e6);
	munmap(p, len);
	return 0;
}

/*
 * Known duplicates: 2048 unique pages, 256 contents x 8 copies and 64 contents x 32 copies
 * (the copies are not adjacent). Duplicates present = 256*7 + 64*31 = 3776 pages.
 */
static int synth(void)
{
	long uniq = 2048, g8 = 256, g32 = 64, npg = uniq + g8 * 8 + g32 * 32;
	long dups = g8 * 7 + g32 * 31, sharing, saved;
	char *p = mmap(NULL, npg * pgsz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long k = 0;

	if (p == MAP_FAILED)
		die("mmap");
	madvise(p, npg * pgsz, MADV_NOHUGEPAGE);
	/* content id c fills a page with a pattern derived from c; ids never collide */
	for (long c = 0; c < uniq + g8 + g32; c++) {
		long copies = c < uniq ? 1 : c < uniq + g8 ? 8 : 32;

		for (long j = 0; j < copies; j++, k++) {
			long *q = (long *)(p + ((k * 7919) % npg) * pgsz);	/* scatter */

			for (unsigned long w = 0; w < pgsz / sizeof(long); w++)
				q[w] = c * 1000003 + w;
		}
	}
	if (k != npg)
		return fprintf(stderr, "ksmbench: synth layout bug\n"), 1;
	ksm_run("2");
	merge_on();
	sharing = ksm_converge(40);
	saved = saved_in_range(p, npg, 1, NULL);
	printf("BENCH dedup.synth.pages %ld\n", npg);
	printf("BENCH dedup.synth.duplicates %ld\n", dups);
	printf("BENCH dedup.synth.saved_pages %ld\n", saved);
	printf("BENCH dedup.synth.pages_sharing %ld\n", sharing);
	printf("BENCH dedup.synth.efficiency %.4f\n", (double)saved / dups);
	munmap(p, npg * pgsz);
	return 0;
}

struct pg {
	uint64_t pfn, h1, h2;
};

static int cmp_pfn(const void *a, const void *b)
{
	const struct pg *x = a, *y = b;

	return (x->pfn > y->pfn) - (x->pfn < y->pfn);
}

static int cmp_hash(const void *a, const void *b)
{
	const struct pg *x = a, *y = b;

	if (x->h1 != y->h1)
		return (x->h1 > y->h1) - (x->h1 < y->h1);
	return (x->h2 > y->h2) - (x->h2 < y->h2);
}

static void hash_page(const uint64_t *w, uint64_t *h1, uint64_t *h2)
{
	uint64_t a = 0x9e3779b97f4a7c15ULL, b = 0xc2b2ae3d27d4eb4fULL;

	for (long i = 0; i < pgsz / 8; i++) {
		a = (a ^ w[i]) * 0x100000001b3ULL;
		b = (b + w[i]) * 0xff51afd7ed558ccdULL;
		b ^= b >> 29;
	}
	*h1 = a;
	*h2 = b;
}

/*
 * Present anonymous pages (not file/shared, not the zero page) of the given processes:
 * distinct physical pages, and distinct contents among them. Their difference is the
 * number of duplicate pages actually present, the most any merging could free.
 */
static int dupscan(int n, char **pids)
{
	uint64_t zpfn = zero_pfn(), *ent = malloc(256 * 8);
	char *buf = malloc(256 * pgsz);
	size_t cap = 1 << 16, cnt = 0, pfns = 0, contents = 0;
	struct pg *v = malloc(cap * sizeof(*v));

	if (!zpfn)
		die("zero page");
	for (int k = 0; k < n; k++) {
		char path[64], line[512];
		unsigned long lo, hi;
		int pm, mem;
		FILE *maps;

		snprintf(path, sizeof(path), "/proc/%s/maps", pids[k]);
		maps = fopen(path, "r");
		snprintf(path, sizeof(path), "/proc/%s/pagemap", pids[k]);
		pm = open(path, O_RDONLY);
		snprintf(path, sizeof(path), "/proc/%s/mem", pids[k]);
		mem = open(path, O_RDONLY);
		if (!maps || pm < 0 || mem < 0)
			die(path);
		while (fgets(line, sizeof(line), maps)) {
			if (strstr(line, "[vvar]") || strstr(line, "[vdso]") || strstr(line, "[vsyscall]"))
				continue;
			if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
				continue;
			for (unsigned long a = lo; a < hi; a += 256 * pgsz) {
				long np = (hi - a) / pgsz < 256 ? (hi - a) / pgsz : 256;
				int loaded = 0;

				if (pread(pm, ent, np * 8, a / pgsz * 8) != np * 8)
					die("pagemap read");
				for (long i = 0; i < np; i++) {
					uint64_t pfn = ent[i] & PM_PFN;

					if (!(ent[i] & PM_PRESENT) || (ent[i] & PM_FILE) ||
					    pfn == zpfn || !pfn)
						continue;
					if (!loaded && pread(mem, buf, np * pgsz, a) != np * pgsz)
						die("mem read");
					loaded = 1;
					if (cnt == cap)
						v = realloc(v, (cap *= 2) * sizeof(*v));
					v[cnt].pfn = pfn;
					hash_page((uint64_t *)(buf + i * pgsz), &v[cnt].h1, &v[cnt].h2);
					cnt++;
				}
			}
		}
		fclose(maps);
		close(pm);
		close(mem);
	}
	/* pages mapped more than once (COW-shared, or already KSM) count once */
	qsort(v, cnt, sizeof(*v), cmp_pfn);
	for (size_t i = 0; i < cnt; i++)
		if (!i || v[i].pfn != v[i - 1].pfn)
			v[pfns++] = v[i];
	qsort(v, pfns, sizeof(*v), cmp_hash);
	for (size_t i = 0; i < pfns; i++)
		contents += !i || cmp_hash(&v[i], &v[i - 1]);
	printf("DUPSCAN %zu %zu\n", pfns, contents);
	return 0;
}

int main(int argc, char **argv)
{
	pgsz = sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3 && !strcmp(argv[1], "hot"))
		return hot(argv[2], argc > 3 ? atol(argv[3]) : 20000);
	if (argc == 3 && !strcmp(argv[1], "enable"))
		return enable(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "unmerge"))
		return unmerge(argv[2], atol(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "sparse"))
		return sparse(argv[2], atol(argv[3]));
	if (argc == 2 && !strcmp(argv[1], "synth"))
		return synth();
	if (argc >= 3 && !strcmp(argv[1], "dupscan"))
		return dupscan(argc - 2, argv + 2);
	if (argc >= 3 && !strcmp(argv[1], "exec")) {
		merge_on();
		execvp(argv[2], argv + 2);
		die(argv[2]);
	}
	fprintf(stderr, "usage: ksmbench hot off|on [ITER] | enable NVMAS | unmerge prctl|madvise MIB | sparse prctl|madvise GIB | synth | exec CMD... | dupscan PID...\n");
	return 2;
}
