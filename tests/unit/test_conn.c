/* SPDX-License-Identifier: MIT */
/* test_conn.c - the fd table and the pools of connections and hold buffers:
 * bounds, sharing between dup'ed fds, reuse without growth, chunked growth,
 * many threads at once, and fork. The pools are process-wide and never
 * shrink, so every test measures against the figures it starts from; the
 * first tests depend on running first (nothing set up yet). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"

/* conn.c's chunk sizes and limits. */
#define CONN_CHUNK 256u
#define HOLD_CHUNK 16u
#define HOLD_MAX (256u * HOLD_CHUNK)

static uint32_t round_up(uint32_t n, uint32_t chunk)
{
	return (n + chunk - 1) / chunk * chunk;
}

static struct rl_conn_stats stats(void)
{
	struct rl_conn_stats s;

	memset(&s, 0x5a, sizeof(s));
	rl_conn_stats(&s);
	return s;
}

static struct rl_fd *fd_entry(int fd)
{
	struct rl_fd *e = rl_fd_get(fd);

	assert_non_null(e);
	return e;
}

/* ---- set-up and the fd table --------------------------------------------- */

/* Must run first: before rl_conn_setup() nothing is tracked. */
static void test_not_set_up(void **state)
{
	struct rl_conn_stats s = stats();

	(void)state;
	assert_null(rl_fd_get(0));
	assert_null(rl_fd_get(5));
	assert_int_equal(rl_fd_high(), 0);
	assert_int_equal(s.fds_cap, 0);
	assert_int_equal(s.conns_live, 0);
	assert_int_equal(s.conns_cap, 0);
	assert_int_equal(s.holds_live, 0);
	assert_int_equal(s.holds_cap, 0);
}

static void test_setup_idempotent(void **state)
{
	struct rl_fd *e;

	(void)state;
	assert_int_equal(rl_conn_setup(), 0);
	e = rl_fd_get(3);
	assert_non_null(e);
	e->kind = RL_FD_IGNORED;
	e->port = 4242;
	/* Again: the same table, entries kept. */
	assert_int_equal(rl_conn_setup(), 0);
	assert_int_equal(rl_conn_setup(), 0);
	assert_ptr_equal(rl_fd_get(3), e);
	assert_int_equal(e->kind, RL_FD_IGNORED);
	assert_int_equal(e->port, 4242);
	assert_int_equal(stats().fds_cap, RL_FD_MAX);
	memset(e, 0, sizeof(*e));
}

/* Concurrent lookups of new highest fds, each round in a child (fd_high
 * only grows, so each round needs a fresh copy still near 0; this test runs
 * before test_fd_table takes it to the top). A race shows only sometimes:
 * try rounds for up to HIGH_BUDGET_NS. */
#define HIGH_THREADS 8
#define HIGH_ROUNDS 200
#define HIGH_BUDGET_NS 3000000000ll

static atomic_int high_go;

struct high_arg {
	unsigned k;
	unsigned bad;
};

static void *high_thread(void *arg)
{
	struct high_arg *a = arg;
	unsigned last = 0;

	while (!atomic_load(&high_go))
		;
	for (unsigned fd = a->k; fd < RL_FD_MAX; fd += HIGH_THREADS) {
		unsigned h;

		rl_fd_get((int)fd);
		h = rl_fd_high();
		/* Ever looked up, so never below fd; and never going down. */
		if (h < fd || h < last)
			a->bad++;
		last = h;
	}
	return NULL;
}

/* One round, in a child (fd_high only grows): 0 if it stayed monotonic. */
static int high_round(void)
{
	pthread_t t[HIGH_THREADS];
	struct high_arg a[HIGH_THREADS];
	unsigned bad = 0;

	for (unsigned i = 0; i < HIGH_THREADS; i++) {
		a[i].k = i;
		a[i].bad = 0;
		if (pthread_create(&t[i], NULL, high_thread, &a[i]))
			return 2;
	}
	atomic_store(&high_go, 1);
	for (unsigned i = 0; i < HIGH_THREADS; i++) {
		pthread_join(t[i], NULL);
		bad += a[i].bad;
	}
	/* The last lookup of all may have been lost too. */
	if (rl_fd_high() != RL_FD_MAX - 1)
		bad++;
	return bad ? 1 : 0;
}

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void test_fd_high_concurrent(void **state)
{
	unsigned before = rl_fd_high(), lost = 0;
	long long end = mono_ns() + HIGH_BUDGET_NS;
	int rounds = 0;

	(void)state;
	assert_true(before < 1000);
	for (; rounds < HIGH_ROUNDS && !lost && mono_ns() < end; rounds++) {
		int status;
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (pid == 0)
			_exit(high_round());
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_true(WEXITSTATUS(status) <= 1);
		lost += WEXITSTATUS(status);
	}
	assert_int_equal(rl_fd_high(), before);
	/* BUG: rl_fd_get() raises fd_high with a load, a compare and a plain
	 * store, not a CAS loop (or atomic max): two threads looking up new
	 * highest fds at once can both store, the lower one last, and the
	 * "highest fd ever looked up" goes down. Input: 8 threads looking up
	 * fds k, k+8, k+16, ... up to RL_FD_MAX - 1, each reading rl_fd_high()
	 * after every lookup. Expected: every read >= the fd just looked up
	 * and >= the previous read. Got: a lower value, in 4% to 100% of the
	 * rounds on a 2-CPU machine depending on its load (so this test can
	 * miss it, rarely; it cannot fail once the store is a CAS loop).
	 * close_range() walks only up to rl_fd_high(), so a lost update leaves
	 * connections above it tracked after the kernel closed their fds. */
	if (lost)
		fail_msg("fd_high went down in round %d", rounds);
}

static void test_fd_table(void **state)
{
	unsigned h0 = rl_fd_high();
	struct rl_fd *a, *b;

	(void)state;
	/* Out of range: not tracked, and not a "highest fd". */
	assert_null(rl_fd_get(-1));
	assert_null(rl_fd_get(INT_MIN));
	assert_null(rl_fd_get((int)RL_FD_MAX));
	assert_null(rl_fd_get((int)RL_FD_MAX + 1));
	assert_null(rl_fd_get(INT_MAX));
	assert_int_equal(rl_fd_high(), h0);
	/* In range: one entry per fd, new ones unknown. */
	a = fd_entry(0);
	b = fd_entry(1);
	assert_ptr_equal(b, a + 1);
	assert_ptr_equal(fd_entry(70000), a + 70000);
	assert_int_equal(fd_entry(70000)->kind, RL_FD_UNKNOWN);
	assert_int_equal(fd_entry(70000)->conn, 0);
	assert_null(rl_conn_of(fd_entry(70000)));
	/* The highest fd looked up. */
	assert_int_equal(rl_fd_high(), h0 > 70000 ? h0 : 70000);
	fd_entry(70001);
	assert_int_equal(rl_fd_high(), h0 > 70001 ? h0 : 70001);
	fd_entry(69999);
	assert_int_equal(rl_fd_high(), h0 > 70001 ? h0 : 70001);
	assert_non_null(rl_fd_get((int)RL_FD_MAX - 1));
	assert_int_equal(rl_fd_high(), RL_FD_MAX - 1);
	assert_null(rl_fd_get((int)RL_FD_MAX));
	assert_int_equal(rl_fd_high(), RL_FD_MAX - 1);
}

/* ---- connections --------------------------------------------------------- */

static void test_conn_new(void **state)
{
	struct rl_conn_stats s0 = stats(), s;
	struct rl_fd *e = fd_entry(10), *f = fd_entry(11);
	struct rl_conn *c, *c2;

	(void)state;
	assert_int_equal(e->kind, RL_FD_UNKNOWN);
	c = rl_conn_new(e);
	assert_non_null(c);
	assert_int_equal(e->kind, RL_FD_CONN);
	assert_int_not_equal(e->conn, 0);
	assert_ptr_equal(rl_conn_of(e), c);
	assert_int_equal(atomic_load(&c->refs), 1);
	assert_int_equal(c->state, RL_CONN_HTTP);
	assert_null(c->hold);
	assert_int_equal(c->http.phase, RL_HTTP_IDLE);
	assert_int_equal(rl_fd_last(e), 1);
	s = stats();
	assert_int_equal(s.conns_live, s0.conns_live + 1);
	assert_int_equal(s.conns_cap % CONN_CHUNK, 0);
	assert_true(s.conns_cap >= CONN_CHUNK);

	/* Dirty it; the last forget frees it and resets the entry. */
	c->state = RL_CONN_DONE;
	c->port = 8080;
	c->proxy = 1;
	c->http.requests = 7;
	c->verdict.rule = 3;
	e->port = 8080;
	rl_fd_forget(e);
	assert_int_equal(e->kind, RL_FD_UNKNOWN);
	assert_int_equal(e->conn, 0);
	assert_int_equal(e->port, 0);
	assert_int_equal(e->guarded, 0);
	assert_null(rl_conn_of(e));
	assert_int_equal(rl_fd_last(e), 0);
	assert_int_equal(stats().conns_live, s0.conns_live);

	/* The next one is the same memory, clean. */
	c2 = rl_conn_new(f);
	assert_ptr_equal(c2, c);
	assert_int_equal(c2->state, RL_CONN_HTTP);
	assert_int_equal(c2->port, 0);
	assert_int_equal(c2->proxy, 0);
	assert_int_equal(c2->http.requests, 0);
	assert_int_equal(c2->verdict.rule, 0);
	assert_int_equal(atomic_load(&c2->refs), 1);
	rl_fd_forget(f);
	assert_int_equal(stats().conns_live, s0.conns_live);

	/* Forgetting what is not a connection only resets the entry. */
	e->kind = RL_FD_LISTEN;
	e->port = 80;
	e->guarded = 1;
	assert_null(rl_conn_of(e));
	assert_int_equal(rl_fd_last(e), 0);
	rl_fd_forget(e);
	assert_int_equal(e->kind, RL_FD_UNKNOWN);
	assert_int_equal(e->port, 0);
	rl_fd_forget(e);
	s = stats();
	assert_int_equal(s.conns_live, s0.conns_live);
	assert_int_equal(s.holds_live, s0.holds_live);
}

static void test_share(void **state)
{
	struct rl_conn_stats s0 = stats(), s;
	struct rl_fd *a = fd_entry(20), *b = fd_entry(21), *d = fd_entry(22);
	struct rl_conn *c = rl_conn_new(a);
	struct rl_hold *h;

	(void)state;
	assert_non_null(c);
	c->port = 443;
	a->port = 443;
	rl_fd_share(b, a); /* dup */
	assert_int_equal(b->kind, RL_FD_CONN);
	assert_int_equal(b->conn, a->conn);
	assert_int_equal(b->port, 443);
	assert_ptr_equal(rl_conn_of(b), c);
	assert_int_equal(atomic_load(&c->refs), 2);
	assert_int_equal(rl_fd_last(a), 0);
	assert_int_equal(rl_fd_last(b), 0);
	rl_fd_share(d, b); /* dup of the dup */
	assert_int_equal(atomic_load(&c->refs), 3);
	assert_int_equal(stats().conns_live, s0.conns_live + 1);

	/* A head in progress, held. */
	h = rl_conn_hold(c);
	assert_non_null(h);
	memcpy(h->data, "GET / HT", 8);
	h->len = 8;

	/* Closing the original keeps the connection for the others. */
	rl_fd_forget(a);
	assert_int_equal(a->kind, RL_FD_UNKNOWN);
	assert_int_equal(a->conn, 0);
	assert_int_equal(atomic_load(&c->refs), 2);
	assert_ptr_equal(rl_conn_of(b), c);
	assert_int_equal(c->port, 443);
	assert_ptr_equal(c->hold, h);
	assert_memory_equal(h->data, "GET / HT", 8);
	rl_fd_forget(d);
	assert_int_equal(atomic_load(&c->refs), 1);
	assert_int_equal(rl_fd_last(b), 1);
	s = stats();
	assert_int_equal(s.conns_live, s0.conns_live + 1);
	assert_int_equal(s.holds_live, s0.holds_live + 1);

	/* The last one frees it, and the hold buffer with its bytes. */
	rl_fd_forget(b);
	assert_int_equal(b->kind, RL_FD_UNKNOWN);
	s = stats();
	assert_int_equal(s.conns_live, s0.conns_live);
	assert_int_equal(s.holds_live, s0.holds_live);

	/* Sharing an entry that is not a connection copies it, no more. */
	a->kind = RL_FD_LISTEN;
	a->port = 8080;
	a->guarded = 1;
	rl_fd_share(b, a);
	assert_int_equal(b->kind, RL_FD_LISTEN);
	assert_int_equal(b->port, 8080);
	assert_int_equal(b->guarded, 1);
	rl_fd_forget(a);
	rl_fd_forget(b);
	assert_int_equal(stats().conns_live, s0.conns_live);
}

static void test_reuse_no_growth(void **state)
{
	struct rl_conn_stats s0 = stats();
	struct rl_fd *e = fd_entry(30);
	struct rl_conn *first = rl_conn_new(e);
	uint32_t cap = stats().conns_cap;
	unsigned other = 0;

	(void)state;
	assert_non_null(first);
	rl_fd_forget(e);
	for (int i = 0; i < 100000; i++) {
		struct rl_conn *c = rl_conn_new(e);

		/* A stack: the one just freed comes back. */
		if (c != first)
			other++;
		rl_fd_forget(e);
	}
	assert_int_equal(other, 0);
	assert_int_equal(stats().conns_cap, cap);
	assert_int_equal(stats().conns_live, s0.conns_live);
}

/* ---- hold buffers -------------------------------------------------------- */

static void test_holds(void **state)
{
	struct rl_conn_stats s0 = stats(), s;
	struct rl_fd *e = fd_entry(40), *f = fd_entry(41);
	struct rl_conn *c = rl_conn_new(e), *c2 = rl_conn_new(f);
	struct rl_hold *h, *h2;

	(void)state;
	assert_non_null(c);
	assert_non_null(c2);
	/* Unholding without a buffer does nothing. */
	rl_conn_unhold(c);
	assert_null(c->hold);
	assert_int_equal(stats().holds_live, s0.holds_live);

	h = rl_conn_hold(c);
	assert_non_null(h);
	assert_ptr_equal(c->hold, h);
	assert_int_equal(h->len, 0);
	assert_int_equal(h->decided, 0);
	/* Twice: the same buffer, still one taken. */
	assert_ptr_equal(rl_conn_hold(c), h);
	s = stats();
	assert_int_equal(s.holds_live, s0.holds_live + 1);
	assert_int_equal(s.holds_cap % HOLD_CHUNK, 0);
	assert_true(s.holds_cap >= s.holds_live);

	/* Bytes held: unhold keeps it. */
	h->len = 5;
	rl_conn_unhold(c);
	assert_ptr_equal(c->hold, h);
	assert_int_equal(stats().holds_live, s0.holds_live + 1);
	/* Empty: given back. */
	h->len = 0;
	h->decided = 2;
	rl_conn_unhold(c);
	assert_null(c->hold);
	assert_int_equal(stats().holds_live, s0.holds_live);

	/* Taken again: the same buffer, clean. */
	h = rl_conn_hold(c);
	assert_non_null(h);
	assert_int_equal(h->len, 0);
	assert_int_equal(h->decided, 0);
	/* Another connection gets another buffer; both are whole. */
	h2 = rl_conn_hold(c2);
	assert_non_null(h2);
	assert_ptr_not_equal(h2, h);
	assert_int_equal(stats().holds_live, s0.holds_live + 2);
	memset(h->data, 0xaa, RL_HOLD_SIZE);
	memset(h2->data, 0xbb, RL_HOLD_SIZE);
	assert_int_equal(h->data[0], 0xaa);
	assert_int_equal(h->data[RL_HOLD_SIZE - 1], 0xaa);
	assert_int_equal(h2->data[RL_HOLD_SIZE - 1], 0xbb);
	rl_fd_forget(e);
	rl_fd_forget(f);
	s = stats();
	assert_int_equal(s.holds_live, s0.holds_live);
	assert_int_equal(s.conns_live, s0.conns_live);
}

/* Every buffer of the pool at once: HOLD_MAX, then NULL, then one again
 * when one is given back. */
static void test_holds_exhausted(void **state)
{
	struct rl_conn_stats s0 = stats();
	static struct rl_hold *held[HOLD_MAX];
	struct rl_conn *c;
	unsigned n = 0;
	int base = 10000;

	(void)state;
	assert_int_equal(s0.holds_live, 0);
	for (unsigned i = 0; i < HOLD_MAX; i++) {
		c = rl_conn_new(fd_entry(base + (int)i));
		assert_non_null(c);
		held[i] = rl_conn_hold(c);
		if (!held[i])
			break;
		held[i]->len = 1;
		n++;
	}
	assert_int_equal(n, HOLD_MAX);
	assert_int_equal(stats().holds_cap, HOLD_MAX);
	c = rl_conn_new(fd_entry(base + (int)HOLD_MAX));
	assert_non_null(c);
	assert_null(rl_conn_hold(c));
	assert_null(c->hold);
	assert_int_equal(stats().holds_live, HOLD_MAX);
	/* One back, one available. */
	rl_fd_forget(fd_entry(base));
	assert_ptr_equal(rl_conn_hold(c), held[0]);
	for (unsigned i = 1; i <= HOLD_MAX; i++)
		rl_fd_forget(fd_entry(base + (int)i));
	assert_int_equal(stats().holds_live, 0);
	assert_int_equal(stats().holds_cap, HOLD_MAX);
	assert_int_equal(stats().conns_live, s0.conns_live);
}

/* ---- many connections ---------------------------------------------------- */

#define MANY 5000

static int ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

static void test_many(void **state)
{
	static struct rl_conn *c[MANY];
	static uintptr_t sorted[MANY];
	struct rl_conn_stats s0 = stats(), s;
	uint32_t cap;
	int base = 1000;

	(void)state;
	for (int i = 0; i < MANY; i++) {
		c[i] = rl_conn_new(fd_entry(base + i));
		assert_non_null(c[i]);
		c[i]->port = (uint16_t)i;
		c[i]->peer.addr.bytes[0] = (uint8_t)(i >> 8);
	}
	s = stats();
	assert_int_equal(s.conns_live, s0.conns_live + MANY);
	/* Grown in whole chunks, only when empty. */
	cap = round_up(s0.conns_live + MANY, CONN_CHUNK);
	if (cap < s0.conns_cap)
		cap = s0.conns_cap;
	assert_int_equal(s.conns_cap, cap);
	/* All distinct, none overwritten by another. */
	for (int i = 0; i < MANY; i++) {
		assert_ptr_equal(rl_conn_of(fd_entry(base + i)), c[i]);
		assert_int_equal(c[i]->port, (uint16_t)i);
		assert_int_equal(c[i]->peer.addr.bytes[0], (uint8_t)(i >> 8));
		assert_int_equal(atomic_load(&c[i]->refs), 1);
		sorted[i] = (uintptr_t)c[i];
	}
	qsort(sorted, MANY, sizeof(sorted[0]), ptr_cmp);
	for (int i = 1; i < MANY; i++)
		assert_true(sorted[i] - sorted[i - 1] >=
			    sizeof(struct rl_conn));
	for (int i = 0; i < MANY; i++)
		rl_fd_forget(fd_entry(base + i));
	s = stats();
	assert_int_equal(s.conns_live, s0.conns_live);
	assert_int_equal(s.conns_cap, cap);
	/* Once grown, no more growth for as many again. */
	for (int i = 0; i < MANY; i++)
		assert_non_null(rl_conn_new(fd_entry(base + i)));
	assert_int_equal(stats().conns_cap, cap);
	for (int i = 0; i < MANY; i++)
		rl_fd_forget(fd_entry(base + i));
	assert_int_equal(stats().conns_live, s0.conns_live);
}

/* ---- threads ------------------------------------------------------------- */

#define THREADS 4
#define CYCLES 50000
#define WINDOW 64 /* connections each thread keeps open */

struct worker {
	int base;          /* its own fds: base .. base + WINDOW - 1 */
	uint16_t tag;
	atomic_uint *errors;
};

static void *churn(void *arg)
{
	struct worker *w = arg;

	for (unsigned i = 0; i < CYCLES; i++) {
		struct rl_fd *e = rl_fd_get(w->base + (int)(i % WINDOW));
		struct rl_conn *c;

		if (!e) {
			atomic_fetch_add(w->errors, 1);
			return NULL;
		}
		c = rl_conn_of(e);
		if (c) {
			/* Still ours: nobody was handed it meanwhile. */
			if (c->port != w->tag || atomic_load(&c->refs) != 1 ||
			    (c->hold && (c->hold->len != 1 ||
					 c->hold->data[0] != (uint8_t)w->tag)))
				atomic_fetch_add(w->errors, 1);
			rl_fd_forget(e);
		}
		c = rl_conn_new(e);
		if (!c || atomic_load(&c->refs) != 1 || c->port != 0 ||
		    c->hold) {
			atomic_fetch_add(w->errors, 1);
			return NULL;
		}
		c->port = w->tag;
		if (i % 8 == 0) {
			struct rl_hold *h = rl_conn_hold(c);

			if (!h || h->len != 0) {
				atomic_fetch_add(w->errors, 1);
				return NULL;
			}
			h->data[0] = (uint8_t)w->tag;
			h->len = 1;
		}
	}
	for (int k = 0; k < (int)WINDOW; k++)
		rl_fd_forget(rl_fd_get(w->base + k));
	return NULL;
}

static void test_threads(void **state)
{
	struct rl_conn_stats s0 = stats(), s;
	struct worker w[THREADS];
	pthread_t t[THREADS];
	atomic_uint errors = 0;

	(void)state;
	for (int i = 0; i < THREADS; i++) {
		w[i].base = 200000 + i * 1000;
		w[i].tag = (uint16_t)(0x1100 + i);
		w[i].errors = &errors;
		assert_int_equal(pthread_create(&t[i], NULL, churn, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(atomic_load(&errors), 0);
	s = stats();
	assert_int_equal(s.conns_live, s0.conns_live);
	assert_int_equal(s.holds_live, s0.holds_live);
	assert_int_equal(s.conns_cap % CONN_CHUNK, 0);
	assert_true(s.conns_cap >= THREADS * WINDOW);
	for (int i = 0; i < THREADS; i++)
		for (int k = 0; k < (int)WINDOW; k++)
			assert_int_equal(fd_entry(w[i].base + k)->kind,
					 RL_FD_UNKNOWN);
}

/* ---- fork ---------------------------------------------------------------- */

/* In the child: allocate and free, grow the pool, close what was inherited.
 * Returns an exit code, 0 if all went as it should. */
static int child_work(const struct rl_conn_stats *s0, int inherited_base)
{
	struct rl_conn_stats s;

	for (int i = 0; i < 1000; i++) {
		struct rl_fd *e = rl_fd_get(310);

		if (!e || !rl_conn_new(e) || !rl_conn_hold(rl_conn_of(e)))
			return 10;
		rl_fd_forget(e);
	}
	for (int i = 0; i < 600; i++)
		if (!rl_conn_new(rl_fd_get(400 + i)))
			return 11;
	for (int i = 0; i < 600; i++)
		rl_fd_forget(rl_fd_get(400 + i));
	for (int i = 0; i < 3; i++)
		rl_fd_forget(rl_fd_get(inherited_base + i));
	rl_conn_stats(&s);
	if (s.conns_live != s0->conns_live || s.holds_live != s0->holds_live)
		return 12;
	return 0;
}

static void test_fork(void **state)
{
	struct rl_conn_stats s0 = stats(), s1, s2;
	struct rl_conn *c[3], *n;
	struct rl_hold *h;
	int status;
	pid_t pid;

	(void)state;
	for (int i = 0; i < 3; i++) {
		c[i] = rl_conn_new(fd_entry(300 + i));
		assert_non_null(c[i]);
		c[i]->port = (uint16_t)(1000 + i);
	}
	h = rl_conn_hold(c[1]);
	assert_non_null(h);
	memcpy(h->data, "abc", 3);
	h->len = 3;
	s1 = stats();

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_work(&s0, 300));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	/* The parent's pools are as they were. */
	s2 = stats();
	assert_int_equal(s2.conns_live, s1.conns_live);
	assert_int_equal(s2.conns_cap, s1.conns_cap);
	assert_int_equal(s2.holds_live, s1.holds_live);
	assert_int_equal(s2.holds_cap, s1.holds_cap);
	for (int i = 0; i < 3; i++) {
		assert_ptr_equal(rl_conn_of(fd_entry(300 + i)), c[i]);
		assert_int_equal(c[i]->port, 1000 + i);
		assert_int_equal(atomic_load(&c[i]->refs), 1);
	}
	assert_ptr_equal(c[1]->hold, h);
	assert_int_equal(h->len, 3);
	assert_memory_equal(h->data, "abc", 3);
	/* ... and its free list too: a new one is none of the live ones. */
	n = rl_conn_new(fd_entry(303));
	assert_non_null(n);
	for (int i = 0; i < 3; i++)
		assert_ptr_not_equal(n, c[i]);
	assert_ptr_not_equal(rl_conn_hold(n), h);
	for (int i = 0; i < 4; i++)
		rl_fd_forget(fd_entry(300 + i));
	s2 = stats();
	assert_int_equal(s2.conns_live, s0.conns_live);
	assert_int_equal(s2.holds_live, s0.holds_live);
}

/* Fork while other threads are in the middle of pushes and pops: the child
 * (one thread, whatever the others were doing) must still allocate and
 * free, never hang. Items the others held at the fork are simply not
 * free in the child. */
static atomic_int stop;

static void *spin(void *arg)
{
	int base = *(const int *)arg;

	for (unsigned i = 0; !atomic_load(&stop); i++) {
		struct rl_fd *e = rl_fd_get(base + (int)(i % 16));

		rl_fd_forget(e);
		if (rl_conn_new(e) && i % 4 == 0)
			rl_conn_hold(rl_conn_of(e));
	}
	for (int k = 0; k < 16; k++)
		rl_fd_forget(rl_fd_get(base + k));
	return NULL;
}

static int child_spin(void)
{
	alarm(10); /* a hang is a failure, not a stuck test run */
	for (int i = 0; i < 2000; i++) {
		struct rl_fd *e = rl_fd_get(500 + i % 32);

		rl_fd_forget(e);
		if (!rl_conn_new(e))
			return 20;
		if (i % 2 == 0 && !rl_conn_hold(rl_conn_of(e)))
			return 21;
	}
	for (int k = 0; k < 32; k++)
		rl_fd_forget(rl_fd_get(500 + k));
	return 0;
}

static void test_fork_while_busy(void **state)
{
	struct rl_conn_stats s0 = stats(), s;
	int base[2] = { 600, 700 };
	pthread_t t[2];

	(void)state;
	atomic_store(&stop, 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, spin, &base[i]),
				 0);
	for (int r = 0; r < 20; r++) {
		int status;
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (pid == 0)
			_exit(child_spin());
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status))
			fail_msg("child killed by signal %d", WTERMSIG(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	s = stats();
	assert_int_equal(s.conns_live, s0.conns_live);
	assert_int_equal(s.holds_live, s0.holds_live);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* in this order: the first two see the state before set-up */
		cmocka_unit_test(test_not_set_up),
		cmocka_unit_test(test_setup_idempotent),
		cmocka_unit_test(test_fd_high_concurrent),
		cmocka_unit_test(test_fd_table),
		cmocka_unit_test(test_conn_new),
		cmocka_unit_test(test_share),
		cmocka_unit_test(test_reuse_no_growth),
		cmocka_unit_test(test_holds),
		cmocka_unit_test(test_holds_exhausted),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_fork_while_busy),
	};

	return cmocka_run_group_tests_name("conn", tests, NULL, NULL);
}
