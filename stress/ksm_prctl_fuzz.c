// SPDX-License-Identifier: GPL-2.0
/*
 * ksm_prctl_fuzz: random PR_SET_MEMORY_MERGE/PR_GET_MEMORY_MERGE calls.
 *
 * Every argument takes values from a pool of edge cases (0, 1, -1, INT_MAX,
 * LONG_MIN, 1 << 32, ...) and random numbers.  Some calls run with an
 * allocation failure armed through /proc/thread-self/fail-nth, which reaches
 * the error paths of the registration with ksmd and of unmerging.  Only the
 * documented results are accepted:
 *
 *   PR_SET_MEMORY_MERGE: EINVAL iff arg3, arg4 or arg5 is non-zero, else 0,
 *                        or ENOMEM when an allocation failure was injected;
 *   PR_GET_MEMORY_MERGE: EINVAL iff arg2..arg5 is non-zero, else 0 or 1.
 *
 * After every call the thread maps, writes and unmaps a page: a call that
 * returned with the mmap lock held makes that hang, and the watchdog in the
 * root process (a separate mm, so it cannot hang with it) reports the tuple.
 *
 * Phase 1 is one process whose state is modelled exactly: PR_GET must return
 * what the last successful PR_SET set, and smaps/ksm_stat must agree.
 * Phase 2 is several processes with several threads calling at once.
 *
 * Every fuzzing process works in rounds of ROUND_CALLS calls per thread, each
 * round in a new child process (so registration with ksmd happens again).
 *
 * Usage: ksm_prctl_fuzz [-d seconds] [-i rounds per process] [-p procs]
 *                       [-t threads] [-s seed]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest.h"
#include "stress_util.h"

#define MAX_PROCS	8
#define MAX_THREADS	8
#define HANG_SECS	60
#define DUP_PAGES	1024	/* 4 MiB of duplicates per process, for unmerge work */
#define MAX_REPORTS	20
#define ROUND_CALLS	50	/* calls per thread and process, then a new process */

struct shared {
	unsigned long calls, faults, bad_results, model_bad, state_bad;
	unsigned long pages_verified, mismatches, processes, reports;
	int stop;
	struct {
		struct heartbeat hb;
		unsigned long args[5];	/* of the last call */
	} thread[MAX_PROCS + 1][MAX_THREADS];
};

static struct shared *sh;
static size_t ps;
static struct run_opts opts = WORKER_OPTS("rounds per process", 30, 2, MAX_PROCS, 4, MAX_THREADS);
static unsigned long duration;	/* -d */
static time_t deadline;
static char *dup_area;
/* No successful enable or madvise in this process yet: not registered with ksmd. */
static volatile bool unregistered = true;

#define add(field, n)	__atomic_fetch_add(&sh->field, (n), __ATOMIC_RELAXED)
/* A failure; no stdio in threads and forked children. */
#define report(...)	report_limited(&sh->reports, MAX_REPORTS, __VA_ARGS__)

static const unsigned long pool[] = {
	0, 1, 2, 3, ~0UL, INT_MAX, (unsigned long)INT_MIN, UINT_MAX, LONG_MAX,
	(unsigned long)LONG_MIN, 1UL << 32, 1UL << 63, 0x100, 67, 68,
};

/* Whole seconds, for the heartbeats. */
static unsigned long now(void)
{
	return (unsigned long)now_sec();
}

/* splitmix64: the state advances by the golden ratio, the result is mixed. */
static uint64_t rnd(uint64_t *s)
{
	uint64_t x = mix64(*s);

	*s += 0x9e3779b97f4a7c15ULL;
	return x;
}

/* An argument: mostly edge cases, sometimes random bits; @zero_pct % zero. */
static unsigned long pick_arg(uint64_t *s, int zero_pct)
{
	if ((int)(rnd(s) % 100) < zero_pct)
		return 0;
	if (rnd(s) % 4 == 0)
		return rnd(s);
	return pool[rnd(s) % (sizeof(pool) / sizeof(pool[0]))];
}

/* Arm the fault injector: the @nth allocation from now on fails. */
static bool arm_fail_nth(int fd, unsigned int nth)
{
	char buf[16];
	int n = snprintf(buf, sizeof(buf), "%u", nth);

	return fd >= 0 && pwrite(fd, buf, n, 0) == n;
}

/* Disarm; true if the armed failure was injected (the counter reached 0). */
static bool disarm_fail_nth(int fd)
{
	char buf[16] = "";
	bool fired;

	if (pread(fd, buf, sizeof(buf) - 1, 0) <= 0)
		return false;
	fired = atoi(buf) == 0;
	if (pwrite(fd, "0", 1, 0) != 1)
		report("# cannot disarm fail-nth: %s\n", strerror(errno));
	return fired;
}

struct call {
	unsigned long a[5];
	long ret;
	int err;
	bool armed, fired;
};

/* One random call; returns false if its result is not a documented one. */
static bool fuzz_one(uint64_t *s, int fail_fd, struct call *c, unsigned long *slot)
{
	bool set = rnd(s) % 2, bad_args;

	c->a[0] = set ? PR_SET_MEMORY_MERGE : PR_GET_MEMORY_MERGE;
	c->a[1] = pick_arg(s, set ? 30 : 60);
	for (int i = 2; i < 5; i++)
		c->a[i] = pick_arg(s, 75);
	memcpy(slot, c->a, sizeof(c->a));
	bad_args = c->a[2] | c->a[3] | c->a[4] || (!set && c->a[1]);
	/*
	 * The first enable of a process registers it with ksmd, and that
	 * allocation is the first one of the call: aim at it every other time.
	 */
	if (set && c->a[1] && !bad_args && unregistered && rnd(s) % 2)
		c->armed = fail_fd >= 0 && arm_fail_nth(fail_fd, 1);
	else
		c->armed = fail_fd >= 0 && rnd(s) % 4 == 0 && arm_fail_nth(fail_fd, 1 + rnd(s) % 4);

	c->ret = syscall(SYS_prctl, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4]);
	c->err = errno;
	c->fired = c->armed && disarm_fail_nth(fail_fd);
	add(calls, 1);
	add(faults, c->fired);
	if (set && c->a[1] && c->ret == 0)
		unregistered = false;
	/* Now and then the first half of dup_area is madvised too (registers the mm). */
	if (dup_area && rnd(s) % 64 == 0) {
		madvise(dup_area, DUP_PAGES * ps / 2, MADV_MERGEABLE);
		unregistered = false;
	}

	if (bad_args)
		return c->ret == -1 && c->err == EINVAL;
	if (!set)
		return c->ret == 0 || c->ret == 1;
	/* Registration and unmerging allocate: an injected failure may surface. */
	return c->ret == 0 || (c->fired && c->ret == -1 && c->err == ENOMEM);
}

static void bad_result(struct call *c, const char *who)
{
	add(bad_results, 1);
	report("# %s: prctl(%lu, %#lx, %#lx, %#lx, %#lx)%s = %ld (%s): not a documented result\n",
	       who, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4],
	       c->fired ? " with an injected allocation failure" : "",
	       c->ret, c->ret < 0 ? strerror(c->err) : "success");
}

/* A leaked mmap lock turns this into a hang, which the watchdog reports. */
static void touch_mm(void)
{
	char *p = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		report("# mmap after prctl: %s\n", strerror(errno));
		add(bad_results, 1);
		return;
	}
	p[0] = 1;
	munmap(p, ps);
}

static void fill_dups(void)
{
	dup_area = mmap(NULL, DUP_PAGES * ps, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dup_area == MAP_FAILED) {
		dup_area = NULL;
		return;
	}
	for (size_t i = 0; i < DUP_PAGES; i++)
		memset(dup_area + i * ps, 'a' + i % 4, ps);
}

static void verify_dups(void)
{
	unsigned long bad = 0;

	if (!dup_area)
		return;
	for (size_t i = 0; i < DUP_PAGES; i++)
		for (size_t j = 0; j < ps; j++)
			if (dup_area[i * ps + j] != (char)('a' + i % 4)) {
				bad++;
				break;
			}
	add(pages_verified, DUP_PAGES);
	add(mismatches, bad);
	if (bad)
		report("# %lu of %d pages lost their content\n", bad, DUP_PAGES);
}

static int open_fail_nth(void)
{
	return open("/proc/thread-self/fail-nth", O_RDWR);
}

/* smaps mg and ksm_stat must agree with the modelled flag. */
static bool state_agrees(int model)
{
	struct ksm_state st = { 0 };
	bool any_yes, type_process, anon_mg, found;
	char flags[256];

	if (ksm_stat_lines(0, &st) < 0)
		return false;
	any_yes = st.any;
	type_process = !strcmp(st.type, "process");
	/* The second half of dup_area is never madvised: mg only through the flag. */
	smaps_vma(dup_area + DUP_PAGES * ps / 2, flags, sizeof(flags), NULL);
	found = flags[0];
	anon_mg = flag_listed(flags, "mg");
	if (found && any_yes == model && type_process == model && anon_mg == model)
		return true;
	report("# flag %d but ksm_merge_any %d, merge_type process %d, mg %d%s\n",
	       model, any_yes, type_process, anon_mg, found ? "" : " (VMA not found)");
	return false;
}

/*
 * Work in rounds, each in a new child process: a fresh mm is not registered
 * with ksmd yet, so its first enable goes through the registration (and its
 * allocation) again.  @round_fn returns the child's exit status.
 */
static void rounds(int (*round_fn)(int), int arg)
{
	for (unsigned long r = 0; r < opts.iterations && time(NULL) < deadline && !sh->stop; r++) {
		pid_t pid = fork();
		int status;

		if (pid < 0) {
			report("# fork: %s\n", strerror(errno));
			add(bad_results, 1);
			return;
		}
		if (pid == 0)
			_exit(round_fn(arg));
		add(processes, 1);
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
			report("# round process %d failed (status %#x)\n", pid, status);
			add(bad_results, 1);
		}
	}
}

/* Phase 1: one thread, exact model of the flag. */
static int sequential_round(int unused)
{
	int fd = open_fail_nth(), model = 0;
	uint64_t s = opts.s ^ getpid();
	unsigned long n;

	(void)unused;
	fill_dups();
	for (n = 0; n < ROUND_CALLS && time(NULL) < deadline && !sh->stop; n++) {
		struct call c;

		sh->thread[MAX_PROCS][0].hb.beat = now();
		if (!fuzz_one(&s, fd, &c, sh->thread[MAX_PROCS][0].args)) {
			bad_result(&c, "sequential");
			continue;
		}
		if (c.a[0] == PR_SET_MEMORY_MERGE && c.ret == 0)
			model = !!c.a[1];
		if (c.a[0] == PR_GET_MEMORY_MERGE && c.ret >= 0 && c.ret != model) {
			add(model_bad, 1);
			report("# PR_GET_MEMORY_MERGE = %ld, the last successful PR_SET set %d\n",
			       c.ret, model);
		}
		touch_mm();
		if (n % 8 == 0 && !state_agrees(model))
			add(state_bad, 1);
	}
	verify_dups();
	return 0;
}

static int sequential(void)
{
	rounds(sequential_round, 0);
	sh->thread[MAX_PROCS][0].hb.done = 1;
	return 0;
}

struct tctx {
	int proc, tid;
};

static void *fuzz_thread(void *arg)
{
	struct tctx *t = arg;
	uint64_t s = opts.s ^ ((uint64_t)getpid() << 32 | t->tid);
	int fd = open_fail_nth();

	for (unsigned long n = 0; n < ROUND_CALLS && time(NULL) < deadline && !sh->stop; n++) {
		struct call c;
		char who[32];

		sh->thread[t->proc][t->tid].hb.beat = now();
		if (!fuzz_one(&s, fd, &c, sh->thread[t->proc][t->tid].args)) {
			snprintf(who, sizeof(who), "proc %d thread %d", t->proc, t->tid);
			bad_result(&c, who);
		}
		touch_mm();
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* Phase 2: one of several processes, -t threads calling at once. */
static int concurrent_round(int proc)
{
	static struct tctx ctx[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	int n;

	fill_dups();
	for (n = 0; n < opts.threads; n++) {
		ctx[n] = (struct tctx){ .proc = proc, .tid = n };
		sh->thread[proc][n].hb.beat = now();
		if (pthread_create(&th[n], NULL, fuzz_thread, &ctx[n])) {
			report("# proc %d: pthread_create failed\n", proc);
			add(bad_results, 1);
			break;
		}
	}
	while (n--)
		pthread_join(th[n], NULL);
	verify_dups();
	return 0;
}

static int concurrent(int proc)
{
	rounds(concurrent_round, proc);
	for (int i = 0; i < opts.threads; i++)
		sh->thread[proc][i].hb.done = 1;
	return 0;
}

/* Wait for all fuzzing processes; false if one of their threads stopped moving. */
static bool watch(pid_t *pids, int n)
{
	const int slots = (MAX_PROCS + 1) * MAX_THREADS;
	int stuck = watch_workers(n, &sh->thread[0][0].hb, sizeof(sh->thread[0][0]), slots,
				  HANG_SECS, now() + duration + 600, NULL, NULL);
	int p = stuck / MAX_THREADS, i = stuck % MAX_THREADS;

	if (stuck < 0)
		return true;
	if (stuck < slots) {
		unsigned long *a = sh->thread[p][i].args;

		ksft_print_msg("%s %d thread %d made no progress for %lu s after prctl(%lu, %#lx, %#lx, %#lx, %#lx)\n",
			       p == MAX_PROCS ? "sequential process" : "process", p, i,
			       now() - sh->thread[p][i].hb.beat, a[0], a[1], a[2], a[3], a[4]);
	} else {
		ksft_print_msg("fuzzers still running %lu s after the deadline\n",
			       now() - deadline);
	}
	/* A process that holds its own mmap lock cannot even exit: leave it. */
	sh->stop = 1;
	for (int p = 0; p < n; p++)
		kill(pids[p], SIGKILL);
	return false;
}

int main(int argc, char **argv)
{
	pid_t pids[MAX_PROCS + 1];
	bool no_hang, faults;
	int n = 0;

	parse_opts(argc, argv, &opts);
	duration = opts.seconds;
	ps = sysconf(_SC_PAGESIZE);
	ksft_print_header();
	if (syscall(SYS_prctl, PR_GET_MEMORY_MERGE, 0, 0, 0, 0) < 0)
		ksft_exit_skip("no PR_GET_MEMORY_MERGE: %s\n", strerror(errno));
	if (geteuid())
		ksft_exit_skip("needs root to drive ksmd and the fault injectors\n");
	/* ksmd flat out, so that there is unmerging work for every disable. */
	if (!ksmd_fast(5000, 0))
		ksft_exit_skip("cannot set up ksmd\n");
	faults = !access("/proc/thread-self/fail-nth", W_OK) && fault_knobs_set();
	ksft_set_plan(5);
	ksft_print_msg("1 modelled process + %d processes x %d threads, %lu s or %lu rounds of %d calls, seed %llu, fault injection %s\n",
		       opts.procs, opts.threads, duration, opts.iterations, ROUND_CALLS, opts.s,
		       faults ? "on" : "off (needs CONFIG_FAULT_INJECTION_DEBUG_FS)");

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	deadline = time(NULL) + duration;
	fflush(stdout);
	for (int p = -1; p < opts.procs; p++) {
		pid_t pid = fork();

		if (pid < 0)
			ksft_exit_fail_msg("fork: %s\n", strerror(errno));
		if (pid == 0)
			_exit(p < 0 ? sequential() : concurrent(p));
		pids[n++] = pid;
		sh->processes++;
	}
	no_hang = watch(pids, n);

	ksft_test_result(sh->bad_results == 0, "%lu calls, %lu with an injected allocation failure: only documented results (%lu others)\n",
			 sh->calls, sh->faults, sh->bad_results);
	ksft_test_result(sh->model_bad == 0, "PR_GET_MEMORY_MERGE returned what the last successful PR_SET set (%lu differed)\n",
			 sh->model_bad);
	ksft_test_result(sh->state_bad == 0, "ksm_stat and smaps mg agreed with the flag (%lu differed)\n",
			 sh->state_bad);
	ksft_test_result(no_hang, "mmap+munmap completed within %d s after every call\n", HANG_SECS);
	ksft_test_result(sh->mismatches == 0, "data intact: %lu pages verified, %lu lost\n",
			 sh->pages_verified, sh->mismatches);

	knobs_restore();
	print_stats("operations", sh->calls, "processes", sh->processes, "faults_injected",
		    sh->faults, "pages_verified", sh->pages_verified, "mismatches", sh->mismatches,
		    NULL);
	ksft_finished();
}
