/* SPDX-License-Identifier: MIT */
/* test_repush.c - which quiet keys in debt a sync round pushes
 * (src/agent/repush.c): every key with something to push, at most the
 * budget of the quiet ones, in turn from round to round so that every one
 * is pushed within ceil(quiet / budget) rounds; the budget a host's share
 * of RL_REPUSH_KEYS. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "agent.h"

#define N 3000

static struct rl_agent_item items[N];

/* `n` items on slots 10, 20, ...; every `active`-th one (0: none) has
 * something to push, the others are quiet. */
static void fill(uint32_t n, uint32_t active)
{
	memset(items, 0, sizeof(items));
	for (uint32_t i = 0; i < n; i++) {
		items[i].index = 10 * (i + 1);
		items[i].quiet = !(active && i % active == 0);
		items[i].push = 7; /* overwritten */
	}
}

static uint32_t pushed(uint32_t n, int quiet)
{
	uint32_t c = 0;

	for (uint32_t i = 0; i < n; i++)
		c += items[i].push && items[i].quiet == quiet;
	return c;
}

/* Within the budget, everything, and the cursor stays. */
static void test_within_budget(void **state)
{
	uint32_t from = 55;

	(void)state;
	fill(100, 3);
	assert_int_equal(rl_agent_repush_pick(items, 100, 100, &from), 100);
	assert_int_equal(pushed(100, 1) + pushed(100, 0), 100);
	assert_int_equal(from, 55);
	assert_int_equal(rl_agent_repush_pick(items, 0, 10, &from), 0);
	assert_int_equal(from, 55);
}

/* Over it: every active key, `budget` quiet ones from the cursor on; the
 * cursor is the first left out. */
static void test_over_budget(void **state)
{
	uint32_t from = 0, n = 1000, active = 334; /* items 0, 3, 6, ... */

	(void)state;
	fill(n, 3);
	assert_int_equal(rl_agent_repush_pick(items, n, 100, &from),
			 active + 100);
	assert_int_equal(pushed(n, 0), active);
	assert_int_equal(pushed(n, 1), 100);
	/* the quiet ones of items 1..149: 1, 2, 4, 5, ..., 149; 151 is next */
	for (uint32_t i = 0; i < n; i++)
		if (items[i].quiet)
			assert_int_equal(items[i].push, i < 150);
	assert_int_equal(from, items[151].index);
}

/* Round after round, every quiet key is pushed within ceil(quiet /
 * budget) rounds, never more than the budget of them a round, and from
 * the cursor on, wrapping. */
static void test_rotation(void **state)
{
	static uint32_t seen[N];
	uint32_t from = 0, n = N, budget = 1000;

	(void)state;
	memset(seen, 0, sizeof(seen));
	fill(n, 0);
	for (unsigned round = 0; round < 3; round++) {
		assert_int_equal(rl_agent_repush_pick(items, n, budget, &from),
				 budget);
		for (uint32_t i = 0; i < n; i++)
			seen[i] += items[i].push;
	}
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(seen[i], 1);
	/* 3000 in turns of 1,000: back to the first */
	assert_int_equal(from, items[0].index);

	/* 2,500 quiet in turns of 1,000: the third round wraps */
	n = 2500;
	fill(n, 0);
	from = 0;
	memset(seen, 0, sizeof(seen));
	for (unsigned round = 0; round < 3; round++) {
		assert_int_equal(rl_agent_repush_pick(items, n, budget, &from),
				 budget);
		for (uint32_t i = 0; i < n; i++)
			seen[i] += items[i].push;
	}
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(seen[i], i < 500 ? 2 : 1);
	assert_int_equal(from, items[500].index);
}

/* A cursor past every quiet key (they left the table) starts over from
 * the first; one between slots starts at the next. */
static void test_cursor_moved(void **state)
{
	uint32_t from = 1000000;

	(void)state;
	fill(20, 0);
	assert_int_equal(rl_agent_repush_pick(items, 20, 5, &from), 5);
	for (uint32_t i = 0; i < 20; i++)
		assert_int_equal(items[i].push, i < 5);
	assert_int_equal(from, items[5].index);
	from = 101; /* between items 9 (slot 100) and 10 (slot 110) */
	assert_int_equal(rl_agent_repush_pick(items, 20, 5, &from), 5);
	for (uint32_t i = 0; i < 20; i++)
		assert_int_equal(items[i].push, i >= 10 && i < 15);
	assert_int_equal(from, items[15].index);
}

/* A host's share of RL_REPUSH_KEYS, rounded up: the fleet's figure. */
static void test_budget(void **state)
{
	(void)state;
	assert_int_equal(rl_agent_repush_budget(0), RL_REPUSH_KEYS);
	assert_int_equal(rl_agent_repush_budget(1), RL_REPUSH_KEYS);
	assert_int_equal(rl_agent_repush_budget(3), (RL_REPUSH_KEYS + 2) / 3);
	assert_int_equal(rl_agent_repush_budget(100000), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_within_budget),
		cmocka_unit_test(test_over_budget),
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_cursor_moved),
		cmocka_unit_test(test_budget),
	};

	return cmocka_run_group_tests_name("repush", tests, NULL, NULL);
}
