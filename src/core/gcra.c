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

/*
 * The body is algo.h's rl_gcra_decide_in, shared with the table's inline
 * decision. What it does:
 *
 * Where the next emission is counted from: the TAT, or now when the bucket
 * is full. A request late for its turn by less than RL_GCRA_CATCHUP_NS
 * keeps the cadence (counts from the TAT): under load a server reads
 * requests in batches, a little after their time, and restarting from now
 * at each would lose that lag every time (with burst 1 at 5000/s, a fifth
 * of the rate). Later than that, the key starts from now, as an idle (or
 * new) key does. So over any interval t a key is admitted at most
 * burst + (t + RL_GCRA_CATCHUP_NS) / interval: the catch-up never adds a
 * request to a rate of less than 500/s (3/m with burst 3 never admits 4
 * within 20 s, however late it comes back).
 *
 * A request passes when its new TAT is within the horizon (now + depth);
 * denied, nothing is stored (a TAT may exceed the horizon when another
 * process stored it from a slightly later clock).
 */
void rl_gcra_decide(uint64_t *tat_ns, uint64_t interval_ns, uint64_t depth_ns,
		    uint32_t burst, uint32_t cost, uint64_t now_ns,
		    struct rl_result *out)
{
	rl_gcra_decide_in(NULL, tat_ns, interval_ns, depth_ns, burst, cost,
			  now_ns, out);
}

void rl_gcra_step(uint64_t *tat_ns, const struct rl_rate *rate, uint32_t cost,
		  uint64_t now_ns, struct rl_result *out)
{
	uint64_t interval = rl_gcra_interval(rate);

	rl_gcra_decide(tat_ns, interval, rl_sat_mul(interval, rate->burst),
		       rate->burst, cost, now_ns, out);
}

void rl_gcra_refund(uint64_t *tat_ns, uint64_t interval_ns, uint32_t cost,
		    uint64_t now_ns)
{
	uint64_t give = rl_sat_mul(interval_ns, cost);

	if (*tat_ns <= now_ns)
		return; /* already full: nothing is owed back */
	*tat_ns = *tat_ns - now_ns > give ? *tat_ns - give : now_ns;
}
