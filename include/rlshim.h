/* SPDX-License-Identifier: MIT */
/*
 * rlshim.h - the limiter core's public C API.
 *
 * The core works without the shim, for programs that can be changed. It has
 * two layers:
 *
 *   - pure steps (rl_gcra_step and the window variants): no clock, no shared
 *     memory, integer nanoseconds, so anyone can check the arithmetic;
 *   - the shared table (rl_table_*): a fixed-size, lock-free segment in
 *     /dev/shm that every process on the host attaches to, so that they all
 *     draw from one budget per key.
 *
 * Every function that can fail returns 0 or a negative errno value; objects
 * come back through an out-parameter. Where an errno is not enough, the
 * function also takes a `struct rl_err *` (NULL: do not say) and writes the
 * reason there, one line. Nothing here allocates after
 * rl_table_open() returns, and nothing takes a lock.
 */
#ifndef RL_RLSHIM_H
#define RL_RLSHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors -------------------------------------------------------------- */

/*
 * Why a call failed, in one line ("file:line: message" at most), in a buffer
 * the caller owns: the one way the core reports an error's text. It is set
 * only when the call fails.
 */
#define RL_ERR_MAX 512
struct rl_err {
	char msg[RL_ERR_MAX];
};

/* ---- rates and results -------------------------------------------------- */

/*
 * A rate: `count` events per `period_ns`, in a bucket of `burst` events.
 * The emission interval (the spacing of requests at the steady rate) is
 * period_ns / count nanoseconds.
 */
struct rl_rate {
	uint64_t period_ns;
	uint32_t count;
	uint32_t burst;
};

/*
 * The outcome of one decision.
 *   allowed         1 if the request may pass, 0 if it is over the limit
 *   limit           the bucket size (burst) for GCRA, the per-window limit
 *                   for the window algorithms
 *   remaining       requests of cost 1 that would pass right now
 *   retry_after_ns  0 when allowed; else the wait until this cost passes
 *   reset_after_ns  the time until the bucket is full (window: resets)
 */
struct rl_result {
	int allowed;
	uint32_t limit;
	uint32_t remaining;
	uint64_t retry_after_ns;
	uint64_t reset_after_ns;
};

/* ---- pure steps ---------------------------------------------------------- */

/*
 * GCRA, with go-redis/redis_rate's semantics. *tat_ns is the key's
 * theoretical arrival time (0 for a new key) and is advanced only when the
 * request is allowed with cost > 0. cost 0 is a peek. `rate` must have
 * count >= 1, burst >= 1 and period_ns >= count; the caller validates.
 * One refinement: a busy key that comes back less than 2 ms after its
 * turn keeps its cadence instead of restarting from now, so that under
 * load the admitted rate is the configured one even with burst 1. Over any
 * interval t a key is admitted at most burst + (t + 2 ms) x rate.
 */
void rl_gcra_step(uint64_t *tat_ns, const struct rl_rate *rate, uint32_t cost,
		  uint64_t now_ns, struct rl_result *out);

/*
 * Fixed window: at most rate->count per aligned window of rate->period_ns.
 * *state packs (window index, count); 0 is a new key.
 */
void rl_window_fixed_step(uint64_t *state, const struct rl_rate *rate,
			  uint32_t cost, uint64_t now_ns, struct rl_result *out);

/*
 * Sliding window (Cloudflare's weighted previous window): the estimate is
 * prev * (period - elapsed) / period + cur. *state packs (window index, cur,
 * prev); 0 is a new key. rate->count must be <= RL_SLIDING_MAX.
 */
void rl_window_sliding_step(uint64_t *state, const struct rl_rate *rate,
			    uint32_t cost, uint64_t now_ns,
			    struct rl_result *out);

#define RL_SLIDING_MAX 0xFFFFFu /* 20-bit counters in the packed state */

/* ---- the shared table ---------------------------------------------------- */

enum rl_algorithm {
	RL_ALGO_GCRA = 0,
	RL_ALGO_FIXED_WINDOW = 1,
	RL_ALGO_SLIDING_WINDOW = 2,
};

#define RL_MAX_RULES 64      /* rule ids are 0..63 in a segment */
#define RL_RULE_NAME_MAX 32  /* including the terminating NUL */
#define RL_KEY_MAX 48        /* key bytes kept verbatim; longer keys are
				 stored as a prefix plus a digest */
#define RL_MAX_PLANS 8       /* tariffs a rule may have */

struct rl_table;

/* rl_table_open() flags */
#define RL_TABLE_CREATE 0x1u /* create the segment if it does not exist */
#define RL_TABLE_OWNED 0x2u  /* only a segment of this process's own user,
				root included (without it, root may attach to
				any user's: the operator's tools) */

/*
 * Attach to the segment /dev/shm/<name>, creating it with room for
 * `capacity` keys when RL_TABLE_CREATE is set and it does not exist. The
 * first process creates it with O_CREAT|O_EXCL and initialises it; the
 * others wait (briefly, bounded) for that initialisation and then check the
 * header: magic, layout version, size against fstat, owner and mode. A
 * segment that fails a check is refused with -EPROTO, -EBADF (wrong size,
 * truncated), -EPERM (writable by others, or owned by another user than
 * this process's: root attaches to any user's unless RL_TABLE_OWNED) or -ETIMEDOUT
 * (never initialised by a live creator), and `err` (may be NULL) says why.
 * `capacity` is ignored when attaching to an existing segment. On success
 * *out owns a mapping released by rl_table_close().
 */
int rl_table_open(const char *name, uint32_t capacity, unsigned flags,
		  struct rl_table **out, struct rl_err *err);

/* Unmap and free. Accepts NULL. The segment itself stays. */
void rl_table_close(struct rl_table *t);

/* Remove /dev/shm/<name>. Attached processes keep their mapping. */
int rl_table_unlink(const char *name);


/*
 * A rule's identity in the segment: its name and algorithm. Registering it
 * again (from any process) returns the same id, so its keys keep their
 * state across reloads; the rate (and plans) are the registering process's
 * own, so a changed rate applies to what a key has already used (a key
 * that used 3 of 3 a minute is still owed that minute under 4 a minute).
 * A changed algorithm is another rule. Returns -ENOSPC when all
 * RL_MAX_RULES entries are used, -EINVAL for a bad rate.
 */
struct rl_rule_def {
	const char *name;
	enum rl_algorithm algorithm;
	struct rl_rate rate;
	unsigned nplans;            /* tariffs, 0..RL_MAX_PLANS: a key's slot */
	const struct rl_rate *plans; /* names which one applies to it */
};
int rl_table_rule(struct rl_table *t, const struct rl_rule_def *def,
		  unsigned *id);

/*
 * The one call the shim makes per rule and request: decide `cost` units for
 * (rule, key) at `now_ns` (CLOCK_MONOTONIC) and record it if allowed. The
 * key is any byte string (an address, an API key); it is hashed with the
 * segment's secret seed. Per-rule allowed/denied counters are updated.
 * Returns 0, or -EINVAL for an unknown rule. Never blocks, never allocates.
 */
int rl_table_take(struct rl_table *t, unsigned rule, const void *key,
		  size_t key_len, uint32_t cost, uint64_t now_ns,
		  struct rl_result *out);

/*
 * Give back `cost` units taken by an earlier allowed rl_table_take() (used
 * when a later rule denies the same request). Best effort: a key that was
 * evicted meanwhile is left alone.
 */
int rl_table_refund(struct rl_table *t, unsigned rule, const void *key,
		    size_t key_len, uint32_t cost, uint64_t now_ns);

/* The service-time histogram's buckets: upper bounds in microseconds,
 * the last one +Inf. */
#define RL_SERVICE_BUCKETS 14
#define RL_SERVICE_LE_US { 1000, 2500, 5000, 10000, 25000, 50000, 100000, \
			   250000, 500000, 1000000, 2500000, 5000000,     \
			   10000000, UINT64_MAX }

/* Counters of one rule, summed over all processes. */
struct rl_rule_stats {
	char name[RL_RULE_NAME_MAX];
	enum rl_algorithm algorithm;
	struct rl_rate rate;
	uint64_t allowed;
	uint64_t denied;
	uint64_t bans;      /* bans its maxretry issued */
	uint64_t store_down; /* of `denied`, refused because the store was
				down (on_store_down = closed) */
	/* The application's final answers to requests the rule counted, by
	 * status class (1xx..5xx), and their service times (request head
	 * read to answer head written): a count per bucket (not
	 * cumulative) and the sum in microseconds. */
	uint64_t answers[5];
	uint64_t service[RL_SERVICE_BUCKETS];
	uint64_t service_sum_us;
};
int rl_table_rule_stats(struct rl_table *t, unsigned rule,
			struct rl_rule_stats *out);

/* Table-wide figures. `keys` is counted by a scan (O(capacity)). */
struct rl_table_stats {
	uint32_t capacity;  /* slots */
	uint32_t keys;      /* slots holding a key whose state is still live */
	uint32_t occupied;  /* slots holding any key, live or idle */
	uint32_t rules;     /* rule entries in use */
	uint64_t evictions; /* live keys displaced to make room */
	uint64_t overflows; /* decisions made without a slot: every candidate
			       was a key being limited right now */
	uint64_t size;      /* bytes of the segment */
};
int rl_table_stats(struct rl_table *t, uint64_t now_ns,
		   struct rl_table_stats *out);

/*
 * A consistent snapshot of one occupied slot, for rlshimctl and the agent.
 * `key` holds the stored key bytes (truncated keys end with an 8-byte
 * digest and have `truncated` set).
 */
struct rl_slot_view {
	uint32_t index;
	unsigned rule;
	uint8_t key_len;
	uint8_t truncated;
	uint8_t key[RL_KEY_MAX];
	struct rl_result peek; /* what a cost-0 request would see now */
	uint64_t debt_ns;      /* time until the state carries no information */
};

/*
 * Call `fn` for each occupied slot with live state; stop early when it
 * returns non-zero (that value is returned).
 */
int rl_table_foreach(struct rl_table *t, uint64_t now_ns,
		     int (*fn)(const struct rl_slot_view *v, void *arg),
		     void *arg);

/* ---- time ---------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds: the clock of every decision. */
uint64_t rl_time_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* RL_RLSHIM_H */
