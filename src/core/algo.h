/* SPDX-License-Identifier: MIT */
/*
 * algo.h - one interface over the three algorithms, for the table.
 *
 * Every algorithm keeps a key's whole state in one 64-bit word, so the
 * table can update it with a single compare-and-swap. State 0 is a new key
 * for all of them. A state word never has its top bit set: the table uses
 * such values as markers.
 */
#ifndef RL_ALGO_H
#define RL_ALGO_H

#include <stdint.h>

#include "rlshim.h"

#define RL_STATE_MARK (1ull << 63)

/*
 * An algorithm with its rate, prepared once (the divisions done) so that a
 * decision does as little as it can.
 */
struct rl_algo {
	enum rl_algorithm kind;
	struct rl_rate rate;
	uint64_t interval_ns; /* GCRA: period / count */
	uint64_t depth_ns;    /* GCRA: interval * burst, the bucket in time */
	uint64_t unix_off_ns; /* windows: Unix time - CLOCK_MONOTONIC, fixed
				 per segment (rules.c), so that every host
				 starts a window at the same instant */
	uint64_t per_interval; /* GCRA: n / interval_ns as a multiply and a */
	uint32_t per_shift;    /* shift (rl_algo_intervals) */
};

/*
 * Prepare `a`. 0 if `rate` can be used with `kind`, else -EINVAL: count and
 * burst at least 1, period at least count nanoseconds (an emission interval
 * of at least 1 ns), burst * emission interval below 2^62 ns, window periods
 * of at least a second, sliding-window counts up to RL_SLIDING_MAX.
 */
int rl_algo_init(struct rl_algo *a, enum rl_algorithm kind,
		 const struct rl_rate *rate);

/* rl_algo_step for the windows (algo.c). */
void rl_algo_step_window(const struct rl_algo *a, uint64_t *state,
			 uint32_t cost, uint64_t now_ns, struct rl_result *out);

/*
 * The first instant at which `state` carries no information any more (a
 * request then sees a new key). A slot whose free-at is <= now may be
 * reused; otherwise free-at - now is the key's debt.
 */
uint64_t rl_algo_free_at(const struct rl_algo *a, uint64_t state,
			 uint64_t now_ns);

/* Give back `cost` taken earlier; *state is left alone when nothing of it
 * is left to give back (the window moved on, the debt was repaid). */
void rl_algo_refund(const struct rl_algo *a, uint64_t *state, uint32_t cost,
		    uint64_t now_ns);

/*
 * Give back `cost` taken long before (count_status: when the answer
 * comes) whose take weighs in *state until `until_ns` (its time plus the
 * reset it answered; the caller knows it is not past). A sliding window's
 * take, counted in the window that ends `period` before that, is given
 * back from the previous count once that window is over (from the
 * current one, it would cancel a later request's charge).
 */
void rl_algo_refund_until(const struct rl_algo *a, uint64_t *state,
			  uint32_t cost, uint64_t until_ns, uint64_t now_ns);

/* How late a busy key may be for its turn and still keep its cadence
 * (gcra.c): the limiter's time resolution for catching up. */
#define RL_GCRA_CATCHUP_NS 2000000ull

/* Window periods are whole seconds or more: see window.c's packing. */
#define RL_WINDOW_MIN_NS 1000000000ull

/* The emission interval: the spacing of requests at the steady rate. */
static inline uint64_t rl_gcra_interval(const struct rl_rate *rate)
{
	return rate->period_ns / rate->count;
}

/* The window `now_ns` (CLOCK_MONOTONIC) is in: its index on Unix time,
 * the same on every host (and the one the store keeps its counts under). */
static inline uint64_t rl_window_index(const struct rl_algo *a, uint64_t now_ns)
{
	return (now_ns + a->unix_off_ns) / a->rate.period_ns;
}

/*
 * Windows synced across hosts (decide.c, slot_agent.c). A window state seen
 * as counts: the window it applies to at `now_ns` (returned: now's, or the
 * next when the state was written from a later clock), *cur in it and *prev
 * in the one before (sliding; 0 for fixed).
 */
uint64_t rl_window_load(const struct rl_algo *a, uint64_t state,
			uint64_t now_ns, uint64_t *cur, uint64_t *prev);
/* The state of counts `cur` in window `idx` and `prev` in the one before
 * (counts past what the state holds are held at its maximum). */
uint64_t rl_window_pack(const struct rl_algo *a, uint64_t idx, uint64_t cur,
			uint64_t prev);
/*
 * A state of window `idx` that leaves `give` requests at `now_ns` of what
 * counts `cur` and `prev` leave, for a host that shares the window with
 * `hosts` - 1 others. Sliding, the previous window's weight, which falls
 * as the window goes on and so frees requests, frees only 1/hosts of them
 * here: as `give` is a share of what is left, so is what comes free (else
 * every host took all of it within a round).
 */
uint64_t rl_window_share(const struct rl_algo *a, uint64_t idx, uint64_t cur,
			 uint64_t prev, uint64_t give, uint32_t hosts,
			 uint64_t now_ns);
/* The requests of cost 1 that counts `cur` and `prev` leave at `now_ns`. */
uint64_t rl_window_left(const struct rl_algo *a, uint64_t cur, uint64_t prev,
			uint64_t now_ns);

/* Per-algorithm parts behind the dispatch (gcra.c, window.c). */
void rl_gcra_decide(uint64_t *tat_ns, uint64_t interval_ns, uint64_t depth_ns,
		    uint32_t burst, uint32_t cost, uint64_t now_ns,
		    struct rl_result *out);
void rl_gcra_refund(uint64_t *tat_ns, uint64_t interval_ns, uint32_t cost,
		    uint64_t now_ns);
uint64_t rl_window_fixed_free_at(uint64_t state, const struct rl_rate *rate,
				 uint64_t now_ns);
void rl_window_fixed_refund(uint64_t *state, const struct rl_rate *rate,
			    uint32_t cost, uint64_t now_ns);
uint64_t rl_window_sliding_free_at(uint64_t state, const struct rl_rate *rate,
				   uint64_t now_ns);
void rl_window_sliding_refund(uint64_t *state, const struct rl_rate *rate,
			      uint32_t cost, uint64_t now_ns);

/* ---- the decision, inline: the table makes one per request ------------------ */

/*
 * n / a->interval_ns without a division (a 64-bit divide costs 30 to 90
 * cycles, more than the rest of a decision): Granlund and Montgomery's
 * multiply by the rounded-up reciprocal, exact for every n below 2^63.
 * rl_algo_init() sets it: m = ceil(2^(63 + l) / d) with l = ceil(log2 d),
 * below 2^64, and floor(n / d) = floor(2n * m / 2^(64 + l)). A GCRA's n
 * is at most its depth (below 2^62) plus the catch-up.
 */
static inline uint64_t rl_algo_intervals(const struct rl_algo *a, uint64_t n)
{
#ifdef __SIZEOF_INT128__
	return (uint64_t)(((unsigned __int128)(n << 1) * a->per_interval) >>
			  64) >> a->per_shift;
#else
	return n / a->interval_ns;
#endif
}

static inline uint64_t rl_sat_mul(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t rl_sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* The requests of cost 1 left in `n` ns of bucket, at most `burst`. */
static inline uint32_t rl_gcra_left(const struct rl_algo *a, uint64_t n,
				    uint64_t interval_ns, uint32_t burst)
{
	uint64_t rem = a ? rl_algo_intervals(a, n) : n / interval_ns;

	return rem < burst ? (uint32_t)rem : burst;
}

/*
 * The GCRA decision (gcra.c says what it does and why), for rl_gcra_decide
 * (`a` NULL: dividing by `interval_ns`) and for rl_algo_step (`a` the
 * prepared algorithm: its reciprocal). Inline so that each folds its own.
 */
static inline __attribute__((always_inline)) void
rl_gcra_decide_in(const struct rl_algo *a, uint64_t *tat_ns,
		  uint64_t interval_ns, uint64_t depth_ns, uint32_t burst,
		  uint32_t cost, uint64_t now_ns, struct rl_result *out)
{
	/* The latest TAT at which a request is still allowed now. */
	uint64_t horizon = rl_sat_add(now_ns, depth_ns);
	uint64_t tat = *tat_ns, new_tat, spent;

	/* Later than the catch-up (or new): from now. */
	if (__builtin_expect(now_ns >= RL_GCRA_CATCHUP_NS, 1)
		    ? tat <= now_ns - RL_GCRA_CATCHUP_NS
		    : tat == 0)
		tat = now_ns;
	spent = cost == 1 ? interval_ns : rl_sat_mul(interval_ns, cost);
	new_tat = rl_sat_add(tat, spent);

	out->limit = burst;
	if (new_tat > horizon) {
		/* Denied: nothing is stored. `tat` may exceed the horizon when
		 * another process stored it from a slightly later clock. */
		out->allowed = 0;
		out->remaining = tat < horizon ? rl_gcra_left(a, horizon - tat,
							      interval_ns, burst)
					       : 0;
		out->retry_after_ns = new_tat - horizon;
		out->reset_after_ns = tat > now_ns ? tat - now_ns : 0;
		return;
	}
	out->allowed = 1;
	out->remaining = rl_gcra_left(a, horizon - new_tat, interval_ns, burst);
	out->retry_after_ns = 0;
	out->reset_after_ns = new_tat > now_ns ? new_tat - now_ns : 0;
	if (cost > 0) {
		/* What the client has left after this request, as it would
		 * from a full bucket at the most: a TAT caught up from the
		 * past (tat < now) would say the whole burst is left and
		 * the bucket full at once (1,000,000/s: Remaining equal to
		 * the limit, Reset 0, on every answer after the first). */
		uint32_t left = cost < burst ? burst - cost : 0;

		if (out->remaining > left)
			out->remaining = left;
		if (out->reset_after_ns < spent)
			out->reset_after_ns = spent;
		*tat_ns = new_tat;
	}
}

/* Decide `cost` at `now_ns`; *state changes only if allowed. */
static inline void rl_algo_step(const struct rl_algo *a, uint64_t *state,
				uint32_t cost, uint64_t now_ns,
				struct rl_result *out)
{
	if (__builtin_expect(a->kind == RL_ALGO_GCRA, 1))
		rl_gcra_decide_in(a, state, a->interval_ns, a->depth_ns,
				  a->rate.burst, cost, now_ns, out);
	else
		rl_algo_step_window(a, state, cost, now_ns, out);
}

#endif /* RL_ALGO_H */
