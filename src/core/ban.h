/* SPDX-License-Identifier: MIT */
/*
 * ban.h - bans in the shared segment: an address or prefix with an expiry
 * (Unix ms, the clock bans are shared in between hosts). The shim checks
 * them at accept, the agent mirrors them to and from the store and into
 * XDP, rlshimctl adds and lifts them. Lock-free like the table: a writer
 * killed half-way leaves a reservation that others reclaim after a second.
 */
#ifndef RL_BAN_H
#define RL_BAN_H

#include <stdint.h>

#include "addr.h"
#include "table.h"

enum rl_ban_origin {
	RL_BAN_LOCAL = 1,  /* this host's maxretry */
	RL_BAN_MANUAL = 2, /* rlshimctl ban */
	RL_BAN_REMOTE = 3, /* another host, through the store */
};

#define RL_BAN_NO_RULE 0xff

/*
 * Ban `c` until `expires_ms`. An existing ban of the same prefix gets the
 * new expiry (a local or manual origin is kept when the store echoes it
 * back). Returns 0, or -ENOSPC when the prefix's probe window is full of
 * live bans.
 */
int rl_ban_add(struct rl_table *t, const struct rl_cidr *c, uint64_t expires_ms,
	       enum rl_ban_origin origin, unsigned rule, uint64_t now_ms);

/*
 * What a rule does to an offender (fail2ban's bantime, bantime.increment
 * and bantime.maxtime): ban for `bantime_ms`; with `increment`, the n-th
 * offence of the same prefix for bantime_ms * 2^(n-1), at most `max_ms`.
 */
struct rl_ban_rule {
	uint64_t bantime_ms;
	uint64_t max_ms;
	int increment;
	unsigned rule;      /* the rule's id, shown by `rlshimctl bans` */
};

/*
 * An offence of `c` (a rule's maxretry reached): ban it as `r` says. A
 * prefix still banned is left as it is. Returns 0 when banned now (the
 * expiry in *expires_ms, the prefix's offences so far in *offences, either
 * may be NULL), 1 if it was banned already, -ENOSPC when the prefix's probe
 * window is full of live bans.
 */
int rl_ban_offence(struct rl_table *t, const struct rl_cidr *c,
		   const struct rl_ban_rule *r, uint64_t now_ms,
		   uint64_t *expires_ms, uint32_t *offences);

/* Lift the ban of exactly `c`. Returns 0, or -ENOENT if there was none. */
int rl_ban_remove(struct rl_table *t, const struct rl_cidr *c);

/* The same, by an operator's hand (rlshimctl unban): remembered, so that
 * the agent lifts it in the store too, wherever it came from, rather than
 * bring it back from there. */
int rl_ban_unban(struct rl_table *t, const struct rl_cidr *c);

/* The expiry (Unix ms) the ban of exactly `c` had when rl_ban_unban()
 * lifted it, if it is lifted (not banned again since); else 0. */
uint64_t rl_ban_lifted(struct rl_table *t, const struct rl_cidr *c);

/*
 * 1 if `a` is inside a live ban (the ban's hit counter is incremented), else
 * 0. With no ban of `a`'s family in the segment, one load and no clock.
 */
int rl_ban_check(struct rl_table *t, const struct rl_addr *a, uint64_t now_ms);

/* As rl_ban_check, returning the expiry (Unix ms) of the live ban that
 * holds `a`, or 0. */
uint64_t rl_ban_lookup(struct rl_table *t, const struct rl_addr *a,
		       uint64_t now_ms);

/* 1 if the segment holds any ban of `family`'s prefix lengths. */
int rl_ban_any(struct rl_table *t, uint8_t family);

struct rl_ban_view {
	struct rl_cidr cidr;
	uint64_t expires_ms;
	uint64_t created_ms;
	uint32_t hits;
	uint32_t offences;
	uint8_t origin;
	uint8_t rule;
};

/* Call `fn` for each live ban; stops when it returns non-zero (returned). */
int rl_ban_foreach(struct rl_table *t, uint64_t now_ms,
		   int (*fn)(const struct rl_ban_view *b, void *arg), void *arg);

#endif /* RL_BAN_H */
