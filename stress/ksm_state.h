/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ksm_state.h: what the stress programs read about a process's KSM state
 * (/proc/<pid>/ksm_stat and the VmFlags of /proc/<pid>/smaps), and their
 * expect() reporting helper. Shared by ksm_faults.c and ksm_signals.c.
 */
#ifndef KSM_STRESS_STATE_H
#define KSM_STRESS_STATE_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "kselftest.h"

/* Prints why a check failed and returns its result, for "ok &= expect(...)". */
static bool expect(bool cond, const char *fmt, ...)
{
	int saved_errno = errno;
	va_list ap;

	if (cond)
		return true;
	va_start(ap, fmt);
	printf("# ");
	errno = saved_errno;
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	return false;
}

static void proc_path(char *buf, size_t size, pid_t pid, const char *file)
{
	if (pid)
		snprintf(buf, size, "/proc/%d/%s", pid, file);
	else
		snprintf(buf, size, "/proc/self/%s", file);
}

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

static bool flag_listed(const char *flags, const char *flag)
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

/* The VmFlags form of ksm_compatible(): what MADV_MERGEABLE would accept. */
static bool flags_compatible(const char *flags)
{
	static const char * const incompatible[] = {
		"sh", "ms", "pf", "io", "de", "ht", "mm",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(incompatible); i++)
		if (flag_listed(flags, incompatible[i]))
			return false;
	return true;
}

static int read_ksm_stat(pid_t pid, struct ksm_state *st)
{
	char path[64], line[256], name[64], val[48];
	int found = 0;
	FILE *f;

	proc_path(path, sizeof(path), pid, "ksm_stat");
	f = fopen(path, "re");
	if (!f)
		return expect(false, "open %s: %m", path) - 1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %47s", name, val) != 2)
			continue;
		if (!strcmp(name, "ksm_merge_type")) {
			snprintf(st->type, sizeof(st->type), "%s", val);
			found |= 1;
		} else if (!strcmp(name, "ksm_merge_any:")) {
			st->any = !strcmp(val, "yes");
			found |= 2;
		} else if (!strcmp(name, "ksm_mergeable:")) {
			st->mergeable = !strcmp(val, "yes");
			found |= 4;
		}
	}
	fclose(f);
	return expect(found == 7, "%s lacks merge type/any/mergeable lines", path) - 1;
}

#endif /* KSM_STRESS_STATE_H */
