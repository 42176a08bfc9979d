/* SPDX-License-Identifier: MIT */
/*
 * ask.c - sync = strict: decisions made in the store, through the agent.
 *
 * The shim never talks to the network. For a strict rule it decides from
 * the key's state here first: that state is the store's, as the store last
 * answered for this key, so a request it refuses is refused without a round
 * trip (a flood of denied requests costs the store nothing). A request it
 * would admit is posted as an ask in the segment; the agent takes it, runs
 * the store's script (one round trip, every ask in flight pipelined), sets
 * the key's state here to the store's and answers. The shim waits for the
 * answer on the ask's futex word, up to the deadline its caller gives (the
 * store's `timeout`); without an answer by then, the caller applies
 * on_store_down.
 *
 * An ask's life, in `word` (a sequence number above the state, so that a
 * word stuck the same for a whole sweep period is known to be left by a
 * dead process, never mistaken for a later use of the same entry):
 *
 *   FREE -(shim)-> FILLING -(shim)-> POSTED -(agent)-> TAKEN -(agent)->
 *   DONE or FAILED -(shim reads it)-> FREE
 *
 * A shim that gives up takes its POSTED ask back (FREE) or leaves a TAKEN
 * one ABANDONED, which the agent frees when the store's answer comes.
 */
#include "slot.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

static inline uint32_t st_of(uint32_t w)
{
	return w & RL_ASK_STATE_MASK;
}

static inline uint32_t with_state(uint32_t w, uint32_t st)
{
	return (w & ~RL_ASK_STATE_MASK) | st;
}

/* Two words of the same use of an ask. */
static inline int same_use(uint32_t a, uint32_t b)
{
	return (a & ~RL_ASK_STATE_MASK) == (b & ~RL_ASK_STATE_MASK);
}

/* The word's next use: the sequence moved on, the state `st`. */
static inline uint32_t next_use(uint32_t w, uint32_t st)
{
	return ((w & ~RL_ASK_STATE_MASK) + (1u << RL_ASK_STATE_BITS)) | st;
}

static int futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / RL_NS_PER_SEC),
			       (long)(ns % RL_NS_PER_SEC) };

	/* Shared, not FUTEX_PRIVATE: the waker is another process. */
	return (int)syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, &ts,
			    NULL, 0);
}

/* Every waiter: one left from an earlier use (stopped past the sweep)
 * must not take the wake of the ask's own. */
static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int cas_word(_Atomic uint32_t *w, uint32_t *old, uint32_t new)
{
	return atomic_compare_exchange_strong_explicit(w, old, new,
						       memory_order_acq_rel,
						       memory_order_acquire);
}

/* ---- the shim's side ---------------------------------------------------------- */

/* A free ask, claimed (FILLING), or NULL: all 256 in flight. */
static struct rl_shm_ask *claim(struct rl_table *t, uint32_t from,
				uint32_t *word)
{
	for (uint32_t k = 0; k < RL_ASKS; k++) {
		struct rl_shm_ask *q = &t->asks[(from + k) % RL_ASKS];
		uint32_t w = atomic_load_explicit(&q->word, memory_order_relaxed);

		if (st_of(w) != RL_ASK_FREE)
			continue;
		*word = next_use(w, RL_ASK_FILLING);
		if (cas_word(&q->word, &w, *word))
			return q;
	}
	return NULL;
}

/*
 * The client's view of the store's answer, from the key's state after it
 * (`state`, which is now the slot's too) by the key's algorithm: what is
 * left once admitted (a step of cost 0), or when it could pass (a step of
 * `cost`, refused: the store said so, whatever a clock a little apart
 * says).
 */
static void answer_result(const struct rl_algo *a, int allowed, uint64_t state,
			  uint32_t cost, struct rl_result *out)
{
	uint64_t now = rl_time_now_ns();

	rl_algo_step(a, &state, allowed ? 0 : cost, now, out);
	if (allowed) {
		out->allowed = 1;
		out->retry_after_ns = 0;
	} else if (out->allowed) {
		out->allowed = 0;
		out->retry_after_ns = RL_NS_PER_MS;
	}
}

/* Wait for the answer to ask `q` (claimed as `word`, now POSTED) until
 * `deadline_ns`: its final word, or 0 when the wait ended without one (the
 * ask is then given up: freed or left ABANDONED). */
static uint32_t await(struct rl_shm_ask *q, uint32_t word,
		      uint64_t deadline_ns)
{
	uint32_t w;

	for (;;) {
		uint64_t now = rl_time_now_ns();

		w = atomic_load_explicit(&q->word, memory_order_acquire);
		if (!same_use(w, word))
			return 0; /* swept: we were stopped past any timeout */
		if (st_of(w) == RL_ASK_DONE || st_of(w) == RL_ASK_FAILED)
			return w;
		if (now >= deadline_ns)
			break;
		futex_wait(&q->word, w, deadline_ns - now);
	}
	/* Give it up: take it back if not yet taken, else leave it to the
	 * agent to free. An answer that comes meanwhile is used. */
	for (;;) {
		uint32_t st = st_of(w);

		if (!same_use(w, word))
			return 0;
		if (st == RL_ASK_DONE || st == RL_ASK_FAILED)
			return w;
		if (cas_word(&q->word, &w,
			     with_state(w, st == RL_ASK_POSTED ? RL_ASK_FREE
							       : RL_ASK_ABANDONED)))
			return 0;
	}
}

/* Claim the hint's ask, fill it in and ring the agent: the ask, its word
 * (for await) in *word; NULL if none is free or it was swept meanwhile
 * (we were stopped that long). */
static struct rl_shm_ask *post(struct rl_table *t,
			       const struct rl_slot_hint *hint, unsigned kind,
			       unsigned rule, uint32_t cost, uint32_t *word)
{
	struct rl_shm_ask *q = claim(t, hint->index, word);
	uint32_t w;

	if (!q)
		return NULL;
	q->kind = kind;
	q->rule = rule;
	q->index = hint->index;
	q->tag = hint->tag;
	q->cost = cost;
	w = *word;
	if (!cas_word(&q->word, &w, with_state(*word, RL_ASK_POSTED)))
		return NULL;
	atomic_fetch_add_explicit(&t->hdr->asks_bell, 1, memory_order_release);
	futex_wake(&t->hdr->asks_bell);
	return q;
}

/* An answer read: the ask is free again, if it is still this use (else
 * it was swept while this process stood still, and what was read may be
 * another use's: 0, not to be believed). */
static int release(struct rl_shm_ask *q, uint32_t w)
{
	return cas_word(&q->word, &w, with_state(w, RL_ASK_FREE));
}

int rl_table_take_strict(struct rl_table *t, unsigned rule, const void *key,
			 size_t key_len, uint32_t cost, uint64_t now_ns,
			 uint64_t deadline_ns, struct rl_result *out,
			 struct rl_slot_hint *hint)
{
	struct rl_slot_hint own = { 0 };
	const struct rl_rule_cache *rc;
	const struct rl_algo *a;
	struct rl_shm_ask *q;
	uint32_t word, w;
	uint64_t state;
	int saved = errno, rc2, allowed;

	if (!hint)
		hint = &own;
	rc2 = rl_slot_take(t, rule, key, key_len, cost, now_ns, out, hint,
			   RL_TAKE_EXACT);
	if (rc2)
		return rc2;
	if (!out->allowed)
		return 1; /* the store said so already */
	if (!(rl_table_agent_flags(t) & RL_AGENT_STRICT) || !hint->tag ||
	    cost == 0)
		return -EAGAIN;
	rc = rl_table_rule_get(t, rule);
	a = slot_algo(rc, &t->slots[hint->index]);
	q = post(t, hint, RL_ASK_DECIDE, rule, cost, &word);
	if (!q)
		return -EAGAIN;
	w = await(q, word, deadline_ns);
	if (!w || st_of(w) == RL_ASK_FAILED) {
		if (w)
			release(q, w);
		errno = saved;
		return -EAGAIN;
	}
	allowed = (int)q->allowed;
	state = q->state;
	if (!release(q, w)) {
		errno = saved;
		return -EAGAIN;
	}
	answer_result(a, allowed, state, cost, out);
	errno = saved;
	return 0;
}

/*
 * sync = async: a lend. Decided here, unless the decision would start the
 * key from a blind share or refuse it from a share (RL_TAKE_LEND); then
 * the agent is asked, on the strict asks' channel and with the same wait,
 * for more of what the key has left in the store. The agent puts what the
 * store lent in the key's state here (rl_table_ask_lent) and the request is
 * decided again from it: a lend of nothing leaves the key refused, its
 * state the store's, and the next requests refused here without asking.
 */
int rl_table_take_lend(struct rl_table *t, unsigned rule, const void *key,
		       size_t key_len, uint32_t cost, uint64_t now_ns,
		       uint64_t deadline_ns, struct rl_result *out,
		       struct rl_slot_hint *hint)
{
	struct rl_slot_hint own = { 0 };
	uint64_t flags = rl_table_agent_flags(t);
	struct rl_shm_ask *q;
	uint32_t word, w;
	int saved = errno, rc;

	if (!hint)
		hint = &own;
	if ((flags & (RL_AGENT_LEND | RL_AGENT_SYNC | RL_AGENT_STORE_DOWN)) !=
	    (RL_AGENT_LEND | RL_AGENT_SYNC))
		return rl_slot_take(t, rule, key, key_len, cost, now_ns, out,
				    hint, 0);
	rc = rl_slot_take(t, rule, key, key_len, cost, now_ns, out, hint,
			  RL_TAKE_LEND);
	if (rc != RL_TAKE_ASK)
		return rc;
	q = post(t, hint, RL_ASK_LEND, rule, cost, &word);
	if (!q)
		goto unlent;
	w = await(q, word, deadline_ns);
	if (w)
		release(q, w);
	if (!w || st_of(w) == RL_ASK_FAILED)
		goto unlent;
	/* What the lend left (or a sync since) in the key's state. */
	rc = rl_slot_take(t, rule, key, key_len, cost, rl_time_now_ns(), out,
			  hint, 0);
	errno = saved;
	return rc;
unlent:
	/* As without lends: a blind share, or the refusal from a share. */
	rc = rl_slot_take(t, rule, key, key_len, cost, rl_time_now_ns(), out,
			  hint, 0);
	errno = saved;
	return rc ? rc : -EAGAIN;
}

/* ---- the agent's side --------------------------------------------------------- */

uint32_t rl_table_asks_bell(const struct rl_table *t)
{
	return atomic_load_explicit(&t->hdr->asks_bell, memory_order_acquire);
}

void rl_table_asks_wait(struct rl_table *t, uint32_t bell, uint64_t timeout_ns)
{
	int saved = errno;

	futex_wait(&t->hdr->asks_bell, bell, timeout_ns);
	errno = saved;
}

unsigned rl_table_asks_take(struct rl_table *t,
			    int (*fn)(const struct rl_ask_item *it, void *arg),
			    void *arg)
{
	struct rl_ask_item it;
	unsigned n = 0;

	for (uint32_t i = 0; i < RL_ASKS; i++) {
		struct rl_shm_ask *q = &t->asks[i];
		uint32_t w = atomic_load_explicit(&q->word, memory_order_acquire);

		if (st_of(w) != RL_ASK_POSTED ||
		    !cas_word(&q->word, &w, with_state(w, RL_ASK_TAKEN)))
			continue;
		it.id = i;
		it.word = with_state(w, RL_ASK_TAKEN);
		it.kind = q->kind;
		it.rule = q->rule;
		it.index = q->index;
		it.tag = q->tag;
		it.cost = q->cost;
		if (it.index >= t->hdr->capacity ||
		    !rl_slot_meta_read(t, it.index, it.tag, it.key, &it.key_len,
				       &it.truncated)) {
			/* the key left its slot meanwhile: no answer */
			rl_table_ask_fail(t, &it);
			continue;
		}
		it.plan = atomic_load_explicit(&t->slots[it.index].plan,
					       memory_order_relaxed);
		n++;
		if (fn(&it, arg))
			break;
	}
	return n;
}

/* The agent is done with ask `it`, in `st`: its shim is woken, or, if it
 * gave up waiting, the ask is free again. */
static void finish(struct rl_table *t, const struct rl_ask_item *it,
		   uint32_t st)
{
	struct rl_shm_ask *q = &t->asks[it->id % RL_ASKS];
	uint32_t w = atomic_load_explicit(&q->word, memory_order_acquire);

	for (;;) {
		uint32_t now = st_of(w);

		if (!same_use(w, it->word))
			return; /* swept, and maybe in use again: not ours */
		if (now == RL_ASK_ABANDONED) {
			if (cas_word(&q->word, &w, with_state(w, RL_ASK_FREE)))
				return;
		} else if (now == RL_ASK_TAKEN) {
			if (cas_word(&q->word, &w, with_state(w, st)))
				break;
		} else {
			return; /* swept: not ours any more */
		}
	}
	futex_wake(&q->word);
}

void rl_table_ask_answer(struct rl_table *t, const struct rl_ask_item *it,
			 int allowed, uint64_t state)
{
	struct rl_shm_ask *q = &t->asks[it->id % RL_ASKS];

	/* The key's state here is the store's, whether this ask is still
	 * awaited or not: the next request decides from it. */
	if (it->index < t->hdr->capacity)
		slot_cas(&t->slots[it->index], it->tag, slot_set_next, &state);
	if (!same_use(atomic_load_explicit(&q->word, memory_order_acquire),
		      it->word))
		return;
	q->allowed = (uint32_t)(allowed != 0);
	q->state = state;
	finish(t, it, RL_ASK_DONE);
}

/* What a lend puts in a token bucket's state. */
struct lent {
	const struct rl_algo *a;
	uint64_t granted, floor_ns, now_ns;
	uint64_t held_ns;   /* what the state held back beyond the debt */
	uint64_t *held_out; /* what it holds back after the lend */
	unsigned prov;      /* the slot's provisional before it */
};

static int lent_next(uint64_t old, uint64_t *new, const void *arg)
{
	const struct lent *l = arg;
	const struct rl_algo *a = l->a;
	uint64_t now = l->now_ns, give;
	/* A state not in use (new here, or full again long since) holds
	 * nothing of the bucket for this host: only what is lent. */
	int in_use = old && old + RL_GCRA_CATCHUP_NS > now;
	uint64_t base = in_use ? old : now + a->depth_ns;
	uint64_t floor = l->floor_ns;
	/* a state not in use owes nothing: all of it is held */
	uint64_t held = in_use ? l->held_ns : a->depth_ns;

	/* Lent nothing, to a state a sync gave this host (the store's
	 * figure, or a grant out of it): it stands, what it leaves this host
	 * still its own (a lend counts this host's grant as taken, so that
	 * a lend asked just after a sync granted it all lends nothing); it
	 * owes at least what the store says. A stale one is decided from a
	 * share again (decide.c's start_of), not from it. */
	if (!l->granted && old &&
	    (l->prov == 0 || l->prov == RL_PROVISIONAL_HELD)) {
		*new = old > floor ? old : floor;
		*l->held_out = l->held_ns;
		return *new != old;
	}
	if (base <= now)
		return 0; /* full already: nothing more to hold */
	give = l->granted < a->rate.burst ? l->granted : a->rate.burst;
	give *= a->interval_ns;
	*new = base - now > give ? base - give : now;
	/* what is lent comes out of what was held back */
	held = held > base - *new ? held - (base - *new) : 0;
	/* Lent nothing: the key owes at least what the store says. */
	if (!l->granted && *new < floor)
		*new = floor;
	/* and what the state holds beyond that is all it can hold back */
	if (floor < now)
		floor = now;
	*l->held_out = *new <= floor ? 0 : held < *new - floor ? held
							      : *new - floor;
	return *new != old;
}

void rl_table_ask_lent(struct rl_table *t, const struct rl_ask_item *it,
		       uint64_t granted, uint64_t floor_ns, uint64_t now_ns)
{
	struct rl_shm_ask *q = &t->asks[it->id % RL_ASKS];
	const struct rl_rule_cache *rc = rl_table_rule_get(t, it->rule);

	if (rc && it->index < t->hdr->capacity) {
		struct rl_slot *s = &t->slots[it->index];
		const struct rl_algo *a = slot_algo(rc, s);

		uint64_t held = 0, after;

		if (!rl_held_read(t, it->index, it->tag, &held))
			held = 0;
		after = held;
		/* Whether the shim still waits or not: the store lent it
		 * (and counts it this host's). */
		if (a->kind == RL_ALGO_GCRA &&
		    !slot_cas(s, it->tag, lent_next,
			      &(struct lent){ .a = a, .granted = granted,
					      .floor_ns = floor_ns,
					      .now_ns = now_ns,
					      .held_ns = held,
					      .held_out = &after,
					      .prov = atomic_load_explicit(
						      &s->provisional,
						      memory_order_relaxed) })) {
			rl_held_note(t, it->index, it->tag, after);
			if (t->held && granted)
				atomic_fetch_add_explicit(
					&t->held[it->index].lent, granted,
					memory_order_relaxed);
			/* More may be lent while something is; nothing lent
			 * is the store's last word until the next sync. Held
			 * back either way: what this host spent of the key
			 * the store has from the pushes, and of the state
			 * here only what is not held back is a debt to
			 * floor the store's with (the collect's `own`). */
			atomic_store_explicit(&s->provisional,
					      granted ? RL_PROVISIONAL_HELD
						      : RL_PROVISIONAL_DRY,
					      memory_order_relaxed);
		}
	}
	if (!same_use(atomic_load_explicit(&q->word, memory_order_acquire),
		      it->word))
		return;
	q->allowed = (uint32_t)(granted > UINT32_MAX ? UINT32_MAX : granted);
	q->state = 0;
	finish(t, it, RL_ASK_DONE);
}

void rl_table_ask_fail(struct rl_table *t, const struct rl_ask_item *it)
{
	finish(t, it, RL_ASK_FAILED);
}

void rl_table_asks_sweep(struct rl_table *t, uint32_t seen[RL_ASKS])
{
	for (uint32_t i = 0; i < RL_ASKS; i++) {
		struct rl_shm_ask *q = &t->asks[i];
		uint32_t w = atomic_load_explicit(&q->word, memory_order_acquire);

		/* The same word as a sweep period ago, and not free: its
		 * process died mid-way (a live one changes it within its
		 * timeout). */
		if (st_of(w) != RL_ASK_FREE && w == seen[i])
			cas_word(&q->word, &w, with_state(w, RL_ASK_FREE));
		seen[i] = atomic_load_explicit(&q->word, memory_order_relaxed);
	}
}
