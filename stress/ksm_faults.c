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
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#include "stress_util.h"

#define KMEMLEAK DEBUGFS "kmemleak"
#define FAIL_NTH "/proc/thread-self/fail-nth"

/* Argument that makes this program the exec target of the exec test. */
#define EXEC_CHECK_ARG "--ksm-faults-exec-check"

/* Merged area of every worker: AREA_KINDS distinct pages, many copies each. */
#define WORKER_AREA_PAGES 32
#define AREA_KINDS 4
#define AREA_MERGE_TIMEOUT_SEC 90

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

/* state_consistent(), counted as a mismatch when it fails. */
static bool consistent(pid_t pid, int want, bool madvised, const char *what)
{
	if (state_consistent(pid, want, madvised, what))
		return true;
	stat_add(&stats->mismatches, 1);
	return false;
}

/* ------------------------------------------------------------------ */
/* Data: pages with many duplicates, verified page by page            */
/* ------------------------------------------------------------------ */

/* Compares every page of the area with what was written there. */
static bool area_verify(const char *area, const char *what)
{
	long bad = pattern_bad_pages(area, WORKER_AREA_PAGES);

	stat_add(&stats->pages_verified, WORKER_AREA_PAGES);
	stat_add(&stats->mismatches, bad);
	return expect(!bad, "%s: %ld of %d pages changed", what, bad, WORKER_AREA_PAGES);
}

static bool area_wait_merged(const char *area, const char *what)
{
	long nr = ksm_wait_pages(area, WORKER_AREA_PAGES, WORKER_AREA_PAGES, 20,
				 AREA_MERGE_TIMEOUT_SEC);

	if (nr < 0)
		expect(false, "pagemap/kpageflags: %m");
	return expect(nr == WORKER_AREA_PAGES, "%s: %ld of %d pages merged after %d s", what, nr,
		      WORKER_AREA_PAGES, AREA_MERGE_TIMEOUT_SEC);
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
		return expect(false, "%s: waitpid: %m", what), OP_BAD;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	expect(false, "%s: process killed by signal %d", what, WTERMSIG(status));
	return OP_BAD;
}

/* ------------------------------------------------------------------ */
/* Bounds                                                             */
/* ------------------------------------------------------------------ */

static struct run_opts opts = {
	.letters = "d:i:h",
	.usage = "[-d SECONDS] [-i MAX_FAIL_NTH]\n"
		 "  -d  time bound for the whole run (default " KSM_XSTR(DEFAULT_SECONDS) ")\n"
		 "  -i  largest fail-nth value per operation (default "
		 KSM_XSTR(DEFAULT_MAX_NTH) ")",
	.seconds = DEFAULT_SECONDS,
	.iterations = DEFAULT_MAX_NTH,		/* the largest fail-nth */
};
static double test_deadline;

/* Next fail-nth value? Whatever the time bound, the first one always runs. */
static bool nth_continue(struct nth_loop *l)
{
	return !l->covered && l->n < opts.iterations && (!l->n || now_sec() < test_deadline);
}

/* One result line for the loop, plus how far it got. */
static void nth_report(struct nth_loop *l)
{
	if (l->covered)
		ksft_print_msg("%s: all %u failure points visited\n", l->name, l->n - 1);
	else
		ksft_print_msg("%s: stopped by the %s bound after %u failure points\n", l->name,
			       l->n >= opts.iterations ? "-i" : "-d", l->n);
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

/* ------------------------------------------------------------------ */
/* enable                                                             */
/* ------------------------------------------------------------------ */

/* In a fresh child of the never-enabled main process: enable with fail-nth @n. */
static int enable_once(unsigned int n, bool madvised)
{
	char *area = pattern_map(WORKER_AREA_PAGES);
	char nbuf[16];
	int fd, len, fired, err, vmas, mg;
	long ret;
	bool ok = true;

	fd = fail_nth_open();
	if (!area || fd < 0)
		return OP_BAD;
	if (madvised && madvise(area, WORKER_AREA_PAGES * page_size, MADV_MERGEABLE))
		return expect(false, "madvise: %m"), OP_BAD;
	if (!consistent(0, 0, madvised, "before enable"))
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
		ok &= consistent(0, 0, madvised, "after failed enable");
		if (madvised) {
			vmas = range_vmas(area, WORKER_AREA_PAGES * page_size, &mg);
			ok &= expect(vmas > 0 && mg == vmas,
				     "failed enable dropped mg from the madvised area");
		}
	} else {
		ok &= consistent(0, 1, madvised, "after enable");
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
		pid = fork_counted(&stats->processes);
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
	char *area = pattern_map(WORKER_AREA_PAGES);
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
			ok &= consistent(0, 1, false, what);
		} else {
			ok &= consistent(0, 0, false, what);
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
	pid_t pid = fork_counted(&stats->processes);

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

	if (!ksmd_fast(5000, 0)) {
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
	bool ok = consistent(0, 1, false, "forked child");

	ok &= area_verify(area, "forked child");
	return ok ? OP_OK_NOT_FIRED : OP_BAD;
}

static int fork_worker(struct nth_loop *l)
{
	char *area = pattern_map(WORKER_AREA_PAGES);
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
		ok &= consistent(0, 1, false, what);
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
	ok &= consistent(0, 1, false, what);
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
			ok &= consistent(pid, 1, false, what);
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
	char *area = pattern_map(WORKER_AREA_PAGES);
	pid_t pid;
	int code;

	if (!area || merge_set(1))
		return expect(false, "exec worker setup: %m"), OP_BAD;
	while (nth_continue(l)) {
		l->n++;
		pid = fork_counted(&stats->processes);
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
	return consistent(0, 1, false, "new program after exec") ?
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

typedef void (*test_fn)(void);

static void run_enable(void) { test_enable(false); }
static void run_enable_madvised(void) { test_enable(true); }

static const test_fn tests[] = {
	run_enable, run_enable_madvised, test_disable, test_fork, test_exec,
};

int main(int argc, char **argv)
{
	double start = now_sec(), end, start_kmemleak;
	size_t i;

	if (argc == 2 && !strcmp(argv[1], EXEC_CHECK_ARG))
		return exec_check_main();

	parse_opts(argc, argv, &opts);
	setvbuf(stdout, NULL, _IOLBF, 0);
	page_size = sysconf(_SC_PAGESIZE);
	ksft_print_header();

	skip_unless_per_process_ksm();
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
	if (!pattern_init(AREA_KINDS))
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));

	{
		struct ksm_state st;

		if (read_state(0, &st))
			ksft_exit_skip("ksm_stat lacks the per-process KSM lines\n");
	}

	ksft_set_plan(ARRAY_SIZE(tests) + 1);
	cleanup_at_exit(exec_target_cleanup);
	/*
	 * ksmd first: knobs_restore() goes in reverse order, and fault
	 * injection must be off before ksmd is touched.
	 */
	if (!ksmd_fast(5000, 0))
		ksft_exit_fail_msg("cannot start ksmd\n");
	if (!fault_knobs_set())
		ksft_exit_fail_msg("cannot set the fault-injection knobs\n");
	kmemleak_start();

	/* Leave time for the kmemleak scans at the end. */
	end = start + opts.seconds -
	      (kmemleak_on ? MIN(KMEMLEAK_SECONDS, opts.seconds / 4) : 0);
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
	print_stats("operations", stats->operations, "processes", stats->processes,
		    "pages_verified", stats->pages_verified, "faults_injected",
		    stats->faults_injected, "mismatches", stats->mismatches, NULL);
	ksft_finished();
}
