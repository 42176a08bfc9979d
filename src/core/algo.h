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
};

/*
 * Prepare `a`. 0 if `rate` can be used with `kind`, else -EINVAL: count and
 * burst at least 1, period at least count nanoseconds (an emission interval
 * of at least 1 ns), burst * emission interval below 2^62 ns, window periods
 * of at least a second, sliding-window counts up to RL_SLIDING_MAX.
 */
int rl_algo_init(struct rl_algo *a, enum rl_algorithm kind,
		 const struct rl_rate *rate);

/* Decide `cost` at `now_ns`; *state changes only if allowed. */
void rl_algo_step(const struct rl_algo *a, uint64_t *state, uint32_t cost,
		  uint64_t now_ns, struct rl_result *out);

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

#endif /* RL_ALGO_H */
