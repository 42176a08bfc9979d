/* SPDX-License-Identifier: MIT */
/* algo.c - dispatch over GCRA and the two window counters. */
#include "algo.h"

#include <errno.h>
#include <string.h>

/* rl_algo_intervals()'s reciprocal of the emission interval d (below 2^62):
 * l = ceil(log2 d), m = ceil(2^(63 + l) / d). */
static void reciprocal(struct rl_algo *a)
{
#ifdef __SIZEOF_INT128__
	uint64_t d = a->interval_ns;
	unsigned l = d > 1 ? 64 - (unsigned)__builtin_clzll(d - 1) : 0;
	unsigned __int128 one = 1;

	a->per_interval = (uint64_t)(((one << (63 + l)) + d - 1) / d);
	a->per_shift = l;
#else
	(void)a; /* rl_algo_intervals() divides */
#endif
}

int rl_algo_init(struct rl_algo *a, enum rl_algorithm kind,
		 const struct rl_rate *rate)
{
	uint64_t depth;

	if (!rate || rate->count == 0 || rate->burst == 0 ||
	    rate->period_ns < rate->count)
		return -EINVAL;
	/* The bucket's depth in time must leave room to add `now` to it. */
	if (__builtin_mul_overflow(rl_gcra_interval(rate), (uint64_t)rate->burst,
				   &depth) || depth >= (1ull << 62))
		return -EINVAL;
	switch (kind) {
	case RL_ALGO_GCRA:
		break;
	case RL_ALGO_FIXED_WINDOW:
		if (rate->period_ns < RL_WINDOW_MIN_NS)
			return -EINVAL;
		break;
	case RL_ALGO_SLIDING_WINDOW:
		if (rate->period_ns < RL_WINDOW_MIN_NS ||
		    rate->count > RL_SLIDING_MAX)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if (a) {
		memset(a, 0, sizeof(*a));
		a->kind = kind;
		a->rate = *rate;
		a->interval_ns = rl_gcra_interval(rate);
		a->depth_ns = depth;
		reciprocal(a);
	}
	return 0;
}

void rl_algo_step_window(const struct rl_algo *a, uint64_t *state,
			 uint32_t cost, uint64_t now_ns, struct rl_result *out)
{
	/* Windows count on Unix time (window.c); what they answer are
	 * durations, the same on either clock. */
	if (a->kind == RL_ALGO_FIXED_WINDOW)
		rl_window_fixed_step(state, &a->rate, cost,
				     now_ns + a->unix_off_ns, out);
	else if (a->kind == RL_ALGO_SLIDING_WINDOW)
		rl_window_sliding_step(state, &a->rate, cost,
				       now_ns + a->unix_off_ns, out);
	else
		rl_gcra_decide(state, a->interval_ns, a->depth_ns,
			       a->rate.burst, cost, now_ns, out);
}

/* A window's free-at on Unix time, back on the monotonic clock (0: free). */
static uint64_t mono(const struct rl_algo *a, uint64_t at)
{
	return at ? at - a->unix_off_ns : 0;
}

uint64_t rl_algo_free_at(const struct rl_algo *a, uint64_t state,
			 uint64_t now_ns)
{
	uint64_t now = now_ns + a->unix_off_ns;

	switch (a->kind) {
	case RL_ALGO_FIXED_WINDOW:
		return mono(a, rl_window_fixed_free_at(state, &a->rate, now));
	case RL_ALGO_SLIDING_WINDOW:
		return mono(a, rl_window_sliding_free_at(state, &a->rate, now));
	case RL_ALGO_GCRA:
		break;
	}
	return state; /* the TAT */
}

void rl_algo_refund(const struct rl_algo *a, uint64_t *state, uint32_t cost,
		    uint64_t now_ns)
{
	switch (a->kind) {
	case RL_ALGO_FIXED_WINDOW:
		rl_window_fixed_refund(state, &a->rate, cost,
				       now_ns + a->unix_off_ns);
		return;
	case RL_ALGO_SLIDING_WINDOW:
		rl_window_sliding_refund(state, &a->rate, cost,
					 now_ns + a->unix_off_ns);
		return;
	case RL_ALGO_GCRA:
		break;
	}
	rl_gcra_refund(state, a->interval_ns, cost, now_ns);
}

void rl_algo_refund_until(const struct rl_algo *a, uint64_t *state,
			  uint32_t cost, uint64_t until_ns, uint64_t now_ns)
{
	uint64_t cur, prev, idx, at;

	if (a->kind != RL_ALGO_SLIDING_WINDOW) {
		/* A fixed window's take weighs only in its own window, a
		 * bucket's until it is full: now's state is the one. */
		rl_algo_refund(a, state, cost, now_ns);
		return;
	}
	/* A sliding window's reset is the end of the window after the
	 * take's, the start of the second window after it. */
	idx = rl_window_load(a, *state, now_ns, &cur, &prev);
	at = rl_window_index(a, until_ns) - 2;
	if (at == idx && cur) {
		cur = cur > cost ? cur - cost : 0;
	} else if (at + 1 == idx && prev) {
		prev = prev > cost ? prev - cost : 0;
	} else {
		return; /* nothing of it left */
	}
	*state = rl_window_pack(a, idx, cur, prev);
}
