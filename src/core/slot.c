/* SPDX-License-Identifier: MIT */
/*
 * slot.c - keys in the shared table: finding, claiming and re-keying their
 * slots, and publishing their bytes. Deciding on a slot is decide.c's,
 * looking at slots inspect.c's, the agent's changes slot_agent.c's.
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
#include "slot.h"

#include <string.h>

#include "hash.h"

/* ---- keys and slots --------------------------------------------------------- */

void rl_slot_keys_init(struct rl_table *t)
{
	for (unsigned rule = 0; rule < RL_MAX_RULES; rule++) {
		uint64_t seed[2] = {
			t->seed[0] ^ ((uint64_t)rule * 0x9E3779B97F4A7C15ull),
			t->seed[1]
		};

		rl_hash_sip13_init(seed, t->sip[rule]);
	}
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

int rl_slot_meta_read(const struct rl_table *t, uint32_t idx, uint64_t key,
		      uint8_t bytes[RL_KEY_MAX], uint8_t *len,
		      uint8_t *truncated)
{
	const struct rl_slot_meta *m = &t->meta[idx];
	uint64_t t1, t2;

	t1 = atomic_load_explicit(&m->tag, memory_order_acquire);
	*len = m->len > RL_KEY_MAX ? RL_KEY_MAX : m->len;
	*truncated = m->truncated;
	memcpy(bytes, m->key, RL_KEY_MAX);
	atomic_thread_fence(memory_order_acquire);
	t2 = atomic_load_explicit(&m->tag, memory_order_relaxed);
	return t1 == key && t2 == key;
}

static inline uint64_t make_marker(uint64_t now_ns)
{
	return RL_STATE_MARK | (now_ns & ~RL_STATE_MARK);
}

int rl_slot_marker_expire(struct rl_table *t, struct rl_slot *s, uint64_t mark,
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
			rl_slot_marker_expire(t, &b[i], s, now_ns);
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

struct rl_slot *rl_slot_find(struct rl_table *t, const struct keyref *k,
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
		if (kind == VICTIM_NONE ||
		    (kind == VICTIM_LIVE && create == RL_FIND_IDLE))
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
		atomic_store_explicit(&b[at].provisional, 0, memory_order_relaxed);
		atomic_store_explicit(&b[at].fails, 0, memory_order_relaxed);
		atomic_store_explicit(&b[at].sync_fails, 0, memory_order_relaxed);
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
