/* SPDX-License-Identifier: MIT */
/*
 * scripts.c - the Lua the agent runs in the store (sync.c's rounds), one
 * script per job, each with what its keys and arguments are. They share
 * RL_LUA_TAT (agent.h) for a token bucket's state with strict.c's.
 */
#include "agent.h"

/* Lua: the keys `ks` changed at `now` (us), for the pulls: into the rule's
 * sorted set of recent changes `z`, each its own score (a pull's cursor
 * then never stops among equal ones), those older than the TTL (ms)
 * dropped. The scores are now + 1, now + 2, ..., but never past the
 * store's time when they are written, which the function returns: a
 * script's scores then lie between its start and that time, apart from
 * every other script's (a script as fast as a key a microsecond shares
 * the last ones, a batch at most), so that a host can tell its own
 * changes among the keys its pull finds (sync_jobs.c). */
#define LUA_CHANGED \
	"local function changed(z, ks, now, ttl)\n" \
	"  local t = redis.call('TIME')\n" \
	"  local last = tonumber(t[1]) * 1000000 + tonumber(t[2])\n" \
	"  if #ks == 0 then return last end\n" \
	"  local ch = {}\n" \
	"  for i = 1, #ks do\n" \
	"    local sc = now + i\n" \
	"    if sc > last then sc = last end\n" \
	"    ch[2 * i - 1] = sc\n" \
	"    ch[2 * i] = ks[i]\n" \
	"  end\n" \
	"  redis.call('ZADD', z, unpack(ch))\n" \
	"  redis.call('ZREMRANGEBYSCORE', z, '-inf', now - 1000 * ttl)\n" \
	"  redis.call('PEXPIRE', z, ttl)\n" \
	"  return last\n" \
	"end\n"

/* KEYS[1]: the rule's hash of global states (RL_LUA_TAT), KEYS[2] its
 * keys changed recently (for the pulls), KEYS[3] its grants. ARGV[1]: idle
 * TTL (ms), ARGV[2]: the time (us) since the sending host's last round,
 * ARGV[3]: that host, ARGV[4]: the hosts alive, ARGV[5]: how long (us) a
 * grant stands and a key counts as young, ARGV[6]: the keys' numbers,
 * RL_SYNC_NUMS bytes each (RL_SYNC_PACK: admitted, less what was given back
 * since the host's last round, may be below 0; what the key owes on that
 * host, us, from the collect: of its state there, what a grant or a lend
 * does not hold back; its tariff), ARGV[7]: how many tariffs, then a pair
 * for each (interval, us, as text; burst), then the host's collect on the
 * store's clock (us; 0: not known, now), then the keys. The numbers come packed and the tariffs once a call
 * because the store's cost of a key is mostly the script's own: every
 * argument is a string to make and a number to parse (docs/BENCHMARKS.md,
 * "Redis cost").
 *
 * The requests a host admitted came at times within its last round, which
 * the store does not know: counting them from now (all at the last moment)
 * makes a key busy at its rate owe a whole round at each round, and a host
 * alone under load admitted half the rate where a round's refill is more
 * than the burst. So they are counted from the start of the round at the
 * earliest (all at once, the least they can owe), and at least at what the
 * host itself says the key owes, which its own GCRA knows exactly: alone,
 * the store's state is the host's. A state is written only when it
 * changes, and only a key written and used goes into KEYS[2]: a pull of
 * one whose state stayed as it was would mirror nothing new.
 *
 * Grants: of the L requests left in a key's bucket, each host's sync takes
 * floor(F / 2N) of what the other hosts' grants (made at their own last
 * syncs or lends, not yet spent or pushed) leave, F = L - their sum, and
 * records it; alone (N = 1), all of F. Only a host that used the key in
 * the round gets one (a key only in debt there gets none): grants are
 * what a host may spend without asking, and the half of F they never
 * take is there for the lends (strict.c's lend_lua) of whichever host a
 * key's next request meets, so that no host holds back what a client
 * coming to another needs. So the grants outstanding never add up to
 * more than what is left, however the hosts' rounds fall. While a key is young, hosts with
 * no grant yet may hold the share of a fresh key they started from
 * (decide.c): those count as spent too. A host's grant is renewed at each
 * of its syncs (a key in use every round, one only in debt in its turn:
 * repush.c) and lapses after `span` without one (the host is gone, or the
 * key quiet there and its turn not come yet).
 *
 * A grant's entry ("host grant ts", after the key's "born") is stamped
 * `span` ahead of the sync that writes it, and written again only when the
 * grant changes or its stamp has passed: a key whose grant stays the same
 * round after round (a key under its limit) is written about one round in
 * four, where it was every round; that rewrite, and the parse of the
 * entries with string.gmatch (about 4 us a key alone), were most of a
 * key's cost. Its grant stands
 * `span` after its host's last sync of it at least, 2 x `span` at most;
 * the format is the one every reader (the lend, older agents) parses.
 *
 * Returns each key's debt (us, an integer) and grant, in order, then the
 * store's times (us) between which its changes are scored in KEYS[2]
 * (LUA_CHANGED). */
const char rl_lua_sync[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	"local nowtext = t[1] .. string.format('%06d', tonumber(t[2]))\n"
	RL_LUA_TAT
	LUA_CHANGED
	"local me, nh, span = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])\n"
	"local lapsed = now - span\n"
	"local ahead = string.format('%.0f', now + span)\n"
	"local lapt = string.format('%.0f', lapsed)\n"
	"local nums, nt = ARGV[6], tonumber(ARGV[7])\n"
	"local eis, ets, cets, bs = {}, {}, {}, {}\n"
	"for k = 1, nt do\n"
	"  ets[k] = ARGV[6 + 2 * k]\n"
	"  cets[k] = ':' .. ets[k]\n"
	"  eis[k] = tonumber(ets[k])\n"
	"  bs[k] = tonumber(ARGV[7 + 2 * k])\n"
	"end\n"
	"local k0 = 8 + 2 * nt\n"
	"local base = tonumber(ARGV[k0]) or 0\n"
	"if base <= 0 or base > now or now - base > 1000000 then base = now end\n"
	"local floor = base - tonumber(ARGV[2])\n"
	"local n = #ARGV - k0\n"
	"local vals = redis.call('HMGET', KEYS[1], unpack(ARGV, k0 + 1))\n"
	"local gvals = redis.call('HMGET', KEYS[3], unpack(ARGV, k0 + 1))\n"
	"local sets, gsets, out, used = {}, {}, {}, {}\n"
	"for i = 1, n do\n"
	"  local f = ARGV[k0 + i]\n"
	"  local a, ow, ti = struct.unpack('" RL_SYNC_PACK "', nums,\n"
	"                                  " RL_SYNC_NUMS_TEXT " * (i - 1) + 1)\n"
	"  local e, ei, cet, burst = eis[ti], ets[ti], cets[ti], bs[ti]\n"
	"  local v, tat = vals[i], 0\n"
	"  if v and string.sub(v, -#cet) == cet then\n"
	"    tat = tonumber(string.sub(v, 1, -#cet - 1)) or 0\n"
	"  elseif v then\n"
	"    tat = tat_of(v, e, now)\n"
	"  end\n"
	"  if tat < floor then tat = floor end\n"
	"  if a ~= 0 then tat = tat + a * e end\n"
	"  local own = base + ow\n"
	"  if tat < own then tat = own end\n"
	"  if tat < now then tat = now end\n"
	"  if tat > now or a < 0 then\n"
	"    local w = tat_text(tat, ei)\n"
	"    if w ~= v then\n"
	"      sets[#sets + 1] = f\n"
	"      sets[#sets + 1] = w\n"
	"      if a ~= 0 then used[#used + 1] = f end\n"
	"    end\n"
	"  end\n"
	"  local left = math.floor((now + burst * e - tat) / e)\n"
	"  if left < 0 then left = 0 end\n"
	"  local young, btext, others, reg, mg, mts = true, nowtext, 0, 0, nil, nil\n"
	"  local gv, keep, nk = gvals[i], nil, 0\n"
	"  if gv then\n"
	"    local p = string.find(gv, ' ', 1, true)\n"
	"    local b = p and string.sub(gv, 1, p - 1)\n"
	"    if b and #b == #lapt then young, btext = b > lapt, b\n"
	"    elseif tonumber(b) then young, btext = tonumber(b) > lapsed, b end\n"
	"    while p do\n"
	"      local h, g, ts, q = string.match(gv, '^ (%S+) (%S+) (%S+)()', p)\n"
	"      local gn = tonumber(g)\n"
	"      if not gn or not ts then break end\n"
	"      if h == me then\n"
	"        mg, mts = gn, ts\n"
	"      elseif (#ts == #lapt and ts >= lapt) or\n"
	"             (#ts ~= #lapt and (tonumber(ts) or -1) >= lapsed) then\n"
	"        others = others + gn\n"
	"        reg = reg + 1\n"
	"        if not keep then keep = {} end\n"
	"        keep[nk + 1], keep[nk + 2], keep[nk + 3] = h, g, ts\n"
	"        nk = nk + 3\n"
	"      end\n"
	"      p = q\n"
	"    end\n"
	"  end\n"
	"  if young and nh - 1 > reg then\n"
	"    others = others + (nh - 1 - reg) * math.ceil(burst / nh)\n"
	"  end\n"
	"  local free = left - others\n"
	"  if free < 0 then free = 0 end\n"
	"  local mine = free\n"
	"  if nh > 1 then\n"
	"    mine = 0\n"
	"    if a > 0 then mine = math.floor(free / (2 * nh)) end\n"
	"  end\n"
	"  if mine ~= mg or (#mts == #nowtext and mts < nowtext) or\n"
	"     (#mts ~= #nowtext and (tonumber(mts) or -1) < now) then\n"
	"    gsets[#gsets + 1] = f\n"
	"    if keep then\n"
	"      keep[nk + 1], keep[nk + 2], keep[nk + 3] = me, mine, ahead\n"
	"      gsets[#gsets + 1] = btext .. ' ' .. table.concat(keep, ' ')\n"
	"    else\n"
	"      gsets[#gsets + 1] = btext .. ' ' .. me .. ' ' .. mine .. ' ' .. ahead\n"
	"    end\n"
	"  end\n"
	"  out[2 * i - 1] = math.floor(tat - now + 0.5)\n"
	"  out[2 * i] = mine\n"
	"end\n"
	"if #sets > 0 then redis.call('HSET', KEYS[1], unpack(sets)) end\n"
	"redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))\n"
	"if #gsets > 0 then redis.call('HSET', KEYS[3], unpack(gsets)) end\n"
	"redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[1]))\n"
	"local last = changed(KEYS[2], used, now, tonumber(ARGV[1]))\n"
	"out[2 * n + 1] = nowtext\n"
	"out[2 * n + 2] = string.format('%.0f', last)\n"
	"return out\n";

/* KEYS[1]: a rule's hash of states, KEYS[2] its keys changed recently.
 * ARGV: a cursor (store us), at most how many keys. Returns the cursor to
 * go on from, the store's time, then key, state pairs of the keys changed
 * since the cursor (the cursor's own included: it may be read twice). The
 * keys without their scores: only the last one's is needed, and only when
 * the chunk is full. */
const char rl_lua_pull[] =
	"local t = redis.call('TIME')\n"
	"local now = t[1] .. string.format('%06d', tonumber(t[2]))\n"
	"local max = tonumber(ARGV[2])\n"
	"local ks = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[1], '+inf',\n"
	"                      'LIMIT', 0, max)\n"
	"local out = {now, now}\n"
	"if #ks == max then out[1] = redis.call('ZSCORE', KEYS[2], ks[#ks]) end\n"
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
 * of the window after). ARGV[1]: TTL (ms). Then quadruples: key, admitted
 * (less given back: may be below 0; the count never goes below 0),
 * the window the agent is in, its until. A stored window one before the
 * agent's becomes the previous one; the one after (a host whose clock is
 * ahead) is counted in as current; any other (older, or counted under
 * another period before a reload) is over. Returns idx, cur, prev for each
 * key, in order. */
const char rl_lua_window[] =
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
	"  if a ~= 0 then\n"
	"    cur = cur + a\n"
	"    if cur < 0 then cur = 0 end\n"
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
const char rl_lua_window_clean[] =
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
const char rl_lua_hosts[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local win = tonumber(ARGV[2])\n"
	"redis.call('ZADD', KEYS[1], now, ARGV[1])\n"
	"redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)\n"
	"redis.call('PEXPIRE', KEYS[1], win * 10)\n"
	"return redis.call('ZCARD', KEYS[1])\n";

/* KEYS[1]: a rule's hash; ARGV[1]: an HSCAN cursor. Drops the keys whose
 * state is repaid; returns the next cursor. */
const char rl_lua_clean[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	"local r = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', 500)\n"
	"local kv = r[2]\n"
	"for i = 1, #kv, 2 do\n"
	"  local tat = tonumber(string.match(kv[i + 1], '^%d+'))\n"
	"  if not tat or tat < now then redis.call('HDEL', KEYS[1], kv[i]) end\n"
	"end\n"
	"return r[1]\n";

/* KEYS[1]: a rule's hash, KEYS[2] its keys changed recently. ARGV: idle
 * TTL (ms), then triples: key, what it owes on the host that sends it
 * (us), its interval (us). Each key's TAT becomes at least that: after the
 * store restarted empty, the hosts' states bring back the most any of
 * them knew; a key raised so is a change for the other hosts' pulls. */
const char rl_lua_floor[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	RL_LUA_TAT
	LUA_CHANGED
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
	"if #sets > 0 then\n"
	"  redis.call('HSET', KEYS[1], unpack(sets))\n"
	"  local raised = {}\n"
	"  for i = 1, #sets, 2 do raised[#raised + 1] = sets[i] end\n"
	"  changed(KEYS[2], raised, now, tonumber(ARGV[1]))\n"
	"end\n"
	"redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))\n"
	"return n\n";
