/* SPDX-License-Identifier: MIT */
/* store.c - the Redis connection of rlshimd: connect, authenticate, time
 * out, back off, pipeline, and keep the scripts loaded. */
#include "store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "log.h"
#include "clock.h"

#define BACKOFF_MIN_NS (50 * RL_NS_PER_MS)
#define BACKOFF_MAX_NS (2000 * RL_NS_PER_MS)
#define QUEUE_MAX 1024
/* With sentinels, how often the master in use is checked with them while it
 * answers (a SENTINEL FAILOVER leaves the old master reachable): one short
 * connection to one sentinel. */
#define ASK_EVERY_NS (2 * RL_NS_PER_SEC)

struct queued {
	char *cmd;       /* formatted, as sent (kept to redo a NOSCRIPT) */
	size_t len;
	int script;      /* script id, or -1 */
	redisReply *reply;
};

struct rl_store {
	struct rl_store_url url;
	char url_text[512];
	uint64_t timeout_ns;
	redisContext *c;
	int up;
	int ever_up;
	uint64_t down_since_ms;   /* wall clock, for the log and the segment */
	uint64_t down_since_ns;   /* monotonic, for the outage's length */
	uint64_t retry_at_ns;
	uint64_t backoff_ns;
	int logged_down;
	uint64_t reconnects;
	uint64_t commands;
	uint64_t ask_at_ns;       /* sentinels: when to ask them again while up */
	const char *lua[RL_STORE_SCRIPTS];
	char sha[RL_STORE_SCRIPTS][41];
	unsigned nqueued;
	struct queued queue[QUEUE_MAX];
};

/* ---- the URL ------------------------------------------------------------------ */

static int unescape(const char *s, size_t n, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '%' && i + 2 < n) {
			char hex[3] = { s[i + 1], s[i + 2], 0 };
			char *end;
			long v = strtol(hex, &end, 16);

			if (*end)
				return -EINVAL;
			c = (char)v;
			i += 2;
		} else if (c == '%') {
			return -EINVAL;
		}
		if (o + 1 >= outlen)
			return -EINVAL;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

/* host[:port] or [v6][:port], from `p` up to `end`, into `a`; the port is
 * `port` if none is given. 0 or -EINVAL. */
static int parse_addr(const char *p, const char *end, int port,
		      struct rl_store_addr *a)
{
	const char *colon, *host = p, *host_end;

	if (p < end && *p == '[') { /* [v6] */
		const char *close = memchr(p, ']', (size_t)(end - p));

		if (!close)
			return -EINVAL;
		host = p + 1;
		host_end = close;
		colon = close + 1 < end ? close + 1 : NULL;
		if (colon && *colon != ':')
			return -EINVAL;
	} else {
		colon = memchr(p, ':', (size_t)(end - p));
		host_end = colon ? colon : end;
	}
	if (host_end == host || (size_t)(host_end - host) >= sizeof(a->host))
		return -EINVAL;
	memcpy(a->host, host, (size_t)(host_end - host));
	a->host[host_end - host] = '\0';
	a->port = port;
	if (colon) {
		char *e;
		long v = strtol(colon + 1, &e, 10);

		if (colon + 1 == end || colon[1] < '0' || colon[1] > '9' ||
		    e != end || v < 1 || v > 65535)
			return -EINVAL;
		a->port = (int)v;
	}
	return 0;
}

/* [/db] at `p` (the rest of the URL): 0 or -EINVAL. */
static int parse_db(const char *p, int *db)
{
	char *end;
	long v;

	if (!*p || (*p == '/' && !p[1]))
		return 0;
	if (*p != '/' || p[1] < '0' || p[1] > '9')
		return -EINVAL;
	v = strtol(p + 1, &end, 10);
	if (*end || v < 0 || v > 65535)
		return -EINVAL;
	*db = (int)v;
	return 0;
}

/* The sentinels, "h:p,h:p" from `p` up to `end`. 0 or -EINVAL. */
static int parse_sentinels(const char *p, const char *end,
			   struct rl_store_url *out)
{
	while (p <= end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma ? comma : end;

		if (out->nsentinels == RL_STORE_SENTINELS ||
		    parse_addr(p, stop, RL_STORE_SENTINEL_PORT,
			       &out->sentinels[out->nsentinels]))
			return -EINVAL;
		out->nsentinels++;
		p = stop + 1;
	}
	return 0;
}

int rl_store_parse_url(const char *url, struct rl_store_url *out)
{
	const char *p, *at, *slash;
	struct rl_store_addr a;
	int sentinel = 0;

	memset(out, 0, sizeof(*out));
	out->port = 6379;
	if (strncmp(url, "unix://", 7) == 0) {
		p = url + 7;
		if (*p != '/' || strlen(p) >= sizeof(out->host))
			return -EINVAL;
		out->unix_socket = 1;
		strcpy(out->host, p);
		return 0;
	}
	if (strncmp(url, "redis://", 8) == 0) {
		p = url + 8;
	} else if (strncmp(url, "redis-sentinel://", 17) == 0) {
		p = url + 17;
		sentinel = 1;
	} else {
		return -EINVAL;
	}
	slash = strchr(p, '/');
	at = strchr(p, '@');
	if (at && (!slash || at < slash)) {
		const char *sep = memchr(p, ':', (size_t)(at - p));

		if (sep) {
			if (unescape(p, (size_t)(sep - p), out->user, sizeof(out->user)) ||
			    unescape(sep + 1, (size_t)(at - sep - 1), out->pass,
				     sizeof(out->pass)))
				return -EINVAL;
		} else if (unescape(p, (size_t)(at - p), out->pass, sizeof(out->pass))) {
			return -EINVAL;
		}
		p = at + 1;
	}
	if (!sentinel) {
		if (parse_addr(p, slash ? slash : p + strlen(p), 6379, &a))
			return -EINVAL;
		memcpy(out->host, a.host, sizeof(out->host));
		out->port = a.port;
		return slash ? parse_db(slash, &out->db) : 0;
	}
	/* redis-sentinel://sentinels/master[/db]: the master is asked for */
	if (!slash || parse_sentinels(p, slash, out))
		return -EINVAL;
	p = slash + 1;
	slash = strchr(p, '/');
	if (!slash)
		slash = p + strlen(p);
	if (slash == p || (size_t)(slash - p) >= sizeof(out->master))
		return -EINVAL;
	memcpy(out->master, p, (size_t)(slash - p));
	out->port = 0;
	return parse_db(slash, &out->db);
}

/* ---- the connection ------------------------------------------------------------ */

/* host:port, or [v6]:port, into `out`. */
static void fmt_addr(const char *host, int port, char *out, size_t len)
{
	int v6 = strchr(host, ':') != NULL;

	snprintf(out, len, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

/* " master=host:port" for the log while a sentinel URL has named one, else "". */
static const char *master_text(const struct rl_store *s, char *out, size_t len)
{
	char a[300];

	if (!s->url.master[0] || !s->url.host[0])
		return "";
	fmt_addr(s->url.host, s->url.port, a, sizeof(a));
	snprintf(out, len, " master=%s", a);
	return out;
}

struct rl_store *rl_store_new(const char *url, uint64_t timeout_ns)
{
	struct rl_store *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	if (rl_store_parse_url(url, &s->url)) {
		free(s);
		return NULL;
	}
	/* The store as configured, for the log: scheme, user, host, port and
	 * db, never the password. */
	if (s->url.unix_socket) {
		snprintf(s->url_text, sizeof(s->url_text), "unix://%s",
			 s->url.host);
	} else if (s->url.master[0]) {
		size_t o = (size_t)snprintf(s->url_text, sizeof(s->url_text),
					    "redis-sentinel://%s%s", s->url.user,
					    s->url.user[0] ? "@" : "");

		for (unsigned i = 0; i < s->url.nsentinels && o < sizeof(s->url_text); i++) {
			char a[300];

			fmt_addr(s->url.sentinels[i].host, s->url.sentinels[i].port,
				 a, sizeof(a));
			o += (size_t)snprintf(s->url_text + o, sizeof(s->url_text) - o,
					      "%s%s", i ? "," : "", a);
		}
		if (o < sizeof(s->url_text))
			snprintf(s->url_text + o, sizeof(s->url_text) - o, "/%s/%d",
				 s->url.master, s->url.db);
	} else {
		snprintf(s->url_text, sizeof(s->url_text),
			 "redis://%s%s%s%s%s:%d/%d", s->url.user,
			 s->url.user[0] ? "@" : "",
			 strchr(s->url.host, ':') ? "[" : "", s->url.host,
			 strchr(s->url.host, ':') ? "]" : "", s->url.port,
			 s->url.db);
	}
	s->timeout_ns = timeout_ns;
	s->backoff_ns = BACKOFF_MIN_NS;
	return s;
}

static void queue_clear(struct rl_store *s)
{
	for (unsigned i = 0; i < s->nqueued; i++) {
		redisFreeCommand(s->queue[i].cmd);
		if (s->queue[i].reply)
			freeReplyObject(s->queue[i].reply);
	}
	s->nqueued = 0;
}

void rl_store_free(struct rl_store *s)
{
	if (!s)
		return;
	queue_clear(s);
	if (s->c)
		redisFree(s->c);
	free(s);
}

void rl_store_script(struct rl_store *s, unsigned id, const char *lua)
{
	if (id < RL_STORE_SCRIPTS)
		s->lua[id] = lua;
}

int rl_store_up(const struct rl_store *s)
{
	return s->up;
}

uint64_t rl_store_down_since_ms(const struct rl_store *s)
{
	return s->up ? 0 : s->down_since_ms;
}

uint64_t rl_store_reconnects(const struct rl_store *s)
{
	return s->reconnects;
}

uint64_t rl_store_commands(const struct rl_store *s)
{
	return s->commands;
}

/*
 * Why the connection failed, as hiredis says it (e.g. "Connection
 * refused"): "timed out" when a read timed out (hiredis says EAGAIN's
 * text, or nothing), "no reply" when hiredis saw no error.
 */
static const char *conn_reason(const redisContext *c)
{
	if (!c)
		return "out of memory";
	if (!c->err)
		return "no reply";
	if (!c->errstr[0] || strcmp(c->errstr, strerror(EAGAIN)) == 0)
		return "timed out";
	return c->errstr;
}

/* `why` into `out` with every occurrence of the password masked: an error
 * the store echoes (a renamed AUTH answers "unknown command ... with args
 * beginning with: 'PASSWORD'") never puts it in the log. */
static void mask_password(const struct rl_store *s, const char *why,
			  char *out, size_t len)
{
	size_t plen = strlen(s->url.pass), o = 0;

	while (*why && o + 1 < len) {
		if (plen && strncmp(why, s->url.pass, plen) == 0) {
			o += (size_t)snprintf(out + o, len - o, "***");
			if (o >= len)
				o = len - 1;
			why += plen;
		} else {
			out[o++] = *why++;
		}
	}
	out[o] = '\0';
}

void rl_store_fail(struct rl_store *s, const char *why, uint64_t now_ns)
{
	char masked[512];

	/* Copied first: `why` may be the context's errstr, freed below. */
	mask_password(s, why, masked, sizeof(masked));
	if (s->c) {
		redisFree(s->c);
		s->c = NULL;
	}
	queue_clear(s);
	if (s->up || !s->down_since_ns) {
		s->down_since_ms = rl_time_wall_ms();
		s->down_since_ns = now_ns;
	}
	if (!s->logged_down) {
		char q[1024], m[320];

		rl_log(RL_LOG_WARN, "msg=\"store unreachable\" store=%s%s err=\"%s\"",
		       s->url_text, master_text(s, m, sizeof(m)),
		       rl_log_quote(masked, q, sizeof(q)));
		s->logged_down = 1;
	}
	s->up = 0;
	s->retry_at_ns = now_ns + s->backoff_ns;
	s->backoff_ns = s->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS
							   : s->backoff_ns * 2;
}

/*
 * A reply that is not what `what` expects: its reason in `why` (`len`
 * bytes), as the store said it ("WRONGPASS invalid username-password
 * pair ...") or as the connection failed; `r` is freed. Returns -EIO.
 */
static int refused(const struct rl_store *s, redisReply *r, const char *what,
		   char *why, size_t len)
{
	if (r && r->type == REDIS_REPLY_ERROR)
		snprintf(why, len, "%s: %s", what, r->str);
	else if (r)
		snprintf(why, len, "%s: unexpected reply", what);
	else
		snprintf(why, len, "%s: %s", what, conn_reason(s->c));
	if (r)
		freeReplyObject(r);
	return -EIO;
}

/* A synchronous command during connection setup, named `what` in the
 * reason; 0 if the reply is not an error, else -EIO with `why` set. */
static int setup_command(struct rl_store *s, const char *what, char *why,
			 size_t len, const char *fmt, ...)
{
	redisReply *r;
	va_list ap;

	va_start(ap, fmt);
	r = redisvCommand(s->c, fmt, ap);
	va_end(ap);
	s->commands++;
	if (!r || r->type == REDIS_REPLY_ERROR)
		return refused(s, r, what, why, len);
	freeReplyObject(r);
	return 0;
}

/* SCRIPT LOAD each script: 0, or -EIO with the reason in `why`. */
static int load_scripts(struct rl_store *s, char *why, size_t len)
{
	for (unsigned i = 0; i < RL_STORE_SCRIPTS; i++) {
		redisReply *r;

		if (!s->lua[i])
			continue;
		r = redisCommand(s->c, "SCRIPT LOAD %s", s->lua[i]);
		s->commands++;
		if (!r || r->type != REDIS_REPLY_STRING || r->len != 40)
			return refused(s, r, "SCRIPT LOAD", why, len);
		memcpy(s->sha[i], r->str, 40);
		s->sha[i][40] = '\0';
		freeReplyObject(r);
	}
	return 0;
}

/* ---- sentinels ------------------------------------------------------------------- */

/*
 * Ask the sentinels, in order (each bounded by the timeout), for the
 * master's address: 0 with it in `a`, or -EIO with what each said in
 * `why`. The password, if any, is offered to each sentinel too; a sentinel
 * that needs none refuses it, and that refusal is not an error.
 */
static int ask_sentinels(struct rl_store *s, struct timeval tv,
			 struct rl_store_addr *a, char *why, size_t len)
{
	size_t o = (size_t)snprintf(why, len, "sentinels:");

	for (unsigned i = 0; i < s->url.nsentinels; i++) {
		const struct rl_store_addr *sa = &s->url.sentinels[i];
		redisContext *c = redisConnectWithTimeout(sa->host, sa->port, tv);
		redisReply *r = NULL;
		const char *said;
		char at[300];

		if (c && !c->err) {
			redisSetTimeout(c, tv);
			if (s->url.pass[0]) {
				r = s->url.user[0]
					? redisCommand(c, "AUTH %s %s", s->url.user, s->url.pass)
					: redisCommand(c, "AUTH %s", s->url.pass);
				s->commands++;
				if (r)
					freeReplyObject(r);
			}
			r = redisCommand(c, "SENTINEL get-master-addr-by-name %s",
					 s->url.master);
			s->commands++;
		}
		if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
		    r->element[0]->type == REDIS_REPLY_STRING &&
		    r->element[1]->type == REDIS_REPLY_STRING &&
		    r->element[0]->len && r->element[0]->len < sizeof(a->host)) {
			char *end;
			long port = strtol(r->element[1]->str, &end, 10);

			if (!*end && port >= 1 && port <= 65535) {
				memcpy(a->host, r->element[0]->str, r->element[0]->len + 1);
				a->port = (int)port;
				freeReplyObject(r);
				redisFree(c);
				return 0;
			}
		}
		said = !r ? conn_reason(c)
		       : r->type == REDIS_REPLY_ERROR ? r->str
		       : r->type == REDIS_REPLY_NIL ? "master unknown"
		       : "unexpected reply";
		fmt_addr(sa->host, sa->port, at, sizeof(at));
		if (o < len)
			o += (size_t)snprintf(why + o, len - o, "%s %s: %s",
					      i ? "," : "", at, said);
		if (r)
			freeReplyObject(r);
		if (c)
			redisFree(c);
	}
	return -EIO;
}

/* The server just connected is the master (ROLE): 0, or -EIO with the
 * reason in `why`. A replica is never written to. */
static int check_master(struct rl_store *s, char *why, size_t len)
{
	redisReply *r = redisCommand(s->c, "ROLE");

	s->commands++;
	if (!r || r->type != REDIS_REPLY_ARRAY || !r->elements ||
	    r->element[0]->type != REDIS_REPLY_STRING)
		return refused(s, r, "ROLE", why, len);
	if (strcmp(r->element[0]->str, "master") != 0) {
		snprintf(why, len, "ROLE: %s, not master", r->element[0]->str);
		freeReplyObject(r);
		return -EIO;
	}
	freeReplyObject(r);
	return 0;
}

/*
 * Up, with sentinels, and time to check: if they now name another master
 * (a failover while the old one still answers), drop this one and go down:
 * the caller connects to the new one at once. If no sentinel answers, the
 * master in use stays.
 */
static void recheck_master(struct rl_store *s, struct timeval tv, uint64_t now_ns)
{
	struct rl_store_addr a;
	char why[512], moved[600];

	s->ask_at_ns = now_ns + ASK_EVERY_NS;
	if (ask_sentinels(s, tv, &a, why, sizeof(why)) ||
	    (strcmp(a.host, s->url.host) == 0 && a.port == s->url.port))
		return;
	fmt_addr(a.host, a.port, why, sizeof(why));
	snprintf(moved, sizeof(moved), "sentinels name %s as the master", why);
	rl_store_fail(s, moved, now_ns);
	/* Reconnect at once: the store was up, and the new master is known. */
	s->retry_at_ns = now_ns;
}

int rl_store_ready(struct rl_store *s, uint64_t now_ns)
{
	struct timeval tv = { (time_t)(s->timeout_ns / RL_NS_PER_SEC),
			      (suseconds_t)(s->timeout_ns % RL_NS_PER_SEC / 1000) };
	char why[512], m[320];

	if (s->up && s->url.master[0] && now_ns >= s->ask_at_ns)
		recheck_master(s, tv, now_ns);
	if (s->up)
		return 1;
	if (now_ns < s->retry_at_ns)
		return 0;
	if (s->url.master[0]) {
		struct rl_store_addr a;

		if (ask_sentinels(s, tv, &a, why, sizeof(why)))
			goto fail;
		memcpy(s->url.host, a.host, sizeof(s->url.host));
		s->url.port = a.port;
		s->ask_at_ns = now_ns + ASK_EVERY_NS;
	}
	s->c = s->url.unix_socket ? redisConnectUnixWithTimeout(s->url.host, tv)
				  : redisConnectWithTimeout(s->url.host, s->url.port, tv);
	if (!s->c || s->c->err) {
		snprintf(why, sizeof(why), "%s", conn_reason(s->c));
		goto fail;
	}
	redisSetTimeout(s->c, tv);
	if (s->url.pass[0] &&
	    (s->url.user[0] ? setup_command(s, "AUTH", why, sizeof(why),
					    "AUTH %s %s", s->url.user, s->url.pass)
			    : setup_command(s, "AUTH", why, sizeof(why), "AUTH %s",
					    s->url.pass)))
		goto fail;
	if (s->url.master[0] && check_master(s, why, sizeof(why)))
		goto fail;
	if (s->url.db && setup_command(s, "SELECT", why, sizeof(why),
				       "SELECT %d", s->url.db))
		goto fail;
	if (load_scripts(s, why, sizeof(why)))
		goto fail;
	if (s->logged_down) {
		uint64_t ms = (now_ns - s->down_since_ns) / RL_NS_PER_MS;

		rl_log(RL_LOG_INFO, "msg=\"store reachable again\" store=%s%s "
		       "down_for=%llu.%03llus", s->url_text,
		       master_text(s, m, sizeof(m)),
		       (unsigned long long)(ms / 1000),
		       (unsigned long long)(ms % 1000));
	} else if (!s->ever_up) {
		rl_log(RL_LOG_INFO, "msg=\"store connected\" store=%s%s", s->url_text,
		       master_text(s, m, sizeof(m)));
	}
	if (s->ever_up)
		s->reconnects++;
	s->ever_up = 1;
	s->up = 1;
	s->logged_down = 0;
	s->down_since_ns = 0;
	s->backoff_ns = BACKOFF_MIN_NS;
	return 1;
fail:
	rl_store_fail(s, why, now_ns);
	return 0;
}

/* ---- the pipeline ---------------------------------------------------------------- */

static int enqueue(struct rl_store *s, char *cmd, long long len, int script)
{
	if (len < 0)
		return -ENOMEM;
	if (s->nqueued == QUEUE_MAX) {
		redisFreeCommand(cmd);
		return -ENOSPC;
	}
	s->queue[s->nqueued].cmd = cmd;
	s->queue[s->nqueued].len = (size_t)len;
	s->queue[s->nqueued].script = script;
	s->queue[s->nqueued].reply = NULL;
	s->nqueued++;
	return 0;
}

int rl_store_queue(struct rl_store *s, int argc, const char **argv,
		   const size_t *lens)
{
	char *cmd = NULL;
	long long n = redisFormatCommandArgv(&cmd, argc, argv, lens);

	return enqueue(s, cmd, n, -1);
}

int rl_store_queue_script(struct rl_store *s, unsigned id, int nkeys,
			  int argc, const char **argv, const size_t *lens)
{
	const char *v[argc + 3];
	size_t l[argc + 3];
	char nk[16];
	char *cmd = NULL;
	long long n;

	if (id >= RL_STORE_SCRIPTS || !s->lua[id])
		return -EINVAL;
	snprintf(nk, sizeof(nk), "%d", nkeys);
	v[0] = "EVALSHA";
	l[0] = 7;
	v[1] = s->sha[id];
	l[1] = 40;
	v[2] = nk;
	l[2] = strlen(nk);
	for (int i = 0; i < argc; i++) {
		v[3 + i] = argv[i];
		l[3 + i] = lens[i];
	}
	n = redisFormatCommandArgv(&cmd, argc + 3, v, l);
	return enqueue(s, cmd, n, (int)id);
}

static int is_noscript(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ERROR &&
	       strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* A reply that says this server is not (or no longer) a usable master: a
 * replica refusing a write (READONLY; a script's write says it too) or one
 * that lost its master (MASTERDOWN). The store goes down and the next
 * attempt asks the sentinels again. */
static int not_master(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ERROR &&
	       (strncmp(r->str, "READONLY", 8) == 0 ||
		strncmp(r->str, "MASTERDOWN", 10) == 0);
}

int rl_store_flush(struct rl_store *s,
		   int (*fn)(redisReply *r, unsigned i, void *arg), void *arg,
		   uint64_t now_ns)
{
	int rc = 0, reloaded = 0;

	if (!s->up) {
		queue_clear(s);
		return -EIO;
	}
	for (unsigned i = 0; i < s->nqueued; i++)
		if (redisAppendFormattedCommand(s->c, s->queue[i].cmd,
						s->queue[i].len) != REDIS_OK)
			goto io;
	for (unsigned i = 0; i < s->nqueued; i++) {
		void *r = NULL;

		if (redisGetReply(s->c, &r) != REDIS_OK || !r)
			goto io;
		s->queue[i].reply = r;
		s->commands++;
	}
	/* Scripts the server forgot (restarted, or SCRIPT FLUSH): load them
	 * and redo those calls, now that the pipeline is drained. */
	for (unsigned i = 0; i < s->nqueued; i++) {
		struct queued *q = &s->queue[i];
		void *r = NULL;

		if (!is_noscript(q->reply))
			continue;
		if (!reloaded) {
			char why[256];

			if (load_scripts(s, why, sizeof(why))) {
				rl_store_fail(s, why, now_ns);
				return -EIO;
			}
			reloaded = 1;
		}
		freeReplyObject(q->reply);
		q->reply = NULL;
		if (redisAppendFormattedCommand(s->c, q->cmd, q->len) != REDIS_OK ||
		    redisGetReply(s->c, &r) != REDIS_OK || !r)
			goto io;
		q->reply = r;
		s->commands++;
	}
	for (unsigned i = 0; i < s->nqueued; i++)
		if (not_master(s->queue[i].reply)) {
			rl_store_fail(s, s->queue[i].reply->str, now_ns);
			return -EIO;
		}
	for (unsigned i = 0; i < s->nqueued && !rc; i++)
		rc = fn(s->queue[i].reply, i, arg);
	queue_clear(s);
	return rc;
io:
	rl_store_fail(s, conn_reason(s->c), now_ns);
	return -EIO;
}
