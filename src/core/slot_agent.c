/* SPDX-License-Identifier: MIT */
/*
 * slot_agent.c - the agent's (rlshimd's) operations on the slots: collecting
 * what each key admitted since the last sync, and raising, charging or
 * re-planning a key's state from what the store says. Each names its slot by
 * index and tag, and changes it only while the slot still holds that tag.
 */
#include "slot.h"

#include "clock.h"

#include <stdlib.h>

/* A key this host holds in debt (a window: with a count in the current
 * window): other hosts may be using it too, so the store's view must reach
 * it even while it is quiet here (the agent pushes such keys in turn, a
 * budget a round: src/agent/repush.c). */
static int owes(struct rl_table *t, const struct rl_slot *s, uint64_t key,
		uint64_t now_ns)
{
	const struct rl_rule_cache *rc = rl_table_rule_get(t, tag_rule(key));
	uint64_t st = atomic_load_explicit(&s->state, memory_order_relaxed);
	const struct rl_algo *a;
	uint64_t cur, prev;

	if (!rc || is_marker(st))
		return 0;
	a = slot_algo(rc, s);
	if (a->kind == RL_ALGO_GCRA)
		return st > now_ns;
	rl_window_load(a, st, now_ns, &cur, &prev);
	return cur != 0;
}

/* The window a window's key is counted in now (0 for a bucket). */
static uint64_t window_of(struct rl_table *t, const struct rl_slot *s,
			  uint64_t key, uint64_t now_ns)
{
	const struct rl_rule_cache *rc = rl_table_rule_get(t, tag_rule(key));
	const struct rl_algo *a = rc ? slot_algo(rc, s) : NULL;

	return a && a->kind != RL_ALGO_GCRA ? rl_window_index(a, now_ns) : 0;
}

int rl_table_track_held(struct rl_table *t)
{
	if (!t->held)
		t->held = calloc(t->hdr->capacity, sizeof(*t->held));
	return t->held ? 0 : -ENOMEM;
}

/* Slot `index` of key `tag` holds `ns` back beyond its debt now. */
void rl_held_note(struct rl_table *t, uint32_t index, uint64_t tag, uint64_t ns)
{
	if (!t->held || index >= t->hdr->capacity)
		return;
	atomic_store_explicit(&t->held[index].tag, 0, memory_order_relaxed);
	atomic_store_explicit(&t->held[index].ns, ns, memory_order_relaxed);
	atomic_store_explicit(&t->held[index].tag, tag, memory_order_release);
}

int rl_held_read(const struct rl_table *t, uint32_t index, uint64_t tag,
		 uint64_t *ns)
{
	if (!t->held || index >= t->hdr->capacity ||
	    atomic_load_explicit(&t->held[index].tag, memory_order_acquire) != tag)
		return 0;
	*ns = atomic_load_explicit(&t->held[index].ns, memory_order_relaxed);
	/* not rewritten meanwhile (rl_held_note clears the tag first) */
	return atomic_load_explicit(&t->held[index].tag, memory_order_acquire) ==
	       tag;
}

int rl_table_sync_collect(struct rl_table *t, uint64_t now_ns,
			  int (*fn)(const struct rl_sync_item *it, void *arg),
			  void *arg)
{
	struct rl_sync_item it;

	for (uint32_t i = 0; i < t->hdr->capacity; i++) {
		struct rl_slot *s = &t->slots[i];
		uint64_t key;
		int r;

		key = atomic_load_explicit(&s->key, memory_order_acquire);
		if (!key)
			continue;
		if (!atomic_load_explicit(&s->sync_admitted,
					  memory_order_relaxed) &&
		    !owes(t, s, key, now_ns))
			continue;
		it.admitted = atomic_exchange_explicit(&s->sync_admitted, 0,
						       memory_order_acq_rel);
		it.denied = (it.admitted & RL_SYNC_DENIED) != 0;
		it.returned = (it.admitted & RL_SYNC_RETURNED) >>
			      RL_SYNC_RETURNED_SHIFT;
		it.admitted &= RL_SYNC_COUNT;
		if (!rl_slot_meta_read(t, i, key, it.key, &it.key_len,
				       &it.truncated))
			continue; /* being re-keyed: its count goes with it */
		it.index = i;
		it.tag = key;
		it.rule = tag_rule(key);
		it.plan = atomic_load_explicit(&s->plan, memory_order_relaxed);
		it.window = window_of(t, s, key, now_ns);
		it.debt_ns = 0;
		if (!it.window && owes(t, s, key, now_ns))
			it.debt_ns = atomic_load_explicit(&s->state,
							  memory_order_relaxed) -
				     now_ns;
		it.provisional = atomic_load_explicit(&s->provisional,
						      memory_order_relaxed) != 0;
		it.held_known = 0;
		it.held_ns = 0;
		if (t->held)
			atomic_store_explicit(&t->held[i].lent, 0,
					      memory_order_relaxed);
		if (it.provisional)
			it.held_known = (uint8_t)rl_held_read(t, i, key,
							      &it.held_ns);
		r = fn(&it, arg);
		if (r)
			return r;
	}
	return 0;
}

int rl_table_fails_collect(struct rl_table *t,
			   int (*fn)(const struct rl_fail_item *it, void *arg),
			   void *arg)
{
	struct rl_fail_item it;

	for (uint32_t i = 0; i < t->hdr->capacity; i++) {
		struct rl_slot *s = &t->slots[i];
		uint64_t key;
		uint8_t truncated;
		int r;

		if (!atomic_load_explicit(&s->sync_fails, memory_order_relaxed))
			continue;
		key = atomic_load_explicit(&s->key, memory_order_acquire);
		it.fails = atomic_exchange_explicit(&s->sync_fails, 0,
						    memory_order_relaxed);
		if (!key || !it.fails ||
		    !rl_slot_meta_read(t, i, key, it.key, &it.key_len,
				       &truncated))
			continue; /* being re-keyed: a count lost, not moved */
		it.index = i;
		it.tag = key;
		it.rule = tag_rule(key);
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

/* The store's figure: at least `want`, never lowered. */
static int raise_next(uint64_t old, uint64_t *new, const void *arg)
{
	*new = *(const uint64_t *)arg;
	return old < *new;
}

/* A window's counts from the store, as a state (window_next). */
struct window_set {
	const struct rl_algo *a;
	uint64_t want;       /* the state */
	int replace;         /* provisional: the store's, lower or not */
	uint64_t now_ns;
};

/* The store's counts; unless they replace a share, each only ever raises
 * the count the state has in the same window. */
static int window_next(uint64_t old, uint64_t *new, const void *arg)
{
	const struct window_set *w = arg;
	uint64_t cur, prev, wcur, wprev;
	uint64_t idx = rl_window_load(w->a, w->want, w->now_ns, &wcur, &wprev);

	*new = w->want;
	if (w->replace ||
	    rl_window_load(w->a, old, w->now_ns, &cur, &prev) != idx)
		return old != *new;
	*new = rl_window_pack(w->a, idx, cur > wcur ? cur : wcur,
			      prev > wprev ? prev : wprev);
	return old != *new;
}

/* A sliding window's previous count, raised to the store's. */
struct window_raise_prev {
	const struct rl_algo *a;
	uint64_t prev;
	uint64_t now_ns;
};

static int prev_next(uint64_t old, uint64_t *new, const void *arg)
{
	const struct window_raise_prev *p = arg;
	uint64_t cur, prev, idx = rl_window_load(p->a, old, p->now_ns, &cur, &prev);

	if (prev >= p->prev)
		return 0;
	*new = rl_window_pack(p->a, idx, cur, p->prev);
	return 1;
}

static int window_prev(struct rl_slot *s, uint64_t tag,
		       const struct rl_algo *a, uint64_t prev, uint64_t now_ns)
{
	if (a->kind != RL_ALGO_SLIDING_WINDOW)
		return 0;
	return slot_cas(s, tag, prev_next,
			&(struct window_raise_prev){ .a = a, .prev = prev,
						     .now_ns = now_ns });
}

/* The key has a count here in the current window. */
static int counted(const struct rl_algo *a, const struct rl_slot *s,
		   uint64_t now_ns)
{
	uint64_t cur, prev;

	rl_window_load(a, atomic_load_explicit(&s->state, memory_order_relaxed),
		       now_ns, &cur, &prev);
	return cur != 0;
}

/* Within the first two rounds of window `idx`: the other hosts may not
 * all have pushed the shares they started it from (a round late, and
 * their rounds drift against this one's). */
static int early(const struct rl_table *t, const struct rl_algo *a,
		 uint64_t idx, uint64_t now_ns)
{
	uint64_t round = (uint64_t)rl_table_agent_interval_ms(t) * RL_NS_PER_MS;
	uint64_t start = idx * a->rate.period_ns - a->unix_off_ns;

	return now_ns < start + 2 * round;
}

/*
 * What this host may take of the `left` requests of a window at its first
 * sync of the key in the window (it started the key from its share,
 * decide.c, or has not used it in this window yet): every other host may
 * have started from a share too and not pushed it yet (their rounds fall
 * anywhere in this one), so their shares are counted as spent until the
 * next round, by which each has pushed its own. Without this, the hosts
 * syncing first in a window each took a share of what the others were
 * still spending (4 hosts at 50/s: 71 a window, not 53).
 */
static uint64_t first_give(struct rl_table *t, const struct rl_algo *a,
			   uint64_t left, uint64_t prev, uint64_t now_ns)
{
	uint32_t hosts = hosts_of(t);
	uint64_t others;

	if (hosts <= 1)
		return left;
	others = (hosts - 1) * host_share(t, rl_window_left(a, 0, prev, now_ns));
	return others >= left ? 0 : host_share(t, left - others);
}

int rl_table_sync_window(struct rl_table *t, uint32_t index, uint64_t tag,
			 uint64_t idx, uint64_t cur, uint64_t prev,
			 uint64_t now_ns)
{
	struct rl_slot *s;
	const struct rl_rule_cache *rc;
	struct window_set w = { .now_ns = now_ns };
	uint64_t here, left, give;
	unsigned prov;
	int err = agent_slot(t, index, tag, &s, &rc);

	if (err)
		return err;
	w.a = slot_algo(rc, s);
	if (w.a->kind == RL_ALGO_GCRA)
		return 0;
	here = rl_window_index(w.a, now_ns);
	if (idx + 1 == here)
		/* The store counted the window that has just ended (collected
		 * before its end): news for the previous window only. Of the
		 * current one it knows nothing, so no share of it is given. */
		return window_prev(s, tag, w.a, cur, now_ns);
	if (idx != here && idx != here + 1)
		return 0; /* another host's clock is far off: nothing to go by */
	/* Admitted here since the collect: not in the store's count yet. */
	{
		int64_t net = rl_sync_net(atomic_load_explicit(
			&s->sync_admitted, memory_order_relaxed));

		cur = net < 0 && (uint64_t)-net > cur ? 0 : cur + (uint64_t)net;
	}
	/* Of the R requests left in the window, the other hosts may spend
	 * theirs before they see this one's: with N hosts alive this host
	 * takes ceil(R / N) until the next round (as held() for a bucket). */
	left = rl_window_left(w.a, cur, prev, now_ns);
	prov = atomic_load_explicit(&s->provisional, memory_order_relaxed);
	give = host_share(t, left);
	if (prov == 1 || !counted(w.a, s, now_ns) || early(t, w.a, idx, now_ns))
		give = first_give(t, w.a, left, prev, now_ns);
	w.want = rl_window_share(w.a, idx, cur, prev, give, hosts_of(t),
				 now_ns);
	w.replace = prov != 0;
	err = slot_cas(s, tag, window_next, &w);
	/* With other hosts alive the state is this host's share, whatever
	 * it holds back now: the next sync replaces it (a share of nothing
	 * left now may be a share of what the previous window's weight frees
	 * later). Only if it is the state now: a higher one, charged for a
	 * store outage say, stays and is only raised. */
	if (!err) {
		int share = hosts_of(t) > 1 &&
			    atomic_load_explicit(&s->state,
						 memory_order_relaxed) == w.want;

		atomic_store_explicit(&s->provisional,
				      share ? RL_PROVISIONAL_HELD : 0,
				      memory_order_relaxed);
	}
	return err;
}

/* rl_table_sync_grant; `answer`: the sync's answer to the collect, which
 * knows nothing of what was lent since (a mirror's state does not count
 * them either: it is no grant of this host's) */
static int sync_grant(struct rl_table *t, uint32_t index, uint64_t tag,
		      uint64_t debt_ns, uint64_t grant, uint64_t now_ns,
		      int answer)
{
	struct rl_slot *s;
	const struct rl_rule_cache *rc;
	const struct rl_algo *a;
	uint64_t want, since, back, lim, left, owed;
	int64_t net;
	uint8_t prov;
	int err = agent_slot(t, index, tag, &s, &rc);

	if (err)
		return err;
	a = slot_algo(rc, s);
	if (a->kind != RL_ALGO_GCRA)
		return 0; /* windows: rl_table_sync_window */
	/* Admitted here since the collect: not in the store's figure yet,
	 * and spent out of what the grant leaves this host. */
	net = rl_sync_net(atomic_load_explicit(&s->sync_admitted,
					       memory_order_relaxed));
	since = net > 0 ? (uint64_t)net : 0;
	back = net < 0 ? (uint64_t)-net : 0; /* given back since */
	want = now_ns + debt_ns + a->interval_ns * since;
	want = want - now_ns > a->interval_ns * back ? want - a->interval_ns * back
						       : now_ns;
	/* lent since the collect (strict.c): the store's answer to it did
	 * not count them, whether the lend came before it there or not */
	if (t->held && answer)
		grant += atomic_load_explicit(&t->held[index].lent,
					      memory_order_relaxed);
	left = grant + back > since ? grant + back - since : 0;
	if (left > a->rate.burst)
		left = a->rate.burst;
	/* the state that leaves this host `left` requests now */
	lim = now_ns + a->depth_ns - left * a->interval_ns;
	/* alone, a host holds nothing back: there is no one to hold it for
	 * (and its own state is the exact figure) */
	prov = lim > want && hosts_of(t) > 1;
	owed = want;
	if (prov)
		want = lim;
	/* A state that holds part of the bucket back is replaced by the
	 * store's, lower or not; otherwise the store's figure only ever
	 * raises it. */
	if (atomic_load_explicit(&s->provisional, memory_order_relaxed))
		err = slot_cas(s, tag, slot_set_next, &want);
	else
		err = slot_cas(s, tag, raise_next, &want);
	if (!err) {
		int held = prov && atomic_load_explicit(&s->state,
							memory_order_relaxed) ==
					   want;

		atomic_store_explicit(&s->provisional,
				      held ? RL_PROVISIONAL_HELD : 0,
				      memory_order_relaxed);
		/* what the state holds beyond the key's debt (none if it
		 * owes nothing: a full bucket), for the collect's `own`
		 * (sync.c) */
		rl_held_note(t, index, tag,
			     !held ? 0 : owed > now_ns ? want - owed
						       : want - now_ns);
	}
	return err;
}

int rl_table_sync_grant(struct rl_table *t, uint32_t index, uint64_t tag,
			uint64_t debt_ns, uint64_t grant, uint64_t now_ns)
{
	return sync_grant(t, index, tag, debt_ns, grant, now_ns, 1);
}

/*
 * What a key owes, `debt_ns` counted at interval `from_ei`, counted at
 * `to` instead: the same requests, fraction included (a request partly
 * repaid is still partly owed), rounded up (never a request forgiven), at
 * most `to`'s whole bucket.
 */
static uint64_t debt_at(uint64_t debt_ns, uint64_t from_ei,
			const struct rl_algo *to)
{
	unsigned __int128 d = (unsigned __int128)debt_ns * to->interval_ns;

	d = (d + from_ei - 1) / from_ei;
	return d < to->depth_ns ? (uint64_t)d : to->depth_ns;
}

/* `extra_ns` more than the key owes now. */
struct charge {
	uint64_t extra_ns;
	uint64_t now_ns;
};

static int charge_next(uint64_t old, uint64_t *new, const void *arg)
{
	const struct charge *c = arg;

	*new = (old > c->now_ns ? old : c->now_ns) + c->extra_ns;
	return 1;
}

/* A window's share of an outage: `n` more requests in the current one. */
struct window_charge {
	const struct rl_algo *a;
	uint64_t n;
	uint64_t now_ns;
};

static int window_charge_next(uint64_t old, uint64_t *new, const void *arg)
{
	const struct window_charge *c = arg;
	uint64_t cur, prev, idx = rl_window_load(c->a, old, c->now_ns, &cur, &prev);

	*new = rl_window_pack(c->a, idx, cur + c->n, prev);
	return *new != old;
}

int rl_table_sync_charge(struct rl_table *t, uint32_t index, uint64_t tag,
			 uint64_t extra_ns, uint64_t now_ns)
{
	struct rl_slot *s;
	const struct rl_rule_cache *rc;
	const struct rl_algo *a;
	int err = agent_slot(t, index, tag, &s, &rc);

	if (err)
		return err;
	a = slot_algo(rc, s);
	if (a->kind != RL_ALGO_GCRA) {
		/* The same in requests, counted in the current window. */
		atomic_store_explicit(&s->provisional, 0, memory_order_relaxed);
		return slot_cas(s, tag, window_charge_next,
				&(struct window_charge){
					.a = a, .n = extra_ns / a->interval_ns,
					.now_ns = now_ns });
	}
	/* Charged for the other hosts, a share is a state of its own now:
	 * the store's figure, when it is back, may only raise it. */
	atomic_store_explicit(&s->provisional, 0, memory_order_relaxed);
	return slot_cas(s, tag, charge_next,
			&(struct charge){ .extra_ns = extra_ns, .now_ns = now_ns });
}

/* The requests a key used under one tariff, used under the next. */
struct replan {
	const struct rl_algo *from, *to;
	uint64_t now_ns;
};

static int plan_next(uint64_t old, uint64_t *new, const void *arg)
{
	const struct replan *p = arg;

	if (old <= p->now_ns)
		return 0; /* a full bucket is full under any tariff */
	*new = p->now_ns + debt_at(old - p->now_ns, p->from->interval_ns, p->to);
	return 1;
}

int rl_table_set_plan(struct rl_table *t, uint32_t index, uint64_t tag,
		      unsigned plan, uint64_t now_ns)
{
	struct rl_slot *s;
	const struct rl_rule_cache *rc;
	const struct rl_algo *from, *to;
	int err = agent_slot(t, index, tag, &s, &rc);

	if (err)
		return err;
	if (plan > rc->nplans)
		return -ESTALE;
	if (atomic_load_explicit(&s->plan, memory_order_relaxed) == plan)
		return 0;
	from = slot_algo(rc, s);
	to = rl_rule_cache_algo(rc, plan);
	atomic_store_explicit(&s->plan, (uint8_t)plan, memory_order_release);
	if (from->kind != RL_ALGO_GCRA)
		return 0; /* window counts are counts under any tariff */
	return slot_cas(s, tag, plan_next,
			&(struct replan){ .from = from, .to = to,
					  .now_ns = now_ns });
}

int rl_table_plan_ahead(struct rl_table *t, unsigned rule, const void *key,
			size_t len, unsigned plan, uint64_t now_ns)
{
	const struct rl_rule_cache *rc = rl_table_rule_get(t, rule);
	struct rl_slot *s;
	struct keyref k;

	if (!rc)
		return -EINVAL;
	if (plan > rc->nplans)
		return -ESTALE;
	rl_slot_key(t, rule, key, len, &k);
	/* A key on the rule's rate needs no slot to say so; a planned one
	 * takes an empty or idle slot, never one a key in use holds: the
	 * store's list of planned keys may be longer than the table. */
	s = rl_slot_find(t, &k, now_ns, plan ? RL_FIND_IDLE : RL_FIND_PEEK);
	if (!s)
		return plan ? -ENOSPC : 0;
	/* A slot just claimed holds a full bucket, which set_plan leaves
	 * full; a key already here carries its use over, as from the sync. */
	return rl_table_set_plan(t, (uint32_t)(s - t->slots), k.tag, plan,
				 now_ns);
}

int rl_table_sync_mirror(struct rl_table *t, unsigned rule, const void *key,
			 size_t len, uint64_t debt_ns, uint64_t ei_ns,
			 uint64_t now_ns)
{
	const struct rl_rule_cache *rc = rl_table_rule_get(t, rule);
	const struct rl_algo *a;
	struct rl_slot *s;
	struct keyref k;

	if (!rc)
		return -EINVAL;
	if (!debt_ns || !ei_ns)
		return 0; /* repaid: a full bucket, which needs no slot */
	rl_slot_key(t, rule, key, len, &k);
	/* Like a planned key: never in the place of a key in use here. */
	s = rl_slot_find(t, &k, now_ns, RL_FIND_IDLE);
	if (!s)
		return -ENOSPC;
	a = slot_algo(rc, s);
	if (a->kind != RL_ALGO_GCRA)
		return 0;
	/* In debt here, the key is synced by this host (each round while in
	 * use, in its turn while quiet; and the pull brings this host's own
	 * keys back too): the mirror is for keys this host has not used, or
	 * has repaid. */
	if (atomic_load_explicit(&s->state, memory_order_relaxed) > now_ns)
		return 0;
	/* Not in use here: the store's state, and no grant yet (the others
	 * hold theirs): this host's own sync of the key, in debt here now,
	 * brings one within a round. */
	atomic_store_explicit(&s->provisional, RL_PROVISIONAL_FRESH,
			      memory_order_relaxed);
	/* What is owed, in requests, at this host's tariff for the key. */
	return sync_grant(t, (uint32_t)(s - t->slots), k.tag,
			  debt_at(debt_ns, ei_ns, a),
			  hosts_of(t) > 1 ? 0 : a->rate.burst, now_ns, 0);
}

void rl_table_rule_forget(struct rl_table *t, unsigned rule)
{
	for (uint32_t i = 0; i < t->hdr->capacity; i++) {
		struct rl_slot *s = &t->slots[i];
		uint64_t key = atomic_load_explicit(&s->key, memory_order_acquire);

		if (!key || tag_rule(key) != rule)
			continue;
		/* a state that is not the store's: gone */
		if (slot_cas(s, key, slot_set_next, &(const uint64_t){ 0 }))
			continue;
		atomic_store_explicit(&s->provisional, 0, memory_order_relaxed);
		atomic_store_explicit(&s->sync_admitted, 0, memory_order_relaxed);
	}
}
