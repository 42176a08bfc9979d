/* SPDX-License-Identifier: MIT */
/* clock.h - clocks, and the duration and rate syntax of rlshim.conf. */
#ifndef RL_CLOCK_H
#define RL_CLOCK_H

#include <stdint.h>

#include "rlshim.h"

#define RL_NS_PER_MS 1000000ull
#define RL_NS_PER_SEC 1000000000ull

/* CLOCK_REALTIME in milliseconds since the Unix epoch: only for headers and
 * for Redis, never for decisions. */
uint64_t rl_time_wall_ms(void);

/*
 * Parse a duration: digits then a unit, `100ms`, `30s`, `10m`, `1h`, `1d`
 * (long units `sec`, `min`, `hour`, `day` too). No sign, no fraction, no
 * space. Returns 0, -EINVAL for bad syntax or -ERANGE when it does not fit
 * in 64-bit nanoseconds.
 */
int rl_time_parse_duration(const char *s, uint64_t *out_ns);

/*
 * Parse a rate `N/s`, `N/m`, `N/h`, `N/d` (also `sec`, `min`, `hour`, `day`
 * and nginx's `Nr/s`). N is 1..2^32-1. Sets period_ns and count, and burst
 * to count. Returns 0, -EINVAL or -ERANGE.
 */
int rl_time_parse_rate(const char *s, struct rl_rate *out);

/*
 * Write a duration in the largest unit that divides it exactly (`90s`,
 * `15m`, `250ms`), NUL-terminated. Returns the length, as snprintf.
 */
int rl_time_format_duration(char *buf, unsigned len, uint64_t ns);

/* Seconds rounded up, as Retry-After wants them. */
static inline uint64_t rl_time_ceil_sec(uint64_t ns)
{
	return ns / RL_NS_PER_SEC + (ns % RL_NS_PER_SEC != 0);
}

/* A wall-clock time in milliseconds since the epoch as a UTC calendar
 * date, without the C library (gmtime_r takes the time zone's lock and may
 * read TZ and allocate: not inside somebody else's process). */
struct rl_civil {
	unsigned year, month, day;        /* month 1-12, day 1-31 */
	unsigned hour, min, sec, ms;
	unsigned wday;                    /* 0 = Sunday */
};

void rl_time_civil(uint64_t wall_ms, struct rl_civil *c);

#endif /* RL_CLOCK_H */
