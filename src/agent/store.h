/* SPDX-License-Identifier: MIT */
/*
 * store.h - rlshimd's connection to Redis.
 *
 * One connection, used synchronously by the agent's loop (never by the
 * shim: no request waits on it). Every call is bounded by the configured
 * timeout. A failure marks the store down; rl_store_ready() reconnects with
 * capped exponential backoff, and the outage is logged once when it starts
 * and once when it ends, with its length. Scripts are loaded once and
 * called by EVALSHA; a NOSCRIPT (Redis restarted or flushed its scripts)
 * loads them again and repeats the call.
 *
 * With redis-cluster:// the store is one connection per master instead: the
 * slot map is asked of the seeds (CLUSTER SLOTS), each queued call goes to
 * the master of its first key's slot (argv[1] of a command, KEYS[1] of a
 * script), MOVED and ASK are followed, and replies still come back in the
 * order queued. A failure there is one node's or one call's, not the
 * store's: a master whose connection fails (write, read, timeout) is dropped
 * alone and retried with its own backoff (50 ms doubling to 2 s), its calls
 * given RL_STORE_NO_REPLY; a call answered CLUSTERDOWN, TRYAGAIN or still
 * redirected after two tries is given that reply. The store is up while at
 * least one master of the map answers. The map is asked again every 10 s,
 * after MOVED or CLUSTERDOWN, and every 50 ms while a master is down.
 * Each node's going and return is logged once ("store node unreachable",
 * "store node reachable again").
 */
#ifndef RL_STORE_H
#define RL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "url.h"

#define RL_STORE_SCRIPTS 9

struct rl_store;

#define RL_STORE_SENTINELS RL_URL_SENTINELS_MAX
#define RL_STORE_SENTINEL_PORT RL_URL_SENTINEL_PORT

struct rl_store_addr {
	char host[256];
	int port;
};

struct rl_store_url {
	int unix_socket;   /* unix:///path */
	char host[256];    /* or the socket path; with sentinels, the master
			    * they named last ("" before they are asked) */
	int port;
	int db;
	char user[128];    /* ACL user; "" for none */
	char pass[256];    /* "" for none */
	char master[128];  /* redis-sentinel://: the master's name, else "" */
	unsigned nsentinels;
	struct rl_store_addr sentinels[RL_STORE_SENTINELS];
};

/*
 * Parse redis://, unix:// or redis-sentinel:// (url.h's grammar, as the
 * configuration checks it). Returns 0 or -EINVAL. (redis-cluster:// is
 * rl_cluster_parse_url's, in rl_store_new.)
 */
int rl_store_parse_url(const char *url, struct rl_store_url *out);

/* A store for `url` (not connected yet); every call bounded by
 * `timeout_ns`. NULL if the url does not parse. */
struct rl_store *rl_store_new(const char *url, uint64_t timeout_ns);
void rl_store_free(struct rl_store *s);

/* Leave the node lines to another store of this process (the sync
 * thread's, which reports the cluster's masters): the strict thread's
 * store would say each node's going a second time. */
void rl_store_quiet_nodes(struct rl_store *s);

/* Register script `id` (0..RL_STORE_SCRIPTS-1) by its Lua source. */
void rl_store_script(struct rl_store *s, unsigned id, const char *lua);

/*
 * Connected and ready? Tries to (re)connect when the backoff allows.
 * Returns 1 if the store is up now, 0 if not.
 */
int rl_store_ready(struct rl_store *s, uint64_t now_ns);

/*
 * What an outage does, for the "store unreachable" line: the rules that
 * refuse (on_store_down = closed: 429 with Retry-After: 1) and those that
 * run on this host's share of their rate (open), by name.
 */
struct rl_config;
void rl_store_impact(struct rl_store *s, const struct rl_config *cfg);

/* A call failed (or returned garbage): drop the connection, go down. */
void rl_store_fail(struct rl_store *s, const char *why, uint64_t now_ns);

/* 1 while up. Since when it is down, in CLOCK_REALTIME ms (0 if up). */
int rl_store_up(const struct rl_store *s);
uint64_t rl_store_down_since_ms(const struct rl_store *s);

/* Times the connection came up after being down (a restart shows here
 * too: the scripts had to be loaded again). */
uint64_t rl_store_reconnects(const struct rl_store *s);

/*
 * Queue a command (binary-safe arguments) on the pipeline, or EVALSHA of
 * script `id`. rl_store_flush() then reads every reply in order, redoing a
 * script call that came back NOSCRIPT; fn(reply, i, arg) is called for each
 * (i: the order queued). On a connection error the store goes down and
 * -EIO is returned; replies already handed to `fn` stand.
 */
int rl_store_queue(struct rl_store *s, int argc, const char **argv,
		   const size_t *lens);
int rl_store_queue_script(struct rl_store *s, unsigned id, int nkeys,
			  int argc, const char **argv, const size_t *lens);
int rl_store_flush(struct rl_store *s,
		   int (*fn)(redisReply *r, unsigned i, void *arg), void *arg,
		   uint64_t now_ns);

/*
 * The masters the store knows, for their epochs (sync.c): with
 * redis-cluster://, one per master of the slot map, each with a hash tag
 * that hashes to a slot it owns (rl_cluster_node_tag: "e<n>"); else one,
 * the store itself, tag "". Writes up to `max` NUL-terminated tags and
 * returns how many (0 before a cluster's map is known).
 */
#define RL_STORE_MASTERS_MAX 128
#define RL_STORE_TAG_MAX 16
unsigned rl_store_epoch_tags(const struct rl_store *s,
			     char (*tags)[RL_STORE_TAG_MAX], unsigned max);

/* The master serving `key` in the map now, as a number the same for any
 * two keys on one master (until the map changes): 0 without a cluster, -1
 * if the key's slot has no master. */
int rl_store_master_of(const struct rl_store *s, const char *key, size_t len);

/*
 * Cluster: what rl_store_flush's fn is given for a call that got no reply
 * from Redis (its node unreachable or timed out, its slot without a
 * master): a static error reply whose str starts with RL_STORE_NO_REPLY
 * (not a Redis error's word: those are upper case). rl_store_no_reply()
 * says whether `r` is it. Never freed by fn, like every reply.
 */
#define RL_STORE_NO_REPLY "rlshim-no-reply:"
int rl_store_no_reply(const redisReply *r);

/* redis-cluster://? (a failed call is then the call's, not the store's) */
int rl_store_cluster(const struct rl_store *s);

/* Cluster, while up: how many masters of the map are unreachable; the
 * number it names in *masters (0 and 0 otherwise). */
unsigned rl_store_masters_down(const struct rl_store *s, unsigned *masters);

/* Commands sent since the start (for the benchmark). */
uint64_t rl_store_commands(const struct rl_store *s);

#endif /* RL_STORE_H */
