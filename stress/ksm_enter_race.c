// SPDX-License-Identifier: GPL-2.0
/*
 * A process that enables KSM while ksmd drops the last mm of its list.
 *
 * __ksm_enter() decides whether to wake ksmd by looking at ksmd's list of mms
 * before it takes ksm_mmlist_lock. If ksmd removes the last mm (one that
 * exited while ksmd was scanning it) between that look and the insertion, and
 * finds its list empty before the insertion, it goes to sleep until woken,
 * and nobody wakes it: the entering mm saw a list that was not empty. KSM
 * then merges nothing, for every process, until that mm is gone or someone
 * writes to /sys/kernel/mm/ksm/run.
 *
 * Rounds of two processes: one that ksmd is scanning exits just as the next
 * one enables KSM with prctl(PR_SET_MEMORY_MERGE), after a delay that moves
 * through the exit from round to round. Each process waits for ksmd to scan
 * it (ksm_rmap_items in its ksm_stat); a process that ksmd has not scanned
 * after STALL_SEC while full_scans stood still is a lost wakeup: the test
 * fails, says what ksmd was doing, and wakes ksmd through the run knob.
 *
 * The race needs ksmd's list to become empty: other processes with KSM on keep
 * it from ever happening (said, not failed). Statistics ("# stat KEY VALUE"):
 * rounds, stalls.
 *
 * Needs root; restores the ksmd knobs it changes.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "kselftest.h"
#include "stress_util.h"

#define DEFAULT_SECONDS 60
#define RACE_PAGES 256		/* long enough that ksmd is often inside it */
#define STALL_SEC 20		/* a TCG guest beside a kernel build scans 256 pages in < 1 s */
#define MAX_DELAY_US 2000

static struct run_opts opts = {
	.letters = "d:i:h",
	.usage = "[-d SECONDS] [-i ROUNDS]\n"
		 "  -d  time bound (default " KSM_XSTR(DEFAULT_SECONDS) ")\n"
		 "  -i  rounds (default: as many as fit in -d)",
	.seconds = DEFAULT_SECONDS,
	.iterations = 1000000,
};

static void spin_us(long us)
{
	double end = now_sec() + us / 1e6;

	while (now_sec() < end)
		;
}

/* Other processes with KSM on, which keep ksmd's list from becoming empty. */
static int other_ksm_processes(void)
{
	char path[300], buf[512], *p;
	struct dirent *d;
	DIR *dir = opendir("/proc");
	int n = 0;

	if (!dir)
		return 0;
	while ((d = readdir(dir))) {
		if (d->d_name[0] < '1' || d->d_name[0] > '9' || atoi(d->d_name) == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ksm_stat", d->d_name);
		/* kernel threads have no mm: their ksm_stat reads fail */
		if (read_file(path, buf, sizeof(buf)))
			continue;
		p = strstr(buf, "ksm_rmap_items ");
		if (strstr(buf, "ksm_mergeable: yes") ||
		    (p && atol(p + strlen("ksm_rmap_items ")) > 0))
			n++;
	}
	closedir(dir);
	return n;
}

/*
 * A round's process: waits on @go, enables KSM after @delay_us, fills an area
 * and waits until ksmd has scanned it. Writes 'y' to @done then exits at once
 * (while ksmd may still be inside its mm), or 'n' after STALL_SEC without a
 * scan while full_scans stood still.
 */
static void __attribute__((noreturn)) round_child(int go, int done, long delay_us)
{
	long scans = -1, rmap = 0;
	double end;
	char c, *area;

	if (read(go, &c, 1) != 1)
		_exit(2);
	spin_us(delay_us);
	if (merge_set(1))
		_exit(3);
	area = map_filled(RACE_PAGES, 0);
	if (!area)
		_exit(3);
	for (size_t i = 0; i < RACE_PAGES; i++)
		area[i * getpagesize()] = (char)i;
	end = now_sec() + STALL_SEC;
	while (now_sec() < end) {
		rmap = ksm_stat_value(0, "ksm_rmap_items");
		if (rmap > 0)
			break;
		if (scans < 0)
			scans = ksm_read("full_scans");
		usleep(1000);
	}
	c = rmap > 0 || ksm_read("full_scans") != scans ? 'y' : 'n';
	if (write(done, &c, 1) != 1)
		_exit(2);
	if (c == 'n')
		pause();	/* stay in ksmd's list for the report */
	_exit(0);
}

static pid_t start_round(int *go, int *done, long delay_us)
{
	int g[2], d[2];
	pid_t pid;

	if (pipe(g) || pipe(d))
		ksft_exit_fail_msg("pipe: %s\n", strerror(errno));
	pid = fork_counted(NULL);
	if (pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	if (!pid) {
		close(g[1]);
		close(d[0]);
		round_child(g[0], d[1], delay_us);
	}
	close(g[0]);
	close(d[1]);
	*go = g[1];
	*done = d[0];
	return pid;
}

static void report_stall(pid_t pid)
{
	char path[64], buf[256];

	ksft_print_msg("process %d enabled KSM %d s ago, ksmd has not scanned it\n",
		       pid, STALL_SEC);
	ksft_print_msg("run %ld sleep_millisecs %ld full_scans %ld pages_scanned %ld\n",
		       ksm_read("run"), ksm_read("sleep_millisecs"), ksm_read("full_scans"),
		       ksm_read("pages_scanned"));
	snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
	system("for p in $(pgrep -x ksmd); do echo \"# ksmd: $(sed -n 's/^State:\\t//p' "
	       "/proc/$p/status), wchan $(cat /proc/$p/wchan)\"; done");
	if (!read_file(path, buf, sizeof(buf)))
		ksft_print_msg("process %d: wchan %s\n", pid, buf);
}

int main(int argc, char **argv)
{
	unsigned long rounds = 0, stalls = 0;
	double start = now_sec(), end;
	int go, done, next_go, next_done, others, status;
	pid_t pid, next;
	char c;

	parse_opts(argc, argv, &opts);
	setvbuf(stdout, NULL, _IOLBF, 0);
	end = start + opts.seconds;
	ksft_print_header();
	skip_unless_per_process_ksm();
	if (ksm_stat_value(0, "ksm_rmap_items") < 0)
		ksft_exit_skip("no ksm_rmap_items in /proc/self/ksm_stat\n");
	ksft_set_plan(1);
	cleanup_at_exit(NULL);
	if (!ksmd_fast(64, 0))
		ksft_exit_fail_msg("cannot set the ksmd knobs\n");
	others = other_ksm_processes();
	if (others)
		ksft_print_msg("%d other processes with KSM on: ksmd's list never empties, the race cannot happen\n",
			       others);

	pid = start_round(&go, &done, 0);
	if (write(go, "g", 1) != 1)
		ksft_exit_fail_msg("write: %s\n", strerror(errno));
	while (!stalls) {
		if (read(done, &c, 1) != 1)
			ksft_exit_fail_msg("round %lu: process %d died\n", rounds, pid);
		if (c == 'n') {
			report_stall(pid);
			stalls++;
			ksm_set("run", "1");	/* wakes ksmd */
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			break;
		}
		rounds++;
		if (rounds >= opts.iterations || now_sec() >= end) {
			waitpid(pid, NULL, 0);
			break;
		}
		/* the next process enables KSM while this one exits */
		next = start_round(&next_go, &next_done, rounds * 37 % MAX_DELAY_US);
		if (write(next_go, "g", 1) != 1)
			ksft_exit_fail_msg("write: %s\n", strerror(errno));
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
			ksft_exit_fail_msg("round %lu: process %d: status %#x\n", rounds, pid, status);
		close(go);
		close(done);
		pid = next;
		go = next_go;
		done = next_done;
	}
	knobs_restore();
	ksft_print_msg("%lu rounds in %.0f s\n", rounds, now_sec() - start);
	print_stats("rounds", rounds, "stalls", stalls, NULL);
	ksft_test_result(!stalls, "ksmd scans a process that enables KSM as ksmd drops its last mm\n");
	ksft_finished();
}
