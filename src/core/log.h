/* SPDX-License-Identifier: MIT */
/*
 * log.h - one logger, logfmt lines:
 *
 *   rlshim level=warn pid=123 msg="redis unreachable" err="..."
 *
 * Callers pass the fields after `level=... pid=...` as a printf format, so a
 * line is built once on the stack and written with one write(2) (stderr) or
 * syslog(3). It never allocates. The hot path never logs per request.
 */
#ifndef RL_LOG_H
#define RL_LOG_H

#include <stddef.h>
#include <stdint.h>

enum rl_log_level {
	RL_LOG_ERROR = 0,
	RL_LOG_WARN = 1,
	RL_LOG_INFO = 2,
	RL_LOG_DEBUG = 3,
};

enum rl_log_target {
	RL_LOG_STDERR = 0,
	RL_LOG_SYSLOG = 1,
};

/* Where lines go and the most verbose level written. `ident` prefixes each
 * stderr line and names the syslog identity (kept, not copied). */
void rl_log_setup(enum rl_log_target target, enum rl_log_level level,
		  const char *ident);

void rl_log(enum rl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * `s` made safe inside a logfmt value's double quotes (\\ and \" escaped,
 * a newline as \n, other control bytes as ?), in `buf`, cut to fit.
 * Returns buf. For what comes from outside: file names, parse errors,
 * Redis's error strings.
 */
const char *rl_log_quote(const char *s, char *buf, size_t len);

/*
 * `wall_ms` (CLOCK_REALTIME in ms) as RFC 3339 UTC with milliseconds,
 * "2026-12-01T21:50:03.123Z", in `buf` (32 bytes are plenty). Returns the
 * length, 0 if it does not fit. What ts= of a stderr line carries.
 */
size_t rl_log_ts(char *buf, size_t len, uint64_t wall_ms);

struct rl_config;

/* A configuration's warnings (`file:line: warning: ...`, as rlshimctl check
 * prints them), a warn line each; the count of any past the kept few. */
void rl_log_config_warnings(const struct rl_config *c);

/* "error", "warn", "info", "debug" */
const char *rl_log_level_name(enum rl_log_level level);

#endif /* RL_LOG_H */
