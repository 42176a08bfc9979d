/* SPDX-License-Identifier: MIT */
/*
 * slot.c - keys in the shared table: finding, claiming and re-keying slots,
 * deciding, and looking at them.
 *
 * Keys live in buckets of RL_BUCKET_SLOTS slots chosen by a keyed hash. A
 * slot is claimed with one CAS on its key word and is never emptied again;
 * when a bucket is full a slot is re-keyed ("evicted"):
 *   1. CAS the victim's state from the value judged to a marker, so that no
 *      update of the old key can land after this point;
 *   2. CAS the key word to the new tag and write the new key's bytes;
 *   3. CAS the marker back to 0, a new key's state.
 * A reader loads the state, then the key word, and only trusts the state if
 * the key is still its own; its CAS on the state fails if a marker came in
 * between. A process that dies inside 1-3 leaves a marker that others clear
 * after RL_MARK_TIMEOUT_NS; until then the slot is skipped, never waited on.
 *
 * Who is evicted: a slot whose state carries no information any more (a
 * full bucket) first; else the key with the least debt (time until its state
 * expires), but never one that is being limited right now, i.e. whose next
 * request would be denied. If every candidate is being limited the request
 * is decided as a new key's without a slot (an "overflow"), so a flood of
 * new keys can neither evict a limited key nor be refused wholesale.
 */
#include "shm.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "algo.h"
#include "hash.h"
#include "time.h"

#define LOOKUP_RETRIES 8

/* The algorithm a slot's key is decided by: its plan's, once the agent has
 * told which plan the key is on, else the rule's own rate. */
static inline const struct rl_algo *slot_algo(const struct rl_rule_cache *rc,
					      const struct rl_slot *s)
{
	unsigned plan = atomic_load_explicit(&s->plan, memory_order_relaxed);

	return plan && plan <= rc->nplans ? &rc->plans[plan - 1] : &rc->algo;
}

/* ---- keys and slots --------------------------------------------------------- */

struct keyref {
	uint64_t tag;
	uint64_t bucket;
	const void *key;
	size_t len;
};

static void key_hash(const struct rl_table *t, unsigned rule, const void *key,
		     size_t len, struct keyref *k)
{
	uint64_t h;

	/* The rule id is mixed in by keying: the same bytes under two rules
	 * are two keys. */
	uint64_t seed[2] = { t->seed[0] ^ ((uint64_t)rule * 0x9E3779B97F4A7C15ull),
			     t->seed[1] };

	h = rl_hash_sip13(seed, key, len);
	k->tag = (h & ~0xFFull) | rule;
	if ((h & ~0xFFull) == 0)
		k->tag |= 0x100;
	k->bucket = (h >> 8) & t->bucket_mask;
	k->key = key;
	k->len = len;
}

static inline unsigned tag_rule(uint64_t tag)
{
	return (unsigned)(tag & 0xFF);
}

static inline uint32_t shard_of(void)
{
	int cpu = sched_getcpu();

	return cpu < 0 ? 0 : (uint32_t)cpu & (RL_SHARDS - 1);
}

/* Publish the key bytes of a slot just claimed (seqlock writer). */
static void meta_write(struct rl_table *t, uint64_t idx, const struct keyref *k)
{
	struct rl_slot_meta *m = &t->meta[idx];

	atomic_store_explicit(&m->tag, 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	if (k->len <= RL_KEY_MAX) {
		m->len = (uint8_t)k->len;
		m->truncated = 0;
		if (k->len) /* a key of no bytes may come as NULL */
			memcpy(m->key, k->key, k->len);
	} else {
		/* A prefix and a public digest of the whole key: the same on
		 * every host, so the agent can name it in Redis. */
		uint64_t d = rl_hash_sip13(rl_hash_public_key, k->key, k->len);

		m->len = RL_KEY_MAX;
		m->truncated = 1;
		memcpy(m->key, k->key, RL_KEY_MAX - 8);
		memcpy(m->key + RL_KEY_MAX - 8, &d, 8);
	}
	atomic_store_explicit(&m->tag, k->tag, memory_order_release);
}

static inline int is_marker(uint64_t s)
{
	return (s & RL_STATE_MARK) != 0;
}

static inline uint64_t make_marker(uint64_t now_ns)
{
	return RL_STATE_MARK | (now_ns & ~RL_STATE_MARK);
}

/* Clear a marker left by a process that died while re-keying. Returns 1 if
 * the marker was stale (and is now gone or changed). */
static int marker_expire(struct rl_table *t, struct rl_slot *s, uint64_t mark,
			 uint64_t now_ns)
{
	uint64_t set_at = mark & ~RL_STATE_MARK;

	if (now_ns < set_at || now_ns - set_at < RL_MARK_TIMEOUT_NS)
		return 0;
	if (atomic_compare_exchange_strong(&s->state, &mark, 0))
		rl_table_count(t, RL_COUNT_MARKS_CLEARED);
	return 1;
}

enum victim_kind { VICTIM_NONE, VICTIM_IDLE, VICTIM_LIVE };

/*
 * Pick the slot of a full bucket to re-key: an idle one, else the least
 * debt that is not being limited. *state gets the state it was judged by.
 */
static enum victim_kind victim_pick(struct rl_table *t, struct rl_slot *b,
				    uint64_t now_ns, unsigned *at,
				    uint64_t *vkey, uint64_t *state)
{
	enum victim_kind kind = VICTIM_NONE;
	uint64_t best = UINT64_MAX;

	for (unsigned i = 0; i < RL_BUCKET_SLOTS; i++) {
		uint64_t key = atomic_load_explicit(&b[i].key, memory_order_acquire);
		uint64_t s = atomic_load_explicit(&b[i].state, memory_order_acquire);
		const struct rl_rule_cache *rc = rl_table_rule_get(t, tag_rule(key));
		struct rl_result peek;
		uint64_t free_at, probe;

		if (is_marker(s)) {
			marker_expire(t, &b[i], s, now_ns);
			continue;
		}
		if (!rc && key && tag_rule(key) < RL_MAX_RULES &&
		    atomic_load_explicit(&t->rules[tag_rule(key)].ident,
					 memory_order_relaxed))
			continue; /* a rule not readable yet: never guessed idle */
		if (!rc || (free_at = rl_algo_free_at(slot_algo(rc, &b[i]), s,
						      now_ns)) <= now_ns) {
			/* Idle, or a rule this segment does not know. */
			*at = i;
			*vkey = key;
			*state = s;
			return VICTIM_IDLE;
		}
		probe = s;
		rl_algo_step(slot_algo(rc, &b[i]), &probe, 1, now_ns, &peek);
		if (!peek.allowed)
			continue; /* being limited: never evicted */
		if (free_at - now_ns < best) {
			best = free_at - now_ns;
			*at = i;
			*vkey = key;
			*state = s;
			kind = VICTIM_LIVE;
		}
	}
	return kind;
}

/*
 * Find the slot of `k`, claiming or re-keying one if it has none. Returns
 * NULL when the bucket has no slot to give (overflow) or the bucket keeps
 * changing under us.
 */
static struct rl_slot *slot_find(struct rl_table *t, const struct keyref *k,
				 uint64_t now_ns, int create)
{
	uint64_t base = k->bucket * RL_BUCKET_SLOTS;
	struct rl_slot *b = &t->slots[base];

	for (int attempt = 0; attempt < LOOKUP_RETRIES; attempt++) {
		enum victim_kind kind;
		unsigned i, at = 0;
		uint64_t s, vkey, mark, expect;

		for (i = 0; i < RL_BUCKET_SLOTS; i++) {
			uint64_t key = atomic_load_explicit(&b[i].key,
							    memory_order_acquire);

			if (key == k->tag)
				return &b[i];
			if (key == 0)
				break;
		}
		if (!create)
			return NULL;
		if (i < RL_BUCKET_SLOTS) {
			expect = 0;
			if (atomic_compare_exchange_strong(&b[i].key, &expect,
							   k->tag)) {
				meta_write(t, base + i, k);
				return &b[i];
			}
			continue; /* taken meanwhile, maybe by our own key */
		}
		kind = victim_pick(t, b, now_ns, &at, &vkey, &s);
		if (kind == VICTIM_NONE)
			return NULL;
		/* 1: fence off updates of the old key. */
		mark = make_marker(now_ns);
		expect = s;
		if (!atomic_compare_exchange_strong(&b[at].state, &expect, mark))
			continue;
		/* 2: re-key. The key may have changed between our judging and
		 * the marker (another process re-keyed it to a key whose state
		 * happens to equal the judged one): then put the state back. */
		expect = vkey;
		if (!atomic_compare_exchange_strong(&b[at].key, &expect, k->tag)) {
			expect = mark;
			atomic_compare_exchange_strong(&b[at].state, &expect, s);
			continue;
		}
		atomic_store_explicit(&b[at].sync_admitted, 0, memory_order_relaxed);
		atomic_store_explicit(&b[at].plan, 0, memory_order_relaxed);
		atomic_store_explicit(&b[at].fails, 0, memory_order_relaxed);
		meta_write(t, base + at, k);
		/* 3: a new key's state. */
		if (!atomic_compare_exchange_strong(&b[at].state, &mark, 0))
			continue;
		if (kind == VICTIM_LIVE)
			rl_table_count(t, RL_COUNT_EVICTIONS);
		return &b[at];
	}
	return NULL;
}

/* ---- decisions --------------------------------------------------------------- */

static void count(struct rl_table *t, unsigned rule, int allowed)
{
	struct rl_shm_counter *c = &t->shards[shard_of()].rule[rule];

	atomic_fetch_add_explicit(allowed ? &c->allowed : &c->denied, 1,
				  memory_order_relaxed);
}

/*
 * Decide `cost` on slot `s`, which held `tag` when found. Returns 1 when
 * decided, 0 when the slot does not hold the key any more (look again).
 */
static int decide_in(struct rl_table *t, const struct rl_rule_cache *rc,
		     struct rl_slot *s, uint64_t tag, uint32_t cost,
		     uint64_t now_ns, struct rl_result *out)
{
	uint64_t old = atomic_load_explicit(&s->state, memory_order_acquire);
	uint64_t new;

	for (;;) {
		if (is_marker(old)) {
			/* Being re-keyed (or left so by a dead process):
			 * look again, never wait. */
			marker_expire(t, s, old, now_ns);
			return 0;
		}
		/* The state is ours only if the key still is. */
		if (atomic_load_explicit(&s->key, memory_order_acquire) != tag)
			return 0;
		new = old;
		rl_algo_step(slot_algo(rc, s), &new, cost, now_ns, out);
		if (!out->allowed) {
			/* The agent refreshes keys being refused too (a plan
			 * upgrade must reach them). */
			if (rl_table_agent_flags(t) & RL_AGENT_SYNC)
				atomic_fetch_or_explicit(&s->sync_admitted,
							 RL_SYNC_DENIED,
							 memory_order_relaxed);
			return 1;
		}
		if (new == old)
			return 1;
		if (atomic_compare_exchange_weak_explicit(&s->state, &old, new,
							  memory_order_acq_rel,
							  memory_order_acquire)) {
			/* Only an agent that syncs needs the count. */
			if (rl_table_agent_flags(t) & RL_AGENT_SYNC)
				atomic_fetch_add_explicit(&s->sync_admitted, cost,
							  memory_order_relaxed);
			return 1;
		}
		/* Lost a race with another decision: `old` is fresh. */
	}
}

static int take_in(struct rl_table *t, unsigned rule, const void *key,
		   size_t key_len, uint32_t cost, uint64_t now_ns,
		   struct rl_result *out, struct rl_slot_hint *hint,
		   int count_allowed)
{
	const struct rl_rule_cache *rc = rl_table_rule_get(t, rule);
	struct keyref k;

	if (!rc)
		return -EINVAL;
	/* Where this key was last time: no hash, no scan, if it still is. */
	if (hint && hint->tag && tag_rule(hint->tag) == rule &&
	    hint->index < t->hdr->capacity) {
		struct rl_slot *s = &t->slots[hint->index];

		if (atomic_load_explicit(&s->key, memory_order_acquire) ==
			    hint->tag &&
		    decide_in(t, rc, s, hint->tag, cost, now_ns, out))
			goto decided;
	}
	key_hash(t, rule, key, key_len, &k);
	for (int attempt = 0; attempt < LOOKUP_RETRIES; attempt++) {
		/* A peek (cost 0) never claims a slot: it stores nothing. */
		struct rl_slot *s = slot_find(t, &k, now_ns, cost > 0);

		if (!s) {
			if (cost == 0)
				goto fresh;
			break;
		}
		if (decide_in(t, rc, s, k.tag, cost, now_ns, out)) {
			if (hint) {
				hint->index = (uint32_t)(s - t->slots);
				hint->tag = k.tag;
			}
			goto decided;
		}
	}
	/* No slot to give: decide as a new key, keep nothing. */
	rl_table_count(t, RL_COUNT_OVERFLOWS);
fresh:
	{
		uint64_t st = 0;

		rl_algo_step(&rc->algo, &st, cost, now_ns, out);
	}
decided:
	if (count_allowed || !out->allowed)
		count(t, rule, out->allowed);
	return 0;
}

int rl_table_take_hint(struct rl_table *t, unsigned rule, const void *key,
		       size_t key_len, uint32_t cost, uint64_t now_ns,
		       struct rl_result *out, struct rl_slot_hint *hint)
{
	return take_in(t, rule, key, key_len, cost, now_ns, out, hint, 1);
}

int rl_table_take_uncounted(struct rl_table *t, unsigned rule, const void *key,
			    size_t key_len, uint32_t cost, uint64_t now_ns,
			    struct rl_result *out, struct rl_slot_hint *hint)
{
	return take_in(t, rule, key, key_len, cost, now_ns, out, hint, 0);
}

void rl_table_count_allowed(struct rl_table *t, unsigned rule)
{
	if (rule < RL_MAX_RULES)
		count(t, rule, 1);
}

/*
 * slot.fails: the start of the current count, in ms of CLOCK_MONOTONIC
 * plus one (0: no count), above a 24-bit count of denials.
 */
#define FAILS_COUNT_BITS 24
#define FAILS_COUNT_MAX ((1u << FAILS_COUNT_BITS) - 1)

int rl_table_fail(struct rl_table *t, unsigned rule, const void *key,
		  size_t key_len, uint32_t maxretry, uint64_t findtime_ns,
		  uint64_t now_ns, struct rl_slot_hint *hint)
{
	uint64_t now_ms = now_ns / RL_NS_PER_MS + 1;
	uint64_t find_ms = findtime_ns / RL_NS_PER_MS;
	struct rl_slot *s = NULL;
	uint64_t old, new;
	struct keyref k;

	if (!rl_table_rule_get(t, rule))
		return -EINVAL;
	if (maxretry == 0)
		return 0;
	if (hint && hint->tag && tag_rule(hint->tag) == rule &&
	    hint->index < t->hdr->capacity &&
	    atomic_load_explicit(&t->slots[hint->index].key,
				 memory_order_acquire) == hint->tag)
		s = &t->slots[hint->index];
	if (!s) {
		key_hash(t, rule, key, key_len, &k);
		s = slot_find(t, &k, now_ns, 1);
		if (!s)
			return 0;
	}
	/* Not fenced against re-keying like the state: a count that lands
	 * just as the slot changes hands is one denial counted for the
	 * wrong key, which no bucket's state depends on. */
	old = atomic_load_explicit(&s->fails, memory_order_relaxed);
	for (;;) {
		uint64_t start = old >> FAILS_COUNT_BITS;
		uint32_t n = (uint32_t)(old & FAILS_COUNT_MAX);

		if (start == 0 || now_ms < start || now_ms - start > find_ms) {
			start = now_ms;
			n = 0;
		}
		n++;
		/* The maxretry-th: banned, and the next count starts fresh. */
		new = n >= maxretry ? 0 : start << FAILS_COUNT_BITS | n;
		if (atomic_compare_exchange_weak_explicit(&s->fails, &old, new,
							  memory_order_relaxed,
							  memory_order_relaxed))
			return n >= maxretry;
	}
}

int rl_table_take(struct rl_table *t, unsigned rule, const void *key,
		  size_t key_len, uint32_t cost, uint64_t now_ns,
		  struct rl_result *out)
{
	return rl_table_take_hint(t, rule, key, key_len, cost, now_ns, out, NULL);
}

static int refund_in(struct rl_table *t, unsigned rule, const void *key,
		     size_t key_len, uint32_t cost, uint64_t now_ns, int counted)
{
	const struct rl_rule_cache *rc = rl_table_rule_get(t, rule);
	struct rl_shm_counter *c;
	struct keyref k;
	struct rl_slot *s;
	uint64_t old, new;

	if (!rc)
		return -EINVAL;
	key_hash(t, rule, key, key_len, &k);
	s = slot_find(t, &k, now_ns, 0);
	if (!s)
		return -ENOENT;
	old = atomic_load_explicit(&s->state, memory_order_acquire);
	for (;;) {
		if (is_marker(old) ||
		    atomic_load_explicit(&s->key, memory_order_acquire) != k.tag)
			return -ENOENT;
		new = old;
		rl_algo_refund(slot_algo(rc, s), &new, cost, now_ns);
		if (new == old ||
		    atomic_compare_exchange_weak(&s->state, &old, new))
			break;
	}
	/* The decision was counted as allowed; it was not, in the end. */
	if (counted) {
		c = &t->shards[shard_of()].rule[rule];
		atomic_fetch_sub_explicit(&c->allowed, 1, memory_order_relaxed);
	}
	{
		/* Nor is it owed to the other hosts, unless already synced. */
		uint32_t a = atomic_load_explicit(&s->sync_admitted,
						  memory_order_relaxed);

		while ((a & ~RL_SYNC_DENIED) >= cost &&
		       !atomic_compare_exchange_weak(
					    &s->sync_admitted, &a, a - cost))
			;
	}
	return 0;
}

int rl_table_refund(struct rl_table *t, unsigned rule, const void *key,
		    size_t key_len, uint32_t cost, uint64_t now_ns)
{
	return refund_in(t, rule, key, key_len, cost, now_ns, 1);
}

int rl_table_give_back(struct rl_table *t, unsigned rule, const void *key,
		       size_t key_len, uint32_t cost, uint64_t now_ns)
{
	return refund_in(t, rule, key, key_len, cost, now_ns, 0);
}

/* Read a slot's key and state consistently: the key bytes through the
 * meta seqlock, the state bracketed by two reads of the key word. */
static int slot_view(struct rl_table *t, uint32_t idx, uint64_t now_ns,
		     struct rl_slot_view *v)
{
	struct rl_slot *s = &t->slots[idx];
	struct rl_slot_meta *m = &t->meta[idx];
	const struct rl_rule_cache *rc;
	uint64_t key, state, t1, t2;

	key = atomic_load_explicit(&s->key, memory_order_acquire);
	if (!key)
		return 0;
	state = atomic_load_explicit(&s->state, memory_order_acquire);
	if (is_marker(state) ||
	    atomic_load_explicit(&s->key, memory_order_acquire) != key)
		return 0;
	rc = rl_table_rule_get(t, tag_rule(key));
	if (!rc)
		return 0;
	t1 = atomic_load_explicit(&m->tag, memory_order_acquire);
	v->key_len = m->len > RL_KEY_MAX ? RL_KEY_MAX : m->len;
	v->truncated = m->truncated;
	memcpy(v->key, m->key, RL_KEY_MAX);
	atomic_thread_fence(memory_order_acquire);
	t2 = atomic_load_explicit(&m->tag, memory_order_relaxed);
	if (t1 != key || t2 != key)
		return 0;
	v->index = idx;
	v->rule = tag_rule(key);
	{
		uint64_t probe = state;
		const struct rl_algo *a = slot_algo(rc, s);
		uint64_t free_at = rl_algo_free_at(a, state, now_ns);

		rl_algo_step(a, &probe, 0, now_ns, &v->peek);
		v->debt_ns = free_at > now_ns ? free_at - now_ns : 0;
	}
	return 1;
}

int rl_table_foreach(struct rl_table *t, uint64_t now_ns,
		     int (*fn)(const struct rl_slot_view *v, void *arg),
		     void *arg)
{
	struct rl_slot_view v;

	for (uint32_t i = 0; i < t->hdr->capacity; i++) {
		int r;

		if (!slot_view(t, i, now_ns, &v) || v.debt_ns == 0)
			continue;
		r = fn(&v, arg);
		if (r)
			return r;
	}
	return 0;
}

int rl_table_stats(struct rl_table *t, uint64_t now_ns,
		   struct rl_table_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->capacity = t->hdr->capacity;
	out->size = t->size;
	out->evictions = rl_table_counted(t, RL_COUNT_EVICTIONS);
	out->overflows = rl_table_counted(t, RL_COUNT_OVERFLOWS);
	for (unsigned i = 0; i < RL_MAX_RULES; i++)
		if (atomic_load_explicit(&t->rules[i].ident, memory_order_relaxed))
			out->rules++;
	for (uint32_t i = 0; i < t->hdr->capacity; i++) {
		uint64_t key = atomic_load_explicit(&t->slots[i].key,
						    memory_order_relaxed);
		uint64_t s = atomic_load_explicit(&t->slots[i].state,
						  memory_order_relaxed);
		const struct rl_rule_cache *rc;

		if (!key)
			continue;
		out->occupied++;
		rc = rl_table_rule_get(t, tag_rule(key));
		if (rc && !is_marker(s) &&
		    rl_algo_free_at(slot_algo(rc, &t->slots[i]), s, now_ns) > now_ns)
			out->keys++;
	}
	return 0;
}

unsigned rl_table_sweep(struct rl_table *t, uint64_t now_ns)
{
	unsigned cleared = 0;

	for (uint32_t i = 0; i < t->hdr->capacity; i++) {
		uint64_t s = atomic_load_explicit(&t->slots[i].state,
						  memory_order_acquire);

		if (is_marker(s) && marker_expire(t, &t->slots[i], s, now_ns))
			cleared++;
	}
	return cleared;
}

int rl_table_check(struct rl_table *t, uint64_t now_ns,
		   struct rl_table_check *out)
{
	memset(out, 0, sizeof(*out));
#define VIOLATION(...)                                                        \
	do {                                                                  \
		if (!out->violations++)                                       \
			snprintf(out->why, sizeof(out->why), __VA_ARGS__);    \
	} while (0)
	for (uint64_t b = 0; b <= t->bucket_mask; b++) {
		struct rl_slot *s = &t->slots[b * RL_BUCKET_SLOTS];
		int empty_seen = 0;

		for (unsigned i = 0; i < RL_BUCKET_SLOTS; i++) {
			uint64_t idx = b * RL_BUCKET_SLOTS + i;
			uint64_t key = atomic_load(&s[i].key);
			uint64_t st = atomic_load(&s[i].state);
			const struct rl_rule_cache *rc;

			if (!key) {
				empty_seen = 1;
				if (st != 0)
					VIOLATION("slot %llu: empty with state",
						  (unsigned long long)idx);
				continue;
			}
			if (empty_seen)
				VIOLATION("slot %llu: key after an empty slot",
					  (unsigned long long)idx);
			for (unsigned j = 0; j < i; j++)
				if (atomic_load(&s[j].key) == key)
					out->duplicates++;
			if (is_marker(st)) {
				uint64_t at = st & ~RL_STATE_MARK;

				out->markers++;
				if (now_ns > at && now_ns - at >= RL_MARK_TIMEOUT_NS)
					VIOLATION("slot %llu: stale marker",
						  (unsigned long long)idx);
				continue;
			}
			rc = rl_table_rule_get(t, tag_rule(key));
			if (!rc) {
				VIOLATION("slot %llu: unknown rule %u",
					  (unsigned long long)idx, tag_rule(key));
				continue;
			}
			if (rc->algo.kind == RL_ALGO_GCRA) {
				/* Allow a second of clock difference between
				 * the writer and us. (This checker's rates:
				 * run it where no process has registered
				 * slower ones, as after a reload, whose keys
				 * may be owed more than this bucket holds.) */
				if (st > now_ns + rc->algo.depth_ns + 1000000000ull)
					VIOLATION("slot %llu: TAT beyond the "
						  "bucket", (unsigned long long)idx);
			}
			if (atomic_load(&t->meta[idx].tag) != key)
				out->unnamed++;
		}
	}
#undef VIOLATION
	return (int)out->violations;
}

/* ---- the agent's side ---------------------------------------------------------- */

int rl_table_sync_collect(struct rl_table *t,
			  int (*fn)(const struct rl_sync_item *it, void *arg),
			  void *arg)
{
	struct rl_sync_item it;

	for (uint32_t i = 0; i < t->hdr->capacity; i++) {
		struct rl_slot *s = &t->slots[i];
		struct rl_slot_meta *m = &t->meta[i];
		uint64_t key, t1, t2;
		int r;

		if (!atomic_load_explicit(&s->sync_admitted, memory_order_relaxed))
			continue;
		key = atomic_load_explicit(&s->key, memory_order_acquire);
		it.admitted = atomic_exchange_explicit(&s->sync_admitted, 0,
						       memory_order_acq_rel);
		if (!key || !it.admitted)
			continue;
		it.denied = (it.admitted & RL_SYNC_DENIED) != 0;
		it.admitted &= ~RL_SYNC_DENIED;
		t1 = atomic_load_explicit(&m->tag, memory_order_acquire);
		it.key_len = m->len > RL_KEY_MAX ? RL_KEY_MAX : m->len;
		it.truncated = m->truncated;
		memcpy(it.key, m->key, RL_KEY_MAX);
		atomic_thread_fence(memory_order_acquire);
		t2 = atomic_load_explicit(&m->tag, memory_order_relaxed);
		if (t1 != key || t2 != key)
			continue; /* being re-keyed: its count goes with it */
		it.index = i;
		it.tag = key;
		it.rule = tag_rule(key);
		it.plan = atomic_load_explicit(&s->plan, memory_order_relaxed);
		r = fn(&it, arg);
		if (r)
			return r;
	}
	return 0;
}

/* The slot at `index` that the agent names with `tag`, and the rule the
 * tag says: 0, -EINVAL for no such slot, -ESTALE for a rule unknown here
 * (the caller then checks, under its CAS, that the slot still holds tag). */
static int agent_slot(struct rl_table *t, uint32_t index, uint64_t tag,
		      struct rl_slot **s, const struct rl_rule_cache **rc)
{
	if (index >= t->hdr->capacity)
		return -EINVAL;
	*s = &t->slots[index];
	*rc = rl_table_rule_get(t, tag_rule(tag));
	return *rc ? 0 : -ESTALE;
}

int rl_table_sync_apply(struct rl_table *t, uint32_t index, uint64_t tag,
			uint64_t debt_ns, uint64_t now_ns)
{
	struct rl_slot *s;
	const struct rl_rule_cache *rc;
	const struct rl_algo *a;
	uint64_t old, want;
	int err = agent_slot(t, index, tag, &s, &rc);

	if (err)
		return err;
	a = slot_algo(rc, s);
	if (a->kind != RL_ALGO_GCRA)
		return 0; /* windows are enforced per host */
	/* Admitted here since the collect: not in the store's figure yet. */
	want = now_ns + debt_ns +
	       a->interval_ns * (atomic_load_explicit(&s->sync_admitted,
						      memory_order_relaxed) &
				 ~RL_SYNC_DENIED);
	old = atomic_load_explicit(&s->state, memory_order_acquire);
	for (;;) {
		if (is_marker(old) ||
		    atomic_load_explicit(&s->key, memory_order_acquire) != tag)
			return -ESTALE;
		if (old >= want)
			return 0;
		if (atomic_compare_exchange_weak(&s->state, &old, want))
			return 0;
	}
}

int rl_table_sync_charge(struct rl_table *t, uint32_t index, uint64_t tag,
			 uint64_t extra_ns, uint64_t now_ns)
{
	struct rl_slot *s;
	const struct rl_rule_cache *rc;
	uint64_t old, new;
	int err = agent_slot(t, index, tag, &s, &rc);

	if (err)
		return err;
	if (slot_algo(rc, s)->kind != RL_ALGO_GCRA)
		return 0;
	old = atomic_load_explicit(&s->state, memory_order_acquire);
	for (;;) {
		if (is_marker(old) ||
		    atomic_load_explicit(&s->key, memory_order_acquire) != tag)
			return -ESTALE;
		new = (old > now_ns ? old : now_ns) + extra_ns;
		if (atomic_compare_exchange_weak(&s->state, &old, new))
			return 0;
	}
}

int rl_table_set_plan(struct rl_table *t, uint32_t index, uint64_t tag,
		      unsigned plan, uint64_t now_ns)
{
	struct rl_slot *s;
	const struct rl_rule_cache *rc;
	const struct rl_algo *from, *to;
	uint64_t old, new;
	int err = agent_slot(t, index, tag, &s, &rc);

	if (err)
		return err;
	if (plan > rc->nplans)
		return -ESTALE;
	if (atomic_load_explicit(&s->plan, memory_order_relaxed) == plan)
		return 0;
	from = slot_algo(rc, s);
	to = plan ? &rc->plans[plan - 1] : &rc->algo;
	atomic_store_explicit(&s->plan, (uint8_t)plan, memory_order_release);
	if (from->kind != RL_ALGO_GCRA)
		return 0; /* window counts are counts under any tariff */
	old = atomic_load_explicit(&s->state, memory_order_acquire);
	for (;;) {
		uint64_t used;

		if (is_marker(old) ||
		    atomic_load_explicit(&s->key, memory_order_acquire) != tag)
			return -ESTALE;
		if (old <= now_ns)
			return 0; /* a full bucket is full under any tariff */
		used = (old - now_ns) / from->interval_ns;
		if (used > to->rate.burst)
			used = to->rate.burst;
		new = now_ns + used * to->interval_ns;
		if (atomic_compare_exchange_weak(&s->state, &old, new))
			return 0;
	}
}
