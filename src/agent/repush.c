/* SPDX-License-Identifier: MIT */
/*
 * repush.c - which of a round's quiet keys the agent pushes.
 *
 * A round collects every key that admitted, gave back or refused something
 * here since the last one, and every key still in debt here. A key that
 * admitted or gave back is always pushed (its counts must reach the
 * store), and so is one refused from a share held back (decide.c's
 * Retry-After says the sync renews it within a round). The others are
 * quiet: a key in debt, unused or refused from the store's whole state,
 * which would refuse it anyway. A quiet key's push only refreshes it: this
 * host's grant in the store, and the store's debt, which carries what the
 * other hosts did with the key (the pull does not bring that to a key in
 * debt here). Pushing all of them every round made a round's store work
 * grow with the keys in debt, not with those in use: at 1/s a key used
 * once was pushed 20 times, and 10,000 keys in debt made a round outlast
 * `timeout` (docs/BENCHMARKS.md, "A large fleet").
 *
 * So at most `budget` quiet keys a round are pushed, taken in slot order
 * from where the last round's stopped and wrapping: while the quiet keys
 * stay the same, each is refreshed every ceil(quiet / budget) rounds. Up
 * to the budget nothing changes. Over it, a key left out has nothing to
 * push; until its turn it misses the others' use of it (a host alone has
 * none: its state is the store's) and its grant's renewal (a grant lapses
 * in the store after three rounds unrenewed, and the others may then take
 * it too). A host may so admit more of a key for a while, never uncounted:
 * every admission reaches the store, the debt is repaid by waiting.
 */
#include "agent.h"

uint32_t rl_agent_repush_budget(uint32_t hosts)
{
	if (hosts < 1)
		hosts = 1;
	return (RL_REPUSH_KEYS + hosts - 1) / hosts;
}

uint32_t rl_agent_repush_pick(struct rl_agent_item *items, uint32_t n,
			      uint32_t budget, uint32_t *from)
{
	uint32_t quiet = 0, start = n, taken = 0, next = *from, cut = 0;

	for (uint32_t i = 0; i < n; i++) {
		items[i].push = !items[i].quiet;
		if (!items[i].quiet)
			continue;
		quiet++;
		if (start == n && items[i].index >= *from)
			start = i;
	}
	if (quiet <= budget) {
		for (uint32_t i = 0; i < n; i++)
			items[i].push = 1;
		return n;
	}
	/* none at or after the cursor: from the first, wrapping */
	if (start == n)
		for (start = 0; !items[start].quiet; start++)
			;
	for (uint32_t k = 0; k < n; k++) {
		struct rl_agent_item *x = &items[(start + k) % n];

		if (!x->quiet)
			continue;
		if (taken < budget) {
			x->push = 1;
			taken++;
		} else if (!cut) {
			next = x->index; /* the next round's first */
			cut = 1;
		}
	}
	*from = next;
	return n - quiet + taken;
}
