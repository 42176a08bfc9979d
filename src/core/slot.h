/* SPDX-License-Identifier: MIT */
/*
 * slot.h - the slots' protocol, shared by the table code that finds and
 * changes slots (slot.c, decide.c, inspect.c, slot_agent.c): a key's tag
 * and bucket, finding or claiming its slot, markers, the key bytes, and the
 * one CAS loop that changes the state of a slot while it holds a key.
 * Private to src/core, like shm.h.
 */
#ifndef RL_SLOT_H
#define RL_SLOT_H

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/rseq.h>

#include "algo.h"
#include "hash.h"
#include "shm.h"

#define LOOKUP_RETRIES 8

/* The algorithm a slot's key is decided by: its plan's, once the agent has
 * told which plan the key is on, else the rule's own rate. */
static inline const struct rl_algo *slot_algo(const struct rl_rule_cache *rc,
					      const struct rl_slot *s)
{
	return rl_rule_cache_algo(rc, atomic_load_explicit(&s->plan,
							  memory_order_relaxed));
}

/* A (rule, key) pair as the table finds it. */
struct keyref {
	uint64_t tag;
	uint64_t bucket;
	const void *key;
	size_t len;
};

static inline unsigned tag_rule(uint64_t tag)
{
	return (unsigned)(tag & 0xFF);
}

/* The hosts alive at the last sync, this one included. */
static inline uint32_t hosts_of(const struct rl_table *t)
{
	uint32_t hosts = atomic_load_explicit(&t->hdr->hosts_alive,
					      memory_order_relaxed);

	return hosts ? hosts : 1;
}

/* This host's share of `n` requests of a token bucket synced across the
 * hosts alive: ceil(n / hosts), all of them alone (decide.c for a key new
 * here, slot_agent.c for what the store says is left). */
static inline uint64_t host_share(const struct rl_table *t, uint64_t n)
{
	uint32_t hosts = hosts_of(t);

	return (n + hosts - 1) / hosts;
}

static inline int is_marker(uint64_t s)
{
	return (s & RL_STATE_MARK) != 0;
}

/* Key t->sip for every rule from the segment's seed (at open). */
void rl_slot_keys_init(struct rl_table *t);

/*
 * The tag and bucket of `key` under rule `rule` (below RL_MAX_RULES), into
 * `k`. The rule id is mixed in by keying (rl_slot_keys_init: the seed's
 * first word xor rule * 2^64/phi): the same bytes under two rules are two
 * keys. The keyed state is the handle's, so a decision hashes only.
 */
static inline __attribute__((always_inline)) void
rl_slot_key(const struct rl_table *t, unsigned rule, const void *key,
	    size_t len, struct keyref *k)
{
	uint64_t h = rl_hash_sip13_from(t->sip[rule], key, len);

	k->tag = (h & ~0xFFull) | rule;
	if ((h & ~0xFFull) == 0)
		k->tag |= 0x100;
	k->bucket = (h >> 8) & t->bucket_mask;
	k->key = key;
	k->len = len;
}

/* Rule `id` as this process has validated it (rl_table_rule_get): its
 * cache's one load when it has one. */
static inline const struct rl_rule_cache *rl_slot_rule(struct rl_table *t,
						       unsigned id)
{
	const struct rl_rule_cache *c;

	if (id >= RL_MAX_RULES)
		return NULL;
	c = __atomic_load_n(&t->cache[id], __ATOMIC_ACQUIRE);
	return c ? c : rl_table_rule_get(t, id);
}

/* rl_slot_find's `create`: find only; claim or re-key a slot if need be;
 * claim only an empty or idle one (a key not in use yet, the agent's). */
enum { RL_FIND_PEEK = 0, RL_FIND_CLAIM = 1, RL_FIND_IDLE = 2 };

/*
 * Find the slot of `k`, claiming or re-keying one if it has none and
 * `create` says so. Returns NULL when the bucket has no slot to give
 * (overflow) or the bucket keeps changing under us.
 */
struct rl_slot *rl_slot_find(struct rl_table *t, const struct keyref *k,
			     uint64_t now_ns, int create);

/* rl_slot_find, the bucket's first slot tried inline: where a key usually
 * is, a bucket holding one key at a low load. */
static inline struct rl_slot *rl_slot_find_fast(struct rl_table *t,
						const struct keyref *k,
						uint64_t now_ns, int create)
{
	struct rl_slot *s = &t->slots[k->bucket * RL_BUCKET_SLOTS];

	if (atomic_load_explicit(&s->key, memory_order_acquire) == k->tag)
		return s;
	return rl_slot_find(t, k, now_ns, create);
}

/* ---- the CPU, for the counter shards ----------------------------------------- */

/* glibc 2.35 and later register an rseq area for every thread, in which the
 * kernel keeps the thread's CPU: weak, so that an older glibc loads the
 * shim all the same (and sched_getcpu() answers). */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

/* This thread's rseq area, NULL when glibc registered none (too old, the
 * glibc.pthread.rseq=0 tunable, a kernel or valgrind without rseq). */
static inline const struct rseq *rl_slot_rseq(void)
{
	if (!&__rseq_size || !&__rseq_offset || !__rseq_size)
		return NULL;
	return (const struct rseq *)((const char *)__builtin_thread_pointer() +
				     __rseq_offset);
}

/*
 * The CPU this thread runs on, for a counter shard (decide.c): its rseq
 * area's cpu_id once found there (one load), else sched_getcpu(), asked
 * again every RL_CPU_RECHECK calls. A CPU a migration has just made stale
 * costs a shared cache line for a while, never a count.
 */
#define RL_CPU_RECHECK 64u
unsigned rl_slot_cpu_slow(void);

/* rl_slot_take's `how`. */
#define RL_TAKE_COUNT 0x1u  /* count an allowed decision (else only denials) */
#define RL_TAKE_EXACT 0x2u  /* a strict rule's mirror: no share of a fresh
			       key, nothing counted for the agent to push */
#define RL_TAKE_LEND 0x4u   /* a synced token bucket whose agent lends
			       (ask.c): where the decision would start the key
			       from a blind share (other hosts alive) or refuse
			       it from a share, decide nothing: RL_TAKE_ASK */

/* rl_slot_take's return with RL_TAKE_LEND: nothing decided, nothing
 * counted, *hint names the key's slot; a lend is wanted. */
#define RL_TAKE_ASK 1

/*
 * Decide `cost` for `key` of `rule` (decide.c): the take behind
 * rl_table_take_hint and friends. With a hint, *hint names the slot
 * decided in afterwards (tag 0: none, the table had no slot to give).
 * Returns 0, a negative errno, or RL_TAKE_ASK (RL_TAKE_LEND only).
 */
int rl_slot_take(struct rl_table *t, unsigned rule, const void *key,
		 size_t key_len, uint32_t cost, uint64_t now_ns,
		 struct rl_result *out, struct rl_slot_hint *hint, unsigned how);

/* Clear a marker left by a process that died while re-keying. Returns 1 if
 * the marker was stale (and is now gone or changed). */
int rl_slot_marker_expire(struct rl_table *t, struct rl_slot *s, uint64_t mark,
			  uint64_t now_ns);

/* The key bytes of slot `idx` (seqlock reader), if they are those of `key`:
 * 1, or 0 while they are being written or belong to another key. */
int rl_slot_meta_read(const struct rl_table *t, uint32_t idx, uint64_t key,
		      uint8_t bytes[RL_KEY_MAX], uint8_t *len,
		      uint8_t *truncated);

/*
 * Change the state of slot `s` while it holds `tag`: `next` is given the
 * state as it is and returns 1 with the state it is to be in *new, or 0 to
 * leave it as it is. Lost races are tried again with the fresh state.
 * Returns 0, or -ESTALE when the slot is being re-keyed or holds another
 * key. Inline: `next` is known at every caller and folds in.
 */
static inline int slot_cas(struct rl_slot *s, uint64_t tag,
			   int (*next)(uint64_t old, uint64_t *new,
				       const void *arg),
			   const void *arg)
{
	uint64_t old = atomic_load_explicit(&s->state, memory_order_acquire);
	uint64_t new;

	for (;;) {
		if (is_marker(old) ||
		    atomic_load_explicit(&s->key, memory_order_acquire) != tag)
			return -ESTALE;
		if (!next(old, &new, arg))
			return 0;
		if (atomic_compare_exchange_weak(&s->state, &old, new))
			return 0;
	}
}

/* The agent's note of what slot `index` (key `tag`) holds back beyond its
 * debt (struct rl_hold_note; nothing if the process keeps none). */
void rl_held_note(struct rl_table *t, uint32_t index, uint64_t tag,
		  uint64_t ns);

/* That note, if there is one of key `tag` (1; *ns set), else 0. */
int rl_held_read(const struct rl_table *t, uint32_t index, uint64_t tag,
		 uint64_t *ns);

/* slot_cas's `next` for a state given whole (*arg), whatever it was: the
 * store's, or 0 for a state forgotten. */
static inline int slot_set_next(uint64_t old, uint64_t *new, const void *arg)
{
	*new = *(const uint64_t *)arg;
	return old != *new;
}

#endif /* RL_SLOT_H */
