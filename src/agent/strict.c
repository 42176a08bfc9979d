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

#define SWEEP_NS (2 * RL_NS_PER_SEC) /* asks left by dead processes */
#define IDLE_NS (100 * RL_NS_PER_MS) /* longest sleep between checks */

/* KEYS[1]: the rule's hash of global states (as sync.c's).
 * ARGV: key, cost, interval (us), depth (us), idle TTL (ms).
 * Returns { 1 or 0, what the key owes from now (us) }. */
static const char strict_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	RL_LUA_TAT
	"local ei = tonumber(ARGV[3])\n"
	"local tat = tat_of(redis.call('HGET', KEYS[1], ARGV[1]), ei, now)\n"
	"if tat < now then tat = now end\n"
	"local new = tat + tonumber(ARGV[2]) * ei\n"
	"if new - now > tonumber(ARGV[4]) then\n"
	"  return {0, string.format('%.0f', tat - now)}\n"
	"end\n"
	"redis.call('HSET', KEYS[1], ARGV[1], tat_text(new, ARGV[3]))\n"
	"redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[5]))\n"
	"return {1, string.format('%.0f', new - now)}\n";

enum { SCRIPT_STRICT = 0 };

struct ask {
	struct rl_ask_item it;
	int answered;
};

struct rl_strict {
	struct rl_agent *a;
	struct rl_store *store;
	pthread_t thread;
	_Atomic int stop;
	struct ask asks[RL_ASKS];
	unsigned n;
	uint32_t seen[RL_ASKS];
};

/* The config rule of an ask, if it is a strict one of ours; else -1. */
static int strict_rule(const struct rl_agent *a, unsigned id)
{
	int ci = id < RL_MAX_RULES ? a->rule_of[id] : -1;

	return ci >= 0 && a->cfg->rules[ci].sync == RL_SYNC_STRICT ? ci : -1;
}

static int take_one(const struct rl_ask_item *it, void *arg)
{
	struct rl_strict *s = arg;

	if (strict_rule(s->a, it->rule) < 0) {
		rl_table_ask_fail(s->a->table, it);
		return 0;
	}
	s->asks[s->n].it = *it;
	s->asks[s->n].answered = 0;
	s->n++;
	return s->n == RL_ASKS;
}

/* Queue the script for ask `q`. */
static int queue(struct rl_strict *s, const struct ask *q)
{
	struct rl_agent *a = s->a;
	const struct rl_rule_cache *rc = rl_table_rule_get(a->table, q->it.rule);
	int ci = strict_rule(a, q->it.rule);
	const struct rl_rule_cfg *r = &a->cfg->rules[ci];
	const struct rl_algo *alg;
	char hkey[160], key[160], cost[16], ei[32], depth[32], ttl[32];
	const char *argv[6] = { hkey, key, cost, ei, depth, ttl };
	size_t lens[6];

	if (!rc)
		return -1;
	alg = q->it.plan && q->it.plan <= rc->nplans ? &rc->plans[q->it.plan - 1]
						     : &rc->algo;
	lens[0] = (size_t)snprintf(hkey, sizeof(hkey), "%s{%s}",
				   a->cfg->redis_prefix, r->name);
	lens[1] = rl_agent_key_text(r, q->it.key, q->it.key_len,
				    q->it.truncated, key, sizeof(key));
	lens[2] = (size_t)snprintf(cost, sizeof(cost), "%u", q->it.cost);
	lens[3] = (size_t)snprintf(ei, sizeof(ei), "%.3f",
				   (double)alg->interval_ns / 1000.0);
	lens[4] = (size_t)snprintf(depth, sizeof(depth), "%.3f",
				   (double)alg->depth_ns / 1000.0);
	/* kept while it could owe anything, and a minute */
	lens[5] = (size_t)snprintf(ttl, sizeof(ttl), "%llu",
				   (unsigned long long)(alg->depth_ns /
							RL_NS_PER_MS + 60000));
	return rl_store_queue_script(s->store, SCRIPT_STRICT, 1, 6, argv, lens);
}

static int on_reply(redisReply *rep, unsigned i, void *arg)
{
	struct rl_strict *s = arg;
	struct ask *q = &s->asks[i];
	double us;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep->element[0]->type != REDIS_REPLY_INTEGER ||
	    rep->element[1]->type != REDIS_REPLY_STRING)
		return 0; /* failed below, with the unanswered */
	us = strtod(rep->element[1]->str, NULL);
	rl_table_ask_answer(s->a->table, &q->it, rep->element[0]->integer == 1,
			    rl_time_now_ns() + (us > 0 ? (uint64_t)(us * 1000.0)
						       : 0));
	q->answered = 1;
	return 0;
}

/* Decide the asks taken, in one pipeline. */
static void decide(struct rl_strict *s, uint64_t now_ns)
{
	unsigned queued = 0;

	if (rl_store_ready(s->store, now_ns)) {
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

	while (!atomic_load(&s->stop)) {
		uint32_t bell = rl_table_asks_bell(t);
		uint64_t now;

		rl_table_asks_take(t, take_one, s);
		now = rl_time_now_ns();
		if (s->n) {
			decide(s, now);
			continue;
		}
		if (now - swept >= SWEEP_NS) {
			rl_table_asks_sweep(t, s->seen);
			swept = now;
		}
		rl_table_asks_wait(t, bell, IDLE_NS);
	}
	return NULL;
}

struct rl_strict *rl_agent_strict_start(struct rl_agent *a)
{
	/* Whatever an agent before this one said, until this one says so. */
	rl_table_agent_flags_change(a->table, 0, RL_AGENT_STRICT);

	struct rl_strict *s;
	int any = 0;

	for (unsigned i = 0; i < a->cfg->nrules; i++)
		any |= a->cfg->rules[i].sync == RL_SYNC_STRICT;
	if (!a->cfg->redis || !any)
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
	rl_store_script(s->store, SCRIPT_STRICT, strict_lua);
	if (pthread_create(&s->thread, NULL, run, s)) {
		rl_log(RL_LOG_ERROR, "msg=\"cannot start the strict thread\" "
		       "err=\"%s\"", strerror(errno));
		rl_store_free(s->store);
		free(s);
		return NULL;
	}
	rl_table_agent_flags_change(a->table, RL_AGENT_STRICT, 0);
	return s;
}

void rl_agent_strict_stop(struct rl_strict *s)
{
	if (!s)
		return;
	rl_table_agent_flags_change(s->a->table, 0, RL_AGENT_STRICT);
	atomic_store(&s->stop, 1);
	pthread_join(s->thread, NULL);
	rl_store_free(s->store);
	free(s);
}
