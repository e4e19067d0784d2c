// SPDX-License-Identifier: GPL-2.0
/*
 * stress_util.c: the helpers of stress_util.h, which only the stress programs
 * need; they link the series' ksm_util.c too. Nothing here needs kselftest.h:
 * failures are told with expect() ("# " lines, as ksft_print_msg() prints
 * them) or through the return value, and the callers decide what a failure
 * means for their results.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <linux/magic.h>

#include "kselftest.h"
#include "stress_util.h"

void report_limited(unsigned long *count, unsigned long max, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	if (__atomic_fetch_add(count, 1, __ATOMIC_RELAXED) >= max)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 1)
		n = sizeof(buf) - 1;
	if (write(STDOUT_FILENO, buf, n) < 0)
		return;
}

void print_stats(const char *name, ...)
{
	va_list ap;

	va_start(ap, name);
	for (; name; name = va_arg(ap, const char *))
		printf("# stat %s %ld\n", name, va_arg(ap, long));
	va_end(ap);
}

uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

pid_t fork_counted(long *counter)
{
	pid_t pid;

	/* Or the child would print what the parent has buffered once more. */
	fflush(stdout);
	pid = fork();
	if (pid > 0 && counter)
		__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
	return pid;
}

static pid_t exit_pid;
static void (*exit_fn)(void);

static void at_exit(void)
{
	if (getpid() != exit_pid)
		return;
	knobs_restore();
	if (exit_fn)
		exit_fn();
}

void cleanup_at_exit(void (*fn)(void))
{
	exit_pid = getpid();
	exit_fn = fn;
	atexit(at_exit);
}

int watch_workers(int procs, const struct heartbeat *hb, size_t stride, int n,
		  unsigned long hang, unsigned long limit, void (*reaped)(pid_t pid, int status),
		  void (*tick)(void))
{
	int left = procs, status, i;

	while (left) {
		pid_t pid = waitpid(-1, &status, WNOHANG);
		unsigned long t = now_sec();

		if (pid > 0) {
			if (reaped)
				reaped(pid, status);
			left--;
			continue;
		}
		if (tick)
			tick();
		for (i = 0; i < n; i++) {
			const struct heartbeat *h = (const void *)((const char *)hb + i * stride);
			unsigned long beat = __atomic_load_n(&h->beat, __ATOMIC_RELAXED);
			int done = __atomic_load_n(&h->done, __ATOMIC_RELAXED);

			if (beat && !done && t >= beat + hang)
				return i;
		}
		if (t > limit)
			return n;
		sleep(1);
	}
	return -1;
}

void opts_usage(const struct run_opts *o, const char *prog)
{
	fprintf(stderr, "usage: %s %s\n", prog, o->usage);
	exit(1);	/* KSFT_FAIL */
}

void parse_opts(int argc, char **argv, struct run_opts *o)
{
	int opt;

	while ((opt = getopt(argc, argv, o->letters)) != -1) {
		switch (opt) {
		case 'd':
			o->seconds = atof(optarg);
			break;
		case 'i':
			o->iterations = strtoul(optarg, NULL, 0);
			o->iterations_given = true;
			break;
		case 'p':
			o->procs = atoi(optarg);
			break;
		case 't':
			o->threads = atoi(optarg);
			break;
		case 's':
			o->s = strtoull(optarg, NULL, 0);
			break;
		default:
			opts_usage(o, argv[0]);
		}
	}
	if (strchr(o->letters, 'p') && (o->procs < 1 || o->procs > o->max_procs ||
					o->threads < 1 || o->threads > o->max_threads)) {
		fprintf(stderr, "%s: -p must be 1-%d and -t 1-%d\n", argv[0], o->max_procs,
			o->max_threads);
		exit(1);
	}
}

/*
 * fail-nth only reaches allocations the injectors are willing to fail: by
 * default they skip sleeping (GFP_KERNEL) and highmem (user page) allocations
 * and order 0, which would leave almost nothing to inject into. Quiet too: a
 * stack trace per injected failure would flood the console and fail the
 * splat check.
 */
bool fault_knobs_set(void)
{
	return knob_set(DEBUGFS "failslab/ignore-gfp-wait", "N") &&
	       knob_set(DEBUGFS "failslab/verbose", "0") &&
	       knob_set(DEBUGFS "fail_page_alloc/ignore-gfp-wait", "N") &&
	       knob_set(DEBUGFS "fail_page_alloc/ignore-gfp-highmem", "N") &&
	       knob_set(DEBUGFS "fail_page_alloc/min-order", "0") &&
	       knob_set(DEBUGFS "fail_page_alloc/verbose", "0");
}

/* ------------------------------------------------------------------ */
/* A process's KSM state                                              */
/* ------------------------------------------------------------------ */

/* ksm_stat_lines(), all three lines required, saying why not with expect() */
static int read_ksm_stat(pid_t pid, struct ksm_state *st)
{
	int found = ksm_stat_lines(pid, st);
	char path[64];

	proc_path(path, sizeof(path), pid, "ksm_stat");
	if (found < 0)
		return expect(false, "open %s: %m", path) - 1;
	return expect(found == KSM_STAT_ALL, "%s lacks merge type/any/mergeable lines", path) - 1;
}

int read_state(pid_t pid, struct ksm_state *st)
{
	memset(st, 0, sizeof(*st));
	st->get = pid ? -1 : merge_get();
	if (!pid && st->get < 0)
		return expect(false, "PR_GET_MEMORY_MERGE: %m") - 1;
	if (read_ksm_stat(pid, st) || read_smaps(pid, st))
		return -1;
	return 0;
}

bool state_consistent(pid_t pid, int want, bool madvised, const char *what)
{
	struct ksm_state st;
	const char *type;
	bool ok = true;

	if (read_state(pid, &st))
		return false;
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
	return ok;
}

/* ------------------------------------------------------------------ */
/* KSM pages                                                          */
/* ------------------------------------------------------------------ */

long ksm_wait_pages(const void *addr, size_t pages, size_t want, int poll_ms, double timeout)
{
	double end = now_sec() + timeout;
	long nr;

	for (;;) {
		nr = ksm_pages_in(addr, pages);
		if (nr < 0 || nr >= (long)want || now_sec() >= end)
			return nr;
		usleep(poll_ms * 1000);
	}
}

/* ------------------------------------------------------------------ */
/* Pages of known content                                             */
/* ------------------------------------------------------------------ */

static char *patterns;
static int nr_patterns;

bool pattern_init(int kinds)
{
	size_t ps = sysconf(_SC_PAGESIZE), words = ps / sizeof(uint64_t), w;
	int k;

	patterns = mmap(NULL, kinds * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	if (patterns == MAP_FAILED)
		return false;
	nr_patterns = kinds;
	for (k = 0; k < kinds; k++) {
		uint64_t *p = (uint64_t *)(patterns + k * ps);

		for (w = 0; w < words; w++)
			p[w] = (k + 1) * 0x9e3779b97f4a7c15ULL ^ (w * 0x100000001b3ULL);
	}
	return true;
}

char *pattern_map(size_t pages)
{
	size_t ps = sysconf(_SC_PAGESIZE), i;
	char *area = mmap(NULL, pages * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);

	if (area == MAP_FAILED) {
		expect(false, "mmap %zu pages: %m", pages);
		return NULL;
	}
	for (i = 0; i < pages; i++)
		memcpy(area + i * ps, patterns + (i % nr_patterns) * ps, ps);
	return area;
}

long pattern_bad_pages(const char *area, size_t pages)
{
	size_t ps = sysconf(_SC_PAGESIZE), i;
	long bad = 0;

	for (i = 0; i < pages; i++)
		if (memcmp(area + i * ps, patterns + (i % nr_patterns) * ps, ps))
			bad++;
	return bad;
}

/* ------------------------------------------------------------------ */
/* A memory cgroup                                                    */
/* ------------------------------------------------------------------ */

#define CGROUP_FS	"/sys/fs/cgroup"

static bool cgroup_mounted, cgroup_memory_added;

const char *cgroup_create(const char *name, char *dir, size_t size)
{
	struct statfs sfs;
	char buf[512];

	if (statfs(CGROUP_FS, &sfs))
		return "no " CGROUP_FS;
	if (sfs.f_type != CGROUP2_SUPER_MAGIC) {
		if (mount("cgroup2", CGROUP_FS, "cgroup2", 0, NULL))
			return "cannot mount cgroup2 on " CGROUP_FS;
		cgroup_mounted = true;
	}
	if (read_file(CGROUP_FS "/cgroup.controllers", buf, sizeof(buf)) ||
	    !strstr(buf, "memory"))
		return "no memory controller in cgroup2 (CONFIG_MEMCG, or bound to cgroup1)";
	if (read_file(CGROUP_FS "/cgroup.subtree_control", buf, sizeof(buf)))
		return "cannot read cgroup.subtree_control";
	if (!strstr(buf, "memory")) {
		if (write_file(CGROUP_FS "/cgroup.subtree_control", "+memory"))
			return "cannot enable +memory in the root cgroup";
		cgroup_memory_added = true;
	}
	snprintf(dir, size, CGROUP_FS "/%s.%d", name, getpid());
	if (mkdir(dir, 0755)) {
		dir[0] = '\0';
		return "cannot create a cgroup";
	}
	return NULL;
}

bool cgroup_remove(char *dir)
{
	bool ok = !dir[0] || !rmdir(dir);

	dir[0] = '\0';
	if (cgroup_memory_added)
		write_file(CGROUP_FS "/cgroup.subtree_control", "-memory");
	cgroup_memory_added = false;
	if (cgroup_mounted)
		umount(CGROUP_FS);
	cgroup_mounted = false;
	return ok;
}

void skip_unless_per_process_ksm(void)
{
	if (geteuid())
		ksft_exit_skip("must be run as root\n");
	if (access(KSM_SYSFS "run", W_OK))
		ksft_exit_skip("no KSM (%s)\n", KSM_SYSFS);
	if (merge_get() < 0)
		ksft_exit_skip("PR_GET_MEMORY_MERGE: %s\n", strerror(errno));
}
