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

#ifndef PR_GET_MEMORY_MERGE
#define PR_GET_MEMORY_MERGE	68
#endif

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

/* A line "NAME value" of a /proc file of this process, or -1. */
static long proc_value(const char *file, const char *name)
{
	char line[256];
	size_t len = strlen(name);
	long v = -1;
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, len) && (line[len] == ' ' || line[len] == ':' || line[len] == '\t'))
			v = strtol(line + len + 1, NULL, 10);
	fclose(f);
	return v;
}

/* How many of the @pages pages at @area are swapped out (pagemap bit 62). */
static size_t pages_in_swap(const char *area, size_t pages)
{
	FILE *f = fopen("/proc/self/pagemap", "r");
	size_t i, n = 0;
	uint64_t e;

	if (!f || fseek(f, (long)((uintptr_t)area / page_size * 8), SEEK_SET))
		return 0;
	for (i = 0; i < pages && fread(&e, 8, 1, f) == 1; i++)
		n += !!(e & (1ULL << 62));
	fclose(f);
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
		merged = proc_value("/proc/self/ksm_stat", "ksm_merging_pages");
	}
	printf("merged %ld of %zu pages\n", merged, pages);
	if (merged < (long)pages / 2)
		return 1;
	/* Memory pressure in our own cgroup: unique pages, touched twice. */
	for (int round = 0; round < 2; round++) {
		char *more = map(4 * bytes);

		for (i = 0; i < 4 * bytes; i += page_size)
			*(uint64_t *)(more + i) = i * 2654435761u + round + 1;
		v = proc_value("/proc/self/status", "VmSwap");
		if (v > swapped)
			swapped = v;
		n = pages_in_swap(area, pages);
		if (n > out)
			out = n;
		munmap(more, 4 * bytes);
	}
	printf("under pressure: VmSwap up to %ld kB, up to %zu of the merged area's pages in swap; ksm_merging_pages %ld after\n",
	       swapped, out, proc_value("/proc/self/ksm_stat", "ksm_merging_pages"));
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
