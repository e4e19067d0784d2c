// SPDX-License-Identifier: GPL-2.0
/*
 * ksm-worker: the workloads that `make system` runs as systemd services.
 *
 *   ksm-worker dup MIB        MIB of identical pages, then sleep until killed
 *   ksm-worker swap MIB       MIB of 16 page contents over and over; once ksmd
 *                             merged them, allocate and touch 4 x MIB of unique
 *                             pages (in a service with MemoryMax= below that, the
 *                             merged pages go to swap), then check every byte of
 *                             the first area; prints what went to swap
 *   ksm-worker state          this process's KSM state after its exec: AT_SECURE,
 *                             PR_GET_MEMORY_MERGE, ksm_merge_type of ksm_stat
 *
 * Exit status 0 when the checks passed, 1 when not, 2 on bad arguments.
 * Links the series' helper unit, tools/testing/selftests/vm/ksm_util.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "ksm_util.h"

static size_t page_size;

static char *map(size_t bytes)
{
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

/* How many of the @pages pages at @area are swapped out (pagemap). */
static size_t pages_in_swap(const char *area, size_t pages)
{
	uint64_t *e = calloc(pages, sizeof(*e));
	size_t i, n = 0;

	if (e && !pagemap_read(area, pages, e))
		for (i = 0; i < pages; i++)
			n += !!(e[i] & PM_SWAP);
	free(e);
	return n;
}

static char content(size_t page, size_t byte)
{
	return (char)(page % 16 * 31 + byte % 251 + 1);
}

static int swap_check(size_t mib)
{
	size_t bytes = mib << 20, pages = bytes / page_size, i, b, bad = 0, out = 0, n;
	long merged = 0, swapped = 0, v;
	char *area = map(bytes);

	for (i = 0; i < pages; i++)
		for (b = 0; b < page_size; b++)
			area[i * page_size + b] = content(i, b);
	for (i = 0; i < 120 && merged < (long)pages / 2; i++) {
		sleep(1);
		merged = ksm_stat_value(0, "ksm_merging_pages");
	}
	printf("merged %ld of %zu pages\n", merged, pages);
	if (merged < (long)pages / 2)
		return 1;
	/*
	 * Memory pressure in our own cgroup: unique pages, three rounds. The
	 * merged pages were just written and each KSM page has 512 young PTEs
	 * here: reclaim would find them referenced and keep them active. Age
	 * them first (clear_refs 1: the accessed bits of the process's pages).
	 */
	for (int round = 0; round < 3; round++) {
		char *more;

		if (write_file("/proc/self/clear_refs", "1"))
			perror("clear_refs");
		more = map(4 * bytes);

		for (i = 0; i < 4 * bytes; i += page_size)
			*(uint64_t *)(more + i) = i * 2654435761u + round + 1;
		v = read_key("/proc/self/status", "VmSwap");
		if (v > swapped)
			swapped = v;
		n = pages_in_swap(area, pages);
		if (n > out)
			out = n;
		munmap(more, 4 * bytes);
	}
	printf("under pressure: VmSwap up to %ld kB, up to %zu of the merged area's pages in swap; ksm_merging_pages %ld after\n",
	       swapped, out, ksm_stat_value(0, "ksm_merging_pages"));
	for (i = 0; i < pages; i++)
		for (b = 0; b < page_size; b++)
			if (area[i * page_size + b] != content(i, b)) {
				bad++;
				break;
			}
	printf("%zu of %zu pages differ after swap-in\n", bad, pages);
	return bad || !out;
}

static int state(void)
{
	char line[256], type[64] = "unknown";
	FILE *f = fopen("/proc/self/ksm_stat", "r");

	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "ksm_merge_type %63s", type);
	if (f)
		fclose(f);
	printf("at_secure %lu merge_any %d merge_type %s\n", getauxval(AT_SECURE),
	       prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0), type);
	return 0;
}

int main(int argc, char **argv)
{
	page_size = sysconf(_SC_PAGESIZE);
	if (argc == 3 && !strcmp(argv[1], "dup")) {
		size_t bytes = strtoul(argv[2], NULL, 10) << 20;

		memset(map(bytes), 0x5a, bytes);
		for (;;)
			pause();
	}
	if (argc == 3 && !strcmp(argv[1], "swap"))
		return swap_check(strtoul(argv[2], NULL, 10));
	if (argc == 2 && !strcmp(argv[1], "state"))
		return state();
	fprintf(stderr, "usage: ksm-worker dup MIB | swap MIB | state\n");
	return 2;
}
