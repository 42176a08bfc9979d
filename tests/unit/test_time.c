/* SPDX-License-Identifier: MIT */
/* test_time.c - clocks, durations and rates. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "clock.h"

#define SEC 1000000000ull

static void test_durations(void **state)
{
	static const struct {
		const char *in;
		uint64_t ns;
	} ok[] = {
		{ "100ms", 100000000ull }, { "30s", 30 * SEC },
		{ "10m", 600 * SEC },      { "1h", 3600 * SEC },
		{ "1d", 86400 * SEC },     { "0s", 0 },
		{ "2sec", 2 * SEC },       { "3min", 180 * SEC },
		{ "1hour", 3600 * SEC },   { "7day", 7 * 86400 * SEC },
		{ "1ms", 1000000ull },     { "0100ms", 100000000ull },
	};
	uint64_t ns;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		ns = 12345;
		assert_int_equal(rl_time_parse_duration(ok[i].in, &ns), 0);
		assert_int_equal(ns, ok[i].ns);
	}
}

static void test_bad_durations(void **state)
{
	static const char *const bad[] = {
		"", "s", "10", "10 s", " 10s", "10s ", "-1s", "+1s", "1.5s",
		"10x", "10S", "10mss", "ms", "1w", "10sec.", "1e3s", "0x10s",
	};
	uint64_t ns = 77;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(rl_time_parse_duration(bad[i], &ns), -EINVAL);
	assert_int_equal(rl_time_parse_duration(NULL, &ns), -EINVAL);
	assert_int_equal(ns, 77); /* untouched on error */
	/* 2^64 ns is about 584 years. */
	assert_int_equal(rl_time_parse_duration("213503d", &ns), 0);
	assert_int_equal(rl_time_parse_duration("213504d", &ns), -ERANGE);
	assert_int_equal(rl_time_parse_duration("99999999999999999999999s", &ns),
			 -ERANGE);
}

static void test_rates(void **state)
{
	static const struct {
		const char *in;
		uint64_t period;
		uint32_t count;
	} ok[] = {
		{ "60/m", 60 * SEC, 60 },     { "3/m", 60 * SEC, 3 },
		{ "10/s", SEC, 10 },          { "100/h", 3600 * SEC, 100 },
		{ "10000/d", 86400 * SEC, 10000 },
		{ "5r/s", SEC, 5 },           { "30r/m", 60 * SEC, 30 },
		{ "7/sec", SEC, 7 },          { "7/min", 60 * SEC, 7 },
		{ "7/hour", 3600 * SEC, 7 },  { "7/day", 86400 * SEC, 7 },
		{ "4294967295/d", 86400 * SEC, 4294967295u },
		{ "5/10m", 600 * SEC, 5 },    { "100/15s", 15 * SEC, 100 },
		{ "3/1h", 3600 * SEC, 3 },    { "2/7d", 7 * 86400 * SEC, 2 },
	};
	struct rl_rate r;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		memset(&r, 0, sizeof(r));
		assert_int_equal(rl_time_parse_rate(ok[i].in, &r), 0);
		assert_int_equal(r.period_ns, ok[i].period);
		assert_int_equal(r.count, ok[i].count);
		assert_int_equal(r.burst, ok[i].count);
	}
}

static void test_bad_rates(void **state)
{
	static const char *const bad[] = {
		"", "/s", "10", "10/", "10/x", "10//s", "0/s", "-1/s", "10 /s",
		"10/ s", "10/s ", "10r/", "10rr/s", "10/ms", "1.5/s", "10/S",
		"r/s", "10 r/s", "5/0m", "5/10", "5/10 m", "5/m10", "5/10ms",
	};
	struct rl_rate r = { 1, 2, 3 };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(rl_time_parse_rate(bad[i], &r), -EINVAL);
	assert_int_equal(r.period_ns, 1); /* untouched */
	assert_int_equal(rl_time_parse_rate("4294967296/d", &r), -ERANGE);
	/* More than one per nanosecond cannot be expressed. */
	assert_int_equal(rl_time_parse_rate("2000000000/s", &r), -ERANGE);
	assert_int_equal(rl_time_parse_rate(NULL, &r), -EINVAL);
}

static void test_format(void **state)
{
	char buf[32];

	(void)state;
	rl_time_format_duration(buf, sizeof(buf), 90 * SEC);
	assert_string_equal(buf, "90s");
	rl_time_format_duration(buf, sizeof(buf), 15 * 60 * SEC);
	assert_string_equal(buf, "15m");
	rl_time_format_duration(buf, sizeof(buf), 250000000ull);
	assert_string_equal(buf, "250ms");
	rl_time_format_duration(buf, sizeof(buf), 2 * 86400 * SEC);
	assert_string_equal(buf, "2d");
	rl_time_format_duration(buf, sizeof(buf), 0);
	assert_string_equal(buf, "0s");
	rl_time_format_duration(buf, sizeof(buf), 1500);
	assert_string_equal(buf, "1500ns");
	/* What is formatted parses back. */
	{
		uint64_t ns;

		rl_time_format_duration(buf, sizeof(buf), 3 * 3600 * SEC);
		assert_int_equal(rl_time_parse_duration(buf, &ns), 0);
		assert_int_equal(ns, 3 * 3600 * SEC);
	}
}

static void test_ceil_sec(void **state)
{
	(void)state;
	assert_int_equal(rl_time_ceil_sec(0), 0);
	assert_int_equal(rl_time_ceil_sec(1), 1);
	assert_int_equal(rl_time_ceil_sec(SEC), 1);
	assert_int_equal(rl_time_ceil_sec(SEC + 1), 2);
	assert_int_equal(rl_time_ceil_sec(20 * SEC - 1), 20);
}

static void test_clocks(void **state)
{
	uint64_t a, b, w;

	(void)state;
	a = rl_time_now_ns();
	b = rl_time_now_ns();
	assert_true(a > 0);
	assert_true(b >= a);
	w = rl_time_wall_ms();
	/* After 2020-01-01 and before 2200. */
	assert_true(w > 1577836800000ull);
	assert_true(w < 7258118400000ull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_bad_durations),
		cmocka_unit_test(test_rates),
		cmocka_unit_test(test_bad_rates),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_ceil_sec),
		cmocka_unit_test(test_clocks),
	};

	return cmocka_run_group_tests_name("time", tests, NULL, NULL);
}
