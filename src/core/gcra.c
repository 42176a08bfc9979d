/* SPDX-License-Identifier: MIT */
/*
 * gcra.c - the Generic Cell Rate Algorithm, as go-redis/redis_rate runs it.
 *
 * A key's state is its theoretical arrival time (TAT): when the bucket would
 * be full again if no more requests came. With emission interval T =
 * period/count and burst B, a request of cost c at time now passes when
 *
 *     base + c*T - B*T <= now,   base = max(TAT, now)
 *
 * and then TAT becomes base + c*T. One refinement keeps the rate exact
 * under load: a TAT less than RL_GCRA_CATCHUP_NS (2 ms) in the past still
 * counts as the base (see rl_gcra_decide). Everything is integer nanoseconds; products
 * saturate instead of wrapping, so an absurd cost is simply denied.
 */
#include "algo.h"

static inline uint64_t sat_mul(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint32_t clamp32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

void rl_gcra_decide(uint64_t *tat_ns, uint64_t interval_ns, uint64_t depth_ns,
		    uint32_t burst, uint32_t cost, uint64_t now_ns,
		    struct rl_result *out)
{
	/* The latest TAT at which a request is still allowed now. */
	uint64_t horizon = sat_add(now_ns, depth_ns);
	uint64_t tat = *tat_ns, new_tat;
	uint32_t rem;

	/*
	 * Where the next emission is counted from: the TAT, or now when the
	 * bucket is full. A request late for its turn by less than
	 * RL_GCRA_CATCHUP_NS keeps the cadence (counts from the TAT): under
	 * load a server reads requests in batches, a little after their
	 * time, and restarting from now at each would lose that lag every
	 * time (with burst 1 at 5000/s, a fifth of the rate). Later than
	 * that, the key starts from now, as an idle (or new) key does. So
	 * over any interval t a key is admitted at most
	 * burst + (t + RL_GCRA_CATCHUP_NS) / interval: the catch-up never
	 * adds a request to a rate of less than 500/s (3/m with burst 3 never
	 * admits 4 within 20 s, however late it comes back).
	 */
	if (tat < now_ns && (tat == 0 || now_ns - tat >= RL_GCRA_CATCHUP_NS))
		tat = now_ns;
	new_tat = sat_add(tat, sat_mul(interval_ns, cost));

	out->limit = burst;
	if (new_tat > horizon) {
		/* Denied: nothing is stored. `tat` may exceed the horizon when
		 * another process stored it from a slightly later clock. */
		out->allowed = 0;
		rem = tat < horizon ? clamp32((horizon - tat) / interval_ns) : 0;
		out->remaining = rem < burst ? rem : burst;
		out->retry_after_ns = new_tat - horizon;
		out->reset_after_ns = tat > now_ns ? tat - now_ns : 0;
		return;
	}
	out->allowed = 1;
	rem = clamp32((horizon - new_tat) / interval_ns);
	out->remaining = rem < burst ? rem : burst;
	out->retry_after_ns = 0;
	out->reset_after_ns = new_tat > now_ns ? new_tat - now_ns : 0;
	if (cost > 0)
		*tat_ns = new_tat;
}

void rl_gcra_step(uint64_t *tat_ns, const struct rl_rate *rate, uint32_t cost,
		  uint64_t now_ns, struct rl_result *out)
{
	uint64_t interval = rl_gcra_interval(rate);

	rl_gcra_decide(tat_ns, interval, sat_mul(interval, rate->burst),
		       rate->burst, cost, now_ns, out);
}

void rl_gcra_refund(uint64_t *tat_ns, uint64_t interval_ns, uint32_t cost,
		    uint64_t now_ns)
{
	uint64_t give = sat_mul(interval_ns, cost);

	if (*tat_ns <= now_ns)
		return; /* already full: nothing is owed back */
	*tat_ns = *tat_ns - now_ns > give ? *tat_ns - give : now_ns;
}
