/* SPDX-License-Identifier: MIT */
/* store.c - the Redis connection of rlshimd: connect, authenticate, time
 * out, back off, pipeline, and keep the scripts loaded. */
#include "store.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cluster.h"
#include "config.h"
#include "log.h"
#include "clock.h"

#define BACKOFF_MIN_NS (50 * RL_NS_PER_MS)
#define BACKOFF_MAX_NS (2000 * RL_NS_PER_MS)
#define QUEUE_MAX 1024
/* With sentinels, how often the master in use is checked with them while it
 * answers: a safety net for a +switch-master missed (the subscription down
 * or not yet made); one command on the kept connection to one sentinel. */
#define ASK_EVERY_NS (2 * RL_NS_PER_SEC)
/* Cluster: the map is asked again this often while up (design step 1), and
 * at this step while a master of it is unreachable (a failover is followed
 * as soon as the replica is promoted). */
#define MAP_EVERY_NS (10 * RL_NS_PER_SEC)
#define MAP_RETRY_NS (50 * RL_NS_PER_MS)
/* Cluster: a master down, retried while the others serve, must answer a
 * PING within this (or the timeout, if shorter). */
#define PROBE_NS (20 * RL_NS_PER_MS)

struct queued {
	char *cmd;       /* formatted, as sent (kept to redo a NOSCRIPT) */
	size_t len;
	int script;      /* script id, or -1 */
	unsigned slot;   /* cluster: its first key's slot */
	int node;        /* cluster: the node it went to (index in node[]) */
	redisReply *reply;
};

/* Cluster: a master's connection (NULL until opened, or after a failure),
 * and its own backoff while it fails. */
struct node {
	char host[RL_CLUSTER_HOST_MAX];
	int port;
	redisContext *c;
	int down;                 /* failed, not reconnected since */
	int logged;               /* its going is in the log */
	uint64_t down_since_ns;
	uint64_t retry_at_ns;
	uint64_t backoff_ns;
	char why[256];            /* why it failed, the password masked */
};

struct rl_store {
	struct rl_store_url url;
	char url_text[512];
	char impact[1024];        /* what an outage does (rl_store_impact) */
	uint64_t timeout_ns;
	redisContext *c;
	int up;
	int ever_up;
	uint64_t down_since_ms;   /* wall clock, for the log and the segment */
	uint64_t down_since_ns;   /* monotonic, for the outage's length */
	uint64_t retry_at_ns;
	uint64_t backoff_ns;
	int logged_down;
	int quiet_nodes;          /* rl_store_quiet_nodes */
	uint64_t reconnects;
	uint64_t commands;
	uint64_t ask_at_ns;       /* sentinels: when to ask them again while up */
	const char *lua[RL_STORE_SCRIPTS];
	char sha[RL_STORE_SCRIPTS][41];
	unsigned nqueued;
	struct queued queue[QUEUE_MAX];
	/* redis-cluster://: the slot map, one connection per master; the
	 * spare map is parsed into and swapped in on success */
	int cluster;
	struct rl_cluster_url curl;
	struct rl_cluster_map *map, *spare;
	int map_stale;
	uint64_t map_at_ns;       /* the next periodic refresh */
	uint64_t map_retry_at_ns; /* stale: not asked again before */
	unsigned nnodes;
	struct node node[RL_CLUSTER_MASTERS_MAX];
	int shard_node[RL_CLUSTER_MASTERS_MAX]; /* map shard -> node[] */
	/* redis-sentinel://: two connections kept to a sentinel, opened to
	 * the one that answered last (sentinel_at), each dropped on an error:
	 * `sentinel` for SENTINEL get-master-addr-by-name, `sub` subscribed
	 * to +switch-master and read without blocking each round; `told`: a
	 * +switch-master named the master in url.host, use it without asking */
	redisContext *sentinel;
	redisContext *sub;
	unsigned sentinel_at;
	uint64_t sub_at_ns;       /* when to open `sub` again after a failure */
	int told;
};

/* ---- the URL ------------------------------------------------------------------ */

int rl_store_parse_url(const char *url, struct rl_store_url *out)
{
	struct rl_url u;

	memset(out, 0, sizeof(*out));
	if (rl_url_parse(url, &u) || u.kind == RL_URL_CLUSTER)
		return -EINVAL;
	out->unix_socket = u.kind == RL_URL_UNIX;
	if (out->unix_socket) {
		memcpy(out->host, u.path, sizeof(out->host));
		return 0;
	}
	memcpy(out->user, u.user, sizeof(out->user));
	memcpy(out->pass, u.pass, sizeof(out->pass));
	memcpy(out->master, u.master, sizeof(out->master));
	out->db = u.db;
	if (u.kind == RL_URL_REDIS) {
		memcpy(out->host, u.addr[0].host, sizeof(out->host));
		out->port = u.addr[0].port;
		return 0;
	}
	/* redis-sentinel://: the master is asked for */
	for (unsigned i = 0; i < u.naddrs; i++) {
		memcpy(out->sentinels[i].host, u.addr[i].host,
		       sizeof(out->sentinels[i].host));
		out->sentinels[i].port = u.addr[i].port;
	}
	out->nsentinels = u.naddrs;
	return 0;
}

/* ---- the connection ------------------------------------------------------------ */

/* " master=host:port" for the log while a sentinel URL has named one, else "". */
static const char *master_text(const struct rl_store *s, char *out, size_t len)
{
	char a[300];

	if (!s->url.master[0] || !s->url.host[0])
		return "";
	rl_url_format_addr(s->url.host, s->url.port, a, sizeof(a));
	snprintf(out, len, " master=%s", a);
	return out;
}

/* redis-cluster://: the seeds, the credentials where AUTH (and the log's
 * masking) find them, the two maps. 0 or -EINVAL / -ENOMEM. */
static int new_cluster(struct rl_store *s, const char *url)
{
	if (rl_cluster_parse_url(url, &s->curl))
		return -EINVAL;
	s->cluster = 1;
	memcpy(s->url.user, s->curl.user, sizeof(s->url.user));
	memcpy(s->url.pass, s->curl.pass, sizeof(s->url.pass));
	s->map = calloc(1, sizeof(*s->map));
	s->spare = calloc(1, sizeof(*s->spare));
	return s->map && s->spare ? 0 : -ENOMEM;
}

struct rl_store *rl_store_new(const char *url, uint64_t timeout_ns)
{
	struct rl_store *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	if (strncmp(url, "redis-cluster://", 16) == 0) {
		if (new_cluster(s, url)) {
			rl_store_free(s);
			return NULL;
		}
	} else if (rl_store_parse_url(url, &s->url)) {
		free(s);
		return NULL;
	}
	/* The store as configured, for the log: scheme, user, hosts, ports,
	 * master and db, never the password. */
	{
		struct rl_url u;

		rl_url_parse(url, &u); /* it parsed above */
		rl_url_format(&u, s->url_text, sizeof(s->url_text));
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
	if (s->sentinel)
		redisFree(s->sentinel);
	if (s->sub)
		redisFree(s->sub);
	for (unsigned i = 0; i < s->nnodes; i++)
		if (s->node[i].c)
			redisFree(s->node[i].c);
	free(s->map);
	free(s->spare);
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

int rl_store_cluster(const struct rl_store *s)
{
	return s->cluster;
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

void rl_store_impact(struct rl_store *s, const struct rl_config *cfg)
{
	rl_config_store_impact(cfg, s->impact, sizeof(s->impact));
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
	/* Cluster (no master answers): every connection goes, and the map is
	 * asked for again at the next attempt. */
	for (unsigned i = 0; i < s->nnodes; i++)
		if (s->node[i].c)
			redisFree(s->node[i].c);
	s->nnodes = 0;
	s->map_stale = 1;
	queue_clear(s);
	if (s->up || !s->down_since_ns) {
		s->down_since_ms = rl_time_wall_ms();
		s->down_since_ns = now_ns;
	}
	if (!s->logged_down) {
		char q[1024], m[320];

		rl_log(RL_LOG_WARN, "msg=\"store unreachable\" store=%s%s err=\"%s\"%s",
		       s->url_text, master_text(s, m, sizeof(m)),
		       rl_log_quote(masked, q, sizeof(q)), s->impact);
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
static int refused(const redisContext *c, redisReply *r, const char *what,
		   char *why, size_t len)
{
	if (r && r->type == REDIS_REPLY_ERROR)
		snprintf(why, len, "%s: %s", what, r->str);
	else if (r)
		snprintf(why, len, "%s: unexpected reply", what);
	else
		snprintf(why, len, "%s: %s", what, conn_reason(c));
	if (r)
		freeReplyObject(r);
	return -EIO;
}

/* A synchronous command during connection setup, named `what` in the
 * reason; 0 if the reply is not an error, else -EIO with `why` set. */
static int setup_command(struct rl_store *s, redisContext *c,
			 const char *what, char *why,
			 size_t len, const char *fmt, ...)
{
	redisReply *r;
	va_list ap;

	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	s->commands++;
	if (!r || r->type == REDIS_REPLY_ERROR)
		return refused(c, r, what, why, len);
	freeReplyObject(r);
	return 0;
}

/* SCRIPT LOAD each script: 0, or -EIO with the reason in `why`. */
static int load_scripts(struct rl_store *s, redisContext *c, char *why,
			size_t len)
{
	for (unsigned i = 0; i < RL_STORE_SCRIPTS; i++) {
		redisReply *r;

		if (!s->lua[i])
			continue;
		r = redisCommand(c, "SCRIPT LOAD %s", s->lua[i]);
		s->commands++;
		if (!r || r->type != REDIS_REPLY_STRING || r->len != 40)
			return refused(c, r, "SCRIPT LOAD", why, len);
		memcpy(s->sha[i], r->str, 40);
		s->sha[i][40] = '\0';
		freeReplyObject(r);
	}
	return 0;
}

/* ---- sentinels ------------------------------------------------------------------- */

/*
 * A connection to sentinel `i`, within `tv`: the password, if any, is
 * offered (a sentinel that needs none refuses it, and that refusal is not
 * an error). NULL, or a context whose err says why it failed.
 */
static redisContext *sentinel_conn(struct rl_store *s, unsigned i, struct timeval tv)
{
	const struct rl_store_addr *sa = &s->url.sentinels[i];
	redisContext *c = redisConnectWithTimeout(sa->host, sa->port, tv);
	redisReply *r;

	if (!c || c->err)
		return c;
	redisSetTimeout(c, tv);
	if (s->url.pass[0]) {
		r = s->url.user[0]
			? redisCommand(c, "AUTH %s %s", s->url.user, s->url.pass)
			: redisCommand(c, "AUTH %s", s->url.pass);
		s->commands++;
		if (r)
			freeReplyObject(r);
	}
	return c;
}

/*
 * Ask up to `tries` sentinels, in order from the one that answered last
 * (on its kept connection, if any; each bounded by the timeout), for the
 * master's address: 0 with it in `a`, the connection kept; or -EIO with
 * what each said in `why`, and the next sentinel the first to ask.
 */
static int ask_sentinels(struct rl_store *s, struct timeval tv, unsigned tries,
			 struct rl_store_addr *a, char *why, size_t len)
{
	size_t o = (size_t)snprintf(why, len, "sentinels:");
	unsigned n = s->url.nsentinels, first = s->sentinel_at, k;

	if (tries > n)
		tries = n;
	for (k = 0; k < tries; k++) {
		unsigned i = (first + k) % n;
		redisContext *c = s->sentinel ? s->sentinel : sentinel_conn(s, i, tv);
		redisReply *r = NULL;
		const char *said;
		char at[300];

		s->sentinel = NULL;
		if (c && !c->err) {
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
				s->sentinel = c;
				s->sentinel_at = i;
				return 0;
			}
		}
		said = !r ? conn_reason(c)
		       : r->type == REDIS_REPLY_ERROR ? r->str
		       : r->type == REDIS_REPLY_NIL ? "master unknown"
		       : "unexpected reply";
		rl_url_format_addr(s->url.sentinels[i].host, s->url.sentinels[i].port, at,
			 sizeof(at));
		if (o < len)
			o += (size_t)snprintf(why + o, len - o, "%s %s: %s",
					      k ? "," : "", at, said);
		if (r)
			freeReplyObject(r);
		if (c)
			redisFree(c);
	}
	s->sentinel_at = (first + k) % n;
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
		return refused(s->c, r, "ROLE", why, len);
	if (strcmp(r->element[0]->str, "master") != 0) {
		snprintf(why, len, "ROLE: %s, not master", r->element[0]->str);
		freeReplyObject(r);
		return -EIO;
	}
	freeReplyObject(r);
	return 0;
}

/*
 * Up, with sentinels, and time to check (the safety net): if they now name
 * another master (a switch the subscription missed), drop this one and go
 * down: the caller connects to the new one at once. One sentinel is asked
 * per round; if it does not answer, the master in use stays, and a kept
 * connection that failed has the next sentinel asked at the next round.
 */
static void recheck_master(struct rl_store *s, struct timeval tv, uint64_t now_ns)
{
	struct rl_store_addr a;
	char why[512], moved[600];
	int kept = s->sentinel != NULL;

	s->ask_at_ns = now_ns + ASK_EVERY_NS;
	if (ask_sentinels(s, tv, 1, &a, why, sizeof(why))) {
		if (kept)
			s->ask_at_ns = now_ns;
		return;
	}
	if (strcmp(a.host, s->url.host) == 0 && a.port == s->url.port)
		return;
	rl_url_format_addr(a.host, a.port, why, sizeof(why));
	snprintf(moved, sizeof(moved), "sentinels name %s as the master", why);
	rl_store_fail(s, moved, now_ns);
	/* Reconnect at once: the store was up, and the new master is known. */
	s->retry_at_ns = now_ns;
}

/* Open `sub` to the sentinel that answered last, SUBSCRIBEd to
 * +switch-master; on a failure, again in ASK_EVERY_NS. */
static void subscribe(struct rl_store *s, struct timeval tv, uint64_t now_ns)
{
	redisContext *c = sentinel_conn(s, s->sentinel_at, tv);
	redisReply *r = NULL;

	if (c && !c->err) {
		r = redisCommand(c, "SUBSCRIBE +switch-master");
		s->commands++;
	}
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    strcmp(r->element[0]->str, "subscribe") == 0) {
		freeReplyObject(r);
		s->sub = c;
		return;
	}
	if (r)
		freeReplyObject(r);
	if (c)
		redisFree(c);
	s->sub_at_ns = now_ns + ASK_EVERY_NS;
}

/* A pubsub message "+switch-master <name> <old-ip> <old-port> <new-ip>
 * <new-port>" for our master: 1 with the new master in `a`, else 0. */
static int switch_message(const struct rl_store *s, const redisReply *r,
			  struct rl_store_addr *a)
{
	char name[sizeof(s->url.master)], host[sizeof(a->host)];
	int port;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[2]->type != REDIS_REPLY_STRING ||
	    strcmp(r->element[0]->str, "message") != 0 ||
	    sscanf(r->element[2]->str, "%127s %*s %*s %255s %d", name, host, &port) != 3 ||
	    strcmp(name, s->url.master) != 0 || port < 1 || port > 65535)
		return 0;
	memcpy(a->host, host, sizeof(host));
	a->port = port;
	return 1;
}

/*
 * Read what `sub` has without blocking (at most one read a round): 1 with
 * the master in `a` if a +switch-master for ours was heard, else 0. On an
 * error (the sentinel gone) `sub` is dropped, opened again next round, and
 * the sentinels asked at once for what it may have missed.
 */
static int heard_switch(struct rl_store *s, struct rl_store_addr *a,
			uint64_t now_ns)
{
	struct pollfd p = { .fd = s->sub->fd, .events = POLLIN };
	int ok = 1, heard = 0;
	void *r;

	if (poll(&p, 1, 0) > 0 && redisBufferRead(s->sub) != REDIS_OK)
		ok = 0;
	for (;;) {
		r = NULL;
		if (redisGetReplyFromReader(s->sub, &r) != REDIS_OK) {
			ok = 0;
			break;
		}
		if (!r)
			break;
		heard |= switch_message(s, r, a);
		freeReplyObject(r);
	}
	if (!ok) {
		redisFree(s->sub);
		s->sub = NULL;
		s->sub_at_ns = now_ns;
		s->ask_at_ns = now_ns;
	}
	return heard;
}

/*
 * Each round, with sentinels: a +switch-master heard moves at once (down,
 * then to the new master, ROLE checked, in this same call); while up, at
 * most one blocking sentinel operation, each bounded by the timeout: the
 * re-ask when due, or else the subscription opened when missing.
 */
static void watch_sentinels(struct rl_store *s, struct timeval tv, uint64_t now_ns)
{
	struct rl_store_addr a;

	if (s->sub && heard_switch(s, &a, now_ns) &&
	    (!s->up || strcmp(a.host, s->url.host) != 0 || a.port != s->url.port)) {
		if (s->up) {
			char at[300], why[400];

			rl_url_format_addr(a.host, a.port, at, sizeof(at));
			snprintf(why, sizeof(why), "sentinel: +switch-master to %s", at);
			rl_store_fail(s, why, now_ns);
		}
		memcpy(s->url.host, a.host, sizeof(s->url.host));
		s->url.port = a.port;
		s->told = 1;
		s->retry_at_ns = now_ns;
		return;
	}
	if (!s->up)
		return;
	if (now_ns >= s->ask_at_ns)
		recheck_master(s, tv, now_ns);
	else if (!s->sub && now_ns >= s->sub_at_ns)
		subscribe(s, tv, now_ns);
}

/* ---- cluster ------------------------------------------------------------------- */

static int is_noscript(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ERROR &&
	       strncmp(r->str, "NOSCRIPT", 8) == 0;
}


static struct timeval store_tv(const struct rl_store *s)
{
	struct timeval tv = { (time_t)(s->timeout_ns / RL_NS_PER_SEC),
			      (suseconds_t)(s->timeout_ns % RL_NS_PER_SEC / 1000) };

	return tv;
}

/* A connection to the node at host:port, authenticated, its scripts
 * loaded; or NULL with "host:port: reason" in `why`. With `probe`, the
 * connection and a first PING are bounded by PROBE_NS (if shorter than
 * the timeout): a node retried while the others serve, which may be
 * stopped (its kernel still accepts), costs the agent's loop that much,
 * not a whole timeout, at each try. Any answer, NOAUTH too, is alive. */
static redisContext *open_conn(struct rl_store *s, const char *host, int port,
			       int probe, char *why, size_t len)
{
	struct timeval tv = store_tv(s), ptv = tv;
	redisContext *c;
	char at[300], said[200];

	if (probe && s->timeout_ns > PROBE_NS)
		ptv = (struct timeval){ 0, (suseconds_t)(PROBE_NS / 1000) };
	c = redisConnectWithTimeout(host, port, ptv);
	rl_url_format_addr(host, port, at, sizeof(at));
	if (!c || c->err) {
		snprintf(why, len, "%s: %s", at, conn_reason(c));
		goto fail;
	}
	if (probe) {
		redisReply *r;

		redisSetTimeout(c, ptv);
		r = redisCommand(c, "PING");
		s->commands++;
		if (!r) {
			snprintf(why, len, "%s: %s", at, conn_reason(c));
			goto fail;
		}
		freeReplyObject(r);
	}
	redisSetTimeout(c, tv);
	if ((s->url.pass[0] &&
	     (s->url.user[0] ? setup_command(s, c, "AUTH", said, sizeof(said),
					     "AUTH %s %s", s->url.user, s->url.pass)
			     : setup_command(s, c, "AUTH", said, sizeof(said),
					     "AUTH %s", s->url.pass))) ||
	    load_scripts(s, c, said, sizeof(said))) {
		snprintf(why, len, "%s: %s", at, said);
		goto fail;
	}
	return c;
fail:
	if (c)
		redisFree(c);
	return NULL;
}

/* " for N.NNNs" of `ns`, into `out`. */
static const char *fmt_secs(uint64_t ns, char *out, size_t len)
{
	uint64_t ms = ns / RL_NS_PER_MS;

	snprintf(out, len, "%llu.%03llus", (unsigned long long)(ms / 1000),
		 (unsigned long long)(ms % 1000));
	return out;
}

/* Log node n's going, once (while the store is up: a whole outage has
 * the store's own lines). */
static void node_log_down(struct rl_store *s, struct node *n)
{
	char at[300], q[1024];

	if (n->logged || !s->up || s->quiet_nodes)
		return;
	rl_url_format_addr(n->host, n->port, at, sizeof(at));
	rl_log(RL_LOG_WARN, "msg=\"store node unreachable\" store=%s node=%s "
	       "err=\"%s\"", s->url_text, at, rl_log_quote(n->why, q, sizeof(q)));
	n->logged = 1;
}

/*
 * Node n failed (its connection, or opening it): dropped alone, retried
 * with its own backoff; the map is asked again soon (a failover names
 * another master for its slots as soon as the replica is promoted).
 */
static void node_drop(struct rl_store *s, unsigned i, const char *why,
		      uint64_t now_ns)
{
	struct node *n = &s->node[i];

	/* masked first: `why` may be the context's errstr, freed below */
	mask_password(s, why, n->why, sizeof(n->why));
	if (n->c) {
		redisFree(n->c);
		n->c = NULL;
	}
	if (!n->down) {
		n->down = 1;
		n->down_since_ns = now_ns;
		n->backoff_ns = BACKOFF_MIN_NS;
	}
	node_log_down(s, n);
	n->retry_at_ns = now_ns + n->backoff_ns;
	n->backoff_ns = n->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS
							   : n->backoff_ns * 2;
	s->map_stale = 1;
	if (!s->map_retry_at_ns || s->map_retry_at_ns > now_ns + MAP_RETRY_NS)
		s->map_retry_at_ns = now_ns + MAP_RETRY_NS;
}

/* The index of the node at host:port in node[] (added, not connected, if
 * new), or -1 with the reason in `why`. */
static int node_find(struct rl_store *s, const char *host, int port, char *why,
		     size_t len)
{
	unsigned i;

	for (i = 0; i < s->nnodes; i++)
		if (s->node[i].port == port && strcmp(s->node[i].host, host) == 0)
			return (int)i;
	if (s->nnodes == RL_CLUSTER_MASTERS_MAX) {
		snprintf(why, len, "more than %d cluster nodes", RL_CLUSTER_MASTERS_MAX);
		return -1;
	}
	memset(&s->node[i], 0, sizeof(s->node[i]));
	snprintf(s->node[i].host, sizeof(s->node[i].host), "%s", host);
	s->node[i].port = port;
	s->nnodes++;
	return (int)i;
}

void rl_store_quiet_nodes(struct rl_store *s)
{
	s->quiet_nodes = 1;
}

/* Node i connected (opened now if need be, and if its backoff allows
 * while the store is up): 0, or -1 with the reason in `why`. */
static int node_conn(struct rl_store *s, unsigned i, char *why, size_t len,
		     uint64_t now_ns)
{
	struct node *n = &s->node[i];
	char at[300], t[32];

	if (n->c)
		return 0;
	if (n->down && s->up && now_ns < n->retry_at_ns) {
		rl_url_format_addr(n->host, n->port, at, sizeof(at));
		snprintf(why, len, "%s: %s", at, n->why);
		return -1;
	}
	if (!(n->c = open_conn(s, n->host, n->port, n->down && s->up, why, len))) {
		node_drop(s, i, why, now_ns);
		return -1;
	}
	if (n->down && n->logged) {
		rl_url_format_addr(n->host, n->port, at, sizeof(at));
		rl_log(RL_LOG_INFO, "msg=\"store node reachable again\" store=%s "
		       "node=%s down_for=%s", s->url_text, at,
		       fmt_secs(now_ns - n->down_since_ns, t, sizeof(t)));
	}
	n->down = 0;
	n->logged = 0;
	return 0;
}

/* The node at host:port, connected: its index in node[], or -1 with the
 * reason in `why`. */
static int node_at(struct rl_store *s, const char *host, int port, char *why,
		   size_t len, uint64_t now_ns)
{
	int i = node_find(s, host, port, why, len);

	if (i < 0 || node_conn(s, (unsigned)i, why, len, now_ns))
		return -1;
	return i;
}

/* CLUSTER SLOTS of node n into the spare map, swapped in on success (an
 * endpoint of "" is node n's host). 0, or -EIO with the reason in `why`
 * (the node dropped if its connection failed). */
static int read_map(struct rl_store *s, unsigned n, char *why, size_t len,
		    uint64_t now_ns)
{
	redisReply *r = redisCommand(s->node[n].c, "CLUSTER SLOTS");
	struct rl_cluster_map *m = s->spare;
	char at[300];

	s->commands++;
	rl_url_format_addr(s->node[n].host, s->node[n].port, at, sizeof(at));
	if (!r || r->type != REDIS_REPLY_ARRAY) {
		char said[200];

		refused(s->node[n].c, r, "CLUSTER SLOTS", said, sizeof(said));
		snprintf(why, len, "%s: %s", at, said);
		if (!r)
			node_drop(s, n, why, now_ns);
		return -EIO;
	}
	if (rl_cluster_map_slots(r, m)) {
		snprintf(why, len, "%s: CLUSTER SLOTS: a reply of the wrong shape", at);
		freeReplyObject(r);
		return -EIO;
	}
	freeReplyObject(r);
	for (unsigned i = 0; i < m->nshards; i++)
		if (!m->shard[i].master.host[0])
			snprintf(m->shard[i].master.host, sizeof(m->shard[i].master.host),
				 "%s", s->node[n].host);
	s->spare = s->map;
	s->map = m;
	return 0;
}

/* How many of the map's masters are connected. */
static unsigned masters_up(const struct rl_store *s)
{
	unsigned up = 0;

	for (unsigned i = 0; i < s->map->nshards; i++)
		up += s->node[s->shard_node[i]].c != NULL;
	return up;
}

/*
 * The slot map anew, asked of a node already connected (a known master
 * first), else of the seeds in order; then a connection to every master
 * it names. A master that cannot be reached is left down (its calls
 * fail alone) and the map asked again soon. 0 while at least one master
 * is connected, else -EIO with the (last) reason in `why`.
 */
static int refresh_map(struct rl_store *s, char *why, size_t len,
		       uint64_t now_ns, int retry)
{
	int got = -EIO;
	unsigned down = 0;

	s->map_at_ns = now_ns + MAP_EVERY_NS;
	s->map_retry_at_ns = 0;
	for (unsigned i = 0; i < s->nnodes && got; i++)
		if (s->node[i].c)
			got = read_map(s, i, why, len, now_ns);
	for (unsigned i = 0; i < s->curl.nseeds && got; i++) {
		int n = node_at(s, s->curl.seed[i].host, s->curl.seed[i].port, why,
				len, now_ns);

		if (n >= 0)
			got = read_map(s, (unsigned)n, why, len, now_ns);
	}
	if (got && !s->map->nshards)
		return -EIO;
	/* no node answered: the map in hand stands, asked again soon */
	for (unsigned i = 0; i < s->map->nshards; i++) {
		const struct rl_cluster_node *m = &s->map->shard[i].master;
		int n = node_find(s, m->host, m->port, why, len);

		if (n < 0)
			return -EIO;
		s->shard_node[i] = n;
		/* (a master down is retried after the round: retry 0) */
		if (!retry && s->node[n].down && !s->node[n].c)
			down++;
		else
			down += node_conn(s, (unsigned)n, why, len, now_ns) != 0;
	}
	if (down == s->map->nshards)
		return -EIO;
	s->map_stale = got || down;
	if (s->map_stale && !s->map_retry_at_ns)
		s->map_retry_at_ns = now_ns + MAP_RETRY_NS;
	return 0;
}

/*
 * One call's reply needs another try: a redirection (MOVED: the map is
 * stale, resend to the node named; ASK: resend there after ASKING) or a
 * script that node forgot (load them, resend). Returns 1 if it was sent
 * again (its new reply in q->reply), 0 if the reply is final, -1 if the
 * call failed without a reply (the node it went to dropped if its
 * connection failed).
 */
static int cluster_redo(struct rl_store *s, struct queued *q, uint64_t now_ns)
{
	struct rl_cluster_redirect rd;
	redisContext *c;
	char why[512];
	void *r = NULL;
	int n = q->node, rc;

	if (!q->reply || q->reply->type != REDIS_REPLY_ERROR)
		return 0;
	if (is_noscript(q->reply)) {
		if (!s->node[n].c) /* dropped since it answered */
			return -1;
		if (load_scripts(s, s->node[n].c, why, sizeof(why))) {
			if (s->node[n].c->err)
				node_drop(s, (unsigned)n, why, now_ns);
			return -1;
		}
		rd.ask = 0;
	} else {
		rc = rl_cluster_parse_redirect(q->reply->str, q->reply->len, &rd);
		if (rc == -ENOENT)
			return 0;
		if (rc) {
			s->map_stale = 1;
			return 0; /* a redirection we cannot follow: the call fails */
		}
		n = node_at(s, rd.host[0] ? rd.host : s->node[q->node].host,
			    rd.port, why, sizeof(why), now_ns);
		if (n < 0)
			return -1;
		if (!rd.ask)
			s->map_stale = 1;
	}
	c = s->node[n].c;
	if ((rd.ask && redisAppendCommand(c, "ASKING") != REDIS_OK) ||
	    redisAppendFormattedCommand(c, q->cmd, q->len) != REDIS_OK)
		goto io;
	if (rd.ask) {
		if (redisGetReply(c, &r) != REDIS_OK || !r)
			goto io;
		freeReplyObject(r);
		r = NULL;
		s->commands++;
	}
	if (redisGetReply(c, &r) != REDIS_OK || !r)
		goto io;
	s->commands++;
	freeReplyObject(q->reply);
	q->reply = r;
	q->node = n;
	return 1;
io:
	{
		char at[300];

		rl_url_format_addr(s->node[n].host, s->node[n].port, at, sizeof(at));
		snprintf(why, sizeof(why), "%s: %s", at, conn_reason(c));
		node_drop(s, (unsigned)n, why, now_ns);
	}
	return -1;
}

/* Node n's connection failed mid-round: dropped, with the reason. */
static void node_io(struct rl_store *s, unsigned n, uint64_t now_ns)
{
	char why[512], at[300];

	rl_url_format_addr(s->node[n].host, s->node[n].port, at, sizeof(at));
	snprintf(why, sizeof(why), "%s: %s", at, conn_reason(s->node[n].c));
	node_drop(s, n, why, now_ns);
}

/* The call failed without a reply from Redis: what fn is given. */
static char no_reply_text[] = RL_STORE_NO_REPLY " no answer from its cluster node";
static redisReply no_reply = {
	.type = REDIS_REPLY_ERROR,
	.str = no_reply_text,
	.len = sizeof(no_reply_text) - 1,
};

int rl_store_no_reply(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ERROR &&
	       strncmp(r->str, RL_STORE_NO_REPLY, sizeof(RL_STORE_NO_REPLY) - 1) == 0;
}

/*
 * The pipeline over the cluster: each call to its slot's master, every
 * node's pipeline written before any is read (a round costs the slowest
 * node, not the sum), replies handed to fn in the order queued. A failure
 * is the call's alone: a node whose connection fails is dropped (its calls
 * are given no_reply, the others stand), and a call answered CLUSTERDOWN,
 * TRYAGAIN or still redirected after two tries is given that reply. The
 * store goes down only when no master of the map is connected.
 */
static int cluster_flush(struct rl_store *s,
			 int (*fn)(redisReply *r, unsigned i, void *arg),
			 void *arg, uint64_t now_ns)
{
	char why[512];
	unsigned answered = 0, clusterdown = 0;
	int rc = 0;

	if (((s->map_stale && now_ns >= s->map_retry_at_ns) ||
	     now_ns >= s->map_at_ns) &&
	    refresh_map(s, why, sizeof(why), now_ns, 0))
		goto fail;
	for (unsigned i = 0; i < s->nqueued; i++) {
		struct queued *q = &s->queue[i];
		unsigned sh = s->map->owner[q->slot];

		q->node = -1;
		if (!sh) { /* a slot without master: the map is asked again */
			s->map_stale = 1;
			continue;
		}
		q->node = s->shard_node[sh - 1];
		if (s->node[q->node].c &&
		    redisAppendFormattedCommand(s->node[q->node].c, q->cmd,
						q->len) != REDIS_OK)
			node_io(s, (unsigned)q->node, now_ns);
	}
	for (unsigned n = 0; n < s->nnodes; n++) {
		int done = 0;

		while (s->node[n].c && !done)
			if (redisBufferWrite(s->node[n].c, &done) != REDIS_OK)
				node_io(s, n, now_ns);
	}
	for (unsigned i = 0; i < s->nqueued; i++) {
		struct queued *q = &s->queue[i];
		void *r = NULL;

		if (q->node < 0 || !s->node[q->node].c)
			continue;
		if (redisGetReply(s->node[q->node].c, &r) != REDIS_OK || !r) {
			node_io(s, (unsigned)q->node, now_ns);
			continue;
		}
		q->reply = r;
		s->commands++;
	}
	/* Redirections and forgotten scripts, one call at a time (rare: a
	 * resharding, a restart): at most two more tries each. */
	for (unsigned i = 0; i < s->nqueued; i++) {
		struct queued *q = &s->queue[i];
		int again = 1;
		const char *e;

		for (int t = 0; t < 3 && again > 0 && q->reply; t++)
			again = cluster_redo(s, q, now_ns);
		if (again < 0 && q->reply) {
			freeReplyObject(q->reply);
			q->reply = NULL;
		}
		if (!q->reply)
			continue;
		e = q->reply->type == REDIS_REPLY_ERROR ? q->reply->str : "";
		if (strncmp(e, "CLUSTERDOWN", 11) == 0) {
			s->map_stale = 1;
			clusterdown++;
			snprintf(why, sizeof(why), "%s", e);
		} else {
			answered++;
		}
	}
	/* The cluster says it is down (a master lost without a replica, with
	 * cluster-require-full-coverage yes, or a minority partition): as no
	 * master at all. */
	if (clusterdown && !answered)
		goto fail;
	if (!masters_up(s)) {
		snprintf(why, sizeof(why), "no master of the cluster answers");
		for (unsigned n = 0; n < s->nnodes; n++)
			if (s->node[n].down)
				snprintf(why, sizeof(why), "%s", s->node[n].why);
		goto fail;
	}
	if (s->map_stale && !s->map_retry_at_ns)
		s->map_retry_at_ns = now_ns;
	for (unsigned i = 0; i < s->nqueued && !rc; i++)
		rc = fn(s->queue[i].reply ? s->queue[i].reply : &no_reply, i, arg);
	queue_clear(s);
	/* Masters down whose backoff is over, tried again now that the
	 * round's answers are handed on (a stopped node costs a timeout). */
	for (unsigned i = 0; i < s->map->nshards; i++) {
		struct node *n = &s->node[s->shard_node[i]];
		uint64_t t = rl_time_now_ns();

		if (n->down && !n->c && t >= n->retry_at_ns)
			node_conn(s, (unsigned)s->shard_node[i], why, sizeof(why), t);
	}
	return rc;
fail:
	rl_store_fail(s, why, now_ns);
	return -EIO;
}

_Static_assert(RL_STORE_MASTERS_MAX == RL_CLUSTER_MASTERS_MAX,
	       "a tag for every master of the map");

unsigned rl_store_epoch_tags(const struct rl_store *s,
			     char (*tags)[RL_STORE_TAG_MAX], unsigned max)
{
	unsigned n = 0;

	if (!s->cluster) {
		if (!max)
			return 0;
		tags[0][0] = '\0';
		return 1;
	}
	/* a master whose tag is not found (it owns no slot) has no epoch:
	 * none of the keys is on it */
	for (unsigned i = 0; i < s->map->nshards && n < max; i++)
		if (rl_cluster_node_tag(s->map, i, tags[n], RL_STORE_TAG_MAX) > 0)
			n++;
	return n;
}

int rl_store_master_of(const struct rl_store *s, const char *key, size_t len)
{
	const struct rl_cluster_shard *m;

	if (!s->cluster)
		return 0;
	m = rl_cluster_lookup(s->map, rl_cluster_slot(key, len));
	return m ? (int)(m - s->map->shard) : -1;
}

/*
 * Coming back: the cluster serves (CLUSTER INFO of a master says
 * cluster_state:ok), or every call would be answered CLUSTERDOWN and the
 * store go down again at the first round. 0, or -EIO with `why`.
 */
static int cluster_state(struct rl_store *s, char *why, size_t len,
			 uint64_t now_ns)
{
	for (unsigned i = 0; i < s->map->nshards; i++) {
		struct node *n = &s->node[s->shard_node[i]];
		redisReply *r;
		char at[300];

		if (!n->c)
			continue;
		r = redisCommand(n->c, "CLUSTER INFO");
		s->commands++;
		rl_url_format_addr(n->host, n->port, at, sizeof(at));
		if (!r) {
			snprintf(why, len, "%s: %s", at, conn_reason(n->c));
			node_drop(s, (unsigned)s->shard_node[i], why, now_ns);
			continue;
		}
		if (r->type == REDIS_REPLY_STRING) {
			int ok = strstr(r->str, "cluster_state:ok") != NULL;

			freeReplyObject(r);
			if (ok)
				return 0;
			snprintf(why, len, "%s: CLUSTERDOWN (cluster_state:fail)", at);
			return -EIO;
		}
		snprintf(why, len, "%s: CLUSTER INFO: %s", at,
			 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
		freeReplyObject(r);
	}
	return -EIO;
}

/* Cluster: how many masters of the map are unreachable now, and how many
 * it names (0 and 0 otherwise). */
unsigned rl_store_masters_down(const struct rl_store *s, unsigned *masters)
{
	*masters = s->cluster && s->up ? s->map->nshards : 0;
	return *masters ? *masters - masters_up(s) : 0;
}

int rl_store_ready(struct rl_store *s, uint64_t now_ns)
{
	struct timeval tv = { (time_t)(s->timeout_ns / RL_NS_PER_SEC),
			      (suseconds_t)(s->timeout_ns % RL_NS_PER_SEC / 1000) };
	char why[512], m[320];

	if (s->url.master[0])
		watch_sentinels(s, tv, now_ns);
	if (s->up)
		return 1;
	if (now_ns < s->retry_at_ns)
		return 0;
	if (s->url.master[0]) {
		struct rl_store_addr a;

		/* the master a +switch-master named, else the sentinels' */
		if (s->told) {
			s->told = 0;
		} else {
			if (ask_sentinels(s, tv, s->url.nsentinels, &a, why, sizeof(why)))
				goto fail;
			memcpy(s->url.host, a.host, sizeof(s->url.host));
			s->url.port = a.port;
		}
		s->ask_at_ns = now_ns + ASK_EVERY_NS;
	}
	if (s->cluster) {
		if (refresh_map(s, why, sizeof(why), now_ns, 1) ||
		    cluster_state(s, why, sizeof(why), now_ns))
			goto fail;
		goto up;
	}
	s->c = s->url.unix_socket ? redisConnectUnixWithTimeout(s->url.host, tv)
				  : redisConnectWithTimeout(s->url.host, s->url.port, tv);
	if (!s->c || s->c->err) {
		snprintf(why, sizeof(why), "%s", conn_reason(s->c));
		goto fail;
	}
	redisSetTimeout(s->c, tv);
	if (s->url.pass[0] &&
	    (s->url.user[0] ? setup_command(s, s->c, "AUTH", why, sizeof(why),
					    "AUTH %s %s", s->url.user, s->url.pass)
			    : setup_command(s, s->c, "AUTH", why, sizeof(why), "AUTH %s",
					    s->url.pass)))
		goto fail;
	if (s->url.master[0] && check_master(s, why, sizeof(why)))
		goto fail;
	if (s->url.db && setup_command(s, s->c, "SELECT", why, sizeof(why),
				       "SELECT %d", s->url.db))
		goto fail;
	if (load_scripts(s, s->c, why, sizeof(why)))
		goto fail;
up:
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
	/* up with some masters unreachable: each said once */
	for (unsigned i = 0; i < s->nnodes; i++)
		if (s->node[i].down)
			node_log_down(s, &s->node[i]);
	return 1;
fail:
	rl_store_fail(s, why, now_ns);
	return 0;
}

/* ---- the pipeline ---------------------------------------------------------------- */

static int enqueue(struct rl_store *s, char *cmd, long long len, int script,
		   unsigned slot)
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
	s->queue[s->nqueued].slot = slot;
	s->queue[s->nqueued].reply = NULL;
	s->nqueued++;
	return 0;
}

int rl_store_queue(struct rl_store *s, int argc, const char **argv,
		   const size_t *lens)
{
	char *cmd = NULL;
	long long n = redisFormatCommandArgv(&cmd, argc, argv, lens);

	/* every command the agent sends names its key first */
	return enqueue(s, cmd, n, -1,
		       argc > 1 ? rl_cluster_slot(argv[1], lens[1]) : 0);
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
	return enqueue(s, cmd, n, (int)id,
		       nkeys > 0 && argc > 0 ? rl_cluster_slot(argv[0], lens[0]) : 0);
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
	if (s->cluster)
		return cluster_flush(s, fn, arg, now_ns);
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

			if (load_scripts(s, s->c, why, sizeof(why))) {
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
