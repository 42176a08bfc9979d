/* SPDX-License-Identifier: MIT */
/*
 * sync_jobs.c - the jobs of sync.c's round, one pair each: the command
 * that asks the store (a script call, or HMGET/HSCAN) for a batch of a
 * rule's keys, and what is done with its answer (sync: the key's debt and
 * this host's grant; windows: the counts; the pull: the keys other hosts
 * changed; the floor after a restart; plans; the resets). Lua: scripts.c
 * and reset.c.
 */
#include "sync_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "sha256.h"

/* `v` as RL_SYNC_PACK's little-endian int64 at `p`. */
static void pack_i64(uint8_t *p, int64_t v)
{
	uint64_t u = (uint64_t)v;

	for (unsigned k = 0; k < 8; k++)
		p[k] = (uint8_t)(u >> (8 * k));
}

/* Queue the sync script for items [first, first + n) of rule `ci`: the
 * keys, their numbers packed in one argument and their tariffs (a rule's
 * rate and plans: RL_MAX_PLANS + 1 at most) named once (rl_lua_sync). */
int queue_sync(struct round *r, unsigned ci, uint32_t first, uint32_t n)
{
	struct rl_agent *a = r->a;
	const char *argv[11 + 2 * (RL_MAX_PLANS + 1) + BATCH];
	size_t lens[11 + 2 * (RL_MAX_PLANS + 1) + BATCH];
	uint8_t nums[RL_SYNC_NUMS * BATCH];
	const struct rl_agent_item *tariff[RL_MAX_PLANS + 1];
	char hkey[160], rkey[170], gkey[170], ttl[32], since[32], hosts[16];
	char span[32], nt[8], base[32];
	unsigned ntariffs = 0;
	int c = 0;

	if (n > BATCH)
		return -1;
	sync_ttl(a, ci, ttl, sizeof(ttl));
	snprintf(since, sizeof(since), "%llu",
		 (unsigned long long)(r->since_ns / 1000));
	snprintf(hosts, sizeof(hosts), "%u", a->hosts_alive ? a->hosts_alive : 1);
	/* a grant stands, and a key is young, for three rounds */
	snprintf(span, sizeof(span), "%llu",
		 (unsigned long long)(3 * a->interval_ns / 1000));
	for (uint32_t i = first; i < first + n; i++) {
		const struct rl_agent_item *x = &a->items[i];
		uint8_t *p = nums + RL_SYNC_NUMS * (i - first);
		unsigned t;

		for (t = 0; t < ntariffs; t++)
			if (!strcmp(tariff[t]->ei, x->ei) &&
			    !strcmp(tariff[t]->burst, x->burst))
				break;
		if (t == ntariffs) {
			if (ntariffs == RL_MAX_PLANS + 1)
				return -1; /* a rule has no more */
			tariff[ntariffs++] = x;
		}
		pack_i64(p, strtoll(x->count, NULL, 10));
		pack_i64(p + 8, strtoll(x->own, NULL, 10));
		p[16] = (uint8_t)(t + 1);
	}
	snprintf(nt, sizeof(nt), "%u", ntariffs);
	sync_arg(argv, lens, &c, hkey,
		 rl_agent_hash_key(a, ci, a->items[first].shard, hkey, sizeof(hkey)));
	sync_arg(argv, lens, &c, rkey,
	    (size_t)snprintf(rkey, sizeof(rkey), "%s:recent", hkey));
	sync_arg(argv, lens, &c, gkey,
	    (size_t)snprintf(gkey, sizeof(gkey), "%s:grants", hkey));
	sync_arg_text(argv, lens, &c, ttl);
	sync_arg_text(argv, lens, &c, since);
	sync_arg_text(argv, lens, &c, a->host_tag);
	sync_arg_text(argv, lens, &c, hosts);
	sync_arg_text(argv, lens, &c, span);
	sync_arg(argv, lens, &c, (const char *)nums, RL_SYNC_NUMS * (size_t)n);
	sync_arg_text(argv, lens, &c, nt);
	for (unsigned t = 0; t < ntariffs; t++) {
		sync_arg_text(argv, lens, &c, tariff[t]->ei);
		sync_arg_text(argv, lens, &c, tariff[t]->burst);
	}
	/* the collect on the store's clock, that what the keys owe here
	 * (`own`) is counted from (0: not known yet, the script's now) */
	snprintf(base, sizeof(base), "%llu",
		 (unsigned long long)rl_store_clock_store_us(
			 &a->clocks[a->items[first].shard % RL_STORE_SHARDS_MAX],
			 r->now_ns));
	sync_arg_text(argv, lens, &c, base);
	for (uint32_t i = first; i < first + n; i++)
		sync_arg(argv, lens, &c, a->items[i].key, a->items[i].klen);
	if (rl_store_queue_script(a->store, RL_SCRIPT_SYNC, 3, c, argv, lens))
		return -1;
	return sync_plan_add(r, JOB_SYNC, ci, first, n);
}

/* The store key of rule `ci`'s window counts: a sibling of its hash of
 * states, under the same hash tag. */
size_t rl_agent_window_key(const struct rl_agent *a, unsigned ci,
			   unsigned shard, char *out, size_t len)
{
	return rl_store_rule_key(a->cfg, &a->cfg->rules[ci], shard, ":win", out,
				 len);
}

/* Queue the window script for items [first, first + n) of rule `ci`. */
int queue_window(struct round *r, unsigned ci, uint32_t first, uint32_t n)
{
	struct rl_agent *a = r->a;
	const char *argv[2 + 4 * BATCH];
	size_t lens[2 + 4 * BATCH];
	char hkey[160], ttl[32];
	int c = 0;

	sync_ttl(a, ci, ttl, sizeof(ttl));
	sync_arg(argv, lens, &c, hkey,
		 rl_agent_window_key(a, ci, a->items[first].shard, hkey, sizeof(hkey)));
	sync_arg_text(argv, lens, &c, ttl);
	for (uint32_t i = first; i < first + n; i++) {
		struct rl_agent_item *x = &a->items[i];

		sync_arg(argv, lens, &c, x->key, x->klen);
		sync_arg_text(argv, lens, &c, x->count);
		sync_arg_text(argv, lens, &c, x->win);
		sync_arg_text(argv, lens, &c, x->until);
	}
	if (rl_store_queue_script(a->store, RL_SCRIPT_WINDOW, 1, c, argv, lens))
		return -1;
	return sync_plan_add(r, JOB_WINDOW, ci, first, n);
}

/* The window script's answer for items [first, first + n): idx, cur, prev
 * for each, applied to the key's state. */
int on_window(struct rl_agent *a, const struct reply_plan *p,
	      const redisReply *rep)
{
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 * (size_t)p->n)
		return -1;
	for (uint32_t k = 0; k < p->n; k++) {
		struct rl_agent_item *x = &a->items[p->first + k];
		uint64_t v[3];

		for (unsigned j = 0; j < 3; j++) {
			const redisReply *e = rep->element[3 * k + j];

			v[j] = e->type == REDIS_REPLY_STRING
				       ? strtoull(e->str, NULL, 10) : 0;
		}
		rl_table_sync_window(a->table, x->index, x->tag, v[0], v[1],
				     v[2], rl_time_now_ns());
	}
	return 0;
}

#define PULL_MAX 2000 /* keys a rule's pull brings per round */

/*
 * Queue the pull of rule `ci`'s keys changed since the last round, a call
 * per shard (each its own `recent`), PULL_MAX each. In a cluster a script
 * (its cursor the store's time on that master); else a plain
 * ZRANGEBYSCORE after the round's TIME, and only the keys it finds are
 * read, after the round (queue_pulled): an idle round's pull is one cheap
 * command, not a script call, which costs Redis more than what it does.
 */
int queue_pull(struct round *r, unsigned ci)
{
	struct rl_agent *a = r->a;
	int cluster = rl_store_cluster(a->store);

	for (unsigned sh = 0; sh < a->shards; sh++) {
		char hkey[160], rkey[170], cur[32], max[16];
		const char *argv[4] = { hkey, rkey, cur, max };
		size_t lens[4];

		lens[0] = rl_agent_hash_key(a, ci, sh, hkey, sizeof(hkey));
		lens[1] = (size_t)snprintf(rkey, sizeof(rkey), "%s:recent", hkey);
		lens[2] = (size_t)snprintf(cur, sizeof(cur), "%llu",
					   (unsigned long long)a->pull_cursor[ci][sh]);
		lens[3] = (size_t)snprintf(max, sizeof(max), "%u", PULL_MAX);
		if (!cluster) {
			const char *zv[8] = { "ZRANGEBYSCORE", rkey, cur, "+inf",
					      "WITHSCORES", "LIMIT", "0", max };
			size_t zl[8] = { 13, lens[1], lens[2], 4, 10, 5, 1, lens[3] };

			if (rl_store_queue(a->store, 8, zv, zl) ||
			    sync_plan_add(r, JOB_PULL_KEYS, ci, sh, 0))
				return -1;
			continue;
		}
		if (rl_store_queue_script(a->store, RL_SCRIPT_PULL, 2, 4, argv, lens) ||
		    sync_plan_add(r, JOB_PULL, ci, sh, 0))
			return -1;
	}
	return 0;
}

int queue_time(struct round *r)
{
	const char *argv[1] = { "TIME" };
	size_t lens[1] = { 4 };

	if (rl_store_queue(r->a->store, 1, argv, lens))
		return -1;
	return sync_plan_add(r, JOB_TIME, 0, 0, 0);
}

int on_time(struct round *r, const redisReply *rep)
{
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep->element[0]->type != REDIS_REPLY_STRING ||
	    rep->element[1]->type != REDIS_REPLY_STRING)
		return -1;
	r->store_us = strtoull(rep->element[0]->str, NULL, 10) * 1000000ull +
		      strtoull(rep->element[1]->str, NULL, 10);
	r->have_time = 1;
	r->a->clock_us = r->store_us;
	r->a->clock_ns = rl_time_now_ns();
	return 0;
}

/* A plain pull's answer (key, score pairs): the cursor moves to the
 * round's time (the last key's score if the chunk is full: the rest next
 * round), and the keys are kept for queue_pulled. A chunk not kept (the
 * memory for it refused) is read again next round. */
int on_pull_keys(struct round *r, const struct reply_plan *p,
		 const redisReply *rep)
{
	struct rl_agent *a = r->a;
	struct rl_agent_pulled *e;
	size_t n, need = 0;
	uint64_t cur;
	uint8_t own[PULL_MAX];

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements % 2 || !r->have_time ||
	    rep->elements / 2 > PULL_MAX)
		return -1;
	n = rep->elements / 2;
	cur = r->store_us;
	if (n == PULL_MAX) {
		const redisReply *sc = rep->element[rep->elements - 1];

		if (sc->type != REDIS_REPLY_STRING)
			return -1;
		cur = (uint64_t)strtod(sc->str, NULL);
	}
	/* this host's own changes of the round: their states came with its
	 * sync (LUA_CHANGED scores them apart from any other host's) */
	for (size_t i = 0; i < rep->elements; i += 2) {
		const redisReply *sc = rep->element[i + 1];
		double v = sc->type == REDIS_REPLY_STRING ? strtod(sc->str, NULL) : -1;

		own[i / 2] = 0;
		for (unsigned k = 0; k < r->nown && v >= 0; k++)
			if (r->own[k].rule == p->rule && r->own[k].shard == p->first &&
			    v >= r->own[k].lo && v <= r->own[k].hi) {
				own[i / 2] = 1;
				n--;
				break;
			}
	}
	if (!n) {
		a->pull_cursor[p->rule][p->first] = cur;
		return 0;
	}
	/* else the cursor moves once the keys are mirrored (on_pull_states):
	 * a round that fails before reads them again */
	if (a->npulled == sizeof(a->pulled) / sizeof(a->pulled[0]))
		return 0;
	for (size_t i = 0; i < rep->elements; i += 2)
		if (!own[i / 2])
			need += 1 + (rep->element[i]->len < 255 ? rep->element[i]->len : 255);
	if (a->pull_len + need > a->pull_cap) {
		size_t cap = a->pull_cap ? a->pull_cap : 65536;
		char *b;

		while (cap < a->pull_len + need)
			cap *= 2;
		b = realloc(a->pull_buf, cap);
		if (!b)
			return 0; /* not mirrored this round: a round later */
		a->pull_buf = b;
		a->pull_cap = cap;
	}
	e = &a->pulled[a->npulled++];
	*e = (struct rl_agent_pulled){ p->rule, p->first, a->pull_len, 0, cur };
	for (size_t i = 0; i < rep->elements; i += 2) {
		const redisReply *k = rep->element[i];
		size_t len = k->type == REDIS_REPLY_STRING && k->len < 255 ? k->len : 0;

		if (own[i / 2])
			continue;
		a->pull_buf[a->pull_len++] = (char)len;
		memcpy(a->pull_buf + a->pull_len, k->str, len);
		a->pull_len += len;
		e->n++;
	}
	return 0;
}

/* Queue the states of the keys the round's pulls found: the store's time,
 * then an HMGET for each pull. */
int queue_pulled(struct round *r)
{
	struct rl_agent *a = r->a;
	int rc = queue_time(r);

	for (unsigned i = 0; i < a->npulled && !rc; i++) {
		const struct rl_agent_pulled *e = &a->pulled[i];
		const char **argv = malloc((e->n + 2) * sizeof(*argv));
		size_t *lens = malloc((e->n + 2) * sizeof(*lens));
		char hkey[160];
		size_t at = e->off;

		if (!argv || !lens) {
			rc = -1;
		} else {
			argv[0] = "HMGET";
			lens[0] = 5;
			argv[1] = hkey;
			lens[1] = rl_agent_hash_key(a, e->rule, e->shard, hkey,
						    sizeof(hkey));
			for (uint32_t k = 0; k < e->n; k++) {
				lens[2 + k] = (uint8_t)a->pull_buf[at];
				argv[2 + k] = a->pull_buf + at + 1;
				at += 1 + lens[2 + k];
			}
			rc = rl_store_queue(a->store, (int)e->n + 2, argv, lens) ||
			     sync_plan_add(r, JOB_PULL_STATES, e->rule, i, e->n);
		}
		free(argv);
		free(lens);
	}
	return rc;
}

/* A state as the store keeps it ("TAT:EI", RL_LUA_TAT): what it owes
 * beyond the store's `now` and at which interval (ns); 0 if nothing. */
static uint64_t store_debt(const char *v, uint64_t now_us, uint64_t *ei_ns)
{
	char *end;
	double tat = strtod(v, &end);

	if (*end == ':')
		*ei_ns = (uint64_t)(strtod(end + 1, NULL) * 1000.0);
	return tat > (double)now_us ? (uint64_t)((tat - (double)now_us) * 1000.0)
				    : 0;
}

/* Key `k` of rule `ci`, which another host changed: its state in the
 * store `v` mirrored here. */
static void mirror(struct rl_agent *a, unsigned ci, const char *k, size_t klen,
		   const char *v, uint64_t now_us, uint64_t now_ns)
{
	const struct rl_rule_cfg *rule = &a->cfg->rules[ci];
	uint64_t ei = rl_gcra_interval(&rule->rate), debt;
	uint8_t buf[17];
	const void *key;
	size_t len;

	key = rl_config_key_of_text(a->cfg, rule, k, klen, buf, &len);
	debt = store_debt(v, now_us, &ei);
	if (key && debt)
		rl_table_sync_mirror(a->table, a->ids[ci], key, len, debt, ei,
				     now_ns);
}

/* Whether key `k` of rule `ci` was reset this round (on_resets). */
static int reset_now(const struct rl_agent *a, unsigned ci, const char *k,
		     size_t klen)
{
	for (unsigned i = 0; i < a->nforget; i++)
		if (a->forget[i].rule == ci && a->forget[i].len == klen &&
		    !memcmp(a->forget[i].text, k, klen))
			return 1;
	return 0;
}

/* The states of pull p->first's keys (HMGET), mirrored here. They come
 * after the round's resets (which the script pull's did not): a key
 * reset this round is left as its reset made it, whatever the store still
 * held of it before the reset reached it. */
int on_pull_states(struct rl_agent *a, const struct reply_plan *p,
		   const redisReply *rep, uint64_t now_us, uint64_t now_ns)
{
	const struct rl_agent_pulled *e = &a->pulled[p->first];
	size_t at = e->off;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != e->n)
		return -1;
	for (uint32_t k = 0; k < e->n; k++) {
		const redisReply *v = rep->element[k];
		size_t len = (uint8_t)a->pull_buf[at];

		if (v->type == REDIS_REPLY_STRING &&
		    !reset_now(a, e->rule, a->pull_buf + at + 1, len))
			mirror(a, e->rule, a->pull_buf + at + 1, len, v->str,
			       now_us, now_ns);
		at += 1 + len;
	}
	a->pull_cursor[e->rule][e->shard] = e->cursor;
	return 0;
}

/* The pull's answer: every key another host changed, mirrored here. */
int on_pull(struct rl_agent *a, const struct reply_plan *p,
	    const redisReply *rep, uint64_t now_ns)
{
	uint64_t now_us;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
	    rep->elements % 2 || rep->element[0]->type != REDIS_REPLY_STRING ||
	    rep->element[1]->type != REDIS_REPLY_STRING)
		return -1;
	a->pull_cursor[p->rule][p->first] = strtoull(rep->element[0]->str, NULL, 10);
	now_us = strtoull(rep->element[1]->str, NULL, 10);
	for (size_t i = 2; i + 1 < rep->elements; i += 2) {
		const redisReply *k = rep->element[i], *v = rep->element[i + 1];

		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			continue;
		mirror(a, p->rule, k->str, k->len, v->str, now_us, now_ns);
	}
	return 0;
}

/* Queue the floor of items [first, first + n) of rule `ci`: what each
 * owes here, at least, in the store. */
int queue_floor(struct round *r, unsigned ci, uint32_t first, uint32_t n)
{
	struct rl_agent *a = r->a;
	const char *argv[3 + 3 * BATCH];
	size_t lens[3 + 3 * BATCH];
	char hkey[160], rkey[170], ttl[32];
	int c = 0;

	sync_ttl(a, ci, ttl, sizeof(ttl));
	sync_arg(argv, lens, &c, hkey,
		 rl_agent_hash_key(a, ci, a->items[first].shard, hkey, sizeof(hkey)));
	sync_arg(argv, lens, &c, rkey,
		 (size_t)snprintf(rkey, sizeof(rkey), "%s:recent", hkey));
	sync_arg_text(argv, lens, &c, ttl);
	for (uint32_t i = first; i < first + n; i++) {
		struct rl_agent_item *x = &a->items[i];

		if (!strcmp(x->debt, "0"))
			continue;
		sync_arg(argv, lens, &c, x->key, x->klen);
		sync_arg_text(argv, lens, &c, x->debt);
		sync_arg_text(argv, lens, &c, x->ei);
	}
	if (c == 3)
		return 0;
	if (rl_store_queue_script(a->store, RL_SCRIPT_FLOOR, 2, c, argv, lens))
		return -1;
	return sync_plan_add(r, JOB_FLOOR, ci, first, n);
}

/* Queue an HMGET of the plans of items [first, first + n) of rule `ci`. */
int queue_plans(struct round *r, unsigned ci, uint32_t first, uint32_t n)
{
	struct rl_agent *a = r->a;
	const char *argv[2 + BATCH];
	size_t lens[2 + BATCH];
	char hkey[160];
	int c = 0;

	sync_arg_text(argv, lens, &c, "HMGET");
	sync_arg(argv, lens, &c, hkey,
	    (size_t)snprintf(hkey, sizeof(hkey), "%splans:%s",
			     a->cfg->redis_prefix, a->cfg->rules[ci].name));
	for (uint32_t i = first; i < first + n; i++)
		sync_arg(argv, lens, &c, a->items[i].key, a->items[i].klen);
	if (rl_store_queue(a->store, c, argv, lens))
		return -1;
	return sync_plan_add(r, JOB_PLANS, ci, first, n);
}

/* The plan named `name` of rule `rule`: 1..nplans, or 0 (`rate`) for a
 * name the rule does not have. */
static unsigned plan_of(const struct rl_rule_cfg *rule, const char *name)
{
	for (unsigned q = 0; q < rule->nplans; q++)
		if (strcmp(rule->plans[q].name, name) == 0)
			return q + 1;
	return 0;
}

/*
 * Queue the next chunk of rule `ci`'s plans hash (HSCAN from where the
 * last round stopped): a hash of up to a thousand keys is read whole each
 * round, a longer one over several, so the store's work and the agent's
 * grow with the planned keys, a chunk a round, never with requests.
 */
int queue_plans_scan(struct round *r, unsigned ci)
{
	struct rl_agent *a = r->a;
	char hkey[160], cur[32];
	const char *argv[5] = { "HSCAN", hkey, cur, "COUNT", PLANS_SCAN };
	size_t lens[5];

	lens[1] = (size_t)snprintf(hkey, sizeof(hkey), "%splans:%s",
				   a->cfg->redis_prefix, a->cfg->rules[ci].name);
	lens[2] = (size_t)snprintf(cur, sizeof(cur), "%llu",
				   (unsigned long long)a->plans_cursor[ci]);
	lens[0] = 5;
	lens[3] = 5;
	lens[4] = strlen(PLANS_SCAN);
	if (rl_store_queue(a->store, 5, argv, lens))
		return -1;
	return sync_plan_add(r, JOB_PLANS_SCAN, ci, 0, 0);
}

/*
 * A chunk of rule `ci`'s plans: each key goes into the segment with its
 * plan, seen here or not, so that its first request is judged by it
 * (rl_table_plan_ahead). A key the shim could not key the rule by (not an
 * address, say) is skipped; so is a planned key whose bucket is all in use
 * (the next scan tries again), and one evicted before its first request is
 * put back by the next scan of it. A name the rule has no plan of is
 * `rate`, as for the keys in use.
 */
void plans_scanned(struct rl_agent *a, unsigned ci, redisReply *rep)
{
	const struct rl_rule_cfg *rule = &a->cfg->rules[ci];
	redisReply *kv;
	uint64_t now = rl_time_now_ns();

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep->element[0]->type != REDIS_REPLY_STRING ||
	    rep->element[1]->type != REDIS_REPLY_ARRAY)
		return;
	a->plans_cursor[ci] = strtoull(rep->element[0]->str, NULL, 10);
	kv = rep->element[1];
	for (size_t i = 0; i + 1 < kv->elements; i += 2) {
		redisReply *k = kv->element[i], *v = kv->element[i + 1];
		uint8_t buf[17];
		const void *key;
		size_t len;

		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			continue;
		key = rl_config_key_of_text(a->cfg, rule, k->str, k->len, buf,
					    &len);
		if (key)
			rl_table_plan_ahead(a->table, a->ids[ci], key, len,
					    plan_of(rule, v->str), now);
	}
}

/* ---- resets (reset.c) ------------------------------------------------------------ */

/*
 * Queue the read of the resets recorded since the last one: last in the
 * round, so that its answer comes after every other, which may have
 * raised a key it resets. A plain ZRANGEBYSCORE from the score of the last
 * entry read (a reset is recorded at the store's time: a later one has a
 * later score), where a script read up to the store's time: a call that
 * carried nothing nearly every round, and a script's cost in Redis is
 * mostly the call's. The first read only finds where to start (the last
 * entry recorded, or none: every entry), so that resets older than the
 * agent are not applied again.
 */
int queue_resets(struct round *r)
{
	struct rl_agent *a = r->a;
	char key[160], min[32];
	const char *argv[8];
	size_t lens[8];
	int c = 0, start = !a->resets_cursor[0];

	lens[1] = rl_store_resets_key(a->cfg, key, sizeof(key));
	argv[1] = key;
	c = 2;
	if (start) {
		argv[0] = "ZREVRANGEBYSCORE";
		sync_arg_text(argv, lens, &c, "+inf");
		sync_arg_text(argv, lens, &c, "-inf");
		sync_arg_text(argv, lens, &c, "WITHSCORES");
		sync_arg_text(argv, lens, &c, "LIMIT");
		sync_arg_text(argv, lens, &c, "0");
		sync_arg_text(argv, lens, &c, "1");
	} else {
		argv[0] = "ZRANGEBYSCORE";
		if (strcmp(a->resets_cursor, "-inf") == 0)
			snprintf(min, sizeof(min), "-inf");
		else
			snprintf(min, sizeof(min), "(%s", a->resets_cursor);
		sync_arg_text(argv, lens, &c, min);
		sync_arg_text(argv, lens, &c, "+inf");
		sync_arg_text(argv, lens, &c, "WITHSCORES");
		sync_arg_text(argv, lens, &c, "LIMIT");
		sync_arg_text(argv, lens, &c, "0");
	}
	lens[0] = strlen(argv[0]);
	if (!start)
		sync_arg_text(argv, lens, &c, RL_RESETS_READ);
	if (rl_store_queue(a->store, c, argv, lens))
		return -1;
	return sync_plan_add(r, start ? JOB_RESETS_START : JOB_RESETS, 0, 0, 0);
}

/* The first read of the resets: the cursor at the last entry recorded,
 * or before every entry if there is none. */
int on_resets_start(struct rl_agent *a, const redisReply *rep)
{
	const redisReply *e;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements % 2)
		return -1;
	if (!rep->elements) {
		snprintf(a->resets_cursor, sizeof(a->resets_cursor), "-inf");
		return 0;
	}
	e = rep->element[1];
	if (e->type != REDIS_REPLY_STRING || !e->len ||
	    e->len >= sizeof(a->resets_cursor))
		return -1;
	memcpy(a->resets_cursor, e->str, e->len);
	a->resets_cursor[e->len] = '\0';
	return 0;
}

/* The resets read (entry, score pairs): each key gets a full bucket here,
 * and is noted for its deletion from the store after the round; the
 * cursor moves to the last one's score. An entry naming a rule or a key
 * this configuration does not have is skipped. */
int on_resets(struct rl_agent *a, const redisReply *rep, uint64_t now_ns)
{
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements % 2)
		return -1;
	if (rep->elements) {
		const redisReply *sc = rep->element[rep->elements - 1];

		if (sc->type != REDIS_REPLY_STRING || !sc->len ||
		    sc->len >= sizeof(a->resets_cursor))
			return -1;
		memcpy(a->resets_cursor, sc->str, sc->len);
		a->resets_cursor[sc->len] = '\0';
	}
	for (size_t i = 0; i < rep->elements; i += 2) {
		const redisReply *e = rep->element[i];
		const char *sp = e->type == REDIS_REPLY_STRING ?
					 memchr(e->str, ' ', e->len) : NULL;
		const char *text = sp ? sp + 1 : NULL;
		size_t tlen = sp ? e->len - (size_t)(text - e->str) : 0;
		unsigned ci;
		uint8_t buf[17];
		const void *key;
		size_t len;
		char q[128];

		if (!sp)
			continue;
		for (ci = 0; ci < a->cfg->nrules; ci++)
			if (strlen(a->cfg->rules[ci].name) == (size_t)(sp - e->str) &&
			    !memcmp(a->cfg->rules[ci].name, e->str,
				    (size_t)(sp - e->str)))
				break;
		if (ci == a->cfg->nrules || tlen >= sizeof(a->forget[0].text))
			continue;
		key = rl_config_key_of_text(a->cfg, &a->cfg->rules[ci], text,
					    tlen, buf, &len);
		if (!key)
			continue;
		rl_table_key_reset(a->table, a->ids[ci], key, len, now_ns);
		/* a session's value is its secret: named by its digest */
		if (a->cfg->rules[ci].key == RL_KEY_COOKIE)
			rl_sha256_name(text, tlen, q);
		else
			snprintf(q, sizeof(q), "%.*s", (int)tlen, text);
		rl_log(RL_LOG_INFO, "msg=\"key reset\" rule=%s key=\"%s\"",
		       a->cfg->rules[ci].name, rl_log_quote(q, q, sizeof(q)));
		if (a->nforget < sizeof(a->forget) / sizeof(a->forget[0])) {
			struct rl_agent_forget *f = &a->forget[a->nforget++];

			f->rule = ci;
			f->len = (uint8_t)tlen;
			memcpy(f->text, text, tlen);
		}
	}
	return 0;
}

/* Queue the deletion from the store of the keys reset this round: what
 * this host pushed of them before it had heard of the reset. */
int queue_forgets(struct round *r)
{
	struct rl_agent *a = r->a;

	for (unsigned i = 0; i < a->nforget; i++) {
		const struct rl_agent_forget *f = &a->forget[i];

		if (rl_store_queue_forget(a->store, a->cfg, &a->cfg->rules[f->rule],
					  f->text, f->len) < 0)
			return -1;
		for (int k = 0; k < 3; k++)
			sync_plan_add(r, JOB_FORGET, f->rule, 0, 0);
	}
	a->nforget = 0;
	return 0;
}
