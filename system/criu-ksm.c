// SPDX-License-Identifier: GPL-2.0
/*
 * criu-ksm: the process that `make system` checkpoints with Debian's CRIU.
 *
 *   criu-ksm prctl|madvise DIR
 *
 * Maps PAGES anonymous pages of distinct content, asks for KSM (for the whole
 * process with PR_SET_MEMORY_MERGE, or for the area with MADV_MERGEABLE), writes
 * DIR/ready and waits for signals:
 *   SIGUSR1  write one and the same new content into every page (which ksmd then
 *            merges): the step between CRIU's pre-dump and its dump, so the
 *            pages are soft-dirty only if merging kept the bit;
 *   SIGUSR2  check every byte against that content and write the result to
 *            DIR/result ("intact N" or "stale N of PAGES: first page I"), then
 *            the process's KSM state as it was restored (PR_GET_MEMORY_MERGE,
 *            whether the area is still VM_MERGEABLE: smaps "mg") and exit.
 * It is CRIU that restores the process between the two signals, so only what
 * the process holds in memory tells which it has seen: a counter of SIGUSR1.
 * Links the series' helper unit, tools/testing/selftests/vm/ksm_util.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "ksm_util.h"

#define PAGES	64

static char *area;
static size_t page_size;
static const char *dir;
static volatile sig_atomic_t rewrite, check, rewritten;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		rewrite = 1;
	else
		check = 1;
}

static void fill(char seed)
{
	for (size_t i = 0; i < PAGES; i++)
		for (size_t b = 0; b < page_size; b++)
			area[i * page_size + b] = (char)(seed == 'A' ? i * 7 + b : seed + b % 13);
}

static void put(const char *name, const char *text)
{
	char path[4096], tmp[4096 + 8];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) ||
	    rename(tmp, path)) {
		perror(path);
		exit(2);
	}
}

/* Is the area still VM_MERGEABLE ("mg" in its smaps VmFlags)? -1: not found */
static int area_mergeable(void)
{
	char flags[256];

	if (smaps_vma(area, flags, sizeof(flags), NULL) < 0 && !flags[0])
		return -1;
	return flag_listed(flags, "mg");
}

static void verify(void)
{
	char *want = malloc(page_size), text[256];
	size_t i, b, stale = 0, first = PAGES;

	if (!want)
		exit(2);
	for (i = 0; i < PAGES; i++) {
		for (b = 0; b < page_size; b++)
			want[b] = (char)('B' + b % 13);
		if (memcmp(area + i * page_size, want, page_size)) {
			stale++;
			if (first == PAGES)
				first = i;
		}
	}
	if (!rewritten)
		snprintf(text, sizeof(text), "no-rewrite\n");
	else if (!stale)
		snprintf(text, sizeof(text), "intact %d\n", PAGES);
	else
		snprintf(text, sizeof(text), "stale %zu of %d: first page %zu\n", stale, PAGES, first);
	put("result", text);
	snprintf(text, sizeof(text), "merge_any %d mg %d\n",
		 prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0), area_mergeable());
	put("state", text);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t mask, old;

	if (argc != 3 || (strcmp(argv[1], "prctl") && strcmp(argv[1], "madvise"))) {
		fprintf(stderr, "usage: criu-ksm prctl|madvise DIR\n");
		return 2;
	}
	dir = argv[2];
	page_size = sysconf(_SC_PAGESIZE);
	if (!strcmp(argv[1], "prctl") && prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0)) {
		perror("PR_SET_MEMORY_MERGE");
		return errno == EINVAL ? 4 : 1;
	}
	area = mmap(NULL, PAGES * page_size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (!strcmp(argv[1], "madvise") && madvise(area, PAGES * page_size, MADV_MERGEABLE)) {
		perror("MADV_MERGEABLE");
		return 1;
	}
	fill('A');
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGUSR2);
	sigprocmask(SIG_BLOCK, &mask, &old);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	put("ready", "ready\n");
	for (;;) {
		while (!rewrite && !check)
			sigsuspend(&old);
		if (rewrite) {
			rewrite = 0;
			fill('B');
			rewritten++;
			put("rewritten", "rewritten\n");
		}
		if (check) {
			verify();
			return 0;
		}
	}
}
