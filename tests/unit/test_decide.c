/* SPDX-License-Identifier: MIT */
/*
 * test_decide.c - the decision's fast path against what it stands in for:
 * SipHash-1-3 against its vectors and a plain implementation, the keyed
 * state per rule, the reciprocal against the division, the inline GCRA
 * against rl_gcra_step, the fast path against the general one (the same
 * answers and counts), and the CPU a count lands in, with rseq and without.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "algo.h"
#include "hash.h"
#include "shm.h"
#include "slot.h"
#include "table.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define T0 (2057 * 3600 * SEC)

static char seg[2][64];

static int setup(void **state)
{
	static int n;

	(void)state;
	for (int i = 0; i < 2; i++) {
		snprintf(seg[i], sizeof(seg[i]), "rlshim-decide-%d-%d-%d",
			 (int)getpid(), n, i);
		rl_table_unlink(seg[i]);
	}
	n++;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < 2; i++)
		rl_table_unlink(seg[i]);
	return 0;
}

/* A reproducible stream of numbers (xorshift64*). */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

/* ---- the hash ------------------------------------------------------------------ */

/* SipHash-1-3 as the paper writes it: a byte at a time, nothing kept. */
static uint64_t sip13_plain(const uint64_t k[2], const uint8_t *in, size_t len)
{
	uint64_t v0 = 0x736f6d6570736575ull ^ k[0];
	uint64_t v1 = 0x646f72616e646f6dull ^ k[1];
	uint64_t v2 = 0x6c7967656e657261ull ^ k[0];
	uint64_t v3 = 0x7465646279746573ull ^ k[1];
	size_t i = 0;

	for (;;) {
		uint64_t m = 0;
		size_t n = len - i < 8 ? len - i : 8;

		for (size_t j = 0; j < n; j++)
			m |= (uint64_t)in[i + j] << (8 * j);
		if (n < 8)
			m |= (uint64_t)len << 56;
		v3 ^= m;
		RL_SIPROUND;
		v0 ^= m;
		i += n;
		if (n < 8)
			break;
	}
	v2 ^= 0xff;
	RL_SIPROUND;
	RL_SIPROUND;
	RL_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* Key 00..0f over 00 01 02 ...: the first is the published SipHash-1-3
 * vector of the empty message (Rust's SipHasher13), the others what the
 * byte-at-a-time implementation this table shipped with gave. */
static void test_sip13_vectors(void **state)
{
	static const struct {
		size_t len;
		uint64_t h;
	} v[] = {
		{ 0, 0xabac0158050fc4dcull },  { 1, 0xc9f49bf37d57ca93ull },
		{ 3, 0x8bf80ab8e7ddf7fbull },  { 4, 0xcf75576088d38328ull },
		{ 7, 0xd3927d989bb11140ull },  { 8, 0x369095118d299a8eull },
		{ 15, 0xd320d86d2a519956ull }, { 16, 0xcc4fdd1a7d908b66ull },
		{ 17, 0x9cf2689063dbd80cull }, { 63, 0x9d199062b7bbb3a8ull },
	};
	const uint64_t k[2] = { 0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull };
	uint8_t b[64];

	(void)state;
	for (int i = 0; i < 64; i++)
		b[i] = (uint8_t)i;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		assert_int_equal(rl_hash_sip13(k, b, v[i].len), v[i].h);
		assert_int_equal(sip13_plain(k, b, v[i].len), v[i].h);
	}
}

/* Every length from 0 to 80, at every alignment, under random keys: the
 * inline hash (its tail in overlapping loads, its first quarter round kept
 * with the key) is the plain one. */
static void test_sip13_plain(void **state)
{
	uint64_t s = 0x9e3779b97f4a7c15ull, k[2];
	uint8_t buf[96];

	(void)state;
	for (int round = 0; round < 20; round++) {
		k[0] = rnd(&s);
		k[1] = rnd(&s);
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)rnd(&s);
		for (size_t off = 0; off < 8; off++)
			for (size_t len = 0; len <= 80; len++)
				assert_int_equal(rl_hash_sip13(k, buf + off, len),
						 sip13_plain(k, buf + off, len));
	}
	/* A key of no bytes may come as NULL. */
	assert_int_equal(rl_hash_sip13(k, NULL, 0), sip13_plain(k, buf, 0));
}

/* The handle's state per rule keys the hash as the seed with the rule mixed
 * in always did, so that processes of either build agree on every tag. */
static void test_slot_key_per_rule(void **state)
{
	static const unsigned rules[] = { 0, 1, 2, 17, 63 };
	static const size_t lens[] = { 0, 4, 7, 8, 16, 33, 64 };
	struct rl_table *t = NULL;
	uint8_t key[64];
	uint64_t s = 42;

	(void)state;
	assert_int_equal(rl_table_open(seg[0], 4096, RL_TABLE_CREATE, &t, NULL), 0);
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)rnd(&s);
	for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
		uint64_t seed[2] = { t->seed[0] ^ ((uint64_t)rules[r] *
						   0x9E3779B97F4A7C15ull),
				     t->seed[1] };

		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			uint64_t h = sip13_plain(seed, key, lens[l]);
			struct keyref k;

			rl_slot_key(t, rules[r], key, lens[l], &k);
			assert_int_equal(k.tag, (h & ~0xFFull) | rules[r]);
			assert_int_equal(k.bucket, (h >> 8) & t->bucket_mask);
		}
	}
	rl_table_close(t);
}

/* ---- the reciprocal and the inline GCRA ----------------------------------------- */

static void check_intervals(uint64_t d, uint64_t n)
{
	struct rl_algo a;
	struct rl_rate rate = { d, 1, 1 };

	assert_int_equal(rl_algo_init(&a, RL_ALGO_GCRA, &rate), 0);
	assert_int_equal(a.interval_ns, d);
	if (rl_algo_intervals(&a, n) != n / d)
		fail_msg("%llu / %llu: %llu, not %llu", (unsigned long long)n,
			 (unsigned long long)d,
			 (unsigned long long)rl_algo_intervals(&a, n),
			 (unsigned long long)(n / d));
}

/* Exact for every n below 2^63: at the edges of each quotient, for
 * intervals of every size a rate can have (1 ns to just under 2^62). */
static void test_intervals_exact(void **state)
{
	static const uint64_t ds[] = {
		1, 2, 3, 5, 7, 10, 1000, 1000003, 16666666, 1000000000,
		60000000000ull, 86400000000000ull, (1ull << 32) - 1,
		(1ull << 32) + 1, (1ull << 40) + 12345, (1ull << 61) - 1,
		(1ull << 61), (1ull << 62) - 1,
	};
	uint64_t s = 7;

	(void)state;
	for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++) {
		uint64_t d = ds[i];

		check_intervals(d, 0);
		check_intervals(d, (1ull << 63) - 1);
		check_intervals(d, (1ull << 62) + (1ull << 21));
		for (uint64_t q = 0; q < 64; q++) {
			uint64_t base = q * d;

			if (q && base / q != d)
				break; /* past 2^64 */
			if (base >= (1ull << 63))
				break;
			check_intervals(d, base);
			if (base)
				check_intervals(d, base - 1);
			if (base + d - 1 < (1ull << 63))
				check_intervals(d, base + d - 1);
		}
		for (int j = 0; j < 2000; j++)
			check_intervals(d, rnd(&s) >> (1 + rnd(&s) % 63));
	}
	for (int j = 0; j < 20000; j++) {
		uint64_t d = 1 + (rnd(&s) >> (2 + rnd(&s) % 62));

		check_intervals(d, rnd(&s) >> 1);
		check_intervals(d, (rnd(&s) >> 1) / d * d);
	}
}

static void same_result(const struct rl_result *a, const struct rl_result *b)
{
	assert_int_equal(a->allowed, b->allowed);
	assert_int_equal(a->limit, b->limit);
	assert_int_equal(a->remaining, b->remaining);
	assert_int_equal(a->retry_after_ns, b->retry_after_ns);
	assert_int_equal(a->reset_after_ns, b->reset_after_ns);
}

/* The table's step (inline, the reciprocal) is rl_gcra_step (a call, the
 * division), on random rates, states, costs and clocks: around the catch-up
 * (2 ms), a clock below it, TATs far ahead and far behind. */
static void test_step_matches_gcra(void **state)
{
	uint64_t s = 99;

	(void)state;
	for (int i = 0; i < 200000; i++) {
		struct rl_rate rate;
		struct rl_algo a;
		struct rl_result r1, r2;
		uint64_t now, tat, t1, t2;
		uint32_t cost;

		rate.count = 1 + (uint32_t)(rnd(&s) % 5000);
		rate.period_ns = rate.count * (1 + rnd(&s) % (10 * SEC));
		rate.burst = 1 + (uint32_t)(rnd(&s) % 50);
		if (rl_algo_init(&a, RL_ALGO_GCRA, &rate))
			continue;
		now = i % 50 == 0 ? rnd(&s) % (3 * MS) : T0 + rnd(&s) % SEC;
		switch (rnd(&s) % 6) {
		case 0: tat = 0; break;
		case 1: tat = now - RL_GCRA_CATCHUP_NS + rnd(&s) % 3 - 1; break;
		case 2: tat = now > 5 * MS ? now - rnd(&s) % (5 * MS) : now; break;
		case 3: tat = now + rnd(&s) % (a.depth_ns + 2); break;
		case 4: tat = now + a.depth_ns + rnd(&s) % (a.interval_ns + 2); break;
		default: tat = now + rnd(&s) % (2 * a.depth_ns + 1); break;
		}
		if (tat >> 63)
			tat = 0;
		cost = (uint32_t)(rnd(&s) % 4);
		if (i % 1000 == 0)
			cost = UINT32_MAX;
		t1 = t2 = tat;
		rl_algo_step(&a, &t1, cost, now, &r1);
		rl_gcra_step(&t2, &rate, cost, now, &r2);
		same_result(&r1, &r2);
		assert_int_equal(t1, t2);
	}
}

/* ---- the fast path against the general one ---------------------------------------- */

#define KEYS 48

/* What the agent would collect of a key (rl_table_sync_collect). */
struct owed {
	uint32_t admitted[KEYS];
	uint8_t denied[KEYS], provisional[KEYS];
	unsigned seen;
};

static int collect_one(const struct rl_sync_item *it, void *arg)
{
	struct owed *o = arg;
	unsigned k;

	assert_int_equal(it->key_len, 3);
	k = (unsigned)((it->key[1] - '0') * 10 + (it->key[2] - '0'));
	assert_true(k < KEYS);
	o->admitted[k] = it->admitted;
	o->denied[k] = it->denied;
	o->provisional[k] = it->provisional;
	o->seen++;
	return 0;
}

/* As if a sync had replaced every share: what the decisions after set of
 * `provisional` is then theirs alone. */
static void clear_provisional(struct rl_table *t)
{
	for (uint32_t i = 0; i < rl_table_capacity(t); i++)
		atomic_store(&t->slots[i].provisional, 0);
}

/*
 * Two tables, the same decisions: in one they take the fast path, in the
 * other the general one, every key there being on a plan (plan 1, at the
 * rule's own rate: the same answers, and the fast path leaves a planned
 * key to the general one). With `hosts` (1: alone; 2: fresh keys start
 * from a share) an agent syncs both. The answers, the hints, the counts
 * and what the agent would collect must be the same. 48 keys in 16
 * buckets, so that many sit past the first slot of theirs.
 */
static void fast_against_general(int hinted, unsigned hosts)
{
	static const struct rl_rate rate = { SEC, 20, 5 };
	struct rl_rule_def def = { .name = "f", .algorithm = RL_ALGO_GCRA,
				   .rate = rate, .nplans = 1, .plans = &rate };
	struct rl_slot_hint hints[2][KEYS];
	struct rl_table *t[2];
	unsigned id[2];
	uint64_t s = 5, now = T0, decided = KEYS;
	char keys[KEYS][8];

	memset(hints, 0, sizeof(hints));
	for (int i = 0; i < KEYS; i++)
		snprintf(keys[i], sizeof(keys[i]), "k%02d", i);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(rl_table_open(seg[i], 256, RL_TABLE_CREATE,
					       &t[i], NULL), 0);
		assert_int_equal(rl_table_rule(t[i], &def, &id[i]), 0);
		if (hosts) {
			rl_table_agent_flags_change(t[i], RL_AGENT_SYNC, 0);
			rl_table_agent_set_hosts(t[i], hosts);
		}
	}
	/* Every key with a slot in both from the start: a peek at a key
	 * without one is a full bucket's (no share), one with a slot its
	 * state's. */
	for (int k = 0; k < KEYS; k++) {
		struct rl_result r[2];

		assert_int_equal(rl_table_plan_ahead(t[1], id[1], keys[k], 3, 1,
						     now), 0);
		for (int i = 0; i < 2; i++)
			assert_int_equal(rl_table_take_hint(t[i], id[i], keys[k],
							    3, 1, now, &r[i],
							    hinted ? &hints[i][k]
								   : NULL), 0);
		same_result(&r[0], &r[1]);
	}
	for (int i = 0; i < 2; i++)
		clear_provisional(t[i]);
	for (int n = 0; n < 20000; n++) {
		/* Half on four keys, which are then limited. */
		unsigned k = (unsigned)(rnd(&s) % 2 ? rnd(&s) % 4
						    : rnd(&s) % KEYS);
		uint32_t cost = (uint32_t)(rnd(&s) % 8);
		struct rl_result r[2];

		cost = cost < 4 ? 1 : cost - 4; /* 1 mostly, 0 to 3 */
		now += rnd(&s) % (3 * MS);
		for (int i = 0; i < 2; i++) {
			if (hinted)
				assert_int_equal(rl_table_take_hint(
					t[i], id[i], keys[k], 3, cost, now,
					&r[i], &hints[i][k]), 0);
			else
				assert_int_equal(rl_table_take(
					t[i], id[i], keys[k], 3, cost, now,
					&r[i]), 0);
		}
		same_result(&r[0], &r[1]);
		decided++;
		if (hinted)
			assert_int_equal(hints[0][k].tag != 0,
					 hints[1][k].tag != 0);
		if (hosts && n % 5000 == 4999) {
			struct owed o[2];

			memset(o, 0, sizeof(o));
			for (int i = 0; i < 2; i++)
				assert_int_equal(rl_table_sync_collect(
					t[i], now, collect_one, &o[i]), 0);
			assert_true(o[0].seen > 0);
			assert_memory_equal(&o[0], &o[1], sizeof(o[0]));
			if (hosts > 1) {
				unsigned p = 0;

				for (int j = 0; j < KEYS; j++)
					p += o[0].provisional[j];
				assert_true(p > 0); /* keys came back to a share */
			}
			for (int i = 0; i < 2; i++)
				clear_provisional(t[i]);
		}
	}
	{
		struct rl_rule_stats st[2];

		for (int i = 0; i < 2; i++)
			assert_int_equal(rl_table_rule_stats(t[i], id[i], &st[i]),
					 0);
		assert_int_equal(st[0].allowed, st[1].allowed);
		assert_int_equal(st[0].denied, st[1].denied);
		assert_int_equal(st[0].allowed + st[0].denied, decided);
		assert_true(st[0].allowed > 1000 && st[0].denied > 1000);
		assert_int_equal(rl_table_counted(t[0], RL_COUNT_EVICTIONS), 0);
		assert_int_equal(rl_table_counted(t[0], RL_COUNT_OVERFLOWS), 0);
	}
	for (int i = 0; i < 2; i++)
		rl_table_close(t[i]);
}

static void test_fast_matches_general(void **state)
{
	(void)state;
	fast_against_general(0, 0);
}

static void test_fast_matches_general_hinted(void **state)
{
	(void)state;
	fast_against_general(1, 0);
}

/* With an agent syncing: alone, and with another host (shares). */
static void test_fast_matches_general_synced(void **state)
{
	(void)state;
	fast_against_general(0, 1);
	teardown(state);
	setup(state);
	fast_against_general(1, 2);
}

/* ---- the CPU a count lands in ------------------------------------------------------- */

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* The CPUs this thread may run on, at most `max`. */
static int cpus(int *out, int max)
{
	cpu_set_t set;
	int n = 0;

	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			out[n++] = c;
	return n;
}

static uint64_t allowed_in(struct rl_table *t, unsigned id, int cpu)
{
	return atomic_load(&t->shards[(unsigned)cpu & (RL_SHARDS - 1)]
				    .rule[id].allowed);
}

struct shard_run {
	struct rl_table *t;
	unsigned id;
	int unregister;      /* leave rseq first: the fallback */
	int cpu[2], ncpu;
	int unregistered;    /* out: rseq was left (or never there) */
};

static void *shard_thread(void *arg)
{
	struct shard_run *r = arg;
	struct rl_result res;

	if (r->unregister) {
		const struct rseq *area = rl_slot_rseq();

		/* glibc registers 32 bytes (2.35 and 2.36) or __rseq_size. */
		r->unregistered =
			!area ||
			syscall(SYS_rseq, area, 32, RSEQ_FLAG_UNREGISTER,
				0x53053053) == 0 ||
			syscall(SYS_rseq, area, __rseq_size,
				RSEQ_FLAG_UNREGISTER, 0x53053053) == 0;
		if (!r->unregistered)
			return NULL;
	}
	for (int i = 0; i < r->ncpu; i++) {
		uint64_t before = allowed_in(r->t, r->id, r->cpu[i]);

		if (pin(r->cpu[i]))
			return NULL;
		/* With rseq the first count is this CPU's; without, one
		 * within RL_CPU_RECHECK of the move is. */
		for (unsigned n = 0; n <= RL_CPU_RECHECK; n++)
			rl_table_take(r->t, r->id, "k", 1, 1, T0, &res);
		if (allowed_in(r->t, r->id, r->cpu[i]) == before)
			return (void *)"counted elsewhere";
		if (!r->unregister &&
		    allowed_in(r->t, r->id, r->cpu[i]) !=
			    before + RL_CPU_RECHECK + 1)
			return (void *)"with rseq, not every count in the CPU's shard";
	}
	return NULL;
}

static void shard_case(int unregister)
{
	struct rl_rule_def def = { .name = "c", .algorithm = RL_ALGO_GCRA,
				   .rate = { SEC, 1000000000u, 1000000000u } };
	struct shard_run r = { .unregister = unregister };
	struct rl_rule_stats st;
	pthread_t th;
	void *why;

	assert_int_equal(rl_table_open(seg[0], 256, RL_TABLE_CREATE, &r.t,
				       NULL), 0);
	assert_int_equal(rl_table_rule(r.t, &def, &r.id), 0);
	r.ncpu = cpus(r.cpu, 2);
	assert_int_equal(pthread_create(&th, NULL, shard_thread, &r), 0);
	assert_int_equal(pthread_join(th, &why), 0);
	if (why)
		fail_msg("%s", (const char *)why);
	if (unregister && !r.unregistered) {
		rl_table_close(r.t);
		print_message("test_decide: rseq could not be left: the fallback "
			      "is not tested here\n");
		skip();
	}
	/* Whichever shards, every count is there. */
	assert_int_equal(rl_table_rule_stats(r.t, r.id, &st), 0);
	assert_int_equal(st.allowed, (uint64_t)r.ncpu * (RL_CPU_RECHECK + 1));
	rl_table_close(r.t);
}

/* With rseq (a thread of a glibc that registered it): the CPU's shard,
 * every time, on each CPU the thread is moved to. */
static void test_shard_rseq(void **state)
{
	(void)state;
	shard_case(0);
}

/* A thread that left rseq (its cpu_id is then -1): sched_getcpu(), kept for
 * RL_CPU_RECHECK counts, then asked again. */
static void test_shard_fallback(void **state)
{
	(void)state;
	shard_case(1);
}

/* The CPU the slow path finds is sched_getcpu()'s. */
static void test_cpu_slow(void **state)
{
	int c[2], n = cpus(c, 2);

	(void)state;
	for (int i = 0; i < n; i++) {
		assert_int_equal(pin(c[i]), 0);
		assert_int_equal(rl_slot_cpu_slow(), (unsigned)sched_getcpu());
	}
	{
		cpu_set_t all;

		CPU_ZERO(&all);
		for (int i = 0; i < n; i++)
			CPU_SET(c[i], &all);
		sched_setaffinity(0, sizeof(all), &all);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sip13_vectors),
		cmocka_unit_test(test_sip13_plain),
		cmocka_unit_test_setup_teardown(test_slot_key_per_rule, setup,
						teardown),
		cmocka_unit_test(test_intervals_exact),
		cmocka_unit_test(test_step_matches_gcra),
		cmocka_unit_test_setup_teardown(test_fast_matches_general, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fast_matches_general_hinted,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_fast_matches_general_synced,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_shard_rseq, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shard_fallback, setup,
						teardown),
		cmocka_unit_test(test_cpu_slow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
