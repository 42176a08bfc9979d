/* SPDX-License-Identifier: MIT */
/*
 * each.h - run a group of cmocka tests with one setup and one teardown
 * around every test, so that the list of tests names only the tests.
 * Include after <cmocka.h>.
 */
#ifndef RL_TEST_EACH_H
#define RL_TEST_EACH_H

#include <stddef.h>

/* Runs `tests` (n of them) as group `name`, each between setup and
 * teardown. */
static inline int run_each(const char *name, struct CMUnitTest *tests,
			   size_t n, CMFixtureFunction setup,
			   CMFixtureFunction teardown)
{
	for (size_t i = 0; i < n; i++) {
		tests[i].setup_func = setup;
		tests[i].teardown_func = teardown;
	}
	return _cmocka_run_group_tests(name, tests, n, NULL, NULL);
}

#endif /* RL_TEST_EACH_H */
