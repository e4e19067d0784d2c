// SPDX-License-Identifier: GPL-2.0
/*
 * ksm_util.c: the helpers of ksm_util.h, shared by the stress programs and
 * bench/ksmbench.c. Nothing here needs kselftest.h: failures are told with
 * expect() ("# " lines, as ksft_print_msg() prints them) or through the return
 * value, and the callers decide what a failure means for their results.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <linux/magic.h>

#include "ksm_util.h"

bool expect(bool cond, const char *fmt, ...)
{
	int saved_errno = errno;
	va_list ap;

	if (cond)
		return true;
	va_start(ap, fmt);
	printf("# ");
	/* printf() may have changed errno, and @fmt may print it with %m */
	errno = saved_errno;
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	return false;
}

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

double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
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

void child_exit(int code)
{
	fflush(stdout);
	_exit(code);
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

/* ------------------------------------------------------------------ */
/* Files                                                              */
/* ------------------------------------------------------------------ */

int read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;
	size_t len = 0;
	ssize_t n = 0;

	if (fd < 0)
		return -1;
	/* One read() is all of a sysfs file, but not always of a procfs one. */
	while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	err = errno;
	close(fd);
	buf[len] = '\0';
	if (n < 0) {
		errno = err;
		return -1;
	}
	return 0;
}

int write_file(const char *path, const char *val)
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

long read_long(const char *path)
{
	char buf[64], *end;
	long v;

	if (read_file(path, buf, sizeof(buf)))
		return -1;
	v = strtol(buf, &end, 10);
	if (end == buf) {
		errno = EINVAL;
		return -1;
	}
	return v;
}

long read_key(const char *path, const char *key)
{
	char buf[16384], *p;
	size_t len = strlen(key);

	if (read_file(path, buf, sizeof(buf)))
		return -1;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, len) && (p[len] == ' ' || p[len] == ':'))
			return strtol(p + len + 1, NULL, 10);
	return -1;
}

/* ------------------------------------------------------------------ */
/* Knobs                                                              */
/* ------------------------------------------------------------------ */

/*
 * What knob_set() saved, in the order of the first changes. @pid is the
 * process that saved a knob: a child inherits the table but must not restore
 * what its parent changed (and will restore) when it exits.
 */
static struct knob {
	char path[128];
	char saved[128];
	pid_t pid;
} knobs[32];
static int nr_knobs;

static struct knob *knob_find(const char *path)
{
	int i;

	for (i = 0; i < nr_knobs; i++)
		if (!strcmp(knobs[i].path, path))
			return &knobs[i];
	return NULL;
}

/*
 * The value to write back: the file without its newline, or, in a file that
 * lists the choices with the current one in brackets (transparent_hugepage
 * "always [madvise] never"), that choice.
 */
static void knob_value(char *val)
{
	char *lb = strchr(val, '['), *rb = lb ? strchr(lb, ']') : NULL;

	if (rb) {
		*rb = '\0';
		memmove(val, lb + 1, rb - lb);
	}
	val[strcspn(val, "\n")] = '\0';
}

bool knob_set(const char *path, const char *val)
{
	struct knob *k = knob_find(path);

	if (!k) {
		if (nr_knobs == ARRAY_SIZE(knobs) || strlen(path) >= sizeof(k->path))
			return expect(false, "cannot save %s: no room", path);
		k = &knobs[nr_knobs];
		if (read_file(path, k->saved, sizeof(k->saved)))
			return expect(false, "cannot write %s to %s: %m", val, path);
		knob_value(k->saved);
		strcpy(k->path, path);
		k->pid = getpid();
		nr_knobs++;
	}
	return expect(!write_file(path, val), "cannot write %s to %s: %m", val, path);
}

/*
 * Async-signal-safe (open, write, close): a fatal-signal handler may call it.
 * The restored knobs leave the table, so that a second call (the atexit()
 * hook after an explicit one) writes nothing, and a later knob_set() saves
 * the value anew.
 */
void knobs_restore(void)
{
	pid_t pid = getpid();
	int i, kept = 0;

	for (i = nr_knobs; i-- > 0;)
		if (knobs[i].pid == pid)
			write_file(knobs[i].path, knobs[i].saved);
	for (i = 0; i < nr_knobs; i++)
		if (knobs[i].pid != pid)
			knobs[kept++] = knobs[i];
	nr_knobs = kept;
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
/* ksmd                                                               */
/* ------------------------------------------------------------------ */

long ksm_read(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), KSM_SYSFS "%s", name);
	return read_long(path);
}

bool ksm_set(const char *name, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), KSM_SYSFS "%s", name);
	return knob_set(path, val);
}

/*
 * run first: knobs_restore() goes in reverse, so run is restored last, after
 * the settings it runs with, as the programs did before they shared this.
 */
bool ksmd_fast(long pages_to_scan)
{
	char val[32];

	snprintf(val, sizeof(val), "%ld", pages_to_scan);
	return ksm_set("run", "1") && ksm_set("sleep_millisecs", "0") &&
	       ksm_set("pages_to_scan", val);
}

bool ksm_wait_scans(int scans, double timeout)
{
	long start = ksm_read("full_scans"), n;
	double end = now_sec() + timeout;

	if (start < 0)
		return false;
	for (;;) {
		n = ksm_read("full_scans");
		if (n < 0)
			return false;
		if (n >= start + scans)
			return true;
		if (now_sec() > end)
			return false;
		usleep(20000);
	}
}

/* ------------------------------------------------------------------ */
/* A process's KSM state                                              */
/* ------------------------------------------------------------------ */

void proc_path(char *buf, size_t size, pid_t pid, const char *file)
{
	if (pid)
		snprintf(buf, size, "/proc/%d/%s", pid, file);
	else
		snprintf(buf, size, "/proc/self/%s", file);
}

bool flag_listed(const char *flags, const char *flag)
{
	size_t len = strlen(flag);
	const char *p = flags;

	while ((p = strstr(p, flag))) {
		if ((p == flags || p[-1] == ' ') &&
		    (p[len] == ' ' || p[len] == '\n' || p[len] == '\0'))
			return true;
		p += len;
	}
	return false;
}

bool flags_compatible(const char *flags)
{
	/* VM_SHARED, VM_MAYSHARE, VM_PFNMAP, VM_IO, VM_DONTEXPAND, VM_HUGETLB, VM_MIXEDMAP */
	static const char * const incompatible[] = {
		"sh", "ms", "pf", "io", "de", "ht", "mm",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(incompatible); i++)
		if (flag_listed(flags, incompatible[i]))
			return false;
	return true;
}

int ksm_stat_lines(pid_t pid, struct ksm_state *st)
{
	char path[64], line[256], name[64], val[48];
	int found = 0;
	FILE *f;

	proc_path(path, sizeof(path), pid, "ksm_stat");
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %47s", name, val) != 2)
			continue;
		if (!strcmp(name, "ksm_merge_type")) {
			snprintf(st->type, sizeof(st->type), "%s", val);
			found |= KSM_STAT_TYPE;
		} else if (!strcmp(name, "ksm_merge_any:")) {
			st->any = !strcmp(val, "yes");
			found |= KSM_STAT_ANY;
		} else if (!strcmp(name, "ksm_mergeable:")) {
			st->mergeable = !strcmp(val, "yes");
			found |= KSM_STAT_MERGEABLE;
		}
	}
	fclose(f);
	return found;
}

int read_ksm_stat(pid_t pid, struct ksm_state *st)
{
	int found = ksm_stat_lines(pid, st);
	char path[64];

	proc_path(path, sizeof(path), pid, "ksm_stat");
	if (found < 0)
		return expect(false, "open %s: %m", path) - 1;
	return expect(found == KSM_STAT_ALL, "%s lacks merge type/any/mergeable lines", path) - 1;
}

long ksm_stat_value(pid_t pid, const char *name)
{
	char path[64];

	proc_path(path, sizeof(path), pid, "ksm_stat");
	return read_key(path, name);
}

/*
 * A maps or smaps header line: "start-end perms offset dev inode [name]".
 * Returns the offset of the name (of the end of the line if there is none),
 * 0 for any other line. A field line ("AnonHugePages:   0 kB") never has
 * hex digits and a dash where a header has its range.
 */
static int vma_header(const char *line, struct vma_entry *v)
{
	int off = 0;

	if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %n", &v->start, &v->end, v->perms, &off) != 3)
		return 0;
	return off;
}

int vma_walk(pid_t pid, const char *file, const char *field,
	     bool (*fn)(const struct vma_entry *v, void *arg), void *arg)
{
	size_t flen = field ? strcspn(field, ":") : 0, cap = 0;
	char path[64], name[512], flags[256], *line = NULL;
	struct vma_entry v = { .name = name }, next;
	bool have = false, more = true;
	FILE *f;
	int off;

	proc_path(path, sizeof(path), pid, file);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (more && getline(&line, &cap, f) > 0) {
		off = vma_header(line, &next);
		if (off) {
			/* A VMA is complete when the next one starts. */
			if (have)
				more = fn(&v, arg);
			v.start = next.start;
			v.end = next.end;
			memcpy(v.perms, next.perms, sizeof(v.perms));
			snprintf(name, sizeof(name), "%s", line + off);
			name[strcspn(name, "\n")] = '\0';
			v.flags = NULL;
			v.field = -1;
			have = true;
		} else if (have && !strncmp(line, "VmFlags:", 8)) {
			snprintf(flags, sizeof(flags), "%s", line + 8 + strspn(line + 8, " "));
			/* no newline, nor the blank before it */
			flags[strcspn(flags, "\n")] = '\0';
			while (flags[0] && flags[strlen(flags) - 1] == ' ')
				flags[strlen(flags) - 1] = '\0';
			v.flags = flags;
		} else if (have && flen && !strncmp(line, field, flen) && line[flen] == ':') {
			v.field = strtol(line + flen + 1, NULL, 10);
		}
	}
	if (have && more)
		fn(&v, arg);
	free(line);
	fclose(f);
	return 0;
}

/* The gate area is shown in smaps but is no VMA of the mm. */
static bool gate_area(const struct vma_entry *v)
{
	return !strcmp(v->name, "[vsyscall]");
}

static bool count_vma(const struct vma_entry *v, void *arg)
{
	struct ksm_state *st = arg;
	bool mg;

	if (!v->flags || gate_area(v))
		return true;
	mg = flag_listed(v->flags, "mg");
	st->vmas++;
	if (!strcmp(v->name, "[stack]"))
		st->stack_mg = mg;
	if (flags_compatible(v->flags)) {
		st->compat++;
		st->compat_mg += mg;
		if (!mg && !st->first_unmarked)
			st->first_unmarked = v->start;
	} else {
		st->other_mg += mg;
	}
	return true;
}

int read_smaps(pid_t pid, struct ksm_state *st)
{
	char path[64];

	if (!vma_walk(pid, "smaps", NULL, count_vma, st))
		return 0;
	proc_path(path, sizeof(path), pid, "smaps");
	return expect(false, "open %s: %m", path) - 1;
}

int read_state(pid_t pid, struct ksm_state *st)
{
	memset(st, 0, sizeof(*st));
	st->get = pid ? -1 : prctl(PR_GET_MEMORY_MERGE, 0UL, 0UL, 0UL, 0UL);
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

struct vma_at {
	unsigned long addr;
	char *flags;
	size_t size;
	long field;
	bool found;
};

static bool find_vma(const struct vma_entry *v, void *arg)
{
	struct vma_at *at = arg;

	if (at->addr < v->start || at->addr >= v->end)
		return true;
	if (at->size)
		snprintf(at->flags, at->size, "%s", v->flags ? v->flags : "");
	at->field = v->field;
	at->found = true;
	return false;
}

long smaps_vma(const void *addr, char *flags, size_t size, const char *field)
{
	struct vma_at at = { .addr = (uintptr_t)addr, .flags = flags, .size = flags ? size : 0 };

	if (at.size)
		flags[0] = '\0';
	if (vma_walk(0, "smaps", field, find_vma, &at) || !at.found)
		return -1;
	return at.field;
}

struct vma_range {
	unsigned long lo, hi;
	int vmas, mg;
};

static bool count_in_range(const struct vma_entry *v, void *arg)
{
	struct vma_range *r = arg;

	if (v->start < r->hi && v->end > r->lo) {
		r->vmas++;
		r->mg += v->flags && flag_listed(v->flags, "mg");
	}
	return true;
}

int range_vmas(const void *addr, size_t len, int *mg)
{
	struct vma_range r = { .lo = (uintptr_t)addr, .hi = (uintptr_t)addr + len };

	/* maps when the flags do not matter: smaps walks the page tables */
	if (vma_walk(0, mg ? "smaps" : "maps", NULL, count_in_range, &r))
		return -1;
	if (mg)
		*mg = r.mg;
	return r.vmas;
}

/* ------------------------------------------------------------------ */
/* pagemap, kpageflags                                                */
/* ------------------------------------------------------------------ */

/*
 * The open /proc/self/pagemap of the calling process: pid << 32 | fd + 1.
 * Opened once per process, not per lookup: the stress programs look up
 * pages in loops. One word, so that threads install it with one CAS; a
 * forked child finds its parent's pid there (and the file of its parent's
 * mm, inherited) and replaces it.
 */
static uint64_t pagemap_cache;

static int pagemap_fd(void)
{
	uint64_t c = __atomic_load_n(&pagemap_cache, __ATOMIC_ACQUIRE), mine;
	pid_t pid = getpid();
	int fd;

	if (c && (pid_t)(c >> 32) == pid)
		return (int)(uint32_t)c - 1;
	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	mine = (uint64_t)pid << 32 | (uint32_t)(fd + 1);
	if (!__atomic_compare_exchange_n(&pagemap_cache, &c, mine, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		/* Another thread of this process was first. */
		close(fd);
		if ((pid_t)(c >> 32) != pid) {
			errno = EAGAIN;
			return -1;
		}
		return (int)(uint32_t)c - 1;
	}
	if (c)
		close((int)(uint32_t)c - 1);	/* the parent's, inherited */
	return fd;
}

int pagemap_read(const void *addr, size_t n, uint64_t *ents)
{
	int fd = pagemap_fd();
	ssize_t len = n * sizeof(*ents), got;
	long ps = sysconf(_SC_PAGESIZE);

	if (fd < 0)
		return -1;
	got = pread(fd, ents, len, (uintptr_t)addr / ps * sizeof(*ents));
	if (got == len)
		return 0;
	if (got >= 0)
		errno = EIO;	/* beyond the end of the address space */
	return -1;
}

uint64_t pagemap_entry(const void *addr)
{
	uint64_t e;

	return pagemap_read(addr, 1, &e) ? 0 : e;
}

/* /proc/kpageflags, one file for all processes: kept open, children inherit it. */
static int kpageflags_fd = -1;

int kpageflags_read(uint64_t pfn, uint64_t *flags)
{
	int fd = __atomic_load_n(&kpageflags_fd, __ATOMIC_ACQUIRE), old = -1;
	ssize_t got;

	if (fd < 0) {
		fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		if (!__atomic_compare_exchange_n(&kpageflags_fd, &old, fd, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			close(fd);
			fd = old;
		}
	}
	got = pread(fd, flags, sizeof(*flags), pfn * sizeof(*flags));
	if (got == sizeof(*flags))
		return 0;
	if (got >= 0)
		errno = EIO;	/* beyond the last pfn */
	return -1;
}

uint64_t kpageflags(uint64_t pfn)
{
	uint64_t flags;

	return kpageflags_read(pfn, &flags) ? 0 : flags;
}

bool pagemap_ksm(uint64_t e)
{
	uint64_t pfn = e & PM_PFN, flags;

	if (!(e & PM_PRESENT) || !pfn || kpageflags_read(pfn, &flags))
		return false;
	return flags >> KPF_KSM & 1;
}

long ksm_pages_in(const void *addr, size_t pages)
{
	uint64_t ents[512], flags, last_pfn = 0;
	long ps = sysconf(_SC_PAGESIZE), nr = 0;
	bool last_ksm = false;
	size_t done, chunk, i;

	for (done = 0; done < pages; done += chunk) {
		chunk = pages - done < ARRAY_SIZE(ents) ? pages - done : ARRAY_SIZE(ents);
		if (pagemap_read((const char *)addr + done * ps, chunk, ents))
			return -1;
		for (i = 0; i < chunk; i++) {
			uint64_t pfn = ents[i] & PM_PFN;

			if (!(ents[i] & PM_PRESENT) || !pfn)
				continue;
			/* Merged pages share a few PFNs: look each one up once. */
			if (pfn != last_pfn) {
				if (kpageflags_read(pfn, &flags))
					continue;
				last_pfn = pfn;
				last_ksm = flags >> KPF_KSM & 1;
			}
			nr += last_ksm;
		}
	}
	return nr;
}

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
