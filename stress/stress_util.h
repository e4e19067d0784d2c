/* SPDX-License-Identifier: GPL-2.0 */
/*
 * stress_util.h: what the stress programs share beyond the series' helper
 * unit, tools/testing/selftests/vm/ksm_util.[ch] of the applied tree (which
 * this header includes, and every stress program links): statistics and
 * failure reports of threads, the options of a run, the watch over worker
 * processes, a process's KSM state checked as a whole, the fault-injection
 * knobs, pages of known content and a memory cgroup. Implemented in
 * stress_util.c; bench/ksmbench.c and the programs of system/ need only the
 * unit.
 */
#ifndef STRESS_UTIL_H
#define STRESS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ksm_util.h"

#define DEBUGFS		"/sys/kernel/debug/"

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
/* One step of splitmix64: well-mixed 64 bits from a counter or a seed. */
uint64_t mix64(uint64_t x);
/* fork() after flushing stdout, counting the child in *@counter (shared) if any. */
pid_t fork_counted(long *counter);
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

/*
 * Exits with a kselftest skip unless the caller is root, /sys/kernel/mm/ksm/
 * is writable and the kernel has PR_GET_MEMORY_MERGE: what every program
 * that changes ksmd's knobs and enables per-process KSM needs.
 */
void skip_unless_per_process_ksm(void);

/* The fault-injection filters that let fail-nth reach allocations, quiet. */
bool fault_knobs_set(void);

/*
 * PR_GET_MEMORY_MERGE (@pid 0 only), ksm_stat (all of its merge type,
 * merge_any and mergeable lines) and smaps together into @st; 0, or -1 said
 * with expect().
 */
int read_state(pid_t pid, struct ksm_state *st);
/*
 * Checks that PR_GET_MEMORY_MERGE (@pid 0 only), ksm_stat and the mg flags
 * agree; says why not with expect(). @want: 1 enabled, 0 not enabled, -1
 * either; @madvised: the process used MADV_MERGEABLE, so mg may remain on
 * some VMAs while it is not enabled.
 */
bool state_consistent(pid_t pid, int want, bool madvised, const char *what);

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

#endif /* STRESS_UTIL_H */
