/* SPDX-License-Identifier: MIT */
/*
 * strict.c - sync = strict: the agent's thread that decides the shims'
 * asks in the store (the asks themselves: src/core/ask.c).
 *
 * It has a connection of its own, so that a strict decision never waits
 * behind a sync round (nor a round behind a slow strict answer). It sleeps
 * on the segment's bell; each wake takes every ask posted, sends one
 * script call per ask in one pipeline and answers each from its reply:
 * allowed or not, and the key's state in the store, which becomes the
 * key's state here, so that the shims refuse locally what the store would
 * refuse. A store that does not answer within `timeout` fails the asks
 * (the shims apply on_store_down; they stop waiting at the same timeout
 * anyway).
 *
 * The store's state is the async rules' too: the key's TAT in microseconds
 * of the store's clock, in the rule's hash, so a rule switched between
 * async and strict keeps its keys' debts.
 */
#include "agent.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"

#define SWEEP_NS (2 * RL_NS_PER_SEC) /* asks left by dead processes, at
					 least: far longer than any wait */
#define IDLE_NS (100 * RL_NS_PER_MS) /* longest sleep between checks */

/* KEYS[1]: the rule's hash of global states (as sync.c's).
 * ARGV: key, cost, interval (us), depth (us), idle TTL (ms), the catch-up
 * (us: a key late for its turn by less keeps its cadence, as gcra.c's).
 * Returns { 1 or 0, what the key owes from now (us) }. */
static const char strict_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	RL_LUA_TAT
	"local ei = tonumber(ARGV[3])\n"
	"local tat = tat_of(redis.call('HGET', KEYS[1], ARGV[1]), ei, now)\n"
	"if tat < now and (tat == 0 or now - tat >= tonumber(ARGV[6])) then\n"
	"  tat = now\n"
	"end\n"
	"local new = tat + tonumber(ARGV[2]) * ei\n"
	"if new - now > tonumber(ARGV[4]) then\n"
	"  return {0, string.format('%.0f', tat - now)}\n"
	"end\n"
	"redis.call('HSET', KEYS[1], ARGV[1], tat_text(new, ARGV[3]))\n"
	"redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[5]))\n"
	"return {1, string.format('%.0f', new - now)}\n";

/* The same for a window (the async windows' hash and counts: sync.c's
 * window_lua). KEYS[1]: the rule's hash of window counts. ARGV: key, cost,
 * the window (its index on Unix time), the limit, "f" (fixed) or "s"
 * (sliding), the period and how far into the window (ms), the hash's TTL
 * (ms). Sliding: the previous count weighs (period - elapsed) / period,
 * compared exactly (a window stored one ahead, from a host whose clock is
 * ahead, has only begun). The counts matter until the end of the window
 * after theirs (as window_lua's, for the sweep).
 * Returns { 1 or 0, the window, its count, the previous one's }. */
static const char strict_window_lua[] =
	"local w = tonumber(ARGV[3])\n"
	"local cur, prev = 0, 0\n"
	"local v = redis.call('HGET', KEYS[1], ARGV[1])\n"
	"if v then\n"
	"  local si, sc, sp = string.match(v, '^(%d+):(%d+):(%d+):')\n"
	"  si, sc, sp = tonumber(si), tonumber(sc), tonumber(sp)\n"
	"  if si == w or si == w + 1 then w, cur, prev = si, sc, sp\n"
	"  elseif si == w - 1 then prev = sc end\n"
	"end\n"
	"local cost, limit = tonumber(ARGV[2]), tonumber(ARGV[4])\n"
	"local p, e = tonumber(ARGV[6]), tonumber(ARGV[7])\n"
	"if w > tonumber(ARGV[3]) then e = 0 end\n"
	"local ok\n"
	"if ARGV[5] == 'f' then\n"
	"  ok = cur + cost <= limit\n"
	"else\n"
	"  ok = prev * (p - e) + (cur + cost) * p <= limit * p\n"
	"end\n"
	"if not ok then\n"
	"  return {0, string.format('%.0f', w), cur, prev}\n"
	"end\n"
	"cur = cur + cost\n"
	"redis.call('HSET', KEYS[1], ARGV[1],\n"
	"           string.format('%.0f:%.0f:%.0f:%.0f', w, cur, prev, (w + 2) * p))\n"
	"redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[8]))\n"
	"return {1, string.format('%.0f', w), cur, prev}\n";

/*
 * sync = async: a lend, for a host whose share of a token bucket's key is
 * spent (or that meets a key new to it while other hosts are alive). KEYS:
 * the rule's hash of global states (KEYS[1], sync.c's) and of grants
 * (KEYS[2], rl_lua_sync's: "born host grant ts host grant ts ...").
 * ARGV: key, cost, interval (us, as text: the TAT's tariff), burst, this
 * host, the hosts alive, how long (us) a grant stands, the hashes' TTL
 * (ms).
 *
 * Of what the key has left in the store, what the grants standing (every
 * host's, this one's included: spent or not, they are not pushed yet)
 * leave is free; this host gets floor(free / 2N) of it, at least the cost
 * while free covers it (so a key whose burst is below 2N is lent a
 * request at a time), and that is added to its grant, so that every
 * other host's sync and lend counts it as taken. It takes nothing from
 * the key's state: what the host admits of it is pushed as ever. The
 * grants standing therefore never add up to more than what is left.
 * Returns { what is lent, what the key owes from now (us), now (us) }.
 */
static const char lend_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	RL_LUA_TAT
	"local e = tonumber(ARGV[3])\n"
	"local tat = tat_of(redis.call('HGET', KEYS[1], ARGV[1]), e, now)\n"
	"if tat < now then tat = now end\n"
	"local left = math.floor((now + tonumber(ARGV[4]) * e - tat) / e)\n"
	"local me, nh, span = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])\n"
	"local gv = redis.call('HGET', KEYS[2], ARGV[1])\n"
	"local born, keep, held, mine = now, {}, 0, 0\n"
	"if gv then\n"
	"  local w = string.gmatch(gv, '%S+')\n"
	"  born = tonumber(w()) or now\n"
	"  while true do\n"
	"    local h, g, ts = w(), tonumber(w() or ''), tonumber(w() or '')\n"
	"    if not h or not g or not ts then break end\n"
	"    if ts >= now - span then\n"
	"      held = held + g\n"
	"      if h == me then mine = g\n"
	"      else keep[#keep + 1] = h .. ' ' .. g .. ' ' .. string.format('%.0f', ts) end\n"
	"    end\n"
	"  end\n"
	"end\n"
	"local free, cost, g = left - held, tonumber(ARGV[2]), 0\n"
	"if free >= cost then\n"
	"  if nh > 1 then g = math.floor(free / (2 * nh)) else g = free end\n"
	"  if g < cost then g = cost end\n"
	"  keep[#keep + 1] = me .. ' ' .. (mine + g) .. ' ' .. string.format('%.0f', now)\n"
	"  redis.call('HSET', KEYS[2], ARGV[1],\n"
	"             string.format('%.0f', born) .. ' ' .. table.concat(keep, ' '))\n"
	"  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[8]))\n"
	"end\n"
	"return {g, string.format('%.0f', tat - now), t[1] .. string.format('%06d', tonumber(t[2]))}\n";

enum { SCRIPT_STRICT = 0, SCRIPT_STRICT_WINDOW = 1, SCRIPT_LEND = 2 };

struct ask {
	struct rl_ask_item it;
	const struct rl_algo *alg;    /* the key's tariff */
	unsigned shard;               /* a lend's: its key's */
	int answered;
	uint64_t floor_ns;            /* a lend's: the store's debt, until */
};

struct rl_strict {
	struct rl_agent *a;
	struct rl_store *store;
	pthread_t thread;
	_Atomic int stop;
	struct ask asks[RL_ASKS];
	unsigned n;
	uint64_t sent_ns;             /* the asks' pipeline, sent */
	uint32_t seen[RL_ASKS];
};

/* The config rule of an ask, if it is a strict one of ours; else -1. */
static int strict_rule(const struct rl_agent *a, unsigned id)
{
	int ci = id < RL_MAX_RULES ? a->rule_of[id] : -1;

	return ci >= 0 && a->cfg->rules[ci].sync == RL_SYNC_STRICT ? ci : -1;
}

/* The config rule of a lend, if it is an async one of ours with a store
 * (its token buckets: the algorithm is checked with the key's plan). */
static int lend_rule(const struct rl_agent *a, unsigned id)
{
	int ci = id < RL_MAX_RULES ? a->rule_of[id] : -1;

	return ci >= 0 && a->cfg->rules[ci].sync != RL_SYNC_STRICT &&
		       a->cfg->rules[ci].algorithm == RL_ALGO_GCRA
		       ? ci
		       : -1;
}

static int ask_rule(const struct rl_agent *a, const struct rl_ask_item *it)
{
	return it->kind == RL_ASK_LEND ? lend_rule(a, it->rule)
				       : strict_rule(a, it->rule);
}

static int take_one(const struct rl_ask_item *it, void *arg)
{
	struct rl_strict *s = arg;

	if (ask_rule(s->a, it) < 0) {
		rl_table_ask_fail(s->a->table, it);
		return 0;
	}
	s->asks[s->n].it = *it;
	s->asks[s->n].answered = 0;
	s->n++;
	return s->n == RL_ASKS;
}

/* Queue the window script for ask `q` of config rule `ci`. */
static int queue_window(struct rl_strict *s, const struct ask *q, unsigned ci,
			const char *key, size_t klen)
{
	const struct rl_agent *a = s->a;
	const struct rl_rule_cfg *r = &a->cfg->rules[ci];
	const struct rl_algo *alg = q->alg;
	uint64_t now = rl_time_now_ns(), idx = rl_window_index(alg, now);
	uint64_t period_ms = alg->rate.period_ns / RL_NS_PER_MS;
	uint64_t elapsed_ms = ((now + alg->unix_off_ns) % alg->rate.period_ns) /
			      RL_NS_PER_MS;
	char hkey[170], cost[16], w[24], limit[16], p[24], e[24], ttl[24];
	const char *argv[9] = { hkey, key, cost, w, limit,
				alg->kind == RL_ALGO_FIXED_WINDOW ? "f" : "s",
				p, e, ttl };
	size_t lens[9];

	lens[0] = rl_agent_window_key(a, ci, rl_store_key_shard(a->cfg, key, klen),
				      hkey, sizeof(hkey));
	lens[1] = klen;
	lens[2] = (size_t)snprintf(cost, sizeof(cost), "%u", q->it.cost);
	lens[3] = (size_t)snprintf(w, sizeof(w), "%llu", (unsigned long long)idx);
	lens[4] = (size_t)snprintf(limit, sizeof(limit), "%u", alg->rate.count);
	lens[5] = 1;
	lens[6] = (size_t)snprintf(p, sizeof(p), "%llu",
				   (unsigned long long)period_ms);
	lens[7] = (size_t)snprintf(e, sizeof(e), "%llu",
				   (unsigned long long)elapsed_ms);
	lens[8] = (size_t)snprintf(ttl, sizeof(ttl), "%llu",
				   (unsigned long long)rl_agent_ttl_ms(a, r));
	return rl_store_queue_script(s->store, SCRIPT_STRICT_WINDOW, 1, 9, argv,
				     lens);
}

/* Queue the lend script for ask `q` of config rule `ci`. */
static int queue_lend(struct rl_strict *s, struct ask *q, unsigned ci,
		      const char *key, size_t klen)
{
	const struct rl_agent *a = s->a;
	const struct rl_algo *alg = q->alg;
	unsigned shard = rl_store_key_shard(a->cfg, key, klen);
	char hkey[160], gkey[170], cost[16], ei[32], burst[16], hosts[16];
	char span[32], ttl[32];
	const char *argv[10] = { hkey, gkey, key, cost, ei, burst,
				 a->host_tag, hosts, span, ttl };
	size_t lens[10];
	uint32_t nh = __atomic_load_n(&a->hosts_alive, __ATOMIC_RELAXED);

	q->shard = shard; /* its answer is on that master's clock */
	lens[0] = rl_agent_hash_key(a, ci, shard, hkey, sizeof(hkey));
	lens[1] = (size_t)snprintf(gkey, sizeof(gkey), "%s:grants", hkey);
	lens[2] = klen;
	lens[3] = (size_t)snprintf(cost, sizeof(cost), "%u", q->it.cost);
	/* the tariff as the sync writes it (sync.c's collect) */
	lens[4] = (size_t)snprintf(ei, sizeof(ei), "%.3f",
				   (double)alg->interval_ns / 1000.0);
	lens[5] = (size_t)snprintf(burst, sizeof(burst), "%u", alg->rate.burst);
	lens[6] = strlen(a->host_tag);
	lens[7] = (size_t)snprintf(hosts, sizeof(hosts), "%u", nh ? nh : 1);
	/* a grant stands three rounds (sync_jobs.c's queue_sync) */
	lens[8] = (size_t)snprintf(span, sizeof(span), "%llu",
				   (unsigned long long)(3 * a->interval_ns / 1000));
	lens[9] = (size_t)snprintf(ttl, sizeof(ttl), "%llu",
				   (unsigned long long)rl_agent_ttl_ms(
					   a, &a->cfg->rules[ci]));
	return rl_store_queue_script(s->store, SCRIPT_LEND, 2, 10, argv, lens);
}

/* Queue the script for ask `q`. */
static int queue(struct rl_strict *s, struct ask *q)
{
	struct rl_agent *a = s->a;
	const struct rl_rule_cache *rc = rl_table_rule_get(a->table, q->it.rule);
	int ci = ask_rule(a, &q->it);
	const struct rl_rule_cfg *r = &a->cfg->rules[ci];
	const struct rl_algo *alg;
	char hkey[160], key[160], cost[16], ei[32], depth[32], ttl[32], cu[16];
	const char *argv[7] = { hkey, key, cost, ei, depth, ttl, cu };
	size_t lens[7];

	if (!rc)
		return -1;
	alg = rl_rule_cache_algo(rc, q->it.plan);
	q->alg = alg;
	lens[1] = rl_agent_key_text(r, q->it.key, q->it.key_len,
				    q->it.truncated, key, sizeof(key));
	if (q->it.kind == RL_ASK_LEND)
		return alg->kind == RL_ALGO_GCRA
			       ? queue_lend(s, q, (unsigned)ci, key, lens[1])
			       : -1;
	if (alg->kind != RL_ALGO_GCRA)
		return queue_window(s, q, (unsigned)ci, key, lens[1]);
	lens[0] = rl_agent_hash_key(a, (unsigned)ci,
				    rl_store_key_shard(a->cfg, key, lens[1]), hkey,
				    sizeof(hkey));
	lens[2] = (size_t)snprintf(cost, sizeof(cost), "%u", q->it.cost);
	lens[3] = (size_t)snprintf(ei, sizeof(ei), "%.3f",
				   (double)alg->interval_ns / 1000.0);
	lens[4] = (size_t)snprintf(depth, sizeof(depth), "%.3f",
				   (double)alg->depth_ns / 1000.0);
	lens[5] = (size_t)snprintf(ttl, sizeof(ttl), "%llu",
				   (unsigned long long)rl_agent_ttl_ms(a, r));
	lens[6] = (size_t)snprintf(cu, sizeof(cu), "%llu",
				   (unsigned long long)(RL_GCRA_CATCHUP_NS / 1000));
	return rl_store_queue_script(s->store, SCRIPT_STRICT, 1, 7, argv, lens);
}

/* The key's state after the store's answer `rep`, as this host keeps it,
 * in *state: 0, or -1 for an answer that does not parse. */
static int answer_state(const struct ask *q, const redisReply *rep,
			uint64_t *state)
{
	const struct rl_algo *alg = q->alg;
	uint64_t now = rl_time_now_ns();

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
	    rep->element[0]->type != REDIS_REPLY_INTEGER ||
	    rep->element[1]->type != REDIS_REPLY_STRING)
		return -1;
	if (alg->kind == RL_ALGO_GCRA) {
		double us = strtod(rep->element[1]->str, NULL);

		if (rep->elements != 2)
			return -1;
		*state = now + (us > 0 ? (uint64_t)(us * 1000.0) : 0);
		return 0;
	}
	if (rep->elements != 4 || rep->element[2]->type != REDIS_REPLY_INTEGER ||
	    rep->element[3]->type != REDIS_REPLY_INTEGER)
		return -1;
	*state = rl_window_pack(alg, strtoull(rep->element[1]->str, NULL, 10),
				(uint64_t)rep->element[2]->integer,
				(uint64_t)rep->element[3]->integer);
	return 0;
}

static int on_reply(redisReply *rep, unsigned i, void *arg)
{
	struct rl_strict *s = arg;
	struct ask *q = &s->asks[i];
	uint64_t state;

	if (q->it.kind == RL_ASK_LEND) {
		double us;
		uint64_t at;

		if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 ||
		    rep->element[0]->type != REDIS_REPLY_INTEGER ||
		    rep->element[1]->type != REDIS_REPLY_STRING ||
		    rep->element[2]->type != REDIS_REPLY_STRING)
			return 0; /* failed below, with the unanswered */
		us = strtod(rep->element[1]->str, NULL);
		/* owed from the script's now, on this host's clock (the
		 * sync's estimate, store_clock.c); not known yet, from when
		 * the lend was sent */
		at = rl_store_clock_at(&s->a->clocks[q->shard % RL_STORE_SHARDS_MAX],
				       strtoull(rep->element[2]->str, NULL, 10),
				       s->sent_ns);
		q->answered = 1;
		q->floor_ns = at + (us > 0 ? (uint64_t)(us * 1000.0) : 0);
		if (rep->element[0]->integer <= 0) {
			/* after the round in flight, if one is */
			rl_agent_dry_lend(s->a, &q->it, q->floor_ns);
			return 0;
		}
		rl_table_ask_lent(s->a->table, &q->it,
				  (uint64_t)rep->element[0]->integer, q->floor_ns,
				  rl_time_now_ns());
		return 0;
	}
	if (answer_state(q, rep, &state))
		return 0; /* failed below, with the unanswered */
	rl_table_ask_answer(s->a->table, &q->it, rep->element[0]->integer == 1,
			    state);
	q->answered = 1;
	return 0;
}

/* Decide the asks taken, in one pipeline. */
static void decide(struct rl_strict *s, uint64_t now_ns)
{
	unsigned queued = 0;

	if (rl_store_ready(s->store, now_ns)) {
		s->sent_ns = rl_time_now_ns();
		for (; queued < s->n; queued++)
			if (queue(s, &s->asks[queued]))
				break;
		if (queued && rl_store_flush(s->store, on_reply, s, now_ns) &&
		    rl_store_up(s->store))
			rl_store_fail(s->store, "bad reply", now_ns);
	}
	for (unsigned i = 0; i < s->n; i++)
		if (!s->asks[i].answered)
			rl_table_ask_fail(s->a->table, &s->asks[i].it);
	s->n = 0;
}

static void *run(void *arg)
{
	struct rl_strict *s = arg;
	struct rl_table *t = s->a->table;
	uint64_t swept = rl_time_now_ns();

	uint64_t timeout = s->a->cfg->redis_timeout_ns;
	uint64_t every = timeout > UINT64_MAX / 4 ? UINT64_MAX : 4 * timeout;

	if (every < SWEEP_NS)
		every = SWEEP_NS;
	while (!atomic_load(&s->stop)) {
		uint32_t bell = rl_table_asks_bell(t);
		uint64_t now;

		rl_table_asks_take(t, take_one, s);
		now = rl_time_now_ns();
		/* (also under a steady stream of asks) */
		if (now - swept >= every) {
			rl_table_asks_sweep(t, s->seen);
			swept = now;
		}
		if (s->n) {
			decide(s, now);
			continue;
		}
		rl_table_asks_wait(t, bell, IDLE_NS);
	}
	return NULL;
}

struct rl_strict *rl_agent_strict_start(struct rl_agent *a)
{
	struct rl_strict *s;
	int any = 0, lends = 0;

	/* Whatever an agent before this one said, until this one says so. */
	rl_table_agent_flags_change(a->table, 0, RL_AGENT_STRICT);

	rl_table_agent_flags_change(a->table, 0, RL_AGENT_LEND);
	/* Strict rules' decisions, and async token buckets' lends. */
	for (unsigned i = 0; i < a->cfg->nrules; i++) {
		any |= a->cfg->rules[i].sync == RL_SYNC_STRICT;
		lends |= lend_rule(a, a->ids[i]) >= 0;
	}
	if (!a->cfg->redis || !(any || lends))
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->a = a;
	s->store = rl_store_new(a->cfg->redis_url, a->cfg->redis_timeout_ns);
	if (!s->store) {
		free(s);
		return NULL;
	}
	rl_store_impact(s->store, a->cfg);
	rl_store_quiet_nodes(s->store);
	rl_store_script(s->store, SCRIPT_STRICT, strict_lua);
	rl_store_script(s->store, SCRIPT_STRICT_WINDOW, strict_window_lua);
	rl_store_script(s->store, SCRIPT_LEND, lend_lua);
	if (pthread_create(&s->thread, NULL, run, s)) {
		rl_log(RL_LOG_ERROR, "msg=\"cannot start the strict thread\" "
		       "err=\"%s\"", strerror(errno));
		rl_store_free(s->store);
		free(s);
		return NULL;
	}
	rl_table_agent_flags_change(a->table, (any ? RL_AGENT_STRICT : 0) |
						      (lends ? RL_AGENT_LEND : 0),
				    0);
	return s;
}

void rl_agent_strict_stop(struct rl_strict *s)
{
	if (!s)
		return;
	rl_table_agent_flags_change(s->a->table, 0,
				    RL_AGENT_STRICT | RL_AGENT_LEND);
	atomic_store(&s->stop, 1);
	pthread_join(s->thread, NULL);
	rl_store_free(s->store);
	free(s);
}
