/* SPDX-License-Identifier: MIT */
/* clock.c - clocks, durations and rates. */
#include "clock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t rl_time_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * RL_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t rl_time_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / RL_NS_PER_MS;
}

struct unit {
	const char *name;
	uint64_t ns;
};

/* Longest names first where one is a prefix of another is not needed: a
 * unit must match the whole rest of the string. */
static const struct unit duration_units[] = {
	{ "ms", RL_NS_PER_MS },
	{ "s", RL_NS_PER_SEC },
	{ "sec", RL_NS_PER_SEC },
	{ "m", 60 * RL_NS_PER_SEC },
	{ "min", 60 * RL_NS_PER_SEC },
	{ "h", 3600 * RL_NS_PER_SEC },
	{ "hour", 3600 * RL_NS_PER_SEC },
	{ "d", 86400 * RL_NS_PER_SEC },
	{ "day", 86400 * RL_NS_PER_SEC },
};

/* A unit of `duration_units` spelling the whole of `s`, or 0. */
static uint64_t unit_ns(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++) {
		const struct unit *u = &duration_units[i];

		if (strlen(u->name) == len && memcmp(u->name, s, len) == 0)
			return u->ns;
	}
	return 0;
}

/* Leading decimal digits of `s` into *v; returns the number of digits, or
 * -ERANGE past UINT64_MAX. */
static int parse_digits(const char *s, uint64_t *v)
{
	uint64_t n = 0;
	int i = 0;

	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		if (__builtin_mul_overflow(n, 10, &n) ||
		    __builtin_add_overflow(n, (uint64_t)(s[i] - '0'), &n))
			return -ERANGE;
	}
	*v = n;
	return i;
}

/* The count a duration or a rate starts with: at least one digit. Returns
 * how many digits, or -EINVAL / -ERANGE. */
static int leading_number(const char *s, uint64_t *n)
{
	int digits;

	if (!s)
		return -EINVAL;
	digits = parse_digits(s, n);
	return digits == 0 ? -EINVAL : digits;
}

int rl_time_parse_duration(const char *s, uint64_t *out_ns)
{
	uint64_t n, unit, ns;
	int digits;

	digits = leading_number(s, &n);
	if (digits < 0)
		return digits;
	unit = unit_ns(s + digits, strlen(s + digits));
	if (!unit)
		return -EINVAL;
	if (__builtin_mul_overflow(n, unit, &ns))
		return -ERANGE;
	*out_ns = ns;
	return 0;
}

int rl_time_parse_rate(const char *s, struct rl_rate *out)
{
	const char *slash;
	uint64_t n, unit, times = 1;
	int digits;

	digits = leading_number(s, &n);
	if (digits < 0)
		return digits;
	slash = s + digits;
	if (*slash == 'r') /* nginx: 10r/s */
		slash++;
	if (*slash != '/')
		return -EINVAL;
	slash++;
	/* "5/10m": a period of several units (nginx has none; fail2ban's
	 * findtime is one). */
	digits = parse_digits(slash, &times);
	if (digits < 0)
		return digits;
	if (digits == 0)
		times = 1;
	else if (times == 0)
		return -EINVAL;
	slash += digits;
	unit = unit_ns(slash, strlen(slash));
	/* A rate's period is whole units: "/ms" would allow periods below a
	 * second, which the window algorithms do not support. */
	if (!unit || unit < RL_NS_PER_SEC)
		return -EINVAL;
	if (__builtin_mul_overflow(unit, times, &unit))
		return -ERANGE;
	if (n == 0)
		return -EINVAL;
	if (n > UINT32_MAX || n > unit)
		return -ERANGE;
	out->period_ns = unit;
	out->count = (uint32_t)n;
	out->burst = (uint32_t)n;
	return 0;
}

int rl_time_format_duration(char *buf, unsigned len, uint64_t ns)
{
	static const struct unit units[] = {
		{ "d", 86400 * RL_NS_PER_SEC }, { "h", 3600 * RL_NS_PER_SEC },
		{ "m", 60 * RL_NS_PER_SEC },    { "s", RL_NS_PER_SEC },
		{ "ms", RL_NS_PER_MS },
	};

	if (ns == 0)
		return snprintf(buf, len, "0s");
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ns % units[i].ns == 0)
			return snprintf(buf, len, "%llu%s",
					(unsigned long long)(ns / units[i].ns),
					units[i].name);
	}
	return snprintf(buf, len, "%lluns", (unsigned long long)ns);
}

void rl_time_civil(uint64_t wall_ms, struct rl_civil *c)
{
	uint64_t secs = wall_ms / 1000, days = secs / 86400, sod = secs % 86400;
	/* civil from days (H. Hinnant), for days since 1970-01-01 */
	uint64_t z = days + 719468, era = z / 146097, doe = z - era * 146097;
	uint64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	uint64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	uint64_t mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1;
	uint64_t m = mp < 10 ? mp + 3 : mp - 9, y = yoe + era * 400 + (m <= 2);

	c->year = (unsigned)y;
	c->month = (unsigned)m;
	c->day = (unsigned)d;
	c->hour = (unsigned)(sod / 3600);
	c->min = (unsigned)(sod / 60 % 60);
	c->sec = (unsigned)(sod % 60);
	c->ms = (unsigned)(wall_ms % 1000);
	c->wday = (unsigned)((days + 4) % 7); /* 1970-01-01 was a Thursday */
}
