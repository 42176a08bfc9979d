/* SPDX-License-Identifier: MIT */
/*
 * shm.h - the layout of the shared segment, /dev/shm/<name>: the table
 * code's own (segment, rules, decisions, bans, kept text and the unit
 * tests that poke it). Everyone else goes through table.h's functions, so
 * that the layout can change without them.
 *
 *
 *   +---------------------------+ 0
 *   | struct rl_shm_header      |   magic, version, size, seed, counters
 *   +---------------------------+ RL_SHM_HEADER_SIZE
 *   | struct rl_shm_rule [64]   |   the rules registered by any process
 *   +---------------------------+
 *   | struct rl_shm_shard [32]  |   per-CPU counters per rule: decisions, answers
 *   +---------------------------+
 *   | struct rl_slot [cap]      |   key tag + 64-bit state, 16 per bucket
 *   +---------------------------+
 *   | struct rl_slot_meta [cap] |   the key bytes, for rlshimctl and sync
 *   +---------------------------+
 *   | struct rl_shm_ban [16384] |   bans
 *   +---------------------------+
 *   | struct rl_shm_ask [256]   |   sync = strict: decisions asked of the
 *   +---------------------------+   agent (ask.c)
 *   | char [RL_KEPT_MAX]        |   the configuration text in force (kept.c)
 *   +---------------------------+ size
 *
 * Fixed-width fields only, regions page-aligned; the layout test pins every
 * size and offset. Any change to it bumps RL_SHM_VERSION.
 *
 * The protocol (see slot.c for the why):
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
#ifndef RL_SHM_H
#define RL_SHM_H

#include <stdatomic.h>
#include <stdint.h>

#include "table.h"

#define RL_SHM_MAGIC 0x314d48534c52ull /* "RLSHM1" little-endian */
#define RL_SHM_VERSION 5u
#define RL_SHM_HEADER_SIZE 4096u
#define RL_SHM_ALIGN 4096u
#define RL_BUCKET_SLOTS 16u
#define RL_SHARDS 32u

/* slot.sync_admitted: the cost admitted since the agent's last collect
 * (24 bits), the cost given back since that was admitted before it (7 bits,
 * saturating: count_status gives back when the answer comes, often after
 * the sync), and this bit for "refused since" */
#define RL_SYNC_DENIED 0x80000000u
#define RL_SYNC_COUNT 0x00FFFFFFu
#define RL_SYNC_RETURNED_SHIFT 24
#define RL_SYNC_RETURNED (0x7Fu << RL_SYNC_RETURNED_SHIFT)

/* What sync_admitted word `w` adds to the store's figure: admitted less
 * given back. */
static inline int64_t rl_sync_net(uint32_t w)
{
	return (int64_t)(w & RL_SYNC_COUNT) -
	       (int64_t)((w & RL_SYNC_RETURNED) >> RL_SYNC_RETURNED_SHIFT);
}
/* slot.provisional: 0, the state is the key's; else it holds part of the
 * bucket back, and the next sync replaces it. RL_PROVISIONAL_FRESH is
 * decide.c's share of a key new to this host (or a key mirrored from the
 * others before this host's grant of it); RL_PROVISIONAL_HELD what a sync
 * left this host (a grant, a window's share); RL_PROVISIONAL_DRY a token
 * bucket's state held back as HELD, for which the store has just lent
 * nothing (ask.c): refused here without asking again until the next sync
 * replaces it. Held back all the same: never reported as the key's debt. */
#define RL_PROVISIONAL_FRESH 1u
#define RL_PROVISIONAL_HELD 2u
#define RL_PROVISIONAL_DRY 3u

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
	uint64_t created_mono_ns;     /* with created_unix_ms, the offset */
	uint64_t created_unix_ms;     /* that puts windows on Unix time */
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
	/* sync = strict (ask.c): the asks, and the word the agent waits on
	 * for them (+1 at every ask posted). */
	uint64_t asks_off;
	uint32_t asks_cap;            /* RL_ASKS */
	_Atomic uint32_t asks_bell;
	/* The XDP dropper as the agent attached it (xdp_loader.c), for a
	 * reader that cannot see its pins (another mount namespace): the
	 * program's id, the ids of the maps rlshimctl reads (RL_XDP_ID_*),
	 * and per [xdp] interface its index and the mode it got
	 * (RL_XDP_ATTACHED_*). All 0 while none is attached. Taken from
	 * reserved2, which an older agent leaves 0 (none recorded): no
	 * version change. */
	_Atomic uint32_t xdp_prog_id;
	_Atomic uint32_t xdp_nifaces;
	_Atomic uint32_t xdp_map_ids[RL_XDP_NIDS];
	_Atomic uint32_t xdp_ifindex[RL_TABLE_XDP_IFACES];
	_Atomic uint32_t xdp_attached[RL_TABLE_XDP_IFACES];
	/* redis-cluster://: the masters of the agent's slot map and how many
	 * of them it cannot reach (0 and 0 otherwise); from reserved2 too. */
	_Atomic uint32_t store_masters;
	_Atomic uint32_t store_masters_down;
	/* Where the agent logs ("/run/rlshim/rlshimd-NAME.log", "syslog",
	 * "stderr", "the journal"), written as it starts, for status; from
	 * reserved2 too ("" from an older agent: not known). */
	char agent_log[256];
	/* What a reload changed that only a restart applies (RL_RESTART_*),
	 * and since when (Unix ms); 0 again when a server process starts
	 * with the file. From reserved2. */
	_Atomic uint64_t restart_needed;
	_Atomic uint64_t restart_since_ms;
	/* The store's state the servers' logs last said: the agent's
	 * store_down_since_ms they said it down at, 0 for up (the servers'
	 * process that moves it says the change). From reserved2. */
	_Atomic uint64_t store_said;
	uint8_t reserved2[RL_SHM_HEADER_SIZE - 776];
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
	_Atomic uint64_t store_down;  /* its refusals for the store being
					 down (on_store_down = closed) */
	uint8_t reserved[16];         /* to 256 */
};

/* One shard of counters; a process adds to the shard of its CPU. */
struct rl_shm_counter {
	_Atomic uint64_t allowed;
	_Atomic uint64_t denied;
};
/* The answers to requests a rule counted (rl_table_count_answer). */
struct rl_shm_answers {
	_Atomic uint64_t classes[5];  /* final answers, 1xx..5xx */
	_Atomic uint64_t service[RL_SERVICE_BUCKETS]; /* by service time */
	_Atomic uint64_t service_sum_us;
};
struct rl_shm_shard {
	struct rl_shm_counter rule[RL_MAX_RULES];
	struct rl_shm_answers answers[RL_MAX_RULES];
};

/* 32 bytes: two slots per cache line, a bucket is 512 bytes. */
struct rl_slot {
	_Atomic uint64_t key;         /* 0 = empty, else the tag */
	_Atomic uint64_t state;       /* algorithm state, or a marker */
	_Atomic uint32_t sync_admitted; /* cost admitted since the agent's last
					   sync (the agent swaps it to 0) */
	_Atomic uint8_t plan;         /* 0: the rule's rate; n: its plan n-1
					 (set by the agent from the store) */
	_Atomic uint8_t provisional;  /* 1: the state is this host's share of
					 a key new to it, until the agent
					 brings the store's (decide.c);
					 RL_PROVISIONAL_HELD: a window's,
					 part of it held back by a sync */
	_Atomic uint16_t sync_fails;  /* denials counted towards maxretry
					 since the agent's last collect, for
					 the count across hosts (saturates;
					 the agent swaps it to 0) */
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

/*
 * 64 bytes: a decision a shim asks the agent to make in the store (sync =
 * strict). `word` is the futex word: a sequence number above the state,
 * +1 at every claim, so that an ask left half-done by a dead process is
 * told from a new one (ask.c).
 */
#define RL_ASK_STATE_BITS 4
#define RL_ASK_STATE_MASK ((1u << RL_ASK_STATE_BITS) - 1)

enum rl_ask_state {
	RL_ASK_FREE = 0,
	RL_ASK_FILLING = 1,           /* claimed by a shim, being written */
	RL_ASK_POSTED = 2,            /* for the agent to take */
	RL_ASK_TAKEN = 3,             /* sent to the store */
	RL_ASK_DONE = 4,              /* answered: `allowed`, `state` */
	RL_ASK_FAILED = 5,            /* the store did not answer */
	RL_ASK_ABANDONED = 6,         /* the shim stopped waiting */
};

struct rl_shm_ask {
	_Atomic uint32_t word;        /* seq << RL_ASK_STATE_BITS | state */
	uint32_t rule;                /* rule id */
	uint32_t index;               /* the key's slot ... */
	uint32_t cost;
	uint64_t tag;                 /* ... while it holds this key */
	uint32_t allowed;             /* the answer (a lend: what it gave) */
	uint32_t kind;                /* RL_ASK_DECIDE or RL_ASK_LEND (0 in
					 segments before lends: a decision) */
	uint64_t state;               /* the key's state after, as the store
					 has it (the slot's, on this host's
					 clock) */
	uint8_t reserved[24];
};

_Static_assert(sizeof(struct rl_shm_header) == RL_SHM_HEADER_SIZE,
	       "header is one page");
_Static_assert(sizeof(struct rl_shm_rule) == 256, "rule entry size");
_Static_assert(sizeof(struct rl_slot) == 32, "slot size");
_Static_assert(sizeof(struct rl_slot_meta) == 64, "slot meta size");
_Static_assert(sizeof(struct rl_shm_ban) == 64, "ban entry size");
_Static_assert(sizeof(struct rl_shm_ask) == 64, "ask entry size");

#endif /* RL_SHM_H */
