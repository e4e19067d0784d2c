// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection stress for per-process KSM.
 *
 * Drives the operations of a KSM-enabled process through every allocation
 * failure point, one at a time, with /proc/thread-self/fail-nth: writing N
 * there makes the N-th fault-injection check of the calling task (failslab or
 * fail_page_alloc) fail. For N = 1, 2, ... each operation is run afresh until
 * it completes without the N-th check being reached: then every failure
 * point of that path has been visited once.
 *
 *   enable   prctl(PR_SET_MEMORY_MERGE, 1), also after MADV_MERGEABLE;
 *   disable  prctl(PR_SET_MEMORY_MERGE, 0) with merged pages to unmerge;
 *   fork     of an enabled process with merged pages;
 *   exec     of an enabled process (execve of a copy of this program).
 *
 * Each call must either succeed or fail with a documented error, and then
 * PR_GET_MEMORY_MERGE, the "mg" flags in smaps and /proc/<pid>/ksm_stat
 * must agree, and the process's data must be intact. At the end kmemleak
 * (when booted with kmemleak=on) must report nothing.
 *
 * Fired or not: the kernel counts fail-nth down at every check and fails
 * the one that brings it to 0, so reading it back after the call gives 0
 * when the fault was injected and the remaining count when it was not.
 *
 * exec runs in a child traced by the worker: a successful execve() stops at
 * PTRACE_EVENT_EXEC, where fail-nth is read and disarmed and the new mm is
 * checked from outside before the new program (the same binary, copied to
 * /tmp with its ELF interpreter, so that 9p is not under injection) checks
 * itself. A failure after exec's point of no return kills the child: that
 * is documented behaviour. A new program with an unusable stack is a bug
 * (one the 6.1 base tree had, fixed by the series): see exec_stack_bug().
 *
 * Statistics ("# stat KEY VALUE"): operations = injected calls, processes =
 * forks, pages_verified, faults_injected = calls in which the fault fired,
 * mismatches = changed pages plus failed consistency checks.
 *
 * The program sets the fault-injection and ksmd knobs it needs and restores
 * them on exit. Needs root and a kernel with FAULT_INJECTION, FAILSLAB,
 * FAIL_PAGE_ALLOC and FAULT_INJECTION_DEBUG_FS; skips otherwise.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/param.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "kselftest.h"
#include "ksm_state.h"

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#endif
#ifndef PR_GET_MEMORY_MERGE
#define PR_GET_MEMORY_MERGE 68
#endif

#define KSM_SYSFS "/sys/kernel/mm/ksm/"
#define DEBUGFS "/sys/kernel/debug/"
#define KMEMLEAK DEBUGFS "kmemleak"
#define FAIL_NTH "/proc/thread-self/fail-nth"
#define KPF_KSM 21

/* Argument that makes this program the exec target of the exec test. */
#define EXEC_CHECK_ARG "--ksm-faults-exec-check"

/* Merged area of every worker: AREA_KINDS distinct pages, many copies each. */
#define AREA_PAGES 32
#define AREA_KINDS 4
#define MERGE_TIMEOUT_SEC 90

#define DEFAULT_SECONDS 150
/* What the kmemleak check at the end takes, out of the -d bound. */
#define KMEMLEAK_SECONDS 30
#define DEFAULT_MAX_NTH 400

/* Exit codes of the processes that run one injected operation. */
enum {
	OP_OK_NOT_FIRED = 0,	/* consistent, the N-th check was not reached */
	OP_OK_FIRED = 1,	/* consistent, a fault was injected */
	OP_BAD = 2,		/* a check failed (explained on stdout) */
	OP_EXEC_FAILED = 3,	/* execve() returned a documented error, consistent */
};

static size_t page_size;
static char *templates;		/* AREA_KINDS reference pages */

/*
 * Counters shared by every process of the run, and the state of the current
 * fail-nth loop, which may run in a worker process (a MAP_SHARED page).
 */
struct stats {
	long operations;
	long processes;
	long pages_verified;
	long faults_injected;
	long mismatches;
};

/* One operation driven through fail-nth 1, 2, ... */
struct nth_loop {
	const char *name;
	unsigned int n;		/* last value tried */
	bool covered;		/* reached a run in which nothing was injected */
	int bad;		/* runs in which a check failed */
	int exec_errors;	/* exec: runs in which execve() returned an error */
	int exec_killed;	/* exec: runs killed after the point of no return */
	int exec_stack_bug;	/* exec: runs that hit the 6.1 stack VMA bug */
	int exec_errno;		/* exec: errno of the last failed execve() */
	int exec_errno_runs[256];	/* exec: failed runs per errno */
};

static struct shared {
	struct stats stats;
	struct nth_loop loop;
} *shared;
static struct stats *stats;

static void stat_add(long *counter, long val)
{
	__atomic_fetch_add(counter, val, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ */
/* Small helpers                                                      */
/* ------------------------------------------------------------------ */

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Leaves a forked process without running the parent's atexit hooks. */
static void child_exit(int code)
{
	fflush(stdout);
	_exit(code);
}

static int read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n, len = strlen(val);

	if (fd < 0)
		return -1;
	n = write(fd, val, len);
	if (close(fd) || n != len)
		return -1;
	return 0;
}

/*
 * Knobs this program changes, saved before the first change and restored
 * at exit by the process that saved them.
 */
struct knob {
	const char *path;
	char saved[64];
	bool have;
};

static struct knob knobs[] = {
	{ .path = KSM_SYSFS "run" },
	{ .path = KSM_SYSFS "sleep_millisecs" },
	{ .path = KSM_SYSFS "pages_to_scan" },
	{ .path = DEBUGFS "failslab/ignore-gfp-wait" },
	{ .path = DEBUGFS "failslab/verbose" },
	{ .path = DEBUGFS "fail_page_alloc/ignore-gfp-wait" },
	{ .path = DEBUGFS "fail_page_alloc/ignore-gfp-highmem" },
	{ .path = DEBUGFS "fail_page_alloc/min-order" },
	{ .path = DEBUGFS "fail_page_alloc/verbose" },
};

static pid_t knob_owner;

static struct knob *knob_find(const char *path)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(knobs); i++)
		if (!strcmp(knobs[i].path, path))
			return &knobs[i];
	return NULL;
}

static void knobs_save(void)
{
	size_t i;

	knob_owner = getpid();
	for (i = 0; i < ARRAY_SIZE(knobs); i++)
		knobs[i].have = !read_file(knobs[i].path, knobs[i].saved,
					   sizeof(knobs[i].saved));
}

static void knobs_restore(void)
{
	size_t i;

	if (knob_owner != getpid())
		return;
	/* Fault injection first: it must be off before ksmd is touched. */
	for (i = ARRAY_SIZE(knobs); i-- > 0;)
		if (knobs[i].have)
			write_file(knobs[i].path, knobs[i].saved);
}

static bool knob_set(const char *path, const char *val)
{
	struct knob *k = knob_find(path);

	return expect(k && k->have && !write_file(path, val), "cannot write %s to %s: %m",
		      val, path);
}

/* ksmd merging fast, for the tests that need merged pages. */
static bool ksmd_fast(void)
{
	return knob_set(KSM_SYSFS "sleep_millisecs", "0") &&
	       knob_set(KSM_SYSFS "pages_to_scan", "5000") &&
	       knob_set(KSM_SYSFS "run", "1");
}

/*
 * Fault-injection filters: by default failslab and fail_page_alloc skip
 * every allocation that may sleep, fail_page_alloc also highmem (user page)
 * and order-0 allocations, which would leave almost nothing to inject into.
 * verbose=0: a stack trace per injected fault would fail the splat check.
 */
static bool fault_knobs_set(void)
{
	return knob_set(DEBUGFS "failslab/verbose", "0") &&
	       knob_set(DEBUGFS "fail_page_alloc/verbose", "0") &&
	       knob_set(DEBUGFS "failslab/ignore-gfp-wait", "N") &&
	       knob_set(DEBUGFS "fail_page_alloc/ignore-gfp-wait", "N") &&
	       knob_set(DEBUGFS "fail_page_alloc/ignore-gfp-highmem", "N") &&
	       knob_set(DEBUGFS "fail_page_alloc/min-order", "0");
}

/* ------------------------------------------------------------------ */
/* fail-nth                                                           */
/* ------------------------------------------------------------------ */

/* Opens fail-nth of the calling thread: each process needs its own. */
static int fail_nth_open(void)
{
	int fd = open(FAIL_NTH, O_RDWR | O_CLOEXEC);

	expect(fd >= 0, "open %s: %m", FAIL_NTH);
	return fd;
}

/*
 * Formats @n for fail_nth_arm() beforehand, so that nothing but the write
 * itself runs between arming and the operation under test.
 */
static int fail_nth_format(char *buf, size_t size, unsigned int n)
{
	return snprintf(buf, size, "%u", n);
}

static bool fail_nth_arm(int fd, const char *buf, int len)
{
	return pwrite(fd, buf, len, 0) == len;
}

/*
 * Reads fail-nth back after the operation and disarms it. Returns 1 if the
 * fault was injected (count at 0), 0 if not, -1 on error.
 */
static int fail_nth_fired(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	unsigned long left;

	if (pwrite(fd, "0", 1, 0) != 1 || n <= 0)
		return -1;
	buf[n] = '\0';
	left = strtoul(buf, NULL, 10);
	if (!left)
		stat_add(&stats->faults_injected, 1);
	return !left;
}

/* The same for another (stopped) task, through /proc/<pid>/fail-nth. */
static int fail_nth_fired_pid(pid_t pid)
{
	char path[64];
	int fd, ret;

	snprintf(path, sizeof(path), "/proc/%d/fail-nth", pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ret = fail_nth_fired(fd);
	close(fd);
	return ret;
}

/* ------------------------------------------------------------------ */
/* State of a process: PR_GET_MEMORY_MERGE, ksm_stat, smaps           */
/* ------------------------------------------------------------------ */

static int read_smaps(pid_t pid, struct ksm_state *st)
{
	char path[64], line[1024];
	unsigned long start = 0;
	bool skip = false;
	FILE *f;

	proc_path(path, sizeof(path), pid, "smaps");
	f = fopen(path, "re");
	if (!f)
		return expect(false, "open %s: %m", path) - 1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char perms[5];
		bool mg;

		if (sscanf(line, "%lx-%lx %4s", &s, &e, perms) == 3) {
			start = s;
			/* The gate area is shown but is no VMA of the mm. */
			skip = strstr(line, "[vsyscall]");
			continue;
		}
		if (strncmp(line, "VmFlags:", 8) || skip)
			continue;
		mg = flag_listed(line + 8, "mg");
		st->vmas++;
		if (flags_compatible(line + 8)) {
			st->compat++;
			st->compat_mg += mg;
			if (!mg && !st->first_unmarked)
				st->first_unmarked = start;
		} else {
			st->other_mg += mg;
		}
	}
	fclose(f);
	return 0;
}

static int read_state(pid_t pid, struct ksm_state *st)
{
	memset(st, 0, sizeof(*st));
	st->get = pid ? -1 : prctl(PR_GET_MEMORY_MERGE, 0UL, 0UL, 0UL, 0UL);
	if (!pid && st->get < 0)
		return expect(false, "PR_GET_MEMORY_MERGE: %m") - 1;
	if (read_ksm_stat(pid, st) || read_smaps(pid, st))
		return -1;
	return 0;
}

/*
 * Checks that what the process says about itself agrees: PR_GET_MEMORY_MERGE
 * (@pid 0 only), ksm_stat's merge type and yes/no lines, and the mg flags.
 * @want: 1 enabled, 0 not enabled, -1 either; @madvised: the process used
 * MADV_MERGEABLE, so mg may remain on some VMAs while it is not enabled.
 */
static bool state_consistent(pid_t pid, int want, bool madvised, const char *what)
{
	const char *type;
	struct ksm_state st;
	bool ok = true;

	if (read_state(pid, &st)) {
		stat_add(&stats->mismatches, 1);
		return false;
	}
	if (st.get >= 0)
		ok &= expect(st.get == st.any, "%s: PR_GET_MEMORY_MERGE %d, ksm_merge_any %s",
			     what, st.get, st.any ? "yes" : "no");
	type = st.any ? "process" : st.mergeable ? "madvise" : "none";
	ok &= expect(!strcmp(st.type, type), "%s: ksm_merge_type %s, expected %s", what,
		     st.type, type);
	ok &= expect(!st.other_mg, "%s: %d incompatible VMAs are mg", what, st.other_mg);
	if (st.any) {
		ok &= expect(st.mergeable, "%s: enabled but ksm_mergeable no", what);
		ok &= expect(st.compat_mg == st.compat,
			     "%s: enabled, %d of %d compatible VMAs mg (first without at %lx)",
			     what, st.compat_mg, st.compat, st.first_unmarked);
	} else if (!madvised) {
		ok &= expect(!st.compat_mg, "%s: not enabled, never madvised, %d VMAs mg",
			     what, st.compat_mg);
	}
	if (want >= 0)
		ok &= expect(st.any == want, "%s: %s, expected %s", what,
			     st.any ? "enabled" : "not enabled",
			     want ? "enabled" : "not enabled");
	if (!ok)
		stat_add(&stats->mismatches, 1);
	return ok;
}

/* Number of VMAs in [@start, @start + @len) of this process with mg. */
static int range_mg(const void *start, size_t len, int *vmas)
{
	unsigned long lo = (uintptr_t)start, hi = lo + len;
	FILE *f = fopen("/proc/self/smaps", "re");
	bool in = false;
	char line[1024];
	int mg = 0;

	*vmas = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char perms[5];

		if (sscanf(line, "%lx-%lx %4s", &s, &e, perms) == 3) {
			in = s < hi && e > lo;
			continue;
		}
		if (in && !strncmp(line, "VmFlags:", 8)) {
			(*vmas)++;
			mg += flag_listed(line + 8, "mg");
		}
	}
	fclose(f);
	return mg;
}

/* ------------------------------------------------------------------ */
/* Data: pages with many duplicates, verified page by page            */
/* ------------------------------------------------------------------ */

static void templates_init(void)
{
	size_t k, w, words = page_size / sizeof(uint64_t);

	templates = mmap(NULL, AREA_KINDS * page_size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (templates == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	for (k = 0; k < AREA_KINDS; k++) {
		uint64_t *p = (uint64_t *)(templates + k * page_size);

		for (w = 0; w < words; w++)
			p[w] = (k + 1) * 0x9e3779b97f4a7c15ULL ^ (w * 0x100000001b3ULL);
	}
}

static char *area_map(void)
{
	char *area = mmap(NULL, AREA_PAGES * page_size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t i;

	if (area == MAP_FAILED) {
		expect(false, "mmap: %m");
		return NULL;
	}
	for (i = 0; i < AREA_PAGES; i++)
		memcpy(area + i * page_size, templates + (i % AREA_KINDS) * page_size,
		       page_size);
	return area;
}

/* Compares every page of the area with what was written there. */
static bool area_verify(const char *area, const char *what)
{
	int bad = 0;
	size_t i;

	for (i = 0; i < AREA_PAGES; i++)
		if (memcmp(area + i * page_size, templates + (i % AREA_KINDS) * page_size,
			   page_size))
			bad++;
	stat_add(&stats->pages_verified, AREA_PAGES);
	stat_add(&stats->mismatches, bad);
	return expect(!bad, "%s: %d of %d pages changed", what, bad, AREA_PAGES);
}

/* Number of pages of the area that are mapped to a KSM page. */
static int area_ksm_pages(const char *area)
{
	uint64_t ents[AREA_PAGES], flags, last_pfn = 0;
	int pm, kpf, nr = 0;
	bool last_ksm = false;
	size_t i;

	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	kpf = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
	if (pm < 0 || kpf < 0 ||
	    pread(pm, ents, sizeof(ents), (uintptr_t)area / page_size * 8) != sizeof(ents)) {
		expect(false, "pagemap/kpageflags: %m");
		nr = -1;
		goto out;
	}
	for (i = 0; i < AREA_PAGES; i++) {
		uint64_t pfn = ents[i] & ((1ULL << 55) - 1);

		if (!(ents[i] >> 63) || !pfn)
			continue;
		/* Merged pages share a few PFNs: look each one up once. */
		if (pfn != last_pfn) {
			if (pread(kpf, &flags, 8, pfn * 8) != 8)
				continue;
			last_pfn = pfn;
			last_ksm = flags >> KPF_KSM & 1;
		}
		nr += last_ksm;
	}
out:
	if (pm >= 0)
		close(pm);
	if (kpf >= 0)
		close(kpf);
	return nr;
}

static bool area_wait_merged(const char *area, const char *what)
{
	double deadline = now_sec() + MERGE_TIMEOUT_SEC;
	int nr;

	do {
		nr = area_ksm_pages(area);
		if (nr == AREA_PAGES)
			return true;
		usleep(20000);
	} while (nr >= 0 && now_sec() < deadline);
	return expect(false, "%s: %d of %d pages merged after %d s", what, nr, AREA_PAGES,
		      MERGE_TIMEOUT_SEC);
}

static long merge_set(unsigned long on)
{
	return prctl(PR_SET_MEMORY_MERGE, on, 0UL, 0UL, 0UL);
}

/* Writes to every page of the stack below us, so that the operation under
 * injection does not take copy-on-write faults of its own on the stack.
 */
static void __attribute__((noinline)) stack_prefault(void)
{
	volatile char buf[64 * 1024];
	size_t i;

	for (i = 0; i < sizeof(buf); i += 256)
		buf[i] = 0;
}

static int wait_exit_code(pid_t pid, const char *what)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return expect(false, "%s: waitpid: %m"), OP_BAD;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	expect(false, "%s: process killed by signal %d", what, WTERMSIG(status));
	return OP_BAD;
}

/* ------------------------------------------------------------------ */
/* Bounds                                                             */
/* ------------------------------------------------------------------ */

static unsigned int max_nth = DEFAULT_MAX_NTH;
static double test_deadline;

/* Next fail-nth value? Whatever the time bound, the first one always runs. */
static bool nth_continue(struct nth_loop *l)
{
	return !l->covered && l->n < max_nth && (!l->n || now_sec() < test_deadline);
}

/* One result line for the loop, plus how far it got. */
static void nth_report(struct nth_loop *l)
{
	if (l->covered)
		ksft_print_msg("%s: all %u failure points visited\n", l->name, l->n - 1);
	else
		ksft_print_msg("%s: stopped by the %s bound after %u failure points\n", l->name,
			       l->n >= max_nth ? "-i" : "-d", l->n);
	ksft_test_result(!l->bad, "%s: every failure point fails cleanly and leaves a "
			 "consistent process\n", l->name);
}

/* Applies the exit code of one injected run to the loop. */
static void nth_account(struct nth_loop *l, int code)
{
	stat_add(&stats->operations, 1);
	if (code == OP_OK_NOT_FIRED)
		l->covered = true;
	else if (code != OP_OK_FIRED && code != OP_EXEC_FAILED)
		l->bad++;
}

static pid_t fork_counted(void)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid > 0)
		stat_add(&stats->processes, 1);
	return pid;
}

/* ------------------------------------------------------------------ */
/* enable                                                             */
/* ------------------------------------------------------------------ */

/* In a fresh child of the never-enabled main process: enable with fail-nth @n. */
static int enable_once(unsigned int n, bool madvised)
{
	char *area = area_map();
	char nbuf[16];
	int fd, len, fired, err, vmas, mg;
	long ret;
	bool ok = true;

	fd = fail_nth_open();
	if (!area || fd < 0)
		return OP_BAD;
	if (madvised && madvise(area, AREA_PAGES * page_size, MADV_MERGEABLE))
		return expect(false, "madvise: %m"), OP_BAD;
	if (!state_consistent(0, 0, madvised, "before enable"))
		return OP_BAD;
	len = fail_nth_format(nbuf, sizeof(nbuf), n);
	stack_prefault();

	if (!fail_nth_arm(fd, nbuf, len))
		return expect(false, "arm fail-nth: %m"), OP_BAD;
	ret = merge_set(1);
	err = errno;
	fired = fail_nth_fired(fd);

	if (fired < 0)
		return expect(false, "read fail-nth: %m"), OP_BAD;
	if (ret) {
		/* A failed enable leaves everything as it was. */
		ok &= expect(ret == -1 && err == ENOMEM, "enable, fail-nth %u: %ld, %s", n,
			     ret, strerror(err));
		ok &= expect(fired, "enable failed, fail-nth %u not reached", n);
		ok &= state_consistent(0, 0, madvised, "after failed enable");
		if (madvised) {
			mg = range_mg(area, AREA_PAGES * page_size, &vmas);
			ok &= expect(vmas > 0 && mg == vmas,
				     "failed enable dropped mg from the madvised area");
		}
	} else {
		ok &= state_consistent(0, 1, madvised, "after enable");
	}
	ok &= area_verify(area, "after enable");
	if (!ok)
		return OP_BAD;
	return fired ? OP_OK_FIRED : OP_OK_NOT_FIRED;
}

/* Starts a loop in the shared page, where a worker process can update it. */
static struct nth_loop *nth_start(const char *name)
{
	struct nth_loop *l = &shared->loop;

	memset(l, 0, sizeof(*l));
	l->name = name;
	return l;
}

static void test_enable(bool madvised)
{
	struct nth_loop *l = nth_start(madvised ? "enable after MADV_MERGEABLE" : "enable");
	pid_t pid;

	while (nth_continue(l)) {
		l->n++;
		pid = fork_counted();
		if (pid < 0) {
			l->bad++;
			break;
		}
		if (!pid)
			child_exit(enable_once(l->n, madvised));
		nth_account(l, wait_exit_code(pid, l->name));
	}
	nth_report(l);
}

/* ------------------------------------------------------------------ */
/* disable                                                            */
/* ------------------------------------------------------------------ */

/*
 * One enabled worker with a merged area disables with fail-nth 1, 2, ...:
 * a failed disable leaves the process enabled, so the next round only
 * waits until ksmd has merged the pages that were unmerged again.
 */
static int disable_worker(struct nth_loop *l)
{
	char *area = area_map();
	char nbuf[16], what[64];
	int fd = fail_nth_open(), len, fired, err;
	long ret;
	bool ok;

	if (!area || fd < 0)
		return OP_BAD;
	while (nth_continue(l)) {
		l->n++;
		snprintf(what, sizeof(what), "disable, fail-nth %u", l->n);
		if (!prctl(PR_GET_MEMORY_MERGE, 0UL, 0UL, 0UL, 0UL) && merge_set(1))
			return expect(false, "enable: %m"), OP_BAD;
		if (!area_wait_merged(area, what))
			return OP_BAD;
		len = fail_nth_format(nbuf, sizeof(nbuf), l->n);
		stack_prefault();

		if (!fail_nth_arm(fd, nbuf, len))
			return expect(false, "arm fail-nth: %m"), OP_BAD;
		ret = merge_set(0);
		err = errno;
		fired = fail_nth_fired(fd);

		ok = expect(fired >= 0, "read fail-nth: %m");
		if (ret) {
			/* Unmerging ran out of memory: still enabled and consistent. */
			ok &= expect(ret == -1 && err == ENOMEM, "%s: %ld, %s", what, ret,
				     strerror(err));
			ok &= expect(fired == 1, "%s: failed, nothing injected", what);
			ok &= state_consistent(0, 1, false, what);
		} else {
			ok &= state_consistent(0, 0, false, what);
		}
		ok &= area_verify(area, what);
		nth_account(l, ok ? (fired ? OP_OK_FIRED : OP_OK_NOT_FIRED) : OP_BAD);
		if (!ok)
			return OP_BAD;
	}
	return l->covered ? OP_OK_NOT_FIRED : OP_OK_FIRED;
}

/* Runs @fn(@l) in a worker process, which may enable KSM for itself. */
static void run_worker(struct nth_loop *l, int (*fn)(struct nth_loop *))
{
	pid_t pid = fork_counted();

	if (!pid) {
		/* A hung worker must not hang the run: kill it well after the bound. */
		alarm((unsigned int)(test_deadline - now_sec()) + 300);
		child_exit(fn(l));
	}
	if (pid < 0 || wait_exit_code(pid, l->name) == OP_BAD)
		l->bad++;
	nth_report(l);
}

static void test_disable(void)
{
	struct nth_loop *l = nth_start("disable (unmerge)");

	if (!ksmd_fast()) {
		ksft_test_result_fail("%s: cannot start ksmd\n", l->name);
		return;
	}
	run_worker(l, disable_worker);
}

/* ------------------------------------------------------------------ */
/* fork                                                               */
/* ------------------------------------------------------------------ */

/*
 * fork() without glibc's bookkeeping around the system call, so that the
 * window between arming fail-nth and the kernel is as short as it gets.
 * The child must not rely on glibc's cached thread id (no raise()).
 */
static pid_t raw_fork(void)
{
	return syscall(SYS_clone, SIGCHLD, 0UL, NULL, NULL, 0UL);
}

/* The child of an injected fork: inherits the setting and the data. */
static int fork_child_check(const char *area)
{
	bool ok = state_consistent(0, 1, false, "forked child");

	ok &= area_verify(area, "forked child");
	return ok ? OP_OK_NOT_FIRED : OP_BAD;
}

static int fork_worker(struct nth_loop *l)
{
	char *area = area_map();
	char nbuf[16], what[64];
	int fd = fail_nth_open(), len, fired, err, code;
	pid_t pid;
	bool ok;

	if (!area || fd < 0)
		return OP_BAD;
	/* Fork copies the page tables of merged pages too. */
	if (merge_set(1) || !area_wait_merged(area, "fork worker"))
		return expect(false, "enable and merge failed"), OP_BAD;
	while (nth_continue(l)) {
		l->n++;
		snprintf(what, sizeof(what), "fork, fail-nth %u", l->n);
		len = fail_nth_format(nbuf, sizeof(nbuf), l->n);
		fflush(stdout);
		stack_prefault();

		if (!fail_nth_arm(fd, nbuf, len))
			return expect(false, "arm fail-nth: %m"), OP_BAD;
		pid = raw_fork();
		err = errno;
		if (!pid)
			child_exit(fork_child_check(area));	/* fail-nth is per task: 0 here */
		fired = fail_nth_fired(fd);

		ok = expect(fired >= 0, "read fail-nth: %m");
		if (pid < 0) {
			ok &= expect(err == ENOMEM || err == EAGAIN, "%s: %s", what, strerror(err));
			ok &= expect(fired == 1, "%s: failed, nothing injected", what);
		} else {
			stat_add(&stats->processes, 1);
			code = wait_exit_code(pid, what);
			ok &= expect(code == OP_OK_NOT_FIRED, "%s: child inconsistent", what);
		}
		/* The parent is unchanged whatever happened to the child. */
		ok &= state_consistent(0, 1, false, what);
		ok &= area_verify(area, what);
		nth_account(l, ok ? (fired ? OP_OK_FIRED : OP_OK_NOT_FIRED) : OP_BAD);
		if (!ok)
			return OP_BAD;
	}
	return OP_OK_NOT_FIRED;
}

static void test_fork(void)
{
	run_worker(nth_start("fork"), fork_worker);
}

/* ------------------------------------------------------------------ */
/* exec                                                               */
/* ------------------------------------------------------------------ */

/* Short: the interpreter path must fit where PT_INTERP had its own. */
static char exec_dir[] = "/tmp/kf.XXXXXX";
static char exec_path[PATH_MAX];
static bool interp_copied;

/* Copies @src to @dst (mode @mode); returns the content in *@data if asked. */
static bool copy_file(const char *src, const char *dst, mode_t mode, char **data,
		      size_t *size)
{
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1;
	size_t len = 0, cap = 1 << 20;
	char *buf = malloc(cap);
	bool ok = false;
	ssize_t n;

	if (in < 0 || !buf)
		goto out;
	while ((n = read(in, buf + len, cap - len)) > 0) {
		len += n;
		if (len == cap) {
			char *p = realloc(buf, cap *= 2);

			if (!p)
				goto out;
			buf = p;
		}
	}
	if (n < 0)
		goto out;
	if (data) {
		*data = buf;
		*size = len;
		return true;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	ok = out >= 0 && write(out, buf, len) == (ssize_t)len && !fchmod(out, mode);
out:
	if (out >= 0 && close(out))
		ok = false;
	if (in >= 0)
		close(in);
	free(buf);
	return ok;
}

/*
 * The exec target: a copy of this program in /tmp (tmpfs), not on the 9p
 * root the guest runs from, so that fail-nth hits exec and not 9p. The
 * kernel also opens the ELF interpreter during execve(): copy it to /tmp
 * as well and point PT_INTERP of the copy there when the new path fits.
 */
static bool exec_target_setup(void)
{
	char interp[PATH_MAX];
	Elf64_Ehdr *eh;
	Elf64_Phdr *ph;
	size_t size, i;
	char *elf;
	int fd;

	if (!mkdtemp(exec_dir))
		return expect(false, "mkdtemp: %m");
	snprintf(exec_path, sizeof(exec_path), "%s/exe", exec_dir);
	if (!copy_file("/proc/self/exe", NULL, 0, &elf, &size))
		return expect(false, "read /proc/self/exe: %m");
	eh = (Elf64_Ehdr *)elf;
	for (i = 0; size >= sizeof(*eh) && i < eh->e_phnum; i++) {
		ph = (Elf64_Phdr *)(elf + eh->e_phoff + i * eh->e_phentsize);
		if ((char *)(ph + 1) > elf + size || ph->p_type != PT_INTERP ||
		    ph->p_offset + ph->p_filesz > size)
			continue;
		snprintf(interp, sizeof(interp), "%s/ld.so", exec_dir);
		if (strlen(interp) + 1 > ph->p_filesz ||
		    !copy_file(elf + ph->p_offset, interp, 0755, NULL, NULL))
			break;
		memset(elf + ph->p_offset, 0, ph->p_filesz);
		memcpy(elf + ph->p_offset, interp, strlen(interp));
		interp_copied = true;
	}
	fd = open(exec_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (fd < 0 || write(fd, elf, size) != (ssize_t)size || close(fd))
		return expect(false, "write %s: %m", exec_path);
	free(elf);
	if (!interp_copied)
		ksft_print_msg("exec: interpreter not copied, exec also opens it on 9p\n");
	return true;
}

static void exec_target_cleanup(void)
{
	char path[PATH_MAX];

	if (!exec_path[0])
		return;
	unlink(exec_path);
	snprintf(path, sizeof(path), "%s/ld.so", exec_dir);
	unlink(path);
	rmdir(exec_dir);
}

/* What execve() may return (execve(2)); anything else is a bug. */
static bool exec_errno_documented(int err)
{
	static const int documented[] = {
		E2BIG, EACCES, EAGAIN, EFAULT, EINVAL, EIO, EISDIR, ELIBBAD, ELOOP,
		EMFILE, ENAMETOOLONG, ENFILE, ENOENT, ENOEXEC, ENOMEM, ENOTDIR, EPERM,
		ETXTBSY,
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(documented); i++)
		if (err == documented[i])
			return true;
	return false;
}

/*
 * The process that execs under fail-nth, traced by the worker so that the
 * worker sees the new program before it runs a single instruction.
 */
static int exec_child(unsigned int n, const char *area)
{
	char *argv[] = { exec_path, EXEC_CHECK_ARG, NULL };
	char nbuf[16], what[64];
	int fd, len, err, fired;
	bool ok;

	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) || kill(getpid(), SIGSTOP))
		return expect(false, "PTRACE_TRACEME: %m"), OP_BAD;
	snprintf(what, sizeof(what), "exec, fail-nth %u", n);
	fd = fail_nth_open();
	if (fd < 0)
		return OP_BAD;
	len = fail_nth_format(nbuf, sizeof(nbuf), n);
	stack_prefault();

	if (!fail_nth_arm(fd, nbuf, len))
		return expect(false, "arm fail-nth: %m"), OP_BAD;
	execve(exec_path, argv, environ);
	err = errno;
	fired = fail_nth_fired(fd);

	/* Failed before the point of no return: the old program goes on. */
	shared->loop.exec_errno = err;
	ok = expect(exec_errno_documented(err), "%s: execve: %s", what, strerror(err));
	ok &= expect(fired == 1, "%s: execve failed (%s), nothing injected", what,
		     strerror(err));
	ok &= state_consistent(0, 1, false, what);
	ok &= area_verify(area, what);
	return ok ? OP_EXEC_FAILED : OP_BAD;
}

/*
 * A bug of the 6.1 base tree, not of KSM, fixed by the first patch of the
 * series: shift_arg_pages() ignored a failed vma_adjust() (the maple tree
 * may fail to allocate), and the new program got a [stack] VMA that spans
 * gigabytes: exec succeeded, but the stack could never grow (its size is
 * over RLIMIT_STACK) and the program died of SIGSEGV at its first push
 * below it. Recognised at the exec stop, after an injected fault, by a
 * [stack] VMA larger than RLIMIT_STACK, which no correct exec produces.
 */
static bool exec_stack_bug(pid_t pid, const char *what)
{
	unsigned long s, e, size = 0;
	char path[64], line[512];
	struct rlimit rl;
	FILE *f;

	if (getrlimit(RLIMIT_STACK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &s, &e) == 2)
			size = e - s;
	if (f)
		fclose(f);
	if (size <= rl.rlim_cur)
		return false;
	ksft_print_msg("%s: [stack] VMA of %lu MiB > RLIMIT_STACK: shift_arg_pages() "
		       "ignored a failed vma_adjust()\n", what, size >> 20);
	return true;
}

/* Prints where a traced process took signal @sig, from siginfo and maps. */
static void explain_signal(pid_t pid, int sig, int fired, const char *what)
{
	struct user_regs_struct regs;
	char path[64], line[512];
	siginfo_t si;
	FILE *f;

	if (ptrace(PTRACE_GETSIGINFO, pid, NULL, &si) ||
	    ptrace(PTRACE_GETREGS, pid, NULL, &regs))
		return;
	ksft_print_msg("%s: new program (fault %s) got signal %d code %d addr %p "
		       "ip %llx sp %llx\n", what, fired ? "injected" : "not injected", sig,
		       si.si_code, si.si_addr, regs.rip, regs.rsp);
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		ksft_print_msg("  %s", line);
	if (f)
		fclose(f);
}

/*
 * Follows the traced exec child to its end. A successful execve() stops it
 * at PTRACE_EVENT_EXEC, before the new program runs: fail-nth tells then
 * whether a fault was injected during execve(), and is disarmed before the
 * dynamic loader runs. The new program then checks itself (EXEC_CHECK_ARG).
 */
static int exec_follow(pid_t pid, unsigned int n, struct nth_loop *l)
{
	int status, fired = -1, sig;
	char what[64];
	bool ok = true;

	snprintf(what, sizeof(what), "exec, fail-nth %u", n);
	for (;;) {
		if (waitpid(pid, &status, 0) != pid)
			return expect(false, "%s: waitpid: %m", what), OP_BAD;
		if (WIFEXITED(status)) {
			if (WEXITSTATUS(status) == OP_EXEC_FAILED) {
				l->exec_errors++;
				if (l->exec_errno > 0 && l->exec_errno < 256)
					l->exec_errno_runs[l->exec_errno]++;
				return OP_EXEC_FAILED;
			}
			if (fired < 0)
				return expect(false, "%s: child exited %d before exec", what,
					      WEXITSTATUS(status)), OP_BAD;
			ok &= expect(WEXITSTATUS(status) == OP_OK_NOT_FIRED,
				     "%s: new program found itself inconsistent", what);
			return !ok ? OP_BAD : fired ? OP_OK_FIRED : OP_OK_NOT_FIRED;
		}
		if (WIFSIGNALED(status)) {
			/*
			 * A failure after the point of no return kills the
			 * process (SIGSEGV, or SIGKILL if one was pending).
			 */
			sig = WTERMSIG(status);
			if (fired < 0 && (sig == SIGSEGV || sig == SIGKILL)) {
				l->exec_killed++;
				stat_add(&stats->faults_injected, 1);
				return OP_OK_FIRED;
			}
			return expect(false, "%s: killed by signal %d", what, sig), OP_BAD;
		}
		if (!WIFSTOPPED(status))
			continue;
		if (status >> 8 == (SIGTRAP | PTRACE_EVENT_EXEC << 8)) {
			fired = fail_nth_fired_pid(pid);
			ok &= expect(fired >= 0, "%s: read fail-nth of %d: %m", what, pid);
			ok &= state_consistent(pid, 1, false, what);
			if (fired == 1 && exec_stack_bug(pid, what)) {
				l->exec_stack_bug++;
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
				return expect(false, "%s: exec succeeded with a broken stack", what),
				       OP_BAD;
			}
			/* Still traced: a crash of the new program gets explained. */
			if (ptrace(PTRACE_CONT, pid, NULL, NULL))
				return expect(false, "PTRACE_CONT: %m"), OP_BAD;
			continue;
		}
		/* The initial SIGSTOP is ours; pass on anything else (SIGSEGV). */
		sig = WSTOPSIG(status);
		if (fired >= 0)
			explain_signal(pid, sig, fired, what);
		if (sig == SIGSTOP && fired < 0 &&
		    ptrace(PTRACE_SETOPTIONS, pid, NULL,
			   PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL) == 0)
			sig = 0;
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig))
			return expect(false, "PTRACE_CONT: %m"), OP_BAD;
	}
}

static int exec_worker(struct nth_loop *l)
{
	char *area = area_map();
	pid_t pid;
	int code;

	if (!area || merge_set(1))
		return expect(false, "exec worker setup: %m"), OP_BAD;
	while (nth_continue(l)) {
		l->n++;
		pid = fork_counted();
		if (pid < 0)
			return expect(false, "fork: %m"), OP_BAD;
		if (!pid)
			child_exit(exec_child(l->n, area));
		code = exec_follow(pid, l->n, l);
		nth_account(l, code);
		if (code == OP_BAD) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return OP_BAD;
		}
	}
	return OP_OK_NOT_FIRED;
}

/*
 * How the exec runs ended, for the log. E2BIG is no surprise: copy_strings()
 * reports a failed page allocation for the arguments as E2BIG.
 */
static void exec_summary(struct nth_loop *l)
{
	char buf[512];
	size_t len = 0;
	int e;

	buf[0] = '\0';
	for (e = 1; e < 256; e++)
		if (l->exec_errno_runs[e] && len < sizeof(buf))
			len += snprintf(buf + len, sizeof(buf) - len, " %s:%d",
					strerrorname_np(e), l->exec_errno_runs[e]);
	ksft_print_msg("exec: execve() failed in %d runs (%s ), %d runs killed after the "
		       "point of no return, %d got a broken stack\n", l->exec_errors,
		       buf, l->exec_killed, l->exec_stack_bug);
}

static void test_exec(void)
{
	struct nth_loop *l = nth_start("exec");

	if (!exec_path[0] && !exec_target_setup()) {
		ksft_test_result_fail("exec: cannot set up the exec target\n");
		return;
	}
	run_worker(l, exec_worker);
	exec_summary(l);
}

/* The new program of the exec test: enabled and consistent from the start. */
static int exec_check_main(void)
{
	page_size = sysconf(_SC_PAGESIZE);
	stats = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	if (stats == MAP_FAILED)
		return OP_BAD;
	return state_consistent(0, 1, false, "new program after exec") ?
	       OP_OK_NOT_FIRED : OP_BAD;
}

/* ------------------------------------------------------------------ */
/* kmemleak                                                           */
/* ------------------------------------------------------------------ */

static bool kmemleak_on;

/*
 * Whether kmemleak runs: "stack=on" (the default) is refused when it does
 * not. Then forget what it suspected before this run: only new leaks count.
 */
static void kmemleak_start(void)
{
	kmemleak_on = !write_file(KMEMLEAK, "stack=on") && !write_file(KMEMLEAK, "clear");
}

static void test_kmemleak(void)
{
	char buf[4096];
	ssize_t n;
	int fd;

	if (!kmemleak_on) {
		ksft_test_result_skip("kmemleak: not enabled (boot with kmemleak=on)\n");
		return;
	}
	/*
	 * An object is only reported once it is older than 5 s and was found
	 * unreferenced with an unchanged checksum: wait, then scan twice.
	 */
	sleep(6);
	if (write_file(KMEMLEAK, "scan") || write_file(KMEMLEAK, "scan")) {
		ksft_test_result_fail("kmemleak: scan: %s\n", strerror(errno));
		return;
	}
	fd = open(KMEMLEAK, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n < 0) {
		ksft_test_result_fail("kmemleak: read: %s\n", strerror(errno));
		return;
	}
	buf[n] = '\0';
	if (n) {
		char *line = strtok(buf, "\n");

		for (; line; line = strtok(NULL, "\n"))
			ksft_print_msg("%s\n", line);
	}
	ksft_test_result(n == 0, "kmemleak: no leak after the fault injection runs\n");
}

/* ------------------------------------------------------------------ */
/* main                                                               */
/* ------------------------------------------------------------------ */

static void cleanup(void)
{
	if (knob_owner != getpid())
		return;
	knobs_restore();
	exec_target_cleanup();
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-d SECONDS] [-i MAX_FAIL_NTH]\n"
		"  -d  time bound for the whole run (default %d)\n"
		"  -i  largest fail-nth value per operation (default %d)\n",
		prog, DEFAULT_SECONDS, DEFAULT_MAX_NTH);
	exit(KSFT_FAIL);
}

typedef void (*test_fn)(void);

static void run_enable(void) { test_enable(false); }
static void run_enable_madvised(void) { test_enable(true); }

static const test_fn tests[] = {
	run_enable, run_enable_madvised, test_disable, test_fork, test_exec,
};

int main(int argc, char **argv)
{
	double seconds = DEFAULT_SECONDS, start = now_sec(), end, start_kmemleak;
	size_t i;
	int opt;

	if (argc == 2 && !strcmp(argv[1], EXEC_CHECK_ARG))
		return exec_check_main();

	while ((opt = getopt(argc, argv, "d:i:h")) != -1) {
		switch (opt) {
		case 'd':
			seconds = atof(optarg);
			break;
		case 'i':
			max_nth = strtoul(optarg, NULL, 0);
			break;
		default:
			usage(argv[0]);
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	page_size = sysconf(_SC_PAGESIZE);
	ksft_print_header();

	if (geteuid())
		ksft_exit_skip("must be run as root\n");
	if (access(KSM_SYSFS "run", W_OK))
		ksft_exit_skip("no KSM (%s)\n", KSM_SYSFS);
	if (prctl(PR_GET_MEMORY_MERGE, 0UL, 0UL, 0UL, 0UL) < 0)
		ksft_exit_skip("PR_GET_MEMORY_MERGE: %s\n", strerror(errno));
	if (access(FAIL_NTH, W_OK))
		ksft_exit_skip("no %s (CONFIG_FAULT_INJECTION)\n", FAIL_NTH);
	if (access(DEBUGFS "failslab", F_OK) || access(DEBUGFS "fail_page_alloc", F_OK))
		ksft_exit_skip("no failslab/fail_page_alloc in debugfs "
			       "(CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC, "
			       "CONFIG_FAULT_INJECTION_DEBUG_FS, debugfs mounted)\n");
	if (access("/proc/kpageflags", R_OK))
		ksft_exit_skip("no /proc/kpageflags (CONFIG_PROC_PAGE_MONITOR)\n");

	shared = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (shared == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	stats = &shared->stats;
	templates_init();

	{
		struct ksm_state st;

		if (read_state(0, &st))
			ksft_exit_skip("ksm_stat lacks the per-process KSM lines\n");
	}

	ksft_set_plan(ARRAY_SIZE(tests) + 1);
	knobs_save();
	atexit(cleanup);
	if (!fault_knobs_set())
		ksft_exit_fail_msg("cannot set the fault-injection knobs\n");
	if (!ksmd_fast())
		ksft_exit_fail_msg("cannot start ksmd\n");
	kmemleak_start();

	/* Leave time for the kmemleak scans at the end. */
	end = start + seconds - (kmemleak_on ? MIN(KMEMLEAK_SECONDS, seconds / 4) : 0);
	for (i = 0; i < ARRAY_SIZE(tests); i++) {
		/* Each test gets an equal share of the time that is left. */
		double t = now_sec();

		test_deadline = t + (end - t) / (ARRAY_SIZE(tests) - i);
		tests[i]();
		ksft_print_msg("%.0f s\n", now_sec() - t);
	}
	knobs_restore();
	start_kmemleak = now_sec();
	test_kmemleak();
	ksft_print_msg("%.0f s\n", now_sec() - start_kmemleak);

	ksft_print_msg("ran %.0f s\n", now_sec() - start);
	printf("# stat operations %ld\n", stats->operations);
	printf("# stat processes %ld\n", stats->processes);
	printf("# stat pages_verified %ld\n", stats->pages_verified);
	printf("# stat faults_injected %ld\n", stats->faults_injected);
	printf("# stat mismatches %ld\n", stats->mismatches);
	ksft_finished();
}
