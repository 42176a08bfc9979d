/* SPDX-License-Identifier: MIT */
/*
 * cmd_show.c - rlshimctl show RULE KEY [--json]: one key's state, as
 * HAProxy's `show table ... key`; rlshimctl reset RULE KEY: a full bucket
 * for it again, as `clear table ... key`.
 *
 * KEY is what the rule keys by, turned into the bytes the shim decides it
 * by with the core's own conversion (rl_config_key_of_text, the agent's for
 * the store's names): an address, masked to the configured prefix; a
 * header's value as it is; `-` for a global rule. The key's slot is then
 * found as a decision finds it (rl_table_key_view, rl_table_key_reset).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

#include "addr.h"
#include "ban.h"
#include "agent.h"
#include "clock.h"
#include "log.h"
#include "sha256.h"
#include "store.h"

struct key_opts {
	const char *rule;
	const char *key;
	int json;
	int all;      /* reset RULE --all */
};

/* The key of the command line, in the table's terms. */
struct key_arg {
	const struct rl_rule_cfg *r;
	unsigned id;                  /* the rule's id in the segment */
	const void *bytes;
	size_t len;
	uint8_t buf[17];
	char value[RL_KEY_MAX + 1];   /* a cookie's value found by its name */
};

/* A cookie rule's key named as top names it (sha256:DIGEST): the value of
 * the slot of rule `id` whose name that is. */
struct by_name {
	unsigned id;
	const char *name;
	struct key_arg *k;
	int found, truncated;
};

static int match_name(const struct rl_slot_view *v, void *arg)
{
	struct by_name *b = arg;
	char name[RL_SHA256_NAME_LEN];

	if (v->rule != b->id)
		return 0;
	rl_sha256_name(v->key, v->key_len, name);
	if (strcmp(name, b->name) != 0)
		return 0;
	if (v->truncated) {
		b->truncated = 1;
		return 1;
	}
	memcpy(b->k->value, v->key, v->key_len);
	b->k->value[v->key_len] = '\0';
	b->found = 1;
	return 1;
}

/* "sha256:" and 12 lower-case hex digits */
static int is_name(const char *t)
{
	return strncmp(t, "sha256:", 7) == 0 && strlen(t) == 19 &&
	       strspn(t + 7, "0123456789abcdef") == 12;
}

/* The id of rule `r` of the file in the segment: the entry of its name and
 * algorithm (a reload that changed the algorithm made it another rule).
 * 1 if it has one, 0 if no server has applied it yet. */
static int rule_id(struct ctl *c, const struct rl_rule_cfg *r, unsigned *out)
{
	for (unsigned id = 0; id < RL_MAX_RULES; id++) {
		struct rl_rule_stats st;

		if (rl_table_rule_stats(c->table, id, &st) == 0 &&
		    strncmp(st.name, r->name, RL_RULE_NAME_MAX) == 0 &&
		    st.algorithm == r->algorithm && rl_table_rule_get(c->table, id)) {
			*out = id;
			return 1;
		}
	}
	return 0;
}

/*
 * Rule `o->rule` of the file, its id in the segment, and `o->key` as the
 * bytes its requests are keyed by. 0, or 1 after the one-line reason.
 */
static int key_arg(struct ctl *c, const struct key_opts *o, struct key_arg *k)
{
	const char *text = o->key;
	size_t tlen = strlen(text);
	const char *slash;
	int found = 0;

	k->r = ctl_rule_cfg(c, o->rule);
	if (!k->r)
		return ctl_fail("no rule '%s' in %s", o->rule,
				c->path ? c->path : "the built-in default");
	found = rule_id(c, k->r, &k->id);
	if (!found)
		return ctl_fail("rule '%s' is not in force yet: no server has "
				"applied it", k->r->name);
	/* A session named as top names it: the value it stands for. */
	if (k->r->key == RL_KEY_COOKIE && is_name(text)) {
		struct by_name b = { k->id, text, k, 0, 0 };

		rl_table_foreach(c->table, rl_time_now_ns(), match_name, &b);
		if (b.truncated)
			return ctl_fail("%s names a value over %d bytes: give the "
					"value itself (top --show-secrets shows its "
					"start)", text, RL_KEY_MAX);
		if (!b.found)
			return ctl_fail("no key of rule '%s' is named %s now (top "
					"names those with a state)", k->r->name, text);
		text = k->value;
		tlen = strlen(text);
	}
	switch (k->r->key) {
	case RL_KEY_GLOBAL:
		if (strcmp(text, "-") != 0)
			return ctl_fail("rule '%s' is global: its KEY is -, not "
					"'%s'", k->r->name, text);
		text = "*"; /* the store's name for it */
		tlen = 1;
		break;
	case RL_KEY_IP:
		/* An address as top shows it, prefix and all: the rule's
		 * prefix is taken whatever the length says. */
		slash = strchr(text, '/');
		if (slash) {
			size_t digits = strspn(slash + 1, "0123456789");

			if (!digits || digits > 3 || slash[1 + digits])
				return ctl_fail("'%s' is not an address (rule "
						"'%s' keys by ip)", o->key,
						k->r->name);
			tlen = (size_t)(slash - text);
		}
		break;
	case RL_KEY_HEADER:
	case RL_KEY_COOKIE:
	case RL_KEY_JWT:
		if (!tlen)
			return ctl_fail("an empty %s is never counted: no key",
					k->r->header);
		/* Longer than the store's names go: the bytes as they are. */
		if (tlen > RL_KEY_MAX) {
			k->bytes = text;
			k->len = tlen;
			return 0;
		}
		break;
	}
	k->bytes = rl_config_key_of_text(c->cfg, k->r, text, tlen, k->buf,
					 &k->len);
	if (!k->bytes)
		return ctl_fail("'%s' is not an address (rule '%s' keys by ip)",
				o->key, k->r->name);
	return 0;
}

/* ---- the store ---------------------------------------------------------- */

/* A connection to the configuration's Redis with script 0 `lua`, or NULL
 * when it cannot be had. The store's own lines (unreachable...) are the
 * agent's to log: the caller says it in its one line. */
static struct rl_store *store_open(struct ctl *c, const char *lua)
{
	struct rl_store *s;

	rl_log_setup(RL_LOG_STDERR, RL_LOG_ERROR, "rlshimctl");
	s = rl_store_new(c->cfg->redis_url, c->cfg->redis_timeout_ns);
	if (!s)
		return NULL;
	rl_store_script(s, 0, lua);
	if (!rl_store_ready(s, rl_time_now_ns())) {
		rl_store_free(s);
		return NULL;
	}
	return s;
}

/* A store reply that is an error fails the command. */
static int store_ok(redisReply *rep, unsigned i, void *arg)
{
	(void)i;
	if (rep->type == REDIS_REPLY_ERROR) {
		snprintf(arg, 128, "%s", rep->str);
		return -1;
	}
	return 0;
}

/* KEYS[1]: a strict token bucket's hash (sync.c's, strict.c's). ARGV: the
 * key, the rule's interval (us). Returns what the key owes from now (us)
 * at that interval (RL_LUA_TAT), "0" for nothing. */
static const char show_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	RL_LUA_TAT
	"local tat = tat_of(redis.call('HGET', KEYS[1], ARGV[1]),\n"
	"                   tonumber(ARGV[2]), now)\n"
	"if tat <= now then return '0' end\n"
	"return string.format('%.0f', tat - now)\n";

struct owed {
	uint64_t us;
	int got;
};

static int owed_reply(redisReply *rep, unsigned i, void *arg)
{
	struct owed *o = arg;

	(void)i;
	if (rep->type != REDIS_REPLY_STRING)
		return -1;
	o->us = strtoull(rep->str, NULL, 10);
	o->got = 1;
	return 0;
}

/*
 * A strict token bucket's key as Redis holds it, where its admissions are
 * decided (the segment has only what this host last heard): *v as the key
 * would be seen here with the store's state, and 1 if it owes anything,
 * 0 if not; -1 when the store cannot tell (the caller shows this host's
 * view and says so).
 */
static int show_store(struct ctl *c, const struct key_arg *k,
		      struct rl_slot_view *v)
{
	const struct rl_rule_cache *rc = rl_table_rule_get(c->table, k->id);
	char hkey[160], text[112], ei[32];
	const char *argv[3] = { hkey, text, ei };
	size_t lens[3];
	struct owed o = { 0, 0 };
	struct rl_store *s;
	uint64_t now, state = 0;

	if (!rc || rc->algo.kind != RL_ALGO_GCRA || k->len > RL_KEY_MAX ||
	    v->peek.limit != rc->algo.rate.burst || !(s = store_open(c, show_lua)))
		return -1;
	lens[1] = rl_agent_key_text(k->r, k->bytes, k->len, 0, text, sizeof(text));
	lens[0] = rl_store_rule_key(c->cfg, k->r,
				    rl_store_key_shard(c->cfg, text, lens[1]), "",
				    hkey, sizeof(hkey));
	lens[2] = (size_t)snprintf(ei, sizeof(ei), "%.3f",
				   (double)rc->algo.interval_ns / 1000.0);
	if (rl_store_queue_script(s, 0, 1, 3, argv, lens) ||
	    rl_store_flush(s, owed_reply, &o, rl_time_now_ns()) || !o.got) {
		rl_store_free(s);
		return -1;
	}
	rl_store_free(s);
	now = rl_time_now_ns();
	if (o.us)
		state = now + o.us * 1000;
	rl_algo_step(&rc->algo, &state, 0, now, &v->peek);
	v->debt_ns = o.us * 1000;
	return o.us > 0;
}

/* ---- show ---------------------------------------------------------------- */

static const struct ctl_option show_options[] = {
	CTL_OPTION(CTL_OPT_STRING, struct key_opts, rule, .positional = 1,
		   .required = 1, .metavar = "RULE"),
	CTL_OPTION(CTL_OPT_STRING, struct key_opts, key, .positional = 1,
		   .required = 1, .metavar = "KEY"),
	CTL_OPTION(CTL_OPT_BOOL, struct key_opts, json, .name = "json",
		   .help = "the key's state as one JSON object"),
	CTL_END_OPTIONS,
};

static uint64_t ms_up(uint64_t ns)
{
	return (ns + RL_NS_PER_MS - 1) / RL_NS_PER_MS;
}

static int run_show(struct ctl *c, const void *opts)
{
	const struct key_opts *o = opts;
	struct rl_slot_view v;
	struct key_arg k;
	char key[RL_KEY_MAX * 4 + 8], retry[32], reset[32];
	const char *view = "host";
	uint64_t retry_ns;
	int rc, seen, bound, global;

	if ((rc = ctl_open(c, 0)) || (rc = key_arg(c, o, &k)))
		return rc;
	seen = rl_table_key_view(c->table, k.id, k.bytes, k.len,
				 rl_time_now_ns(), &v);
	if (seen < 0)
		return ctl_fail("rule '%s' is not in force yet", k.r->name);
	/* A strict rule's state is Redis's; the segment has what this host
	 * last heard of it. */
	if (c->cfg->redis && k.r->sync == RL_SYNC_STRICT) {
		int held = show_store(c, &k, &v);

		if (held >= 0) {
			seen = held;
			view = "redis";
		}
	}
	retry_ns = ctl_key_retry(c, &v, &bound);
	global = ctl_fmt_view_key(c, &v, key, sizeof(key));
	if (o->json) {
		struct ctl_json j = { 0, { 1 } };

		ctl_jopen(&j, NULL, '{');
		ctl_jtext(&j, "rule", k.r->name);
		ctl_jtext(&j, "key", global ? "-" : key);
		ctl_jbool(&j, "seen", seen);
		ctl_jnum(&j, "limit", v.peek.limit);
		ctl_jnum(&j, "remaining", v.peek.remaining);
		ctl_jnum(&j, "retry_after_ms", ms_up(retry_ns));
		ctl_jbool(&j, "retry_is_bound", bound);
		ctl_jnum(&j, "reset_after_ms", ms_up(v.peek.reset_after_ns));
		ctl_jtext(&j, "algorithm",
			  rl_config_algorithm_name(k.r->algorithm));
		ctl_jtext(&j, "view", view);
		ctl_jclose(&j, '}');
		putchar('\n');
		return ctl_flush();
	}
	snprintf(retry, sizeof(retry), "0");
	if (retry_ns) {
		/* "≤" is three bytes of UTF-8 */
		memcpy(retry, "\xe2\x89\xa4", 3);
		ctl_fmt_dur(retry + 3, sizeof(retry) - 3, retry_ns);
	}
	snprintf(reset, sizeof(reset), "0");
	if (v.peek.reset_after_ns)
		ctl_fmt_dur(reset, sizeof(reset), v.peek.reset_after_ns);
	printf("rule=%s key=%s state=%s limit=%u remaining=%u retry_after=%s "
	       "reset_after=%s view=%s\n",
	       k.r->name, global ? "-" : key,
	       seen ? "live" : "new", v.peek.limit, v.peek.remaining,
	       retry_ns && !bound ? retry + 3 : retry, reset, view);
	return ctl_flush();
}

const struct ctl_command ctl_cmd_show = {
	.name = "show",
	.help = "one key's state: remaining, retry, reset",
	.more = "  KEY is what RULE keys by: an address (its prefix is taken "
		"as ipv4_prefix\n"
		"  and ipv6_prefix say), a header's value, or - for a global "
		"rule. state=new:\n"
		"  no state (never seen, or repaid), a full bucket. view=host: "
		"this host's state\n"
		"  (with [redis], as the last sync left it); view=redis: a "
		"strict token bucket's,\n"
		"  read from Redis. retry_after is an upper bound (≤) for "
		"sliding-window rules.\n",
	.options = show_options,
	.opts_size = sizeof(struct key_opts),
	.run = run_show,
};

/* ---- reset --------------------------------------------------------------- */

static const struct ctl_option reset_options[] = {
	CTL_OPTION(CTL_OPT_STRING, struct key_opts, rule, .positional = 1,
		   .required = 1, .metavar = "RULE"),
	CTL_OPTION(CTL_OPT_STRING, struct key_opts, key, .positional = 1,
		   .metavar = "KEY"),
	CTL_OPTION(CTL_OPT_BOOL, struct key_opts, all, .name = "all",
		   .help = "every key of RULE (HAProxy's clear table)"),
	CTL_END_OPTIONS,
};

/*
 * The key's reset in the store, for every host (reset.c): its fields
 * deleted from the rule's hashes, and the reset recorded for the agents.
 * 0, or 1 after the one-line reason.
 */
/* Queue key `bytes` of rule `r`'s reset in the store: its fields
 * deleted, the reset recorded for the agents. 0, or -1 when the store
 * cannot name it (a value over RL_KEY_MAX bytes) or the queue failed. */
static int queue_reset(struct ctl *c, struct rl_store *s,
		       const struct rl_rule_cfg *r, const void *bytes,
		       size_t len)
{
	char text[112], rkey[160], member[RL_RULE_NAME_MAX + 112], keep[16];
	const char *argv[3] = { rkey, member, keep };
	size_t lens[3], tlen;

	if (len > RL_KEY_MAX)
		return -1;
	tlen = rl_agent_key_text(r, bytes, len, 0, text, sizeof(text));
	lens[0] = rl_store_resets_key(c->cfg, rkey, sizeof(rkey));
	lens[1] = (size_t)snprintf(member, sizeof(member), "%s %.*s",
				   r->name, (int)tlen, text);
	lens[2] = (size_t)snprintf(keep, sizeof(keep), "%u", RL_RESETS_KEEP_MS);
	if (rl_store_queue_forget(s, c->cfg, r, text, tlen) < 0 ||
	    rl_store_queue_script(s, 0, 1, 3, argv, lens))
		return -1;
	return 0;
}

static int reset_everywhere(struct ctl *c, const struct key_arg *k)
{
	char text[112], rkey[160], member[RL_RULE_NAME_MAX + 112], keep[16],
		why[128] = "no reply", url[RL_URL_MAX];
	const char *argv[3] = { rkey, member, keep };
	size_t lens[3];
	struct rl_store *s;
	size_t tlen;
	int rc;

	ctl_fmt_url(url, sizeof(url), c->cfg->redis_url);
	if (k->len > RL_KEY_MAX)
		return ctl_fail("reset on this host only: a value over %d bytes "
				"is named by a digest in Redis", RL_KEY_MAX);
	tlen = rl_agent_key_text(k->r, k->bytes, k->len, 0, text, sizeof(text));
	s = store_open(c, rl_lua_reset_record);
	if (!s)
		return ctl_fail("reset on this host only: Redis at %s is "
				"unreachable, the other hosts keep the key's "
				"state", url);
	lens[0] = rl_store_resets_key(c->cfg, rkey, sizeof(rkey));
	lens[1] = (size_t)snprintf(member, sizeof(member), "%s %.*s",
				   k->r->name, (int)tlen, text);
	lens[2] = (size_t)snprintf(keep, sizeof(keep), "%u", RL_RESETS_KEEP_MS);
	rc = rl_store_queue_forget(s, c->cfg, k->r, text, tlen) < 0 ||
	     rl_store_queue_script(s, 0, 1, 3, argv, lens) ||
	     rl_store_flush(s, store_ok, why, rl_time_now_ns());
	rl_store_free(s);
	if (rc)
		return ctl_fail("reset on this host only: Redis at %s: %s", url,
				why);
	return 0;
}

/* reset RULE --all: the keys with a state, collected first (a reset
 * changes the slots the walk reads). */
struct rule_keys {
	unsigned id;
	struct rl_slot_view *v;
	unsigned n, max, truncated;
};

static int collect_key(const struct rl_slot_view *v, void *arg)
{
	struct rule_keys *k = arg;

	if (v->rule != k->id)
		return 0;
	if (v->truncated) {
		k->truncated++; /* its bytes are not all in the slot */
		return 0;
	}
	if (k->n == k->max) {
		unsigned max = k->max ? 2 * k->max : 256;
		struct rl_slot_view *nv = realloc(k->v, max * sizeof(*nv));

		if (!nv)
			return 1;
		k->v = nv;
		k->max = max;
	}
	k->v[k->n++] = *v;
	return 0;
}

static int reset_all(struct ctl *c, const struct key_arg *k)
{
	struct rule_keys keys = { k->id, NULL, 0, 0, 0 };
	uint64_t now = rl_time_now_ns();
	unsigned done = 0, queued = 0;
	char url[RL_URL_MAX], why[128] = "no reply", round[32];
	struct rl_store *s = NULL;
	int failed = 0;

	if (rl_table_foreach(c->table, now, collect_key, &keys)) {
		free(keys.v);
		return ctl_fail("out of memory");
	}
	for (unsigned i = 0; i < keys.n; i++)
		done += rl_table_key_reset(c->table, k->id, keys.v[i].key,
					   keys.v[i].key_len, now) == 1;
	if (c->cfg->redis) {
		ctl_fmt_url(url, sizeof(url), c->cfg->redis_url);
		s = store_open(c, rl_lua_reset_record);
		for (unsigned i = 0; s && i < keys.n && !failed; i++) {
			failed = queue_reset(c, s, k->r, keys.v[i].key,
					     keys.v[i].key_len) != 0;
			/* A flush every few hundred keeps the buffers small. */
			if (!failed && (++queued % 256 == 0 || i + 1 == keys.n))
				failed = rl_store_flush(s, store_ok, why,
							rl_time_now_ns()) != 0;
		}
		if (s)
			rl_store_free(s);
	}
	free(keys.v);
	printf("rule=%s reset %u key%s here: a full bucket again", k->r->name,
	       done, done == 1 ? "" : "s");
	if (keys.truncated)
		printf(" (%u key%s over %d bytes, named by a digest, kept)",
		       keys.truncated, keys.truncated == 1 ? "" : "s", RL_KEY_MAX);
	if (!c->cfg->redis) {
		printf(" (no [redis]: this host only)\n");
		return ctl_flush();
	}
	if (!s || failed) {
		printf("\n");
		ctl_flush();
		return ctl_fail("reset on this host only: Redis at %s%s%s", url,
				s ? ": " : " is unreachable, the other hosts keep "
				"the keys' state", s ? why : "");
	}
	ctl_fmt_dur(round, sizeof(round), 2 * c->cfg->sync_interval_ns);
	printf(" and in Redis; every host's agent follows within %s (two sync "
	       "rounds)\n", round);
	return ctl_flush();
}

/* A reset gives a key its budget back; a ban on the client is another
 * matter, and the operator who resets a banned client should hear so. */
static void still_banned(struct ctl *c, const struct key_arg *k,
			 const char *key)
{
	struct rl_addr a;
	uint64_t wall = rl_time_wall_ms(), until;
	const char *slash = strchr(key, '/');
	char left[32];

	if (k->r->key != RL_KEY_IP ||
	    rl_addr_parse(key, slash ? (size_t)(slash - key) : strlen(key), &a))
		return;
	until = rl_ban_lookup(c->table, &a, wall);
	if (!until)
		return;
	ctl_fmt_left(left, sizeof(left), until - wall);
	printf("%.*s is still banned (%s left): a reset lifts no ban; "
	       "rlshimctl unban %.*s does\n",
	       slash ? (int)(slash - key) : (int)strlen(key), key, left,
	       slash ? (int)(slash - key) : (int)strlen(key), key);
}

static int run_reset(struct ctl *c, const void *opts)
{
	const struct key_opts *o = opts;
	struct rl_slot_view v;
	struct key_arg k;
	char key[RL_KEY_MAX * 4 + 8], round[32];
	int rc, had;

	if (o->all && o->key)
		return ctl_usage("reset: KEY or --all, not both");
	if (!o->all && !o->key)
		return ctl_usage("reset: expected KEY or --all");
	if (o->all) {
		struct key_opts any = *o;

		any.key = "-";
		if ((rc = ctl_open(c, 0)))
			return rc;
		k.r = ctl_rule_cfg(c, o->rule);
		/* key_arg finds the rule's id; "-" may not be its key. */
		if (!k.r)
			return ctl_fail("no rule '%s' in %s", o->rule,
					c->path ? c->path : "the built-in default");
		if (k.r->key != RL_KEY_GLOBAL)
			any.key = k.r->key == RL_KEY_IP ? "0.0.0.0" : "x";
		if ((rc = key_arg(c, &any, &k)))
			return rc;
		return reset_all(c, &k);
	}
	if ((rc = ctl_open(c, 0)) || (rc = key_arg(c, o, &k)))
		return rc;
	had = rl_table_key_reset(c->table, k.id, k.bytes, k.len,
				 rl_time_now_ns());
	if (had < 0)
		return ctl_fail("rule '%s' is not in force yet", k.r->name);
	/* Its name as show gives it (the address at the rule's prefix). */
	rl_table_key_view(c->table, k.id, k.bytes, k.len, rl_time_now_ns(), &v);
	if (ctl_fmt_view_key(c, &v, key, sizeof(key)))
		snprintf(key, sizeof(key), "-");
	if (!c->cfg->redis) {
		printf("rule=%s key=%s %s (no [redis]: this host only)\n",
		       k.r->name, key,
		       had ? "reset: a full bucket again"
			   : "had no state: nothing to reset");
		still_banned(c, &k, key);
		return ctl_flush();
	}
	if ((rc = reset_everywhere(c, &k)))
		return rc;
	ctl_fmt_dur(round, sizeof(round), 2 * c->cfg->sync_interval_ns);
	printf("rule=%s key=%s reset: a full bucket again here and in Redis; "
	       "every host's agent follows within %s (two sync rounds)\n",
	       k.r->name, key, round);
	still_banned(c, &k, key);
	return ctl_flush();
}

const struct ctl_command ctl_cmd_reset = {
	.name = "reset",
	.help = "a full bucket again: one key, or all (--all)",
	.more = "  KEY as for show. With [redis], on every host: the key's "
		"state in Redis is\n"
		"  deleted and the reset recorded for the agents, which "
		"follow within two\n"
		"  sync rounds. Without [redis], on this host only. A ban "
		"stays (unban).\n",
	.options = reset_options,
	.opts_size = sizeof(struct key_opts),
	.run = run_reset,
};

/* ---- who ----------------------------------------------------------------- */

struct who_opts {
	const char *addr;
	int json;
};

static const struct ctl_option who_options[] = {
	CTL_OPTION(CTL_OPT_STRING, struct who_opts, addr, .positional = 1,
		   .required = 1, .metavar = "ADDR"),
	CTL_OPTION(CTL_OPT_BOOL, struct who_opts, json, .name = "json",
		   .help = "the same as one JSON object"),
	CTL_END_OPTIONS,
};

/* One rule's view of the address, for who. */
struct who_rule {
	const struct rl_rule_cfg *r;
	const char *why;              /* not shown by address: why, or NULL */
	int seen;
	struct rl_slot_view v;
	uint64_t retry_ns;
	int bound;
	char key[RL_KEY_MAX * 4 + 8];
};

static void who_rule(struct ctl *c, const struct rl_rule_cfg *r,
		     const char *addr, struct who_rule *w)
{
	uint8_t buf[17];
	const void *bytes;
	size_t len = 0;
	unsigned id;
	const char *text = r->key == RL_KEY_GLOBAL ? "*" : addr;

	memset(w, 0, sizeof(*w));
	w->r = r;
	if (r->key != RL_KEY_IP && r->key != RL_KEY_GLOBAL) {
		w->why = "not by address";
		return;
	}
	if (!rule_id(c, r, &id)) {
		w->why = "not in force yet";
		return;
	}
	bytes = rl_config_key_of_text(c->cfg, r, text, strlen(text), buf, &len);
	if (!bytes) {
		w->why = "cannot key this address";
		return;
	}
	w->seen = rl_table_key_view(c->table, id, bytes, len, rl_time_now_ns(),
				    &w->v) > 0;
	w->retry_ns = ctl_key_retry(c, &w->v, &w->bound);
	if (ctl_fmt_view_key(c, &w->v, w->key, sizeof(w->key)))
		snprintf(w->key, sizeof(w->key), "-");
}

static int run_who(struct ctl *c, const void *opts)
{
	const struct who_opts *o = opts;
	struct rl_addr a;
	struct ctl_ban_filter f = { NULL, &a };
	const struct rl_cidr *allowed = NULL;
	uint64_t wall, until;
	struct who_rule w;
	char text[RL_CIDR_STRLEN], left[32], what[160];
	unsigned nbans = 0;
	int rc;

	if (rl_addr_parse(o->addr, strlen(o->addr), &a))
		return ctl_fail("not an address: '%s' (who takes one address, "
				"IPv4 or IPv6)", o->addr);
	if ((rc = ctl_open(c, 0)))
		return rc;
	rl_addr_format(&a, text, sizeof(text));
	wall = rl_time_wall_ms();
	until = rl_ban_lookup(c->table, &a, wall);
	if (rl_cidr_set_contains(&c->cfg->allow, &a)) {
		struct rl_cidr one = { a, (uint8_t)rl_addr_bits(&a) };

		allowed = rl_cidr_set_overlap(&c->cfg->allow, &one);
	}
	if (o->json) {
		struct ctl_json j = { 0, { 1 } };

		ctl_jopen(&j, NULL, '{');
		ctl_jtext(&j, "address", text);
		if (allowed) {
			rl_cidr_format(allowed, what, sizeof(what));
			ctl_jtext(&j, "allowed_by", what);
		} else {
			ctl_jnull(&j, "allowed_by");
		}
		ctl_jbool(&j, "banned", until != 0 && !allowed);
		if (until)
			ctl_jnum(&j, "banned_for_ms", until - wall);
		else
			ctl_jnull(&j, "banned_for_ms");
		ctl_jopen(&j, "bans", '[');
		if ((rc = ctl_bans_list(c, &f, &j, "", &nbans)))
			return rc;
		ctl_jclose(&j, ']');
		ctl_jopen(&j, "rules", '[');
		for (unsigned i = 0; i < c->cfg->nrules; i++) {
			who_rule(c, &c->cfg->rules[i], o->addr, &w);
			ctl_jopen(&j, NULL, '{');
			ctl_jtext(&j, "rule", w.r->name);
			ctl_fmt_key(what, sizeof(what), w.r);
			ctl_jtext(&j, "keys_by", what);
			if (w.why) {
				ctl_jtext(&j, "not_shown", w.why);
				ctl_jclose(&j, '}');
				continue;
			}
			ctl_jtext(&j, "key", w.key);
			ctl_jbool(&j, "seen", w.seen);
			ctl_jnum(&j, "limit", w.v.peek.limit);
			ctl_jnum(&j, "remaining", w.v.peek.remaining);
			ctl_jnum(&j, "retry_after_ms", ms_up(w.retry_ns));
			ctl_jbool(&j, "retry_is_bound", w.bound);
			ctl_jnum(&j, "reset_after_ms", ms_up(w.v.peek.reset_after_ns));
			ctl_jclose(&j, '}');
		}
		ctl_jclose(&j, ']');
		ctl_jclose(&j, '}');
		putchar('\n');
		return ctl_flush();
	}
	printf("address: %s\n", text);
	if (allowed) {
		rl_cidr_format(allowed, what, sizeof(what));
		printf("allow:   yes, %s of the allow list: never limited, never "
		       "banned\n", what);
	} else {
		printf("allow:   no\n");
	}
	if (until && !allowed) {
		ctl_fmt_left(left, sizeof(left), until - wall);
		printf("banned:  yes, refused at accept for %s more\n", left);
	} else if (until) {
		printf("banned:  a ban covers it, which the allow list "
		       "overrides\n");
	} else {
		printf("banned:  no\n");
	}
	if ((rc = ctl_bans_list(c, &f, NULL, "  ", &nbans)))
		return rc;
	{
		struct ctl_grid g;

		printf("rules:%s\n", c->cfg->nrules ? "" : "   (none)");
		if (!c->cfg->nrules)
			return ctl_flush();
		if (ctl_grid_init(&g, 7, c->cfg->nrules + 1))
			return ctl_fail("out of memory");
		ctl_grid_add(&g, "RULE");
		ctl_grid_add(&g, "KEY");
		ctl_grid_add(&g, "STATE");
		ctl_grid_add(&g, "REMAINING");
		ctl_grid_add(&g, "LIMIT");
		ctl_grid_add(&g, "RETRY");
		ctl_grid_add(&g, "RESET");
		g.right[3] = g.right[4] = g.right[5] = g.right[6] = 1;
		for (unsigned i = 0; i < c->cfg->nrules; i++) {
			char retry[32] = "0", reset[32] = "0";

			who_rule(c, &c->cfg->rules[i], o->addr, &w);
			if (w.why)
				continue; /* below the table */
			if (w.retry_ns)
				ctl_fmt_dur(retry, sizeof(retry), w.retry_ns);
			if (w.v.peek.reset_after_ns)
				ctl_fmt_dur(reset, sizeof(reset),
					    w.v.peek.reset_after_ns);
			ctl_grid_add(&g, "%s", w.r->name);
			ctl_grid_add(&g, "%s", w.key);
			ctl_grid_add(&g, "%s", w.seen ? "live" : "new");
			ctl_grid_add(&g, "%u", w.v.peek.remaining);
			ctl_grid_add(&g, "%u", w.v.peek.limit);
			ctl_grid_add(&g, "%s%s", w.retry_ns && w.bound ? "<=" : "",
				     retry);
			ctl_grid_add(&g, "%s", reset);
		}
		if (g.nrows > 1)
			ctl_grid_print(&g, stdout, "  ");
		ctl_grid_free(&g);
		for (unsigned i = 0; i < c->cfg->nrules; i++) {
			who_rule(c, &c->cfg->rules[i], o->addr, &w);
			if (!w.why)
				continue;
			ctl_fmt_key(what, sizeof(what), w.r);
			printf("  %s: key %s, %s\n", w.r->name, what, w.why);
		}
	}
	return ctl_flush();
}

const struct ctl_command ctl_cmd_who = {
	.name = "who",
	.help = "one address: allow list, bans, each rule",
	.more = "  Whether the allow list covers it, the bans that cover it "
		"(as bans lists them),\n"
		"  and each rule's state for it: rules that key by the "
		"address or are global\n"
		"  (key -); the others say what they key by.\n",
	.options = who_options,
	.opts_size = sizeof(struct who_opts),
	.run = run_who,
};
