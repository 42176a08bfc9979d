/* SPDX-License-Identifier: MIT */
/*
 * inspect.c - looking at the slots from outside a decision, for rlshimctl,
 * the agent's maintenance and the tests: a consistent view of each live
 * key or of one key, giving one key a full bucket again (rlshimctl reset),
 * the table's figures, sweeping stale markers, checking invariants.
 */
#include "err.h"
#include "slot.h"

#include <stdio.h>
#include <stdint.h>
#include <string.h>

/* Read a slot's key and state consistently: the key bytes through the
 * meta seqlock, the state bracketed by two reads of the key word. */
static int slot_view(struct rl_table *t, uint32_t idx, uint64_t now_ns,
		     struct rl_slot_view *v)
{
	struct rl_slot *s = &t->slots[idx];
	const struct rl_rule_cache *rc;
	uint64_t key, state;

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
	if (!rl_slot_meta_read(t, idx, key, v->key, &v->key_len,
			       &v->truncated))
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

int rl_table_key_view(struct rl_table *t, unsigned rule, const void *key,
		      size_t len, uint64_t now_ns, struct rl_slot_view *v)
{
	const struct rl_rule_cache *rc = rl_slot_rule(t, rule);
	struct rl_slot *s;
	struct keyref k;
	uint64_t st = 0;

	if (!rc)
		return -EINVAL;
	rl_slot_key(t, rule, key, len, &k);
	/* A slot being re-keyed right now shows nothing: look again. */
	for (int attempt = 0; attempt < LOOKUP_RETRIES; attempt++) {
		s = rl_slot_find(t, &k, now_ns, RL_FIND_PEEK);
		if (!s)
			break;
		if (slot_view(t, (uint32_t)(s - t->slots), now_ns, v) &&
		    atomic_load_explicit(&s->key, memory_order_acquire) == k.tag)
			return v->debt_ns ? 1 : 0;
	}
	/* Never seen here, or lapsed: what its first request would see. */
	memset(v, 0, sizeof(*v));
	v->index = UINT32_MAX;
	v->rule = rule;
	v->key_len = (uint8_t)(len < RL_KEY_MAX ? len : RL_KEY_MAX);
	v->truncated = len > RL_KEY_MAX;
	memcpy(v->key, key, v->key_len);
	rl_algo_step(&rc->algo, &st, 0, now_ns, &v->peek);
	return 0;
}

int rl_table_key_reset(struct rl_table *t, unsigned rule, const void *key,
		       size_t len, uint64_t now_ns)
{
	const struct rl_rule_cache *rc = rl_slot_rule(t, rule);
	struct rl_slot *s;
	struct keyref k;

	if (!rc)
		return -EINVAL;
	rl_slot_key(t, rule, key, len, &k);
	for (int attempt = 0; attempt < LOOKUP_RETRIES; attempt++) {
		uint64_t old;

		s = rl_slot_find(t, &k, now_ns, RL_FIND_PEEK);
		if (!s)
			return 0;
		old = atomic_load_explicit(&s->state, memory_order_acquire);
		/* What it admitted since the agent's last collect is not
		 * pushed to the other hosts: the reset forgives it. Cleared
		 * before the state, so that a decision after the state's
		 * CAS counts for the agent as usual. */
		atomic_store_explicit(&s->sync_admitted, 0, memory_order_relaxed);
		if (slot_cas(s, k.tag, slot_set_next, &(const uint64_t){ 0 }))
			continue; /* being re-keyed: look again */
		atomic_store_explicit(&s->provisional, 0, memory_order_relaxed);
		return old != 0 &&
		       rl_algo_free_at(slot_algo(rc, s), old, now_ns) > now_ns;
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

		if (is_marker(s) && rl_slot_marker_expire(t, &t->slots[i], s, now_ns))
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
			rl_err_set(&out->why, __VA_ARGS__);                 \
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
