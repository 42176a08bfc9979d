/* SPDX-License-Identifier: MIT */
/*
 * skip.h - a unit test that cannot run here (it needs root) skips and says
 * why, once per binary, unless CI is set: CI runs as root, so there a test
 * that cannot run fails rather than pass unseen. Include after <cmocka.h>.
 */
#ifndef RL_TEST_SKIP_H
#define RL_TEST_SKIP_H

#include <errno.h> /* program_invocation_short_name: the test's name */
#include <stdlib.h>

static inline void skip_or_fail(const char *why)
{
	static int told;

	if (getenv("CI"))
		fail_msg("%s: %s, and CI runs as root: this test must not skip",
			 program_invocation_short_name, why);
	if (!told++)
		print_message("%s: skipped: %s\n",
			      program_invocation_short_name, why);
	skip();
}

#endif /* RL_TEST_SKIP_H */
