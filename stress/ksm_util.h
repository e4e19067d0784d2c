/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ksm_util.h: what the stress programs and bench/ksmbench.c share, in the manner
 * of the selftests' vm_util.[ch]: failure reporting, small file and sysfs
 * readers, the knobs a program changes (saved and restored), a process's KSM
 * state (PR_GET_MEMORY_MERGE, /proc/<pid>/ksm_stat, smaps VmFlags), the
 * pagemap/kpageflags lookups and pages of known content for ksmd to merge.
 * Implemented in ksm_util.c, which needs nothing of kselftest.h: bench/ksmbench.c
 * links it too.
 */
#ifndef KSM_UTIL_H
#define KSM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/kernel-page-flags.h>

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE	67
#define PR_GET_MEMORY_MERGE	68
#endif

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#endif

#define KSM_SYSFS	"/sys/kernel/mm/ksm/"
#define DEBUGFS		"/sys/kernel/debug/"

/* /proc/<pid>/pagemap */
#define PM_PFN		((1ULL << 55) - 1)
#define PM_UFFD_WP	(1ULL << 57)
#define PM_FILE		(1ULL << 61)	/* file-backed or shared anonymous */
#define PM_SWAP		(1ULL << 62)
#define PM_PRESENT	(1ULL << 63)

/* Prints "# " and why a check failed; returns @cond, for "ok &= expect(...)". */
bool expect(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A failure report from a thread or a forked child of a threaded process: one
 * write(2), no stdio (whose lock a fork may have left taken). Nothing once
 * *@count, a counter the processes of a run share, has reached @max.
 */
void report_limited(unsigned long *count, unsigned long max, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * "# stat NAME N" lines, which scripts/stress-report.sh adds up: pairs of a
 * name and a long (cast an unsigned long), up to a NULL name.
 */
void print_stats(const char *name, ...) __attribute__((sentinel));
/* CLOCK_MONOTONIC in seconds */
double now_sec(void);
/* One step of splitmix64: well-mixed 64 bits from a counter or a seed. */
uint64_t mix64(uint64_t x);
/* fork() after flushing stdout, counting the child in *@counter (shared) if any. */
pid_t fork_counted(long *counter);
/* Ends a forked child: its output flushed, without the parent's atexit() hooks. */
void child_exit(int code) __attribute__((noreturn));
/*
 * At the exit of the calling process, not of a forked child that calls
 * exit(): knobs_restore(), then @fn (if not NULL) to undo the rest.
 */
void cleanup_at_exit(void (*fn)(void));

/*
 * Command-line options, one meaning per letter in every program: -d SECONDS,
 * the time bound of the run; -i N, an upper bound on top of it (operations
 * per thread, rounds per process, largest fail-nth, attempts); -p and -t,
 * worker processes and threads per process; -s, a seed or a size. A program
 * fills in the letters it takes (getopt(3)'s), its usage line and its
 * defaults; anything else, -h too, prints "usage: PROGRAM @usage" and exits
 * with 1 (KSFT_FAIL), as does a -p or -t out of range.
 */
struct run_opts {
	const char *letters;
	const char *usage;
	double seconds;			/* -d */
	unsigned long iterations;	/* -i */
	bool iterations_given;
	int procs, max_procs;		/* -p, 1 to max_procs */
	int threads, max_threads;	/* -t, 1 to max_threads */
	unsigned long long s;		/* -s */
};
void parse_opts(int argc, char **argv, struct run_opts *o);
void opts_usage(const struct run_opts *o, const char *prog) __attribute__((noreturn));
/* A number in a string literal, for usage lines: "1-" KSM_XSTR(MAX_PROCS) */
#define KSM_STR(x)	#x
#define KSM_XSTR(x)	KSM_STR(x)
/*
 * The options of a program of worker processes and threads: -i @iter_what
 * (1000000 unless given), -s its seed (1 unless given).
 */
#define WORKER_OPTS(iter_what, secs, nprocs, maxprocs, nthreads, maxthreads) {		\
	.letters = "d:i:p:t:s:",							\
	.usage = "[-d seconds] [-i " iter_what "] [-p procs 1-" KSM_XSTR(maxprocs) "] "	\
		 "[-t threads 1-" KSM_XSTR(maxthreads) "] [-s seed]",			\
	.seconds = (secs), .iterations = 1000000,					\
	.procs = (nprocs), .max_procs = (maxprocs),					\
	.threads = (nthreads), .max_threads = (maxthreads),				\
	.s = 1,										\
}

/*
 * Progress of a worker thread, in memory the root process shares
 * (MAP_SHARED): whole seconds of now_sec() at its last step (0: not started
 * yet), and whether it is done.
 */
struct heartbeat {
	unsigned long beat;
	int done;
};
/*
 * The root process's watch: waits for its @procs worker processes, telling
 * @reaped (if not NULL) the exit status of each, and once a second runs
 * @tick (if not NULL) and looks at the @n heartbeats at @hb, @stride bytes
 * apart. Returns -1 when all workers exited; the index of a heartbeat that
 * has not moved for @hang s, or @n when workers still run at @limit (whole
 * seconds of now_sec()): a hang, for the caller to tell and end.
 */
int watch_workers(int procs, const struct heartbeat *hb, size_t stride, int n,
		  unsigned long hang, unsigned long limit, void (*reaped)(pid_t pid, int status),
		  void (*tick)(void));

/* Whole small files: 0 on success, -1 with errno set. @buf is NUL-terminated. */
int read_file(const char *path, char *buf, size_t size);
int write_file(const char *path, const char *val);
/* The number a file starts with (sysfs, procfs), -1 when it cannot be read. */
long read_long(const char *path);
/* N of the "@key N" line of a file of such lines (vmstat, memory.stat), or -1. */
long read_key(const char *path, const char *key);

/*
 * Knobs (sysfs, procfs, debugfs files) a program changes: knob_set() saves
 * the old value before the first change; knobs_restore() writes them back, in
 * reverse order, and only in the process that saved them (not in a forked
 * child that exits). Call it at exit (atexit()) and from a fatal-signal handler.
 * Reverse order: set a knob that the others depend on (KSM's run) first, and
 * it is restored last. knob_set() says why it failed ("# cannot write ...").
 * A saved "a [b] c" (transparent_hugepage's choices) is restored as "b".
 */
bool knob_set(const char *path, const char *val);
void knobs_restore(void);
/* The fault-injection filters that let fail-nth reach allocations, quiet. */
bool fault_knobs_set(void);

/* /sys/kernel/mm/ksm/@name: the value (-1 on error), or set it as a knob. */
long ksm_read(const char *name);
bool ksm_set(const char *name, const char *val);
/* ksmd running without sleeping, @pages_to_scan per batch. */
bool ksmd_fast(long pages_to_scan);
/* Waits until ksmd has completed @scans more full scans, up to @timeout s. */
bool ksm_wait_scans(int scans, double timeout);

/* A process's KSM state; @pid 0 is the calling process. */
struct ksm_state {
	int get;		/* PR_GET_MEMORY_MERGE, -1 when not read (other pid) */
	char type[64];		/* ksm_merge_type */
	bool any;		/* ksm_merge_any */
	bool mergeable;		/* ksm_mergeable: some VMA is mergeable */
	int vmas;
	int compat;		/* VMAs KSM can handle */
	int compat_mg;		/* ... that are mergeable */
	int other_mg;		/* incompatible VMAs that are mergeable (never ok) */
	unsigned long first_unmarked;	/* start of a compatible VMA without mg */
	bool stack_mg;		/* the [stack] VMA is mergeable */
};

void proc_path(char *buf, size_t size, pid_t pid, const char *file);
/* @flag is one of the space-separated two-letter flags of a VmFlags line. */
bool flag_listed(const char *flags, const char *flag);
/* The VmFlags form of ksm_compatible(): what MADV_MERGEABLE would accept. */
bool flags_compatible(const char *flags);
/* ksm_stat's merge type, merge_any and mergeable lines into @st; 0 or -1. */
int read_ksm_stat(pid_t pid, struct ksm_state *st);
/*
 * The same without a word on failure: which of the lines were found (a mask
 * of KSM_STAT_*), or -1 with errno set when ksm_stat cannot be opened.
 */
#define KSM_STAT_TYPE		1
#define KSM_STAT_ANY		2
#define KSM_STAT_MERGEABLE	4
#define KSM_STAT_ALL		7
int ksm_stat_lines(pid_t pid, struct ksm_state *st);
/* The value of the "@name N" line of /proc/<pid>/ksm_stat, or -1. */
long ksm_stat_value(pid_t pid, const char *name);
/* Counts the VMAs of smaps into @st; 0 or -1. */
int read_smaps(pid_t pid, struct ksm_state *st);
/* PR_GET_MEMORY_MERGE (@pid 0 only), ksm_stat and smaps together; 0 or -1. */
int read_state(pid_t pid, struct ksm_state *st);
/*
 * The smaps entry of the VMA of the calling process that contains @addr:
 * its VmFlags line (without "VmFlags:") into @flags, and the value in kB of
 * its "@field:" line (e.g. "ProtectionKey", "AnonHugePages", "KSM"), or -1
 * when the field is absent or @field is NULL. Returns -1 when no VMA has @addr.
 * The number of a line without a unit (ProtectionKey) is returned as it is;
 * @field may end in ':' or not; @flags is "" when no VMA has @addr.
 */
long smaps_vma(const void *addr, char *flags, size_t size, const char *field);
/*
 * Checks that PR_GET_MEMORY_MERGE (@pid 0 only), ksm_stat and the mg flags
 * agree; says why not with expect(). @want: 1 enabled, 0 not enabled, -1
 * either; @madvised: the process used MADV_MERGEABLE, so mg may remain on
 * some VMAs while it is not enabled.
 */
bool state_consistent(pid_t pid, int want, bool madvised, const char *what);

/* A VMA of /proc/<pid>/maps or smaps, for vma_walk(). */
struct vma_entry {
	unsigned long start, end;
	char perms[5];
	const char *name;	/* path, [heap], [stack]...; "" for anonymous memory */
	const char *flags;	/* VmFlags, without "VmFlags:"; NULL in maps */
	long field;		/* the value of vma_walk()'s @field line, or -1 */
};
/*
 * Calls @fn for each VMA of /proc/<pid>/@file ("maps", or "smaps", which
 * walks the page tables: slower) until it returns false; with @field
 * ("Rss", "ProtectionKey"...), each VMA's value of that smaps line. 0, or -1
 * with errno set when the file cannot be opened.
 */
int vma_walk(pid_t pid, const char *file, const char *field,
	     bool (*fn)(const struct vma_entry *v, void *arg), void *arg);
/*
 * The VMAs of the calling process that intersect [@addr, @addr + @len), -1
 * on error; with @mg, how many of them are mergeable into *@mg.
 */
int range_vmas(const void *addr, size_t len, int *mg);

/*
 * /proc/self/pagemap entry of @addr (0 on error); /proc/kpageflags of @pfn (0
 * on error). The files stay open: threads may look up at once, a forked child
 * opens its own pagemap.
 */
uint64_t pagemap_entry(const void *addr);
uint64_t kpageflags(uint64_t pfn);
/* The same where an error must be told apart: 0, or -1 with errno set. */
int pagemap_read(const void *addr, size_t n, uint64_t *ents);
int kpageflags_read(uint64_t pfn, uint64_t *flags);
/* Whether pagemap entry @e maps a KSM page (false if kpageflags cannot tell). */
bool pagemap_ksm(uint64_t e);
/* The pages of [@addr, @addr + @pages pages) mapped to a KSM page, or -1. */
long ksm_pages_in(const void *addr, size_t pages);
/*
 * Polls ksm_pages_in() every @poll_ms until @want pages are KSM pages, for
 * @timeout s at most; returns the last count (< @want on timeout), or -1.
 */
long ksm_wait_pages(const void *addr, size_t pages, size_t want, int poll_ms, double timeout);

/*
 * Pages of known content for ksmd to merge: @kinds distinct pages, set up
 * once (children inherit them); page i of an area holds pattern i % @kinds,
 * so an area has many duplicates, and a lost or mixed-up page shows.
 */
bool pattern_init(int kinds);
/* @pages pages with the patterns, or NULL (said with expect()). */
char *pattern_map(size_t pages);
/* The pages of the area that differ from their pattern; only reads memory. */
long pattern_bad_pages(const char *area, size_t pages);

/*
 * A cgroup2 group of our own with the memory controller, @dir =
 * /sys/fs/cgroup/@name.<pid>: mounts cgroup2 on /sys/fs/cgroup unless it is
 * there, enables the memory controller in the root unless it is. Returns
 * why it cannot (a reason to skip), or NULL. cgroup_remove() removes the
 * group (its processes gone, its child groups removed first; false with
 * errno if rmdir fails) and undoes the rest, at any point and more than once.
 */
const char *cgroup_create(const char *name, char *dir, size_t size);
bool cgroup_remove(char *dir);

#endif /* KSM_UTIL_H */
