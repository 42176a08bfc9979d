/* SPDX-License-Identifier: MIT */
/*
 * repush.c - which of a round's quiet keys the agent pushes.
 *
 * A round collects every key that admitted, gave back or refused something
 * here since the last one (its counts must reach the store, and a refused
 * key's plan and grant must reach it: always pushed), and every key still
 * in debt here although quiet. A quiet key's push only refreshes it: this
 * host's grant in the store, and the store's debt, which carries what the
 * other hosts did with the key (the pull does not bring that to a key in
 * debt here). Pushing all of them every round made a round's store work
 * grow with the keys in debt, not with those in use: at 1/s a key used
 * once was pushed 20 times, and 10,000 keys in debt made a round outlast
 * `timeout` (docs/BENCHMARKS.md, "A large fleet").
 *
 * So at most `budget` quiet keys a round are pushed, taken in slot order
 * from where the last round's stopped and wrapping: while the quiet keys
 * stay the same, each is refreshed every ceil(quiet / budget) rounds. A
 * key left out loses nothing: it had nothing to push, and its next
 * request, allowed or refused, has it pushed in the round after.
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
