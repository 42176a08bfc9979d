/* SPDX-License-Identifier: MIT */
/*
 * table.h - the layout of the shared segment, /dev/shm/<name>.
 *
 *   +---------------------------+ 0
 *   | struct rl_shm_header      |   magic, version, size, seed, counters
 *   +---------------------------+ RL_SHM_HEADER_SIZE
 *   | struct rl_shm_rule [64]   |   the rules registered by any process
 *   +---------------------------+
 *   | struct rl_shm_shard [32]  |   per-CPU allowed/denied per rule
 *   +---------------------------+
 *   | struct rl_slot [cap]      |   key tag + 64-bit state, 16 per bucket
 *   +---------------------------+
 *   | struct rl_slot_meta [cap] |   the key bytes, for rlshimctl and sync
 *   +---------------------------+
 *   | struct rl_shm_ban [16384] |   bans
 *   +---------------------------+
 *   | char [RL_KEPT_MAX]        |   the configuration text in force (kept.c)
 *   +---------------------------+ size
 *
 * Fixed-width fields only, regions page-aligned; the layout test pins every
 * size and offset. Any change to it bumps RL_SHM_VERSION.
 *
 * The protocol (see table.c for the why):
 *   - slot.key is 0 (empty) or a tag: 56 bits of the keyed hash of
 *     (rule, key) and the rule id in the low 8 bits. Slots are never emptied
 *     again, only re-keyed, so the occupied slots of a bucket are always a
 *     prefix of it and a lookup stops at the first empty one.
 *   - slot.state is the algorithm's state word, changed only by CAS. A value
 *     with the top bit set is a marker: the slot is being re-keyed, and the
 *     low bits hold the monotonic time the marker was set. A marker older
 *     than RL_MARK_TIMEOUT_NS was left by a dead process and is cleared by
 *     whoever finds it.
 */
#ifndef RL_TABLE_H
#define RL_TABLE_H

#include <stdatomic.h>
#include <stdint.h>

#include "rlshim.h"
#include "algo.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2,
	       "64-bit atomics must always be lock-free");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2,
	       "32-bit atomics must always be lock-free");

#define RL_SHM_MAGIC 0x314d48534c52ull /* "RLSHM1" little-endian */
#define RL_SHM_VERSION 3u
#define RL_SHM_HEADER_SIZE 4096u
#define RL_SHM_ALIGN 4096u
#define RL_BUCKET_SLOTS 16u
#define RL_SHARDS 32u
#define RL_BANS 16384u                   /* ban entries, a power of two: holds
					    thousands at a low load */
#define RL_MARK_TIMEOUT_NS 200000000ull /* 200 ms: a dead re-keyer */
#define RL_KEPT_MAX 65536u              /* bytes of configuration text kept */

/* agent_flags bits */
#define RL_AGENT_SYNC 0x1ull       /* an agent syncs: count slot.sync_admitted */
#define RL_AGENT_STORE_DOWN 0x2ull /* the agent cannot reach its store */
#define RL_AGENT_XDP 0x4ull        /* the XDP dropper is attached */

enum rl_shm_init {
	RL_SHM_INIT_BUSY = 0,  /* the creator is still writing the header */
	RL_SHM_INIT_READY = 1,
};

struct rl_shm_header {
	/* What the segment is. */
	uint64_t magic;               /* RL_SHM_MAGIC, written last but one */
	uint32_t version;             /* RL_SHM_VERSION */
	uint32_t header_size;         /* RL_SHM_HEADER_SIZE */
	uint64_t size;                /* bytes of the whole segment */
	uint32_t capacity;            /* slots: buckets * RL_BUCKET_SLOTS */
	uint32_t bucket_bits;         /* log2(buckets) */
	_Atomic uint32_t init;        /* enum rl_shm_init, written last */
	uint32_t creator_pid;
	uint64_t seed[2];             /* SipHash key, from getrandom */
	uint64_t created_mono_ns;
	uint64_t created_unix_ms;
	uint64_t rules_off;
	uint64_t shards_off;
	uint64_t slots_off;
	uint64_t meta_off;
	uint64_t bans_off;
	uint32_t max_rules;           /* RL_MAX_RULES */
	uint32_t shards;              /* RL_SHARDS */
	uint32_t bans_cap;            /* RL_BANS */
	uint32_t reserved0;           /* to 128 */
	/* Rare events, on their own cache line. */
	_Atomic uint64_t evictions;   /* live keys displaced */
	_Atomic uint64_t overflows;   /* decisions made without a slot */
	_Atomic uint64_t marks_cleared; /* markers left by dead processes */
	_Atomic uint64_t ban_refusals; /* connections and requests refused by a
					  ban */
	_Atomic uint64_t ban_gen;     /* +1 whenever a live ban comes, goes
					 or changes: a connection re-checks
					 its client, the agent re-mirrors
					 the bans into XDP, when it moves */
	_Atomic uint64_t bans_issued; /* bans this host's maxretry issued */
	_Atomic uint64_t summary_ms;  /* CLOCK_MONOTONIC ms of the last denial
					 summary: the process that moves it
					 logs the next one */
	_Atomic uint64_t config_reloads; /* configurations applied after the
					    first (counted once per host) */
	/* The host agent's (rlshimd) corner. */
	_Atomic uint64_t agent_pid;
	_Atomic uint64_t agent_heartbeat_ns; /* CLOCK_MONOTONIC */
	_Atomic uint64_t agent_last_sync_ns;
	_Atomic uint64_t agent_flags;        /* RL_AGENT_* */
	_Atomic uint64_t store_down_since_ms; /* Unix ms, 0 when up */
	_Atomic uint64_t agent_spawn_ns;     /* a shim is starting an agent */
	_Atomic uint64_t agent_syncs;        /* sync rounds completed */
	_Atomic uint32_t hosts_alive;        /* at the last sync */
	_Atomic uint32_t sync_interval_ms;
	/* The prefix lengths bans use, per family (bit n: /n), so that a
	 * lookup only tries lengths that exist. */
	_Atomic uint64_t ban_lens[2][3];
	/* The configuration in force: the stamp (rl_config_stamp) of the file
	 * the processes apply, and of one they refused, so that a change is
	 * logged once per host however many processes see it. */
	_Atomic uint64_t config_stamp;
	_Atomic uint64_t config_since_ms;    /* Unix ms it came into force */
	_Atomic uint64_t config_bad_stamp;
	_Atomic uint64_t config_bad_since_ms;
	/* The text of the configuration in force (kept.c): where, how long,
	 * its stamp (0 while it is being written) and its hash. */
	uint64_t kept_off;
	uint32_t kept_cap;            /* RL_KEPT_MAX */
	_Atomic uint32_t kept_len;
	_Atomic uint64_t kept_stamp;
	_Atomic uint64_t kept_hash;
	uint8_t reserved2[RL_SHM_HEADER_SIZE - 368];
};

/* A rule registered in the segment (RL_MAX_RULES of them). */
struct rl_shm_plan {
	uint64_t period_ns;
	uint32_t count;
	uint32_t burst;
};

struct rl_shm_rule {
	_Atomic uint64_t ident;       /* 0 = free; else hash of the definition */
	_Atomic uint32_t ready;       /* 1 once the fields below are written */
	uint32_t algorithm;           /* enum rl_algorithm */
	uint64_t period_ns;
	uint32_t count;
	uint32_t burst;
	char name[RL_RULE_NAME_MAX];
	uint32_t nplans;
	uint32_t reserved0;
	struct rl_shm_plan plans[RL_MAX_PLANS]; /* per-key tariffs */
	_Atomic uint64_t bans;        /* bans its maxretry issued */
	_Atomic uint64_t summarised;  /* denials already in a summary line */
	_Atomic uint32_t seq;         /* odd while the rate fields above are
					 rewritten (a reload changed them) */
	uint32_t reserved1;
	_Atomic uint64_t seq_ns;      /* CLOCK_MONOTONIC when seq went odd: a
					 writer killed mid-way is taken over
					 after RL_MARK_TIMEOUT_NS */
	uint8_t reserved[24];         /* to 256 */
};

/* One shard of counters; a process adds to the shard of its CPU. */
struct rl_shm_counter {
	_Atomic uint64_t allowed;
	_Atomic uint64_t denied;
};
struct rl_shm_shard {
	struct rl_shm_counter rule[RL_MAX_RULES];
};

/* 32 bytes: two slots per cache line, a bucket is 512 bytes. */
struct rl_slot {
	_Atomic uint64_t key;         /* 0 = empty, else the tag */
	_Atomic uint64_t state;       /* algorithm state, or a marker */
	_Atomic uint32_t sync_admitted; /* cost admitted since the agent's last
					   sync (the agent swaps it to 0) */
	_Atomic uint8_t plan;         /* 0: the rule's rate; n: its plan n-1
					 (set by the agent from the store) */
	uint8_t reserved[3];
	_Atomic uint64_t fails;       /* the key's denials, for maxretry */
};

/* 64 bytes: the key bytes of a slot, published seqlock-style through
 * `tag` (0 while being written, the slot's key when complete). */
struct rl_slot_meta {
	_Atomic uint64_t tag;
	uint8_t len;                  /* bytes used in `key` */
	uint8_t truncated;            /* key holds a prefix + an 8-byte digest */
	uint8_t reserved[6];
	uint8_t key[RL_KEY_MAX];
};

/* 64 bytes: one ban (an address or prefix with an expiry). Published like
 * the slot meta: `tag` is 0 while the fields are written. */
struct rl_shm_ban {
	_Atomic uint64_t tag;         /* 0 = free; else hash of the prefix | 1 */
	_Atomic uint64_t expires_ms;  /* Unix ms; 0 = lifted */
	uint8_t family;               /* RL_AF_INET / RL_AF_INET6 */
	uint8_t prefix;
	uint8_t origin;               /* enum rl_ban_origin */
	uint8_t rule;                 /* rule id that banned, 0xff if none */
	_Atomic uint32_t hits;        /* connections refused by it */
	uint8_t addr[16];
	uint64_t created_ms;          /* Unix ms */
	_Atomic uint32_t offences;    /* maxretry bans of this prefix so far */
	uint8_t reserved[4];
	_Atomic uint64_t lifted_exp;  /* the expiry it had when lifted here
					 by hand (rl_ban_unban), so that the agent
					 lifts it in the store too rather
					 than bring it back */
};

_Static_assert(sizeof(struct rl_shm_header) == RL_SHM_HEADER_SIZE,
	       "header is one page");
_Static_assert(sizeof(struct rl_shm_rule) == 256, "rule entry size");
_Static_assert(sizeof(struct rl_slot) == 32, "slot size");
_Static_assert(sizeof(struct rl_slot_meta) == 64, "slot meta size");
_Static_assert(sizeof(struct rl_shm_ban) == 64, "ban entry size");

/*
 * The process-private handle. A rule's rates are this process's own: what
 * it registered (its configuration), or, for a rule it did not, what the
 * segment says. A process that registers a changed rate (a reload) swaps
 * in a new cache; the old one stays until the handle is closed, for a
 * thread still deciding with it.
 */
struct rl_rule_cache {
	unsigned nplans;
	struct rl_algo algo;                 /* the rule's own rate */
	struct rl_algo plans[RL_MAX_PLANS];  /* its tariffs */
	struct rl_rule_cache *retired;       /* the one it replaced */
};

struct rl_table {
	struct rl_shm_header *hdr;
	uint64_t size;
	struct rl_shm_rule *rules;
	struct rl_shm_shard *shards;
	struct rl_slot *slots;
	struct rl_slot_meta *meta;
	struct rl_shm_ban *bans;
	char *kept;
	uint64_t bucket_mask;
	uint64_t seed[2];
	struct rl_rule_cache *cache[RL_MAX_RULES];   /* read with acquire */
	struct rl_rule_cache from_segment[RL_MAX_RULES];
	int from_segment_state[RL_MAX_RULES];        /* 0 empty, 1 filling,
							2 filled */
};

/* ---- the agent's side (rlshimd) --------------------------------------------- */

/* slot.sync_admitted: the count, and this bit for "refused since" */
#define RL_SYNC_DENIED 0x80000000u

/* A key with admissions (or refusals) since the last sync. */
struct rl_sync_item {
	uint32_t index;     /* slot */
	uint64_t tag;       /* the key's identity in that slot */
	unsigned rule;
	uint32_t admitted;  /* cost admitted since the last collect */
	uint8_t denied;     /* some request was refused since */
	uint8_t plan;       /* 0: the rule's rate; n: plan n-1 */
	uint8_t key_len;
	uint8_t truncated;
	uint8_t key[RL_KEY_MAX];
};

/*
 * Call `fn` for every slot whose key admitted or refused something since
 * the last collect, taking (swapping to 0) its count: what is collected is
 * the caller's to account for. Returns what `fn` returned if non-zero.
 */
int rl_table_sync_collect(struct rl_table *t,
			  int (*fn)(const struct rl_sync_item *it, void *arg),
			  void *arg);

/*
 * The store says key `tag` in slot `index` owes `debt_ns` beyond `now_ns`
 * for everything collected so far; what was admitted here since the collect
 * comes on top. Raises the key's GCRA state to at least that, never lowers
 * it. Returns 0, or -ESTALE if the slot holds another key now.
 */
int rl_table_sync_apply(struct rl_table *t, uint32_t index, uint64_t tag,
			uint64_t debt_ns, uint64_t now_ns);

/*
 * The store is down: charge the key in slot `index` `extra_ns` more (what
 * the other hosts are assumed to admit alongside), so that each host keeps
 * to its share of the rate. Returns 0 or -ESTALE.
 */
int rl_table_sync_charge(struct rl_table *t, uint32_t index, uint64_t tag,
			 uint64_t extra_ns, uint64_t now_ns);

/*
 * Put the key in slot `index` on plan `plan` (0: the rule's own rate),
 * carrying its debt over in requests, not in time: a key that used 100
 * requests of one tariff has used 100 of the next (at most the whole
 * bucket). Returns 0 or -ESTALE.
 */
int rl_table_set_plan(struct rl_table *t, uint32_t index, uint64_t tag,
		      unsigned plan, uint64_t now_ns);

/*
 * Where a key was found last time. A caller that decides the same (rule,
 * key) again and again (a connection's client) keeps one per pair; the
 * next decision then goes straight to the slot if it still holds the key.
 * Zeroed: no hint.
 */
struct rl_slot_hint {
	uint64_t tag;
	uint32_t index;
};

/* rl_table_take, with a hint for (rule, key): the caller must only ever
 * use a hint with the key it was filled for. */
int rl_table_take_hint(struct rl_table *t, unsigned rule, const void *key,
		       size_t key_len, uint32_t cost, uint64_t now_ns,
		       struct rl_result *out, struct rl_slot_hint *hint);

/*
 * rl_table_rule in two steps, for a caller that must check a whole
 * configuration before any of it takes effect (a reload): claim the id of
 * `def` (the segment's record of its rates follows), then, once everything
 * else is right, use `def`'s rates in this process. Same returns.
 */
int rl_table_rule_claim(struct rl_table *t, const struct rl_rule_def *def,
			unsigned *id);
int rl_table_rule_use(struct rl_table *t, unsigned id,
		      const struct rl_rule_def *def);

/*
 * For a caller that decides a request by several rules (the shim): take
 * as rl_table_take_hint, but count only a denial. Once every rule allowed
 * the request, rl_table_count_allowed() for each; if one denied, what the
 * others took goes back with rl_table_give_back(), which touches no
 * counter. So the allowed counters only ever grow, and count requests
 * that passed, not units taken and returned.
 */
int rl_table_take_uncounted(struct rl_table *t, unsigned rule, const void *key,
			    size_t key_len, uint32_t cost, uint64_t now_ns,
			    struct rl_result *out, struct rl_slot_hint *hint);
void rl_table_count_allowed(struct rl_table *t, unsigned rule);
int rl_table_give_back(struct rl_table *t, unsigned rule, const void *key,
		       size_t key_len, uint32_t cost, uint64_t now_ns);

/*
 * Count a denial of `key` under rule `rule` towards a ban: `maxretry`
 * denials within `findtime_ns` of the first of them (the count starts with
 * a key's first denial and lasts findtime; one after that starts a new
 * count). Returns 1 when this denial is the maxretry-th (the count starts
 * over), 0 when not, or when the table has no slot to count in, and
 * -EINVAL for a rule the table does not know. `hint` as for
 * rl_table_take_hint, for the same (rule, key), or NULL.
 */
int rl_table_fail(struct rl_table *t, unsigned rule, const void *key,
		  size_t key_len, uint32_t maxretry, uint64_t findtime_ns,
		  uint64_t now_ns, struct rl_slot_hint *hint);

/*
 * The denial summary: when `interval_ms` (CLOCK_MONOTONIC ms) has passed
 * since the host's last one, this call takes the interval (one process in
 * all those sharing the segment does) and calls `fn` once for each rule
 * with denials since, with their number and the time they span (0 for the
 * first summary). Otherwise one load and nothing. Returns the calls made.
 */
unsigned rl_table_summarise(struct rl_table *t, uint64_t now_ms,
			    uint64_t interval_ms,
			    void (*fn)(const char *rule, uint64_t denied,
				       uint64_t over_ms, void *arg),
			    void *arg);

/* Rule `id` as this process has validated it, or NULL if it is not (yet)
 * a valid rule of the segment. */
const struct rl_rule_cache *rl_table_rule_get(struct rl_table *t, unsigned id);

/* Bytes a segment of `capacity` slots (already rounded) takes. */
uint64_t rl_table_layout_size(uint32_t capacity);

/* Round a requested capacity up to what the table will hold. */
uint32_t rl_table_capacity_round(uint32_t capacity);

/*
 * Clear every marker older than RL_MARK_TIMEOUT_NS (left by processes killed
 * while re-keying). Decisions clear the ones they meet; this is for the
 * agent's periodic maintenance and for `rlshimctl`. Returns how many.
 */
unsigned rl_table_sweep(struct rl_table *t, uint64_t now_ns);

/*
 * Check the invariants of the whole segment (for tests and `rlshimctl`):
 * the occupied prefix of every bucket, rule ids registered, states within
 * their algorithm's bounds, no marker older than RL_MARK_TIMEOUT_NS, no key
 * twice in a bucket, meta tags matching. Returns the number of violations
 * and describes the first in `why`.
 */
struct rl_table_check {
	uint32_t violations;
	uint32_t markers;    /* live markers seen (re-keying in progress) */
	uint32_t duplicates; /* keys present twice in one bucket */
	uint32_t unnamed;    /* keys whose bytes were never published (the
				claimer died first): not a violation, the
				slot just shows no name until re-keyed */
	char why[160];
};
int rl_table_check(struct rl_table *t, uint64_t now_ns,
		   struct rl_table_check *out);

#endif /* RL_TABLE_H */
