// SPDX-License-Identifier: GPL-2.0
/*
 * ksm_stress: concurrency stress of per-process KSM with data verification.
 *
 * Several worker processes, each with several threads, do random mmap,
 * munmap (whole and partial), mremap (grow, shrink, move), mprotect,
 * madvise(MADV_MERGEABLE/MADV_UNMERGEABLE), page rewrites, fork, exec and
 * prctl(PR_SET/GET_MEMORY_MERGE) while ksmd scans flat out.  Every page holds
 * a pattern derived from (process, address, generation) with many duplicates
 * across processes, and is verified before it is unmapped, after every
 * operation that moves or copies it, and at exit: a mismatch is lost data.
 *
 * Some regions are what a process with the flag set has mergeable without
 * ever asking: sparse reservations (64 GiB, now and then 1 TiB, of
 * MAP_NORESERVE with a few pages written far apart; the others must read as
 * zero), and ranges that userfaultfd write-protects (uffd-wp), which are
 * unmerged while protected and must stay protected (pagemap PM_UFFD_WP).
 *
 * Each thread owns its regions, so the expected content of a page is always
 * known.  Thread 0 of a worker is the only one that calls PR_SET_MEMORY_MERGE,
 * so it can check PR_GET_MEMORY_MERGE, smaps and ksm_stat against the value
 * it set while the other threads keep changing the address space.
 *
 * The root process watches a heartbeat per thread: a thread stuck in one
 * operation for longer than the hang limit (a leaked lock, say) fails the run.
 *
 * Usage: ksm_stress [-d seconds] [-i ops per thread] [-p procs] [-t threads]
 *                   [-s seed]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/kernel-page-flags.h>
#include <linux/userfaultfd.h>

#include "kselftest.h"
#include "stress_util.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE	0x100000
#endif

#define MAX_PROCS	16
#define MAX_THREADS	8
#define NR_REGIONS	8
#define MAX_PAGES	48	/* at creation; mremap may double it */
#define DUP_KEYS	32	/* distinct page contents per parity and generation */
#define HANG_SECS	120	/* no progress for this long = a hang */
#define MAX_REPORTS	20	/* detailed messages per kind of failure */
/*
 * Shortest -d in which result 10 insists on a merged write-protected page
 * being unmerged: 45 s runs under TCG always had some; runs of 12 s, and
 * one of 33 s on a loaded host, had none.
 */
#define WP_CHECK_SECS	30
#define MAX_DATA_PAGES	(3 * MAX_PAGES)	/* largest region mremap can make */
#define SPARSE_SIZE	(64ULL << 30)	/* a sparse reservation ... */
#define SPARSE_HUGE	(1ULL << 40)	/* ... or, now and then, this */
#define SPARSE_TOUCH	6	/* pages written in a sparse reservation, at most */
#define MAX_SPARSE	2	/* sparse reservations per thread */
#define UFFD_WAIT_MS	2500	/* for ksmd to merge a write-protected page */

/* region.snap[]: a data page before an unmerge */
#define SNAP_WP		1	/* had the uffd-wp bit */
#define SNAP_KSM	2	/* was a KSM page */

enum op {
	OP_MAP, OP_UNMAP, OP_TRIM, OP_MREMAP, OP_MPROTECT, OP_MADVISE,
	OP_REWRITE, OP_VERIFY, OP_UFFD, OP_PRCTL, OP_SMAPS, OP_FORK, OP_EXEC, OP_DONE,
	NR_OPS
};

static const char *const op_name[NR_OPS] = {
	"mmap", "munmap", "partial munmap", "mremap", "mprotect", "madvise",
	"rewrite", "verify", "uffd-wp", "prctl", "smaps/ksm_stat", "fork", "exec", "done",
};

/* Shared by the root and every descendant (MAP_SHARED, never mergeable). */
struct shared {
	unsigned long ops, pages_verified, mismatches, errors, processes;
	unsigned long flag_bad, children_bad, forks, execs, mremap_efault;
	unsigned long reports;
	unsigned long sparse_made, sparse_huge, sparse_unmerged, zero_checked, zero_bad;
	unsigned long prot_none_unmerged;
	unsigned long uffd_ranges, uffd_unmerged, uffd_unmerged_prctl, uffd_ksm_pages;
	unsigned long uffd_lost_unmerge, uffd_lost_other, uffd_lost_ksm;
	unsigned long unmerges_checked, unmerge_left;
	int stop;
	struct {
		struct heartbeat hb;
		int op;
	} thread[MAX_PROCS][MAX_THREADS];
};

struct region {
	char *addr;
	size_t npages;
	uintptr_t tag;		/* address the first page had when written */
	unsigned int gen;
	uint64_t seed;		/* unique-content regions: per-region seed */
	bool used, shared, unique;
	bool sparse;		/* MAP_NORESERVE reservation: only touched[] hold data */
	int ntouched;
	size_t touched[SPARSE_TOUCH];	/* ascending page indexes */
	int uffd;		/* userfaultfd registered (WP mode) over it, or -1 */
	bool wp;		/* write-protected with UFFDIO_WRITEPROTECT */
	bool snapped;		/* snap[] is the state right before an unmerge */
	uint8_t snap[MAX_DATA_PAGES];	/* SNAP_* of each data page */
};

struct tctx {
	int proc, tid;
	uint64_t rnd;
	unsigned long iter;
	struct region reg[NR_REGIONS];
};

static struct shared *sh;
static size_t ps;
/* The command line; with -i, the run may end before ksmd merged much. */
static struct run_opts opts = WORKER_OPTS("ops per thread", 60, 4, MAX_PROCS, 4, MAX_THREADS);
static unsigned long duration;	/* -d */
static time_t deadline;
static int proc_flag;		/* worker: the value thread 0 last set */
static bool uffd_ok;		/* userfaultfd can write-protect anonymous memory */
static bool kpageflags_ok;	/* /proc/kpageflags can tell KSM pages */
static unsigned long merge_seq;	/* worker: odd while thread 0 enables the flag */

#define add(field, n)	__atomic_fetch_add(&sh->field, (n), __ATOMIC_RELAXED)
/* A failure; no stdio, so that a forked child can report too. */
#define report(...)	report_limited(&sh->reports, MAX_REPORTS, __VA_ARGS__)

/* Whole seconds, for the heartbeats. */
static unsigned long now(void)
{
	return (unsigned long)now_sec();
}

static uint64_t rnd(struct tctx *t)
{
	t->rnd = mix64(t->rnd);
	return t->rnd;
}

static void syscall_failed(struct tctx *t, const char *call)
{
	int e = errno;

	add(errors, 1);
	report("# proc %d thread %d: %s failed: %s\n", t->proc, t->tid, call, strerror(e));
}

/*
 * The first word of page @i of @r.  Duplicate-content regions depend only on
 * the parity of the worker, the page's original address modulo DUP_KEYS pages
 * and the generation, so the same page turns up in many places and processes.
 */
static uint64_t page_word(int proc, struct region *r, size_t i)
{
	uint64_t key = ((r->tag >> 12) + i) % DUP_KEYS;

	if (r->unique)
		return mix64(r->seed ^ (r->tag + i * ps) ^ ((uint64_t)r->gen << 48)) | 1;
	return mix64(((uint64_t)(proc & 1) << 40) | key << 8 | (r->gen % 3)) | 1;
}

/* The pages of @r that hold data: all, or the touched ones of a sparse reservation. */
static size_t nr_data(struct region *r)
{
	return r->sparse ? (size_t)r->ntouched : r->npages;
}

/* The page index of data page @n of @r. */
static size_t data_index(struct region *r, size_t n)
{
	return r->sparse ? r->touched[n] : n;
}

/* Write the pattern to the data pages of @r from page @from up to @to. */
static void fill_pages(int proc, struct region *r, size_t from, size_t to)
{
	for (size_t n = r->sparse ? 0 : from; n < nr_data(r); n++) {
		size_t i = data_index(r, n);
		uint64_t *p = (uint64_t *)(r->addr + i * ps), w = page_word(proc, r, i);

		if (i < from || i >= to)
			continue;
		for (size_t j = 0; j < ps / sizeof(*p); j++)
			p[j] = w + j;
	}
}

/* The pagemap entry of the page at @addr; a failed read is a failed syscall. */
static uint64_t page_entry(struct tctx *t, const char *addr)
{
	uint64_t e;

	if (pagemap_read(addr, 1, &e)) {
		syscall_failed(t, "read /proc/self/pagemap");
		return 0;
	}
	return e;
}

/* Write-protect @r (@on) or lift its protection, with UFFDIO_WRITEPROTECT. */
static bool uffd_protect(struct tctx *t, struct region *r, bool on)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)r->addr, .len = r->npages * ps },
		.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};
	int ret = ioctl(r->uffd, UFFDIO_WRITEPROTECT, &wp);

	/*
	 * 6.1 takes a range of one VMA only (ENOENT), and a region may be
	 * several (parts that differ in VM_MERGEABLE, say): page by page then.
	 */
	if (ret && errno == ENOENT) {
		ret = 0;
		for (size_t n = 0; n < nr_data(r) && !ret; n++) {
			wp.range.start = (uintptr_t)(r->addr + data_index(r, n) * ps);
			wp.range.len = ps;
			ret = ioctl(r->uffd, UFFDIO_WRITEPROTECT, &wp);
		}
	}
	if (ret) {
		syscall_failed(t, on ? "UFFDIO_WRITEPROTECT(MODE_WP)" : "UFFDIO_WRITEPROTECT(0)");
		/* Maybe partly protected: never to be written unprotected */
		r->wp = true;
		return false;
	}
	r->wp = on;
	return true;
}

/* A userfaultfd registered in write-protect mode over @len bytes at @addr, or -1. */
static int uffd_register(char *addr, size_t len)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)addr, .len = len },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	int fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK), e;

	if (fd < 0)
		return -1;
	if (!ioctl(fd, UFFDIO_API, &api) && !ioctl(fd, UFFDIO_REGISTER, &reg)) {
		if (reg.ioctls & 1ULL << _UFFDIO_WRITEPROTECT)
			return fd;
		errno = EOPNOTSUPP;
	}
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

/* Lift the protection of @r, unregister and close its userfaultfd. */
static void uffd_release(struct tctx *t, struct region *r)
{
	struct uffdio_range range = { .start = (uintptr_t)r->addr, .len = r->npages * ps };

	if (r->uffd < 0)
		return;
	if (r->wp)
		uffd_protect(t, r, false);
	/* Not left to close(): a forked child may hold the file open a while. */
	if (ioctl(r->uffd, UFFDIO_UNREGISTER, &range))
		syscall_failed(t, "UFFDIO_UNREGISTER");
	close(r->uffd);
	r->uffd = -1;
	r->wp = false;
}

/* Before an unmerge: which data pages of a write-protected @r are uffd-wp and KSM. */
static void snap_uffd_wp(struct tctx *t, struct region *r)
{
	unsigned long merged = 0;

	if (!r->wp)
		return;
	for (size_t n = 0; n < nr_data(r); n++) {
		uint64_t e = page_entry(t, r->addr + data_index(r, n) * ps);

		r->snap[n] = (e & PM_UFFD_WP ? SNAP_WP : 0) | (pagemap_ksm(e) ? SNAP_KSM : 0);
		merged += r->snap[n] == (SNAP_WP | SNAP_KSM);
	}
	r->snapped = true;
	add(uffd_ksm_pages, merged);
}

/*
 * Every data page of a write-protected region must keep the uffd-wp bit in
 * its PTE (a swap PTE keeps it too).  A page that was a write-protected KSM
 * page right before an unmerge (snap_uffd_wp()) and is a private page
 * without the bit now lost it in the unmerge; a page without it otherwise
 * lost it elsewhere: when ksmd merged it, if it is a KSM page now.  The
 * region is write-protected again, so that a lost bit is counted once.
 */
static void check_uffd_wp(struct tctx *t, struct region *r, const char *when)
{
	unsigned long lost = 0, in_unmerge = 0, ksm = 0;
	size_t first = 0;
	uint64_t first_e = 0;

	for (size_t n = 0; n < nr_data(r); n++) {
		uint64_t e = page_entry(t, r->addr + data_index(r, n) * ps);
		bool now_ksm;

		if (!(e & (PM_PRESENT | PM_SWAP)) || (e & PM_UFFD_WP))
			continue;
		now_ksm = pagemap_ksm(e);
		ksm += now_ksm;
		in_unmerge += r->snapped && r->snap[n] == (SNAP_WP | SNAP_KSM) && !now_ksm;
		if (!lost++) {
			first = n;
			first_e = e;
		}
	}
	r->snapped = false;
	if (!lost)
		return;
	add(uffd_lost_unmerge, in_unmerge);
	add(uffd_lost_other, lost - in_unmerge);
	add(uffd_lost_ksm, ksm);
	report("# UFFD-WP LOST proc %d thread %d %s: %lu of %zu data pages of the write-protected%s region at %p (%zu pages) have no uffd-wp bit: %lu were write-protected KSM pages before the unmerge, %lu are KSM pages now; first: page %zu at %p, pagemap %#llx\n",
	       t->proc, t->tid, when, lost, nr_data(r), r->sparse ? " sparse" : "", r->addr,
	       r->npages, in_unmerge, ksm, data_index(r, first),
	       r->addr + data_index(r, first) * ps, (unsigned long long)first_e);
	uffd_protect(t, r, true);
}

/* A few never written pages of a sparse reservation: they must read as zero. */
static unsigned long verify_untouched(struct tctx *t, struct region *r, const char *when)
{
	unsigned long bad = 0;

	for (int k = 0; k < 2; k++) {
		size_t i = rnd(t) % r->npages, j;
		uint64_t *p = (uint64_t *)(r->addr + i * ps);
		bool touched = false;

		for (int n = 0; n < r->ntouched; n++)
			touched |= r->touched[n] == i;
		if (touched)
			continue;
		for (j = 0; j < ps / sizeof(*p) && !p[j]; j++)
			;
		add(zero_checked, 1);
		add(pages_verified, 1);
		if (j == ps / sizeof(*p))
			continue;
		report("# DATA MISMATCH proc %d thread %d %s: untouched page %zu of the sparse reservation at %p (%zu pages) word %zu: %#llx, expected 0\n",
		       t->proc, t->tid, when, i, r->addr, r->npages, j, (unsigned long long)p[j]);
		add(zero_bad, 1);
		bad++;
	}
	return bad;
}

/*
 * Compare every word of the data pages of @r with their pattern, and the
 * uffd-wp bits of a write-protected region; returns the number of bad pages.
 */
static unsigned long verify_region(struct tctx *t, struct region *r, const char *when)
{
	unsigned long bad = 0;

	if (r->wp)
		check_uffd_wp(t, r, when);
	for (size_t n = 0; n < nr_data(r); n++) {
		size_t i = data_index(r, n);
		uint64_t *p = (uint64_t *)(r->addr + i * ps), w = page_word(t->proc, r, i);

		for (size_t j = 0; j < ps / sizeof(*p); j++) {
			if (p[j] == w + j)
				continue;
			report("# DATA MISMATCH proc %d thread %d %s: page %zu of %zu at %p (tag %#lx gen %u%s%s%s) word %zu: %#llx, expected %#llx\n",
			       t->proc, t->tid, when, i, r->npages, r->addr + i * ps,
			       (unsigned long)r->tag, r->gen, r->unique ? " unique" : "",
			       r->sparse ? " sparse" : "", r->wp ? " uffd-wp" : "",
			       j, (unsigned long long)p[j], (unsigned long long)(w + j));
			bad++;
			break;
		}
	}
	add(pages_verified, nr_data(r));
	if (r->sparse)
		bad += verify_untouched(t, r, when);
	add(mismatches, bad);
	return bad;
}

/* The number of data pages of @r that are KSM pages, and the first one. */
static unsigned long ksm_data_pages(struct tctx *t, struct region *r, size_t *first)
{
	unsigned long nr = 0;

	for (size_t n = 0; n < nr_data(r); n++) {
		if (!pagemap_ksm(page_entry(t, r->addr + data_index(r, n) * ps)))
			continue;
		if (!nr++)
			*first = n;
	}
	return nr;
}

/*
 * After an unmerge of the whole of @r, none of its data pages may be a KSM
 * page: unless thread 0 enabled the flag meanwhile, which made the region
 * mergeable again (merge_seq is not @seq any more, or was odd).
 */
static void check_unmerged(struct tctx *t, struct region *r, unsigned long seq,
			   const char *when)
{
	size_t first = 0;
	unsigned long left = ksm_data_pages(t, r, &first);

	if ((seq & 1) || __atomic_load_n(&merge_seq, __ATOMIC_SEQ_CST) != seq)
		return;
	add(unmerges_checked, 1);
	if (!left)
		return;
	add(unmerge_left, left);
	report("# KSM PAGES LEFT proc %d thread %d %s: %lu of %zu data pages of the%s%s region at %p (%zu pages) are KSM pages still; first: page %zu at %p\n",
	       t->proc, t->tid, when, left, nr_data(r), r->sparse ? " sparse" : "",
	       r->wp ? " write-protected" : "", r->addr, r->npages, data_index(r, first),
	       r->addr + data_index(r, first) * ps);
}

static struct region *pick_used(struct tctx *t)
{
	int start = rnd(t) % NR_REGIONS;

	for (int k = 0; k < NR_REGIONS; k++) {
		struct region *r = &t->reg[(start + k) % NR_REGIONS];

		if (r->used)
			return r;
	}
	return NULL;
}

static struct region *pick_free(struct tctx *t)
{
	for (int k = 0; k < NR_REGIONS; k++)
		if (!t->reg[k].used)
			return &t->reg[k];
	return NULL;
}

/*
 * A sparse reservation: 64 GiB (now and then 1 TiB) of MAP_NORESERVE with a
 * few pages written far apart, as a runtime that reserves address space for
 * its heap has.  With the flag set, the whole of it is mergeable.
 */
static void map_sparse(struct tctx *t, struct region *r)
{
	bool huge = rnd(t) % 8 == 0;
	size_t slice;
	void *p;

	r->sparse = true;
	r->npages = (huge ? SPARSE_HUGE : SPARSE_SIZE) / ps;
	r->unique = rnd(t) % 8 == 0;
	r->seed = rnd(t);
	p = mmap(NULL, r->npages * ps, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		syscall_failed(t, huge ? "mmap(1 TiB, MAP_NORESERVE)" : "mmap(64 GiB, MAP_NORESERVE)");
		return;
	}
	/* Mostly without THP, which would back each written page with 2 MiB. */
	if (rnd(t) % 4 && madvise(p, r->npages * ps, MADV_NOHUGEPAGE))
		syscall_failed(t, "madvise(MADV_NOHUGEPAGE)");
	r->ntouched = 2 + rnd(t) % (SPARSE_TOUCH - 1);
	slice = r->npages / r->ntouched;
	for (int n = 0; n < r->ntouched; n++)
		r->touched[n] = n * slice + rnd(t) % slice;
	r->addr = p;
	r->tag = (uintptr_t)p;
	r->used = true;
	fill_pages(t->proc, r, 0, r->npages);
	add(sparse_made, 1);
	add(sparse_huge, huge);
}

static void op_map(struct tctx *t)
{
	struct region *r = pick_free(t), *next_to = pick_used(t);
	int flags, nsparse = 0;
	void *p = MAP_FAILED;

	if (!r)
		return;
	for (int k = 0; k < NR_REGIONS; k++)
		nsparse += t->reg[k].used && t->reg[k].sparse;
	memset(r, 0, sizeof(*r));
	r->uffd = -1;
	if (nsparse < MAX_SPARSE && rnd(t) % 8 == 0) {
		map_sparse(t, r);
		return;
	}
	r->npages = 1 + rnd(t) % MAX_PAGES;
	r->shared = rnd(t) % 8 == 0;
	r->unique = rnd(t) % 8 == 0;
	r->seed = rnd(t);
	flags = (r->shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS;
	if (rnd(t) % 4 == 0)
		flags |= MAP_POPULATE;
	/* Right after another region, so that the two VMAs can merge. */
	if (next_to && !next_to->shared && !r->shared && rnd(t) % 2) {
		p = mmap(next_to->addr + next_to->npages * ps, r->npages * ps,
			 PROT_READ | PROT_WRITE, flags | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == MAP_FAILED && errno != EEXIST)
			syscall_failed(t, "mmap(MAP_FIXED_NOREPLACE)");
	}
	if (p == MAP_FAILED)
		p = mmap(NULL, r->npages * ps, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED) {
		syscall_failed(t, "mmap");
		return;
	}
	r->addr = p;
	r->tag = (uintptr_t)p;
	r->used = true;
	fill_pages(t->proc, r, 0, r->npages);
}

static void op_unmap(struct tctx *t)
{
	struct region *r = pick_used(t);

	if (!r)
		return;
	verify_region(t, r, "before munmap");
	if (munmap(r->addr, r->npages * ps))
		syscall_failed(t, "munmap");
	if (r->uffd >= 0)
		close(r->uffd);
	r->used = false;
}

/* Unmap the first or the last page: splits the VMA (or its merged neighbour). */
static void op_trim(struct tctx *t)
{
	struct region *r = pick_used(t);
	bool first = rnd(t) % 2;

	if (!r || r->npages < 2 || r->sparse)
		return;
	verify_region(t, r, "before partial munmap");
	if (munmap(first ? r->addr : r->addr + (r->npages - 1) * ps, ps)) {
		syscall_failed(t, "partial munmap");
		return;
	}
	if (first) {
		/* Page i + 1 becomes page i: keep the pattern by moving the tag. */
		r->addr += ps;
		r->tag += ps;
	}
	r->npages--;
	verify_region(t, r, "after partial munmap");
}

static void op_mremap(struct tctx *t)
{
	struct region *r = pick_used(t);
	size_t old = r ? r->npages : 0, new;
	int how = rnd(t) % 3;
	void *p;

	if (!r || r->sparse)
		return;
	verify_region(t, r, "before mremap");
	/* A moved range would lose its registration: a plain region again. */
	uffd_release(t, r);
	/*
	 * mremap() fails with EFAULT on a range of several VMAs; madvise() of
	 * the whole region makes its parts alike, so they merge into one again.
	 */
	if (madvise(r->addr, old * ps, rnd(t) % 2 ? MADV_MERGEABLE : MADV_UNMERGEABLE)) {
		syscall_failed(t, "madvise (before mremap)");
		return;
	}
	/*
	 * Not for MAP_SHARED: the grown part would lie beyond the end of the
	 * shmem object behind the mapping, and touching it raises SIGBUS.
	 */
	if (how == 0 && old < 2 * MAX_PAGES && !r->shared) {	/* grow, may move */
		new = old + 1 + rnd(t) % MAX_PAGES;
		p = mremap(r->addr, old * ps, new * ps, MREMAP_MAYMOVE);
	} else if (how == 1 && old > 1) {		/* shrink in place */
		new = 1 + rnd(t) % (old - 1);
		p = mremap(r->addr, old * ps, new * ps, 0);
	} else {					/* move to a new place */
		void *dst = mmap(NULL, old * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (dst == MAP_FAILED) {
			syscall_failed(t, "mmap (mremap target)");
			return;
		}
		new = old;
		p = mremap(r->addr, old * ps, old * ps, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	}
	/*
	 * The region may still be several VMAs that cannot merge (different
	 * anon_vmas after moves and forks): mremap(2) documents EFAULT for that.
	 */
	if (p == MAP_FAILED && errno == EFAULT) {
		add(mremap_efault, 1);
		return;
	}
	if (p == MAP_FAILED) {
		syscall_failed(t, "mremap");
		return;
	}
	r->addr = p;
	r->npages = new;
	if (new > old)
		fill_pages(t->proc, r, old, new);
	verify_region(t, r, "after mremap");
}

/* Count an unmerge of @r (by the prctl if @by_prctl) that succeeded. */
static void count_unmerge(struct region *r, bool by_prctl)
{
	if (r->sparse)
		add(sparse_unmerged, 1);
	if (r->wp)
		add(uffd_unmerged, 1);
	if (r->wp && by_prctl)
		add(uffd_unmerged_prctl, 1);
}

/*
 * Make the middle read-only and writable again: two splits and a merge.  Now
 * and then PROT_NONE instead, and the whole region unmerged meanwhile.
 */
static void op_mprotect(struct tctx *t)
{
	struct region *r = pick_used(t);
	bool none = rnd(t) % 4 == 0, unmerged = false;
	unsigned long seq = __atomic_load_n(&merge_seq, __ATOMIC_SEQ_CST);
	size_t off, len;

	if (!r || r->npages < 3)
		return;
	off = 1 + rnd(t) % (r->npages - 2);
	len = 1 + rnd(t) % (r->npages - off - 1);
	if (mprotect(r->addr + off * ps, len * ps, none ? PROT_NONE : PROT_READ)) {
		syscall_failed(t, none ? "mprotect(PROT_NONE)" : "mprotect(PROT_READ)");
		return;
	}
	if (!none) {
		verify_region(t, r, "while partly read-only");
	} else {
		snap_uffd_wp(t, r);
		if (madvise(r->addr, r->npages * ps, MADV_UNMERGEABLE)) {
			syscall_failed(t, "madvise(MADV_UNMERGEABLE) of a partly PROT_NONE region");
			r->snapped = false;
		} else {
			add(prot_none_unmerged, 1);
			count_unmerge(r, false);
			unmerged = true;
		}
	}
	if (mprotect(r->addr + off * ps, len * ps, PROT_READ | PROT_WRITE)) {
		syscall_failed(t, "mprotect(PROT_READ|PROT_WRITE)");
	} else if (unmerged) {
		verify_region(t, r, "after MADV_UNMERGEABLE while partly PROT_NONE");
		check_unmerged(t, r, seq, "after MADV_UNMERGEABLE while partly PROT_NONE");
	}
}

/* Part of a region, or all of a sparse reservation (the rest has nothing). */
static void op_madvise(struct tctx *t)
{
	struct region *r = pick_used(t);
	int advice = rnd(t) % 3 ? MADV_MERGEABLE : MADV_UNMERGEABLE;
	unsigned long seq = __atomic_load_n(&merge_seq, __ATOMIC_SEQ_CST);
	size_t off, len;

	if (!r)
		return;
	off = r->sparse ? 0 : rnd(t) % r->npages;
	len = r->sparse ? r->npages : 1 + rnd(t) % (r->npages - off);
	if (advice == MADV_UNMERGEABLE)
		snap_uffd_wp(t, r);
	if (madvise(r->addr + off * ps, len * ps, advice)) {
		syscall_failed(t, advice == MADV_MERGEABLE ? "madvise(MADV_MERGEABLE)" :
			       "madvise(MADV_UNMERGEABLE)");
		r->snapped = false;
	} else if (advice == MADV_UNMERGEABLE) {
		count_unmerge(r, false);
		verify_region(t, r, "after MADV_UNMERGEABLE");
		if (len == r->npages)
			check_unmerged(t, r, seq, "after MADV_UNMERGEABLE");
	}
}

/*
 * New generation: copy-on-write of every merged page of the region.  A
 * write-protected one is unprotected first (a write would wait for a uffd
 * handler that nobody runs) and protected again afterwards.
 */
static void op_rewrite(struct tctx *t)
{
	struct region *r = pick_used(t);
	bool wp;

	if (!r)
		return;
	verify_region(t, r, "before rewrite");
	wp = r->wp;
	if (wp && !uffd_protect(t, r, false))
		return;
	r->gen++;
	fill_pages(t->proc, r, 0, r->npages);
	if (wp && uffd_protect(t, r, true))
		verify_region(t, r, "after rewrite and UFFDIO_WRITEPROTECT");
}

/*
 * PR_SET_MEMORY_MERGE from thread 0.  Disabling unmerges the whole process:
 * this thread's write-protected and sparse regions are checked after it.
 */
static void set_merge(struct tctx *t, int on)
{
	bool unmerge = !on && proc_flag;

	int got, ret;

	for (int k = 0; k < NR_REGIONS && unmerge; k++)
		if (t->reg[k].used)
			snap_uffd_wp(t, &t->reg[k]);
	/* Enabling makes regions mergeable again that other threads unmerged. */
	if (on)
		__atomic_fetch_add(&merge_seq, 1, __ATOMIC_SEQ_CST);
	ret = prctl(PR_SET_MEMORY_MERGE, on, 0, 0, 0);
	if (on)
		__atomic_fetch_add(&merge_seq, 1, __ATOMIC_SEQ_CST);
	if (ret) {
		syscall_failed(t, on ? "prctl(PR_SET_MEMORY_MERGE, 1)" : "prctl(PR_SET_MEMORY_MERGE, 0)");
		for (int k = 0; k < NR_REGIONS; k++)
			t->reg[k].snapped = false;
		return;
	}
	proc_flag = on;
	got = merge_get();
	if (got != on) {
		add(flag_bad, 1);
		report("# proc %d: PR_GET_MEMORY_MERGE returned %d after setting %d\n",
		       t->proc, got, on);
	}
	for (int k = 0; k < NR_REGIONS && unmerge; k++) {
		struct region *r = &t->reg[k];

		if (!r->used)
			continue;
		if (r->wp || r->sparse) {
			count_unmerge(r, true);
			verify_region(t, r, "after PR_SET_MEMORY_MERGE 0");
		}
		check_unmerged(t, r, merge_seq, "after PR_SET_MEMORY_MERGE 0");
	}
}

static void op_prctl(struct tctx *t)
{
	set_merge(t, rnd(t) % 2);
}

/* The data pages of @r that are write-protected KSM pages. */
static unsigned long wp_ksm_pages(struct tctx *t, struct region *r)
{
	unsigned long nr = 0;

	for (size_t n = 0; n < nr_data(r); n++) {
		uint64_t e = page_entry(t, r->addr + data_index(r, n) * ps);

		nr += (e & PM_UFFD_WP) && pagemap_ksm(e);
	}
	return nr;
}

/*
 * Unmerge the write-protected @r: MADV_UNMERGEABLE, or the prctl from
 * thread 0.  Built with -DSIMULATE_WP_LOSS, the first write-protected KSM
 * page loses its uffd-wp bit right after the unmerge, as a kernel that drops
 * it would do: result 10 must fail then.
 */
static void unmerge_wp(struct tctx *t, struct region *r)
{
	unsigned long seq = __atomic_load_n(&merge_seq, __ATOMIC_SEQ_CST);

	if (t->tid == 0 && proc_flag && rnd(t) % 3 == 0) {
		set_merge(t, 0);
		return;
	}
	snap_uffd_wp(t, r);
	if (madvise(r->addr, r->npages * ps, MADV_UNMERGEABLE)) {
		syscall_failed(t, "madvise(MADV_UNMERGEABLE) of a uffd-wp range");
		r->snapped = false;
		return;
	}
#ifdef SIMULATE_WP_LOSS
	for (size_t n = 0; n < nr_data(r); n++) {
		struct uffdio_writeprotect wp = {
			.range = { .start = (uintptr_t)(r->addr + data_index(r, n) * ps), .len = ps },
		};

		if (r->snap[n] == (SNAP_WP | SNAP_KSM)) {
			ioctl(r->uffd, UFFDIO_WRITEPROTECT, &wp);
			break;
		}
	}
#endif
	count_unmerge(r, false);
	verify_region(t, r, "after MADV_UNMERGEABLE of a uffd-wp range");
	check_unmerged(t, r, seq, "after MADV_UNMERGEABLE of a uffd-wp range");
}

/*
 * userfaultfd write-protection of a duplicate-content region: the first
 * visit registers and write-protects it, then waits (UFFD_WAIT_MS at most)
 * until some protected page is a KSM page (merged before, or by ksmd since:
 * merging keeps the bit) and unmerges it at once while it is protected.  A
 * later visit unmerges it again if ksmd merged it again, or mostly releases
 * it (unprotected, unregistered), to be protected again.  Unmerging must
 * neither wait for a uffd handler nor drop the protection.
 */
static void op_uffd(struct tctx *t)
{
	struct region *r = pick_used(t);

	if (!uffd_ok || !r || r->shared)
		return;
	if (r->uffd < 0) {
		/* Unique content would not merge: try again with another one. */
		if (r->unique)
			return;
		/* Something to unmerge, in a process without the flag too */
		if (madvise(r->addr, r->npages * ps, MADV_MERGEABLE)) {
			syscall_failed(t, "madvise(MADV_MERGEABLE) (before UFFDIO_REGISTER)");
			return;
		}
		r->uffd = uffd_register(r->addr, r->npages * ps);
		if (r->uffd < 0) {
			syscall_failed(t, "userfaultfd + UFFDIO_REGISTER(MODE_WP)");
			return;
		}
		add(uffd_ranges, 1);
	}
	if (!r->wp) {
		if (!uffd_protect(t, r, true))
			return;
		verify_region(t, r, "after UFFDIO_WRITEPROTECT");
		for (int ms = 0; !wp_ksm_pages(t, r); ms += 50) {
			if (ms >= UFFD_WAIT_MS || __atomic_load_n(&sh->stop, __ATOMIC_RELAXED) ||
			    time(NULL) >= deadline)
				return;
			usleep(50000);
		}
		unmerge_wp(t, r);
		return;
	}
	if (!wp_ksm_pages(t, r) && rnd(t) % 4) {
		uffd_release(t, r);
		return;
	}
	unmerge_wp(t, r);
}

struct smaps_check {
	struct tctx *t;
	unsigned long bad;
};

/* A named VMA (file, heap, stack) that MADV_MERGEABLE would accept must be mg. */
static bool check_mg(const struct vma_entry *v, void *arg)
{
	struct smaps_check *c = arg;

	if (!v->flags || !v->name[0] || !strcmp(v->name, "[vsyscall]") ||
	    !flags_compatible(v->flags) || flag_listed(v->flags, "mg"))
		return true;
	if (c->bad++ == 0)
		report("# proc %d: flag set but VMA %s has no mg: VmFlags: %s\n", c->t->proc,
		       v->name, v->flags);
	return true;
}

/*
 * With the flag set, every VMA that MADV_MERGEABLE would accept must be "mg"
 * in smaps, and ksm_stat must say so.  Other threads change the address space
 * meanwhile, so only the flag-set state can be checked exactly, and only on
 * named VMAs (files, heap, stack): the threads' anonymous regions may have
 * been opted out with MADV_UNMERGEABLE, which the flag does not override.
 */
static void op_smaps(struct tctx *t)
{
	struct smaps_check c = { .t = t };
	struct ksm_state st = { 0 };
	bool type_process;

	if (!proc_flag)
		return;
	if (vma_walk(0, "smaps", NULL, check_mg, &c)) {
		syscall_failed(t, "open /proc/self/smaps");
		return;
	}
	if (ksm_stat_lines(0, &st) < 0) {
		syscall_failed(t, "open /proc/self/ksm_stat");
		return;
	}
	type_process = !strcmp(st.type, "process");
	if (!st.any || !st.mergeable || !type_process) {
		c.bad++;
		report("# proc %d: flag set but ksm_stat says merge_any %d mergeable %d type process %d\n",
		       t->proc, st.any, st.mergeable, type_process);
	}
	add(flag_bad, c.bad);
}

/* In a child: verify and rewrite the inherited copies of this thread's regions. */
static int child_check(struct tctx *t, int expect_flag)
{
	unsigned long bad = 0;
	int got = merge_get();

	if (expect_flag >= 0 && got != expect_flag) {
		report("# proc %d forked child: PR_GET_MEMORY_MERGE %d, parent had %d\n",
		       t->proc, got, expect_flag);
		bad++;
	}
	for (int k = 0; k < NR_REGIONS; k++) {
		struct region *r = &t->reg[k];

		/* Without UFFD_FEATURE_EVENT_FORK the child's VMAs are not registered. */
		r->wp = false;
		if (!r->used || r->shared)
			continue;
		bad += verify_region(t, r, "in forked child");
		r->gen += 7;
		fill_pages(t->proc, r, 0, r->npages);
		bad += verify_region(t, r, "in forked child after rewrite");
	}
	return bad ? 1 : 0;
}

static void reap_child(struct tctx *t, pid_t pid, const char *what)
{
	int status;

	if (waitpid(pid, &status, 0) != pid) {
		syscall_failed(t, "waitpid");
		return;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		add(children_bad, 1);
		report("# proc %d thread %d: %s child failed (status %#x)\n",
		       t->proc, t->tid, what, status);
	}
}

static void op_fork(struct tctx *t)
{
	/* Only thread 0 changes the flag: its value is known in its own children. */
	int expect = t->tid == 0 ? proc_flag : -1;
	pid_t pid = fork();

	if (pid < 0) {
		syscall_failed(t, "fork");
		return;
	}
	if (pid == 0)
		_exit(child_check(t, expect));
	add(forks, 1);
	add(processes, 1);
	reap_child(t, pid, "fork");
	for (int k = 0; k < NR_REGIONS; k++)
		if (t->reg[k].used)
			verify_region(t, &t->reg[k], "after fork (parent)");
}

static void op_exec(struct tctx *t)
{
	char expect[16], proc[16];
	pid_t pid;

	snprintf(expect, sizeof(expect), "%d", t->tid == 0 ? proc_flag : -1);
	snprintf(proc, sizeof(proc), "%d", t->proc);
	pid = fork();
	if (pid < 0) {
		syscall_failed(t, "fork (exec)");
		return;
	}
	if (pid == 0) {
		execl("/proc/self/exe", "ksm_stress", "--exec-child", expect, proc, NULL);
		_exit(3);
	}
	add(execs, 1);
	add(processes, 1);
	reap_child(t, pid, "exec");
}

/* The exec'd program: new mm, own memory, the inherited flag. */
static int exec_child(int expect, int proc)
{
	struct tctx t = { .proc = proc, .tid = -1 };
	struct region r = { .npages = 16, .gen = 1 };
	int got = merge_get();
	char *brk0 = sbrk(0);

	if (expect >= 0 && got != expect)
		return 2;
	r.addr = mmap(NULL, r.npages * ps, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r.addr == MAP_FAILED || sbrk(4 * ps) == (void *)-1)
		return 3;
	r.tag = (uintptr_t)r.addr;
	fill_pages(proc, &r, 0, r.npages);
	memset(brk0, 0x5a, 4 * ps);
	usleep(10000);
	for (size_t i = 0; i < 4 * ps; i++)
		if (brk0[i] != 0x5a)
			return 4;
	return verify_region(&t, &r, "in exec'd child") ? 1 : 0;
}

static bool stop_now(struct tctx *t)
{
	return __atomic_load_n(&sh->stop, __ATOMIC_RELAXED) || t->iter >= opts.iterations ||
	       time(NULL) >= deadline;
}

static void *thread_main(void *arg)
{
	struct tctx *t = arg;
	int only_t0 = t->tid == 0;

	while (!stop_now(t)) {
		unsigned int x = rnd(t) % 100;
		enum op op = x < 14 ? OP_MAP : x < 22 ? OP_UNMAP : x < 30 ? OP_TRIM :
			     x < 38 ? OP_MREMAP : x < 46 ? OP_MPROTECT : x < 56 ? OP_MADVISE :
			     x < 66 ? OP_REWRITE : x < 74 ? OP_VERIFY : x < 80 ? OP_UFFD :
			     x < 86 ? OP_PRCTL : x < 90 ? OP_SMAPS : x < 96 ? OP_FORK : OP_EXEC;

		sh->thread[t->proc][t->tid].op = op;
		sh->thread[t->proc][t->tid].hb.beat = now();
		switch (op) {
		case OP_MAP: op_map(t); break;
		case OP_UNMAP: op_unmap(t); break;
		case OP_TRIM: op_trim(t); break;
		case OP_MREMAP: op_mremap(t); break;
		case OP_MPROTECT: op_mprotect(t); break;
		case OP_MADVISE: op_madvise(t); break;
		case OP_REWRITE: op_rewrite(t); break;
		case OP_UFFD: op_uffd(t); break;
		case OP_PRCTL: if (only_t0) op_prctl(t); break;
		case OP_SMAPS: if (only_t0) op_smaps(t); break;
		case OP_FORK: op_fork(t); break;
		case OP_EXEC: op_exec(t); break;
		default: {
			struct region *r = pick_used(t);

			if (r)
				verify_region(t, r, "periodic check");
		}
		}
		t->iter++;
		add(ops, 1);
	}
	/* At exit every page is checked once more. */
	sh->thread[t->proc][t->tid].op = OP_DONE;
	sh->thread[t->proc][t->tid].hb.beat = now();
	for (int k = 0; k < NR_REGIONS; k++) {
		if (!t->reg[k].used)
			continue;
		verify_region(t, &t->reg[k], "at exit");
		if (t->reg[k].uffd >= 0)
			close(t->reg[k].uffd);
	}
	sh->thread[t->proc][t->tid].hb.done = 1;
	return NULL;
}

static int worker(int proc, uint64_t seed)
{
	pthread_t th[MAX_THREADS];
	static struct tctx ctx[MAX_THREADS];
	uint64_t e;

	/* A look at its own pagemap, which the uffd-wp checks read. */
	if (pagemap_read(&e, 1, &e) && uffd_ok) {
		report("# proc %d: open /proc/self/pagemap: %s\n", proc, strerror(errno));
		add(errors, 1);
		uffd_ok = false;
	}
	/* Half the workers start with the flag, the other half rely on madvise. */
	if (proc % 2 == 0) {
		if (prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0)) {
			report("# proc %d: prctl(PR_SET_MEMORY_MERGE, 1): %s\n", proc, strerror(errno));
			add(errors, 1);
		} else {
			proc_flag = 1;
		}
	}
	for (int i = 0; i < opts.threads; i++) {
		ctx[i] = (struct tctx){ .proc = proc, .tid = i, .rnd = seed ^ mix64(proc * 64 + i) };
		sh->thread[proc][i].hb.beat = now();
		if (pthread_create(&th[i], NULL, thread_main, &ctx[i])) {
			report("# proc %d: pthread_create failed\n", proc);
			add(errors, 1);
			sh->thread[proc][i].hb.done = 1;
			opts.threads = i;
			break;
		}
	}
	for (int i = 0; i < opts.threads; i++)
		pthread_join(th[i], NULL);
	return 0;
}

/*
 * Whether userfaultfd can write-protect anonymous memory here, as pagemap
 * shows: without that, uffd-wp ranges are left out, with a note.
 */
static bool uffd_probe(void)
{
	char *p = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)p, .len = ps },
		.mode = UFFDIO_WRITEPROTECT_MODE_WP,
	};
	const char *why = NULL;
	uint64_t e = 0;
	int fd;

	if (p == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	*p = 1;
	fd = uffd_register(p, ps);
	if (fd < 0) {
		why = "userfaultfd + UFFDIO_REGISTER(MODE_WP)";
	} else if (ioctl(fd, UFFDIO_WRITEPROTECT, &wp)) {
		why = "UFFDIO_WRITEPROTECT";
	} else if (pagemap_read(p, 1, &e)) {
		why = "/proc/self/pagemap";
	} else if (!(e & PM_UFFD_WP)) {
		why = "pagemap PM_UFFD_WP";
		errno = EOPNOTSUPP;
	}
	if (why)
		ksft_print_msg("uffd-wp ranges left out: %s: %s\n", why, strerror(errno));
	if (fd >= 0)
		close(fd);
	munmap(p, ps);
	return !why;
}

/* Stack traces of the tasks in D state on the console (sysrq w), for the hang report. */
static void show_blocked_tasks(void)
{
	int fd = open("/proc/sysrq-trigger", O_WRONLY);

	if (fd >= 0 && write(fd, "w", 1) == 1)
		ksft_print_msg("blocked tasks are listed on the console (sysrq w)\n");
	if (fd >= 0)
		close(fd);
}

static long max_sharing;	/* root: the most pages_sharing seen */
static long max_domains;	/* root: the most merge_domains seen (patches 39-43) */

static void worker_ended(pid_t pid, int status)
{
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		ksft_print_msg("worker %d ended with status %#x\n", pid, status);
		sh->errors++;
	}
}

static void sample_sharing(void)
{
	if (ksm_read("pages_sharing") > max_sharing)
		max_sharing = ksm_read("pages_sharing");
	if (ksm_read("merge_domains") > max_domains)
		max_domains = ksm_read("merge_domains");
}

/*
 * merge_scope=domain (stress-guest.sh's @domain round): every worker that
 * enables KSM is a domain of its own, so the run must see several at once.
 */
static bool scope_is_domain(void)
{
	char buf[64];

	return !read_file(KSM_SYSFS "merge_scope", buf, sizeof(buf)) &&
	       strstr(buf, "[domain]");
}

/* Watch heartbeats and wait for the workers; returns false on a hang. */
static bool watch(pid_t *pids)
{
	int stuck = watch_workers(opts.procs, &sh->thread[0][0].hb, sizeof(sh->thread[0][0]),
				  MAX_PROCS * MAX_THREADS, HANG_SECS, now() + duration + 600,
				  worker_ended, sample_sharing);
	int p = stuck / MAX_THREADS, i = stuck % MAX_THREADS;

	if (stuck < 0)
		return true;
	if (stuck < MAX_PROCS * MAX_THREADS)
		ksft_print_msg("proc %d thread %d stuck in %s for %lu s\n", p, i,
			       op_name[sh->thread[p][i].op], now() - sh->thread[p][i].hb.beat);
	else
		ksft_print_msg("workers still running %lu s after the deadline\n",
			       now() - deadline);
	show_blocked_tasks();
	sh->stop = 1;
	for (int p = 0; p < opts.procs; p++)
		kill(pids[p], SIGKILL);
	return false;
}

/* After every process exited, ksmd must drop all pages and rmap items. */
static bool counters_drain(void)
{
	static const char *const names[] = {
		"pages_shared", "pages_sharing", "pages_unshared", "pages_volatile",
	};

	for (int tries = 0; tries < 120; tries++) {
		long sum = 0;

		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			sum += ksm_read(names[i]);
		if (sum == 0)
			return true;
		sleep(1);
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ksft_print_msg("%s %ld\n", names[i], ksm_read(names[i]));
	return false;
}

int main(int argc, char **argv)
{
	uint64_t flags;
	pid_t pids[MAX_PROCS];
	bool no_hang, drained;
	time_t start;

	ps = sysconf(_SC_PAGESIZE);
	if (argc == 4 && !strcmp(argv[1], "--exec-child")) {
		sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		return sh == MAP_FAILED ? 3 : exec_child(atoi(argv[2]), atoi(argv[3]));
	}
	parse_opts(argc, argv, &opts);
	duration = opts.seconds;

	ksft_print_header();
	if (geteuid())
		ksft_exit_skip("needs root to drive ksmd\n");
	if (merge_get() < 0)
		ksft_exit_skip("no PR_GET_MEMORY_MERGE: %s\n", strerror(errno));
	if (!ksmd_fast(5000, 0))
		ksft_exit_skip("cannot set up ksmd in " KSM_SYSFS "\n");
	ksft_set_plan(11);
	ksft_print_msg("%d processes x %d threads, %lu s or %lu ops per thread, seed %llu\n",
		       opts.procs, opts.threads, duration, opts.iterations, opts.s);
	uffd_ok = uffd_probe();
	kpageflags_ok = !kpageflags_read(0, &flags);
	if (!kpageflags_ok)
		ksft_print_msg("no /proc/kpageflags (%s): uffd-wp bits lost in an unmerge are counted as lost elsewhere\n",
			       strerror(errno));

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	ps = sysconf(_SC_PAGESIZE);
	deadline = time(NULL) + duration;
	fflush(stdout);
	for (int p = 0; p < opts.procs; p++) {
		pids[p] = fork();
		if (pids[p] < 0)
			ksft_exit_fail_msg("fork: %s\n", strerror(errno));
		if (pids[p] == 0)
			_exit(worker(p, opts.s));
		sh->processes++;
	}
	start = time(NULL);
	no_hang = watch(pids);
	ksft_print_msg("workers ran %ld s\n", (long)(time(NULL) - start));
	drained = no_hang && counters_drain();

	ksft_test_result(sh->mismatches == 0, "no data lost: %lu pages verified, %lu mismatches\n",
			 sh->pages_verified, sh->mismatches);
	ksft_test_result(sh->errors == 0, "every mmap/munmap/mremap/mprotect/madvise/fork/prctl succeeded (%lu failed)\n",
			 sh->errors);
	ksft_test_result(no_hang, "no thread stalled for %d s in one operation\n", HANG_SECS);
	ksft_test_result(sh->flag_bad == 0, "PR_GET_MEMORY_MERGE, smaps mg and ksm_stat agreed with the last PR_SET (%lu disagreements)\n",
			 sh->flag_bad);
	ksft_test_result(sh->children_bad == 0, "%lu forked and %lu exec'd children saw their memory and flag intact (%lu failed)\n",
			 sh->forks, sh->execs, sh->children_bad);
	if (scope_is_domain())
		ksft_test_result(max_sharing > 0 && max_domains > 1,
				 "ksmd merged pages during the run in several merge domains (max pages_sharing %ld, max merge_domains %ld)\n",
				 max_sharing, max_domains);
	else
		ksft_test_result(max_sharing > 0, "ksmd merged pages during the run (max pages_sharing %ld)\n",
				 max_sharing);
	ksft_test_result(drained, "KSM page counters returned to 0 after all processes exited\n");
	ksft_test_result(sh->unmerge_left == 0, "%lu unmerges of a whole region (MADV_UNMERGEABLE, PR_SET_MEMORY_MERGE 0) left no KSM page (%lu left)\n",
			 sh->unmerges_checked, sh->unmerge_left);
	ksft_test_result(sh->zero_bad == 0, "%lu sparse reservations (%lu of 1 TiB, the others 64 GiB), %lu unmerged: %lu untouched pages read as zero (%lu did not)\n",
			 sh->sparse_made, sh->sparse_huge, sh->sparse_unmerged, sh->zero_checked,
			 sh->zero_bad);
	/*
	 * Without a merged write-protected page unmerged the check was not
	 * made: a failure, but in a run cut short by -i or shorter than
	 * WP_CHECK_SECS (the merge_scope=domain round of stress-guest.sh).
	 */
	if (!uffd_ok || !kpageflags_ok)
		ksft_test_result_skip("uffd-wp ranges kept their protection through unmerging: %s\n",
				      uffd_ok ? "no /proc/kpageflags" : "no userfaultfd write-protection");
	else if (!sh->uffd_ksm_pages && (opts.iterations_given || opts.seconds < WP_CHECK_SECS))
		ksft_test_result_skip("no write-protected page was merged when %lu uffd-wp ranges were unmerged (a short run: -d %.0f%s)\n",
				      sh->uffd_unmerged, opts.seconds,
				      opts.iterations_given ? ", -i" : "");
	else
		ksft_test_result(sh->uffd_ksm_pages && !sh->uffd_lost_unmerge, "%lu unmerges of uffd-wp ranges while write-protected (%lu by PR_SET_MEMORY_MERGE 0; %lu merged write-protected pages) kept the uffd-wp bit (%lu pages lost it)\n",
				 sh->uffd_unmerged, sh->uffd_unmerged_prctl, sh->uffd_ksm_pages,
				 sh->uffd_lost_unmerge);
	if (!uffd_ok)
		ksft_test_result_skip("uffd-wp ranges kept their protection otherwise\n");
	else
		ksft_test_result(sh->uffd_lost_other == 0, "%lu uffd-wp ranges kept the uffd-wp bit outside unmerging too (%lu pages lost it, %lu of them KSM pages since: ksmd merged them)\n",
				 sh->uffd_ranges, sh->uffd_lost_other, sh->uffd_lost_ksm);

	ksft_print_msg("%lu mremap() calls refused a range of several VMAs (EFAULT)\n",
		       sh->mremap_efault);
	/* "# stat NAME VALUE" lines, which scripts/stress-report.sh adds up */
	print_stats("operations", sh->ops, "processes", sh->processes,
		    "pages_verified", sh->pages_verified, "mismatches", sh->mismatches,
		    "sparse_reservations", sh->sparse_made, "sparse_unmerged", sh->sparse_unmerged,
		    "untouched_pages_checked", sh->zero_checked,
		    "prot_none_unmerged", sh->prot_none_unmerged,
		    "unmerge_ksm_pages_left", sh->unmerge_left,
		    "uffd_wp_ranges", sh->uffd_ranges, "uffd_wp_unmerged", sh->uffd_unmerged,
		    "uffd_wp_merged_pages", sh->uffd_ksm_pages,
		    "uffd_wp_lost", sh->uffd_lost_unmerge + sh->uffd_lost_other, NULL);

	knobs_restore();
	ksft_finished();
}
