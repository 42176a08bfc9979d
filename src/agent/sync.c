/* SPDX-License-Identifier: MIT */
/*
 * sync.c - one global limit across hosts, with a hot path that never waits.
 *
 * Every host decides from its own segment. Each round (sync_interval) the
 * agent takes from the segment what every key admitted since the last round,
 * and every key still in debt here, and pushes it to the store, where a
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
 * one cluster slot), one for the hosts alive, one for the epoch, two per
 * rule with plans (the plans of its keys in the round, and the next chunk
 * of its plans hash, mirrored into the segment so that a key's plan holds
 * from its first request), and the ban set (ban_sync.c). They grow with
 * rules, keys, planned keys and hosts, never with requests.
 *
 * When the store is down, hosts cannot see each other: each charges its own
 * admissions as if every host alive at the last sync admitted as much, which
 * keeps it to its share of the rate (on_store_down = open). Rules set to
 * `closed` are refused by the shim instead, from the flag set here.
 */
#include "agent.h"

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

#define BATCH 400             /* keys per script call */
#define CLEAN_EVERY 200       /* rounds between sweeps of stale store keys */
#define PLANS_SCAN "1000"     /* planned keys mirrored per rule per round */

/* KEYS[1]: the rule's hash of global states (RL_LUA_TAT), KEYS[2] its
 * keys changed recently (for the pulls), KEYS[3] its grants. ARGV[1]: idle
 * TTL (ms), ARGV[2]: the time (us) since the sending host's last round,
 * ARGV[3]: that host, ARGV[4]: the hosts alive, ARGV[5]: how long (us) a
 * grant stands and a key counts as young. Then quintuples: key, admitted,
 * interval (us), what the key owes on that host (us; 0 if its state there
 * holds a grant back), burst.
 *
 * The requests a host admitted came at times within its last round, which
 * the store does not know: counting them from now (all at the last moment)
 * makes a key busy at its rate owe a whole round at each round, and a host
 * alone under load admitted half the rate where a round's refill is more
 * than the burst. So they are counted from the start of the round at the
 * earliest (all at once, the least they can owe), and at least at what the
 * host itself says the key owes, which its own GCRA knows exactly: alone,
 * the store's state is the host's.
 *
 * Grants: of the L requests left in a key's bucket, each host's sync takes
 * ceil(F / N) of what the other hosts' grants (made at their own last
 * syncs, not yet spent or pushed) leave, F = L - their sum, and records it.
 * So the grants outstanding never add up to more than what is left, plus
 * N - 1, however the hosts' rounds fall. While a key is young, hosts with
 * no grant yet may hold the share of a fresh key they started from
 * (decide.c): those count as spent too. A host's grant is renewed at each
 * of its syncs (a key in debt is synced every round) and lapses after a
 * few rounds without one (the host is gone).
 *
 * Returns each key's debt (us) and grant, in order. */
static const char sync_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	RL_LUA_TAT
	"local floor = now - tonumber(ARGV[2])\n"
	"local me, nh, span = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])\n"
	"local n = (#ARGV - 5) / 5\n"
	"local fields = {}\n"
	"for i = 1, n do fields[i] = ARGV[5 * i + 1] end\n"
	"local vals = redis.call('HMGET', KEYS[1], unpack(fields))\n"
	"local gvals = redis.call('HMGET', KEYS[3], unpack(fields))\n"
	"local sets, gsets, out = {}, {}, {}\n"
	"for i = 1, n do\n"
	"  local ei = ARGV[5 * i + 3]\n"
	"  local e = tonumber(ei)\n"
	"  local tat = tat_of(vals[i], e, now)\n"
	"  if tat < floor then tat = floor end\n"
	"  local a = tonumber(ARGV[5 * i + 2])\n"
	"  if a > 0 then tat = tat + a * e end\n"
	"  local own = now + tonumber(ARGV[5 * i + 4])\n"
	"  if tat < own then tat = own end\n"
	"  if tat < now then tat = now end\n"
	"  local v = tat_text(tat, ei)\n"
	"  if tat > now and v ~= vals[i] then\n"
	"    sets[#sets + 1] = fields[i]\n"
	"    sets[#sets + 1] = v\n"
	"  end\n"
	"  local burst = tonumber(ARGV[5 * i + 5])\n"
	"  local left = math.floor((now + burst * e - tat) / e)\n"
	"  if left < 0 then left = 0 end\n"
	"  local born, keep, others, reg = now, {}, 0, 0\n"
	"  if gvals[i] then\n"
	"    local w = string.gmatch(gvals[i], '%S+')\n"
	"    born = tonumber(w()) or now\n"
	"    while true do\n"
	"      local h, g, ts = w(), tonumber(w() or ''), tonumber(w() or '')\n"
	"      if not h or not g or not ts then break end\n"
	"      if h ~= me and ts >= now - span then\n"
	"        others = others + g\n"
	"        reg = reg + 1\n"
	"        keep[#keep + 1] = h .. ' ' .. g .. ' ' .. string.format('%.0f', ts)\n"
	"      end\n"
	"    end\n"
	"  end\n"
	"  if now - born < span and nh - 1 > reg then\n"
	"    others = others + (nh - 1 - reg) * math.ceil(burst / nh)\n"
	"  end\n"
	"  local free = left - others\n"
	"  if free < 0 then free = 0 end\n"
	"  local mine = math.ceil(free / nh)\n"
	"  keep[#keep + 1] = me .. ' ' .. mine .. ' ' .. string.format('%.0f', now)\n"
	"  gsets[#gsets + 1] = fields[i]\n"
	"  gsets[#gsets + 1] = string.format('%.0f', born) .. ' ' .. table.concat(keep, ' ')\n"
	"  out[2 * i - 1] = string.format('%.0f', tat - now)\n"
	"  out[2 * i] = mine\n"
	"end\n"
	"if #sets > 0 then redis.call('HSET', KEYS[1], unpack(sets)) end\n"
	"redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))\n"
	"redis.call('HSET', KEYS[3], unpack(gsets))\n"
	"redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[1]))\n"
	"local ch = {}\n"
	"for i = 1, n do\n"
	"  if tonumber(ARGV[5 * i + 2]) > 0 then\n"
	"    ch[#ch + 1] = now + #ch\n"
	"    ch[#ch + 1] = fields[i]\n"
	"  end\n"
	"end\n"
	"if #ch > 0 then\n"
	"  redis.call('ZADD', KEYS[2], unpack(ch))\n"
	"  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf',\n"
	"             now - 1000 * tonumber(ARGV[1]))\n"
	"  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[1]))\n"
	"end\n"
	"return out\n";

/* KEYS[1]: a rule's hash of states, KEYS[2] its keys changed recently.
 * ARGV: a cursor (store us), at most how many keys. Returns the cursor to
 * go on from, the store's time, then key, state pairs of the keys changed
 * since the cursor (the cursor's own included: it may be read twice). */
static const char pull_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	"local max = tonumber(ARGV[2])\n"
	"local r = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[1], '+inf',\n"
	"                     'WITHSCORES', 'LIMIT', 0, max)\n"
	"local out = {string.format('%.0f', now), string.format('%.0f', now)}\n"
	"if #r == 2 * max then out[1] = r[#r] end\n"
	"local ks = {}\n"
	"for i = 1, #r, 2 do ks[#ks + 1] = r[i] end\n"
	"if #ks > 0 then\n"
	"  local vals = redis.call('HMGET', KEYS[1], unpack(ks))\n"
	"  for i = 1, #ks do\n"
	"    if vals[i] then\n"
	"      out[#out + 1] = ks[i]\n"
	"      out[#out + 1] = vals[i]\n"
	"    end\n"
	"  end\n"
	"end\n"
	"return out\n";

/* KEYS[1]: the rule's hash of window counts, each key's
 * "idx:cur:prev:until" (its window's index on Unix time, the count in it
 * and in the one before, and the Unix ms when they stop mattering: the end
 * of the window after). ARGV[1]: TTL (ms). Then quadruples: key, admitted,
 * the window the agent is in, its until. A stored window one before the
 * agent's becomes the previous one; the one after (a host whose clock is
 * ahead) is counted in as current; any other (older, or counted under
 * another period before a reload) is over. Returns idx, cur, prev for each
 * key, in order. */
static const char window_lua[] =
	"local n = (#ARGV - 1) / 4\n"
	"local fields = {}\n"
	"for i = 1, n do fields[i] = ARGV[4 * i - 2] end\n"
	"local got = redis.call('HMGET', KEYS[1], unpack(fields))\n"
	"local sets, out = {}, {}\n"
	"for i = 1, n do\n"
	"  local w = tonumber(ARGV[4 * i])\n"
	"  local idx, cur, prev = w, 0, 0\n"
	"  local si, sc, sp\n"
	"  if got[i] then\n"
	"    si, sc, sp = string.match(got[i], '^(%d+):(%d+):(%d+):')\n"
	"  end\n"
	"  if si then\n"
	"    si, sc, sp = tonumber(si), tonumber(sc), tonumber(sp)\n"
	"    if si == w or si == w + 1 then idx, cur, prev = si, sc, sp\n"
	"    elseif si == w - 1 then prev = sc end\n"
	"  end\n"
	"  local a = tonumber(ARGV[4 * i - 1])\n"
	"  if a > 0 then\n"
	"    cur = cur + a\n"
	"    sets[#sets + 1] = fields[i]\n"
	"    sets[#sets + 1] = string.format('%.0f:%.0f:%.0f:%s', idx, cur, prev,\n"
	"                                    ARGV[4 * i + 1])\n"
	"  end\n"
	"  out[#out + 1] = string.format('%.0f', idx)\n"
	"  out[#out + 1] = string.format('%.0f', cur)\n"
	"  out[#out + 1] = string.format('%.0f', prev)\n"
	"end\n"
	"if #sets > 0 then\n"
	"  redis.call('HSET', KEYS[1], unpack(sets))\n"
	"  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))\n"
	"end\n"
	"return out\n";

/* KEYS[1]: a rule's hash of window counts; ARGV[1]: an HSCAN cursor.
 * Drops the keys whose counts no longer matter; returns the next cursor. */
static const char window_clean_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local r = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', 500)\n"
	"local kv = r[2]\n"
	"for i = 1, #kv, 2 do\n"
	"  local u = tonumber(string.match(kv[i + 1], ':(%d+)$'))\n"
	"  if not u or u < now then redis.call('HDEL', KEYS[1], kv[i]) end\n"
	"end\n"
	"return r[1]\n";

/* KEYS[1]: the hosts' zset. ARGV: this host, the window (ms) a host
 * counts as alive. Returns how many are. */
static const char hosts_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local win = tonumber(ARGV[2])\n"
	"redis.call('ZADD', KEYS[1], now, ARGV[1])\n"
	"redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)\n"
	"redis.call('PEXPIRE', KEYS[1], win * 10)\n"
	"return redis.call('ZCARD', KEYS[1])\n";

/* KEYS[1]: a rule's hash; ARGV[1]: an HSCAN cursor. Drops the keys whose
 * state is repaid; returns the next cursor. */
static const char clean_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	"local r = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', 500)\n"
	"local kv = r[2]\n"
	"for i = 1, #kv, 2 do\n"
	"  local tat = tonumber(string.match(kv[i + 1], '^%d+'))\n"
	"  if not tat or tat < now then redis.call('HDEL', KEYS[1], kv[i]) end\n"
	"end\n"
	"return r[1]\n";

/* KEYS[1]: a rule's hash. ARGV: idle TTL (ms), then triples: key, what it
 * owes on the host that sends it (us), its interval (us). Each key's TAT
 * becomes at least that: after the store restarted empty, the hosts'
 * states bring back the most any of them knew. */
static const char floor_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	RL_LUA_TAT
	"local n = (#ARGV - 1) / 3\n"
	"local fields = {}\n"
	"for i = 1, n do fields[i] = ARGV[3 * i - 1] end\n"
	"local vals = redis.call('HMGET', KEYS[1], unpack(fields))\n"
	"local sets = {}\n"
	"for i = 1, n do\n"
	"  local ei = ARGV[3 * i + 1]\n"
	"  local want = now + tonumber(ARGV[3 * i])\n"
	"  if want > tat_of(vals[i], tonumber(ei), now) then\n"
	"    sets[#sets + 1] = fields[i]\n"
	"    sets[#sets + 1] = tat_text(want, ei)\n"
	"  end\n"
	"end\n"
	"if #sets > 0 then redis.call('HSET', KEYS[1], unpack(sets)) end\n"
	"redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))\n"
	"return n\n";

/* ---- set up -------------------------------------------------------------------- */

int rl_agent_init(struct rl_agent *a, const struct rl_config *cfg,
		  struct rl_table *table, struct rl_err *err)
{
	char host[128];

	memset(a, 0, sizeof(*a));
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
	a->store = rl_store_new(cfg->redis_url, cfg->redis_timeout_ns);
	if (!a->store) {
		rl_err_set(err, "bad redis url");
		return -EINVAL;
	}
	rl_store_script(a->store, RL_SCRIPT_SYNC, sync_lua);
	rl_store_script(a->store, RL_SCRIPT_HOSTS, hosts_lua);
	rl_store_script(a->store, RL_SCRIPT_CLEAN, clean_lua);
	rl_store_script(a->store, RL_SCRIPT_FLOOR, floor_lua);
	rl_store_script(a->store, RL_SCRIPT_PULL, pull_lua);
	rl_store_script(a->store, RL_SCRIPT_WINDOW, window_lua);
	rl_store_script(a->store, RL_SCRIPT_WINDOW_CLEAN, window_clean_lua);
	a->cap = rl_table_capacity(table);
	a->items = calloc(a->cap, sizeof(*a->items));
	if (!a->items) {
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
}

/* ---- keys as the store names them ------------------------------------------------- */

size_t rl_agent_key_text(const struct rl_rule_cfg *r, const uint8_t *key,
			 size_t len, int truncated, char *out, size_t outlen)
{
	size_t n = 0;

	if (r->key == RL_KEY_GLOBAL) {
		n = (size_t)snprintf(out, outlen, "*");
	} else if (r->key == RL_KEY_IP && (len == 5 || len == 17) &&
		   (key[0] == RL_AF_INET || key[0] == RL_AF_INET6)) {
		/* already masked to the configured prefix */
		struct rl_addr ad = { key[0], { 0 } };
		char text[RL_ADDR_STRLEN];

		memcpy(ad.bytes, key + 1, len - 1);
		rl_addr_format(&ad, text, sizeof(text));
		n = (size_t)snprintf(out, outlen, "%s", text);
	} else {
		/* a header value: as it came, and a truncated one keeps the
		 * digest the segment made of the whole, in hex */
		size_t keep = truncated ? RL_KEY_MAX - 8 : len;

		if (keep > outlen - 1)
			keep = outlen - 1;
		memcpy(out, key, keep);
		n = keep;
		if (truncated && outlen > n + 18) {
			for (unsigned i = 0; i < 8; i++)
				n += (size_t)snprintf(out + n, outlen - n, "%02x",
						      key[RL_KEY_MAX - 8 + i]);
		}
		out[n] = '\0';
	}
	return n < outlen ? n : outlen - 1;
}

/* ---- one round -------------------------------------------------------------------- */

/* What each queued reply is for. */
enum job { JOB_EPOCH, JOB_EPOCH_SET, JOB_HOSTS, JOB_SYNC, JOB_PLANS, JOB_CLEAN,
	   JOB_FLOOR, JOB_PLANS_SCAN, JOB_PULL, JOB_WINDOW };

struct reply_plan {
	enum job job;
	unsigned rule;       /* config index */
	uint32_t first, n;   /* items */
};

#define PLAN_MAX 1024

struct round {
	struct rl_agent *a;
	uint64_t now_ns;
	uint64_t since_ns;   /* since the last round's collect */
	unsigned nplan;
	struct reply_plan plan[PLAN_MAX];
	int failed;
};

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
	alg = it->plan && it->plan <= rc->nplans ? &rc->plans[it->plan - 1]
						 : &rc->algo;
	x = &a->items[a->nitems++];
	x->index = it->index;
	x->tag = it->tag;
	x->rule = (unsigned)ci;
	x->admitted = it->admitted;
	x->ei_ns = alg->interval_ns;
	x->plan = it->plan;
	x->klen = (uint8_t)rl_agent_key_text(&a->cfg->rules[ci], it->key,
					     it->key_len, it->truncated, x->key,
					     sizeof(x->key));
	snprintf(x->count, sizeof(x->count), "%u", it->admitted);
	snprintf(x->debt, sizeof(x->debt), "%.0f", (double)it->debt_ns / 1000.0);
	snprintf(x->own, sizeof(x->own), "%s", it->provisional ? "0" : x->debt);
	snprintf(x->burst, sizeof(x->burst), "%u", alg->rate.burst);
	snprintf(x->ei, sizeof(x->ei), "%.3f", (double)alg->interval_ns / 1000.0);
	snprintf(x->win, sizeof(x->win), "%llu", (unsigned long long)it->window);
	snprintf(x->until, sizeof(x->until), "%llu",
		 (unsigned long long)((it->window + 2) *
				      (alg->rate.period_ns / RL_NS_PER_MS)));

	return 0;
}

static int by_rule(const void *x, const void *y)
{
	const struct rl_agent_item *p = x, *q = y;

	return p->rule < q->rule ? -1 : p->rule > q->rule;
}

static int plan_add(struct round *r, enum job job, unsigned rule,
		    uint32_t first, uint32_t n)
{
	if (r->nplan == PLAN_MAX)
		return -ENOSPC;
	r->plan[r->nplan++] = (struct reply_plan){ job, rule, first, n };
	return 0;
}

/* One more argument of a command being built: argv[*c], lens[*c]. */
static void arg(const char **argv, size_t *lens, int *c, const char *s,
		size_t len)
{
	argv[*c] = s;
	lens[(*c)++] = len;
}

static void arg_text(const char **argv, size_t *lens, int *c, const char *s)
{
	arg(argv, lens, c, s, strlen(s));
}

/* The store key of rule `ci`'s global states: one hash tag per rule. */
static size_t rule_hash_key(const struct rl_agent *a, unsigned ci, char *out,
			    size_t len)
{
	return (size_t)snprintf(out, len, "%s{%s}", a->cfg->redis_prefix,
				a->cfg->rules[ci].name);
}

uint64_t rl_agent_ttl_ms(const struct rl_agent *a, const struct rl_rule_cfg *r)
{
	uint64_t depth = r->rate.period_ns / r->rate.count * r->rate.burst;
	uint64_t period = r->rate.period_ns;

	for (unsigned p = 0; p < r->nplans; p++) {
		const struct rl_rate *q = &r->plans[p].rate;
		uint64_t d = q->period_ns / q->count * q->burst;

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
static void rule_ttl(const struct rl_agent *a, unsigned ci, char *out, size_t len)
{
	snprintf(out, len, "%llu",
		 (unsigned long long)rl_agent_ttl_ms(a, &a->cfg->rules[ci]));
}

/* Queue the sync script for items [first, first + n) of rule `ci`. */
static int queue_sync(struct round *r, unsigned ci, uint32_t first, uint32_t n)
{
	struct rl_agent *a = r->a;
	const char *argv[8 + 5 * BATCH];
	size_t lens[8 + 5 * BATCH];
	char hkey[160], rkey[170], gkey[170], ttl[32], since[32], hosts[16];
	char span[32];
	int c = 0;

	rule_ttl(a, ci, ttl, sizeof(ttl));
	snprintf(since, sizeof(since), "%llu",
		 (unsigned long long)(r->since_ns / 1000));
	snprintf(hosts, sizeof(hosts), "%u", a->hosts_alive ? a->hosts_alive : 1);
	/* a grant stands, and a key is young, for three rounds */
	snprintf(span, sizeof(span), "%llu",
		 (unsigned long long)(3 * a->interval_ns / 1000));
	arg(argv, lens, &c, hkey, rule_hash_key(a, ci, hkey, sizeof(hkey)));
	arg(argv, lens, &c, rkey,
	    (size_t)snprintf(rkey, sizeof(rkey), "%s:recent", hkey));
	arg(argv, lens, &c, gkey,
	    (size_t)snprintf(gkey, sizeof(gkey), "%s:grants", hkey));
	arg_text(argv, lens, &c, ttl);
	arg_text(argv, lens, &c, since);
	arg_text(argv, lens, &c, a->host_tag);
	arg_text(argv, lens, &c, hosts);
	arg_text(argv, lens, &c, span);
	for (uint32_t i = first; i < first + n; i++) {
		struct rl_agent_item *x = &a->items[i];

		arg(argv, lens, &c, x->key, x->klen);
		arg_text(argv, lens, &c, x->count);
		arg_text(argv, lens, &c, x->ei);
		arg_text(argv, lens, &c, x->own);
		arg_text(argv, lens, &c, x->burst);
	}
	if (rl_store_queue_script(a->store, RL_SCRIPT_SYNC, 3, c, argv, lens))
		return -1;
	return plan_add(r, JOB_SYNC, ci, first, n);
}

/* The store key of rule `ci`'s window counts: a sibling of its hash of
 * states, under the same hash tag. */
static size_t rule_window_key(const struct rl_agent *a, unsigned ci, char *out,
			      size_t len)
{
	return (size_t)snprintf(out, len, "%s{%s}:win", a->cfg->redis_prefix,
				a->cfg->rules[ci].name);
}

/* Queue the window script for items [first, first + n) of rule `ci`. */
static int queue_window(struct round *r, unsigned ci, uint32_t first,
			uint32_t n)
{
	struct rl_agent *a = r->a;
	const char *argv[2 + 4 * BATCH];
	size_t lens[2 + 4 * BATCH];
	char hkey[160], ttl[32];
	int c = 0;

	rule_ttl(a, ci, ttl, sizeof(ttl));
	arg(argv, lens, &c, hkey, rule_window_key(a, ci, hkey, sizeof(hkey)));
	arg_text(argv, lens, &c, ttl);
	for (uint32_t i = first; i < first + n; i++) {
		struct rl_agent_item *x = &a->items[i];

		arg(argv, lens, &c, x->key, x->klen);
		arg_text(argv, lens, &c, x->count);
		arg_text(argv, lens, &c, x->win);
		arg_text(argv, lens, &c, x->until);
	}
	if (rl_store_queue_script(a->store, RL_SCRIPT_WINDOW, 1, c, argv, lens))
		return -1;
	return plan_add(r, JOB_WINDOW, ci, first, n);
}

/* The window script's answer for items [first, first + n): idx, cur, prev
 * for each, applied to the key's state. */
static int on_window(struct rl_agent *a, const struct reply_plan *p,
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

/* Queue the pull of rule `ci`'s keys changed since the last round. */
static int queue_pull(struct round *r, unsigned ci)
{
	struct rl_agent *a = r->a;
	char hkey[160], rkey[170], cur[32], max[16];
	const char *argv[4] = { hkey, rkey, cur, max };
	size_t lens[4];

	lens[0] = rule_hash_key(a, ci, hkey, sizeof(hkey));
	lens[1] = (size_t)snprintf(rkey, sizeof(rkey), "%s:recent", hkey);
	lens[2] = (size_t)snprintf(cur, sizeof(cur), "%llu",
				   (unsigned long long)a->pull_cursor[ci]);
	lens[3] = (size_t)snprintf(max, sizeof(max), "%u", PULL_MAX);
	if (rl_store_queue_script(a->store, RL_SCRIPT_PULL, 2, 4, argv, lens))
		return -1;
	return plan_add(r, JOB_PULL, ci, 0, 0);
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

/* The pull's answer: every key another host changed, mirrored here. */
static int on_pull(struct rl_agent *a, const struct reply_plan *p,
		   const redisReply *rep, uint64_t now_ns)
{
	const struct rl_rule_cfg *rule = &a->cfg->rules[p->rule];
	uint64_t now_us;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
	    rep->elements % 2 || rep->element[0]->type != REDIS_REPLY_STRING ||
	    rep->element[1]->type != REDIS_REPLY_STRING)
		return -1;
	a->pull_cursor[p->rule] = strtoull(rep->element[0]->str, NULL, 10);
	now_us = strtoull(rep->element[1]->str, NULL, 10);
	for (size_t i = 2; i + 1 < rep->elements; i += 2) {
		const redisReply *k = rep->element[i], *v = rep->element[i + 1];
		uint64_t ei = rule->rate.period_ns / rule->rate.count, debt;
		uint8_t buf[17];
		const void *key;
		size_t len;

		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			continue;
		key = rl_config_key_of_text(a->cfg, rule, k->str, k->len, buf,
					    &len);
		debt = store_debt(v->str, now_us, &ei);
		if (key && debt)
			rl_table_sync_mirror(a->table, a->ids[p->rule], key, len,
					     debt, ei, now_ns);
	}
	return 0;
}

/* Queue the floor of items [first, first + n) of rule `ci`: what each
 * owes here, at least, in the store. */
static int queue_floor(struct round *r, unsigned ci, uint32_t first, uint32_t n)
{
	struct rl_agent *a = r->a;
	const char *argv[2 + 3 * BATCH];
	size_t lens[2 + 3 * BATCH];
	char hkey[160], ttl[32];
	int c = 0;

	rule_ttl(a, ci, ttl, sizeof(ttl));
	arg(argv, lens, &c, hkey, rule_hash_key(a, ci, hkey, sizeof(hkey)));
	arg_text(argv, lens, &c, ttl);
	for (uint32_t i = first; i < first + n; i++) {
		struct rl_agent_item *x = &a->items[i];

		if (!strcmp(x->debt, "0"))
			continue;
		arg(argv, lens, &c, x->key, x->klen);
		arg_text(argv, lens, &c, x->debt);
		arg_text(argv, lens, &c, x->ei);
	}
	if (c == 2)
		return 0;
	if (rl_store_queue_script(a->store, RL_SCRIPT_FLOOR, 1, c, argv, lens))
		return -1;
	return plan_add(r, JOB_FLOOR, ci, first, n);
}

/* Queue an HMGET of the plans of items [first, first + n) of rule `ci`. */
static int queue_plans(struct round *r, unsigned ci, uint32_t first, uint32_t n)
{
	struct rl_agent *a = r->a;
	const char *argv[2 + BATCH];
	size_t lens[2 + BATCH];
	char hkey[160];
	int c = 0;

	arg_text(argv, lens, &c, "HMGET");
	arg(argv, lens, &c, hkey,
	    (size_t)snprintf(hkey, sizeof(hkey), "%splans:%s",
			     a->cfg->redis_prefix, a->cfg->rules[ci].name));
	for (uint32_t i = first; i < first + n; i++)
		arg(argv, lens, &c, a->items[i].key, a->items[i].klen);
	if (rl_store_queue(a->store, c, argv, lens))
		return -1;
	return plan_add(r, JOB_PLANS, ci, first, n);
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
static int queue_plans_scan(struct round *r, unsigned ci)
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
	return plan_add(r, JOB_PLANS_SCAN, ci, 0, 0);
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
static void plans_scanned(struct rl_agent *a, unsigned ci, redisReply *rep)
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

static void new_epoch(struct rl_agent *a, struct round *r)
{
	uint8_t rnd[16];
	char key[160];
	const char *argv[5];
	size_t lens[5];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		memset(rnd, (int)getpid(), sizeof(rnd));
	for (unsigned i = 0; i < 16; i++)
		snprintf(a->epoch + 2 * i, 3, "%02x", rnd[i]);
	snprintf(key, sizeof(key), "%sepoch", a->cfg->redis_prefix);
	argv[0] = "SET";
	argv[1] = key;
	argv[2] = a->epoch;
	argv[3] = "NX";
	for (unsigned i = 0; i < 4; i++)
		lens[i] = strlen(argv[i]);
	rl_store_queue(a->store, 4, argv, lens);
	plan_add(r, JOB_EPOCH_SET, 0, 0, 0);
}

static int on_reply(redisReply *rep, unsigned i, void *arg)
{
	struct round *r = arg;
	struct rl_agent *a = r->a;
	struct reply_plan *p = &r->plan[i];

	if (rep->type == REDIS_REPLY_ERROR) {
		char q[256];

		rl_log(RL_LOG_WARN, "msg=\"store error\" err=\"%s\"",
		       rl_log_quote(rep->str, q, sizeof(q)));
		r->failed = 1;
		return 0;
	}
	switch (p->job) {
	case JOB_EPOCH:
		if (rep->type == REDIS_REPLY_STRING) {
			if (a->epoch[0] && strcmp(a->epoch, rep->str) != 0)
				a->restarted = 1;
			snprintf(a->epoch, sizeof(a->epoch), "%s", rep->str);
		} else {
			/* none: the store restarted empty or was flushed */
			if (a->epoch[0])
				a->restarted = 1;
			a->epoch[0] = '\0';
		}
		break;
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
	case JOB_HOSTS:
		if (rep->type == REDIS_REPLY_INTEGER && rep->integer > 0) {
			a->hosts_alive = (uint32_t)rep->integer;
			rl_table_agent_set_hosts(a->table, a->hosts_alive);
		}
		break;
	case JOB_SYNC:
		if (rep->type != REDIS_REPLY_ARRAY ||
		    rep->elements != 2 * (size_t)p->n) {
			r->failed = 1;
			break;
		}
		for (uint32_t k = 0; k < p->n; k++) {
			struct rl_agent_item *x = &a->items[p->first + k];
			redisReply *e = rep->element[2 * k];
			redisReply *g = rep->element[2 * k + 1];
			double us = e->type == REDIS_REPLY_STRING ? strtod(e->str, NULL)
								  : 0;

			/* Owing nothing is news too: it replaces a grant
			 * (rl_table_sync_grant). */
			rl_table_sync_grant(a->table, x->index, x->tag,
					    us > 0 ? (uint64_t)(us * 1000.0) : 0,
					    g->type == REDIS_REPLY_INTEGER &&
							    g->integer > 0
						    ? (uint64_t)g->integer
						    : 0,
					    rl_time_now_ns());
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
			a->clean_cursor[p->rule] = strtoull(rep->str, NULL, 10);
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
	uint32_t others = a->hosts_alive > 1 ? a->hosts_alive - 1 : 0;

	if (!others)
		return;
	for (uint32_t i = 0; i < a->nitems; i++) {
		struct rl_agent_item *x = &a->items[i];

		if (a->cfg->rules[x->rule].on_store_down != RL_STORE_DOWN_OPEN ||
		    !x->admitted)
			continue;
		rl_table_sync_charge(a->table, x->index, x->tag,
				     (uint64_t)others * x->admitted * x->ei_ns,
				     now_ns);
	}
}

/* The store did not answer the round: the shims see it down, and this
 * host keeps to its share. */
static void store_down(struct rl_agent *a, uint64_t now_ns)
{
	a->was_down = 1;
	rl_table_agent_flags_change(a->table, RL_AGENT_STORE_DOWN, 0);
	rl_table_agent_store_down(a->table, rl_store_down_since_ms(a->store));
	charge_shares(a, now_ns);
}

/* The store answered the round. Back from an outage: what the strict
 * rules decided here meanwhile is not the store's (their keys ask it
 * again). */
static void store_synced(struct rl_agent *a, uint64_t now_ns)
{
	if (a->was_down)
		for (unsigned ci = 0; ci < a->cfg->nrules; ci++)
			if (a->cfg->rules[ci].sync == RL_SYNC_STRICT)
				rl_table_rule_forget(a->table, a->ids[ci]);
	a->was_down = 0;
	rl_table_agent_flags_change(a->table, 0, RL_AGENT_STORE_DOWN);
	rl_table_agent_synced(a->table, now_ns);
}

/* Queue the GET of the store's epoch. */
static void queue_epoch(struct round *r)
{
	struct rl_agent *a = r->a;
	const char *argv[2];
	size_t lens[2];
	char key[160];

	argv[0] = "GET";
	lens[0] = 3;
	lens[1] = (size_t)snprintf(key, sizeof(key), "%sepoch", a->cfg->redis_prefix);
	argv[1] = key;
	rl_store_queue(a->store, 2, argv, lens);
	plan_add(r, JOB_EPOCH, 0, 0, 0);
}

/* Queue this host's entry among the hosts alive, and their count. */
static void queue_hosts(struct round *r)
{
	struct rl_agent *a = r->a;
	char hkey[160], win[32];
	const char *hv[3];
	size_t hl[3];

	hl[0] = (size_t)snprintf(hkey, sizeof(hkey), "%shosts",
				 a->cfg->redis_prefix);
	hv[0] = hkey;
	hv[1] = a->host_id;
	hl[1] = strlen(a->host_id);
	/* alive: seen within 3 rounds, or a second */
	snprintf(win, sizeof(win), "%llu",
		 (unsigned long long)(3 * a->interval_ns / RL_NS_PER_MS + 1000));
	hv[2] = win;
	hl[2] = strlen(win);
	rl_store_queue_script(a->store, RL_SCRIPT_HOSTS, 1, 3, hv, hl);
	plan_add(r, JOB_HOSTS, 0, 0, 0);
}

/* Call `fn` for each batch of each rule's keys (sorted by rule). */
static void each_batch(struct round *r,
		       void (*fn)(struct round *r, unsigned ci, uint32_t first,
				  uint32_t n))
{
	struct rl_agent *a = r->a;

	for (uint32_t i = 0; i < a->nitems;) {
		unsigned ci = a->items[i].rule;
		uint32_t end = i;

		while (end < a->nitems && a->items[end].rule == ci)
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

static void floor_batch(struct round *r, unsigned ci, uint32_t first, uint32_t n)
{
	if (r->a->cfg->rules[ci].algorithm == RL_ALGO_GCRA)
		queue_floor(r, ci, first, n);
}

/* Queue the drop of the store's repaid keys (windows: those whose counts
 * no longer matter), a chunk per rule. */
static void queue_clean(struct round *r)
{
	struct rl_agent *a = r->a;

	for (unsigned ci = 0; ci < a->cfg->nrules; ci++) {
		char hkey[160], cur[32];
		const char *cv[2];
		size_t cl[2];

		int window = a->cfg->rules[ci].algorithm != RL_ALGO_GCRA;

		cl[0] = window ? rule_window_key(a, ci, hkey, sizeof(hkey))
			       : rule_hash_key(a, ci, hkey, sizeof(hkey));
		cv[0] = hkey;
		cl[1] = (size_t)snprintf(cur, sizeof(cur), "%llu",
					 (unsigned long long)a->clean_cursor[ci]);
		cv[1] = cur;
		rl_store_queue_script(a->store, window ? RL_SCRIPT_WINDOW_CLEAN
						       : RL_SCRIPT_CLEAN,
				      1, 2, cv, cl);
		plan_add(r, JOB_CLEAN, ci, 0, 0);
	}
}

int rl_agent_sync(struct rl_agent *a, uint64_t now_ns)
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
	qsort(a->items, a->nitems, sizeof(a->items[0]), by_rule);
	a->restarted = 0;

	queue_epoch(r);
	queue_hosts(r);
	each_batch(r, keys_batch);
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
	if (rl_store_flush(a->store, on_reply, r, now_ns) || r->failed) {
		if (rl_store_up(a->store))
			rl_store_fail(a->store, "bad reply", now_ns);
		store_down(a, now_ns);
		return 0;
	}
	if (!a->epoch[0] || a->restarted) {
		r->nplan = 0;
		/* A store that restarted empty (or was flushed) has lost what
		 * the keys owe: each host puts back what its keys owe here,
		 * the store keeping the most any host knew. */
		if (a->restarted) {
			each_batch(r, floor_batch);
			/* and the pulls start over, on its clock */
			memset(a->pull_cursor, 0, sizeof(a->pull_cursor));
		}
		/* none yet (a new or restarted store): plant ours */
		if (!a->epoch[0])
			new_epoch(a, r);
		rl_store_flush(a->store, on_reply, r, now_ns);
	}
	store_synced(a, now_ns);
	return 1;
}
