// SPDX-License-Identifier: GPL-2.0
/*
 * ksm_mm: per-process KSM against the memory-management features a Debian
 * kernel has, one TAP result per feature, every page verified:
 *
 *  1. swap: enabled processes in a memory cgroup with swap on zram; their
 *     merged pages are reclaimed (memory.reclaim, memory.max) while ksmd
 *     runs, and faulted back in by the processes and by forked children that
 *     write (COW of swapped-in KSM pages) and exit. Then a KSM page that a
 *     pipe keeps in the swap cache after reclaim, one mapping faulted back,
 *     and PR_SET_MEMORY_MERGE 0: no KSM page may be mapped afterwards.
 *  2. migration: merged pages moved between the two nodes with move_pages()
 *     and mbind(MPOL_MF_MOVE_ALL), and compacted (/proc/sys/vm/compact_memory),
 *     with merge_across_nodes 1 and 0; they must stay KSM pages.
 *  3. thp: MADV_HUGEPAGE ranges of identical huge pages, which ksmd must
 *     split to merge; made unique again and collapsed (by khugepaged, else
 *     MADV_COLLAPSE), then duplicates again.
 *  4. hugetlb: a MAP_HUGETLB mapping of an enabled process is never
 *     mergeable (no "mg", before and after enabling, after MADV_MERGEABLE and
 *     in a forked child) and its pages stay intact while ksmd scans.
 *  5. pkeys: a pkey_mprotect()ed range keeps its key (smaps ProtectionKey)
 *     and its access rules (a write with PKEY_DISABLE_WRITE faults with
 *     SEGV_PKUERR) across enable, merging, new mappings, fork and disable.
 *  6. numa_balancing: NUMA balancing makes the PTEs of enabled processes
 *     protnone while ksmd merges and the processes disable (unmerge) and
 *     enable again; no KSM page may survive a disable.
 *  7. zero_pages: use_zero_pages=1, processes that write empty and
 *     duplicate pages, fork and exit, and "run=2" (unmerge everything) issued
 *     meanwhile; ksm_zero_pages, pages_shared and pages_sharing are 0 after
 *     each run=2 (once a child exiting at that moment has zapped the zero
 *     pages it copied) and after the processes exit.
 *
 * A feature the kernel or the machine lacks (no zram, one NUMA node, no THP,
 * no free huge pages, no PKU) is a SKIP with the reason. Counts per feature
 * are "# count FEATURE KEY VALUE" lines, the usual totals "# stat KEY VALUE".
 *
 * Usage: ksm_mm [-d seconds] [-i rounds per feature] [-f feature,...]
 * Needs root; restores every knob it changes.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest.h"
#include "stress_util.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE		25
#endif
#ifndef SEGV_PKUERR
#define SEGV_PKUERR		4
#endif
#define MPOL_DEFAULT		0
#define MPOL_BIND		2
#define MPOL_MF_MOVE		(1 << 1)
#define MPOL_MF_MOVE_ALL	(1 << 2)

#define PAGE			4096UL
#define WORDS			(PAGE / sizeof(uint64_t))
#define HPAGE			(2UL << 20)
#define HPAGE_PAGES		(HPAGE / PAGE)
#define ZERO_KEY		UINT64_MAX	/* a page of zeroes */
#define MERGE_WAIT		60.0		/* s for ksmd to merge what a test needs */
#define THP_SYSFS		"/sys/kernel/mm/transparent_hugepage/"

static struct stats {
	long operations;	/* enables, disables, moves, collapses, run=2 ... */
	long processes;
	long pages_verified;
	long mismatches;
	long count[8][8];	/* per feature, see the names in features[] */
} *stats;

static double deadline;		/* of the current feature */
static int max_rounds;		/* -i, 0 = no limit */

static void stat_add(long *counter, long val)
{
	__atomic_fetch_add(counter, val, __ATOMIC_RELAXED);
}

static bool go_on(int round)
{
	return round == 0 || (now_sec() < deadline && (!max_rounds || round < max_rounds));
}

/* ------------------------------------------------------------------ */
/* Pages of known content                                             */
/* ------------------------------------------------------------------ */

/* An area and the key of each of its pages: equal keys, equal pages. */
struct area {
	char *p;
	size_t pages;
	uint64_t *key;
};

static void page_fill(struct area *a, size_t i, uint64_t key)
{
	uint64_t *w = (uint64_t *)(a->p + i * PAGE);
	size_t j;

	a->key[i] = key;
	if (key == ZERO_KEY) {
		memset(w, 0, PAGE);
		return;
	}
	for (j = 0; j < WORDS; j++)
		w[j] = mix64(key * WORDS + j);
}

static bool page_ok(const struct area *a, size_t i)
{
	const uint64_t *w = (const uint64_t *)(a->p + i * PAGE);
	uint64_t key = a->key[i];
	size_t j;

	for (j = 0; j < WORDS; j++)
		if (w[j] != (key == ZERO_KEY ? 0 : mix64(key * WORDS + j)))
			return false;
	return true;
}

/* Checks every page; reports the first few bad ones. */
static bool area_verify(const struct area *a, const char *what)
{
	long bad = 0;
	size_t i;

	for (i = 0; i < a->pages; i++) {
		if (page_ok(a, i))
			continue;
		if (bad++ < 3)
			expect(false, "%s: page %zu of %zu at %p differs from its pattern", what, i,
			       a->pages, a->p + i * PAGE);
	}
	stat_add(&stats->pages_verified, a->pages);
	stat_add(&stats->mismatches, bad);
	return !bad;
}

/* Maps @pages (aligned to @align) with @flags; the keys in private memory. */
static bool area_map(struct area *a, size_t pages, size_t align, int flags)
{
	size_t len = pages * PAGE;
	char *p = mmap(NULL, len + align, PROT_READ | PROT_WRITE, flags, -1, 0);

	if (p == MAP_FAILED)
		return expect(false, "mmap %zu pages: %m", pages);
	if (align) {
		char *q = (char *)(((uintptr_t)p + align - 1) & ~(align - 1));

		if (q > p)
			munmap(p, q - p);
		munmap(q + len, p + align - q);
		p = q;
	}
	a->p = p;
	a->pages = pages;
	a->key = calloc(pages, sizeof(*a->key));
	return expect(a->key, "calloc: %m");
}

static void area_unmap(struct area *a)
{
	munmap(a->p, a->pages * PAGE);
	free(a->key);
	a->p = NULL;
}

/* Page i gets key @base + i % @dups: @dups distinct contents, repeated. */
static void area_fill_dups(struct area *a, uint64_t base, size_t dups)
{
	size_t i;

	for (i = 0; i < a->pages; i++)
		page_fill(a, i, base + i % dups);
}

/* The KSM pages of ksm_util.c, for one page. */
static bool page_is_ksm(const char *addr)
{
	return pagemap_ksm(pagemap_entry(addr));
}

/*
 * Whether @addr maps a KSM page once a migration of it (the other worker
 * moves the KSM pages it shares with us) has ended: meanwhile pagemap shows a
 * migration entry, no page.
 */
static bool page_is_ksm_settled(const char *addr)
{
	int i;

	for (i = 0; i < 100 && !(pagemap_entry(addr) & PM_PRESENT); i++)
		usleep(1000);
	return page_is_ksm(addr);
}

static long area_ksm_pages(const struct area *a)
{
	return ksm_pages_in(a->p, a->pages);
}

/* Reads a word of every page: faults back in what was swapped out. */
static void area_touch(const struct area *a)
{
	volatile uint64_t sum = 0;
	size_t i;

	for (i = 0; i < a->pages; i++)
		sum += *(volatile uint64_t *)(a->p + i * PAGE);
}

/*
 * Waits until at least @want pages of @a are KSM pages. ksmd merges only
 * pages that are present: with @touch, the area is faulted in every second,
 * for when others reclaim it meanwhile (the swap test).
 */
static bool area_wait_ksm(const struct area *a, long want, bool touch, const char *what)
{
	long scans = ksm_read("full_scans"), scanned = ksm_read("pages_scanned");
	double end = now_sec() + MERGE_WAIT, next = 0;
	long n;

	while ((n = area_ksm_pages(a)) < want && now_sec() < end) {
		if (touch && now_sec() > next) {
			area_touch(a);
			next = now_sec() + 1;
		}
		usleep(100000);
	}
	return expect(n >= want,
		      "%s: %ld of %zu pages merged after %.0f s, wanted %ld (ksmd meanwhile: %ld full scans, %ld pages scanned, run %ld)",
		      what, n, a->pages, MERGE_WAIT, want, ksm_read("full_scans") - scans,
		      ksm_read("pages_scanned") - scanned, ksm_read("run"));
}

/* merge_set(), counted as an operation: true, or false said with expect(). */
static bool merge_set_ok(unsigned long on)
{
	stat_add(&stats->operations, 1);
	return expect(!merge_set(on), "PR_SET_MEMORY_MERGE %lu: %m", on);
}

/* ------------------------------------------------------------------ */
/* Processes                                                          */
/* ------------------------------------------------------------------ */

static pid_t spawn(int (*fn)(int), int arg)
{
	pid_t pid = fork_counted(&stats->processes);

	if (pid == 0)
		child_exit(fn(arg));
	expect(pid > 0, "fork: %m");
	return pid;
}

static bool reap(pid_t pid, const char *what)
{
	int status;

	if (pid <= 0)
		return false;
	if (waitpid(pid, &status, 0) != pid)
		return expect(false, "%s: waitpid: %m", what);
	return expect(WIFEXITED(status) && !WEXITSTATUS(status), "%s: child %s %d", what,
		      WIFEXITED(status) ? "exited with" : "killed by",
		      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* Runs @fn in @n processes and waits for all; true when all exited 0. */
static bool run_workers(int n, int (*fn)(int), const char *what)
{
	pid_t pids[8];
	bool ok = true;
	int i;

	for (i = 0; i < n; i++)
		pids[i] = spawn(fn, i);
	for (i = 0; i < n; i++)
		ok &= reap(pids[i], what);
	return ok;
}

static long vmstat(const char *key)
{
	return read_key("/proc/vmstat", key);
}

/* vmstat counters over a feature's run */
struct delta {
	const char *key;
	long start;
};

static void delta_start(struct delta *d, int n)
{
	while (n--)
		d[n].start = vmstat(d[n].key);
}

static long delta_of(const struct delta *d, int n, const char *key)
{
	while (n--)
		if (!strcmp(d[n].key, key))
			return vmstat(key) - d[n].start;
	return -1;
}

/* "# count FEATURE KEY N" for each counter: its change since delta_start(). */
static void delta_print(const char *feature, const struct delta *d, int n)
{
	int i;

	for (i = 0; i < n; i++)
		printf("# count %s %s %ld\n", feature, d[i].key, vmstat(d[i].key) - d[i].start);
}

/* ------------------------------------------------------------------ */
/* 1. swap                                                            */
/* ------------------------------------------------------------------ */

enum { SW_KSM_OUT, SW_ROUNDS, SW_CACHE_OUT, SW_CACHE_LEFT };
static char cg_dir[128];
static bool swap_on;

static bool cg_file_write(const char *file, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", cg_dir, file);
	return !write_file(path, val);
}

/* swap on /dev/zram0: a swap header (mkswap's format) and swapon(2). */
static const char *swap_create(void)
{
	static const char magic[] = "SWAPSPACE2";
	const unsigned long size = 256UL << 20;
	uint32_t *info;
	char *page;
	int fd;

	if (access("/sys/block/zram0/disksize", W_OK))
		return "no /dev/zram0 (CONFIG_ZRAM)";
	/* Not a knob to restore: swap_remove() resets the device. */
	if (write_file("/sys/block/zram0/disksize", "256M"))
		return "cannot set the size of /dev/zram0 (in use?)";
	page = calloc(1, PAGE);
	fd = open("/dev/zram0", O_WRONLY | O_CLOEXEC);
	if (!page || fd < 0)
		return "cannot open /dev/zram0";
	info = (uint32_t *)(page + 1024);
	info[0] = 1;				/* version */
	info[1] = size / PAGE - 1;		/* last_page */
	memcpy(page + PAGE - 10, magic, 10);
	if (pwrite(fd, page, PAGE, 0) != (ssize_t)PAGE || fsync(fd)) {
		close(fd);
		return "cannot write the swap header";
	}
	close(fd);
	free(page);
	if (syscall(SYS_swapon, "/dev/zram0", 0))
		return "swapon /dev/zram0 failed";
	swap_on = true;
	return NULL;
}

static void swap_remove(void)
{
	if (swap_on && syscall(SYS_swapoff, "/dev/zram0"))
		expect(false, "swapoff /dev/zram0: %m");
	if (swap_on)
		write_file("/sys/block/zram0/reset", "1");
	swap_on = false;
}

static int swap_child(struct area *a, uint64_t gen)
{
	bool ok = area_verify(a, "swap: forked child, after swap-in");
	size_t i;

	/* A write to a swapped-out KSM page: swap-in, then COW. */
	for (i = gen % 8; i < a->pages; i += 8)
		page_fill(a, i, 1000000 + gen * 64 + i % 64);
	ok &= area_verify(a, "swap: forked child, after its writes");
	return ok ? 0 : 1;
}

static int swap_worker(int w)
{
	char pid[16];
	struct area a;
	bool ok = true;
	int round;

	snprintf(pid, sizeof(pid), "%d", getpid());
	if (!expect(cg_file_write("cgroup.procs", pid), "join %s: %m", cg_dir) ||
	    !merge_set_ok(1) || !area_map(&a, 2048, 0, MAP_PRIVATE | MAP_ANONYMOUS))
		return 1;
	/* 64 contents shared by the workers, and a quarter of unique pages. */
	area_fill_dups(&a, 1, 64);
	for (size_t i = 3; i < a.pages; i += 4)
		page_fill(&a, i, 500000 + w * 10000 + i);
	for (round = 0; ok && go_on(round); round++) {
		uint8_t *was_ksm = calloc(a.pages, 1);
		long out = 0;
		pid_t child;
		size_t i;

		/*
		 * The other workers reclaim the cgroup too, these pages with
		 * theirs: merged pages of all of them are swapped out at once.
		 */
		ok &= area_wait_ksm(&a, a.pages / 4, true, "swap: before reclaim");
		for (i = 0; ok && i < a.pages; i++)
			was_ksm[i] = page_is_ksm(a.p + i * PAGE);
		/* Reclaim may stop short of the amount (EAGAIN): the pages count. */
		cg_file_write("memory.reclaim", "64M");
		for (i = 0; i < a.pages; i++)
			out += was_ksm[i] && (pagemap_entry(a.p + i * PAGE) & PM_SWAP);
		free(was_ksm);
		stat_add(&stats->count[0][SW_KSM_OUT], out);
		child = fork_counted(&stats->processes);
		if (child == 0)
			child_exit(swap_child(&a, round));
		ok &= reap(child, "swap: child");
		ok &= area_verify(&a, "swap: after swap-in");
		for (i = round % 16; i < a.pages; i += 16)
			page_fill(&a, i, 2000000 + round * 64 + i % 64);
		stat_add(&stats->count[0][SW_ROUNDS], 1);
	}
	ok &= area_verify(&a, "swap: at exit");
	return ok ? 0 : 1;
}

/*
 * A KSM page that reclaim swapped out but that a pipe keeps in the swap cache
 * (vmsplice()), one mapping faulted back in (still the KSM page), then
 * PR_SET_MEMORY_MERGE 0: touching the other pages must swap in private
 * copies, not map the KSM page again where KSM is off (and ksmd no longer
 * tracks it). In a child of the cgroup: 8 identical pages.
 */
static int swap_cache_unmerge(int unused)
{
	const size_t n = 8;
	int pipefd[2] = { -1, -1 };
	char pid[16], *p;
	struct iovec iov;
	long out = 0, left = 0;
	int tries;
	size_t i;
	bool ok;

	(void)unused;
	snprintf(pid, sizeof(pid), "%d", getpid());
	p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!expect(p != MAP_FAILED, "swap cache: mmap: %m") ||
	    !expect(cg_file_write("cgroup.procs", pid), "join %s: %m", cg_dir) || !merge_set_ok(1))
		return 1;
	madvise(p, n * PAGE, MADV_NOHUGEPAGE);
	memset(p, 0x6b, n * PAGE);
	ok = expect(ksm_wait_pages(p, n, n, 100, MERGE_WAIT) == (long)n,
		    "swap cache: the %zu pages did not merge", n);
	iov.iov_base = p;
	iov.iov_len = PAGE;
	ok = ok && expect(!pipe(pipefd) && vmsplice(pipefd[1], &iov, 1, 0) == PAGE,
			  "swap cache: pipe, vmsplice: %m");
	/* Reclaim may stop short (EAGAIN) or activate the page first: retry */
	for (tries = 0; ok && tries < 10 && out < (long)n; tries++) {
		cg_file_write("memory.reclaim", "64M");
		for (out = 0, i = 0; i < n; i++)
			out += !!(pagemap_entry(p + i * PAGE) & PM_SWAP);
	}
	printf("# swap cache: %ld of %zu pages swapped out after %d memory.reclaim\n", out, n, tries);
	(void)*(volatile char *)p;	/* fault one mapping back in: the KSM page */
	for (out = 0, i = 1; i < n; i++)
		out += !!(pagemap_entry(p + i * PAGE) & PM_SWAP);
	ok = ok && merge_set_ok(0);
	for (i = 0; ok && i < n; i++)
		ok &= expect(p[i * PAGE] == 0x6b && p[i * PAGE + PAGE - 1] == 0x6b,
			     "swap cache: page %zu changed", i);
	left = ksm_pages_in(p, n);
	close(pipefd[0]);
	close(pipefd[1]);
	stat_add(&stats->count[0][SW_CACHE_OUT], out);
	stat_add(&stats->count[0][SW_CACHE_LEFT], left);
	ok &= expect(out > 0, "swap cache: no page stayed swapped out to test the disable with");
	ok &= expect(left == 0 && smaps_vma(p, NULL, 0, "KSM") == 0,
		     "swap cache: %ld KSM pages mapped after the disable (smaps KSM: %ld kB)",
		     left, smaps_vma(p, NULL, 0, "KSM"));
	return ok ? 0 : 1;
}

static void test_swap(void)
{
	struct delta d[] = {
		{ .key = "pswpout" },
		{ .key = "pswpin" },
		{ .key = "ksm_swpin_copy" },
		{ .key = "cow_ksm" },
	};
	const char *skip;
	bool ok = true;

	skip = swap_create();
	if (!skip)
		skip = cgroup_create("ksm_mm", cg_dir, sizeof(cg_dir));
	if (skip) {
		ksft_test_result_skip("swap: %s\n", skip);
		goto out;
	}
	/*
	 * Above what the workers use merged (~8 MiB) and close to what they use
	 * unmerged (24 MiB) plus their children's copies, so that swapping in and
	 * forking reclaim too, not only memory.reclaim; not so tight that the
	 * pages ksmd is to merge are always swapped out (it merges present pages).
	 */
	ok &= expect(cg_file_write("memory.max", "28M"), "memory.max: %m");
	delta_start(d, ARRAY_SIZE(d));
	ok &= run_workers(3, swap_worker, "swap");
	ok &= reap(spawn(swap_cache_unmerge, 0), "swap: swap cache unmerge");
	printf("# count swap ksm_pages_swapped_out %ld\n", stats->count[0][SW_KSM_OUT]);
	delta_print("swap", d, ARRAY_SIZE(d));
	printf("# count swap rounds %ld\n", stats->count[0][SW_ROUNDS]);
	printf("# count swap swap_cache_ksm_pages_swapped_out %ld\n", stats->count[0][SW_CACHE_OUT]);
	printf("# count swap ksm_pages_mapped_after_disable %ld\n", stats->count[0][SW_CACHE_LEFT]);
	ok &= expect(stats->count[0][SW_KSM_OUT] > 0, "swap: no merged page was swapped out");
	ok &= expect(delta_of(d, 4, "pswpin") > 0, "swap: nothing was swapped in");
	ksft_test_result(ok, "swap: merged pages swapped out to zram and back, with fork and COW\n");
out:
	cgroup_remove(cg_dir);
	swap_remove();
}

/* ------------------------------------------------------------------ */
/* 2. migration and compaction                                        */
/* ------------------------------------------------------------------ */

enum { MG_MOVED, MG_STILL_KSM, MG_MBIND, MG_COMPACT, MG_ROUNDS, MG_BUSY, MG_OURS_KB, MG_LEFT };

static long move_pages_to(void **pages, int *nodes, int *status, long n)
{
	return syscall(SYS_move_pages, 0, n, pages, nodes, status, MPOL_MF_MOVE_ALL);
}

/*
 * Migration of a page fails for a moment while someone else holds it (ksmd
 * comparing it, the other worker moving the same KSM page the other way), and
 * move_pages() then stops at that batch: it returns how many pages it did not
 * move and leaves the status of the pages after it as it was. Move a few pages
 * per call, so that one failure leaves only its own few behind, and move what
 * is not there yet a few times.
 */
#define MOVE_CHUNK 8

static bool move_pages_retry(void **pages, int *nodes, int *status, long n)
{
	void **p = calloc(n, sizeof(*p));
	int *nd = calloc(n, sizeof(*nd)), *st = calloc(n, sizeof(*st)), try;
	long i, j, m, *idx = calloc(n, sizeof(*idx));
	bool ok = true;

	if (!p || !nd || !st || !idx)
		ok = expect(false, "move_pages: out of memory");
	for (try = 0; ok && try < 5; try++) {
		for (i = m = 0; i < n; i++) {
			if (status[i] == nodes[i])
				continue;
			p[m] = pages[i];
			nd[m] = nodes[i];
			st[m] = status[i];	/* where move_pages() stops short */
			idx[m++] = i;
		}
		if (!m)
			break;
		for (j = 0; ok && j < m; j += MOVE_CHUNK)
			if (move_pages_to(p + j, nd + j, st + j, m - j < MOVE_CHUNK ? m - j : MOVE_CHUNK) < 0 &&
			    errno != ENOMEM && errno != EBUSY)
				ok = expect(false, "move_pages: %m");
		for (i = 0; i < m; i++)
			status[idx[i]] = st[i];
		if (!ok)
			break;
	}
	free(p);
	free(nd);
	free(st);
	free(idx);
	return ok;
}

static bool mbind_node(char *p, size_t len, int node)
{
	unsigned long mask = 1UL << node;

	if (syscall(SYS_mbind, p, len, MPOL_BIND, &mask, 8 * sizeof(mask),
		    MPOL_MF_MOVE | MPOL_MF_MOVE_ALL))
		return expect(false, "mbind to node %d: %m", node);
	return expect(!syscall(SYS_mbind, p, len, MPOL_DEFAULT, NULL, 0, 0),
		      "mbind MPOL_DEFAULT: %m");
}

static int migrate_worker(int mac)
{
	void **pages;
	int *nodes, *status, round, left_why[128] = { 0 }, e;
	struct area a;
	bool ok;

	if (!merge_set_ok(1) || !area_map(&a, 1024, 0, MAP_PRIVATE | MAP_ANONYMOUS))
		return 1;
	pages = calloc(a.pages, sizeof(*pages));
	nodes = calloc(a.pages, sizeof(*nodes));
	status = calloc(a.pages, sizeof(*status));
	if (!pages || !nodes || !status)
		return 1;
	/*
	 * khugepaged may collapse a range with KSM pages into a huge page (a
	 * copy, up to max_ptes_shared of them): not what this test looks at.
	 */
	madvise(a.p, a.pages * PAGE, MADV_NOHUGEPAGE);
	area_fill_dups(&a, 10 + mac, 32);
	ok = area_wait_ksm(&a, a.pages / 2, false, "migration");
	for (round = 0; ok && go_on(round); round++) {
		long n = 0, moved = 0, ksm = 0, i;

		for (i = 0; i < (long)a.pages; i++)
			if (page_is_ksm(a.p + i * PAGE))
				pages[n++] = a.p + i * PAGE;
		/* Where they are, then each to the other node. */
		if (!expect(!move_pages_to(pages, NULL, status, n), "move_pages query: %m"))
			break;
		for (i = 0; i < n; i++)
			nodes[i] = status[i] == 0;
		ok &= move_pages_retry(pages, nodes, status, n);
		for (i = 0; i < n; i++) {
			if (status[i] != nodes[i]) {
				stat_add(&stats->count[1][MG_LEFT], 1);
				left_why[status[i] < 0 ? (-status[i] & 127) : 0]++;
				continue;
			}
			moved++;
			ksm += page_is_ksm_settled(pages[i]);
		}
		stat_add(&stats->count[1][MG_MOVED], moved);
		stat_add(&stats->count[1][MG_STILL_KSM], ksm);
		/*
		 * A moved KSM page keeps its stable node. ksmd may still
		 * replace a few meanwhile (a KSM page of the same content in
		 * the tree of the other node, a failed stable tree insertion
		 * that breaks a fresh merge): most must be KSM pages.
		 */
		ok &= expect(ksm * 10 >= moved * 9,
			     "migration: %ld of %ld moved KSM pages are no KSM pages",
			     moved - ksm, moved);
		ok &= area_verify(&a, "migration: after move_pages");
		/* The whole range to one node and back to the default policy. */
		ok &= mbind_node(a.p, a.pages * PAGE, round % 2);
		stat_add(&stats->count[1][MG_MBIND], 1);
		ok &= area_verify(&a, "migration: after mbind");
		ok &= expect(!write_file("/proc/sys/vm/compact_memory", "1"), "compact_memory: %m");
		stat_add(&stats->count[1][MG_COMPACT], 1);
		ok &= area_verify(&a, "migration: after compaction");
		/* Some COW, and pages that ksmd merges again. */
		for (i = round % 8; i < (long)a.pages; i += 8)
			page_fill(&a, i, 20 + mac + i % 32);
		ok &= area_wait_ksm(&a, a.pages / 2, false, "migration: merged again");
		stat_add(&stats->count[1][MG_ROUNDS], 1);
	}
	ok &= area_verify(&a, "migration: at exit");
	/* Why pages stayed: a status of -errno, or 0 when move_pages() stopped before them */
	for (e = 0; e < 128; e++)
		if (left_why[e])
			printf("# migration: %d pages not moved: %s\n", left_why[e],
			       e ? strerror(e) : "not reached");
	fflush(stdout);
	return ok ? 0 : 1;
}

/*
 * run=2 unmerges everything, so that merge_across_nodes may change; the
 * kernel refuses (EBUSY) while a KSM page is still mapped. run=2 unmerges
 * what processes registered with ksmd map, not the pages this process shares
 * with the workers it forked: their memory is all mergeable, so ksmd merges
 * what they inherited from us, and we map those KSM pages too. Unmerge ours
 * with an enable and a disable first. Then try again for a while: a mapped
 * page "could race with __mmput()" of a worker that just exited (mm/ksm.c).
 */
/* Who maps KSM pages, for a report: "PID COMM N kB" of each, up to @size. */
static void ksm_mappers(char *buf, size_t size)
{
	char path[64], comm[32];
	struct dirent *de;
	size_t len = 0;
	DIR *d = opendir("/proc");
	pid_t pid;
	long kb;

	buf[0] = 0;
	while (d && (de = readdir(d)) && len + 64 < size) {
		pid = atoi(de->d_name);
		if (pid <= 0)
			continue;
		proc_path(path, sizeof(path), pid, "smaps_rollup");
		kb = read_key(path, "KSM:");
		if (kb <= 0)
			continue;
		proc_path(path, sizeof(path), pid, "comm");
		if (read_file(path, comm, sizeof(comm)) < 0)
			strcpy(comm, "?");
		comm[strcspn(comm, "\n")] = 0;
		len += snprintf(buf + len, size - len, " %d %s %ld kB;", pid, comm, kb);
	}
	if (d)
		closedir(d);
}

static bool set_merge_across_nodes(int mac)
{
	char path[] = KSM_SYSFS "merge_across_nodes", val[4], who[512];
	long kb = read_key("/proc/self/smaps_rollup", "KSM:");
	int try;

	stat_add(&stats->count[1][MG_OURS_KB], kb > 0 ? kb : 0);
	if (!merge_set_ok(1) || !merge_set_ok(0))
		return false;
	snprintf(val, sizeof(val), "%ld", ksm_read("merge_across_nodes"));
	if (!knob_set(path, val))	/* saves it for knobs_restore() */
		return false;
	snprintf(val, sizeof(val), "%d", mac);
	for (try = 0; try < 60; try++) {
		if (!ksm_set("run", "2"))
			return false;
		if (!write_file(path, val))
			return ksm_set("run", "1");
		if (errno != EBUSY)
			break;
		stat_add(&stats->count[1][MG_BUSY], 1);
		sleep(1);
	}
	ksm_mappers(who, sizeof(who));
	expect(false, "write %s to %s: %m (pages_shared %ld, pages_sharing %ld; processes that map KSM pages:%s)",
	       val, path, ksm_read("pages_shared"), ksm_read("pages_sharing"),
	       who[0] ? who : " none");
	ksm_set("run", "1");	/* for the tests after this one */
	return false;
}

static void test_migration(void)
{
	struct delta d[] = {
		{ .key = "pgmigrate_success" },
		{ .key = "pgmigrate_fail" },
		{ .key = "compact_isolated" },
	};
	double end = deadline, start = now_sec();
	bool ok = true;
	int mac;

	if (access("/sys/devices/system/node/node1", F_OK)) {
		ksft_test_result_skip("migration: one NUMA node (boot with two: scripts/vm.sh)\n");
		return;
	}
	if (ksm_read("merge_across_nodes") < 0) {
		ksft_test_result_skip("migration: no merge_across_nodes (CONFIG_NUMA)\n");
		return;
	}
	delta_start(d, ARRAY_SIZE(d));
	for (mac = 1; mac >= 0; mac--) {
		deadline = start + (end - start) * (2 - mac) / 2;
		ok &= set_merge_across_nodes(mac);
		ok &= run_workers(2, migrate_worker, mac ? "migration, merge_across_nodes 1" :
						       "migration, merge_across_nodes 0");
	}
	deadline = end;
	ok &= set_merge_across_nodes(1);
	printf("# count migration ksm_pages_moved %ld\n", stats->count[1][MG_MOVED]);
	printf("# count migration still_ksm_after_move %ld\n", stats->count[1][MG_STILL_KSM]);
	printf("# count migration ksm_pages_not_moved %ld\n", stats->count[1][MG_LEFT]);
	delta_print("migration", d, ARRAY_SIZE(d));
	printf("# count migration mbind_moves %ld\n", stats->count[1][MG_MBIND]);
	printf("# count migration compactions %ld\n", stats->count[1][MG_COMPACT]);
	printf("# count migration merge_across_nodes_ebusy %ld\n", stats->count[1][MG_BUSY]);
	printf("# count migration ksm_kb_shared_with_workers %ld\n", stats->count[1][MG_OURS_KB]);
	ok &= expect(stats->count[1][MG_MOVED] > 0, "migration: no KSM page was moved");
	ksft_test_result(ok, "migration: KSM pages moved between nodes and compacted, merge_across_nodes 1 and 0\n");
}

/* ------------------------------------------------------------------ */
/* 3. transparent huge pages                                          */
/* ------------------------------------------------------------------ */

enum { TH_KSM, TH_KHUGEPAGED, TH_MADV, TH_ROUNDS, TH_NOTHP };
#define KHUGEPAGED_WAIT	5.0	/* s for khugepaged to collapse an unmerged range */

static long area_thp_kb(const struct area *a)
{
	char flags[256];

	return smaps_vma(a->p, flags, sizeof(flags), "AnonHugePages");
}

static int thp_worker(int w)
{
	struct area a;
	bool ok = true;
	int round;

	if (!merge_set_ok(1) || !area_map(&a, 8 * HPAGE_PAGES, HPAGE, MAP_PRIVATE | MAP_ANONYMOUS))
		return 1;
	if (!expect(!madvise(a.p, a.pages * PAGE, MADV_HUGEPAGE), "MADV_HUGEPAGE: %m"))
		return 1;
	/* Eight identical huge pages: ksmd can merge them only page by page. */
	area_fill_dups(&a, 100, HPAGE_PAGES);
	if (area_thp_kb(&a) <= 0) {
		stat_add(&stats->count[2][TH_NOTHP], 1);
		return 0;
	}
	for (round = 0; ok && go_on(round); round++) {
		double end;
		long kb;
		size_t i;

		ok &= area_wait_ksm(&a, HPAGE_PAGES, false, "thp: huge pages split and merged");
		stat_add(&stats->count[2][TH_KSM], area_ksm_pages(&a));
		ok &= area_verify(&a, "thp: merged");
		/*
		 * Unique again (COW of every KSM page), then collapsed: by
		 * khugepaged (scanning every 100 ms), else by MADV_COLLAPSE.
		 */
		for (i = 0; i < a.pages; i++)
			page_fill(&a, i, 3000000 + w * 100000 + round * 10000 + i);
		end = now_sec() + KHUGEPAGED_WAIT;
		while ((kb = area_thp_kb(&a)) <= 0 && now_sec() < end)
			usleep(100000);
		stat_add(&stats->count[2][TH_KHUGEPAGED], kb > 0 ? kb / 2048 : 0);
		ok &= area_verify(&a, "thp: collapsed by khugepaged");
		stat_add(&stats->operations, 1);
		if (madvise(a.p, a.pages * PAGE, MADV_COLLAPSE))
			ok &= expect(errno == EAGAIN || errno == ENOMEM, "MADV_COLLAPSE: %m");
		stat_add(&stats->count[2][TH_MADV], area_thp_kb(&a) / 2048 - (kb > 0 ? kb / 2048 : 0));
		ok &= area_verify(&a, "thp: collapsed");
		/* Identical huge pages again, for the next split. */
		area_fill_dups(&a, 200 + round * HPAGE_PAGES, HPAGE_PAGES);
		stat_add(&stats->count[2][TH_ROUNDS], 1);
	}
	ok &= area_verify(&a, "thp: at exit");
	return ok ? 0 : 1;
}

static void test_thp(void)
{
	struct delta d[] = {
		{ .key = "thp_split_page" },
		{ .key = "thp_collapse_alloc" },
		{ .key = "thp_fault_alloc" },
	};
	bool ok = true;

	if (access(THP_SYSFS "enabled", W_OK)) {
		ksft_test_result_skip("thp: no " THP_SYSFS " (CONFIG_TRANSPARENT_HUGEPAGE)\n");
		return;
	}
	ok &= knob_set(THP_SYSFS "enabled", "madvise") &&
	      knob_set(THP_SYSFS "khugepaged/pages_to_scan", "8192") &&
	      knob_set(THP_SYSFS "khugepaged/scan_sleep_millisecs", "100") &&
	      knob_set(THP_SYSFS "khugepaged/alloc_sleep_millisecs", "100");
	delta_start(d, ARRAY_SIZE(d));
	ok &= run_workers(2, thp_worker, "thp");
	if (stats->count[2][TH_NOTHP]) {
		ksft_test_result_skip("thp: no huge page could be allocated for MADV_HUGEPAGE\n");
		return;
	}
	printf("# count thp ksm_pages_in_huge_ranges %ld\n", stats->count[2][TH_KSM]);
	delta_print("thp", d, ARRAY_SIZE(d));
	printf("# count thp collapsed_by_khugepaged %ld\n", stats->count[2][TH_KHUGEPAGED]);
	printf("# count thp collapsed_by_madv_collapse %ld\n", stats->count[2][TH_MADV]);
	ok &= expect(delta_of(d, 3, "thp_split_page") > 0, "thp: ksmd split no huge page");
	ok &= expect(stats->count[2][TH_KHUGEPAGED] + stats->count[2][TH_MADV] > 0,
		     "thp: no unmerged range was collapsed");
	ksft_test_result(ok, "thp: huge pages split by ksmd, collapsed again when unique\n");
}

/* ------------------------------------------------------------------ */
/* 4. hugetlb                                                         */
/* ------------------------------------------------------------------ */

enum { HT_CHECKS, HT_SCANS };

/* The hugetlb VMA at @p: "ht" and never "mg". */
static bool hugetlb_unmarked(const char *p, const char *what)
{
	char flags[256] = "";

	smaps_vma(p, flags, sizeof(flags), NULL);
	if (!flags[0])
		return expect(false, "%s: no smaps entry for %p", what, p);
	stat_add(&stats->count[3][HT_CHECKS], 1);
	return expect(flag_listed(flags, "ht") && !flag_listed(flags, "mg"),
		      "%s: hugetlb VMA has VmFlags:%s", what, flags);
}

static int hugetlb_worker(int unused)
{
	const int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB;
	struct area before, after;
	bool ok = true;
	pid_t child;
	int round;

	(void)unused;
	if (!area_map(&before, HPAGE_PAGES, 0, fl))
		return 1;
	area_fill_dups(&before, 300, 8);
	ok &= merge_set_ok(1);
	if (!area_map(&after, HPAGE_PAGES, 0, fl))
		return 1;
	area_fill_dups(&after, 300, 8);
	ok &= expect(!madvise(after.p, after.pages * PAGE, MADV_MERGEABLE),
		     "MADV_MERGEABLE on hugetlb: %m");
	for (round = 0; ok && go_on(round); round++) {
		ok &= hugetlb_unmarked(before.p, "hugetlb mapped before enabling");
		ok &= hugetlb_unmarked(after.p, "hugetlb mapped after enabling, then madvised");
		ok &= expect(ksm_wait_scans(2, MERGE_WAIT), "hugetlb: ksmd made no 2 full scans");
		stat_add(&stats->count[3][HT_SCANS], 2);
		ok &= area_verify(&before, "hugetlb") & area_verify(&after, "hugetlb");
		ok &= expect(!area_ksm_pages(&before) && !area_ksm_pages(&after),
			     "hugetlb: KSM pages in a hugetlb mapping");
		child = fork_counted(&stats->processes);
		if (child == 0) {
			ok = hugetlb_unmarked(before.p, "hugetlb in a forked child");
			page_fill(&before, 0, 400);	/* COW of a private huge page */
			ok &= area_verify(&before, "hugetlb in a forked child");
			child_exit(ok ? 0 : 1);
		}
		ok &= reap(child, "hugetlb: child");
		/*
		 * Disabled, then enabled again: the next round waits for
		 * ksmd's scans, which stop while no mm is registered.
		 */
		ok &= merge_set_ok(0) & area_verify(&before, "hugetlb after disable");
		ok &= merge_set_ok(1) & hugetlb_unmarked(before.p, "hugetlb after enabling again");
	}
	area_unmap(&before);
	area_unmap(&after);
	return ok ? 0 : 1;
}

static void test_hugetlb(void)
{
	bool ok;

	if (access("/proc/sys/vm/nr_hugepages", W_OK)) {
		ksft_test_result_skip("hugetlb: no /proc/sys/vm/nr_hugepages (CONFIG_HUGETLBFS)\n");
		return;
	}
	/* Two mappings of one huge page, and their copies in the child. */
	if (!knob_set("/proc/sys/vm/nr_hugepages", "6") ||
	    read_key("/proc/sys/vm/nr_hugepages", NULL) < 4) {
		ksft_test_result_skip("hugetlb: fewer than 4 free huge pages\n");
		return;
	}
	ok = run_workers(1, hugetlb_worker, "hugetlb");
	printf("# count hugetlb vma_checks %ld\n", stats->count[3][HT_CHECKS]);
	printf("# count hugetlb full_scans %ld\n", stats->count[3][HT_SCANS]);
	ksft_test_result(ok, "hugetlb: never mergeable in an enabled process, intact while ksmd scans\n");
}

/* ------------------------------------------------------------------ */
/* 5. protection keys                                                 */
/* ------------------------------------------------------------------ */

enum { PK_FAULTS, PK_CHECKS };
static sigjmp_buf pkey_jmp;
static volatile sig_atomic_t pkey_si_code;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	pkey_si_code = si->si_code;
	siglongjmp(pkey_jmp, 1);
}

/* Any other SIGSEGV of a pkeys worker: say where, rather than die silently. */
static void on_stray_segv(int sig, siginfo_t *si, void *uc)
{
	char msg[96];
	int len;

	(void)sig;
	(void)uc;
	len = snprintf(msg, sizeof(msg), "# pkeys: unexpected SIGSEGV at %p, si_code %d\n",
		       si->si_addr, si->si_code);
	write(STDOUT_FILENO, msg, len);
	_exit(3);
}

/*
 * Whether a write to @p faults with SEGV_PKUERR (the page is not changed).
 * The handler runs with the default PKRU, which siglongjmp() does not undo:
 * put the rights of @pkey back.
 */
static bool write_faults(volatile char *p, int pkey)
{
	struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO }, old;
	int rights = pkey_get(pkey);
	bool faulted = false;

	sigaction(SIGSEGV, &sa, &old);
	pkey_si_code = 0;
	if (!sigsetjmp(pkey_jmp, 1))
		*p = *p;
	else
		faulted = pkey_si_code == SEGV_PKUERR;
	pkey_set(pkey, rights);
	sigaction(SIGSEGV, &old, NULL);
	if (faulted)
		stat_add(&stats->count[4][PK_FAULTS], 1);
	return faulted;
}

/* smaps ProtectionKey of @p is @pkey, "mg" is @mg, and writes fault. */
static bool pkey_kept(struct area *a, int pkey, bool mg, const char *what)
{
	char flags[256];
	long key = smaps_vma(a->p, flags, sizeof(flags), "ProtectionKey");
	bool ok;

	stat_add(&stats->count[4][PK_CHECKS], 1);
	ok = expect(key == pkey, "%s: ProtectionKey %ld, expected %d", what, key, pkey);
	ok &= expect(flag_listed(flags, "mg") == mg, "%s: VmFlags:%s, expected%s mg", what, flags,
		     mg ? "" : " no");
	ok &= expect(write_faults(a->p, pkey) && write_faults(a->p + (a->pages - 1) * PAGE, pkey),
		     "%s: a write with PKEY_DISABLE_WRITE did not fault with SEGV_PKUERR", what);
	return ok & area_verify(a, what);
}

static int pkey;		/* of test_pkeys(), for its worker */

static int pkey_worker(int unused)
{
	struct sigaction sa = { .sa_sigaction = on_stray_segv, .sa_flags = SA_SIGINFO };
	struct area a, b;
	bool ok = true;
	pid_t child;
	int round;

	(void)unused;
	sigaction(SIGSEGV, &sa, NULL);
	if (!area_map(&a, 256, 0, MAP_PRIVATE | MAP_ANONYMOUS))
		return 1;
	area_fill_dups(&a, 500, 16);
	if (!expect(!pkey_mprotect(a.p, a.pages * PAGE, PROT_READ | PROT_WRITE, pkey),
		    "pkey_mprotect: %m") ||
	    !expect(!pkey_set(pkey, PKEY_DISABLE_WRITE), "pkey_set: %m"))
		return 1;
	ok &= pkey_kept(&a, pkey, false, "pkeys: before enabling");
	for (round = 0; ok && go_on(round); round++) {
		ok &= merge_set_ok(1) & pkey_kept(&a, pkey, true, "pkeys: enabled");
		ok &= area_wait_ksm(&a, a.pages / 2, false, "pkeys: merged");
		ok &= pkey_kept(&a, pkey, true, "pkeys: merged");
		/* A new mapping beside it: mergeable, with key 0, ours unchanged. */
		if (area_map(&b, 16, 0, MAP_PRIVATE | MAP_ANONYMOUS)) {
			char flags[256];
			long key = smaps_vma(b.p, flags, sizeof(flags), "ProtectionKey");

			ok &= expect(key == 0 && flag_listed(flags, "mg"),
				     "pkeys: new mapping has key %ld, VmFlags:%s", key, flags);
			area_unmap(&b);
		}
		ok &= pkey_kept(&a, pkey, true, "pkeys: after a new mapping");
		child = fork_counted(&stats->processes);
		if (child == 0)
			child_exit(pkey_kept(&a, pkey, true, "pkeys: forked child") ? 0 : 1);
		ok &= reap(child, "pkeys: child");
		ok &= merge_set_ok(0) & pkey_kept(&a, pkey, false, "pkeys: disabled");
		ok &= expect(!area_ksm_pages(&a), "pkeys: KSM pages left after disabling");
	}
	/* Writable again: the pages are private copies now. */
	pkey_set(pkey, 0);
	area_fill_dups(&a, 600, 16);
	ok &= area_verify(&a, "pkeys: written after PKEY_DISABLE_WRITE is lifted");
	return ok ? 0 : 1;
}

static void test_pkeys(void)
{
	bool ok;

	pkey = pkey_alloc(0, 0);
	if (pkey < 0) {
		ksft_test_result_skip("pkeys: pkey_alloc: %s (CPU without PKU/OSPKE, or no %s)\n",
				      strerror(errno), "CONFIG_X86_INTEL_MEMORY_PROTECTION_KEYS");
		return;
	}
	ok = run_workers(1, pkey_worker, "pkeys");
	pkey_free(pkey);
	printf("# count pkeys pkey_write_faults %ld\n", stats->count[4][PK_FAULTS]);
	printf("# count pkeys checks %ld\n", stats->count[4][PK_CHECKS]);
	ksft_test_result(ok, "pkeys: protection key and its rules kept across enable, merge, fork, disable\n");
}

/* ------------------------------------------------------------------ */
/* 6. NUMA balancing                                                  */
/* ------------------------------------------------------------------ */

enum { NB_DISABLES, NB_UNMERGED, NB_LEFT };
static volatile bool readers_stop;

struct reader {
	struct area *a;
	int cpu;
};

/* Reads (and so NUMA-faults) the area from one CPU until told to stop. */
static void *reader_main(void *arg)
{
	struct reader *r = arg;
	cpu_set_t set;
	volatile uint64_t sum = 0;

	CPU_ZERO(&set);
	CPU_SET(r->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	while (!readers_stop)
		for (size_t i = 0; i < r->a->pages && !readers_stop; i++)
			sum += *(volatile uint64_t *)(r->a->p + i * PAGE);
	return NULL;
}

static int numa_worker(int w)
{
	struct reader r[2];
	pthread_t th[2];
	struct area a;
	bool ok = true;
	int round, i;

	(void)w;
	if (!area_map(&a, 1024, 0, MAP_PRIVATE | MAP_ANONYMOUS))
		return 1;
	area_fill_dups(&a, 700, 32);
	for (i = 0; i < 2; i++) {
		r[i] = (struct reader){ .a = &a, .cpu = i };
		pthread_create(&th[i], NULL, reader_main, &r[i]);
	}
	for (round = 0; ok && go_on(round); round++) {
		long n;

		ok &= merge_set_ok(1);
		ok &= area_wait_ksm(&a, a.pages / 4, false, "numa_balancing: merged");
		n = area_ksm_pages(&a);
		ok &= merge_set_ok(0);
		stat_add(&stats->count[5][NB_DISABLES], 1);
		stat_add(&stats->count[5][NB_UNMERGED], n);
		n = area_ksm_pages(&a);
		stat_add(&stats->count[5][NB_LEFT], n);
		ok &= expect(!n, "numa_balancing: %ld KSM pages left after disabling", n);
		ok &= area_verify(&a, "numa_balancing: disabled");
		/* Some writes: the next merge has COW'd pages to find. */
		for (size_t j = round % 8; j < a.pages; j += 8)
			page_fill(&a, j, 700 + j % 32);
	}
	readers_stop = true;
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ok &= area_verify(&a, "numa_balancing: at exit");
	return ok ? 0 : 1;
}

static void test_numa_balancing(void)
{
	struct delta d[] = {
		{ .key = "numa_pte_updates" },
		{ .key = "numa_hint_faults" },
		{ .key = "numa_pages_migrated" },
	};
	const char *dbg = DEBUGFS "sched/numa_balancing/";
	char path[128];
	bool ok = true;

	if (access("/sys/devices/system/node/node1", F_OK) ||
	    access("/proc/sys/kernel/numa_balancing", W_OK)) {
		ksft_test_result_skip("numa_balancing: needs two NUMA nodes and CONFIG_NUMA_BALANCING\n");
		return;
	}
	ok &= knob_set("/proc/sys/kernel/numa_balancing", "1");
	/* Sample at once and often: a test run lasts seconds, not minutes. */
	snprintf(path, sizeof(path), "%sscan_delay_ms", dbg);
	if (!access(path, W_OK)) {
		ok &= knob_set(path, "0");
		snprintf(path, sizeof(path), "%sscan_period_min_ms", dbg);
		ok &= knob_set(path, "10");
		snprintf(path, sizeof(path), "%sscan_period_max_ms", dbg);
		ok &= knob_set(path, "100");
	}
	delta_start(d, ARRAY_SIZE(d));
	ok &= run_workers(2, numa_worker, "numa_balancing");
	printf("# count numa_balancing disables %ld\n", stats->count[5][NB_DISABLES]);
	printf("# count numa_balancing ksm_pages_unmerged %ld\n", stats->count[5][NB_UNMERGED]);
	delta_print("numa_balancing", d, ARRAY_SIZE(d));
	ok &= expect(delta_of(d, 3, "numa_pte_updates") > 0,
		     "numa_balancing: no PTE was made protnone");
	ksft_test_result(ok, "numa_balancing: merge and disable while PTEs are protnone\n");
}

/* ------------------------------------------------------------------ */
/* 7. use_zero_pages and run=2                                        */
/* ------------------------------------------------------------------ */

enum { ZP_PEAK, ZP_RUN2, ZP_EXITING };
static volatile int *zero_stop;

static int zero_child(int unused)
{
	(void)unused;
	return 0;
}

static int zero_worker(int w)
{
	struct area a;
	bool ok;
	int round;

	(void)w;
	if (!merge_set_ok(1) || !area_map(&a, 512, 0, MAP_PRIVATE | MAP_ANONYMOUS))
		return 1;
	/* Half empty pages (written: ksmd maps the zero page), half duplicates. */
	for (size_t i = 0; i < a.pages; i++)
		page_fill(&a, i, i % 2 ? ZERO_KEY : 800 + i % 16);
	ok = true;
	for (round = 0; ok && !*zero_stop; round++) {
		size_t i;

		usleep(200000);
		ok &= area_verify(&a, "zero_pages");
		for (i = round % 16; i < a.pages; i += 16)
			page_fill(&a, i, a.key[i] == ZERO_KEY ? 800 + i % 16 : ZERO_KEY);
		if (round % 4 == 0)
			ok &= reap(spawn(zero_child, 0), "zero_pages: child");
	}
	ok &= area_verify(&a, "zero_pages: at exit");
	return ok ? 0 : 1;
}

/*
 * run=2 unmerges every mm on KSM's list, but a forked child that is exiting
 * has left the list (__ksm_exit()) before exit_mmap() zaps the KSM zero pages
 * it copied from its parent: they count until the zap is done.  With ksmd
 * stopped nothing maps a new one, so the counters can only fall: give such
 * exits EXIT_WAIT to finish, and count how often one was in flight.
 */
#define EXIT_WAIT		5.0

static bool ksm_counters_zero(const char *what)
{
	double end = now_sec() + EXIT_WAIT;
	long zp, shared, sharing;
	bool waited = false;

	for (;;) {
		zp = ksm_read("ksm_zero_pages");
		shared = ksm_read("pages_shared");
		sharing = ksm_read("pages_sharing");
		if ((!zp && !shared && !sharing) || now_sec() >= end)
			break;
		waited = true;
		usleep(10000);
	}
	if (waited)
		stat_add(&stats->count[6][ZP_EXITING], 1);
	return expect(!zp && !shared && !sharing,
		      "%s: ksm_zero_pages %ld, pages_shared %ld, pages_sharing %ld %.0f s later",
		      what, zp, shared, sharing, EXIT_WAIT);
}

static void test_zero_pages(void)
{
	pid_t pids[3];
	bool ok = true;
	int i, round;

	if (ksm_read("use_zero_pages") < 0 || ksm_read("ksm_zero_pages") < 0) {
		ksft_test_result_skip("zero_pages: no use_zero_pages or ksm_zero_pages in sysfs\n");
		return;
	}
	ok &= ksm_set("use_zero_pages", "1");
	*zero_stop = 0;
	for (i = 0; i < 3; i++)
		pids[i] = spawn(zero_worker, i);
	for (round = 0; ok && go_on(round); round++) {
		double end = now_sec() + MERGE_WAIT;
		long zp;

		while ((zp = ksm_read("ksm_zero_pages")) < 256 && now_sec() < end)
			usleep(100000);
		if (zp > stats->count[6][ZP_PEAK])
			stats->count[6][ZP_PEAK] = zp;
		ok &= expect(zp > 0, "zero_pages: no zero page merged after %.0f s", MERGE_WAIT);
		/* Unmerge everything while the processes write, fork and exit. */
		ok &= ksm_set("run", "2");
		stat_add(&stats->count[6][ZP_RUN2], 1);
		stat_add(&stats->operations, 1);
		ok &= ksm_counters_zero("zero_pages: after run=2");
		ok &= ksm_set("run", "1");
	}
	*zero_stop = 1;
	for (i = 0; i < 3; i++)
		ok &= reap(pids[i], "zero_pages");
	/* Processes gone: their zero pages were uncounted when unmapped. */
	ok &= ksm_set("run", "2") && ksm_counters_zero("zero_pages: after exit and run=2");
	ok &= expect(!ksm_read("ksm_zero_pages"), "zero_pages: counter left after exit");
	printf("# count zero_pages ksm_zero_pages_peak %ld\n", stats->count[6][ZP_PEAK]);
	printf("# count zero_pages run2_while_running %ld\n", stats->count[6][ZP_RUN2]);
	printf("# count zero_pages run2_exit_in_flight %ld\n", stats->count[6][ZP_EXITING]);
	ksft_test_result(ok, "zero_pages: use_zero_pages and run=2 while enabled processes run\n");
}

/* ------------------------------------------------------------------ */

static const struct feature {
	const char *name;
	void (*test)(void);
} features[] = {
	{ "swap", test_swap },
	{ "migration", test_migration },
	{ "thp", test_thp },
	{ "hugetlb", test_hugetlb },
	{ "pkeys", test_pkeys },
	{ "numa_balancing", test_numa_balancing },
	{ "zero_pages", test_zero_pages },
};

/* -f NAME[,NAME...]: whether feature @f is one of them (all without -f). */
static bool selected(const char *only, const struct feature *f)
{
	size_t len = strlen(f->name);
	const char *p;

	if (!only)
		return true;
	for (p = only; (p = strstr(p, f->name)); p += len)
		if ((p == only || p[-1] == ',') && (p[len] == ',' || !p[len]))
			return true;
	return false;
}

static void on_fatal(int sig)
{
	knobs_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* After knobs_restore(), at the exit of this process (not of a child). */
static void cleanup(void)
{
	cgroup_remove(cg_dir);
	swap_remove();
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	double secs = 60, start;
	size_t t, n = 0, i = 0;
	int opt;

	while ((opt = getopt(argc, argv, "d:i:f:")) != -1) {
		switch (opt) {
		case 'd':
			secs = atof(optarg);
			break;
		case 'i':
			max_rounds = atoi(optarg);
			break;
		case 'f':
			only = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [-d seconds] [-i rounds per feature] [-f feature,...]\n",
				argv[0]);
			return 2;
		}
	}
	for (t = 0; t < ARRAY_SIZE(features); t++)
		n += selected(only, &features[t]);
	if (!n) {
		fprintf(stderr, "%s: no feature named in -f %s; features:", argv[0], only);
		for (t = 0; t < ARRAY_SIZE(features); t++)
			fprintf(stderr, " %s", features[t].name);
		fprintf(stderr, "\n");
		return 2;
	}
	ksft_print_header();
	if (geteuid())
		ksft_exit_skip("needs root\n");
	if (ksm_read("run") < 0 || prctl(PR_GET_MEMORY_MERGE, 0UL, 0UL, 0UL, 0UL) < 0)
		ksft_exit_skip("no per-process KSM (PR_GET_MEMORY_MERGE: %s)\n", strerror(errno));
	stats = mmap(NULL, sizeof(*stats) + sizeof(int), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stats == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	zero_stop = (int *)(stats + 1);
	cleanup_at_exit(cleanup);
	signal(SIGTERM, on_fatal);
	signal(SIGINT, on_fatal);
	ksft_set_plan(n);
	if (!ksmd_fast(5000, 0))
		ksft_exit_fail_msg("cannot set the ksmd knobs\n");
	start = now_sec();
	for (t = 0; t < ARRAY_SIZE(features); t++) {
		if (!selected(only, &features[t]))
			continue;
		deadline = start + secs * ++i / n;
		features[t].test();
		fflush(stdout);
	}
	print_stats("operations", stats->operations, "processes", stats->processes,
		    "pages_verified", stats->pages_verified, "mismatches", stats->mismatches, NULL);
	ksft_finished();
}
