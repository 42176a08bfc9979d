/* SPDX-License-Identifier: MIT */
/*
 * bench_fleet.c - the load of tools/bench/bench_fleet.py: decisions on the
 * segments of several hosts, each with its own rlshimd, for many keys.
 *
 *   bench_fleet -n HOSTS -k KEYS -r OFFERED/s -t SECONDS [-w WARMUP_S]
 *               [-R RATE/s] [-b BURST] [-s] [-T THREADS] SHM_PREFIX
 *
 * OFFERED 0: no decisions at all, the agents' idle rounds alone (counted
 * as ever: bench_cost.py's idle cells).
 *
 * The segments are SHM_PREFIX-0 .. SHM_PREFIX-(HOSTS - 1), made by the
 * agents bench_fleet.py starts (each with the one rule `fleet`: RATE/s,
 * burst BURST, key = ip; -s: `sync = strict`). Once every agent syncs
 * (and, -s, answers asks), this process registers the same rule on each
 * and decides, from THREADS threads (1; -s: 32) paced together at OFFERED/s
 * (every 1 ms, the decisions due: a thread behind catches up back to back,
 * so an unreachable rate shows as less achieved), each decision for a key
 * drawn uniformly from KEYS IPv6 /64s (as bench_redis.c's) on a host drawn
 * uniformly: rl_table_take(), or with -s rl_table_take_strict() with a
 * deadline of now + 100 ms ([redis] timeout's default). Each thread owns
 * the keys i with i % THREADS == its number, so the reference below needs
 * no lock.
 *
 * Accuracy: beside each decision, one exact GCRA per key in this process
 * (the same rate and burst, the same arrival times) says what one limiter
 * for the whole fleet would have admitted: `ideal`.
 *
 * Output on stdout, one line each: `MEASURE` when the window starts (after
 * WARMUP_S), `END` when it ends, SECONDS later. The load goes on, no
 * longer counted, until stdin gives a line or ends, so that the caller
 * reads Redis's counters at both ends under load; then `RESULT {json}`:
 * decisions, admitted, ideal, fallbacks (-s: -EAGAIN, decided here), the
 * window's length, the agents' sync rounds in it (their sum) and how many
 * said at its end that their store was down; exit 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "shm.h"
#include "table.h"

#define KEY_LEN 17                     /* family + 16 bytes: bench_redis's */
#define STRICT_TIMEOUT_NS 100000000ull /* [redis] timeout's default */
#define READY_TIMEOUT_NS 30000000000ull
#define MAX_HOSTS 256
#define EDGE_NS 1000000ull /* a refusal this close to the bucket's edge:
			      within the hosts' clocks' disagreement */

enum phase { PHASE_WARMUP, PHASE_MEASURE, PHASE_DRAIN, PHASE_STOP };

static unsigned nhosts, nkeys, nthreads, strict;
static uint64_t offered, interval_ns, burst = 2, rate = 1;
static struct rl_table *tables[MAX_HOSTS];
static unsigned rules[MAX_HOSTS];
static uint8_t (*keys)[KEY_LEN];
static _Atomic int phase;

struct worker {
	pthread_t thread;
	unsigned id;
	uint64_t rate;          /* decisions/s of this thread */
	uint64_t rng;
	uint64_t *tat;          /* the reference: one per key it owns */
	uint64_t decisions, admitted, ideal, fallbacks; /* in the window */
	uint64_t wrong;         /* refused, where the exact limiter admits */
	uint64_t repaid;        /* ... of them after the fleet had admitted
				   the key more than the exact limiter had:
				   the async overshoot the contract allows
				   (burst + N - 1), paid back */
	uint64_t edge;          /* ... the others within EDGE_NS of the
				   exact limiter's own refusal */
	int32_t *ahead;         /* per key: admitted by the fleet less by the
				   exact limiter, since the start */
	struct trace *trace;    /* RL_FLEET_TRACE: per key, its last events */
};

/* RL_FLEET_TRACE=1: each key's last TRACE_N decisions, printed to stderr
 * for each refusal the exact limiter admits (what the fleet's state said
 * before and after each, beside the reference's). */
#define TRACE_N 8
struct trace_ev {
	uint64_t t;             /* ns since the first decision */
	int64_t ref_debt, before, after; /* µs past now: reference, slot */
	uint8_t host, ok, allowed, prov_before, prov_after, rc;
	uint32_t adm_before;
	uint64_t retry_us;
};
struct trace {
	unsigned n;
	struct trace_ev ev[TRACE_N];
};
static int tracing;
static uint64_t t_first;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* The exact limiter: GCRA, burst requests at once, then one per interval. */
static int reference(uint64_t *tat, uint64_t now)
{
	if (*tat > now + (burst - 1) * interval_ns)
		return 0;
	*tat = (*tat > now ? *tat : now) + interval_ns;
	return 1;
}

static void decide(struct worker *w, int counting)
{
	/* the keys of thread w: id, id + T, id + 2T, ... below nkeys */
	uint64_t mine = (nkeys - w->id + nthreads - 1) / nthreads;
	uint64_t j = rng_next(&w->rng) % mine;
	unsigned host = (unsigned)(rng_next(&w->rng) % nhosts);
	const uint8_t *key = keys[w->id + j * nthreads];
	uint64_t now = rl_time_now_ns();
	struct rl_result res;
	uint64_t ref_before = w->tat[j];
	struct trace_ev ev = { 0 };
	struct rl_slot *slot = NULL;

	if (tracing) {
		struct rl_slot_view v;

		if (rl_table_key_view(tables[host], rules[host], key, KEY_LEN,
				      now, &v) == 1 &&
		    v.index < rl_table_capacity(tables[host])) {
			slot = &tables[host]->slots[v.index];
			ev.before = ((int64_t)atomic_load(&slot->state) -
				     (int64_t)now) / 1000;
			ev.prov_before = atomic_load(&slot->provisional);
			ev.adm_before = atomic_load(&slot->sync_admitted);
		} else {
			ev.before = -999999999;
		}
	}
	int ok = reference(&w->tat[j], now), rc = 0;

	if (strict)
		rc = rl_table_take_strict(tables[host], rules[host], key,
					  KEY_LEN, 1, now,
					  now + STRICT_TIMEOUT_NS, &res, NULL);
	else /* as the shim decides an async token bucket: with lends */
		rc = rl_table_take_lend(tables[host], rules[host], key,
					KEY_LEN, 1, now,
					now + STRICT_TIMEOUT_NS, &res, NULL);
	if (tracing) {
		struct trace *tr = &w->trace[j];

		if (slot) {
			ev.after = ((int64_t)atomic_load(&slot->state) -
				    (int64_t)now) / 1000;
			ev.prov_after = atomic_load(&slot->provisional);
		}
		ev.t = now - t_first;
		ev.ref_debt = ((int64_t)ref_before - (int64_t)now) / 1000;
		ev.host = (uint8_t)host;
		ev.ok = (uint8_t)ok;
		ev.allowed = (uint8_t)res.allowed;
		ev.rc = (uint8_t)(rc < 0 ? -rc : rc);
		ev.retry_us = res.allowed ? 0 : res.retry_after_ns / 1000;
		tr->ev[tr->n++ % TRACE_N] = ev;
		if (counting && ok && !res.allowed) {
			fprintf(stderr, "TRACE %s key %llu i=%u t0=%llu:",
				w->ahead[j] > 0 ? "repaid" :
				ref_before + EDGE_NS > now + (burst - 1) * interval_ns ? "edge" : "other",
				(unsigned long long)(w->id + j * nthreads),
				slot ? (unsigned)(slot - tables[host]->slots) : 0,
				(unsigned long long)(t_first / 1000));
			for (unsigned i = tr->n > TRACE_N ? tr->n - TRACE_N : 0;
			     i < tr->n; i++) {
				const struct trace_ev *e = &tr->ev[i % TRACE_N];

				fprintf(stderr, " [t=%.3f h%u ref=%lld ok=%u "
					"adm=%u rc=%u st=%lld/p%u->%lld/p%u "
					"sa=%x ra=%llu]",
					(double)e->t / 1e9, e->host,
					(long long)e->ref_debt, e->ok,
					e->allowed, e->rc, (long long)e->before,
					e->prov_before, (long long)e->after,
					e->prov_after, e->adm_before,
					(unsigned long long)e->retry_us);
			}
			fprintf(stderr, "\n");
		}
	}
	if (!counting) {
		w->ahead[j] += (int32_t)res.allowed - ok;
		return;
	}
	w->decisions++;
	w->admitted += res.allowed;
	w->ideal += (uint64_t)ok;
	w->fallbacks += rc == -EAGAIN;
	if (ok && !res.allowed) {
		w->wrong++;
		if (w->ahead[j] > 0)
			w->repaid++;
		else if (ref_before + EDGE_NS > now + (burst - 1) * interval_ns)
			w->edge++;
	}
	w->ahead[j] += (int32_t)res.allowed - ok;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t start = mono_ns(), done = 0;

	for (uint64_t tick = 1;; tick++) {
		int p = atomic_load(&phase);
		uint64_t due = tick * w->rate / 1000, next;
		struct timespec ts;

		if (p == PHASE_STOP)
			break;
		/* a phase is seen within 64 decisions, even far behind */
		while (done < due) {
			decide(w, p == PHASE_MEASURE);
			if (++done % 64 == 0 && atomic_load(&phase) != p)
				break;
		}
		next = start + tick * 1000000ull;
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	return NULL;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull),
			       (long)(ns % 1000000000ull) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Every segment made, its agent syncing (and answering asks, -s). */
static int attach(const char *prefix)
{
	uint64_t want = RL_AGENT_SYNC | (strict ? RL_AGENT_STRICT : RL_AGENT_LEND);
	uint64_t deadline = mono_ns() + READY_TIMEOUT_NS;
	const struct rl_rule_def def = {
		.name = "fleet", .algorithm = RL_ALGO_GCRA,
		.rate = { 1000000000ull, (uint32_t)rate, (uint32_t)burst },
	};

	for (unsigned i = 0; i < nhosts; i++) {
		char name[128];

		snprintf(name, sizeof(name), "%s-%u", prefix, i);
		for (;;) {
			struct rl_table_agent h;

			if (!tables[i] &&
			    rl_table_open(name, 0, 0, &tables[i], NULL))
				tables[i] = NULL;
			if (tables[i]) {
				rl_table_agent_read(tables[i], &h);
				if (h.heartbeat_ns && h.syncs > 0 &&
				    (h.flags & want) == want &&
				    !(h.flags & RL_AGENT_STORE_DOWN))
					break;
			}
			if (mono_ns() > deadline) {
				fprintf(stderr, "bench_fleet: %s: no agent "
					"syncing\n", name);
				return -EIO;
			}
			sleep_ns(10000000ull);
		}
		if (rl_table_rule(tables[i], &def, &rules[i])) {
			fprintf(stderr, "bench_fleet: %s: the rule\n", name);
			return -EIO;
		}
	}
	return 0;
}

static uint64_t syncs(void)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < nhosts; i++) {
		struct rl_table_agent h;

		rl_table_agent_read(tables[i], &h);
		n += h.syncs;
	}
	return n;
}

/* Agents that say their store is down. */
static unsigned down(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < nhosts; i++) {
		struct rl_table_agent h;

		rl_table_agent_read(tables[i], &h);
		n += !!(h.flags & RL_AGENT_STORE_DOWN);
	}
	return n;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_fleet -n HOSTS -k KEYS -r OFFERED -t "
		"SECONDS [-w WARMUP] [-R RATE] [-b BURST] [-s] [-T THREADS] "
		"SHM_PREFIX\n");
}

int main(int argc, char **argv)
{
	unsigned seconds = 0, warmup = 2;
	struct worker *w;
	uint64_t t0, t1, s0, s1, tot[7] = { 0 };
	unsigned ndown;
	char line[64];
	int opt;

	while ((opt = getopt(argc, argv, "n:k:r:t:w:R:b:sT:")) != -1) {
		unsigned long v = strtoul(optarg ? optarg : "0", NULL, 10);

		switch (opt) {
		case 'n':
			nhosts = (unsigned)v;
			break;
		case 'k':
			nkeys = (unsigned)v;
			break;
		case 'r':
			offered = v;
			break;
		case 't':
			seconds = (unsigned)v;
			break;
		case 'w':
			warmup = (unsigned)v;
			break;
		case 'R':
			rate = v;
			break;
		case 'b':
			burst = v;
			break;
		case 's':
			strict = 1;
			break;
		case 'T':
			nthreads = (unsigned)v;
			break;
		default:
			usage();
			return 2;
		}
	}
	if (!nthreads)
		nthreads = strict ? 32 : 8; /* a lend waits, as a strict ask */
	if (!offered)
		nthreads = 0; /* idle: the agents' rounds alone (bench_cost.py) */
	if (optind + 1 != argc || !nhosts || nhosts > MAX_HOSTS || !nkeys ||
	    !seconds || !rate || !burst || nthreads > nkeys ||
	    nthreads > 256) {
		usage();
		return 2;
	}
	interval_ns = 1000000000ull / rate;
	tracing = getenv("RL_FLEET_TRACE") != NULL;
	t_first = rl_time_now_ns();
	keys = calloc(nkeys, sizeof(*keys));
	w = calloc(nthreads + 1, sizeof(*w));
	if (!keys || !w)
		return 1;
	for (unsigned i = 0; i < nkeys; i++) {
		static const uint8_t prefix[4] = { 0x20, 0x01, 0x0d, 0xb8 };

		keys[i][0] = RL_AF_INET6;
		memcpy(keys[i] + 1, prefix, sizeof(prefix));
		keys[i][5] = (uint8_t)(i >> 24);
		keys[i][6] = (uint8_t)(i >> 16);
		keys[i][7] = (uint8_t)(i >> 8);
		keys[i][8] = (uint8_t)i;
	}
	if (attach(argv[optind]))
		return 1;
	for (unsigned i = 0; i < nthreads; i++) {
		w[i].id = i;
		w[i].rate = offered / nthreads + (i < offered % nthreads);
		w[i].rng = 0x9E3779B97F4A7C15ull * (i + 1) ^ offered;
		w[i].tat = calloc(nkeys / nthreads + 1, sizeof(uint64_t));
		w[i].ahead = calloc(nkeys / nthreads + 1, sizeof(int32_t));
		w[i].trace = tracing ? calloc(nkeys / nthreads + 1,
					      sizeof(struct trace))
				     : NULL;
		if (!w[i].tat || !w[i].ahead || (tracing && !w[i].trace) ||
		    pthread_create(&w[i].thread, NULL, worker_main, &w[i])) {
			fprintf(stderr, "bench_fleet: cannot start a thread\n");
			return 1;
		}
	}
	sleep_ns(warmup * 1000000000ull);
	s0 = syncs();
	t0 = mono_ns();
	atomic_store(&phase, PHASE_MEASURE);
	printf("MEASURE\n");
	fflush(stdout);
	sleep_ns(seconds * 1000000000ull);
	atomic_store(&phase, PHASE_DRAIN);
	t1 = mono_ns();
	s1 = syncs();
	ndown = down();
	printf("END\n");
	fflush(stdout);
	/* what each thread counted is its own until it sees the phase: a
	 * decision in flight may still add to it, read after the join */
	if (!fgets(line, sizeof(line), stdin))
		line[0] = '\0';
	atomic_store(&phase, PHASE_STOP);
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(w[i].thread, NULL);
		tot[0] += w[i].decisions;
		tot[1] += w[i].admitted;
		tot[2] += w[i].ideal;
		tot[3] += w[i].fallbacks;
		tot[4] += w[i].wrong;
		tot[5] += w[i].repaid;
		tot[6] += w[i].edge;
	}
	printf("RESULT {\"seconds\": %.6f, \"decisions\": %llu, \"admitted\": "
	       "%llu, \"ideal\": %llu, \"fallbacks\": %llu, \"syncs\": %llu, "
	       "\"threads\": %u, \"down\": %u, \"wrong\": %llu, "
	       "\"wrong_repaid\": %llu, \"wrong_edge\": %llu}\n",
	       (double)(t1 - t0) / 1e9,
	       (unsigned long long)tot[0], (unsigned long long)tot[1],
	       (unsigned long long)tot[2], (unsigned long long)tot[3],
	       (unsigned long long)(s1 - s0), nthreads, ndown,
	       (unsigned long long)tot[4], (unsigned long long)tot[5],
	       (unsigned long long)tot[6]);
	fflush(stdout);
	for (unsigned i = 0; i < nhosts; i++)
		rl_table_close(tables[i]);
	return 0;
}
