// SPDX-License-Identifier: GPL-2.0
/*
 * Signals, memory pressure and privilege changes against per-process KSM.
 *
 * Disabling KSM for a process (prctl(PR_SET_MEMORY_MERGE, 0)) unmerges every
 * merged page, one copy-on-write at a time, under the mmap lock: for a large
 * merged area that takes long enough to be interrupted.
 *
 *  - A fatal signal (SIGKILL) during the disable kills the process cleanly,
 *    and ksmd then forgets its merged pages.
 *  - A non-fatal signal (SIGUSR1, handler without SA_RESTART) makes it fail
 *    with EINTR; the process stays enabled and consistent with its data
 *    intact, and a later disable succeeds.
 *  - Under a memory cgroup limit too small to unmerge, it fails with ENOMEM.
 *    The caller is alone in its leaf cgroup with oom_score_adj -1000 (how an
 *    orchestrator protects a seed process), so the memcg OOM killer finds no
 *    victim: nothing is killed, not the caller, not a process in a sibling
 *    cgroup, not one outside. The caller stays enabled with its data intact;
 *    once the limit is raised the disable succeeds.
 *  - The setting never survives an exec that gains privileges: setgid and
 *    file capabilities (setuid is covered by ksm_prctl_tests), while a plain
 *    exec by the same unprivileged user keeps it.
 *
 * The interrupted cases need the signal to land while the pages are being
 * unmerged: the parent watches nr_free_pages drop as the child allocates its
 * private copies, and signals once a share of the area has been unmerged.
 * When the disable wins the race anyway the attempt is repeated, signalling
 * earlier (-i bounds the attempts).
 *
 * Statistics ("# stat KEY VALUE"): operations = PR_SET_MEMORY_MERGE calls
 * and execs, processes = forks, pages_verified, signals_sent, mismatches =
 * changed pages plus failed consistency checks.
 *
 * Needs root; restores the ksmd knobs and the cgroup setup it changes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <linux/capability.h>

#include "kselftest.h"
#include "stress_util.h"

/* Arguments that make this program the exec target of the security tests. */
#define HELPER_ARG "--ksm-signals-helper"

#define AREA_KINDS 16		/* distinct page contents in an area */
#define DEFAULT_AREA_MIB 64
#define DEFAULT_SECONDS 170
#define DEFAULT_ATTEMPTS 4
#define AREA_MERGE_TIMEOUT_SEC 120
#define UNMERGE_TIMEOUT_SEC 300
/* Merged enough: ksmd may leave a few pages behind for a while. */
#define MERGED_PERCENT 98

static size_t page_size;
static size_t area_pages;
static struct run_opts opts = {
	.letters = "d:i:s:h",
	.usage = "[-d SECONDS] [-i ATTEMPTS] [-s AREA_MIB]\n"
		 "  -d  time bound for the whole run (default " KSM_XSTR(DEFAULT_SECONDS) ")\n"
		 "  -i  attempts to land a signal inside the disable (default "
		 KSM_XSTR(DEFAULT_ATTEMPTS) ")\n"
		 "  -s  merged area of the signal tests, MiB (default " KSM_XSTR(DEFAULT_AREA_MIB)
		 "; memcg: half)",
	.seconds = DEFAULT_SECONDS,
	.iterations = DEFAULT_ATTEMPTS,		/* attempts */
	.s = DEFAULT_AREA_MIB,
};
static double end_time;
/*
 * Attempts at signalling a disable in time, whatever the time bound: each
 * signals earlier (half the pages unmerged first). The time is shared by all
 * tests, and a short run (make check's) would otherwise end after one.
 */
#define MIN_ATTEMPTS	3

/* Counters of every process of the run (a MAP_SHARED page). */
static struct stats {
	long operations;
	long processes;
	long pages_verified;
	long faults_injected;
	long signals_sent;
	long mismatches;
} *stats;

static void stat_add(long *counter, long val)
{
	__atomic_fetch_add(counter, val, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ */
/* Small helpers                                                      */
/* ------------------------------------------------------------------ */

static long free_pages(void)
{
	return read_key("/proc/vmstat", "nr_free_pages");
}

/* merge_set(), counted as an operation */
static long merge_set_counted(unsigned long on)
{
	stat_add(&stats->operations, 1);
	return merge_set(on);
}

/* ------------------------------------------------------------------ */
/* State of a process: PR_GET_MEMORY_MERGE, ksm_stat, smaps           */
/* ------------------------------------------------------------------ */

/*
 * state_consistent(), counted as a mismatch when it fails. The processes
 * here never use MADV_MERGEABLE: not enabled means no mg at all.
 */
static bool consistent(pid_t pid, int want, const char *what)
{
	if (state_consistent(pid, want, false, what))
		return true;
	stat_add(&stats->mismatches, 1);
	return false;
}

/* ------------------------------------------------------------------ */
/* Data: a large area of pages with many duplicates                   */
/* ------------------------------------------------------------------ */

/*
 * Number of pages of the area that differ from what was written there. Only
 * reads: safe in a process that must not allocate memory.
 */
static long area_bad_pages(const char *area, size_t pages)
{
	long bad = pattern_bad_pages(area, pages);

	stat_add(&stats->pages_verified, pages);
	stat_add(&stats->mismatches, bad);
	return bad;
}

static bool area_verify(const char *area, size_t pages, const char *what)
{
	long bad = area_bad_pages(area, pages);

	return expect(!bad, "%s: %ld of %zu pages changed", what, bad, pages);
}

static bool area_wait_merged(const char *area, size_t pages, const char *what)
{
	size_t want = pages * MERGED_PERCENT / 100;
	double start = now_sec();
	long nr = ksm_wait_pages(area, pages, want, 100, AREA_MERGE_TIMEOUT_SEC);

	if (nr >= (long)want) {
		ksft_print_msg("%s: %ld of %zu pages merged in %.1f s\n", what, nr, pages,
			       now_sec() - start);
		return true;
	}
	return expect(false, "%s: %ld of %zu pages merged after %d s", what, nr, pages,
		      AREA_MERGE_TIMEOUT_SEC);
}

/* ------------------------------------------------------------------ */
/* Pipes between a test and its child                                 */
/* ------------------------------------------------------------------ */

struct chan {
	int to_child[2];
	int to_parent[2];
};

static bool chan_open(struct chan *c)
{
	return !pipe2(c->to_child, O_CLOEXEC) && !pipe2(c->to_parent, O_CLOEXEC);
}

static void chan_child_side(struct chan *c)
{
	close(c->to_child[1]);
	close(c->to_parent[0]);
}

static void chan_parent_side(struct chan *c)
{
	close(c->to_child[0]);
	close(c->to_parent[1]);
}

static void chan_close(struct chan *c)
{
	close(c->to_child[1]);
	close(c->to_parent[0]);
}

/* Reads one message from the other side; false on EOF or after @timeout s. */
static bool msg_read(int fd, void *msg, size_t size, int timeout)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	if (poll(&pfd, 1, timeout * 1000) != 1)
		return false;
	return read(fd, msg, size) == (ssize_t)size;
}

static bool msg_write(int fd, const void *msg, size_t size)
{
	return write(fd, msg, size) == (ssize_t)size;
}

/* Whether something (a message or EOF) is waiting on @fd. */
static bool msg_ready(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, timeout_ms) == 1;
}

/* ------------------------------------------------------------------ */
/* Interrupted disable                                                */
/* ------------------------------------------------------------------ */

/* What the child says about a disable that returned. */
struct disable_result {
	long ret;
	int err;
};

static volatile sig_atomic_t usr1_seen;

static void on_usr1(int sig)
{
	(void)sig;
	usr1_seen++;
}

/*
 * Child: enable, merge the area, say "ready" and wait for "go", disable.
 * With @nonfatal, SIGUSR1 is blocked as soon as the disable returns, and
 * the outcome is sent back; the parent answers with the next command.
 */
static int disable_child(struct chan *c, bool nonfatal)
{
	struct disable_result r;
	sigset_t usr1;
	char cmd = 0;
	char *area;
	bool ok;

	chan_child_side(c);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (nonfatal) {
		struct sigaction sa = { .sa_handler = on_usr1 };

		/* No SA_RESTART: the interrupted prctl() must return EINTR. */
		if (sigaction(SIGUSR1, &sa, NULL))
			return KSFT_FAIL;
		sigprocmask(SIG_BLOCK, &usr1, NULL);
	}
	area = pattern_map(area_pages);
	if (!area || !expect(merge_set_counted(1) == 0, "enable: %m"))
		return KSFT_FAIL;
	for (;;) {
		if (!area_wait_merged(area, area_pages, "disable child"))
			return KSFT_FAIL;
		/* The parent may have given up already: its 'Q' is waiting. */
		msg_write(c->to_parent[1], "R", 1);
		if (!msg_read(c->to_child[0], &cmd, 1, UNMERGE_TIMEOUT_SEC) || cmd != 'G')
			return cmd == 'Q' ? KSFT_PASS : KSFT_FAIL;

		sigprocmask(SIG_UNBLOCK, &usr1, NULL);
		r.ret = merge_set_counted(0);
		r.err = errno;
		sigprocmask(SIG_BLOCK, &usr1, NULL);

		if (!msg_write(c->to_parent[1], &r, sizeof(r)))
			return KSFT_FAIL;
		if (!nonfatal)
			return KSFT_PASS;	/* the disable won the race */
		if (r.ret == 0) {
			/* Too fast for the parent: enable and merge again. */
			if (!expect(merge_set_counted(1) == 0, "enable again: %m"))
				return KSFT_FAIL;
			continue;
		}
		break;
	}

	/* Interrupted: still enabled, consistent, data intact. */
	ok = expect(r.ret == -1 && r.err == EINTR, "disable: %ld, %s", r.ret,
		    strerror(r.err));
	ok &= expect(usr1_seen > 0, "disable failed, but no SIGUSR1 was handled");
	ok &= expect(merge_get() == 1, "PR_GET_MEMORY_MERGE %ld after EINTR", merge_get());
	ok &= consistent(0, 1, "after interrupted disable");
	ok &= area_verify(area, area_pages, "after interrupted disable");
	/* Signals still blocked: this one runs to the end. */
	ok &= expect(merge_set_counted(0) == 0, "disable after EINTR: %m");
	ok &= consistent(0, 0, "after clean disable");
	ok &= area_verify(area, area_pages, "after clean disable");
	return ok ? KSFT_PASS : KSFT_FAIL;
}

/*
 * Parent: waits until the child's disable has unmerged @trigger pages (free
 * pages drop by that much), or until the child reports that it returned.
 * Returns true when the disable is under way and has not returned.
 */
static bool wait_unmerging(struct chan *c, long baseline, long trigger)
{
	double deadline = now_sec() + UNMERGE_TIMEOUT_SEC;

	while (now_sec() < deadline) {
		if (msg_ready(c->to_parent[0], 1))
			return false;
		if (baseline - free_pages() >= trigger)
			return true;
	}
	return false;
}

/* Waits for pages_sharing to get back to @level: ksmd let go of the pages. */
static bool wait_pages_sharing(long level)
{
	double deadline = now_sec() + AREA_MERGE_TIMEOUT_SEC;
	long sharing;

	do {
		sharing = ksm_read("pages_sharing");
		if (sharing >= 0 && sharing <= level)
			return true;
		usleep(100000);
	} while (now_sec() < deadline);
	return false;
}

static bool wait_exit_code_ok(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return false;
	if (WIFSIGNALED(status))
		ksft_print_msg("process %d killed by signal %d\n", pid, WTERMSIG(status));
	return WIFEXITED(status) && WEXITSTATUS(status) == KSFT_PASS;
}

static void test_fatal_signal(void)
{
	const char *name = "SIGKILL during disable kills the process cleanly";
	long trigger = area_pages / 4, baseline, sharing, unmerged = 0;
	unsigned int attempt;
	struct disable_result r;
	bool killed = false, ok = true;
	int status;
	char ready;

	if (!ksmd_fast(10000, 0)) {
		ksft_test_result_fail("%s (ksmd)\n", name);
		return;
	}
	for (attempt = 1; attempt <= opts.iterations && ok &&
	     (attempt <= MIN_ATTEMPTS || now_sec() < end_time); attempt++) {
		struct chan c;
		pid_t pid;
		bool hit;

		sharing = ksm_read("pages_sharing");
		if (!chan_open(&c)) {
			ok = false;
			break;
		}
		pid = fork_counted(&stats->processes);
		if (!pid)
			child_exit(disable_child(&c, false));
		chan_parent_side(&c);
		if (pid < 0 || !msg_read(c.to_parent[0], &ready, 1, AREA_MERGE_TIMEOUT_SEC + 60)) {
			ok = expect(false, "child not ready");
			chan_close(&c);
			if (pid > 0) {
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
			}
			break;
		}
		baseline = free_pages();
		msg_write(c.to_child[1], "G", 1);
		hit = wait_unmerging(&c, baseline, trigger);
		if (hit) {
			kill(pid, SIGKILL);
			stat_add(&stats->signals_sent, 1);
			unmerged = baseline - free_pages();
		}
		waitpid(pid, &status, 0);
		/* A result on the pipe: the disable returned before the kill. */
		if (msg_read(c.to_parent[0], &r, sizeof(r), 0))
			hit = false;
		chan_close(&c);
		if (!hit) {
			ksft_print_msg("attempt %u: disable returned before SIGKILL, "
				       "signalling earlier\n", attempt);
			ok = expect(WIFEXITED(status) && !WEXITSTATUS(status),
				    "child failed (status %#x)", status);
			trigger = trigger / 2 ? trigger / 2 : 1;
			continue;
		}
		ksft_print_msg("attempt %u: SIGKILL after about %ld pages unmerged\n", attempt,
			       unmerged);
		ok = expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			    "child not killed by SIGKILL (status %#x)", status);
		/* Its merged pages are gone from ksmd's books once it scanned. */
		ok &= expect(wait_pages_sharing(sharing),
			     "pages_sharing %ld, not back to %ld after %d s",
			     ksm_read("pages_sharing"), sharing, AREA_MERGE_TIMEOUT_SEC);
		killed = true;
		break;
	}
	if (ok && !killed) {
		ksft_test_result_skip("%s: the disable always finished first (%u attempts; "
				      "larger -s?)\n", name, attempt - 1);
		return;
	}
	ksft_test_result(ok, "%s\n", name);
}

static void test_nonfatal_signal(void)
{
	const char *name = "SIGUSR1 during disable: EINTR, still enabled, data intact";
	long trigger = area_pages / 4, baseline, unmerged = 0;
	struct disable_result r;
	unsigned int attempt;
	bool eintr = false, ok = true;
	struct chan c;
	char ready;
	pid_t pid;

	if (!ksmd_fast(10000, 0) || !chan_open(&c)) {
		ksft_test_result_fail("%s (setup)\n", name);
		return;
	}
	pid = fork_counted(&stats->processes);
	if (!pid)
		child_exit(disable_child(&c, true));
	chan_parent_side(&c);
	if (pid < 0) {
		ksft_test_result_fail("%s (fork)\n", name);
		return;
	}
	for (attempt = 1; attempt <= opts.iterations &&
	     (attempt <= MIN_ATTEMPTS || now_sec() < end_time); attempt++) {
		if (!msg_read(c.to_parent[0], &ready, 1, AREA_MERGE_TIMEOUT_SEC + 60)) {
			ok = expect(false, "child not ready");
			break;
		}
		baseline = free_pages();
		msg_write(c.to_child[1], "G", 1);
		if (wait_unmerging(&c, baseline, trigger)) {
			unmerged = baseline - free_pages();
			/* Keep signalling until the disable returns. */
			do {
				kill(pid, SIGUSR1);
				stat_add(&stats->signals_sent, 1);
			} while (!msg_ready(c.to_parent[0], 1));
		}
		if (!msg_read(c.to_parent[0], &r, sizeof(r), UNMERGE_TIMEOUT_SEC)) {
			ok = expect(false, "no result from the child");
			break;
		}
		if (r.ret) {
			ksft_print_msg("attempt %u: disable returned %ld (%s), first signal "
				       "after about %ld pages unmerged\n", attempt, r.ret,
				       strerror(r.err), unmerged);
			eintr = true;
			break;
		}
		ksft_print_msg("attempt %u: disable finished before the signal, "
			       "signalling earlier\n", attempt);
		trigger = trigger / 2 ? trigger / 2 : 1;
	}
	if (!eintr)
		msg_write(c.to_child[1], "Q", 1);
	chan_close(&c);
	ok &= expect(wait_exit_code_ok(pid), "child reported a failure");
	if (ok && !eintr) {
		ksft_test_result_skip("%s: the disable always finished first (%u attempts; "
				      "larger -s?)\n", name, attempt - 1);
		return;
	}
	ksft_test_result(ok, "%s\n", name);
}

/* ------------------------------------------------------------------ */
/* Memory cgroup too small to unmerge                                 */
/* ------------------------------------------------------------------ */

static char cg_dir[128];		/* our parent group */

static void cg_path(char *buf, size_t size, const char *group, const char *file)
{
	snprintf(buf, size, "%s%s%s%s%s", cg_dir, group ? "/" : "", group ? group : "",
		 file ? "/" : "", file ? file : "");
}

static bool cg_write(const char *group, const char *file, const char *val)
{
	char path[PATH_MAX];

	cg_path(path, sizeof(path), group, file);
	return expect(!write_file(path, val), "write '%s' to %s: %m", val, path);
}

static long cg_key(const char *group, const char *file, const char *key)
{
	char path[PATH_MAX];

	cg_path(path, sizeof(path), group, file);
	return read_key(path, key);
}

static long cg_long(const char *group, const char *file)
{
	char path[PATH_MAX];

	cg_path(path, sizeof(path), group, file);
	return read_key(path, NULL);
}

static bool cg_join(const char *group)
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", getpid());
	return cg_write(group, "cgroup.procs", pid);
}

/*
 * Our group (see cgroup_create()) with a "seed" and a "sibling" child, the
 * memory controller enabled for them. Returns a reason to skip, or NULL.
 */
static const char *cg_setup(void)
{
	const char *skip = cgroup_create("ksm_signals", cg_dir, sizeof(cg_dir));
	char buf[512];

	if (skip)
		return skip;
	if (!cg_write(NULL, "cgroup.subtree_control", "+memory"))
		return "cannot enable +memory in our cgroup";
	cg_path(buf, sizeof(buf), "seed", NULL);
	if (mkdir(buf, 0755))
		return "cannot create the seed cgroup";
	cg_path(buf, sizeof(buf), "sibling", NULL);
	if (mkdir(buf, 0755))
		return "cannot create the sibling cgroup";
	return NULL;
}

static void cg_cleanup(void)
{
	char path[PATH_MAX];

	if (cg_dir[0]) {
		cg_path(path, sizeof(path), "seed", NULL);
		rmdir(path);
		cg_path(path, sizeof(path), "sibling", NULL);
		rmdir(path);
	}
	cgroup_remove(cg_dir);
}

/* Seed and parent meet through a MAP_SHARED page. */
enum seed_state {
	SEED_START, SEED_READY, SEED_LIMITED, SEED_FAILED, SEED_RAISED, SEED_DONE,
	SEED_ERROR,
};

struct seed_ctl {
	int state;		/* enum seed_state, through seed_get()/seed_set() */
	long ret, ret2;		/* first disable (limited), second (raised) */
	int err, err2;
	long get, get2;		/* PR_GET_MEMORY_MERGE after each */
	long bad, bad2;		/* pages that changed after each */
};

static int seed_get(struct seed_ctl *ctl)
{
	return __atomic_load_n(&ctl->state, __ATOMIC_ACQUIRE);
}

/* Publishes the results written before it together with the new state. */
static void seed_set(struct seed_ctl *ctl, int state)
{
	__atomic_store_n(&ctl->state, state, __ATOMIC_RELEASE);
}

/* Whether @pid has exited, without reaping it. */
static bool exited(pid_t pid)
{
	siginfo_t si = { 0 };

	return !waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) && si.si_pid == pid;
}

/* Waits for @state; @seed > 0: the parent, which also watches the seed die. */
static bool seed_wait(struct seed_ctl *ctl, int state, pid_t seed)
{
	double deadline = now_sec() + UNMERGE_TIMEOUT_SEC;

	while (seed_get(ctl) != state) {
		if (seed_get(ctl) == SEED_ERROR || now_sec() > deadline)
			return false;
		if (seed > 0 && exited(seed))
			return false;
		usleep(1000);
	}
	return true;
}

/*
 * Breaks every merged page of this process outside @area and faults in all
 * of its private writable memory by writing each page with its own content:
 * at the memcg limit, a copy-on-write fault in user mode could not be
 * charged and would spin on the OOM path. ksmd is stopped first, so nothing
 * is merged again.
 */
static bool seed_prefault(const char *area, size_t len)
{
	static struct { unsigned long s, e; } vmas[512];
	unsigned long lo = (uintptr_t)area, hi = lo + len, a;
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512], perms[5];
	int n = 0, i;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f) && n < (int)ARRAY_SIZE(vmas)) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx %4s", &s, &e, perms) != 3 ||
		    strcmp(perms, "rw-p") || (s < hi && e > lo))
			continue;
		vmas[n].s = s;
		vmas[n].e = e;
		n++;
	}
	fclose(f);
	for (i = 0; i < n; i++)
		for (a = vmas[i].s; a < vmas[i].e; a += page_size) {
			volatile char *p = (volatile char *)a;

			*p = *p;
		}
	return true;
}

/*
 * The seed: alone in its cgroup, oom_score_adj -1000. Nothing in it may
 * allocate between the failed disable and the raised limit: it only
 * reads its area and writes to the shared page.
 */
static int seed_main(struct seed_ctl *ctl)
{
	size_t pages = area_pages / 2;
	char *area;

	if (!cg_join("seed") ||
	    !expect(!write_file("/proc/self/oom_score_adj", "-1000"), "oom_score_adj: %m"))
		goto error;
	area = pattern_map(pages);
	if (!area || !expect(merge_set_counted(1) == 0, "enable: %m") ||
	    !area_wait_merged(area, pages, "seed") || !ksm_set("run", "0") ||
	    !seed_prefault(area, pages * page_size) || !consistent(0, 1, "seed"))
		goto error;
	area_bad_pages(area, pages);	/* the code path, once, before the limit */

	seed_set(ctl, SEED_READY);
	if (!seed_wait(ctl, SEED_LIMITED, 0))
		goto error;
	ctl->ret = merge_set_counted(0);
	ctl->err = errno;
	ctl->get = merge_get();
	ctl->bad = area_bad_pages(area, pages);
	seed_set(ctl, SEED_FAILED);

	if (!seed_wait(ctl, SEED_RAISED, 0))
		goto error;
	ctl->ret2 = merge_set_counted(0);
	ctl->err2 = errno;
	ctl->get2 = merge_get();
	ctl->bad2 = area_bad_pages(area, pages);
	seed_set(ctl, SEED_DONE);
	return consistent(0, 0, "seed after the limit was raised") ?
	       KSFT_PASS : KSFT_FAIL;
error:
	seed_set(ctl, SEED_ERROR);
	return KSFT_FAIL;
}

/* A bystander: sleeps in @group (NULL: where we are) until killed. */
static pid_t bystander(const char *group)
{
	pid_t pid = fork_counted(&stats->processes);

	if (!pid) {
		if (group && !cg_join(group))
			child_exit(KSFT_FAIL);
		for (;;)
			pause();
	}
	return pid;
}

static bool alive(pid_t pid)
{
	return pid > 0 && waitpid(pid, NULL, WNOHANG) == 0;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

#define MEMCG_TESTS 3

static void test_memcg(void)
{
	static const char * const names[MEMCG_TESTS] = {
		"memcg too small to unmerge: disable fails with ENOMEM, still enabled, "
		"data intact",
		"memcg too small to unmerge: nothing OOM-killed, bystanders in a sibling "
		"cgroup and outside survive",
		"memcg limit raised: disable succeeds, data intact",
	};
	bool ok[MEMCG_TESTS] = { true, true, true };
	long oom_kills, current, limit, headroom;
	pid_t seed = -1, sibling = -1, outside = -1;
	struct seed_ctl *ctl;
	const char *skip;
	char buf[32];
	int i;

	skip = cg_setup();
	if (skip) {
		for (i = 0; i < MEMCG_TESTS; i++)
			ksft_test_result_skip("%s: %s\n", names[i], skip);
		cg_cleanup();
		return;
	}
	ctl = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		   -1, 0);
	if (ctl == MAP_FAILED || !ksmd_fast(10000, 0)) {
		ok[0] = false;
		goto out;
	}
	oom_kills = read_key("/proc/vmstat", "oom_kill");
	sibling = bystander("sibling");
	outside = bystander(NULL);
	seed = fork_counted(&stats->processes);
	if (!seed)
		child_exit(seed_main(ctl));
	if (seed < 0 || !seed_wait(ctl, SEED_READY, seed)) {
		ok[0] = expect(false, "seed not ready");
		goto out;
	}
	/* Room for an eighth of the area: unmerging the rest must fail. */
	current = cg_long("seed", "memory.current");
	headroom = area_pages / 2 / 8 * page_size;
	limit = (current + headroom) / page_size * page_size;
	snprintf(buf, sizeof(buf), "%ld", limit);
	ksft_print_msg("seed memory.current %ld, memory.max %ld\n", current, limit);
	if (current < 0 || !cg_write("seed", "memory.max", buf)) {
		ok[0] = false;
		goto out;
	}
	seed_set(ctl, SEED_LIMITED);
	if (!seed_wait(ctl, SEED_FAILED, seed)) {
		ok[0] = expect(false, "seed did not report its disable");
		goto out;
	}

	ok[0] &= expect(ctl->ret == -1 && ctl->err == ENOMEM, "disable under the limit: %ld, %s",
			ctl->ret, strerror(ctl->err));
	ok[0] &= expect(ctl->get == 1, "PR_GET_MEMORY_MERGE %ld after the failed disable",
			ctl->get);
	ok[0] &= expect(!ctl->bad, "%ld pages changed after the failed disable", ctl->bad);
	ok[0] &= consistent(seed, 1, "seed after the failed disable");

	ksft_print_msg("seed memory.events: oom %ld, oom_kill %ld; memory.current %ld\n",
		       cg_key("seed", "memory.events", "oom"),
		       cg_key("seed", "memory.events", "oom_kill"),
		       cg_long("seed", "memory.current"));
	ok[1] &= expect(alive(seed), "the seed died");
	ok[1] &= expect(alive(sibling), "the bystander in the sibling cgroup died");
	ok[1] &= expect(alive(outside), "the bystander outside died");
	ok[1] &= expect(cg_key("seed", "memory.events", "oom_kill") == 0, "seed oom_kill");
	ok[1] &= expect(cg_key("sibling", "memory.events", "oom_kill") == 0,
			"sibling oom_kill");
	ok[1] &= expect(cg_key(NULL, "memory.events", "oom_kill") == 0, "parent oom_kill");
	ok[1] &= expect(read_key("/proc/vmstat", "oom_kill") == oom_kills,
			"/proc/vmstat oom_kill went from %ld to %ld", oom_kills,
			read_key("/proc/vmstat", "oom_kill"));

	if (!cg_write("seed", "memory.max", "max")) {
		ok[2] = false;
		goto out;
	}
	seed_set(ctl, SEED_RAISED);
	if (!seed_wait(ctl, SEED_DONE, seed)) {
		ok[2] = expect(false, "seed did not report its second disable");
		goto out;
	}
	ok[2] &= expect(ctl->ret2 == 0, "disable after raising the limit: %s",
			strerror(ctl->err2));
	ok[2] &= expect(ctl->get2 == 0, "PR_GET_MEMORY_MERGE %ld after it", ctl->get2);
	ok[2] &= expect(!ctl->bad2, "%ld pages changed after it", ctl->bad2);
	ok[2] &= expect(wait_exit_code_ok(seed), "seed found itself inconsistent");
	seed = -1;
out:
	reap(seed);
	reap(sibling);
	reap(outside);
	cg_cleanup();
	ksmd_fast(10000, 0);
	for (i = 0; i < MEMCG_TESTS; i++)
		ksft_test_result(ok[i], "%s\n", names[i]);
}

/* ------------------------------------------------------------------ */
/* Exec that gains privileges                                         */
/* ------------------------------------------------------------------ */

static char sec_dir[] = "/tmp/ksm_signals.XXXXXX";

static bool copy_self(const char *dst, mode_t mode)
{
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	char buf[65536];
	bool ok = in >= 0 && out >= 0;
	ssize_t n = 0;

	while (ok && (n = read(in, buf, sizeof(buf))) > 0)
		ok = write(out, buf, n) == n;
	/* chmod after the write: writing clears setuid/setgid bits. */
	ok = ok && n == 0 && !fchown(out, 0, 0) && !fchmod(out, mode);
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out))
		ok = false;
	return expect(ok, "copy to %s: %m", dst);
}

/*
 * A file capability: CAP_NET_BIND_SERVICE permitted, not effective. An
 * unprivileged user running the file gains a permitted capability, which
 * makes the exec secure (AT_SECURE) without changing any id.
 */
static int set_file_cap(const char *path)
{
	struct vfs_cap_data cap = {
		.magic_etc = VFS_CAP_REVISION_2,
	};

	cap.data[0].permitted = 1U << CAP_NET_BIND_SERVICE;
	return setxattr(path, "security.capability", &cap, sizeof(cap), 0);
}

/* Unprivileged user that enabled KSM and execs @path in helper @mode. */
static int unpriv_exec(const char *path, const char *mode)
{
	pid_t pid = fork_counted(&stats->processes);
	int status;

	if (pid < 0)
		return KSFT_FAIL;
	if (!pid) {
		if (!drop_privileges())
			child_exit(KSFT_FAIL);
		if (!expect(merge_set_counted(1) == 0, "unprivileged enable: %m"))
			child_exit(KSFT_FAIL);
		stat_add(&stats->operations, 1);
		execl(path, path, HELPER_ARG, mode, (char *)NULL);
		expect(false, "exec %s: %m", path);
		child_exit(KSFT_FAIL);
	}
	if (waitpid(pid, &status, 0) != pid)
		return KSFT_FAIL;
	if (WIFSIGNALED(status))
		ksft_print_msg("%s helper killed by signal %d\n", mode, WTERMSIG(status));
	return WIFEXITED(status) ? WEXITSTATUS(status) : KSFT_FAIL;
}

static void test_privileged_exec(void)
{
	static const char * const names[] = {
		"setgid exec clears the setting: no mg, ksm_stat none",
		"file-capability exec clears the setting: no mg, ksm_stat none",
		"plain exec by the same user keeps the setting (control)",
	};
	char sgid[PATH_MAX], fcap[PATH_MAX], plain[PATH_MAX];
	int ret[3] = { KSFT_FAIL, KSFT_FAIL, KSFT_FAIL };
	const char *skip_fcap = NULL;
	size_t i;

	if (!mkdtemp(sec_dir) || chmod(sec_dir, 0755)) {
		for (i = 0; i < ARRAY_SIZE(names); i++)
			ksft_test_result_fail("%s: mkdtemp: %s\n", names[i], strerror(errno));
		return;
	}
	snprintf(sgid, sizeof(sgid), "%s/sgid", sec_dir);
	snprintf(fcap, sizeof(fcap), "%s/fcap", sec_dir);
	snprintf(plain, sizeof(plain), "%s/plain", sec_dir);
	if (copy_self(sgid, 02755))
		ret[0] = unpriv_exec(sgid, "secure");
	if (copy_self(fcap, 0755)) {
		if (set_file_cap(fcap))
			skip_fcap = errno == EOPNOTSUPP ? "no xattrs on /tmp (CONFIG_TMPFS_XATTR)" :
				    strerror(errno);
		else
			ret[1] = unpriv_exec(fcap, "secure");
	}
	if (copy_self(plain, 0755))
		ret[2] = unpriv_exec(plain, "plain");
	unlink(sgid);
	unlink(fcap);
	unlink(plain);
	rmdir(sec_dir);

	for (i = 0; i < ARRAY_SIZE(names); i++) {
		if (i == 1 && skip_fcap)
			ksft_test_result_skip("%s: %s\n", names[i], skip_fcap);
		else if (ret[i] == KSFT_SKIP)
			ksft_test_result_skip("%s: AT_SECURE not set (nosuid /tmp?)\n", names[i]);
		else
			ksft_test_result(ret[i] == KSFT_PASS, "%s\n", names[i]);
	}
}

/*
 * The exec'd program of the security tests. "secure": the exec gained
 * privileges; KSM must be off with nothing mergeable, stack included, and
 * the mm not registered. "plain": no privilege gained; KSM stays on.
 */
static int helper_main(const char *mode)
{
	bool secure = !strcmp(mode, "secure");
	unsigned long at_secure = getauxval(AT_SECURE);
	struct ksm_state st;
	bool ok = true;

	page_size = sysconf(_SC_PAGESIZE);
	stats = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	if (stats == MAP_FAILED)
		return KSFT_FAIL;
	if (secure && !at_secure) {
		ksft_print_msg("exec did not set AT_SECURE: privileges not gained\n");
		return KSFT_SKIP;
	}
	if (!secure && !expect(!at_secure, "plain exec set AT_SECURE"))
		return KSFT_FAIL;
	/*
	 * A secure exec makes the process non-dumpable, which hands its /proc
	 * files to root; read access to our own ksm_stat needs them back.
	 */
	prctl(PR_SET_DUMPABLE, 1UL, 0UL, 0UL, 0UL);

	ok &= consistent(0, secure ? 0 : 1, secure ? "after secure exec" : "after plain exec");
	if (read_state(0, &st))
		return KSFT_FAIL;
	if (secure) {
		ok &= expect(st.get == 0, "PR_GET_MEMORY_MERGE %d after secure exec", st.get);
		ok &= expect(!st.compat_mg && !st.other_mg && !st.stack_mg,
			     "%d VMAs mg after secure exec", st.compat_mg + st.other_mg);
		ok &= expect(!strcmp(st.type, "none") && !st.any && !st.mergeable,
			     "ksm_stat after secure exec: type %s, any %d, mergeable %d",
			     st.type, st.any, st.mergeable);
	} else {
		ok &= expect(st.get == 1, "PR_GET_MEMORY_MERGE %d after plain exec", st.get);
		ok &= expect(st.stack_mg, "[stack] not mg after plain exec");
		ok &= expect(!strcmp(st.type, "process"), "ksm_merge_type %s after plain exec",
			     st.type);
	}
	return ok ? KSFT_PASS : KSFT_FAIL;
}

/* ------------------------------------------------------------------ */
/* main                                                               */
/* ------------------------------------------------------------------ */

static void (* const tests[])(void) = {
	test_fatal_signal, test_nonfatal_signal, test_memcg, test_privileged_exec,
};

int main(int argc, char **argv)
{
	double start = now_sec();
	size_t i;

	if (argc == 3 && !strcmp(argv[1], HELPER_ARG))
		return helper_main(argv[2]);

	parse_opts(argc, argv, &opts);
	setvbuf(stdout, NULL, _IOLBF, 0);
	page_size = sysconf(_SC_PAGESIZE);
	area_pages = opts.s * (1 << 20) / page_size;
	end_time = start + opts.seconds;
	ksft_print_header();

	skip_unless_per_process_ksm();
	if (access("/proc/kpageflags", R_OK))
		ksft_exit_skip("no /proc/kpageflags (CONFIG_PROC_PAGE_MONITOR)\n");
	if (area_pages < 1024)
		opts_usage(&opts, argv[0]);

	stats = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	if (stats == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	if (!pattern_init(AREA_KINDS))
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	{
		struct ksm_state st;

		if (read_state(0, &st))
			ksft_exit_skip("ksm_stat lacks the per-process KSM lines\n");
	}

	ksft_set_plan(2 + MEMCG_TESTS + 3);
	cleanup_at_exit(cg_cleanup);

	for (i = 0; i < ARRAY_SIZE(tests); i++) {
		double t = now_sec();

		tests[i]();
		ksft_print_msg("%.0f s\n", now_sec() - t);
	}
	knobs_restore();

	ksft_print_msg("ran %.0f s\n", now_sec() - start);
	print_stats("operations", stats->operations, "processes", stats->processes,
		    "pages_verified", stats->pages_verified, "signals_sent", stats->signals_sent,
		    "mismatches", stats->mismatches, NULL);
	ksft_finished();
}
