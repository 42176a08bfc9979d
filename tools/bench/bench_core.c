/* SPDX-License-Identifier: MIT */
/*
 * bench_core.c - decisions per second of the shared table against the
 * classic design, in the same run.
 *
 * The baseline is what a per-key x/time/rate would be in C: one
 * process-shared mutex over an open-addressing hash map of token buckets
 * (tokens as a double and the time of the last update, refilled on each
 * call), in shared memory so that processes share it as they share the
 * table. Both hash the key with the same SipHash, so the difference is the
 * design: lock-free CAS on one word against a lock around everything.
 *
 *   bench_core [-n DECISIONS] [-w WORKLOAD] [-d DESIGN] [-r ROUNDS] [-s]
 *     WORKLOAD: 1proc | 2proc-distinct | 2proc-same  (default: all)
 *     DESIGN:   rlshim | mutex                        (default: both)
 *     ROUNDS:   runs of each (workload, design), the two designs
 *               interleaved, their order swapped every round (default 5;
 *               1 with -d, so that a count under callgrind is of N)
 *     -s:       as with an agent syncing the table (RL_AGENT_SYNC, this
 *               host alone): the general path, which counts for the agent
 *
 * Prints one markdown row per (workload, design), the median of its rounds,
 * then the ratios: the median of the rounds' ratios, each of two runs next
 * to each other in time, which on a shared machine drifts less than either.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hash.h"
#include "table.h"

#define KEYS 1024u
#define MAP_SLOTS 4096u

/* ---- the baseline: a mutex over a hash map of token buckets ------------- */

struct bucket {
	uint64_t hash; /* 0 = empty */
	double tokens;
	uint64_t last_ns;
};

struct mutex_map {
	pthread_mutex_t lock;
	uint64_t seed[2];
	double rate_per_ns;
	double burst;
	struct bucket b[MAP_SLOTS];
};

static struct mutex_map *map_new(double rate_per_sec, double burst)
{
	struct mutex_map *m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_mutexattr_t a;

	if (m == MAP_FAILED)
		return NULL;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&m->lock, &a);
	m->seed[0] = 0x1234;
	m->seed[1] = 0x5678;
	m->rate_per_ns = rate_per_sec / 1e9;
	m->burst = burst;
	return m;
}

/* x/time/rate's Allow(): refill by elapsed time, take one if there. */
static int map_allow(struct mutex_map *m, const void *key, size_t len,
		     uint64_t now)
{
	uint64_t h = rl_hash_sip13(m->seed, key, len) | 1;
	uint32_t i = (uint32_t)h & (MAP_SLOTS - 1);
	struct bucket *b;
	int ok;

	pthread_mutex_lock(&m->lock);
	for (;; i = (i + 1) & (MAP_SLOTS - 1)) {
		b = &m->b[i];
		if (b->hash == h)
			break;
		if (b->hash == 0) {
			b->hash = h;
			b->tokens = m->burst;
			b->last_ns = now;
			break;
		}
	}
	if (now > b->last_ns) {
		b->tokens += (double)(now - b->last_ns) * m->rate_per_ns;
		if (b->tokens > m->burst)
			b->tokens = m->burst;
		b->last_ns = now;
	}
	ok = b->tokens >= 1.0;
	if (ok)
		b->tokens -= 1.0;
	pthread_mutex_unlock(&m->lock);
	return ok;
}

/* ---- the run ------------------------------------------------------------- */

enum design { D_RLSHIM, D_MUTEX };

struct ctx {
	enum design design;
	struct rl_table *table;
	unsigned rule;
	struct mutex_map *map;
	char keys[KEYS][8];
};

/* Decide `n` times over `nkeys` keys starting at `first`; returns allowed. */
static uint64_t loop(struct ctx *c, uint64_t n, unsigned first, unsigned nkeys)
{
	uint64_t allowed = 0, now = 0;
	unsigned k = 0;

	for (uint64_t i = 0; i < n; i++) {
		const char *key = c->keys[first + k];

		/* The clock is read once per 64 decisions for both designs: it
		 * costs the same to each (27 ns a read on a VM with kvm-clock)
		 * and is reported on its own. */
		if ((i & 63) == 0)
			now = rl_time_now_ns();

		if (++k == nkeys)
			k = 0;
		if (c->design == D_RLSHIM) {
			struct rl_result r;

			rl_table_take(c->table, c->rule, key, 7, 1, now, &r);
			allowed += (uint64_t)r.allowed;
		} else {
			allowed += (uint64_t)map_allow(c->map, key, 7, now);
		}
	}
	return allowed;
}

struct workload {
	const char *name;
	unsigned procs;
	int same_key;
};

static const struct workload workloads[] = {
	{ "1proc", 1, 0 },
	{ "2proc-distinct", 2, 0 },
	{ "2proc-same", 2, 1 },
};

/* Wall time of `procs` processes deciding `n` times each, in ns. */
static uint64_t run(struct ctx *c, const struct workload *w, uint64_t n)
{
	pid_t pids[2];
	uint64_t t0 = rl_time_now_ns();

	if (w->procs == 1) {
		/* In this process, so that callgrind counts it. */
		loop(c, n, 0, KEYS);
		return rl_time_now_ns() - t0;
	}
	for (unsigned p = 0; p < w->procs; p++) {
		pids[p] = fork();
		if (pids[p] < 0) {
			perror("fork");
			exit(1);
		}
		if (pids[p] == 0) {
			/* distinct: each process its half of the keys */
			unsigned first = w->same_key ? 0 : p * (KEYS / 2);
			unsigned nkeys = w->same_key ? 1 : KEYS / 2;

			loop(c, n, first, nkeys);
			_exit(0);
		}
	}
	for (unsigned p = 0; p < w->procs; p++)
		waitpid(pids[p], NULL, 0);
	return rl_time_now_ns() - t0;
}

#define ROUNDS_MAX 21

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	struct rl_err e;
	const char *only_w = NULL, *only_d = NULL;
	uint64_t n = 5000000;
	double ns_per[3][2] = { { 0 } }, ratio[3] = { 0 };
	unsigned rounds = 0;
	int syncing = 0;
	char seg[64];
	struct ctx c;
	int opt;

	while ((opt = getopt(argc, argv, "n:w:d:r:s")) != -1) {
		switch (opt) {
		case 'n': n = strtoull(optarg, NULL, 10); break;
		case 'w': only_w = optarg; break;
		case 'd': only_d = optarg; break;
		case 'r': rounds = (unsigned)strtoul(optarg, NULL, 10); break;
		case 's': syncing = 1; break;
		default:
			fprintf(stderr, "usage: bench_core [-n N] [-w WORKLOAD] "
				"[-d rlshim|mutex] [-r ROUNDS] [-s]\n");
			return 2;
		}
	}
	if (!rounds)
		rounds = only_d ? 1 : 5;
	if (rounds > ROUNDS_MAX) {
		fprintf(stderr, "bench_core: 1 to %d rounds\n", ROUNDS_MAX);
		return 2;
	}
	memset(&c, 0, sizeof(c));
	for (unsigned i = 0; i < KEYS; i++)
		snprintf(c.keys[i], sizeof(c.keys[i]), "k%06u", i);
	snprintf(seg, sizeof(seg), "rlshim-bench-%d", (int)getpid());
	/* A rate that never limits: every decision is a full update. */
	{
		struct rl_rule_def def = { .name = "bench", .algorithm = RL_ALGO_GCRA,
				   .rate = { 1000000000ull, 1000000000u,
					     1000000000u } };

		if (rl_table_open(seg, 65536, RL_TABLE_CREATE, &c.table, &e)) {
			fprintf(stderr, "bench_core: %s\n", e.msg);
			return 1;
		}
		if (rl_table_rule(c.table, &def, &c.rule)) {
			fprintf(stderr, "bench_core: cannot register the rule\n");
			return 1;
		}
		if (syncing)
			rl_table_agent_flags_change(c.table, RL_AGENT_SYNC, 0);
	}
	c.map = map_new(1e9, 1e9);
	if (!c.map)
		return 1;
	/* Warm both: keys present, pages touched. */
	c.design = D_RLSHIM;
	loop(&c, KEYS * 4, 0, KEYS);
	c.design = D_MUTEX;
	loop(&c, KEYS * 4, 0, KEYS);

	{
		uint64_t t0 = rl_time_now_ns(), sink = 0;

		for (int i = 0; i < 1000000; i++)
			sink += rl_time_now_ns();
		printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns per call "
		       "(not included below)%s\n\n",
		       (double)(rl_time_now_ns() - t0) / 1e6, sink ? "" : " ");
	}
	printf("| workload | design | decisions/s (all processes) | ns per decision (per process) |\n");
	printf("|---|---|---:|---:|\n");
	for (unsigned wi = 0; wi < 3; wi++) {
		const struct workload *w = &workloads[wi];
		double per[2][ROUNDS_MAX], ratios[ROUNDS_MAX];

		if (only_w && strcmp(only_w, w->name))
			continue;
		for (unsigned r = 0; r < rounds; r++) {
			for (int i = 0; i < 2; i++) {
				/* rlshim first in even rounds, the mutex in odd */
				int d = (int)(r & 1) ^ i;

				per[d][r] = 0;
				if (only_d && strcmp(only_d, d ? "mutex" : "rlshim"))
					continue;
				c.design = (enum design)d;
				per[d][r] = (double)run(&c, w, n) / (double)n;
			}
			ratios[r] = per[0][r] > 0 ? per[1][r] / per[0][r] : 0;
		}
		for (int d = 0; d < 2; d++) {
			if (only_d && strcmp(only_d, d ? "mutex" : "rlshim"))
				continue;
			ns_per[wi][d] = median(per[d], rounds);
			printf("| %s | %s | %.1f M | %.1f |\n", w->name,
			       d ? "mutex + hash map" : "rlshim table",
			       (double)w->procs / ns_per[wi][d] * 1e3,
			       ns_per[wi][d]);
		}
		ratio[wi] = median(ratios, rounds);
	}
	if (!only_d) {
		printf("\n| workload | rlshim speed / mutex speed (median of %u "
		       "rounds) |\n|---|---:|\n", rounds);
		for (unsigned wi = 0; wi < 3; wi++)
			if (ratio[wi] > 0)
				printf("| %s | %.2fx |\n", workloads[wi].name,
				       ratio[wi]);
	}
	rl_table_close(c.table);
	rl_table_unlink(seg);
	return 0;
}
