/* SPDX-License-Identifier: MIT */
/*
 * rules.c - the rules registered in the segment: claiming a rule's id,
 * publishing its rates for the processes that did not register it, each
 * process's cache of them, and the rules' counters (stats, the denial
 * summary).
 */
#include "shm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "hash.h"
#include "mem.h"

/* ---- rules ------------------------------------------------------------------ */

static uint64_t rule_ident(const struct rl_rule_def *def)
{
	struct {
		char name[RL_RULE_NAME_MAX];
		uint32_t algorithm;
	} id;

	memset(&id, 0, sizeof(id));
	strncpy(id.name, def->name, sizeof(id.name) - 1);
	id.algorithm = (uint32_t)def->algorithm;
	return rl_hash_sip13(rl_hash_public_key, &id, sizeof(id)) | 1;
}

/* Does entry `r` say what `def` says (rates, plans)? */
static int rule_same(const struct rl_shm_rule *r, const struct rl_rule_def *def)
{
	if (r->period_ns != def->rate.period_ns || r->count != def->rate.count ||
	    r->burst != def->rate.burst || r->nplans != def->nplans)
		return 0;
	for (unsigned i = 0; i < def->nplans; i++)
		if (r->plans[i].period_ns != def->plans[i].period_ns ||
		    r->plans[i].count != def->plans[i].count ||
		    r->plans[i].burst != def->plans[i].burst)
			return 0;
	return 1;
}

/*
 * Write a rule entry's fields: the rates of its latest registration, for
 * the processes that did not register it (rlshimctl, the agent before it
 * restarts on a reload). `seq` is odd while they change. A writer that
 * finds another at work leaves the fields to it, unless that one went odd
 * longer than RL_MARK_TIMEOUT_NS ago: killed half-way, it is taken over.
 */
static void rule_publish(struct rl_shm_rule *r, const struct rl_rule_def *def)
{
	uint32_t seq = atomic_load_explicit(&r->seq, memory_order_acquire);
	uint64_t now = rl_time_now_ns();

	if (seq & 1) {
		uint64_t at = atomic_load_explicit(&r->seq_ns,
						   memory_order_relaxed);

		if (now < at || now - at < RL_MARK_TIMEOUT_NS)
			return;
		/* Taken over: stays odd while we write. */
		if (!atomic_compare_exchange_strong(&r->seq, &seq, seq + 2))
			return;
		seq += 2;
	} else if (!atomic_compare_exchange_strong(&r->seq, &seq, seq + 1)) {
		return;
	} else {
		seq += 1;
	}
	/* seq is now the odd value in the entry */
	atomic_store_explicit(&r->seq_ns, now, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	r->algorithm = (uint32_t)def->algorithm;
	r->period_ns = def->rate.period_ns;
	r->count = def->rate.count;
	r->burst = def->rate.burst;
	strncpy(r->name, def->name, sizeof(r->name) - 1);
	r->nplans = def->nplans;
	for (unsigned i = 0; i < def->nplans; i++) {
		r->plans[i].period_ns = def->plans[i].period_ns;
		r->plans[i].count = def->plans[i].count;
		r->plans[i].burst = def->plans[i].burst;
	}
	atomic_store_explicit(&r->seq, seq + 1, memory_order_release);
	atomic_store_explicit(&r->ready, 1, memory_order_release);
}

/* Fill `c` from `def`. 0, or -EINVAL for a rate no algorithm takes. */
static int cache_fill(struct rl_rule_cache *c, enum rl_algorithm algorithm,
		      const struct rl_rate *rate, unsigned nplans,
		      const struct rl_rate *plans)
{
	if (rl_algo_init(&c->algo, algorithm, rate) || nplans > RL_MAX_PLANS)
		return -EINVAL;
	for (unsigned i = 0; i < nplans; i++)
		if (rl_algo_init(&c->plans[i], algorithm, &plans[i]))
			return -EINVAL;
	c->nplans = nplans;
	return 0;
}

/*
 * Unix time less CLOCK_MONOTONIC, as the segment's creator saw them: the
 * windows of every process on the host start at the same instants, and at
 * those of the other hosts (window.c). Fixed for the segment's life, so a
 * step of the wall clock never moves a window; a host whose wall clock was
 * off when the segment was made keeps that error until it is made again.
 */
static void cache_clock(const struct rl_table *t, struct rl_rule_cache *c)
{
	uint64_t unix_ns = t->hdr->created_unix_ms * 1000000ull;
	uint64_t mono_ns = t->hdr->created_mono_ns;
	uint64_t off = unix_ns > mono_ns ? unix_ns - mono_ns : 0;

	c->algo.unix_off_ns = off;
	for (unsigned i = 0; i < c->nplans; i++)
		c->plans[i].unix_off_ns = off;
}

/*
 * What the segment says of rule `id`, into `c`: read between two equal
 * even values of `seq` when it can be; after a few tries (a writer at work,
 * or one killed half-way) as it stands. Either way every value is checked
 * before use, so a torn read is at worst another valid rate.
 */
static int cache_from_segment(struct rl_table *t, unsigned id,
			      struct rl_rule_cache *c)
{
	struct rl_shm_rule *r = &t->rules[id];
	struct rl_rate rate, plans[RL_MAX_PLANS];
	uint32_t algorithm, nplans = 0;

	for (int tries = 0; tries < 4; tries++) {
		uint32_t s1 = atomic_load_explicit(&r->seq, memory_order_acquire);

		algorithm = r->algorithm;
		rate.period_ns = r->period_ns;
		rate.count = r->count;
		rate.burst = r->burst;
		nplans = r->nplans;
		if (nplans > RL_MAX_PLANS)
			nplans = RL_MAX_PLANS + 1; /* refused below */
		for (unsigned i = 0; i < nplans && i < RL_MAX_PLANS; i++) {
			plans[i].period_ns = r->plans[i].period_ns;
			plans[i].count = r->plans[i].count;
			plans[i].burst = r->plans[i].burst;
		}
		atomic_thread_fence(memory_order_acquire);
		if (!(s1 & 1) &&
		    atomic_load_explicit(&r->seq, memory_order_relaxed) == s1)
			break;
	}
	/* The segment is shared: what it says is checked before use. */
	return cache_fill(c, (enum rl_algorithm)algorithm, &rate, nplans, plans);
}

const struct rl_rule_cache *rl_table_rule_get(struct rl_table *t, unsigned id)
{
	struct rl_rule_cache *c;
	struct rl_shm_rule *r;
	int st = 0;

	if (id >= RL_MAX_RULES)
		return NULL;
	c = __atomic_load_n(&t->cache[id], __ATOMIC_ACQUIRE);
	if (c)
		return c;
	/* A rule this process did not register: the segment's word, read
	 * once, by one thread. */
	r = &t->rules[id];
	if (!atomic_load_explicit(&r->ident, memory_order_acquire) ||
	    !atomic_load_explicit(&r->ready, memory_order_acquire))
		return NULL;
	if (!__atomic_compare_exchange_n(&t->from_segment_state[id], &st, 1, 0,
					 __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
		/* Another thread is at it (or was, in the parent of this
		 * fork): not known yet. Never a half-filled one. */
		return __atomic_load_n(&t->cache[id], __ATOMIC_ACQUIRE);
	c = &t->from_segment[id];
	if (cache_from_segment(t, id, c)) {
		__atomic_store_n(&t->from_segment_state[id], 0, __ATOMIC_RELEASE);
		return NULL;
	}
	cache_clock(t, c);
	{
		struct rl_rule_cache *expect = NULL;

		/* An own cache may have come meanwhile: it wins. */
		if (!__atomic_compare_exchange_n(&t->cache[id], &expect, c, 0,
						 __ATOMIC_RELEASE,
						 __ATOMIC_ACQUIRE))
			c = expect;
	}
	__atomic_store_n(&t->from_segment_state[id], 2, __ATOMIC_RELEASE);
	return c;
}

static int same_plans(const struct rl_rule_cache *c,
		      const struct rl_rule_def *def)
{
	for (unsigned i = 0; i < def->nplans; i++)
		if (memcmp(&c->plans[i].rate, &def->plans[i],
			   sizeof(def->plans[i])))
			return 0;
	return 1;
}

/* This process's own rates for rule `id`, from `def`, in force from now
 * for every thread (the one they replace is kept for a thread still
 * using it). */
static int cache_own(struct rl_table *t, unsigned id,
		     const struct rl_rule_def *def)
{
	struct rl_rule_cache *c = rl_mem_alloc(sizeof(*c)), *old;

	if (!c)
		return -ENOMEM;
	if (cache_fill(c, def->algorithm, &def->rate, def->nplans, def->plans)) {
		rl_mem_free(c);
		return -EINVAL;
	}
	cache_clock(t, c);
	old = __atomic_load_n(&t->cache[id], __ATOMIC_ACQUIRE);
	do {
		c->retired = old && old != &t->from_segment[id] ? old : NULL;
	} while (!__atomic_compare_exchange_n(&t->cache[id], &old, c, 0,
					      __ATOMIC_RELEASE,
					      __ATOMIC_ACQUIRE));
	return 0;
}

/* Validate `def`: 0 or -EINVAL. */
static int def_valid(const struct rl_rule_def *def)
{
	size_t nlen;

	if (!def || !def->name)
		return -EINVAL;
	nlen = strlen(def->name);
	if (nlen == 0 || nlen >= RL_RULE_NAME_MAX ||
	    rl_algo_init(NULL, def->algorithm, &def->rate) ||
	    def->nplans > RL_MAX_PLANS || (def->nplans && !def->plans))
		return -EINVAL;
	for (unsigned i = 0; i < def->nplans; i++)
		if (rl_algo_init(NULL, def->algorithm, &def->plans[i]))
			return -EINVAL;
	return 0;
}

int rl_table_rule_claim(struct rl_table *t, const struct rl_rule_def *def,
			unsigned *id)
{
	uint64_t ident;

	if (!t || def_valid(def))
		return -EINVAL;
	ident = rule_ident(def);
	for (unsigned i = 0; i < RL_MAX_RULES; i++) {
		struct rl_shm_rule *r = &t->rules[i];
		uint64_t cur = atomic_load_explicit(&r->ident,
						    memory_order_acquire);

		if (cur == 0) {
			uint64_t expect = 0;

			if (!atomic_compare_exchange_strong(&r->ident, &expect,
							    ident)) {
				cur = expect;
				if (cur != ident)
					continue;
			}
		} else if (cur != ident) {
			continue;
		}
		*id = i;
		return 0;
	}
	return -ENOSPC;
}

int rl_table_rule_use(struct rl_table *t, unsigned id,
		      const struct rl_rule_def *def)
{
	const struct rl_rule_cache *mine;

	if (!t || id >= RL_MAX_RULES || def_valid(def))
		return -EINVAL;
	/* The segment's record follows the latest registration (or a
	 * process that died half-way through its own). */
	if (!atomic_load_explicit(&t->rules[id].ready, memory_order_acquire) ||
	    !rule_same(&t->rules[id], def))
		rule_publish(&t->rules[id], def);
	mine = __atomic_load_n(&t->cache[id], __ATOMIC_ACQUIRE);
	if (mine && mine != &t->from_segment[id] &&
	    !memcmp(&mine->algo.rate, &def->rate, sizeof(def->rate)) &&
	    mine->nplans == def->nplans && same_plans(mine, def))
		return 0;
	return cache_own(t, id, def);
}

int rl_table_rule(struct rl_table *t, const struct rl_rule_def *def,
		  unsigned *id)
{
	int rc = rl_table_rule_claim(t, def, id);

	return rc ? rc : rl_table_rule_use(t, *id, def);
}

/* ---- the rules' counters ------------------------------------------------ */

int rl_table_rule_stats(struct rl_table *t, unsigned rule,
			struct rl_rule_stats *out)
{
	const struct rl_rule_cache *rc = rl_table_rule_get(t, rule);

	if (!rc)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	memcpy(out->name, t->rules[rule].name, sizeof(out->name));
	out->name[sizeof(out->name) - 1] = '\0';
	out->algorithm = rc->algo.kind;
	out->rate = rc->algo.rate;
	for (unsigned i = 0; i < RL_SHARDS; i++) {
		out->allowed += atomic_load_explicit(
			&t->shards[i].rule[rule].allowed, memory_order_relaxed);
		const struct rl_shm_answers *a = &t->shards[i].answers[rule];

		out->denied += atomic_load_explicit(
			&t->shards[i].rule[rule].denied, memory_order_relaxed);
		for (unsigned c = 0; c < 5; c++)
			out->answers[c] += atomic_load_explicit(
				&a->classes[c], memory_order_relaxed);
		for (unsigned b = 0; b < RL_SERVICE_BUCKETS; b++)
			out->service[b] += atomic_load_explicit(
				&a->service[b], memory_order_relaxed);
		out->service_sum_us += atomic_load_explicit(
			&a->service_sum_us, memory_order_relaxed);
	}
	out->bans = atomic_load_explicit(&t->rules[rule].bans,
					 memory_order_relaxed);
	out->store_down = atomic_load_explicit(&t->rules[rule].store_down,
					       memory_order_relaxed);
	return 0;
}

unsigned rl_table_summarise(struct rl_table *t, uint64_t now_ms,
			    uint64_t interval_ms,
			    void (*fn)(const char *rule, uint64_t denied,
				       uint64_t over_ms, void *arg),
			    void *arg)
{
	uint64_t last = atomic_load_explicit(&t->hdr->summary_ms,
					     memory_order_relaxed);
	unsigned lines = 0;

	if (now_ms < last + interval_ms ||
	    !atomic_compare_exchange_strong(&t->hdr->summary_ms, &last, now_ms))
		return 0;
	/* This process has the interval: no other one writes `summarised`
	 * until summary_ms moves again, interval_ms from now. A rule that a
	 * reload redefined has entries under one name: one line for them. */
	for (unsigned r = 0; r < RL_MAX_RULES; r++) {
		struct rl_rule_stats st, other;
		uint64_t denied = 0;
		int first = 1;

		if (rl_table_rule_stats(t, r, &st))
			continue;
		for (unsigned o = 0; o < RL_MAX_RULES && first; o++)
			if (o != r && !rl_table_rule_stats(t, o, &other) &&
			    strcmp(other.name, st.name) == 0)
				first = o > r;
		if (!first)
			continue; /* counted with the first of its name */
		for (unsigned o = r; o < RL_MAX_RULES; o++) {
			if (o != r && (rl_table_rule_stats(t, o, &other) ||
				       strcmp(other.name, st.name) != 0))
				continue;
			if (o == r)
				other = st;
			denied += other.denied -
				  atomic_exchange_explicit(&t->rules[o].summarised,
							   other.denied,
							   memory_order_relaxed);
		}
		if (denied) {
			fn(st.name, denied, last ? now_ms - last : 0, arg);
			lines++;
		}
	}
	return lines;
}

