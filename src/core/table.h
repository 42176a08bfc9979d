/* SPDX-License-Identifier: MIT */
/*
 * table.h - the shared table: opening the segment, registering rules,
 * deciding over its slots, and the words of its header (counters, the
 * agent's corner, the configuration in force) as functions.
 *
 * The layout of the segment is shm.h's, private to the table code: the
 * agent, the shim and rlshimctl see only what is declared here. The words
 * read on every request (ban_gen, agent_flags, the counters) have inline
 * accessors over pointers the handle keeps, as cheap as the load itself.
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

#define RL_BANS 16384u                   /* ban entries, a power of two: holds
					    thousands at a low load */
#define RL_ASKS 256u                    /* strict decisions in flight */
#define RL_MARK_TIMEOUT_NS 200000000ull /* 200 ms: a dead re-keyer */
#define RL_KEPT_MAX 65536u              /* bytes of configuration text kept */

/* agent_flags bits */
#define RL_AGENT_SYNC 0x1ull       /* an agent syncs: count slot.sync_admitted */
#define RL_AGENT_STORE_DOWN 0x2ull /* the agent cannot reach its store */
#define RL_AGENT_XDP 0x4ull        /* the XDP dropper is attached */
#define RL_AGENT_STRICT 0x8ull     /* the agent answers asks (sync = strict) */
#define RL_AGENT_LEND 0x10ull      /* the agent answers lends (sync = async) */

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

/* A rule's tariff for plan `plan` (0, or one the rule has not: its rate). */
static inline const struct rl_algo *
rl_rule_cache_algo(const struct rl_rule_cache *rc, unsigned plan)
{
	return plan && plan <= rc->nplans ? &rc->plans[plan - 1] : &rc->algo;
}

/* Events counted host-wide in the header (rl_table_count). */
enum rl_count {
	RL_COUNT_EVICTIONS,      /* live keys displaced */
	RL_COUNT_OVERFLOWS,      /* decisions made without a slot */
	RL_COUNT_MARKS_CLEARED,  /* markers left by dead processes */
	RL_COUNT_BAN_REFUSALS,   /* connections and requests refused by a ban */
	RL_COUNT_BANS_ISSUED,    /* bans this host's maxretry issued */
	RL_COUNT_CONFIG_RELOADS, /* configurations applied after the first */
	RL_COUNT_AGENT_SYNCS,    /* the agent's sync rounds completed */
	RL_COUNTS
};

/*
 * The handle's fields are the table code's. The segment's parts are
 * pointers to types only shm.h completes; the header's words read on the
 * request path are also reached through `count`, `ban_gen` and
 * `agent_flags`, set at open, for the inline accessors below.
 */
struct rl_table {
	struct rl_shm_header *hdr;
	uint64_t size;
	struct rl_shm_rule *rules;
	struct rl_shm_shard *shards;
	struct rl_slot *slots;
	struct rl_slot_meta *meta;
	struct rl_shm_ban *bans;
	struct rl_shm_ask *asks;
	char *kept;
	uint64_t bucket_mask;
	uint64_t seed[2];
	uint64_t sip[RL_MAX_RULES][4];               /* SipHash's state keyed
							for each rule's keys
							(rl_slot_key) */
	struct rl_rule_cache *cache[RL_MAX_RULES];   /* read with acquire */
	struct rl_rule_cache from_segment[RL_MAX_RULES];
	int from_segment_state[RL_MAX_RULES];        /* 0 empty, 1 filling,
							2 filled */
	_Atomic uint64_t *count[RL_COUNTS];
	_Atomic uint64_t *ban_gen;
	_Atomic uint64_t *agent_flags;
	struct rl_hold_note *held;                   /* the agent's only:
							rl_table_track_held */
};

/* What a slot's state holds back beyond the key's debt (a grant's or a
 * lend's hold, RL_PROVISIONAL_HELD), in this process only: the agent's,
 * so that its collect can tell the store what the key really owes. */
struct rl_hold_note {
	_Atomic uint64_t tag; /* the key it is of: 0 none */
	_Atomic uint64_t ns;
	_Atomic uint64_t lent; /* requests lent since the last collect: the
				  sync answering it does not know of them */
};

/* ---- the header's words ------------------------------------------------------- */

/* One more `what`: a request, a ban, a reload. */
static inline void rl_table_count(struct rl_table *t, enum rl_count what)
{
	atomic_fetch_add_explicit(t->count[what], 1, memory_order_relaxed);
}

static inline uint64_t rl_table_counted(const struct rl_table *t,
					enum rl_count what)
{
	return atomic_load_explicit(t->count[what], memory_order_relaxed);
}

/* +1 whenever a live ban comes, goes or changes: a connection re-checks
 * its client, the agent re-mirrors the bans into XDP, when it moves. */
static inline uint64_t rl_table_ban_gen(const struct rl_table *t)
{
	return atomic_load_explicit(t->ban_gen, memory_order_acquire);
}

/* RL_AGENT_*: what the host's agent does (syncs, store down, XDP). */
static inline uint64_t rl_table_agent_flags(const struct rl_table *t)
{
	return atomic_load_explicit(t->agent_flags, memory_order_relaxed);
}

/* Set the flags `set`, then clear `clear`, in one atomic step. */
void rl_table_agent_flags_change(struct rl_table *t, uint64_t set,
				 uint64_t clear);

/* Slots in the segment. */
uint32_t rl_table_capacity(const struct rl_table *t);

/* One more ban issued by rule `rule`'s maxretry: the host's count and the
 * rule's. */
void rl_table_count_ban(struct rl_table *t, unsigned rule);

/* One more request refused by rule `rule` because the store is down
 * (on_store_down = closed), no decision of the table's behind it: counted
 * denied, and in the rule's store-down refusals. `denied_already`: the
 * table counted the denial (a strict rule's own decision). */
void rl_table_count_store_down(struct rl_table *t, unsigned rule,
			       int denied_already);

/* The name rule `rule` was registered with, "" if none. */
const char *rl_table_rule_name(const struct rl_table *t, unsigned rule);

/* The host agent's (rlshimd) corner of the header, as read. */
struct rl_table_agent {
	uint64_t pid;                 /* 0: none running */
	uint64_t heartbeat_ns;        /* CLOCK_MONOTONIC, 0: never started */
	uint64_t last_sync_ns;        /* CLOCK_MONOTONIC, 0: never synced */
	uint64_t flags;               /* RL_AGENT_* */
	uint64_t store_down_since_ms; /* Unix ms, 0 when up */
	uint64_t syncs;               /* sync rounds completed */
	uint32_t hosts_alive;         /* at the last sync */
	uint32_t sync_interval_ms;
	uint32_t masters;             /* cluster: the map's masters, else 0 */
	uint32_t masters_down;        /* cluster: of them, unreachable */
};
void rl_table_agent_read(const struct rl_table *t, struct rl_table_agent *out);
uint64_t rl_table_agent_pid(const struct rl_table *t);
uint64_t rl_table_agent_heartbeat(const struct rl_table *t);
uint32_t rl_table_agent_interval_ms(const struct rl_table *t);

/* What the agent writes there. */
void rl_table_agent_set_pid(struct rl_table *t, uint64_t pid);
void rl_table_agent_beat(struct rl_table *t, uint64_t now_ns);
void rl_table_agent_set_interval(struct rl_table *t, uint32_t ms);
void rl_table_agent_set_hosts(struct rl_table *t, uint32_t hosts);
void rl_table_agent_store_down(struct rl_table *t, uint64_t since_ms);
/* Cluster: `down` of the map's `masters` unreachable (0, 0 otherwise). */
void rl_table_agent_set_masters(struct rl_table *t, uint32_t masters,
				uint32_t down);
/* A sync round completed at `now_ns`: the store is up. */
void rl_table_agent_synced(struct rl_table *t, uint64_t now_ns);

/* Claim the starting of an agent: 1 for the one caller of the host that
 * may start one now, none having claimed it within `retry_ns`. */
int rl_table_agent_spawn_claim(struct rl_table *t, uint64_t now_ns,
			       uint64_t retry_ns);

/* The XDP dropper the agent attached, by kernel ids: what a reader in
 * another mount namespace (`ip netns exec` mounts its own /sys, without
 * the pins) opens the maps by (BPF_MAP_GET_FD_BY_ID), and the mode each
 * interface actually got. */
enum rl_xdp_id {
	RL_XDP_ID_BANS_V4, RL_XDP_ID_BANS_V6, RL_XDP_ID_HOSTS_V4,
	RL_XDP_ID_HOSTS_V6, RL_XDP_ID_DROPS, RL_XDP_ID_STATS,
	RL_XDP_NIDS = 8,               /* room kept in the segment */
};
enum rl_xdp_attached {
	RL_XDP_ATTACHED_NONE = 0,      /* not attached there (or no record) */
	RL_XDP_ATTACHED_NATIVE,
	RL_XDP_ATTACHED_GENERIC,
	RL_XDP_ATTACHED_OFFLOAD,
};
#define RL_TABLE_XDP_IFACES 8u         /* at least RL_MAX_IFACES */
struct rl_table_xdp {
	uint32_t prog_id;              /* 0: none recorded */
	uint32_t map_ids[RL_XDP_NIDS];
	uint32_t nifaces;              /* the [xdp] interfaces, in order */
	uint32_t ifindex[RL_TABLE_XDP_IFACES];
	uint32_t attached[RL_TABLE_XDP_IFACES]; /* enum rl_xdp_attached */
};
void rl_table_xdp_read(const struct rl_table *t, struct rl_table_xdp *out);
/* The agent's: record `x`, or clear the record (NULL). */
void rl_table_xdp_record(struct rl_table *t, const struct rl_table_xdp *x);
/*
 * The servers' hold on segment `name`: an OFD read lock on the first byte
 * of its file, through an fd of the process's own (close-on-exec). Forked
 * workers share it (one open file description), and the kernel drops it
 * when the last process that has it exits: an agent started with
 * --idle-exit sees by rl_table_held() whether any server still uses the
 * segment. Call with h->fd = -1 first; later calls check, at the cost of
 * an fstat, that h->fd is still that file (the application may have closed
 * it, its number now another file's, which is left alone) and take the
 * hold again if not. 0 or -errno.
 */
struct rl_table_hold {
	int fd;
	uint64_t dev, ino;
};
int rl_table_hold(const char *name, struct rl_table_hold *h);

/* 1 if some open file description other than `fd`'s (the agent's own
 * open of the segment's file) has the servers' hold on it, 0 if none,
 * -errno if that cannot be known. */
int rl_table_held(int fd);

/* The configuration in force on the host: the stamp (rl_config_stamp) of
 * the file the processes apply, and of one they refused, so that a change
 * is logged once per host however many processes see it. */
struct rl_table_config {
	uint64_t stamp;
	uint64_t since_ms;            /* Unix ms it came into force */
	uint64_t bad_stamp;
	uint64_t bad_since_ms;
};
void rl_table_config_read(const struct rl_table *t,
			  struct rl_table_config *out);
/* The file at `stamp` is applied, or refused, here: 1 if this process is
 * the first of the host to say so (the time is then recorded), else 0. */
int rl_table_config_apply(struct rl_table *t, uint64_t stamp);
int rl_table_config_refuse(struct rl_table *t, uint64_t stamp);

/* What a reload changed that the processes running cannot apply: set by
 * the reload (bits are added, the time is the first's), cleared when a
 * server process starts with the file. */
#define RL_RESTART_PORTS 1u
#define RL_RESTART_SHM 2u
#define RL_RESTART_CAPACITY 4u
void rl_table_restart_needed(struct rl_table *t, uint64_t what);
void rl_table_restart_done(struct rl_table *t);
uint64_t rl_table_restart_read(const struct rl_table *t, uint64_t *since_ms);

/* Where the agent logs (it says at its start), into buf (NUL-terminated,
 * "" if not known). */
void rl_table_agent_set_log(struct rl_table *t, const char *where);
void rl_table_agent_log(const struct rl_table *t, char *buf, size_t len);

/* The agent's store_down_since_ms (0: up) is news to the servers' logs:
 * 1 if this process is the one to say it (*since_ms: it), else 0. */
int rl_table_store_news(struct rl_table *t, uint64_t *since_ms);

/* ---- the agent's side (rlshimd) --------------------------------------------- */

/* From now on, this process (the agent) notes how much of each token
 * bucket's state a grant or a lend holds back (struct rl_hold_note), for the
 * collect's held_ns. 0, or -ENOMEM. */
int rl_table_track_held(struct rl_table *t);

/* A key with admissions (or refusals) since the last sync. */
struct rl_sync_item {
	uint32_t index;     /* slot */
	uint64_t tag;       /* the key's identity in that slot */
	unsigned rule;
	uint32_t admitted;  /* cost admitted since the last collect */
	uint32_t returned;  /* cost given back since, admitted before it */
	uint8_t denied;     /* some request was refused since */
	uint8_t plan;       /* 0: the rule's rate; n: plan n-1 */
	uint8_t key_len;
	uint8_t truncated;
	uint8_t key[RL_KEY_MAX];
	uint64_t debt_ns;   /* what a token bucket owes beyond now here */
	uint8_t provisional; /* ... part of which is a share held back */
	uint8_t held_known; /* provisional, and how much is held is known: */
	uint64_t held_ns;   /* debt_ns less this is what the key owes */
	uint64_t window;    /* a window's: the index of the current one on Unix
			       time, the store's name for it (rl_window_index) */
};

/*
 * Call `fn` for every slot whose key admitted or refused something since
 * the last collect, or that still owes at `now_ns` (a token bucket not full,
 * a window with a count in the current one: other hosts' use of it must
 * reach it), taking (swapping to 0) its count:
 * what is collected is the caller's to account for. Returns what `fn`
 * returned if non-zero.
 */
int rl_table_sync_collect(struct rl_table *t, uint64_t now_ns,
			  int (*fn)(const struct rl_sync_item *it, void *arg),
			  void *arg);


/*
 * The same for a fixed or sliding window: the store counted `cur` requests
 * of key `tag` from all hosts in window `idx` (rl_window_index), and `prev`
 * in the one before (sliding), for everything collected so far. The state
 * is set to those counts plus what was admitted here since the collect,
 * each count only ever raised, except where the state is a share (a fresh
 * key's, decide.c, or, with N hosts alive, what every sync sets): then
 * this host takes ceil(R / N) of the R the store says are left (none of
 * the other hosts' shares counted as spent at its first sync of the key in
 * a window and in a window's first two rounds), and a sliding window
 * carries ceil(prev / N) of the previous count, so that it gains its share
 * of what that count's falling weight frees. Counts for the window just
 * over only raise the previous count. Returns 0, or -ESTALE if the slot
 * holds another key now.
 */
int rl_table_sync_window(struct rl_table *t, uint32_t index, uint64_t tag,
			 uint64_t idx, uint64_t cur, uint64_t prev,
			 uint64_t now_ns);

/*
 * The store says key `tag` in slot `index` owes `debt_ns` beyond `now_ns`
 * for everything collected so far (what was admitted here since the
 * collect comes on top), and grants this host `grant` of the requests left
 * in its bucket until its next sync (the other hosts hold theirs: sync.c),
 * less what it admitted since the collect. The key's state leaves this
 * host that many, holding the rest back. It only ever raises the state,
 * except one that holds part of the bucket back (a fresh key's share,
 * decide.c, or a grant's): the store's then replaces it. Returns 0, or
 * -ESTALE if the slot holds another key now.
 */
int rl_table_sync_grant(struct rl_table *t, uint32_t index, uint64_t tag,
			uint64_t debt_ns, uint64_t grant, uint64_t now_ns);

/*
 * The store is down: charge the key in slot `index` `extra_ns` more (what
 * the other hosts are assumed to admit alongside), so that each host keeps
 * to its share of the rate; a window is charged the same in requests
 * (extra_ns / the emission interval) in its current window. Returns 0 or
 * -ESTALE.
 */
int rl_table_sync_charge(struct rl_table *t, uint32_t index, uint64_t tag,
			 uint64_t extra_ns, uint64_t now_ns);

/*
 * Put the key in slot `index` on plan `plan` (0: the rule's own rate),
 * carrying its debt over in requests, not in time: a key that used 100
 * requests of one tariff has used 100 of the next (at most the whole
 * bucket), a request partly repaid counting as the part still owed.
 * Returns 0 or -ESTALE.
 */
int rl_table_set_plan(struct rl_table *t, uint32_t index, uint64_t tag,
		      unsigned plan, uint64_t now_ns);

/*
 * The store says key `key` of rule `rule` is on plan `plan` (0: the rule's
 * own rate), maybe before this host has seen it: the agent's mirror of the
 * plans, so that the key's first request here is judged by its plan. A key
 * with a slot is re-planned as by rl_table_set_plan(); a planned key
 * without one is given an empty or idle slot (full bucket, the plan set),
 * never one a key in use holds, and a key on `rate` without one needs
 * none. `key` is the bytes the shim decides the key by. Returns 0, -ENOSPC
 * when its bucket has no such slot (the next scan tries again), -ESTALE or
 * -EINVAL for a plan or rule the table does not know.
 */
int rl_table_plan_ahead(struct rl_table *t, unsigned rule, const void *key,
			size_t len, unsigned plan, uint64_t now_ns);

/*
 * The store says key `key` of rule `rule`, which another host used, owes
 * `debt_ns` at the interval `ei_ns` it was counted at: the agent's mirror
 * of the keys in use anywhere, so that a host that meets a key the others
 * have used starts from the store's state, not from a share of a full
 * bucket. Converted to this host's tariff for the key, then applied as by
 * rl_table_sync_grant(); a key without a slot takes an empty or idle one,
 * never one a key in use holds. Returns 0, -ENOSPC (no such slot), -ESTALE
 * or -EINVAL.
 */
int rl_table_sync_mirror(struct rl_table *t, unsigned rule, const void *key,
			 size_t len, uint64_t debt_ns, uint64_t ei_ns,
			 uint64_t now_ns);

/*
 * Forget every key's state of rule `rule` here: a strict rule's, decided
 * here while the store was down, is not the store's, and would refuse what
 * the store admits. Its keys ask the store again from their next request.
 */
void rl_table_rule_forget(struct rl_table *t, unsigned rule);

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

/* Where (rule, key) lives, for a give-back long after the key's bytes are
 * gone (count_status: when the answer comes), and when the take it gives
 * back stops weighing in the key's state: `until_ns`, the take's time plus
 * the reset it answered (its rl_result's reset_after_ns). rl_table_key_ref()
 * leaves it 0: unknown, given back as rl_table_give_back() gives back. */
struct rl_key_ref {
	uint64_t tag;
	uint64_t bucket;
	uint64_t until_ns;
};
void rl_table_key_ref(const struct rl_table *t, unsigned rule, const void *key,
		      size_t key_len, struct rl_key_ref *out);
/* rl_table_give_back, by a reference: with its `until_ns`, only while
 * the take still weighs in the key's state (the window it was taken
 * in, or for a sliding window the next; a bucket not full since), so that
 * it never cancels a later request's charge. 0, -EINVAL (no such rule) or
 * -ENOENT (the key has lost its slot, or the take has stopped weighing:
 * nothing to give back). */
int rl_table_give_back_ref(struct rl_table *t, unsigned rule,
			   const struct rl_key_ref *ref, uint32_t cost,
			   uint64_t now_ns);

/* The application answered, with `status`, a request rule `rule` counted,
 * `service_ns` after its head was read. */
void rl_table_count_answer(struct rl_table *t, unsigned rule, unsigned status,
			   uint64_t service_ns);

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

/* ---- sync = strict (ask.c) ---------------------------------------------------- */

/*
 * Take as rl_table_take_uncounted, for a rule whose admissions are decided
 * in the store. The key's state here is the store's as last answered: a
 * request it refuses is refused here, without a round trip (returns 1). One
 * it would admit is asked of the agent, which decides it in the store, and
 * the answer is awaited until `deadline_ns` (CLOCK_MONOTONIC): returns 0,
 * with the store's decision in *out and its state for the key here. Returns
 * -EAGAIN when the store could not decide (no agent answering asks, every
 * ask in flight, no slot for the key, the deadline passed, the store failed):
 * *out is then the decision made here, and taken here if it allowed (the
 * caller gives it back for on_store_down = closed). errno is kept.
 */
int rl_table_take_strict(struct rl_table *t, unsigned rule, const void *key,
			 size_t key_len, uint32_t cost, uint64_t now_ns,
			 uint64_t deadline_ns, struct rl_result *out,
			 struct rl_slot_hint *hint);

/*
 * Take as rl_table_take_uncounted, for a sync = async token bucket whose
 * agent lends (RL_AGENT_LEND, the store not known down): where the
 * decision here would start the key from a blind share of its bucket (new
 * to this host, other hosts alive) or refuse it from this host's part of
 * what the key has left (its grant spent), the agent is asked for more of
 * what the key has left in the store (a lend), and the answer awaited
 * until `deadline_ns`, as a strict ask's; then decided from the state the
 * lend left. A key within its grant is decided here at once, as ever.
 * Returns 0 decided here (no ask, or after the lend), -EAGAIN when a lend
 * was wanted but not had (no agent lending, every ask in flight, the
 * deadline passed, the store failed): decided then as
 * rl_table_take_uncounted decides, so on_store_down holds. errno is kept.
 */
int rl_table_take_lend(struct rl_table *t, unsigned rule, const void *key,
		       size_t key_len, uint32_t cost, uint64_t now_ns,
		       uint64_t deadline_ns, struct rl_result *out,
		       struct rl_slot_hint *hint);

/* rl_ask_item.kind */
enum { RL_ASK_DECIDE = 0, RL_ASK_LEND = 1 };

/* An ask, as the agent takes it. */
struct rl_ask_item {
	uint32_t id, word;            /* which ask, which use of it */
	uint32_t kind;                /* RL_ASK_DECIDE (strict) or _LEND */
	unsigned rule;                /* rule id */
	uint32_t index;               /* the key's slot, while it holds tag */
	uint64_t tag;
	uint32_t cost;
	uint8_t plan;                 /* the slot's, 0: the rule's rate */
	uint8_t key_len;
	uint8_t truncated;
	uint8_t key[RL_KEY_MAX];
};

/* The bell the shims ring at every ask; wait while it still says `bell`,
 * for `timeout_ns` at most (a post, a signal or the timeout ends it). */
uint32_t rl_table_asks_bell(const struct rl_table *t);
void rl_table_asks_wait(struct rl_table *t, uint32_t bell, uint64_t timeout_ns);

/* Take every posted ask, `fn` for each (non-zero stops). Returns how many. */
unsigned rl_table_asks_take(struct rl_table *t,
			    int (*fn)(const struct rl_ask_item *it, void *arg),
			    void *arg);

/*
 * The store's answer to ask `it`: allowed or not, and the key's state
 * after it, as a state word of the key's algorithm on this host's clock
 * (a token bucket's: now + what it owes, this request included when
 * allowed). The key's state here becomes that, and the shim is woken. Or
 * no answer: the shim applies on_store_down. The same thread must answer,
 * fail and sweep.
 */
void rl_table_ask_answer(struct rl_table *t, const struct rl_ask_item *it,
			 int allowed, uint64_t state);
void rl_table_ask_fail(struct rl_table *t, const struct rl_ask_item *it);

/*
 * The store's answer to lend `it`: `granted` more requests of the key's
 * bucket for this host (taken from what the key had left in the store,
 * and recorded there as this host's), and until when the key owes in the
 * store (`floor_ns`, on this host's clock). The key's state here gains
 * them, out of what it held back (a key that had
 * no state in use here starts from none but them); granted nothing, it
 * owes at least the store's debt and holds nothing back any more (its
 * refusals stay here until the next sync). The shim is woken.
 */
void rl_table_ask_lent(struct rl_table *t, const struct rl_ask_item *it,
		       uint64_t granted, uint64_t floor_ns, uint64_t now_ns);

/* Free the asks that have not moved since the last call (`seen`, zeroed
 * at first): left by a process that died. Call it far less often than any
 * wait lasts. */
void rl_table_asks_sweep(struct rl_table *t, uint32_t seen[RL_ASKS]);

/*
 * With an agent syncing (RL_AGENT_SYNC), each denial rl_table_fail counts
 * is also owed to the count across hosts: rl_table_fails_collect calls
 * `fn` for every key with denials since the last collect, with their
 * number, taking (swapping to 0) it. Returns what `fn` returned if
 * non-zero.
 */
struct rl_fail_item {
	uint32_t index;     /* slot */
	uint64_t tag;
	unsigned rule;
	uint32_t fails;     /* denials since the last collect */
	uint8_t key_len;
	uint8_t key[RL_KEY_MAX];
};
int rl_table_fails_collect(struct rl_table *t,
			   int (*fn)(const struct rl_fail_item *it, void *arg),
			   void *arg);

/*
 * Forget the denials of `key` under rule `rule`: its count and what is owed
 * to the count across hosts (a ban, from here or elsewhere, took them into
 * account). Returns 0, -ENOENT when the key has no slot, -EINVAL for a rule
 * the table does not know.
 */
int rl_table_fail_forget(struct rl_table *t, unsigned rule, const void *key,
			 size_t key_len, uint64_t now_ns);

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

/*
 * One key's state, as rlshimctl show reads it: the view of the slot of
 * `key` (the bytes the shim decides it by) under rule `rule`. Returns 1
 * when the key holds live state here, 0 when it is new here (never seen,
 * evicted, or its state lapsed): *v is then what its first request would
 * see, a full bucket of the rule's own rate (v->index UINT32_MAX), and
 * -EINVAL for a rule the table does not know.
 */
int rl_table_key_view(struct rl_table *t, unsigned rule, const void *key,
		      size_t len, uint64_t now_ns, struct rl_slot_view *v);

/*
 * Give `key` of rule `rule` a full bucket again (rlshimctl reset): its
 * state here is forgotten by a CAS, as every change of a slot, and what it
 * admitted since the agent's last collect is not pushed to the store. Its
 * plan and its denials towards maxretry stay. Returns 1 when the key had
 * live state, 0 when there was nothing to reset, -EINVAL for a rule the
 * table does not know.
 */
int rl_table_key_reset(struct rl_table *t, unsigned rule, const void *key,
		       size_t len, uint64_t now_ns);

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
	struct rl_err why;    /* the first violation */
};
int rl_table_check(struct rl_table *t, uint64_t now_ns,
		   struct rl_table_check *out);

#endif /* RL_TABLE_H */
