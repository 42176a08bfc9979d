/* SPDX-License-Identifier: MIT */
/*
 * fail_sync.c - maxretry across hosts: a client's refusals on every host
 * counted together, in the store.
 *
 * The shim counts a client's refusals per host as it does without a store
 * (a lone host bans at maxretry exactly, and so does every host while the
 * store is down), and each one it counts is also owed to the store
 * (slot.sync_fails). Each round the agent takes those and adds them, in one
 * script call per rule with refusals (keys batched, under the rule's hash
 * tag), to <prefix>fails:{<rule>}: per client address at the ban's prefix,
 * the count and the store-clock time of its first refusal, fail2ban's
 * window (a count whose first refusal is older than findtime starts over).
 * The script answers each count, and the call that brings one to maxretry
 * deletes it: of all the agents, exactly one sees it reach. That one bans
 * the address here, an offence as the shim's would be (bantime.increment
 * counts it), and ban_sync.c, next in the same round, takes the ban to the
 * store and so to every host.
 *
 * Counted twice, banned once. The local count and the store's both hold a
 * host's own refusals: a lone host reaches maxretry locally first and bans;
 * the store's count then reaches it for an address banned already, which
 * is no second offence. A ban forgets the address's counts (local and owed)
 * on the host that issued it and, as the ban arrives, on the others, so that
 * refusals a ban took in do not count towards the next one there.
 *
 * Store commands: one script call per rule with refusals this round, 400
 * addresses each: they grow with the clients refused, not with requests.
 * With the store down, what is owed is dropped: the hosts count alone.
 */
#include "agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ban.h"
#include "log.h"
#include "clock.h"

#define FAIL_BATCH 400        /* addresses per script call */
#define FAIL_CALLS 256        /* script calls per round at most */

/* KEYS[1]: the rule's hash of counts, field: address, value: "<first ms>
 * <count>" on the store's clock. ARGV[1]: maxretry, ARGV[2]: findtime
 * (ms), ARGV[3]: an HSCAN cursor. Then pairs: address, refusals since the
 * caller's last call. Returns each address's count, in order, and the next
 * cursor; a count that reaches maxretry is deleted, so that only this call
 * sees it reach. The scan drops a chunk of counts past their findtime: the
 * hash of a rule that keeps refusing never idles long enough to expire. */
static const char fails_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local max, find = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
	"local n = (#ARGV - 3) / 2\n"
	"local fields = {}\n"
	"for i = 1, n do fields[i] = ARGV[2 * i + 2] end\n"
	"local cur = redis.call('HMGET', KEYS[1], unpack(fields))\n"
	"local sets, dels, out = {}, {}, {}\n"
	"for i = 1, n do\n"
	"  local first, c = now, 0\n"
	"  if cur[i] then\n"
	"    local f, k = string.match(cur[i], '^(%d+) (%d+)$')\n"
	"    if f and now - tonumber(f) <= find then\n"
	"      first, c = tonumber(f), tonumber(k)\n"
	"    end\n"
	"  end\n"
	"  c = c + tonumber(ARGV[2 * i + 3])\n"
	"  if c >= max then\n"
	"    dels[#dels + 1] = fields[i]\n"
	"  else\n"
	"    sets[#sets + 1] = fields[i]\n"
	"    sets[#sets + 1] = string.format('%d %d', first, c)\n"
	"  end\n"
	"  out[i] = c\n"
	"end\n"
	"if #sets > 0 then redis.call('HSET', KEYS[1], unpack(sets)) end\n"
	"if #dels > 0 then redis.call('HDEL', KEYS[1], unpack(dels)) end\n"
	"local r = redis.call('HSCAN', KEYS[1], ARGV[3], 'COUNT', 100)\n"
	"local kv, old = r[2], {}\n"
	"for i = 1, #kv, 2 do\n"
	"  local f = tonumber(string.match(kv[i + 1], '^(%d+) '))\n"
	"  if not f or now - f > find then old[#old + 1] = kv[i] end\n"
	"end\n"
	"if #old > 0 then redis.call('HDEL', KEYS[1], unpack(old)) end\n"
	"redis.call('PEXPIRE', KEYS[1], find + 60000)\n"
	"out[n + 1] = r[1]\n"
	"return out\n";

/* One address refused on this host since the last round, under one rule. */
struct fail_item {
	unsigned rule;                /* config index */
	struct rl_cidr cidr;          /* the address at the ban's prefix */
	uint8_t klen;
	uint8_t key[17];              /* the shim's key of it (rl_addr_key) */
	uint8_t tlen;
	uint16_t shard;               /* of text (rl_store_key_shard) */
	char text[RL_ADDR_STRLEN];    /* as the store names it */
	char count[12];
};

struct fail_call {
	unsigned rule;
	uint32_t first, n;
};

struct fails_state {
	uint32_t n, cap;
	struct fail_item *items;
	unsigned ncalls;
	struct fail_call calls[FAIL_CALLS];
	int any;                      /* a rule has maxretry */
	/* each rule's (and shard's) scan of stale counts */
	char cursor[RL_MAX_RULES][RL_STORE_SHARDS_MAX][24];
};

int rl_agent_fails_init(struct rl_agent *a)
{
	struct fails_state *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	for (unsigned i = 0; i < a->cfg->nrules; i++)
		st->any |= a->cfg->rules[i].maxretry != 0;
	st->cap = rl_table_capacity(a->table);
	st->items = st->any ? calloc(st->cap, sizeof(*st->items)) : NULL;
	if (st->any && !st->items) {
		free(st);
		return -ENOMEM;
	}
	a->fails = st;
	if (a->store)
		rl_store_script(a->store, RL_SCRIPT_FAILS, fails_lua);
	return 0;
}

void rl_agent_fails_free(struct rl_agent *a)
{
	struct fails_state *st = a->fails;

	if (st)
		free(st->items);
	free(st);
	a->fails = NULL;
}

static unsigned ban_prefix(const struct rl_config *cfg, uint8_t family)
{
	return family == RL_AF_INET ? cfg->ipv4_prefix : cfg->ipv6_prefix;
}

static int collect(const struct rl_fail_item *it, void *arg)
{
	struct rl_agent *a = arg;
	struct fails_state *st = a->fails;
	int ci = it->rule < RL_MAX_RULES ? a->rule_of[it->rule] : -1;
	struct fail_item *x;

	/* The shim counts by the family byte and the masked address. */
	if (ci < 0 || !a->cfg->rules[ci].maxretry || st->n == st->cap ||
	    !((it->key_len == 5 && it->key[0] == RL_AF_INET) ||
	      (it->key_len == 17 && it->key[0] == RL_AF_INET6)))
		return 0;
	x = &st->items[st->n++];
	x->rule = (unsigned)ci;
	memset(&x->cidr, 0, sizeof(x->cidr));
	x->cidr.addr.family = it->key[0];
	memcpy(x->cidr.addr.bytes, it->key + 1, it->key_len - 1u);
	x->cidr.prefix = (uint8_t)ban_prefix(a->cfg, it->key[0]);
	x->klen = it->key_len;
	memcpy(x->key, it->key, it->key_len);
	rl_addr_format(&x->cidr.addr, x->text, sizeof(x->text));
	x->tlen = (uint8_t)strlen(x->text);
	x->shard = (uint16_t)rl_store_key_shard(a->cfg, x->text, x->tlen);
	snprintf(x->count, sizeof(x->count), "%u", it->fails);
	return 0;
}

static int by_rule(const void *p, const void *q)
{
	const struct fail_item *x = p, *y = q;

	if (x->rule != y->rule)
		return x->rule < y->rule ? -1 : 1;
	return x->shard < y->shard ? -1 : x->shard > y->shard;
}

/* Queue the script for items [first, first + n) of rule `ci`. */
static int queue_call(struct rl_agent *a, unsigned ci, uint32_t first,
		      uint32_t n)
{
	struct fails_state *st = a->fails;
	const struct rl_rule_cfg *r = &a->cfg->rules[ci];
	const char *argv[4 + 2 * FAIL_BATCH];
	size_t lens[4 + 2 * FAIL_BATCH];
	char hkey[160], max[16], find[32];
	unsigned sh = st->items[first].shard;
	char *cursor = st->cursor[ci][sh];
	int c = 0;

	if (st->ncalls == FAIL_CALLS)
		return -ENOSPC;
	snprintf(max, sizeof(max), "%u", r->maxretry);
	snprintf(find, sizeof(find), "%llu",
		 (unsigned long long)(r->findtime_ns / RL_NS_PER_MS));
	/* the shard's hash tag, as its global states' (sync.c) */
	lens[c] = rl_store_fails_key(a->cfg, r, sh, hkey, sizeof(hkey));
	argv[c++] = hkey;
	argv[c] = max;
	lens[c++] = strlen(max);
	argv[c] = find;
	lens[c++] = strlen(find);
	if (!cursor[0])
		strcpy(cursor, "0");
	argv[c] = cursor;
	lens[c++] = strlen(cursor);
	for (uint32_t i = first; i < first + n; i++) {
		argv[c] = st->items[i].text;
		lens[c++] = st->items[i].tlen;
		argv[c] = st->items[i].count;
		lens[c++] = strlen(st->items[i].count);
	}
	if (rl_store_queue_script(a->store, RL_SCRIPT_FAILS, 1, c, argv, lens))
		return -EIO;
	st->calls[st->ncalls++] = (struct fail_call){ ci, first, n };
	return 0;
}

/* The store's count of item `x` reached maxretry, and this agent is the
 * one that saw it: ban the address, once. */
static void reached(struct rl_agent *a, const struct fail_item *x,
		    long long count, uint64_t now_ns)
{
	const struct rl_rule_cfg *r = &a->cfg->rules[x->rule];
	struct rl_ban_rule br = { r->bantime_ns / RL_NS_PER_MS,
				  r->bantime_max_ns / RL_NS_PER_MS,
				  r->bantime_increment, a->ids[x->rule] };
	uint64_t wall = rl_time_wall_ms(), until = 0;
	uint32_t n = 0;
	char who[RL_CIDR_STRLEN], dur[32];

	rl_cidr_format(&x->cidr, who, sizeof(who));
	if (a->cfg->mode == RL_MODE_DRY_RUN) {
		rl_log(RL_LOG_WARN, "msg=\"dry-run: would ban\" client=%s "
		       "rule=%s maxretry=%u refusals=%lld scope=hosts", who,
		       r->name, r->maxretry, count);
		return;
	}
	/* What this host counted of it is in the ban now. */
	rl_table_fail_forget(a->table, a->ids[x->rule], x->key, x->klen, now_ns);
	if (rl_ban_offence(a->table, &x->cidr, &br, wall, &until, &n) != 0)
		return; /* banned already (a host reached it alone), or no room */
	rl_table_count_ban(a->table, a->ids[x->rule]);
	rl_time_format_duration(dur, sizeof(dur), (until - wall) * RL_NS_PER_MS);
	rl_log(RL_LOG_WARN, "msg=\"banned\" client=%s rule=%s maxretry=%u "
	       "for=%s offence=%u refusals=%lld scope=hosts", who, r->name,
	       r->maxretry, dur, n, count);
}

struct fails_round {
	struct rl_agent *a;
	uint64_t now_ns;
};

static int on_reply(redisReply *rep, unsigned i, void *arg)
{
	struct fails_round *fr = arg;
	struct rl_agent *a = fr->a;
	struct fails_state *st = a->fails;
	const struct fail_call *call;

	if (i >= st->ncalls)
		return 0;
	call = &st->calls[i];
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != call->n + 1) {
		if (rep->type == REDIS_REPLY_ERROR) {
			char q[256];

			rl_log(RL_LOG_WARN, "msg=\"store error\" err=\"%s\"",
			       rl_log_quote(rep->str, q, sizeof(q)));
		}
		return 0;
	}
	for (uint32_t k = 0; k < call->n; k++) {
		const struct fail_item *x = &st->items[call->first + k];
		redisReply *e = rep->element[k];

		if (e->type == REDIS_REPLY_INTEGER &&
		    e->integer >= (long long)a->cfg->rules[x->rule].maxretry)
			reached(a, x, e->integer, fr->now_ns);
	}
	if (rep->element[call->n]->type == REDIS_REPLY_STRING)
		snprintf(st->cursor[call->rule][st->items[call->first].shard],
			 sizeof(st->cursor[0][0]), "%s", rep->element[call->n]->str);
	return 0;
}

/* Take what the shims owe the store's counts: into the round's items, or
 * nowhere (`keep` 0: the store is down, the hosts count alone). */
static void take_owed(struct rl_agent *a, int keep)
{
	struct fails_state *st = a->fails;

	st->n = 0;
	rl_table_fails_collect(a->table, collect, a);
	if (!keep)
		st->n = 0;
}

void rl_agent_fails_sync(struct rl_agent *a, int store_up, uint64_t now_ns)
{
	struct fails_state *st = a->fails;
	struct fails_round fr = { a, now_ns };

	if (!st || !st->any || !a->cfg->redis)
		return;
	take_owed(a, store_up);
	if (!st->n)
		return;
	qsort(st->items, st->n, sizeof(st->items[0]), by_rule);
	st->ncalls = 0;
	for (uint32_t i = 0; i < st->n;) {
		unsigned ci = st->items[i].rule, sh = st->items[i].shard;
		uint32_t end = i;

		/* a call never crosses a shard: one hash tag */
		while (end < st->n && st->items[end].rule == ci &&
		       st->items[end].shard == sh)
			end++;
		for (uint32_t b = i; b < end; b += FAIL_BATCH)
			queue_call(a, ci, b,
				   end - b < FAIL_BATCH ? end - b : FAIL_BATCH);
		i = end;
	}
	if (st->ncalls)
		rl_store_flush(a->store, on_reply, &fr, now_ns);
}

void rl_agent_fails_banned(struct rl_agent *a, const struct rl_cidr *c,
			   uint64_t now_ns)
{
	struct fails_state *st = a->fails;
	uint8_t key[17];
	size_t len;

	if (!st || !st->any || c->prefix != ban_prefix(a->cfg, c->addr.family))
		return;
	len = rl_addr_key(&c->addr, c->prefix, key);
	for (unsigned i = 0; i < a->cfg->nrules; i++)
		if (a->cfg->rules[i].maxretry)
			rl_table_fail_forget(a->table, a->ids[i], key, len,
					     now_ns);
}
