// SPDX-License-Identifier: GPL-2.0
/* ksm-launch: enable per-process KSM (prctl PR_SET_MEMORY_MERGE), check it, exec CMD. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#define PR_GET_MEMORY_MERGE 68
#endif

int main(int argc, char **argv)
{
	int on;

	if (argc < 2) {
		fprintf(stderr, "usage: ksm-launch CMD [ARG...]\n");
		return 2;
	}
	if (prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0)) {
		fprintf(stderr, "ksm-launch: prctl(PR_SET_MEMORY_MERGE): %s (kernel lacks per-process KSM?)\n",
			strerror(errno));
		return 1;
	}
	on = prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0);
	if (on != 1) {
		fprintf(stderr, "ksm-launch: PR_GET_MEMORY_MERGE returned %d, expected 1\n", on);
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "ksm-launch: exec %s: %s\n", argv[1], strerror(errno));
	return 127;
}
