/* SPDX-License-Identifier: MIT */
/*
 * log.c - logfmt lines to stderr (one write(2) per line, so lines from
 * several processes never interleave) or to syslog.
 *
 * Lines to stderr (the shim's in the server's error log, the agent's in its
 * file) begin with ts=, RFC 3339 UTC with milliseconds; syslog lines do not,
 * syslog stamps them itself.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "sys.h"

static enum rl_log_target log_target = RL_LOG_STDERR;
static enum rl_log_level log_level = RL_LOG_INFO;
static const char *log_ident = "rlshim";
static int syslog_open;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

const char *rl_log_level_name(enum rl_log_level level)
{
	if ((unsigned)level > RL_LOG_DEBUG)
		return "?";
	return level_names[level];
}

const char *rl_log_quote(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	if (!len)
		return buf;
	for (; *s && n + 3 <= len; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\\' || c == '"') {
			buf[n++] = '\\';
			buf[n++] = (char)c;
		} else if (c == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
		} else {
			buf[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
		}
	}
	buf[n] = '\0';
	return buf;
}

size_t rl_log_ts(char *buf, size_t len, uint64_t wall_ms)
{
	struct rl_civil c;
	int n;

	if (!len)
		return 0;
	rl_time_civil(wall_ms, &c);
	n = snprintf(buf, len, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ", c.year,
		     c.month, c.day, c.hour, c.min, c.sec, c.ms);
	if (n < 0 || (size_t)n >= len) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n;
}

void rl_log_setup(enum rl_log_target target, enum rl_log_level level,
		  const char *ident)
{
	log_target = target;
	log_level = level;
	if (ident)
		log_ident = ident;
	if (target == RL_LOG_SYSLOG && !syslog_open) {
		openlog(log_ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
		syslog_open = 1;
	}
}

void rl_log(enum rl_log_level level, const char *fmt, ...)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char line[1024], ts[32];
	int saved = errno;
	int n, m;
	va_list ap;

	if (level > log_level)
		return;
	if (log_target == RL_LOG_SYSLOG)
		n = snprintf(line, sizeof(line), "level=%s ",
			     rl_log_level_name(level));
	else if (rl_log_ts(ts, sizeof(ts), rl_time_wall_ms()))
		n = snprintf(line, sizeof(line), "ts=%s %s level=%s pid=%d ",
			     ts, log_ident, rl_log_level_name(level),
			     (int)getpid());
	else
		n = snprintf(line, sizeof(line), "%s level=%s pid=%d ",
			     log_ident, rl_log_level_name(level), (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(line))
		goto out;
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		goto out;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	if (log_target == RL_LOG_SYSLOG) {
		line[n] = '\0';
		syslog(prio[level], "%s", line);
	} else {
		line[n++] = '\n';
		/* One write: a short write to a pipe of < PIPE_BUF is atomic. */
		if (rl_sys.write(STDERR_FILENO, line, (size_t)n) < 0)
			(void)0;
	}
out:
	errno = saved;
}

void rl_log_config_warnings(const struct rl_config *c)
{
	char q[RL_ERR_MAX];

	for (unsigned i = 0; i < c->nwarnings && i < RL_CONFIG_WARN_MAX; i++)
		rl_log(RL_LOG_WARN, "msg=\"%s\"",
		       rl_log_quote(c->warnings[i], q, sizeof(q)));
	if (c->nwarnings > RL_CONFIG_WARN_MAX)
		rl_log(RL_LOG_WARN, "msg=\"%u more configuration warnings\"",
		       c->nwarnings - RL_CONFIG_WARN_MAX);
}
