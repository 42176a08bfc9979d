/* SPDX-License-Identifier: MIT */
/*
 * agent.h - rlshimd's state and its jobs, one file each: sync.c (one
 * global limit through Redis), ban_sync.c (bans both ways), xdp_loader.c
 * (the XDP dropper), rlshimd.c (the process: lock, loop, signals).
 */
#ifndef RL_AGENT_H
#define RL_AGENT_H

#include <stdint.h>

#include "config.h"
#include "store.h"
#include "table.h"

#include <pthread.h>

/* Script ids in the store. */
enum { RL_SCRIPT_SYNC = 0, RL_SCRIPT_HOSTS = 1, RL_SCRIPT_CLEAN = 2,
       RL_SCRIPT_FLOOR = 3, RL_SCRIPT_FAILS = 4 /* fail_sync.c's */,
       RL_SCRIPT_PULL = 5, RL_SCRIPT_WINDOW = 6, RL_SCRIPT_WINDOW_CLEAN = 7,
       RL_SCRIPT_RESETS = 8 /* unused: the resets are read by ZRANGEBYSCORE */ };

/*
 * A token bucket's state in the store, as the scripts share it (sync.c,
 * strict.c): "TAT:EI", the key's TAT in microseconds of the store's clock
 * and the emission interval (us) of the tariff it was counted under (a bare
 * TAT is read as of the caller's). Lua: tat_of(value, ei, now) is the TAT
 * in the caller's tariff `ei`, what is owed carried over in requests when a
 * plan changed the interval (as rl_table_set_plan does in the segment);
 * tat_text(tat, ei) the value to store, ei as the caller's text.
 */
#define RL_LUA_TAT \
	"local function tat_of(v, ei, now)\n" \
	"  if not v then return 0 end\n" \
	"  local t, e = string.match(v, '^(%d+):?([%d%.]*)$')\n" \
	"  t, e = tonumber(t), tonumber(e)\n" \
	"  if not t then return 0 end\n" \
	"  if e and e > 0 and e ~= ei and t > now then\n" \
	"    t = now + math.ceil((t - now) * ei / e)\n" \
	"  end\n" \
	"  return t\n" \
	"end\n" \
	"local function tat_text(t, ei)\n" \
	"  return string.format('%.0f:%s', t, ei)\n" \
	"end\n"

/* scripts.c: the store's side of sync.c's jobs */
/* The sync script's numbers of a key (ARGV[6]), packed for Lua's
 * struct.unpack: what it admitted (int64, may be below 0), what it owes
 * here (us, int64), its tariff (1-based, a byte), little-endian: 17 bytes. */
#define RL_SYNC_PACK "<i8i8B"
#define RL_SYNC_NUMS 17
#define RL_SYNC_NUMS_TEXT "17"
extern const char rl_lua_sync[];
extern const char rl_lua_pull[];
extern const char rl_lua_window[];
extern const char rl_lua_window_clean[];
extern const char rl_lua_hosts[];
extern const char rl_lua_clean[];
extern const char rl_lua_floor[];

/* One key to sync this round (text as the store names it). */
struct rl_agent_item {
	uint32_t index;
	uint64_t tag;
	unsigned rule;   /* config index */
	uint32_t admitted;
	uint64_t ei_ns;  /* the key's emission interval (its tariff's) */
	uint8_t plan;
	uint8_t klen;
	uint16_t shard;  /* its shard in the store (rl_store_key_shard) */
	uint8_t quiet;   /* nothing admitted or given back, nor refused from
			  * a share held back: in debt only */
	uint8_t push;    /* pushed this round (rl_agent_repush_pick) */
	char key[112];   /* key text: address, header value, or "*" */
	char count[12];  /* admitted less given back, as text (may be < 0) */
	char ei[32];     /* emission interval in microseconds, as text */
	char debt[24];   /* what it owes here (us), as text: 0 if nothing */
	char own[24];    /* the same, or 0 when part of it is a share held */
	char burst[12];  /* its tariff's burst, as text */
	char win[24];    /* a window's: its index on Unix time, as text */
	char until[24];  /* and when its counts stop mattering (Unix ms) */
};

/* The shards of a rule's keys in the store: 16 with redis-cluster://, else
 * 1 (rl_store_shards(), below). */
#define RL_STORE_SHARDS_MAX 16
#define RL_STORE_CLUSTER_SHARDS 16

/* The store's clock against this host's (store_clock.c). */
struct rl_store_clock {
	_Atomic int64_t off_us;     /* store us - this host's monotonic us */
	_Atomic int known;          /* off_us is */
	int64_t lo_us, hi_us;       /* the bounds of the true offset */
	uint64_t at_ns;             /* when they were last narrowed */
};

/* One exchange: the store's clock read `store_us` between `sent_ns` and
 * `got_ns` here. */
void rl_store_clock_sample(struct rl_store_clock *c, uint64_t store_us,
			   uint64_t sent_ns, uint64_t got_ns);
/* The store's `store_us` on this host's clock: 0, or -1 while unknown. */
int rl_store_clock_host_ns(const struct rl_store_clock *c, uint64_t store_us,
			   uint64_t *host_ns);
/* The store's `store_us` on this host's clock, but never before
 * `not_before_ns` (what it is while the offset is unknown: an exchange's
 * sending, the earliest the store can have read its clock). */
uint64_t rl_store_clock_at(const struct rl_store_clock *c, uint64_t store_us,
			   uint64_t not_before_ns);
/* This host's `host_ns` on the store's clock; 0 while unknown. */
uint64_t rl_store_clock_store_us(const struct rl_store_clock *c,
				 uint64_t host_ns);

struct rl_agent {
	const struct rl_config *cfg;
	struct rl_table *table;
	struct rl_store *store;
	unsigned ids[RL_MAX_RULES];   /* the table's id of each config rule */
	int rule_of[RL_MAX_RULES];    /* the config rule of each table id */
	char host_id[256];
	char host_tag[17];            /* host_id's short name in the store */
	uint64_t interval_ns;

	/* the store's epochs, one per master (rl_store_epoch_tags; one
	 * without a cluster): a random value each keeps; a different one (or
	 * none) means that master restarted empty or was flushed */
	unsigned nepochs;
	struct rl_agent_epoch {
		char tag[RL_STORE_TAG_MAX];
		char value[33];       /* "" while it has none */
		uint8_t known;        /* its GET was answered once */
		uint8_t lost;         /* its master lost its data: not yet
				       * repaired */
	} epochs[RL_STORE_MASTERS_MAX];
	int epochs_read;              /* a round has read them */
	int restarted;                /* this round: the master of the ban
				       * set lost its data (ban_sync.c) */
	uint32_t hosts_alive;         /* at the last successful sync */
	/* this host's entry among the hosts alive, renewed (the hosts
	 * script: a beat) at this time; a round between beats only counts
	 * them. beat_again: at the next round, whatever the time (the set
	 * was gone, the store lost its data or came back) */
	uint64_t beat_ns;
	int beat_again;
	uint64_t beat_reconnects;     /* rl_store_reconnects() at that beat */
	/* the store's clock (us) at the last round's TIME, and this host's
	 * (monotonic ns) when it was read: a beat's score without a script */
	uint64_t clock_us, clock_ns;

	/* the store's clock against this one, each shard's master's
	 * (store_clock.c; the strict thread reads it for the lends) */
	struct rl_store_clock clocks[RL_STORE_SHARDS_MAX];
	/* A round collected, its answers not all applied yet: a lend of
	 * nothing answered meanwhile is applied after them, by the sync
	 * thread (rl_agent_dry_lend), under `dry_lock`. */
	pthread_mutex_t dry_lock;
	int round_open;
	unsigned ndry;
	struct rl_dry_lend {
		struct rl_ask_item it;
		uint64_t floor_ns;
	} dry[RL_ASKS];

	/* this round's keys, sorted by config rule and shard */
	struct rl_agent_item *items;
	uint32_t nitems, cap;
	uint32_t npush;               /* of them pushed, first after the sort */
	uint32_t repush_from;         /* slot: the next round's first quiet key */
	unsigned shards;              /* rl_store_shards() */
	uint64_t clean_cursor[RL_MAX_RULES][RL_STORE_SHARDS_MAX];
	/* store us: keys changed since */
	uint64_t pull_cursor[RL_MAX_RULES][RL_STORE_SHARDS_MAX];
	/* the keys this round's pulls found changed (standalone: read in a
	 * second exchange, sync_jobs.c), each a length byte and its text */
	unsigned npulled;
	struct rl_agent_pulled {
		unsigned rule;            /* config index */
		unsigned shard;
		size_t off;               /* in pull_buf */
		uint32_t n;
		uint64_t cursor;          /* the pull's, once mirrored */
	} pulled[RL_MAX_RULES * RL_STORE_SHARDS_MAX];
	char *pull_buf;
	size_t pull_len, pull_cap;
	uint64_t last_collect_ns;     /* the last round's collect */
	int was_down;                 /* the store, at the last round */
	/* cluster: a call carrying a closed rule's keys failed, and a master
	 * is still unreachable (RL_AGENT_STORE_DOWN raised for it); the last
	 * "store error" logged (at most one a second) */
	int closed_failed;
	uint64_t closed_since_ms;     /* wall clock, for status */
	uint64_t error_logged_ns;
	uint64_t plans_cursor[RL_MAX_RULES]; /* HSCAN of each rule's plans */

	uint64_t rounds;
	void *bans;                   /* ban_sync.c's state */
	void *fails;                  /* fail_sync.c's */
	struct rl_xdp *xdp;           /* xdp_loader.c's, NULL without XDP */
	struct rl_strict *strict;     /* strict.c's, NULL without strict rules */

	/* resets (reset.c): the store's time (us) of the last read, 0 before
	 * the first; the keys reset here this round, to delete from the
	 * store once more after the round */
	char resets_cursor[24];
	unsigned nforget;
	struct rl_agent_forget {
		unsigned rule;           /* config index */
		uint8_t len;
		char text[112];
	} forget[64];
};

/* repush.c: the quiet keys in debt a round pushes, at most RL_REPUSH_KEYS
 * a round over all the hosts alive (each its share); the keys that admitted
 * or gave back something, or refused from a share held back, always. */
#define RL_REPUSH_KEYS 1000
/* A host's share of RL_REPUSH_KEYS with `hosts` alive (at least 1). */
uint32_t rl_agent_repush_budget(uint32_t hosts);
/*
 * Mark which of the round's `n` items (in slot order, as collected) are
 * pushed (`push`): every one not `quiet`, and of the quiet ones at most
 * `budget`, the first at or after slot `*from` and on, wrapping. `*from`
 * becomes the slot of the first quiet one left out (unchanged if none
 * was). Returns how many are pushed.
 */
uint32_t rl_agent_repush_pick(struct rl_agent_item *items, uint32_t n,
			      uint32_t budget, uint32_t *from);

/* Set up the agent's sync state over `cfg` and `table`. 0 or -errno. */
int rl_agent_init(struct rl_agent *a, const struct rl_config *cfg,
		  struct rl_table *table, struct rl_err *err);
void rl_agent_free(struct rl_agent *a);

/*
 * The round's sync with the store (sync.c): collect what each key
 * admitted, push it and pull the keys' global states, their plans and the
 * hosts alive, and mirror the next chunk of each rule's plans into the
 * segment; with the store down, charge this host's share instead.
 * Returns 1 when the store answered the round, 0 without [redis] or with
 * the store down.
 */
/* Lend `it` answered with nothing, the key owing in the store until
 * `floor_ns`: applied now, or after the round in flight (strict.c). */
void rl_agent_dry_lend(struct rl_agent *a, const struct rl_ask_item *it,
		       uint64_t floor_ns);
int rl_agent_sync(struct rl_agent *a, uint64_t now_ns);

/* ban_sync.c */
int rl_agent_bans_init(struct rl_agent *a);
void rl_agent_bans_free(struct rl_agent *a);
/* Mirror bans between the segment and the store: after a round that
 * rl_agent_sync() had the store answer. */
void rl_agent_bans_sync(struct rl_agent *a, uint64_t now_ns);
/* The store's live bans read on the round's own pipeline (sync.c), the
 * expired ones dropped first if `prune`: the commands queued (returns how
 * many: the last one's reply is the set), and that reply;
 * rl_agent_bans_sync() then reads them no more. */
unsigned rl_agent_bans_queue(struct rl_agent *a, int prune);
struct redisReply;
void rl_agent_bans_fetched(struct rl_agent *a, const struct redisReply *r);

/* fail_sync.c: maxretry counted across hosts in the store */
int rl_agent_fails_init(struct rl_agent *a);
void rl_agent_fails_free(struct rl_agent *a);
/* Push the refusals counted here since the last round and ban the clients
 * whose count across hosts reaches maxretry: each round, before
 * rl_agent_bans_sync(), which spreads those bans. With the store down
 * (`store_up` 0) the refusals are dropped: each host counts alone. */
void rl_agent_fails_sync(struct rl_agent *a, int store_up, uint64_t now_ns);
/* A ban of `c` came from the store: the refusals counted here are in it. */
void rl_agent_fails_banned(struct rl_agent *a, const struct rl_cidr *c,
			   uint64_t now_ns);

/* xdp_loader.c: load and attach the dropper if [xdp] says so. 0 (attached, or
 * no [xdp]) or -1 (said why, once, and goes on without: the shim still
 * refuses banned clients at accept). */
int rl_agent_xdp_init(struct rl_agent *a);
/* Detach, unpin, free. */
void rl_agent_xdp_free(struct rl_agent *a);
/* Bring the dropper's tries in line with the segment's bans. */
void rl_agent_xdp_round(struct rl_agent *a, uint64_t now_ns);

/* strict.c: the thread that decides the shims' asks (sync = strict) in
 * the store, if any rule is strict; NULL if none (or it cannot start:
 * logged, and the shims apply on_store_down). Stop waits for it. */
struct rl_strict *rl_agent_strict_start(struct rl_agent *a);
void rl_agent_strict_stop(struct rl_strict *s);

/* How long the store keeps a rule's hash of states after its last write
 * (ms): for as long as any of its keys, under any plan, could still owe
 * (a bucket) or count (a window). */
uint64_t rl_agent_ttl_ms(const struct rl_agent *a, const struct rl_rule_cfg *r);

/* The store keys of shard `shard` of rule `ci`'s states (token buckets)
 * and of its window counts: one hash tag per shard, for a cluster slot
 * (sync.c, sync_jobs.c; strict.c's scripts keep the same). */
size_t rl_agent_hash_key(const struct rl_agent *a, unsigned ci, unsigned shard,
			 char *out, size_t len);
size_t rl_agent_window_key(const struct rl_agent *a, unsigned ci,
			   unsigned shard, char *out, size_t len);

/* ---- reset.c: names in the store, and resets (rlshimd and rlshimctl) ---- */

/* The text a key is named by in the store. */
size_t rl_agent_key_text(const struct rl_rule_cfg *r, const uint8_t *key,
			 size_t len, int truncated, char *out, size_t outlen);

/*
 * The layout of a rule's keys (docs/CLUSTER-DESIGN.md): with
 * redis-cluster:// each rule's keys are spread over RL_STORE_CLUSTER_SHARDS
 * shards, each its own hash tag "{NAME:S}"; else there is one shard, and the
 * names are "{NAME}" as they always were.
 */
unsigned rl_store_shards(const struct rl_config *c);
/* The shard of the key named `text` (rl_cluster_key_shard). */
unsigned rl_store_key_shard(const struct rl_config *c, const char *text,
			    size_t len);

/* A store key of shard `shard` of rule `r`'s: "<prefix>{NAME}" (one
 * shard) or "<prefix>{NAME:S}", and `suffix` (":win"...). */
size_t rl_store_rule_key(const struct rl_config *c, const struct rl_rule_cfg *r,
			 unsigned shard, const char *suffix, char *out,
			 size_t len);
/* Its maxretry counts: "<prefix>fails:{NAME}" or "<prefix>fails:{NAME:S}". */
size_t rl_store_fails_key(const struct rl_config *c, const struct rl_rule_cfg *r,
			  unsigned shard, char *out, size_t len);

/* The sorted set of resets, "<prefix>resets": members "RULE KEY" (the
 * key's text), scored by the store's time (us) they were made at. */
size_t rl_store_resets_key(const struct rl_config *c, char *out, size_t len);

/* A master's epoch (sync.c): "<prefix>epoch" for tag "" (redis://,
 * Sentinel), else "<prefix>epoch:{TAG}", TAG from rl_store_epoch_tags(). */
size_t rl_store_epoch_key(const struct rl_config *c, const char *tag, char *out,
			  size_t len);

#define RL_RESETS_KEEP_MS 60000u  /* how long an entry is kept */
#define RL_RESETS_READ "500"      /* entries an agent reads per round */

/* Lua: record a reset (rlshimctl; the agents read them with ZRANGEBYSCORE). */
extern const char rl_lua_reset_record[];

/* Queue the deletion of the key named `text` from rule `r`'s hashes (its
 * bucket's state and grants, its window counts). Returns the commands
 * queued (3), or -1. */
int rl_store_queue_forget(struct rl_store *s, const struct rl_config *c,
			  const struct rl_rule_cfg *r, const char *text,
			  size_t tlen);

#endif /* RL_AGENT_H */
