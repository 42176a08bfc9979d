/* SPDX-License-Identifier: MIT */
/*
 * decide.c - the per-request decisions over the slots: take (with a hint,
 * counted or not), give back and refund, count allowed and denied requests
 * per CPU shard, and count a key's denials towards a ban (fail).
 *
 * A decision is a CAS on the slot's state word, and trusts the state only
 * while the key word is still its key (slot.c says why). Nearly every one
 * takes the fast path (take_fast: no call, the key's slot where its bucket
 * says, one CAS); anything unusual goes the general way from scratch.
 */
#include "slot.h"

#include <errno.h>
#include <sched.h>

#include "clock.h"

/* ---- the CPU, for the counter shards ----------------------------------------- */

/* Counters are per CPU shard: processes on different CPUs do not fight over
 * one cache line. `cpu_word` is where this thread reads its CPU, its rseq
 * area's cpu_id, once rl_slot_cpu_slow() has found one; else `cpu_slow` is
 * the CPU sched_getcpu() said, asked again when `cpu_ttl` calls have used
 * it. */
static __thread const uint32_t *cpu_word;
static __thread uint32_t cpu_slow, cpu_ttl;
static __thread int cpu_checked;

unsigned rl_slot_cpu_slow(void)
{
	int cpu;

	if (!cpu_checked) {
		const struct rseq *area = rl_slot_rseq();

		cpu_checked = 1;
		if (area && (int32_t)__atomic_load_n(&area->cpu_id,
						     __ATOMIC_RELAXED) >= 0) {
			cpu_word = &area->cpu_id;
			return __atomic_load_n(cpu_word, __ATOMIC_RELAXED);
		}
	}
	/* No rseq (or no longer: the kernel keeps cpu_id no more once a
	 * thread unregisters). */
	cpu = sched_getcpu();
	cpu_slow = cpu < 0 ? 0 : (uint32_t)cpu;
	cpu_ttl = RL_CPU_RECHECK - 1;
	return cpu_slow;
}

/* The CPU this thread is on: one load from its rseq area, once found; or
 * the one sched_getcpu() said less than RL_CPU_RECHECK calls ago. */
static inline unsigned cpu_now(void)
{
	const uint32_t *w = cpu_word;

	if (__builtin_expect(w != NULL, 1)) {
		int32_t cpu = (int32_t)__atomic_load_n(w, __ATOMIC_RELAXED);

		if (cpu >= 0)
			return (unsigned)cpu;
	}
	if (cpu_ttl) {
		cpu_ttl--;
		return cpu_slow;
	}
	return rl_slot_cpu_slow();
}

/* The shard of this thread's CPU, kept as the shard of its last decision
 * (`last_shard`) for the answer it counts next (rl_table_count_answer). */
static __thread uint32_t last_shard;

static inline uint32_t shard_of(void)
{
	last_shard = cpu_now() & (RL_SHARDS - 1);
	return last_shard;
}

static inline void count(struct rl_table *t, unsigned rule, int allowed)
{
	struct rl_shm_counter *c = &t->shards[shard_of()].rule[rule];

	atomic_fetch_add_explicit(allowed ? &c->allowed : &c->denied, 1,
				  memory_order_relaxed);
}

/* ---- decisions: the general path --------------------------------------------- */

/*
 * Where a window's key starts (start_of): a key with nothing counted here
 * in the current window (new, or last used in an earlier one) starts, with
 * an agent syncing N hosts, from its share of what the window has left,
 * ceil(R / N): the state pretends the rest is used already (`provisional`,
 * until the agent brings the store's counts). N hosts meeting a key in one
 * window before they hear of each other admit at most count + N - 1 of it
 * (sliding: an estimate over the global counts within limit + N - 1).
 */
static uint64_t window_start(struct rl_table *t, const struct rl_algo *a,
			     uint64_t old, uint32_t cost, uint64_t now_ns)
{
	uint64_t cur, prev, idx, left, share;

	if (!(rl_table_agent_flags(t) & RL_AGENT_SYNC))
		return old;
	idx = rl_window_load(a, old, now_ns, &cur, &prev);
	if (cur)
		return old; /* in use in this window: its own (or synced) count */
	left = rl_window_left(a, 0, prev, now_ns);
	share = host_share(t, left);
	if (share == left)
		return old; /* alone, or nothing to share */
	/* As for the bucket: what the window could take is not refused by
	 * the share alone. */
	if (share < cost)
		share = cost < left ? cost : left;
	return rl_window_share(a, idx, 0, prev, share, hosts_of(t), now_ns);
}

/*
 * Where a key starts that this host has not seen in use: new to it, or idle
 * long enough to be full again (`old` is its state). Alone, with a full
 * bucket. With an agent syncing a token bucket across N hosts, the host
 * cannot know what the others have used of it until the store answers (one
 * sync_interval): it starts from its share of the bucket, ceil(burst / N),
 * so that N hosts meeting a key within one sync_interval admit at most
 * burst + N - 1 of it together (in requests of cost 1; a costlier request
 * gets at least its cost). The agent's next sync of the key puts the
 * store's state in place of the share (slot_agent.c, `provisional`). A key
 * in use (a TAT ahead, or behind by no more than the catch-up) goes on
 * from its state.
 */
static uint64_t start_of(struct rl_table *t, const struct rl_algo *a,
			 uint64_t old, uint32_t cost, uint64_t now_ns)
{
	uint32_t burst = a->rate.burst;
	uint64_t share;

	if (a->kind != RL_ALGO_GCRA)
		return window_start(t, a, old, cost, now_ns);
	if (old && old + RL_GCRA_CATCHUP_NS > now_ns)
		return old;
	share = host_share(t, burst);
	if (share == burst)
		return old; /* alone */
	/* A request the whole bucket could take is never refused by the
	 * share alone: it would be refused again at every sight of the key
	 * (its state never moves). */
	if (share < cost)
		share = cost < burst ? cost : burst;
	/* A TAT that far ahead of now leaves `share` requests in the bucket. */
	return now_ns + (burst - share) * a->interval_ns;
}

/* A refusal from this host's share of a key: the store's state for it is
 * at most a sync_interval away, so the client is told to come back then
 * rather than when the share alone would refill. */
static void share_retry(struct rl_table *t, struct rl_result *out)
{
	uint64_t round = (uint64_t)rl_table_agent_interval_ms(t) * RL_NS_PER_MS;

	if (round && out->retry_after_ns > round)
		out->retry_after_ns = round;
}

/*
 * With RL_TAKE_LEND, whether a decision is left to a lend (ask.c): a
 * request of a token bucket the key's bucket could take, that this host
 * would start from a blind share (`start` is not the state: new here,
 * other hosts alive), or refuse while its state holds part of the bucket
 * back for the others (`provisional`: a grant, or a mirror before one;
 * not RL_PROVISIONAL_DRY, which the store lent nothing since the last
 * sync). What is refused from the store's whole state (its debt) stays
 * here.
 */
static inline int lend_wanted(const struct rl_slot *s, const struct rl_algo *a,
			      uint64_t old, uint64_t start, uint32_t cost,
			      int allowed, unsigned how)
{
	if (!(how & RL_TAKE_LEND) || a->kind != RL_ALGO_GCRA || cost == 0 ||
	    cost > a->rate.burst)
		return 0;
	if (start != old)
		return 1;
	if (allowed)
		return 0;
	/* (DRY: the store lent nothing since the last sync) */
	switch (atomic_load_explicit(&s->provisional, memory_order_relaxed)) {
	case RL_PROVISIONAL_FRESH:
	case RL_PROVISIONAL_HELD:
		return 1;
	default:
		return 0;
	}
}

/*
 * Decide `cost` on slot `s`, which held `tag` when found. Returns 1 when
 * decided, 0 when the slot does not hold the key any more (look again), 2
 * when left to a lend (lend_wanted: nothing stored, nothing counted).
 */
static inline __attribute__((always_inline)) int
decide_in(struct rl_table *t, const struct rl_rule_cache *rc, struct rl_slot *s,
	  uint64_t tag, uint32_t cost, uint64_t now_ns, struct rl_result *out,
	  unsigned how)
{
	/* A strict rule's state mirrors the store's (ask.c): no share, and
	 * nothing for the agent to push. */
	int syncs = !(how & RL_TAKE_EXACT) &&
		    (rl_table_agent_flags(t) & RL_AGENT_SYNC);

	uint64_t old = atomic_load_explicit(&s->state, memory_order_acquire);
	const struct rl_algo *algo;
	uint64_t start, new;

	for (;;) {
		if (is_marker(old)) {
			/* Being re-keyed (or left so by a dead process):
			 * look again, never wait. */
			rl_slot_marker_expire(t, s, old, now_ns);
			return 0;
		}
		/* The state is ours only if the key still is. */
		if (atomic_load_explicit(&s->key, memory_order_acquire) != tag)
			return 0;
		algo = slot_algo(rc, s);
		start = syncs ? start_of(t, algo, old, cost, now_ns) : old;
		if (syncs && start != old &&
		    lend_wanted(s, algo, old, start, cost, 1, how))
			return 2;
		new = start;
		rl_algo_step(algo, &new, cost, now_ns, out);
		if (syncs && !out->allowed &&
		    lend_wanted(s, algo, old, start, cost, 0, how))
			return 2;
		if (!out->allowed) {
			/* The agent refreshes keys being refused too (a plan
			 * upgrade must reach them): each round if refused
			 * from a share, else in turn with the keys only in
			 * debt (src/agent/repush.c). */
			if (syncs)
				atomic_fetch_or_explicit(&s->sync_admitted,
							 RL_SYNC_DENIED,
							 memory_order_relaxed);
			/* Refused from a share (a fresh key's, or the part of
			 * what is left that the last sync gave this host),
			 * not from the store's whole state: that comes within
			 * a sync_interval, worth a retry. */
			if ((start != old ||
			     atomic_load_explicit(&s->provisional,
						  memory_order_relaxed)) &&
			    cost <= (algo->kind == RL_ALGO_GCRA ? algo->rate.burst
								: algo->rate.count))
				share_retry(t, out);
			return 1;
		}
		if (new == old || cost == 0)
			return 1;
		if (atomic_compare_exchange_weak_explicit(&s->state, &old, new,
							  memory_order_acq_rel,
							  memory_order_acquire)) {
			if (start != old)
				atomic_store_explicit(&s->provisional, 1,
						      memory_order_relaxed);
			/* Only an agent that syncs needs the count. */
			if (syncs)
				atomic_fetch_add_explicit(&s->sync_admitted, cost,
							  memory_order_relaxed);
			return 1;
		}
		/* Lost a race with another decision: `old` is fresh. */
	}
}

/* rl_slot_take, the whole of it: every case the fast path below leaves. */
static __attribute__((noinline)) int
slot_take_slow(struct rl_table *t, unsigned rule, const void *key,
	       size_t key_len, uint32_t cost, uint64_t now_ns,
	       struct rl_result *out, struct rl_slot_hint *hint, unsigned how)
{
	const struct rl_rule_cache *rc = rl_slot_rule(t, rule);
	struct keyref k;

	if (!rc)
		return -EINVAL;
	/* Where this key was last time: no hash, no scan, if it still is. */
	if (hint && hint->tag && tag_rule(hint->tag) == rule &&
	    hint->index < t->hdr->capacity) {
		struct rl_slot *s = &t->slots[hint->index];

		int d = atomic_load_explicit(&s->key, memory_order_acquire) ==
				hint->tag
			? decide_in(t, rc, s, hint->tag, cost, now_ns, out, how)
			: 0;

		if (d == 2)
			return RL_TAKE_ASK;
		if (d)
			goto decided;
	}
	rl_slot_key(t, rule, key, key_len, &k);
	for (int attempt = 0; attempt < LOOKUP_RETRIES; attempt++) {
		/* A peek (cost 0) never claims a slot: it stores nothing. */
		struct rl_slot *s = rl_slot_find_fast(t, &k, now_ns, cost > 0);

		if (!s) {
			if (cost == 0)
				goto fresh;
			break;
		}
		int d = decide_in(t, rc, s, k.tag, cost, now_ns, out, how);

		if (d && hint) {
			hint->index = (uint32_t)(s - t->slots);
			hint->tag = k.tag;
		}
		if (d == 2)
			return RL_TAKE_ASK;
		if (d)
			goto decided;
	}
	/* No slot to give: decide as a new key, keep nothing. */
	rl_table_count(t, RL_COUNT_OVERFLOWS);
	if (hint)
		hint->tag = 0;
fresh:
	{
		uint64_t st = 0;

		rl_algo_step(&rc->algo, &st, cost, now_ns, out);
	}
decided:
	if ((how & RL_TAKE_COUNT) || !out->allowed)
		count(t, rule, out->allowed);
	return 0;
}

/* ---- decisions: the fast path, and the takes --------------------------------- */

/*
 * The decision as it nearly always is: a rule this process knows, decided
 * by its own GCRA rate, the key where the hint or its bucket's scan says,
 * the state no marker, no plan, allowed by one CAS that wins (or refused
 * with no agent to tell). It
 * stores nothing until that CAS, so on anything else it returns 0 and the
 * general path decides from scratch; else 1, decided (and counted). Its
 * calls are all on the way out, so that the path itself stays in the
 * scratch registers (no frame).
 */
static inline __attribute__((always_inline)) int
take_fast(struct rl_table *t, unsigned rule, const void *key, size_t key_len,
	  uint32_t cost, uint64_t now_ns, struct rl_result *out,
	  struct rl_slot_hint *hint, unsigned how, int syncs)
{
	const struct rl_rule_cache *rc;
	struct rl_shm_counter *c;
	struct rl_result r;
	struct rl_slot *s;
	uint64_t tag, old, start, new;

	if (rule >= RL_MAX_RULES)
		return 0;
	if (hint && hint->tag && tag_rule(hint->tag) == rule &&
	    hint->index < t->hdr->capacity) {
		s = &t->slots[hint->index];
		tag = hint->tag;
		if (atomic_load_explicit(&s->key, memory_order_acquire) != tag)
			return 0;
	} else {
		struct keyref k;

		rl_slot_key(t, rule, key, key_len, &k);
		tag = k.tag;
		/* The bucket's occupied prefix (rl_slot_find's scan, without
		 * its claiming: a key not there goes the general way). */
		s = &t->slots[k.bucket * RL_BUCKET_SLOTS];
		for (unsigned i = 0;; i++, s++) {
			uint64_t key_word = atomic_load_explicit(
				&s->key, memory_order_acquire);

			if (key_word == tag)
				break;
			if (key_word == 0 || i == RL_BUCKET_SLOTS - 1)
				return 0;
		}
	}
	rc = __atomic_load_n(&t->cache[rule], __ATOMIC_ACQUIRE);
	if (!rc || rc->algo.kind != RL_ALGO_GCRA)
		return 0;
	/* decide_in's protocol: the state, then the key still ours. */
	old = atomic_load_explicit(&s->state, memory_order_acquire);
	if (is_marker(old) ||
	    atomic_load_explicit(&s->key, memory_order_acquire) != tag ||
	    atomic_load_explicit(&s->plan, memory_order_relaxed))
		return 0;
	/* The counter's place now: t and rule are then done with, which
	 * leaves the decision the registers. */
	c = &t->shards[shard_of()].rule[rule];
	/* With an agent syncing, a key new here starts from its share. */
	start = syncs ? start_of(t, &rc->algo, old, cost, now_ns) : old;
	/* A blind share a lend may replace: the general path's to say. */
	if ((how & RL_TAKE_LEND) && start != old)
		return 0;
	new = start;
	rl_gcra_decide_in(&rc->algo, &new, rc->algo.interval_ns,
			  rc->algo.depth_ns, rc->algo.rate.burst, cost, now_ns,
			  &r);
	if (!r.allowed) {
		/* A refusal the agent must hear of, or from a share (told to
		 * retry sooner): decide_in's. */
		if (syncs ||
		    atomic_load_explicit(&s->provisional, memory_order_relaxed))
			return 0;
	} else if (new != old && cost) {
		if (!atomic_compare_exchange_strong_explicit(
			    &s->state, &old, new, memory_order_acq_rel,
			    memory_order_acquire))
			return 0; /* lost a race: the general path tries again */
		if (syncs) {
			/* decide_in's: what the agent pushes, and a share
			 * the next sync replaces. */
			if (start != old)
				atomic_store_explicit(&s->provisional, 1,
						      memory_order_relaxed);
			atomic_fetch_add_explicit(&s->sync_admitted, cost,
						  memory_order_relaxed);
		}
	}
	out->allowed = r.allowed;
	out->limit = r.limit;
	out->remaining = r.remaining;
	out->retry_after_ns = r.retry_after_ns;
	out->reset_after_ns = r.reset_after_ns;
	if (hint) {
		hint->index = (uint32_t)(s - t->slots);
		hint->tag = tag;
	}
	if (__builtin_expect(r.allowed, 1)) {
		if (how & RL_TAKE_COUNT)
			atomic_fetch_add_explicit(&c->allowed, 1,
						  memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&c->denied, 1, memory_order_relaxed);
	}
	return 1;
}

/* take_fast with an agent syncing: shares, and the counts it pushes. */
static __attribute__((noinline)) int
take_synced(struct rl_table *t, unsigned rule, const void *key,
	    size_t key_len, uint32_t cost, uint64_t now_ns,
	    struct rl_result *out, struct rl_slot_hint *hint, unsigned how)
{
	return take_fast(t, rule, key, key_len, cost, now_ns, out, hint, how,
			 1);
}

/* rl_slot_take, inline in each of the public takes below so that their
 * constant `how` and `hint` fold in. */
static inline __attribute__((always_inline)) int
slot_take(struct rl_table *t, unsigned rule, const void *key, size_t key_len,
	  uint32_t cost, uint64_t now_ns, struct rl_result *out,
	  struct rl_slot_hint *hint, unsigned how)
{
	/* decide_in's `syncs` (a strict rule's state mirrors the store's):
	 * with an agent syncing, the fast path's own copy, apart. */
	if (!(how & RL_TAKE_EXACT) &&
	    (rl_table_agent_flags(t) & RL_AGENT_SYNC)) {
		if (take_synced(t, rule, key, key_len, cost, now_ns, out, hint,
				how))
			return 0;
	} else if (take_fast(t, rule, key, key_len, cost, now_ns, out, hint,
			     how, 0)) {
		return 0;
	}
	return slot_take_slow(t, rule, key, key_len, cost, now_ns, out, hint,
			      how);
}

int rl_slot_take(struct rl_table *t, unsigned rule, const void *key,
		 size_t key_len, uint32_t cost, uint64_t now_ns,
		 struct rl_result *out, struct rl_slot_hint *hint, unsigned how)
{
	return slot_take(t, rule, key, key_len, cost, now_ns, out, hint, how);
}

int rl_table_take_hint(struct rl_table *t, unsigned rule, const void *key,
		       size_t key_len, uint32_t cost, uint64_t now_ns,
		       struct rl_result *out, struct rl_slot_hint *hint)
{
	return slot_take(t, rule, key, key_len, cost, now_ns, out, hint,
			 RL_TAKE_COUNT);
}

int rl_table_take_uncounted(struct rl_table *t, unsigned rule, const void *key,
			    size_t key_len, uint32_t cost, uint64_t now_ns,
			    struct rl_result *out, struct rl_slot_hint *hint)
{
	return slot_take(t, rule, key, key_len, cost, now_ns, out, hint, 0);
}

void rl_table_count_allowed(struct rl_table *t, unsigned rule)
{
	if (rule < RL_MAX_RULES)
		count(t, rule, 1);
}

void rl_table_count_store_down(struct rl_table *t, unsigned rule,
			       int denied_already)
{
	if (rule >= RL_MAX_RULES)
		return;
	if (!denied_already)
		count(t, rule, 0);
	atomic_fetch_add_explicit(&t->rules[rule].store_down, 1,
				  memory_order_relaxed);
}

/* ---- denials towards a ban --------------------------------------------------- */

/*
 * slot.fails: the start of the current count, in ms of CLOCK_MONOTONIC
 * plus one (0: no count), above a 24-bit count of denials.
 */
#define FAILS_COUNT_BITS 24
#define FAILS_COUNT_MAX ((1u << FAILS_COUNT_BITS) - 1)

/* One more denial of slot `s`'s key for the agent to add to the count
 * across hosts (fail_sync.c). At most UINT16_MAX between two rounds: a
 * count that high is past any maxretry already. */
static void fail_owed(struct rl_slot *s)
{
	uint16_t d = atomic_load_explicit(&s->sync_fails, memory_order_relaxed);

	while (d < UINT16_MAX &&
	       !atomic_compare_exchange_weak_explicit(&s->sync_fails, &d, d + 1,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
}

/* The slot rl_table_fail counts `key` in: the hint's, else found (claimed
 * if `create`). NULL when the table has no slot for it. */
static struct rl_slot *fail_slot(struct rl_table *t, unsigned rule,
				 const void *key, size_t key_len,
				 uint64_t now_ns, struct rl_slot_hint *hint,
				 int create)
{
	struct keyref k;

	if (hint && hint->tag && tag_rule(hint->tag) == rule &&
	    hint->index < t->hdr->capacity &&
	    atomic_load_explicit(&t->slots[hint->index].key,
				 memory_order_acquire) == hint->tag)
		return &t->slots[hint->index];
	rl_slot_key(t, rule, key, key_len, &k);
	return rl_slot_find(t, &k, now_ns, create);
}

int rl_table_fail(struct rl_table *t, unsigned rule, const void *key,
		  size_t key_len, uint32_t maxretry, uint64_t findtime_ns,
		  uint64_t now_ns, struct rl_slot_hint *hint)
{
	uint64_t now_ms = now_ns / RL_NS_PER_MS + 1;
	uint64_t find_ms = findtime_ns / RL_NS_PER_MS;
	struct rl_slot *s;
	uint64_t old, new;
	uint32_t n;

	if (!rl_table_rule_get(t, rule))
		return -EINVAL;
	if (maxretry == 0)
		return 0;
	s = fail_slot(t, rule, key, key_len, now_ns, hint, 1);
	if (!s)
		return 0;
	/* Not fenced against re-keying like the state: a count that lands
	 * just as the slot changes hands is one denial counted for the
	 * wrong key, which no bucket's state depends on. */
	old = atomic_load_explicit(&s->fails, memory_order_relaxed);
	for (;;) {
		uint64_t start = old >> FAILS_COUNT_BITS;

		n = (uint32_t)(old & FAILS_COUNT_MAX);
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
			break;
	}
	/* With an agent syncing, the store sums every host's denials of the
	 * key (fail_sync.c): this one is owed to that count too, banned here
	 * or not (the store's count then reaches maxretry on a client banned
	 * already, which bans nothing more). */
	if (rl_table_agent_flags(t) & RL_AGENT_SYNC)
		fail_owed(s);
	return n >= maxretry;
}

int rl_table_fail_forget(struct rl_table *t, unsigned rule, const void *key,
			 size_t key_len, uint64_t now_ns)
{
	struct rl_slot *s;

	if (!rl_table_rule_get(t, rule))
		return -EINVAL;
	s = fail_slot(t, rule, key, key_len, now_ns, NULL, 0);
	if (!s)
		return -ENOENT;
	atomic_store_explicit(&s->fails, 0, memory_order_relaxed);
	atomic_store_explicit(&s->sync_fails, 0, memory_order_relaxed);
	return 0;
}

int rl_table_take(struct rl_table *t, unsigned rule, const void *key,
		  size_t key_len, uint32_t cost, uint64_t now_ns,
		  struct rl_result *out)
{
	return slot_take(t, rule, key, key_len, cost, now_ns, out, NULL,
			 RL_TAKE_COUNT);
}

/* What a refund changes: the key's state, by its algorithm. */
struct refund {
	const struct rl_rule_cache *rc;
	const struct rl_slot *s;
	uint32_t cost;
	uint64_t now_ns;
	uint64_t until_ns; /* when the take stops weighing, if known (else 0) */
};

static int refund_next(uint64_t old, uint64_t *new, const void *arg)
{
	const struct refund *r = arg;

	*new = old;
	if (r->until_ns)
		rl_algo_refund_until(slot_algo(r->rc, r->s), new, r->cost,
				     r->until_ns, r->now_ns);
	else
		rl_algo_refund(slot_algo(r->rc, r->s), new, r->cost, r->now_ns);
	return *new != old;
}

static int refund_keyref(struct rl_table *t, unsigned rule,
			 const struct keyref *kr, uint32_t cost, uint64_t now_ns,
			 uint64_t until_ns, int counted)
{
	const struct rl_rule_cache *rc = rl_table_rule_get(t, rule);
	const struct keyref k = *kr;
	struct rl_shm_counter *c;
	struct rl_slot *s;

	if (!rc)
		return -EINVAL;
	s = rl_slot_find(t, &k, now_ns, 0);
	if (!s)
		return -ENOENT;
	if (slot_cas(s, k.tag, refund_next,
		     &(struct refund){ .rc = rc, .s = s, .cost = cost,
				       .now_ns = now_ns, .until_ns = until_ns }))
		return -ENOENT;
	/* The decision was counted as allowed; it was not, in the end. */
	if (counted) {
		c = &t->shards[shard_of()].rule[rule];
		atomic_fetch_sub_explicit(&c->allowed, 1, memory_order_relaxed);
	}
	{
		/* Nor is it owed to the other hosts: taken off what the next
		 * sync sends, or, if that was sent already, sent as given
		 * back (a count_status answer comes after the sync). */
		uint32_t a = atomic_load_explicit(&s->sync_admitted,
						  memory_order_relaxed), b;

		do {
			uint32_t back = (a & RL_SYNC_RETURNED) >>
					RL_SYNC_RETURNED_SHIFT;

			if ((a & RL_SYNC_COUNT) >= cost)
				b = a - cost;
			else if (back + cost <= RL_SYNC_RETURNED >>
						 RL_SYNC_RETURNED_SHIFT)
				b = a + (cost << RL_SYNC_RETURNED_SHIFT);
			else
				break; /* too many: charged for good */
		} while (!atomic_compare_exchange_weak(&s->sync_admitted, &a, b));
	}
	return 0;
}

static int refund_in(struct rl_table *t, unsigned rule, const void *key,
		     size_t key_len, uint32_t cost, uint64_t now_ns, int counted)
{
	struct keyref k;

	if (!rl_table_rule_get(t, rule))
		return -EINVAL;
	rl_slot_key(t, rule, key, key_len, &k);
	return refund_keyref(t, rule, &k, cost, now_ns, 0, counted);
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

void rl_table_key_ref(const struct rl_table *t, unsigned rule, const void *key,
		      size_t key_len, struct rl_key_ref *out)
{
	struct keyref k;

	if (rule >= RL_MAX_RULES) {
		/* No such rule: a reference to nothing (give-back: -EINVAL). */
		out->tag = out->bucket = out->until_ns = 0;
		return;
	}
	rl_slot_key(t, rule, key, key_len, &k);
	out->tag = k.tag;
	out->bucket = k.bucket;
	out->until_ns = 0;
}

int rl_table_give_back_ref(struct rl_table *t, unsigned rule,
			   const struct rl_key_ref *ref, uint32_t cost,
			   uint64_t now_ns)
{
	/* rl_slot_find() goes by the tag and the bucket: the key's bytes are
	 * only written when a slot is claimed, which a peek never does. */
	struct keyref k = { .tag = ref->tag, .bucket = ref->bucket };

	/* Past the take's reset it weighs no more: a fixed window has
	 * ended, a sliding one's next too, a bucket has been full. What is
	 * in the state then is other requests' (and what was sent to the
	 * store, other windows'): an answer held back that long (a client
	 * that does not read a big answer pipelined before it) must not
	 * cancel a later failure's charge. */
	if (ref->until_ns && now_ns >= ref->until_ns)
		return -ENOENT;
	return refund_keyref(t, rule, &k, cost, now_ns, ref->until_ns, 0);
}

static const uint64_t service_le_us[RL_SERVICE_BUCKETS] = RL_SERVICE_LE_US;

void rl_table_count_answer(struct rl_table *t, unsigned rule, unsigned status,
			   uint64_t service_ns)
{
	struct rl_shm_answers *a;
	uint64_t us = service_ns / 1000;
	unsigned b = 0;

	if (rule >= RL_MAX_RULES || status < 100 || status > 599)
		return;
	/* The shard of this thread's last decision: any shard counts the
	 * same, and this one is most likely its CPU's still. */
	a = &t->shards[last_shard].answers[rule];
	while (us > service_le_us[b])
		b++; /* the last bound is UINT64_MAX */
	atomic_fetch_add_explicit(&a->classes[status / 100 - 1], 1,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&a->service[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&a->service_sum_us, us, memory_order_relaxed);
}
