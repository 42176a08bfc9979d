/* SPDX-License-Identifier: MIT */
/*
 * sync.c - one global limit across hosts, with a hot path that never waits.
 *
 * Every host decides from its own segment. Each round (sync_interval) the
 * agent takes from the segment what every key admitted since the last round
 * and pushes it to the store (with the keys refused from a share held back,
 * and, in turn, at most a budget a round of the keys only in debt here:
 * repush.c), where a
 * script keeps each key's global GCRA state (its theoretical arrival time on
 * the store's clock, advanced by one emission interval per admitted request,
 * from anywhere). The script answers with each key's global debt and this
 * host's grant of what is left, and the agent sets the key's local state
 * from them (rl_table_sync_grant). Each round the agent also pulls the keys
 * any host changed and mirrors them here (rl_table_sync_mirror), so a key
 * another host used is known here before its first request. So:
 *
 *   - load on one host: the global state is that host's own, exactly;
 *   - a key new to a host starts there from its share of the burst; after
 *     that a host spends only its grant: of what is left, what the other
 *     hosts' grants (and, while the key is young, their fresh shares)
 *     leave, divided among the hosts. The grants outstanding never exceed
 *     what is left, plus N - 1, however the hosts' rounds fall;
 *   - the refill is not shared: under load on several hosts each may admit
 *     at the full rate within a round; the store counts all of it, and the
 *     debt is repaid by waiting. Over a run the total is rate x time + burst,
 *     off by what hosts admit in the last round only.
 *
 * Fixed and sliding windows the same way, with counts for a state: windows
 * are on Unix time (window.c), so every host names a window by the same
 * index, which the agent sends with each key; a second script keeps each
 * key's count in its window and in the one before, and answers with them
 * (rl_table_sync_window). A key new to a host, or unused there in the
 * current window, starts from its share of what the window has left, and
 * after each round a host takes its share of what the store says is left:
 * N hosts admit at most count + N - 1 of a window (sliding: an estimate
 * over the global counts within limit + N - 1).
 *
 * Store commands per round: one script call per rule with activity (keys
 * batched, all of a rule's keys under one hash tag so the script stays in
 * one cluster slot: the keys used in the round, and of those only in debt
 * at most RL_REPUSH_KEYS a round over all the hosts, each its share, so
 * that a round's work grows with the keys in use, not with the keys that
 * owe: 10,000 keys in debt pushed every round outlasted `timeout`), one
 * for the hosts alive (their count; the script that renews this host's
 * entry every few rounds), one for the epoch (one per master in a
 * cluster), two per rule with plans (the plans of its keys in the round,
 * and the next chunk of its plans hash, mirrored into the segment so that
 * a key's plan holds from its first request), the store's time and one
 * pull per rule (a script per shard in a cluster), one for the resets
 * since the last round (and three per key reset, in a round that had any:
 * reset.c), and two for the ban set (ban_sync.c), all on one pipeline; a
 * second exchange only in a round whose pulls found keys changed, to read
 * their states. They grow with rules, keys, planned keys, hosts, masters
 * and resets, never with requests. A round with nothing to push is plain
 * commands, no script call but the hosts' every few rounds: in Redis a
 * script call costs more than the few commands an idle round needs
 * (docs/BENCHMARKS.md, "Redis cost").
 *
 * When the store is down, hosts cannot see each other: each charges its own
 * admissions as if every host alive at the last sync admitted as much, which
 * keeps it to its share of the rate (on_store_down = open). Rules set to
 * `closed` are refused by the shim instead, from the flag set here. With
 * redis-cluster:// a failed call (a master unreachable, CLUSTERDOWN,
 * TRYAGAIN) fails only what it carried (call_failed): its keys as with the
 * store down, the rest of the round as ever.
 */
#include "sync_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ban.h"
#include "err.h"
#include "log.h"
#include "clock.h"

#define CLEAN_EVERY 200       /* rounds between sweeps of stale store keys */


/* ---- set up -------------------------------------------------------------------- */

int rl_agent_init(struct rl_agent *a, const struct rl_config *cfg,
		  struct rl_table *table, struct rl_err *err)
{
	char host[128];

	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->dry_lock, NULL);
	a->cfg = cfg;
	a->table = table;
	a->interval_ns = cfg->sync_interval_ns;
	for (unsigned i = 0; i < RL_MAX_RULES; i++)
		a->rule_of[i] = -1;
	if (rl_config_register(cfg, table, a->ids, err) ||
	    rl_config_use(cfg, table, a->ids, err))
		return -ENOSPC;
	for (unsigned i = 0; i < cfg->nrules; i++)
		a->rule_of[a->ids[i]] = (int)i;
	if (gethostname(host, sizeof(host)))
		snprintf(host, sizeof(host), "host");
	host[sizeof(host) - 1] = '\0';
	snprintf(a->host_id, sizeof(a->host_id), "%s/%s/%d", host, cfg->shm,
		 (int)getpid());
	/* its short name in the store's grants: FNV-1a of the id */
	{
		uint64_t h = 14695981039346656037ull;

		for (const char *c = a->host_id; *c; c++)
			h = (h ^ (uint8_t)*c) * 1099511628211ull;
		snprintf(a->host_tag, sizeof(a->host_tag), "%016llx",
			 (unsigned long long)h);
	}
	a->hosts_alive = 1;
	if (!cfg->redis)
		return 0;
	a->shards = rl_store_shards(cfg);
	a->store = rl_store_new(cfg->redis_url, cfg->redis_timeout_ns);
	if (!a->store) {
		rl_err_set(err, "bad redis url");
		return -EINVAL;
	}
	rl_store_impact(a->store, cfg);
	rl_store_script(a->store, RL_SCRIPT_SYNC, rl_lua_sync);
	rl_store_script(a->store, RL_SCRIPT_HOSTS, rl_lua_hosts);
	rl_store_script(a->store, RL_SCRIPT_CLEAN, rl_lua_clean);
	rl_store_script(a->store, RL_SCRIPT_FLOOR, rl_lua_floor);
	rl_store_script(a->store, RL_SCRIPT_PULL, rl_lua_pull);
	rl_store_script(a->store, RL_SCRIPT_WINDOW, rl_lua_window);
	rl_store_script(a->store, RL_SCRIPT_WINDOW_CLEAN, rl_lua_window_clean);
	a->cap = rl_table_capacity(table);
	a->items = calloc(a->cap, sizeof(*a->items));
	if (!a->items || rl_table_track_held(table)) {
		rl_err_set(err, "out of memory");
		return -ENOMEM;
	}
	if (rl_agent_bans_init(a) || rl_agent_fails_init(a)) {
		rl_err_set(err, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

void rl_agent_free(struct rl_agent *a)
{
	rl_agent_bans_free(a);
	rl_agent_fails_free(a);
	rl_store_free(a->store);
	free(a->items);
	free(a->pull_buf);
}

/* ---- one round -------------------------------------------------------------------- */


static int collect(const struct rl_sync_item *it, void *arg)
{
	struct rl_agent *a = arg;
	const struct rl_rule_cache *rc;
	const struct rl_algo *alg;
	struct rl_agent_item *x;
	int ci = it->rule < RL_MAX_RULES ? a->rule_of[it->rule] : -1;

	if (ci < 0 || a->nitems == a->cap)
		return 0; /* a rule of another configuration */
	rc = rl_table_rule_get(a->table, it->rule);
	if (!rc)
		return 0;
	alg = rl_rule_cache_algo(rc, it->plan);
	x = &a->items[a->nitems++];
	x->index = it->index;
	x->tag = it->tag;
	x->rule = (unsigned)ci;
	/* What it adds to the store's figure: given back after the last
	 * round (count_status), it takes off. */
	x->admitted = it->admitted > it->returned ? it->admitted - it->returned : 0;
	/* Nothing to add to the store's figure, and nothing held back for
	 * the others that a refusal here waits on (a share, which the sync
	 * renews: its Retry-After says within a round): pushed within the
	 * round's budget (repush.c). */
	x->quiet = !it->admitted && !it->returned &&
		   (!it->denied || !it->provisional);
	x->ei_ns = alg->interval_ns;
	x->plan = it->plan;
	x->klen = (uint8_t)rl_agent_key_text(&a->cfg->rules[ci], it->key,
					     it->key_len, it->truncated, x->key,
					     sizeof(x->key));
	x->shard = (uint16_t)rl_store_key_shard(a->cfg, x->key, x->klen);
	snprintf(x->count, sizeof(x->count), "%lld",
		 (long long)it->admitted - (long long)it->returned);
	snprintf(x->debt, sizeof(x->debt), "%.0f", (double)it->debt_ns / 1000.0);
	/* What this host owes for the key floors the store's figure, from
	 * the collect on (the store's clock at it: queue_sync): the state's
	 * debt, less what a grant or a lend holds back in it, if it admitted
	 * some of it in the round (its admissions' times, which the store
	 * does not know: it counts them from the round's start). Not if the
	 * round gives something back, nor for a held state it did not use
	 * (or one it started from a blind share): that state is the
	 * store's figure as this host last heard it, which may still hold
	 * units the other hosts have given back since (a floor would charge
	 * them again). */
	if (it->returned ||
	    (it->provisional && (!it->held_known || !x->admitted)))
		snprintf(x->own, sizeof(x->own), "0");
	else if (it->provisional)
		snprintf(x->own, sizeof(x->own), "%.0f",
			 it->debt_ns > it->held_ns
				 ? (double)(it->debt_ns - it->held_ns) / 1000.0
				 : 0.0);
	else
		snprintf(x->own, sizeof(x->own), "%s", x->debt);
	snprintf(x->burst, sizeof(x->burst), "%u", alg->rate.burst);
	snprintf(x->ei, sizeof(x->ei), "%.3f", (double)alg->interval_ns / 1000.0);
	snprintf(x->win, sizeof(x->win), "%llu", (unsigned long long)it->window);
	snprintf(x->until, sizeof(x->until), "%llu",
		 (unsigned long long)((it->window + 2) *
				      (alg->rate.period_ns / RL_NS_PER_MS)));

	return 0;
}

/* The keys pushed first, then by rule and shard. */
static int by_rule(const void *x, const void *y)
{
	const struct rl_agent_item *p = x, *q = y;

	if (p->push != q->push)
		return p->push ? -1 : 1;
	if (p->rule != q->rule)
		return p->rule < q->rule ? -1 : 1;
	return p->shard < q->shard ? -1 : p->shard > q->shard;
}

int sync_plan_add(struct round *r, enum job job, unsigned rule,
		    uint32_t first, uint32_t n)
{
	if (r->nplan == PLAN_MAX)
		return -ENOSPC;
	r->plan[r->nplan++] = (struct reply_plan){ job, rule, first, n };
	return 0;
}

/* One more argument of a command being built: argv[*c], lens[*c]. */
void sync_arg(const char **argv, size_t *lens, int *c, const char *s,
		size_t len)
{
	argv[*c] = s;
	lens[(*c)++] = len;
}

void sync_arg_text(const char **argv, size_t *lens, int *c, const char *s)
{
	sync_arg(argv, lens, c, s, strlen(s));
}

/* The store key of a shard of rule `ci`'s global states: one hash tag per
 * shard. */
size_t rl_agent_hash_key(const struct rl_agent *a, unsigned ci, unsigned shard,
			 char *out, size_t len)
{
	return rl_store_rule_key(a->cfg, &a->cfg->rules[ci], shard, "", out, len);
}

uint64_t rl_agent_ttl_ms(const struct rl_agent *a, const struct rl_rule_cfg *r)
{
	uint64_t depth = rl_gcra_interval(&r->rate) * r->rate.burst;
	uint64_t period = r->rate.period_ns;

	for (unsigned p = 0; p < r->nplans; p++) {
		const struct rl_rate *q = &r->plans[p].rate;
		uint64_t d = rl_gcra_interval(q) * q->burst;

		if (d > depth)
			depth = d;
		if (q->period_ns > period)
			period = q->period_ns;
	}
	/* a bucket: while a key could owe anything, and a minute; a window:
	 * its counts matter for two windows (sliding: the previous one weighs
	 * in the current), and a round */
	if (r->algorithm == RL_ALGO_GCRA)
		return depth / RL_NS_PER_MS + 60000;
	return (2 * period + a->interval_ns) / RL_NS_PER_MS + 1000;
}

/* rl_agent_ttl_ms of rule `ci`, as text. */
void sync_ttl(const struct rl_agent *a, unsigned ci, char *out, size_t len)
{
	snprintf(out, len, "%llu",
		 (unsigned long long)rl_agent_ttl_ms(a, &a->cfg->rules[ci]));
}

/* Plant a new epoch on master `i` (SET NX: a host that planted one first
 * keeps its own, and this host sees it changed at the next round). */
static void new_epoch(struct rl_agent *a, struct round *r, unsigned i)
{
	struct rl_agent_epoch *e = &a->epochs[i];
	uint8_t rnd[16];
	char key[200];
	const char *argv[4];
	size_t lens[4];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		memset(rnd, (int)getpid(), sizeof(rnd));
	for (unsigned k = 0; k < 16; k++)
		snprintf(e->value + 2 * k, 3, "%02x", rnd[k]);
	argv[0] = "SET";
	lens[0] = 3;
	argv[1] = key;
	lens[1] = rl_store_epoch_key(a->cfg, e->tag, key, sizeof(key));
	argv[2] = e->value;
	lens[2] = strlen(e->value);
	argv[3] = "NX";
	lens[3] = 2;
	rl_store_queue(a->store, 4, argv, lens);
	sync_plan_add(r, JOB_EPOCH_SET, 0, i, 0);
}

/* Items [first, first + n) were not heard by the store: each host keeps
 * to its share of them (on_store_down = open), as if every host alive at
 * the last sync admitted as much. */
static void charge_items(struct rl_agent *a, uint32_t first, uint32_t n,
			 uint64_t now_ns)
{
	uint32_t others = a->hosts_alive > 1 ? a->hosts_alive - 1 : 0;

	if (!others)
		return;
	for (uint32_t i = first; i < first + n; i++) {
		struct rl_agent_item *x = &a->items[i];

		if (a->cfg->rules[x->rule].on_store_down != RL_STORE_DOWN_OPEN ||
		    !x->admitted)
			continue;
		rl_table_sync_charge(a->table, x->index, x->tag,
				     (uint64_t)others * x->admitted * x->ei_ns,
				     now_ns);
	}
}

/*
 * Cluster: one call failed (no reply from its node, or CLUSTERDOWN,
 * TRYAGAIN, too many redirections), and only what it carried: its keys'
 * syncs are handled as with the store down (this host keeps to its share;
 * a closed rule's keys raise RL_AGENT_STORE_DOWN for the round, since the
 * shim can only refuse a rule, not a key); the epoch, hosts, plans, pulls,
 * resets and sweeps keep what they had and are asked again next round.
 */
static void call_failed(struct round *r, const struct reply_plan *p,
			const redisReply *rep)
{
	struct rl_agent *a = r->a;
	uint64_t now = rl_time_now_ns();

	if (!rl_store_no_reply(rep) &&
	    (!a->error_logged_ns || now - a->error_logged_ns >= RL_NS_PER_SEC)) {
		char q[256];

		rl_log(RL_LOG_WARN, "msg=\"store error\" err=\"%s\"",
		       rl_log_quote(rep->str, q, sizeof(q)));
		a->error_logged_ns = now;
	}
	if (p->job != JOB_SYNC && p->job != JOB_WINDOW)
		return;
	for (uint32_t k = p->first; k < p->first + p->n; k++)
		if (a->cfg->rules[a->items[k].rule].on_store_down ==
		    RL_STORE_DOWN_CLOSED)
			r->closed_failed = 1;
	charge_items(a, p->first, p->n, now);
}

static int on_reply(redisReply *rep, unsigned i, void *arg)
{
	struct round *r = arg;
	struct rl_agent *a = r->a;
	struct reply_plan *p = &r->plan[i];
	uint64_t at;

	if (rep->type == REDIS_REPLY_ERROR && rl_store_cluster(a->store)) {
		call_failed(r, p, rep);
		return 0;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		char q[256];

		rl_log(RL_LOG_WARN, "msg=\"store error\" err=\"%s\"",
		       rl_log_quote(rep->str, q, sizeof(q)));
		r->failed = 1;
		return 0;
	}
	switch (p->job) {
	case JOB_EPOCH: {
		struct rl_agent_epoch *e = &a->epochs[p->first];
		/* none: the master restarted empty or was flushed */
		const char *v = rep->type == REDIS_REPLY_STRING ? rep->str : "";

		/* Its data lost: another epoch than the one it had. A master
		 * new here after the first read (a resharding gave it another
		 * tag, or it joined) may have lost its data unseen: taken as
		 * lost too, an unneeded floor rather than a debt forgotten. */
		if (e->known ? e->value[0] && strcmp(e->value, v) != 0
			     : a->epochs_read)
			e->lost = 1;
		e->known = 1;
		snprintf(e->value, sizeof(e->value), "%s", v);
		break;
	}
	case JOB_EPOCH_SET:
	case JOB_FLOOR:
		break;
	case JOB_WINDOW:
		if (on_window(a, p, rep))
			r->failed = 1;
		break;
	case JOB_PULL:
		if (on_pull(a, p, rep, rl_time_now_ns()))
			r->failed = 1;
		break;
	case JOB_TIME:
		if (on_time(r, rep))
			r->failed = 1;
		break;
	case JOB_PULL_KEYS:
		if (on_pull_keys(r, p, rep))
			r->failed = 1;
		break;
	case JOB_PULL_STATES:
		if (on_pull_states(a, p, rep, r->store_us, rl_time_now_ns()))
			r->failed = 1;
		break;
	case JOB_RESETS:
		if (on_resets(a, rep, rl_time_now_ns()))
			r->failed = 1;
		break;
	case JOB_RESETS_START:
		if (on_resets_start(a, rep))
			r->failed = 1;
		break;
	case JOB_FORGET:
	case JOB_BANS_EXPIRE:
	case JOB_BEAT:
		break;
	case JOB_BANS:
		rl_agent_bans_fetched(a, rep);
		break;
	case JOB_HOSTS:
	case JOB_HOSTS_COUNT:
		if (rep->type == REDIS_REPLY_INTEGER && rep->integer > 0) {
			a->hosts_alive = (uint32_t)rep->integer;
			rl_table_agent_set_hosts(a->table, a->hosts_alive);
		} else if (rep->type == REDIS_REPLY_INTEGER) {
			a->beat_again = 1; /* the set is gone */
		}
		if (p->job == JOB_HOSTS && rep->type == REDIS_REPLY_INTEGER) {
			a->beat_ns = r->now_ns;
			a->beat_again = 0;
			a->beat_reconnects = rl_store_reconnects(a->store);
		}
		break;
	case JOB_SYNC:
		if (rep->type != REDIS_REPLY_ARRAY ||
		    (rep->elements != 2 * (size_t)p->n &&
		     rep->elements != 2 * (size_t)p->n + 2)) {
			r->failed = 1;
			break;
		}
		/* The debts are counted from the script's `now`: on this
		 * host's clock, when it ran (store_clock.c); not known yet,
		 * the collect (before it: the least they can owe). */
		at = r->now_ns;
		if (rep->elements == 2 * (size_t)p->n + 2 &&
		    rep->element[2 * p->n]->type == REDIS_REPLY_STRING &&
		    rep->element[2 * p->n + 1]->type == REDIS_REPLY_STRING) {
			double now_us = strtod(rep->element[2 * p->n]->str, NULL);
			struct rl_store_clock *c =
				&a->clocks[a->items[p->first].shard %
					   RL_STORE_SHARDS_MAX];

			rl_store_clock_sample(c, (uint64_t)now_us, r->now_ns,
					      rl_time_now_ns());
			at = rl_store_clock_at(c, (uint64_t)now_us, r->now_ns);
			if (r->nown < sizeof(r->own) / sizeof(r->own[0]))
				r->own[r->nown++] = (struct own_range){
					p->rule, a->items[p->first].shard,
					now_us + 1,
					strtod(rep->element[2 * p->n + 1]->str,
					       NULL) };
		}
		for (uint32_t k = 0; k < p->n; k++) {
			struct rl_agent_item *x = &a->items[p->first + k];
			redisReply *e = rep->element[2 * k];
			redisReply *g = rep->element[2 * k + 1];
			double us = e->type == REDIS_REPLY_STRING ? strtod(e->str, NULL)
				    : e->type == REDIS_REPLY_INTEGER ? (double)e->integer
								      : 0;

			/* Owing nothing is news too: it replaces a grant
			 * (rl_table_sync_grant). */
			rl_table_sync_grant(a->table, x->index, x->tag,
					    us > 0 ? (uint64_t)(us * 1000.0) : 0,
					    g->type == REDIS_REPLY_INTEGER &&
							    g->integer > 0
						    ? (uint64_t)g->integer
						    : 0,
					    at);
		}
		break;
	case JOB_PLANS: {
		const struct rl_rule_cfg *rule = &a->cfg->rules[p->rule];

		if (rep->type != REDIS_REPLY_ARRAY || rep->elements != p->n)
			break;
		for (uint32_t k = 0; k < p->n; k++) {
			struct rl_agent_item *x = &a->items[p->first + k];
			redisReply *e = rep->element[k];
			unsigned plan = 0; /* unknown keys get `rate` */

			if (e->type == REDIS_REPLY_STRING)
				for (unsigned q = 0; q < rule->nplans; q++)
					if (strcmp(rule->plans[q].name, e->str) == 0)
						plan = q + 1;
			if (plan != x->plan)
				rl_table_set_plan(a->table, x->index, x->tag, plan,
						  rl_time_now_ns());
		}
		break;
	}
	case JOB_CLEAN:
		if (rep->type == REDIS_REPLY_STRING)
			a->clean_cursor[p->rule][p->first] = strtoull(rep->str, NULL, 10);
		break;
	case JOB_PLANS_SCAN:
		plans_scanned(a, p->rule, rep);
		break;
	}
	return 0;
}

/* The store is down: each host keeps to its share. */
static void charge_shares(struct rl_agent *a, uint64_t now_ns)
{
	charge_items(a, 0, a->nitems, now_ns);
}

/* The store did not answer the round: the shims see it down, and this
 * host keeps to its share. */
static void store_down(struct rl_agent *a, uint64_t now_ns)
{
	a->was_down = 1;
	a->beat_again = 1;
	rl_table_agent_flags_change(a->table, RL_AGENT_STORE_DOWN, 0);
	rl_table_agent_store_down(a->table, rl_store_down_since_ms(a->store));
	charge_shares(a, now_ns);
}

/* The store answered the round. Back from an outage: what the strict
 * rules decided here meanwhile is not the store's (their keys ask it
 * again). */
static void store_synced(struct rl_agent *a, const struct round *r,
			 uint64_t now_ns)
{
	unsigned masters, down = rl_store_masters_down(a->store, &masters);
	/* Cluster: the store answered, but a call of a closed rule's keys did
	 * not get through: the shims refuse the closed rules (and strict ones
	 * apply on_store_down), the shim knowing the store per host, not per
	 * key, until every master answers again (a refused key has nothing to
	 * sync, so its call would not fail again to keep the flag up). */
	int closed = r->closed_failed || (a->closed_failed && down);

	if (a->was_down)
		for (unsigned ci = 0; ci < a->cfg->nrules; ci++)
			if (a->cfg->rules[ci].sync == RL_SYNC_STRICT)
				rl_table_rule_forget(a->table, a->ids[ci]);
	a->was_down = 0;
	rl_table_agent_set_masters(a->table, masters, down);
	rl_table_agent_synced(a->table, now_ns);
	if (closed) {
		if (!a->closed_failed)
			a->closed_since_ms = rl_time_wall_ms();
		rl_table_agent_store_down(a->table, a->closed_since_ms);
		rl_table_agent_flags_change(a->table, RL_AGENT_STORE_DOWN, 0);
	} else {
		rl_table_agent_flags_change(a->table, 0, RL_AGENT_STORE_DOWN);
	}
	a->closed_failed = closed;
}

/* Queue the GET of each master's epoch, the masters as the store knows
 * them now: one kept from the last round keeps what this host knew of it,
 * and a loss not yet repaired (the round failed after its answer). */
static void queue_epoch(struct round *r)
{
	struct rl_agent *a = r->a;
	char tags[RL_STORE_MASTERS_MAX][RL_STORE_TAG_MAX];
	struct rl_agent_epoch was[RL_STORE_MASTERS_MAX];
	unsigned nwas = a->nepochs;

	memcpy(was, a->epochs, nwas * sizeof(was[0]));
	a->nepochs = rl_store_epoch_tags(a->store, tags, RL_STORE_MASTERS_MAX);
	for (unsigned i = 0; i < a->nepochs; i++) {
		struct rl_agent_epoch *e = &a->epochs[i];
		const char *argv[2] = { "GET", NULL };
		size_t lens[2] = { 3, 0 };
		char key[200];
		unsigned k = 0;

		while (k < nwas && strcmp(was[k].tag, tags[i]) != 0)
			k++;
		if (k < nwas)
			*e = was[k];
		else
			*e = (struct rl_agent_epoch){ .known = 0 };
		memcpy(e->tag, tags[i], sizeof(e->tag));
		argv[1] = key;
		lens[1] = rl_store_epoch_key(a->cfg, e->tag, key, sizeof(key));
		rl_store_queue(a->store, 2, argv, lens);
		sync_plan_add(r, JOB_EPOCH, 0, i, 0);
	}
}

/* Whether the master of `key` lost its data, not yet repaired (an epoch of
 * that master lost). */
static int lost_at(struct rl_agent *a, const char *key, size_t len)
{
	int m = rl_store_master_of(a->store, key, len);

	if (m < 0)
		return 0; /* no master now: nothing can be put there */
	for (unsigned i = 0; i < a->nepochs; i++) {
		char ekey[200];
		size_t elen;

		if (!a->epochs[i].lost)
			continue;
		elen = rl_store_epoch_key(a->cfg, a->epochs[i].tag, ekey, sizeof(ekey));
		if (rl_store_master_of(a->store, ekey, elen) == m)
			return 1;
	}
	return 0;
}

/* Whether shard `sh` of rule `ci` is on a master that lost its data. */
static int shard_lost(struct rl_agent *a, unsigned ci, unsigned sh)
{
	char hkey[160];
	size_t len = rl_agent_hash_key(a, ci, sh, hkey, sizeof(hkey));

	return lost_at(a, hkey, len);
}

/*
 * Queue this host's entry among the hosts alive, and their count. A host
 * counts as alive for `win` (3 rounds, or a second) after its entry was
 * renewed, so renewing it every round (the hosts script: four commands and
 * a script call, much of an idle round's cost in Redis) is more than
 * needed: it is renewed at a quarter of that (about every 6 rounds at 50
 * ms, every round from a second on), and the rounds between read the
 * count alone (ZCARD). A host gone is pruned from the set by the next
 * beat of any host, so it is counted at most a quarter window longer; a
 * host new beats in its first round, as before. A set found empty (the
 * store restarted or was flushed) or a store come back beats at once.
 * Without a cluster, once a round has read the store's time, a beat is
 * the script's commands sent plain, at the store's time the last round's
 * TIME and this host's clock since give.
 */
static void queue_hosts(struct round *r)
{
	struct rl_agent *a = r->a;
	char hkey[160], win[32];
	const char *hv[3];
	size_t hl[3];
	uint64_t win_ms = 3 * a->interval_ns / RL_NS_PER_MS + 1000;

	hl[0] = (size_t)snprintf(hkey, sizeof(hkey), "%shosts",
				 a->cfg->redis_prefix);
	hv[0] = hkey;
	if (a->beat_ns && !a->beat_again &&
	    r->now_ns - a->beat_ns < win_ms * RL_NS_PER_MS / 4 &&
	    a->beat_reconnects == rl_store_reconnects(a->store)) {
		const char *cv[2] = { "ZCARD", hkey };
		size_t cl[2] = { 5, hl[0] };

		rl_store_queue(a->store, 2, cv, cl);
		sync_plan_add(r, JOB_HOSTS_COUNT, 0, 0, 0);
		return;
	}
	r->beat = 1;
	hv[1] = a->host_id;
	hl[1] = strlen(a->host_id);
	/* alive: seen within 3 rounds, or a second */
	snprintf(win, sizeof(win), "%llu", (unsigned long long)win_ms);
	hv[2] = win;
	hl[2] = strlen(win);
	if (a->clock_ns && !rl_store_cluster(a->store)) {
		/* The script's commands, plain, at the store's clock as the
		 * last round's TIME and this host's clock since tell it
		 * (a little behind: the entry looks older by a round trip) */
		uint64_t ms = (a->clock_us + (r->now_ns - a->clock_ns) / 1000) / 1000;
		char score[32], old[32], exp[32];
		const char *zv[4] = { "ZADD", hkey, score, a->host_id };
		size_t zl[4] = { 4, hl[0], 0, hl[1] };
		const char *rv[4] = { "ZREMRANGEBYSCORE", hkey, "-inf", old };
		size_t rlen[4] = { 16, hl[0], 4, 0 };
		const char *ev[3] = { "PEXPIRE", hkey, exp };
		size_t el[3] = { 7, hl[0], 0 };
		const char *cv[2] = { "ZCARD", hkey };
		size_t cl[2] = { 5, hl[0] };

		zl[2] = (size_t)snprintf(score, sizeof(score), "%llu",
					 (unsigned long long)ms);
		rlen[3] = (size_t)snprintf(old, sizeof(old), "%llu",
					   (unsigned long long)(ms > win_ms ? ms - win_ms : 0));
		el[2] = (size_t)snprintf(exp, sizeof(exp), "%llu",
					 (unsigned long long)(win_ms * 10));
		rl_store_queue(a->store, 4, zv, zl);
		rl_store_queue(a->store, 4, rv, rlen);
		rl_store_queue(a->store, 3, ev, el);
		rl_store_queue(a->store, 2, cv, cl);
		sync_plan_add(r, JOB_BEAT, 0, 0, 0);
		sync_plan_add(r, JOB_BEAT, 0, 0, 0);
		sync_plan_add(r, JOB_BEAT, 0, 0, 0);
		sync_plan_add(r, JOB_HOSTS, 0, 0, 0);
		return;
	}
	rl_store_queue_script(a->store, RL_SCRIPT_HOSTS, 1, 3, hv, hl);
	sync_plan_add(r, JOB_HOSTS, 0, 0, 0);
}

/* Call `fn` for each batch of each rule's keys among the first `nitems`
 * (sorted by rule). */
static void each_batch(struct round *r, uint32_t nitems,
		       void (*fn)(struct round *r, unsigned ci, uint32_t first,
				  uint32_t n))
{
	struct rl_agent *a = r->a;

	/* a batch never crosses a shard: one script call, one hash tag */
	for (uint32_t i = 0; i < nitems;) {
		unsigned ci = a->items[i].rule, sh = a->items[i].shard;
		uint32_t end = i;

		while (end < nitems && a->items[end].rule == ci &&
		       a->items[end].shard == sh)
			end++;
		for (uint32_t b = i; b < end; b += BATCH)
			fn(r, ci, b, end - b < BATCH ? end - b : BATCH);
		i = end;
	}
}

/* A batch's sync and plans. */
static void keys_batch(struct round *r, unsigned ci, uint32_t first, uint32_t n)
{
	const struct rl_rule_cfg *rule = &r->a->cfg->rules[ci];

	/* A strict rule's keys are decided in the store (strict.c): nothing
	 * to push, only their plans to read. */
	if (rule->sync != RL_SYNC_STRICT) {
		if (rule->algorithm != RL_ALGO_GCRA)
			queue_window(r, ci, first, n);
		else
			queue_sync(r, ci, first, n);
	}
	if (rule->nplans)
		queue_plans(r, ci, first, n);
}

/* The floor of a batch whose shard's master lost its data. */
static void floor_batch(struct round *r, unsigned ci, uint32_t first, uint32_t n)
{
	if (r->a->cfg->rules[ci].algorithm == RL_ALGO_GCRA &&
	    shard_lost(r->a, ci, r->a->items[first].shard))
		queue_floor(r, ci, first, n);
}

/* After the epochs' answers: each master that lost its data (restarted
 * empty, flushed) has lost what the keys of its shards owe: each host puts
 * back what its keys there owe here, the store keeping the most any host
 * knew, and the pulls of those shards start over, on its clock. A master
 * without an epoch (new, or restarted) gets this host's. */
static void queue_repairs(struct round *r)
{
	struct rl_agent *a = r->a;
	int lost = 0;

	for (unsigned i = 0; i < a->nepochs; i++)
		lost |= a->epochs[i].lost;
	if (lost) {
		char bans[160];
		size_t len = (size_t)snprintf(bans, sizeof(bans), "%sbans",
					      a->cfg->redis_prefix);

		/* the bans this host pushed, pushed again (ban_sync.c), and
		 * its entry among the hosts at the next round */
		a->restarted = lost_at(a, bans, len);
		a->beat_again = 1;
		each_batch(r, a->nitems, floor_batch);
		for (unsigned ci = 0; ci < a->cfg->nrules; ci++)
			for (unsigned sh = 0; sh < a->shards; sh++)
				if (shard_lost(a, ci, sh))
					a->pull_cursor[ci][sh] = 0;
	}
	for (unsigned i = 0; i < a->nepochs; i++)
		if (!a->epochs[i].value[0])
			new_epoch(a, r, i);
}

/* Queue the drop of the store's repaid keys (windows: those whose counts
 * no longer matter), a chunk per rule, of one shard per turn. */
static void queue_clean(struct round *r)
{
	struct rl_agent *a = r->a;
	unsigned sh = (unsigned)(a->rounds / CLEAN_EVERY % a->shards);

	for (unsigned ci = 0; ci < a->cfg->nrules; ci++) {
		char hkey[160], cur[32];
		const char *cv[2];
		size_t cl[2];

		int window = a->cfg->rules[ci].algorithm != RL_ALGO_GCRA;

		cl[0] = window ? rl_agent_window_key(a, ci, sh, hkey, sizeof(hkey))
			       : rl_agent_hash_key(a, ci, sh, hkey, sizeof(hkey));
		cv[0] = hkey;
		cl[1] = (size_t)snprintf(cur, sizeof(cur), "%llu",
					 (unsigned long long)a->clean_cursor[ci][sh]);
		cv[1] = cur;
		rl_store_queue_script(a->store, window ? RL_SCRIPT_WINDOW_CLEAN
						       : RL_SCRIPT_CLEAN,
				      1, 2, cv, cl);
		sync_plan_add(r, JOB_CLEAN, ci, sh, 0);
	}
}

static int sync_round(struct rl_agent *a, uint64_t now_ns);

int rl_agent_sync(struct rl_agent *a, uint64_t now_ns)
{
	int rc;

	pthread_mutex_lock(&a->dry_lock);
	a->round_open = 1;
	pthread_mutex_unlock(&a->dry_lock);
	rc = sync_round(a, now_ns);
	pthread_mutex_lock(&a->dry_lock);
	a->round_open = 0;
	for (unsigned i = 0; i < a->ndry; i++)
		rl_table_ask_lent(a->table, &a->dry[i].it, 0, a->dry[i].floor_ns,
				  rl_time_now_ns());
	a->ndry = 0;
	pthread_mutex_unlock(&a->dry_lock);
	return rc;
}

/*
 * A lend of nothing may have met this host's grant of the key, made by a
 * sync whose answer is still on its way here: the store counts the grant
 * taken, and the key's state here does not have it yet. Such a lend is
 * applied once that answer is (a round's answers take a few ms), so that
 * the request waiting on it is decided from the grant, not refused; the
 * lends' thread goes on meanwhile.
 */
void rl_agent_dry_lend(struct rl_agent *a, const struct rl_ask_item *it,
		       uint64_t floor_ns)
{
	pthread_mutex_lock(&a->dry_lock);
	if (a->round_open && a->ndry < RL_ASKS)
		a->dry[a->ndry++] = (struct rl_dry_lend){ *it, floor_ns };
	else
		rl_table_ask_lent(a->table, it, 0, floor_ns, rl_time_now_ns());
	pthread_mutex_unlock(&a->dry_lock);
}

static int sync_round(struct rl_agent *a, uint64_t now_ns)
{
	struct round *r = &(struct round){ .a = a, .now_ns = now_ns };

	if (!a->cfg->redis)
		return 0;
	rl_table_agent_set_interval(a->table,
				    (uint32_t)(a->interval_ns / RL_NS_PER_MS));
	/* From now on decisions count what the agent must push. */
	rl_table_agent_flags_change(a->table, RL_AGENT_SYNC, 0);
	a->nitems = 0;
	rl_table_sync_collect(a->table, now_ns, collect, a);
	/* what was collected came since the last collect: a round, or more
	 * after a stall (at most a second is trusted to spread it over) */
	r->since_ns = a->last_collect_ns ? now_ns - a->last_collect_ns
					 : a->interval_ns;
	if (r->since_ns > RL_NS_PER_SEC)
		r->since_ns = RL_NS_PER_SEC;
	a->last_collect_ns = now_ns;
	if (!rl_store_ready(a->store, now_ns)) {
		store_down(a, now_ns);
		return 0;
	}
	/* Of the keys only in debt here, this round's turn (repush.c). */
	a->npush = rl_agent_repush_pick(a->items, a->nitems,
					rl_agent_repush_budget(a->hosts_alive),
					&a->repush_from);
	qsort(a->items, a->nitems, sizeof(a->items[0]), by_rule);
	a->restarted = 0;

	queue_epoch(r);
	queue_hosts(r);
	each_batch(r, a->npush, keys_batch);
	/* the clock the plain pulls' cursors go on from (queue_pull) */
	a->npulled = 0;
	a->pull_len = 0;
	if (!rl_store_cluster(a->store))
		queue_time(r);
	for (unsigned ci = 0; ci < a->cfg->nrules; ci++) {
		const struct rl_rule_cfg *rule = &a->cfg->rules[ci];

		if (rule->nplans)
			queue_plans_scan(r, ci);
		/* what the other hosts did with the keys (strict rules
		 * ask the store for each admission instead) */
		if (rule->algorithm == RL_ALGO_GCRA &&
		    rule->sync != RL_SYNC_STRICT)
			queue_pull(r, ci);
	}
	/* now and then, drop the store's repaid keys */
	if (a->rounds % CLEAN_EVERY == 0)
		queue_clean(r);
	/* the ban set, for ban_sync.c after the round (a round trip fewer) */
	switch (rl_agent_bans_queue(a, r->beat)) {
	case 2:
		sync_plan_add(r, JOB_BANS_EXPIRE, 0, 0, 0);
		/* fall through */
	case 1:
		sync_plan_add(r, JOB_BANS, 0, 0, 0);
	}
	/* last: its answer undoes what the others raised of a key reset */
	queue_resets(r);
	if (rl_store_flush(a->store, on_reply, r, now_ns) || r->failed) {
		if (rl_store_up(a->store))
			rl_store_fail(a->store, "bad reply", now_ns);
		store_down(a, now_ns);
		return 0;
	}
	/* the states of the keys the pulls found changed (none: no second
	 * exchange) */
	if (a->npulled) {
		r->nplan = 0;
		r->have_time = 0;
		if (queue_pulled(r) || rl_store_flush(a->store, on_reply, r, now_ns) ||
		    r->failed) {
			if (rl_store_up(a->store))
				rl_store_fail(a->store, "bad reply", now_ns);
			store_down(a, now_ns);
			return 0;
		}
	}
	a->epochs_read = 1;
	r->nplan = 0;
	queue_repairs(r);
	/* repaired: the losses are forgotten (else the next round that
	 * answers repairs them) */
	if (!r->nplan || !rl_store_flush(a->store, on_reply, r, now_ns))
		for (unsigned i = 0; i < a->nepochs; i++)
			a->epochs[i].lost = 0;
	/* Keys reset: gone from the store once more, with what this host
	 * pushed of them before it heard of the reset. */
	if (a->nforget) {
		r->nplan = 0;
		queue_forgets(r);
		rl_store_flush(a->store, on_reply, r, now_ns);
	}
	store_synced(a, r, now_ns);
	return 1;
}
