/* SPDX-License-Identifier: MIT */
/*
 * reset.c - how the store names a rule's keys, and a key's reset there:
 * shared by rlshimd (sync.c's rounds) and rlshimctl reset, which both link
 * it, so that the two name the same things the same way.
 *
 * A reset (rlshimctl reset RULE KEY) deletes the key's fields from the
 * rule's hashes (its token bucket's state and grants, its window counts)
 * and records "RULE KEY" in the sorted set <prefix>resets, scored by the
 * store's clock in microseconds, entries older than RL_RESETS_KEEP_MS
 * dropped. Each agent reads the entries since its last read once per round
 * (sync_jobs.c's queue_resets), gives the key a full bucket in its segment, and
 * then deletes the key's fields again: what its own round pushed before it
 * had heard of the reset (the key's debt there) is gone with them. So
 * within about two rounds every host and the store have forgotten the
 * key's use before the reset.
 */
#include "agent.h"

#include <stdio.h>
#include <string.h>

#include "addr.h"
#include "cluster.h"

/* KEYS[1]: <prefix>resets. ARGV[1]: "RULE KEY", ARGV[2]: how long (ms)
 * an entry is kept. Returns the store's time (us) it was recorded at. */
const char rl_lua_reset_record[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	"local keep = tonumber(ARGV[2])\n"
	"redis.call('ZADD', KEYS[1], now, ARGV[1])\n"
	"redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 1000 * keep)\n"
	"redis.call('PEXPIRE', KEYS[1], keep)\n"
	"return string.format('%.0f', now)\n";

unsigned rl_store_shards(const struct rl_config *c)
{
	return strncmp(c->redis_url, "redis-cluster://", 16) == 0
		       ? RL_STORE_CLUSTER_SHARDS : 1;
}

unsigned rl_store_key_shard(const struct rl_config *c, const char *text,
			    size_t len)
{
	return rl_cluster_key_shard(text, len, rl_store_shards(c));
}

/* "{NAME}", or in a cluster "{NAME:S}" or "{NAME:S.N}" (the tag of the
 * shard's share of the slots: rl_cluster_shard_tag) */
static size_t tag(const struct rl_config *c, const struct rl_rule_cfg *r,
		  unsigned shard, char *out, size_t len)
{
	char t[RL_RULE_NAME_MAX + 24];

	if (rl_store_shards(c) == 1)
		return (size_t)snprintf(out, len, "{%s}", r->name);
	if (rl_cluster_shard_tag(r->name, shard, rl_store_shards(c), t,
				 sizeof(t)) < 0)
		t[0] = '\0';
	return (size_t)snprintf(out, len, "{%s}", t);
}

size_t rl_store_rule_key(const struct rl_config *c, const struct rl_rule_cfg *r,
			 unsigned shard, const char *suffix, char *out,
			 size_t len)
{
	char t[RL_RULE_NAME_MAX + 32];

	tag(c, r, shard, t, sizeof(t));
	return (size_t)snprintf(out, len, "%s%s%s", c->redis_prefix, t, suffix);
}

size_t rl_store_fails_key(const struct rl_config *c, const struct rl_rule_cfg *r,
			  unsigned shard, char *out, size_t len)
{
	char t[RL_RULE_NAME_MAX + 32];

	tag(c, r, shard, t, sizeof(t));
	return (size_t)snprintf(out, len, "%sfails:%s", c->redis_prefix, t);
}

size_t rl_store_resets_key(const struct rl_config *c, char *out, size_t len)
{
	return (size_t)snprintf(out, len, "%sresets", c->redis_prefix);
}

size_t rl_store_epoch_key(const struct rl_config *c, const char *tag, char *out,
			  size_t len)
{
	if (!tag[0])
		return (size_t)snprintf(out, len, "%sepoch", c->redis_prefix);
	return (size_t)snprintf(out, len, "%sepoch:{%s}", c->redis_prefix, tag);
}

int rl_store_queue_forget(struct rl_store *s, const struct rl_config *c,
			  const struct rl_rule_cfg *r, const char *text,
			  size_t tlen)
{
	static const char *const suffix[] = { "", ":grants", ":win" };

	for (unsigned i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		char key[RL_SHM_NAME_MAX + RL_RULE_NAME_MAX + 16];
		const char *argv[3] = { "HDEL", key, text };
		size_t lens[3] = { 4, 0, tlen };

		lens[1] = rl_store_rule_key(c, r, rl_store_key_shard(c, text, tlen),
					    suffix[i], key, sizeof(key));
		if (rl_store_queue(s, 3, argv, lens))
			return -1;
	}
	return 3;
}

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

