/* SPDX-License-Identifier: MIT */
/* test_log.c - logfmt lines: one write each, levels, quoting, errno kept. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

/* Run `rl_log` with stderr on a pipe; what came out, in `out`. */
static size_t capture(char *out, size_t len, enum rl_log_level level,
		      const char *msg)
{
	int p[2], saved = dup(STDERR_FILENO);
	ssize_t n;

	assert_int_equal(pipe(p), 0);
	assert_true(dup2(p[1], STDERR_FILENO) >= 0);
	close(p[1]);
	rl_log(level, "msg=\"%s\" n=%d", msg, 7);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	n = read(p[0], out, len - 1);
	close(p[0]);
	out[n > 0 ? n : 0] = '\0';
	return n > 0 ? (size_t)n : 0;
}

static void test_line(void **state)
{
	char out[2048], want[128];

	(void)state;
	rl_log_setup(RL_LOG_STDERR, RL_LOG_INFO, "rltest");
	capture(out, sizeof(out), RL_LOG_WARN, "hello");
	snprintf(want, sizeof(want), " rltest level=warn pid=%d msg=\"hello\" n=7\n",
		 (int)getpid());
	/* ts=YYYY-MM-DDTHH:MM:SS.mmmZ first, then the rest. */
	assert_int_equal(strncmp(out, "ts=", 3), 0);
	assert_int_equal(out[3 + 24], ' ');
	assert_string_equal(out + 3 + 24, want);
	/* Below the level: nothing at all. */
	assert_int_equal(capture(out, sizeof(out), RL_LOG_DEBUG, "quiet"), 0);
	rl_log_setup(RL_LOG_STDERR, RL_LOG_ERROR, NULL);
	assert_int_equal(capture(out, sizeof(out), RL_LOG_INFO, "quiet"), 0);
	rl_log_setup(RL_LOG_STDERR, RL_LOG_INFO, NULL);
}

/* ts= is RFC 3339 UTC with milliseconds, for any time. */
static void test_ts(void **state)
{
	static const struct {
		uint64_t ms;
		const char *text;
	} cases[] = {
		{ 0, "1970-01-01T00:00:00.000Z" },
		{ 1796160603123ull, "2026-12-01T21:30:03.123Z" },
		{ 951782399999ull, "2000-02-28T23:59:59.999Z" },
		{ 951782400001ull, "2000-02-29T00:00:00.001Z" },
		{ 4102444799999ull, "2099-12-31T23:59:59.999Z" },
	};
	char buf[32];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(rl_log_ts(buf, sizeof(buf), cases[i].ms), 24);
		assert_string_equal(buf, cases[i].text);
	}
	/* Too short a buffer: nothing, never a cut stamp. */
	assert_int_equal(rl_log_ts(buf, 24, 0), 0);
	assert_string_equal(buf, "");
}

/* A line too long for the buffer is cut, still one line ending in \n. */
static void test_long_line(void **state)
{
	char out[4096], big[3000];

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	rl_log_setup(RL_LOG_STDERR, RL_LOG_INFO, "rltest");
	assert_int_equal(capture(out, sizeof(out), RL_LOG_ERROR, big), 1023);
	assert_int_equal(out[1022], '\n');
	assert_ptr_equal(strchr(out, '\n'), out + 1022);
}

static void test_errno_kept(void **state)
{
	char out[256];

	(void)state;
	errno = EAGAIN;
	capture(out, sizeof(out), RL_LOG_INFO, "x");
	/* capture's own calls may set errno; rl_log itself must not: */
	errno = ENOSPC;
	rl_log_setup(RL_LOG_STDERR, RL_LOG_DEBUG, "rltest");
	rl_log(RL_LOG_DEBUG, "msg=\"to stderr\"");
	assert_int_equal(errno, ENOSPC);
	rl_log(RL_LOG_DEBUG + 1, "msg=\"filtered\"");
	assert_int_equal(errno, ENOSPC);
	rl_log_setup(RL_LOG_STDERR, RL_LOG_INFO, NULL);
}

static void test_quote(void **state)
{
	char buf[64], tiny[5];

	(void)state;
	assert_string_equal(rl_log_quote("/etc/rlshim.conf", buf, sizeof(buf)),
			    "/etc/rlshim.conf");
	assert_string_equal(rl_log_quote("say \"hi\"\\now", buf, sizeof(buf)),
			    "say \\\"hi\\\"\\\\now");
	assert_string_equal(rl_log_quote("a\nb\tc\x7f", buf, sizeof(buf)),
			    "a\\nb?c?");
	/* Cut to fit, never half an escape. */
	assert_string_equal(rl_log_quote("\"\"\"", tiny, sizeof(tiny)),
			    "\\\"\\\"");
	assert_string_equal(rl_log_quote("abcdef", tiny, sizeof(tiny)), "abc");
	assert_string_equal(rl_log_quote("", buf, sizeof(buf)), "");
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(rl_log_level_name(RL_LOG_ERROR), "error");
	assert_string_equal(rl_log_level_name(RL_LOG_DEBUG), "debug");
	assert_string_equal(rl_log_level_name((enum rl_log_level)9), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line),
		cmocka_unit_test(test_ts),
		cmocka_unit_test(test_long_line),
		cmocka_unit_test(test_errno_kept),
		cmocka_unit_test(test_quote),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
