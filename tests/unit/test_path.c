/* SPDX-License-Identifier: MIT */
/* test_path.c - request paths in the form rules are matched against. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "path.h"

#define OUT_MAX 256 /* as RL_PATH_MAX in config.h */

static void expect_path(const char *target, const char *want)
{
	char out[OUT_MAX];
	uint32_t n;
	uint8_t trunc;

	if (rl_path_normalize(target, strlen(target), out, sizeof(out), &n,
			      &trunc))
		fail_msg("%s: refused", target);
	if (strcmp(out, want))
		fail_msg("%s: got '%s', want '%s'", target, out, want);
	assert_int_equal(n, strlen(want));
}

static void test_normalize(void **state)
{
	char out[OUT_MAX];
	uint32_t n;
	uint8_t trunc;

	(void)state;
	expect_path("/sms", "/sms");
	expect_path("/sms?to=1", "/sms");
	expect_path("/sms#frag", "/sms");
	expect_path("/%73ms", "/sms");
	expect_path("/%73%4D%53", "/sMS");
	expect_path("//sms", "/sms");
	expect_path("/./sms", "/sms");
	expect_path("/a/../sms", "/sms");
	expect_path("/a/%2e%2e/sms", "/sms");
	expect_path("/a/b/../../sms", "/sms");
	expect_path("/../../sms", "/sms");
	expect_path("/..", "/");
	expect_path("/sms/.", "/sms/");
	expect_path("/sms/..", "/");
	expect_path("/a%2Fb", "/a/b");
	expect_path("/a/...", "/a/...");
	expect_path("/a/.b", "/a/.b");
	expect_path("/", "/");
	expect_path("http://host/sms?q", "/sms");
	expect_path("HTTP://h:80//x/../sms", "/sms");
	expect_path("http://host", "/");
	expect_path("http://host?x", "/");
	expect_path("*", "*");
	expect_path("example.com:443", "");
	assert_int_equal(rl_path_normalize("/%2", 3, out, sizeof(out), &n, &trunc),
			 -EINVAL);
	assert_int_equal(rl_path_normalize("/%", 2, out, sizeof(out), &n, &trunc),
			 -EINVAL);
	assert_int_equal(rl_path_normalize("/%g0", 4, out, sizeof(out), &n, &trunc),
			 -EINVAL);
	assert_int_equal(rl_path_normalize("", 0, out, sizeof(out), &n, &trunc),
			 -EINVAL);
	/* Longer than the buffer: truncated, flagged, terminated. */
	{
		char longp[600];

		longp[0] = '/';
		memset(longp + 1, 'a', sizeof(longp) - 1);
		assert_int_equal(rl_path_normalize(longp, sizeof(longp), out,
						   sizeof(out), &n, &trunc), 0);
		assert_true(trunc);
		assert_int_equal(n, sizeof(out) - 1);
		assert_int_equal(out[n], '\0');
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_normalize),
	};

	return cmocka_run_group_tests_name("path", tests, NULL, NULL);
}
