/* SPDX-License-Identifier: MIT */
/* algo.c - dispatch over GCRA and the two window counters. */
#include "algo.h"

#include <errno.h>

int rl_algo_check(enum rl_algorithm algo, const struct rl_rate *rate)
{
	uint64_t span;

	if (!rate || rate->count == 0 || rate->burst == 0 ||
	    rate->period_ns < rate->count)
		return -EINVAL;
	/* The bucket's depth in time must leave room to add `now` to it. */
	if (__builtin_mul_overflow(rl_gcra_interval(rate), (uint64_t)rate->burst,
				   &span) || span >= (1ull << 62))
		return -EINVAL;
	switch (algo) {
	case RL_ALGO_GCRA:
		return 0;
	case RL_ALGO_FIXED_WINDOW:
		return rate->period_ns >= RL_WINDOW_MIN_NS ? 0 : -EINVAL;
	case RL_ALGO_SLIDING_WINDOW:
		return rate->period_ns >= RL_WINDOW_MIN_NS &&
		       rate->count <= RL_SLIDING_MAX ? 0 : -EINVAL;
	}
	return -EINVAL;
}

void rl_algo_step(enum rl_algorithm algo, uint64_t *state,
		  const struct rl_rate *rate, uint32_t cost, uint64_t now_ns,
		  struct rl_result *out)
{
	switch (algo) {
	case RL_ALGO_FIXED_WINDOW:
		rl_window_fixed_step(state, rate, cost, now_ns, out);
		return;
	case RL_ALGO_SLIDING_WINDOW:
		rl_window_sliding_step(state, rate, cost, now_ns, out);
		return;
	case RL_ALGO_GCRA:
		break;
	}
	rl_gcra_step(state, rate, cost, now_ns, out);
}

uint64_t rl_algo_free_at(enum rl_algorithm algo, uint64_t state,
			 const struct rl_rate *rate, uint64_t now_ns)
{
	switch (algo) {
	case RL_ALGO_FIXED_WINDOW:
		return rl_window_fixed_free_at(state, rate, now_ns);
	case RL_ALGO_SLIDING_WINDOW:
		return rl_window_sliding_free_at(state, rate, now_ns);
	case RL_ALGO_GCRA:
		break;
	}
	return state; /* the TAT */
}

void rl_algo_refund(enum rl_algorithm algo, uint64_t *state,
		    const struct rl_rate *rate, uint32_t cost, uint64_t now_ns)
{
	switch (algo) {
	case RL_ALGO_FIXED_WINDOW:
		rl_window_fixed_refund(state, rate, cost, now_ns);
		return;
	case RL_ALGO_SLIDING_WINDOW:
		rl_window_sliding_refund(state, rate, cost, now_ns);
		return;
	case RL_ALGO_GCRA:
		break;
	}
	rl_gcra_refund(state, rate, cost, now_ns);
}
