/* SPDX-License-Identifier: MIT */
/* test_gcra.c - GCRA against go-redis/redis_rate's vectors, the window
 * counters, and sequences over a fake clock. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>

#include "algo.h"

#define MS 1000000ull
#define SEC 1000000000ull
/* A fake clock far from 0, as a real monotonic clock is, and a multiple of
 * an hour, so windows of a minute start at T0. */
#define T0 (2057 * 3600 * SEC)

static const struct rl_rate ten_per_sec = { SEC, 10, 10 };

/* A prepared algorithm for the dispatch calls (one at a time). */
static const struct rl_algo *alg(enum rl_algorithm kind,
				 const struct rl_rate *rate)
{
	static struct rl_algo a;

	assert_int_equal(rl_algo_init(&a, kind, rate), 0);
	return &a;
}

/*
 * One GCRA step on a key and what its answer must hold. A field that is
 * ANY is not part of the case.
 */
#define ANY (-1)

struct step {
	uint32_t cost;
	uint64_t at;
	int allowed;
	int64_t remaining, retry, reset, limit;
};

static void check_field(const char *test, size_t i, const char *field,
			uint64_t got, int64_t want)
{
	if (want != ANY && got != (uint64_t)want)
		fail_msg("%s, step %zu: %s %llu, want %lld", test, i, field,
			 (unsigned long long)got, (long long)want);
}

/* Runs the steps in order on one TAT. */
static void check_steps(const char *test, const struct rl_rate *rate,
			uint64_t *tat, const struct step *s, size_t n)
{
	struct rl_result r;

	for (size_t i = 0; i < n; i++) {
		rl_gcra_step(tat, rate, s[i].cost, s[i].at, &r);
		check_field(test, i, "allowed", (uint64_t)r.allowed, s[i].allowed);
		check_field(test, i, "remaining", r.remaining, s[i].remaining);
		check_field(test, i, "retry_after_ns", r.retry_after_ns, s[i].retry);
		check_field(test, i, "reset_after_ns", r.reset_after_ns, s[i].reset);
		check_field(test, i, "limit", r.limit, s[i].limit);
	}
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* redis_rate's TestAllow vectors, all at one instant. */
static void test_redis_rate_vectors(void **state)
{
	static const struct step s[] = {
		/* cost at allowed remaining retry reset limit */
		{ 1, T0, 1, 9, 0, 100 * MS, 10 },
		{ 2, T0, 1, 7, ANY, 300 * MS, ANY },
		{ 7, T0, 1, 0, ANY, 1 * SEC, ANY },
		{ 1000, T0, 0, 0, 100 * SEC, 1 * SEC, ANY },
	};
	uint64_t tat = 0;

	(void)state;
	check_steps(__func__, &ten_per_sec, &tat, s, ARRAY_SIZE(s));
	/* Nothing stored on a denial. */
	assert_int_equal(tat, T0 + 1 * SEC);
}

static void test_cost_zero_new_key(void **state)
{
	static const struct step s[] = {
		{ 0, T0, 1, 10, 0, 0, ANY },
	};
	uint64_t tat = 0;

	(void)state;
	check_steps(__func__, &ten_per_sec, &tat, s, ARRAY_SIZE(s));
	assert_int_equal(tat, 0); /* a peek stores nothing */
}

/* A denial reports what is left for cost-1 requests, not 0. */
static void test_denial_reports_remaining(void **state)
{
	static const struct step s[] = {
		{ 5, T0, ANY, ANY, ANY, ANY, ANY },
		{ 7, T0, 0, 5, 200 * MS, 500 * MS, ANY },
	};
	uint64_t tat = 0;

	(void)state;
	check_steps(__func__, &ten_per_sec, &tat, s, ARRAY_SIZE(s));
}

/* An allowed request says what is left after it, however fast the rate:
 * at 1,000,000/s a key used 1 ms ago has its TAT in the past (within the
 * catch-up), and Remaining was the whole limit, Reset 0. */
static void test_allowed_reports_after_it(void **state)
{
	const struct rl_rate fast = { .count = 1000000, .period_ns = 1000 * MS,
				      .burst = 1000000 };
	uint64_t tat = 0, iv = rl_gcra_interval(&fast);
	uint64_t depth = iv * fast.burst;
	struct rl_result r;

	(void)state;
	rl_gcra_decide(&tat, iv, depth, fast.burst, 1, T0, &r);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, fast.burst - 1);
	assert_int_equal(r.reset_after_ns, iv);
	rl_gcra_decide(&tat, iv, depth, fast.burst, 1, T0 + MS, &r);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, fast.burst - 1);
	assert_true(r.reset_after_ns >= iv);
	rl_gcra_decide(&tat, iv, depth, fast.burst, 3, T0 + 2 * MS, &r);
	assert_int_equal(r.remaining, fast.burst - 3);
	assert_true(r.reset_after_ns >= 3 * iv);
	/* a peek still says the bucket is full */
	rl_gcra_decide(&tat, iv, depth, fast.burst, 0, T0 + 3 * MS, &r);
	assert_int_equal(r.remaining, fast.burst);
}

/* Burst 1: strict spacing, nginx's limit_req without burst. */
static void test_strict_spacing(void **state)
{
	static const struct rl_rate rate = { SEC, 1, 1 };
	static const struct step s[] = {
		{ 1, T0, 1, ANY, ANY, ANY, ANY },
		{ 1, T0 + 500 * MS, 0, 0, 500 * MS, ANY, ANY },
		{ 1, T0 + 999 * MS, 0, ANY, 1 * MS, ANY, ANY },
		{ 1, T0 + SEC, 1, ANY, ANY, ANY, ANY },
	};
	uint64_t tat = 0;

	(void)state;
	check_steps(__func__, &rate, &tat, s, ARRAY_SIZE(s));
}

/* Offered twice the rate for one second, exactly the rate passes. */
static void test_steady_overload(void **state)
{
	const struct rl_rate rate = { SEC, 5000, 1 };
	struct rl_result r;
	uint64_t tat = 0, allowed = 0;

	(void)state;
	for (uint64_t t = 0; t < SEC; t += 100000) { /* every 100 us */
		rl_gcra_step(&tat, &rate, 1, T0 + t, &r);
		allowed += (uint64_t)r.allowed;
	}
	assert_int_equal(allowed, 5000);
}

/* Burst 1 with arrivals that are never exactly on time (the server reads
 * them a little late, as under any real load): the rate stays exact, and
 * two admissions are never closer than the lag allows. */
static void test_strict_spacing_keeps_the_rate(void **state)
{
	const struct rl_rate rate = { SEC, 5000, 1 }; /* every 200 us */
	struct rl_result r;
	uint64_t tat = 0, allowed = 0, last = 0, t = 0, min_gap = UINT64_MAX;
	unsigned x = 1;

	(void)state;
	while (t < SEC) {
		rl_gcra_step(&tat, &rate, 1, T0 + t, &r);
		if (r.allowed) {
			if (allowed && t - last < min_gap)
				min_gap = t - last;
			last = t;
			allowed++;
		}
		x = x * 1103515245u + 12345u;
		t += 10000 + (x >> 16) % 60000; /* 10-70 us apart */
	}
	assert_in_range(allowed, 4999, 5001);
	/* Never two at once: burst 1. */
	assert_true(min_gap >= 10000);
}

/* A server that reads in batches every 400 us (two intervals): burst 1
 * still gets exactly its rate, one to three per batch. */
static void test_strict_spacing_batched(void **state)
{
	const struct rl_rate rate = { SEC, 5000, 1 }; /* every 200 us */
	struct rl_result r;
	uint64_t tat = 0, allowed = 0, most = 0;

	(void)state;
	for (uint64_t t = 0; t < SEC; t += 400000) {
		uint64_t in_batch = 0;

		for (int k = 0; k < 10; k++) { /* ten requests read at once */
			rl_gcra_step(&tat, &rate, 1, T0 + t, &r);
			in_batch += (uint64_t)r.allowed;
		}
		allowed += in_batch;
		if (in_batch > most)
			most = in_batch;
	}
	assert_in_range(allowed, 4999, 5001);
	assert_true(most <= 3);
}

/* An idle key starts from now: no credit for the time it was away. */
static void test_idle_restarts(void **state)
{
	const struct rl_rate rate = { SEC, 10, 1 }; /* every 100 ms */
	struct rl_result r;
	uint64_t tat = 0;

	(void)state;
	rl_gcra_step(&tat, &rate, 1, T0, &r);
	assert_true(r.allowed);
	/* 1 ms late for its turn (under RL_GCRA_CATCHUP_NS): keeps the
	 * cadence, the next turn is at T0 + 200 ms. */
	rl_gcra_step(&tat, &rate, 1, T0 + 101 * MS, &r);
	assert_true(r.allowed);
	assert_int_equal(tat, T0 + 200 * MS);
	rl_gcra_step(&tat, &rate, 1, T0 + 199 * MS, &r);
	assert_false(r.allowed);
	/* 60 ms late: from now, the next turn a whole interval later. */
	rl_gcra_step(&tat, &rate, 1, T0 + 260 * MS, &r);
	assert_true(r.allowed);
	assert_int_equal(tat, T0 + 360 * MS);
	rl_gcra_step(&tat, &rate, 1, T0 + 359 * MS, &r);
	assert_false(r.allowed);
	rl_gcra_step(&tat, &rate, 0, T0 + 450 * MS, &r);
	assert_int_equal(r.remaining, 1);
	assert_int_equal(r.reset_after_ns, 0);
}

/* The seed's SMS rule, 3/m burst 3, back 79 s later (19 s late for the
 * turn after its burst) and again a second after: never 4 within 20 s. */
static void test_late_return_keeps_the_bucket(void **state)
{
	const struct rl_rate rate = { 60 * SEC, 3, 3 };
	struct rl_result r;
	uint64_t tat = 0;
	int n0 = 0, n79 = 0, n80 = 0;

	(void)state;
	for (int i = 0; i < 5; i++) {
		rl_gcra_step(&tat, &rate, 1, T0, &r);
		n0 += r.allowed;
	}
	for (int i = 0; i < 5; i++) {
		rl_gcra_step(&tat, &rate, 1, T0 + 79 * SEC, &r);
		n79 += r.allowed;
	}
	rl_gcra_step(&tat, &rate, 1, T0 + 80 * SEC, &r);
	n80 = r.allowed;
	assert_int_equal(n0, 3);
	assert_int_equal(n79, 3);
	assert_int_equal(n80, 0);
}

/*
 * The bound, as a property over random arrivals: whatever the rate, burst,
 * costs and spacing (bursts, jitter around the interval, lulls), the
 * admissions in any interval [a, b] never exceed
 * burst + (b - a + RL_GCRA_CATCHUP_NS) / interval (DESIGN: at most
 * burst + t x rate, but for the 2 ms a busy key may make up).
 */
static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void test_bound_property(void **state)
{
	static uint64_t at[4096];
	uint64_t x = 88172645463325252ull;

	(void)state;
	for (int run = 0; run < 400; run++) {
		struct rl_rate rate;
		uint64_t tat = 0, t = T0, interval;
		size_t n = 0;

		rate.period_ns = (xorshift(&x) % 4 == 0 ? 60 : 1) * SEC;
		rate.count = 1 + (uint32_t)(xorshift(&x) %
					     (xorshift(&x) % 2 ? 20 : 20000));
		rate.burst = 1 + (uint32_t)(xorshift(&x) % 12);
		interval = rl_gcra_interval(&rate);
		for (int k = 0; k < 300 && n < 4096; k++) {
			struct rl_result r;
			uint64_t gap;

			switch (xorshift(&x) % 5) {
			case 0: gap = 0; break;                       /* together */
			case 1: gap = xorshift(&x) % (3 * RL_GCRA_CATCHUP_NS); break;
			case 2: gap = interval - interval / 4 +
				      xorshift(&x) % (interval / 2 + 1); break; /* on time */
			case 3: gap = xorshift(&x) % (interval + 1); break;
			default: gap = xorshift(&x) % (4 * interval + 1); break; /* lulls */
			}
			t += gap;
			rl_gcra_step(&tat, &rate, 1, t, &r);
			if (r.allowed)
				at[n++] = t;
		}
		for (size_t i = 0; i < n; i++)
			for (size_t j = i; j < n; j++) {
				uint64_t most = rate.burst +
					(at[j] - at[i] + RL_GCRA_CATCHUP_NS) / interval;

				if (j - i + 1 > most) {
					print_error("run %d: %u per %llu ns burst %u: %zu "
						    "admitted in %llu ns, at most %llu\n",
						    run, rate.count,
						    (unsigned long long)rate.period_ns,
						    rate.burst, j - i + 1,
						    (unsigned long long)(at[j] - at[i]),
						    (unsigned long long)most);
					fail();
				}
			}
	}
}

/* rate x time + burst, for a burst larger than 1 and a fake clock that
 * steps unevenly. */
static void test_rate_times_time_plus_burst(void **state)
{
	const struct rl_rate rate = { 60 * SEC, 60, 20 }; /* 1/s, burst 20 */
	struct rl_result r;
	uint64_t tat = 0, allowed = 0, t = 0;

	(void)state;
	while (t < 100 * SEC) {
		rl_gcra_step(&tat, &rate, 1, T0 + t, &r);
		allowed += (uint64_t)r.allowed;
		t += 7 * MS + (t / MS) % 13 * MS;
	}
	/* 20 at once, then one per second for the 100 s that follow
	 * (the last interval may or may not have come due). */
	assert_in_range(allowed, 119, 120);
}

static void test_refill(void **state)
{
	static const struct step s[] = {
		{ 10, T0, ANY, 0, ANY, ANY, ANY },
		{ 0, T0 + 350 * MS, ANY, 3, ANY, 650 * MS, ANY },
		{ 0, T0 + 5 * SEC, ANY, 10, ANY, 0, ANY },
	};
	uint64_t tat = 0;

	(void)state;
	check_steps(__func__, &ten_per_sec, &tat, s, ARRAY_SIZE(s));
}

/* Costs and periods that overflow 64 bits are denied, not wrapped. */
static void test_saturation(void **state)
{
	const struct rl_rate day = { 86400 * SEC, 1, 1 };
	struct rl_result r;
	uint64_t tat = 0;

	(void)state;
	rl_gcra_step(&tat, &day, UINT32_MAX, T0, &r);
	assert_int_equal(r.allowed, 0);
	assert_int_equal(tat, 0);
	assert_int_equal(r.remaining, 1);
}

/* A TAT stored from a later clock than ours: never a negative remaining. */
static void test_tat_beyond_horizon(void **state)
{
	static const struct step s[] = {
		{ 1, T0, 0, 0, 1100 * MS, ANY, ANY },
	};
	uint64_t tat = T0 + 2 * SEC;

	(void)state;
	check_steps(__func__, &ten_per_sec, &tat, s, ARRAY_SIZE(s));
}

/* Rates whose interval is not a whole number of ns: the interval is
 * truncated, so the rate is exact to 1 ns per request: 3 at once, then 3
 * per second for 10 s. */
static void test_uneven_interval(void **state)
{
	const struct rl_rate rate = { SEC, 3, 3 };
	struct rl_result r;
	uint64_t tat = 0, allowed = 0;

	(void)state;
	for (uint64_t t = 0; t <= 10 * SEC; t += MS) {
		rl_gcra_step(&tat, &rate, 1, T0 + t, &r);
		allowed += (uint64_t)r.allowed;
	}
	assert_int_equal(allowed, 33);
}

static void test_gcra_refund(void **state)
{
	struct rl_result r;
	uint64_t tat = 0;

	(void)state;
	rl_gcra_step(&tat, &ten_per_sec, 3, T0, &r);
	rl_algo_refund(alg(RL_ALGO_GCRA, &ten_per_sec), &tat, 1, T0);
	rl_gcra_step(&tat, &ten_per_sec, 0, T0, &r);
	assert_int_equal(r.remaining, 8);
	/* Refunding more than is owed stops at a full bucket. */
	rl_algo_refund(alg(RL_ALGO_GCRA, &ten_per_sec), &tat, 50, T0);
	assert_int_equal(tat, T0);
	rl_gcra_step(&tat, &ten_per_sec, 0, T0, &r);
	assert_int_equal(r.remaining, 10);
}

/* ---- fixed window ----------------------------------------------------------- */

static const struct rl_rate three_per_min = { 60 * SEC, 3, 3 };

static void test_fixed_window(void **state)
{
	/* T0 is a multiple of 60 s: windows start at T0. */
	uint64_t t = T0 + 10 * SEC, st = 0;
	struct rl_result r;

	(void)state;
	for (int i = 0; i < 3; i++) {
		rl_window_fixed_step(&st, &three_per_min, 1, t, &r);
		assert_true(r.allowed);
		assert_int_equal(r.remaining, 2 - i);
		assert_int_equal(r.reset_after_ns, 50 * SEC);
	}
	rl_window_fixed_step(&st, &three_per_min, 1, t + 5 * SEC, &r);
	assert_false(r.allowed);
	assert_int_equal(r.remaining, 0);
	assert_int_equal(r.retry_after_ns, 45 * SEC);
	/* The next window starts from zero. */
	rl_window_fixed_step(&st, &three_per_min, 1, T0 + 60 * SEC, &r);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 2);
	/* A cost larger than the window never passes. */
	rl_window_fixed_step(&st, &three_per_min, 4, T0 + 61 * SEC, &r);
	assert_false(r.allowed);
	assert_int_equal(r.retry_after_ns, UINT64_MAX);
	/* Peek on a new key. */
	st = 0;
	rl_window_fixed_step(&st, &three_per_min, 0, t, &r);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 3);
	assert_int_equal(r.reset_after_ns, 0);
	assert_int_equal(st, 0);
}

/* The known weakness: 2x the limit across a boundary. */
static void test_fixed_window_boundary(void **state)
{
	uint64_t st = 0, allowed = 0;
	struct rl_result r;

	(void)state;
	for (int i = 0; i < 5; i++) {
		rl_window_fixed_step(&st, &three_per_min, 1, T0 + 59 * SEC, &r);
		allowed += (uint64_t)r.allowed;
	}
	for (int i = 0; i < 5; i++) {
		rl_window_fixed_step(&st, &three_per_min, 1, T0 + 60 * SEC, &r);
		allowed += (uint64_t)r.allowed;
	}
	assert_int_equal(allowed, 6);
}

/* A state written from a clock one window ahead counts as current. */
static void test_fixed_window_late_clock(void **state)
{
	uint64_t st = 0;
	struct rl_result r;

	(void)state;
	for (int i = 0; i < 3; i++)
		rl_window_fixed_step(&st, &three_per_min, 1, T0 + 60 * SEC, &r);
	rl_window_fixed_step(&st, &three_per_min, 1, T0 + 59 * SEC, &r);
	assert_false(r.allowed);
	/* ... and a late clock's write keeps the later window. */
	st = 0;
	rl_window_fixed_step(&st, &three_per_min, 1, T0 + 60 * SEC, &r);
	rl_window_fixed_step(&st, &three_per_min, 1, T0 + 59 * SEC, &r);
	rl_window_fixed_step(&st, &three_per_min, 1, T0 + 60 * SEC, &r);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 0);
	assert_true(rl_algo_free_at(alg(RL_ALGO_FIXED_WINDOW, &three_per_min), st,
				    T0 + 59 * SEC) == T0 + 120 * SEC);
}

static void test_fixed_window_free_at_refund(void **state)
{
	uint64_t st = 0;
	struct rl_result r;

	(void)state;
	assert_int_equal(rl_algo_free_at(alg(RL_ALGO_FIXED_WINDOW, &three_per_min), 0, T0), 0);
	rl_window_fixed_step(&st, &three_per_min, 2, T0 + SEC, &r);
	assert_int_equal(rl_algo_free_at(alg(RL_ALGO_FIXED_WINDOW, &three_per_min), st, T0 + SEC),
			 T0 + 60 * SEC);
	rl_algo_refund(alg(RL_ALGO_FIXED_WINDOW, &three_per_min), &st, 1, T0 + SEC);
	rl_window_fixed_step(&st, &three_per_min, 0, T0 + SEC, &r);
	assert_int_equal(r.remaining, 2);
	/* In a later window there is nothing to give back. */
	rl_algo_refund(alg(RL_ALGO_FIXED_WINDOW, &three_per_min), &st, 1,
		       T0 + 61 * SEC);
	rl_window_fixed_step(&st, &three_per_min, 0, T0 + SEC, &r);
	assert_int_equal(r.remaining, 2);
}

/* ---- sliding window ----------------------------------------------------------- */

static const struct rl_rate ten_per_min = { 60 * SEC, 10, 10 };

static void test_sliding_window(void **state)
{
	uint64_t st = 0;
	struct rl_result r;
	int allowed = 0;

	(void)state;
	for (int i = 0; i < 12; i++) {
		rl_window_sliding_step(&st, &ten_per_min, 1, T0 + 10 * SEC, &r);
		allowed += r.allowed;
	}
	assert_int_equal(allowed, 10);
	/* Not in this window; in the next, 10 * (60 - e) / 60 + 1 <= 10 needs
	 * e >= 6 s: 50 s + 6 s from now. */
	assert_int_equal(r.retry_after_ns, 56 * SEC);
	/* Half-way into the next window the previous one weighs 5. */
	allowed = 0;
	for (int i = 0; i < 8; i++) {
		rl_window_sliding_step(&st, &ten_per_min, 1, T0 + 90 * SEC, &r);
		allowed += r.allowed;
	}
	assert_int_equal(allowed, 5);
	assert_int_equal(r.remaining, 0);
	/* 10 * (60 - e) / 60 + 5 + 1 <= 10  <=>  e >= 36 s: 6 s from now. */
	assert_int_equal(r.retry_after_ns, 6 * SEC);
	/* Reset: cur (5) weighs until the end of the following window. */
	assert_int_equal(r.reset_after_ns, 90 * SEC);
	/* Two windows later, nothing weighs. */
	rl_window_sliding_step(&st, &ten_per_min, 0, T0 + 180 * SEC, &r);
	assert_int_equal(r.remaining, 10);
	assert_int_equal(r.reset_after_ns, 0);
	assert_int_equal(rl_algo_free_at(alg(RL_ALGO_SLIDING_WINDOW, &ten_per_min), st, T0 + 180 * SEC), 0);
}

/* The retry a denial reports is exact: one ns earlier is still denied. */
static void test_sliding_retry_exact(void **state)
{
	uint64_t st = 0, probe;
	struct rl_result r, p;

	(void)state;
	for (int i = 0; i < 7; i++)
		rl_window_sliding_step(&st, &ten_per_min, 1, T0 + 1 * SEC, &r);
	for (int i = 0; i < 3; i++)
		rl_window_sliding_step(&st, &ten_per_min, 1, T0 + 61 * SEC, &r);
	for (uint64_t at = T0 + 61 * SEC; at < T0 + 200 * SEC; at += 3 * SEC + 7) {
		probe = st;
		rl_window_sliding_step(&probe, &ten_per_min, 2, at, &r);
		if (r.allowed)
			continue;
		probe = st;
		rl_window_sliding_step(&probe, &ten_per_min, 2,
				       at + r.retry_after_ns, &p);
		assert_true(p.allowed);
		probe = st;
		rl_window_sliding_step(&probe, &ten_per_min, 2,
				       at + r.retry_after_ns - 1, &p);
		assert_false(p.allowed);
	}
}

static void test_sliding_late_clock_and_refund(void **state)
{
	uint64_t st = 0;
	struct rl_result r;

	(void)state;
	for (int i = 0; i < 10; i++)
		rl_window_sliding_step(&st, &ten_per_min, 1, T0 + 60 * SEC, &r);
	rl_window_sliding_step(&st, &ten_per_min, 1, T0 + 59 * SEC, &r);
	assert_false(r.allowed);
	rl_algo_refund(alg(RL_ALGO_SLIDING_WINDOW, &ten_per_min), &st, 3,
		       T0 + 60 * SEC);
	rl_window_sliding_step(&st, &ten_per_min, 0, T0 + 60 * SEC, &r);
	assert_int_equal(r.remaining, 3);
}

static void test_algo_check(void **state)
{
	const struct rl_rate ok = { SEC, 10, 10 };
	const struct rl_rate zero = { SEC, 0, 1 };
	const struct rl_rate noburst = { SEC, 1, 0 };
	const struct rl_rate tooshort = { 10, 20, 1 };
	const struct rl_rate deep = { 86400 * SEC, 1, UINT32_MAX };
	const struct rl_rate sub_sec = { 500 * MS, 10, 10 };
	const struct rl_rate wide = { SEC, RL_SLIDING_MAX + 1, 1 };

	(void)state;
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_GCRA, &ok), 0);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_FIXED_WINDOW, &ok), 0);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_SLIDING_WINDOW, &ok), 0);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_GCRA, &zero), -EINVAL);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_GCRA, &noburst), -EINVAL);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_GCRA, &tooshort), -EINVAL);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_GCRA, &deep), -EINVAL);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_GCRA, &sub_sec), 0);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_FIXED_WINDOW, &sub_sec), -EINVAL);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_SLIDING_WINDOW, &wide), -EINVAL);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_FIXED_WINDOW, &wide), 0);
	assert_int_equal(rl_algo_init(NULL, (enum rl_algorithm)7, &ok), -EINVAL);
	assert_int_equal(rl_algo_init(NULL, RL_ALGO_GCRA, NULL), -EINVAL);
}

/* The dispatch and the pure steps agree; free-at is the TAT for GCRA. */
static void test_dispatch(void **state)
{
	uint64_t a = 0, b = 0;
	struct rl_result ra, rb;

	(void)state;
	for (int i = 0; i < 15; i++) {
		rl_algo_step(alg(RL_ALGO_GCRA, &ten_per_sec), &a, 1, T0 + i * MS, &ra);
		rl_gcra_step(&b, &ten_per_sec, 1, T0 + i * MS, &rb);
		assert_int_equal(ra.allowed, rb.allowed);
		assert_int_equal(ra.remaining, rb.remaining);
		assert_int_equal(ra.retry_after_ns, rb.retry_after_ns);
		assert_int_equal(ra.reset_after_ns, rb.reset_after_ns);
		assert_int_equal(a, b);
	}
	assert_int_equal(rl_algo_free_at(alg(RL_ALGO_GCRA, &ten_per_sec), a, T0), a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redis_rate_vectors),
		cmocka_unit_test(test_cost_zero_new_key),
		cmocka_unit_test(test_denial_reports_remaining),
		cmocka_unit_test(test_allowed_reports_after_it),
		cmocka_unit_test(test_strict_spacing),
		cmocka_unit_test(test_steady_overload),
		cmocka_unit_test(test_strict_spacing_keeps_the_rate),
		cmocka_unit_test(test_strict_spacing_batched),
		cmocka_unit_test(test_idle_restarts),
		cmocka_unit_test(test_late_return_keeps_the_bucket),
		cmocka_unit_test(test_bound_property),
		cmocka_unit_test(test_rate_times_time_plus_burst),
		cmocka_unit_test(test_refill),
		cmocka_unit_test(test_saturation),
		cmocka_unit_test(test_tat_beyond_horizon),
		cmocka_unit_test(test_uneven_interval),
		cmocka_unit_test(test_gcra_refund),
		cmocka_unit_test(test_fixed_window),
		cmocka_unit_test(test_fixed_window_boundary),
		cmocka_unit_test(test_fixed_window_late_clock),
		cmocka_unit_test(test_fixed_window_free_at_refund),
		cmocka_unit_test(test_sliding_window),
		cmocka_unit_test(test_sliding_retry_exact),
		cmocka_unit_test(test_sliding_late_clock_and_refund),
		cmocka_unit_test(test_algo_check),
		cmocka_unit_test(test_dispatch),
	};

	return cmocka_run_group_tests_name("gcra", tests, NULL, NULL);
}
