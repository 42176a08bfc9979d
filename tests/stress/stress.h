/* SPDX-License-Identifier: MIT */
/* stress.h - helpers shared by the multi-process stress tests. */
#ifndef RL_STRESS_H
#define RL_STRESS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "table.h"

#define MS 1000000ull
#define SEC 1000000000ull

/* Anonymous memory shared with children: results come back through it. */
static inline void *shared_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static inline void segment_name(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "rlshim-stress-%s-%d", what, (int)getpid());
	rl_table_unlink(buf);
}

static inline void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / SEC), (long)(ns % SEC) };

	nanosleep(&ts, NULL);
}

/* Wait for `pid`; 1 if it exited with status 0. */
static inline int reap_ok(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#endif /* RL_STRESS_H */
