/* SPDX-License-Identifier: MIT */
/* test_store_clock.c - the store's clock against this host's
 * (src/agent/store_clock.c): the offset within every exchange's bounds,
 * kept where it is while they allow it (a state sent and read back comes
 * back where it was), moved to the nearest bound when one passes it,
 * started again when a clock steps; unknown until the first exchange. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "agent.h"

#define MS 1000000ull
#define OFF 5000000000ll /* the store's clock: 5,000 s ahead, in us */

/* An exchange sent at `sent_ns` (host), answered `rtt_ns` later, the store
 * reading its clock `at_ns` after the sending. */
static void exchange(struct rl_store_clock *c, uint64_t sent_ns,
		     uint64_t rtt_ns, uint64_t at_ns)
{
	rl_store_clock_sample(c, (uint64_t)((int64_t)((sent_ns + at_ns) / 1000) + OFF),
			      sent_ns, sent_ns + rtt_ns);
}

static void test_unknown_first(void **state)
{
	struct rl_store_clock c;
	uint64_t h = 7;

	(void)state;
	memset(&c, 0, sizeof(c));
	assert_int_equal(rl_store_clock_host_ns(&c, 123456789, &h), -1);
	assert_int_equal(h, 7);
	assert_int_equal(rl_store_clock_store_us(&c, 10 * MS), 0);
	assert_int_equal(rl_store_clock_at(&c, 123456789, 42), 42);
}

/* Within the first exchange's round trip, then within the narrowest. */
static void test_within_bounds(void **state)
{
	struct rl_store_clock c;
	uint64_t t = 1000 * MS, h;
	int64_t off;

	(void)state;
	memset(&c, 0, sizeof(c));
	exchange(&c, t, 4 * MS, 1 * MS);
	off = (int64_t)rl_store_clock_store_us(&c, t) - (int64_t)(t / 1000);
	assert_true(off >= OFF - 4000 - 1 && off <= OFF + 1);
	/* narrower exchanges, the store reading its clock at their middle:
	 * the offset ends within the narrowest's window */
	for (int i = 1; i <= 20; i++)
		exchange(&c, t + i * 50 * MS, 200000, 100000);
	off = (int64_t)rl_store_clock_store_us(&c, t) - (int64_t)(t / 1000);
	assert_true(off >= OFF - 101 && off <= OFF + 101);
	/* and back: a host time through the store's clock and back */
	assert_int_equal(rl_store_clock_host_ns(&c, rl_store_clock_store_us(&c, t + 3 * MS),
						&h), 0);
	assert_int_equal(h, t + 3 * MS);
	/* never before the floor given */
	assert_int_equal(rl_store_clock_at(&c, rl_store_clock_store_us(&c, t + 3 * MS),
					   t), t + 3 * MS);
	assert_int_equal(rl_store_clock_at(&c, rl_store_clock_store_us(&c, t + 3 * MS),
					   t + 4 * MS), t + 4 * MS);
}

/* While every exchange's bounds allow it, the offset does not move: the
 * jitter of the exchanges never moves a state sent and read back. */
static void test_stays_put(void **state)
{
	struct rl_store_clock c;
	uint64_t t = 1000 * MS;
	int64_t first;

	(void)state;
	memset(&c, 0, sizeof(c));
	exchange(&c, t, 1 * MS, 500000);
	first = atomic_load(&c.off_us);
	for (int i = 1; i <= 50; i++)
		/* the store's clock read anywhere within each round trip */
		exchange(&c, t + i * 50 * MS, 1 * MS, (uint64_t)(i % 5) * 200000);
	/* the bounds narrowed to about [OFF - 200, OFF + 500]: the first
	 * estimate (OFF) is within them all along */
	assert_int_equal(atomic_load(&c.off_us), first);
}

/* A clock that steps: the bounds cross, and start again from the
 * exchange's. */
static void test_step(void **state)
{
	struct rl_store_clock c;
	uint64_t t = 1000 * MS;
	int64_t off;

	(void)state;
	memset(&c, 0, sizeof(c));
	exchange(&c, t, 1 * MS, 500000);
	rl_store_clock_sample(&c, (uint64_t)((int64_t)((t + 60 * MS) / 1000) + OFF + 2000000),
			      t + 60 * MS - 100000, t + 60 * MS + 100000);
	off = atomic_load(&c.off_us);
	assert_true(off >= OFF + 2000000 - 101 && off <= OFF + 2000000 + 101);
}

/* An answer before its sending, or no clock: nothing learnt. */
static void test_bad_exchange(void **state)
{
	struct rl_store_clock c;

	(void)state;
	memset(&c, 0, sizeof(c));
	rl_store_clock_sample(&c, 5, 10 * MS, 9 * MS);
	rl_store_clock_sample(&c, 0, 10 * MS, 11 * MS);
	assert_int_equal(rl_store_clock_store_us(&c, 10 * MS), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_first),
		cmocka_unit_test(test_within_bounds),
		cmocka_unit_test(test_stays_put),
		cmocka_unit_test(test_step),
		cmocka_unit_test(test_bad_exchange),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
