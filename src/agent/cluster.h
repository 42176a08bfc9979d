/* SPDX-License-Identifier: MIT */
/*
 * cluster.h - the Redis Cluster slot logic of rlshimd, pure: no connection.
 *
 * hiredis 0.14 has no cluster support, so the agent keeps its own: the
 * slot of a key (CRC16/XMODEM of the key or of its hash tag, mod 16384, as
 * the cluster specification says), the slot map read from a CLUSTER SLOTS
 * or CLUSTER SHARDS reply, the MOVED and ASK redirections, and the
 * redis-cluster:// URL of the seed nodes. Nothing here allocates; every
 * parser bounds what it copies and refuses a reply of the wrong shape
 * rather than trusting it (a reply is the server's, not ours).
 */
#ifndef RL_CLUSTER_H
#define RL_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "url.h"

#define RL_CLUSTER_SLOTS        16384
#define RL_CLUSTER_HOST_MAX     256 /* a hostname's 253 characters, the NUL */
#define RL_CLUSTER_ID_MAX       41  /* a node id's 40 hex digits, the NUL */
#define RL_CLUSTER_MASTERS_MAX  128
#define RL_CLUSTER_REPLICAS_MAX 4   /* more are left out of the map */
#define RL_CLUSTER_SEEDS_MAX    16

/* CRC16/XMODEM (polynomial 0x1021, no reflection, initial 0) of buf:
 * "123456789" is 0x31C3. */
uint16_t rl_cluster_crc16(const void *buf, size_t len);

/*
 * The slot (0..16383) of a key: CRC16 of the key mod 16384, or of its hash
 * tag: the bytes between the first '{' and the first '}' after it, if
 * there is at least one. "{user1000}.following" hashes "user1000";
 * "foo{}{bar}" and "{}x" the whole key; "foo{{bar}}zap" hashes "{bar".
 */
unsigned rl_cluster_slot(const char *key, size_t len);

/* A node: host "" means the host the reply (or the redirection) came from
 * (Redis sends a NULL or empty endpoint so). id "" when not sent. */
struct rl_cluster_node {
	char host[RL_CLUSTER_HOST_MAX];
	int port;
	char id[RL_CLUSTER_ID_MAX];
};

/* A master and its replicas, with the slots owner[] gives it. */
struct rl_cluster_shard {
	struct rl_cluster_node master;
	unsigned nreplicas;
	struct rl_cluster_node replica[RL_CLUSTER_REPLICAS_MAX];
};

/*
 * The slot map: about 220 KiB, so allocate it once (or keep two, parse
 * into the spare one and swap: a parse that fails leaves its map empty).
 */
struct rl_cluster_map {
	unsigned nshards;
	unsigned nslots;                     /* slots with an owner */
	uint16_t owner[RL_CLUSTER_SLOTS];    /* shard index + 1; else no owner */
	struct rl_cluster_shard shard[RL_CLUSTER_MASTERS_MAX];
};

/*
 * Fill `out` from a CLUSTER SLOTS reply (RESP2): ranges [start, end,
 * master, replica...], each node [host, port, id?, metadata?] (a NULL or
 * empty host: the metadata's "ip", else ""). A master named by several
 * ranges (by its id, or its host and port) is one shard. A range
 * whose master's host is "?" (unknown endpoint) is left without owner.
 * Returns 0, or -EPROTO for a reply of the wrong shape (wrong types, short
 * arrays, a port outside 1..65535, a slot outside 0..16383, start after
 * end, a slot in two ranges, a host or id too long), -E2BIG for more than
 * RL_CLUSTER_MASTERS_MAX masters. On error `out` is left empty.
 */
int rl_cluster_map_slots(const redisReply *r, struct rl_cluster_map *out);

/*
 * The same from a CLUSTER SHARDS reply (Redis 7; RESP2, so each map is an
 * array of name, value): each shard's "slots" (start, end pairs) and its
 * "nodes"; the master is the node whose role is "master" and whose health
 * is not "failed", at its "endpoint" (or "ip" if none) and "port". Fields
 * it does not know are skipped; errors as rl_cluster_map_slots().
 */
int rl_cluster_map_shards(const redisReply *r, struct rl_cluster_map *out);

/* The shard owning `slot`, or NULL (no owner, or slot out of range). */
const struct rl_cluster_shard *rl_cluster_lookup(const struct rl_cluster_map *m,
						 unsigned slot);

/* A redirection: MOVED (the slot has moved: update the map, resend there)
 * or ASK (the slot is migrating: resend this one command there, after
 * ASKING, and keep the map). */
struct rl_cluster_redirect {
	int ask;
	unsigned slot;
	char host[RL_CLUSTER_HOST_MAX]; /* "": the host the command went to */
	int port;
};

/*
 * Parse an error reply's text, "MOVED <slot> <host>:<port>" or "ASK ..."
 * (a leading '-' is allowed). The host is everything before the last ':'
 * (an IPv6 address comes bare, or in brackets); ":6380" means the same
 * host. Returns 0, -ENOENT if the error is not a redirection (an ordinary
 * error: hand it on), -EINVAL if it is one but malformed, -EHOSTUNREACH if
 * the host is "?" (the node's endpoint is unknown: refresh the map).
 */
int rl_cluster_parse_redirect(const char *err, size_t len,
			      struct rl_cluster_redirect *out);

/* ---- the layout of a rule's keys over the slots (docs/CLUSTER-DESIGN.md) ---- */

#define RL_CLUSTER_SHARDS_MAX 1024

/*
 * The shard (0..nshards-1) of the key named `text` in the store (its
 * field in the rule's hashes: rl_agent_key_text()): SipHash-1-3 under the
 * public key (rl_hash_public_key), mod nshards. Every host and rlshimctl
 * must agree on it, so it is part of the layout: never change it. nshards
 * 0 is taken as 1.
 */
unsigned rl_cluster_key_shard(const char *text, size_t len, unsigned nshards);

/*
 * The hash tag of shard `shard` (of `nshards`) of rule `rule`: "RULE:S",
 * or "RULE:S.N" with N the smallest from 1 for which the tag's slot lies in
 * the shard's own share of the slots, [H x 16384 / nshards, (H + 1) x
 * 16384 / nshards) with H = (S + CRC16(RULE)) mod nshards (so shard S of
 * two rules is not on one master). Masters own ranges of slots, so a rule's shards spread
 * over the masters as evenly as their ranges (16 shards on 3 masters of
 * redis-cli's equal ranges: 5, 5 and 6), where tags "RULE:S" alone fall
 * where their CRC16 does (10, 3 and 3 for one rule measured). Part of the
 * layout: never change it. Writes the NUL-terminated tag to out[len] and
 * returns its length, or -ENOSPC.
 */
int rl_cluster_shard_tag(const char *rule, unsigned shard, unsigned nshards,
			 char *out, size_t len);

/*
 * A hash tag owned by shard `shard` of the map (a master), for the keys
 * that belong to a node rather than to a rule (its epoch): "e<n>", n the
 * smallest for which rl_cluster_slot("e<n>") is the shard's. Writes the NUL-
 * terminated tag to out[len] and returns its length, or -ENOENT if the shard
 * owns no slot (or none is found in the first 2^20 n), -ENOSPC if `len` is
 * too short.
 */
int rl_cluster_node_tag(const struct rl_cluster_map *m, unsigned shard,
			char *out, size_t len);

struct rl_cluster_url {
	char user[128]; /* ACL user; "" for none */
	char pass[256]; /* "" for none */
	unsigned nseeds;
	struct {
		char host[RL_CLUSTER_HOST_MAX];
		int port;
	} seed[RL_CLUSTER_SEEDS_MAX];
};

/*
 * Parse redis-cluster://[[user:]pass@]H[:P][,H[:P]...][/[0]] (url.h's
 * grammar): the seed nodes the map is first asked of. There is no
 * database: a cluster has only 0. Returns 0 or -EINVAL.
 */
int rl_cluster_parse_url(const char *url, struct rl_cluster_url *out);

_Static_assert(RL_CLUSTER_SEEDS_MAX == RL_URL_ADDRS_MAX &&
	       RL_CLUSTER_HOST_MAX == RL_URL_HOST_MAX, "the seeds are url.h's");

#endif /* RL_CLUSTER_H */
