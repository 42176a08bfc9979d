/* SPDX-License-Identifier: MIT */
/*
 * ban.c - the ban table: open addressing over RL_BANS entries, keyed by the
 * hash of (family, prefix length, masked address).
 *
 * An entry's `tag` is 0 (never used), its identity (odd), or a reservation
 * (even: the time it was taken, in ms, shifted left once) while a writer
 * fills the fields. Entries are never emptied again, only reused once
 * expired, so a lookup stops at the first never-used entry. A reader trusts
 * the fields it read only if the tag is its identity before and after.
 */
#include "ban.h"

#include <errno.h>
#include <string.h>

#include "hash.h"
#include "shm.h"

#define PROBE 128               /* entries a prefix may land in */
#define RESERVE_TIMEOUT_MS 1000 /* a writer that died while filling */

static uint64_t ban_tag(const struct rl_table *t, uint8_t family,
			uint8_t prefix, const uint8_t addr[16])
{
	uint8_t id[18];

	id[0] = family;
	id[1] = prefix;
	memcpy(id + 2, addr, 16);
	return rl_hash_sip13(t->seed, id, sizeof(id)) | 1;
}

static int family_index(uint8_t family)
{
	return family == RL_AF_INET6;
}

static void lens_mark(struct rl_table *t, uint8_t family, uint8_t prefix)
{
	atomic_fetch_or_explicit(&t->hdr->ban_lens[family_index(family)][prefix / 64],
				 1ull << (prefix % 64), memory_order_release);
}

int rl_ban_any(struct rl_table *t, uint8_t family)
{
	const _Atomic uint64_t *l = t->hdr->ban_lens[family_index(family)];

	return (atomic_load_explicit(&l[0], memory_order_acquire) |
		atomic_load_explicit(&l[1], memory_order_acquire) |
		atomic_load_explicit(&l[2], memory_order_acquire)) != 0;
}

/* 1 if entry `b` is `tag` for (family, prefix, addr), read consistently. */
static int entry_is(const struct rl_shm_ban *b, uint64_t tag, uint8_t family,
		    uint8_t prefix, const uint8_t addr[16], uint64_t *expires)
{
	int same;

	if (atomic_load_explicit(&b->tag, memory_order_acquire) != tag)
		return 0;
	same = b->family == family && b->prefix == prefix &&
	       memcmp(b->addr, addr, 16) == 0;
	*expires = atomic_load_explicit(&b->expires_ms, memory_order_acquire);
	atomic_thread_fence(memory_order_acquire);
	return same && atomic_load_explicit(&b->tag, memory_order_relaxed) == tag;
}

static int reservation_stale(uint64_t tag, uint64_t now_ms)
{
	uint64_t at = tag >> 1;

	return !(tag & 1) && tag != 0 && now_ms > at + RESERVE_TIMEOUT_MS;
}

/* What to write into a prefix's entry. */
struct ban_put {
	const struct rl_ban_rule *offence; /* an offence under this rule, or */
	uint64_t expires_ms;               /* a ban until this */
	enum rl_ban_origin origin;
	unsigned rule;
};

/* The length of the n-th (n >= 1) offence's ban. */
static uint64_t offence_ms(const struct rl_ban_rule *r, uint32_t n)
{
	uint64_t d = r->bantime_ms;

	if (!r->increment)
		return d;
	for (uint32_t i = 1; i < n && d < r->max_ms; i++)
		d = d > UINT64_MAX / 2 ? UINT64_MAX : d * 2;
	return d < r->max_ms ? d : r->max_ms;
}

/* The bans changed: connections re-check their clients, the agent
 * re-mirrors the table into XDP. */
static void gen_bump(struct rl_table *t)
{
	atomic_fetch_add_explicit(&t->hdr->ban_gen, 1, memory_order_release);
}

/*
 * Renew entry `b`, which holds the prefix and expires at `exp`. Returns 0
 * (banned now), 1 (an offence of a prefix still banned: left alone) or -1
 * (the expiry changed under us: look again).
 */
static int ban_renew(struct rl_table *t, struct rl_shm_ban *b, uint64_t exp,
		     const struct ban_put *rq, uint64_t now_ms,
		     uint64_t *expires_ms, uint32_t *offences)
{
	uint64_t until = rq->expires_ms;
	uint32_t n = 0;

	if (rq->offence) {
		if (exp > now_ms) {
			if (expires_ms)
				*expires_ms = exp;
			return 1;
		}
		n = atomic_load_explicit(&b->offences, memory_order_relaxed) + 1;
		until = now_ms + offence_ms(rq->offence, n);
	}
	if (!atomic_compare_exchange_strong(&b->expires_ms, &exp, until))
		return -1;
	if (rq->offence) {
		atomic_store_explicit(&b->offences, n, memory_order_relaxed);
		b->rule = (uint8_t)rq->rule;
	}
	/* The store echoing our own ban back does not make it someone
	 * else's. */
	if (rq->origin != RL_BAN_REMOTE || b->origin == RL_BAN_REMOTE)
		b->origin = (uint8_t)rq->origin;
	if (until != exp && (until > now_ms || exp > now_ms))
		gen_bump(t);
	if (expires_ms)
		*expires_ms = until;
	if (offences)
		*offences = n;
	return 0;
}

static int entry_free(const struct rl_shm_ban *b, uint64_t cur, uint64_t now_ms)
{
	return cur == 0 || reservation_stale(cur, now_ms) ||
	       ((cur & 1) && atomic_load(&b->expires_ms) <= now_ms);
}

/*
 * Ban prefix `c` as `rq` says: renew its entry if it has one (live or
 * not: an expired entry still knows its offences), else take a free one.
 */
static int ban_put(struct rl_table *t, const struct rl_cidr *c,
		   const struct ban_put *rq, uint64_t now_ms,
		   uint64_t *expires_ms, uint32_t *offences)
{
	struct rl_addr a = c->addr;
	uint64_t tag, mask = RL_BANS - 1;

	rl_addr_mask(&a, c->prefix);
	tag = ban_tag(t, a.family, c->prefix, a.bytes);
	for (int attempt = 0; attempt < 8; attempt++) {
		struct rl_shm_ban *b;
		int free_at = -1, raced = 0;
		uint64_t cur, resv, until;

		for (unsigned i = 0; i < PROBE; i++) {
			uint64_t exp;
			int r;

			b = &t->bans[(tag + i) & mask];
			cur = atomic_load_explicit(&b->tag, memory_order_acquire);
			if (entry_is(b, tag, a.family, c->prefix, a.bytes, &exp)) {
				r = ban_renew(t, b, exp, rq, now_ms, expires_ms,
					      offences);
				if (r >= 0)
					return r;
				raced = 1;
				break;
			}
			if (free_at < 0 && entry_free(b, cur, now_ms))
				free_at = (int)i;
			if (cur == 0)
				break; /* nothing of ours beyond a never-used one */
		}
		if (raced)
			continue;
		if (free_at < 0)
			return -ENOSPC;
		b = &t->bans[(tag + (unsigned)free_at) & mask];
		cur = atomic_load_explicit(&b->tag, memory_order_acquire);
		resv = (now_ms << 1) | 0; /* even: reserved */
		if (resv == 0)
			resv = 2;
		if (!entry_free(b, cur, now_ms) ||
		    !atomic_compare_exchange_strong(&b->tag, &cur, resv))
			continue; /* taken meanwhile: look again */
		until = rq->offence ? now_ms + offence_ms(rq->offence, 1)
				    : rq->expires_ms;
		b->family = a.family;
		b->prefix = c->prefix;
		b->origin = (uint8_t)rq->origin;
		b->rule = (uint8_t)rq->rule;
		memcpy(b->addr, a.bytes, 16);
		b->created_ms = now_ms;
		atomic_store_explicit(&b->offences, rq->offence ? 1 : 0,
				      memory_order_relaxed);
		atomic_store_explicit(&b->hits, 0, memory_order_relaxed);
		atomic_store_explicit(&b->expires_ms, until, memory_order_relaxed);
		lens_mark(t, a.family, c->prefix);
		atomic_store_explicit(&b->tag, tag, memory_order_release);
		if (until > now_ms)
			gen_bump(t);
		if (expires_ms)
			*expires_ms = until;
		if (offences)
			*offences = rq->offence ? 1 : 0;
		return 0;
	}
	return -ENOSPC;
}

static unsigned rule_byte(unsigned rule)
{
	return rule > RL_BAN_NO_RULE ? RL_BAN_NO_RULE : rule;
}

int rl_ban_add(struct rl_table *t, const struct rl_cidr *c, uint64_t expires_ms,
	       enum rl_ban_origin origin, unsigned rule, uint64_t now_ms)
{
	struct ban_put rq = { NULL, expires_ms, origin, rule_byte(rule) };

	return ban_put(t, c, &rq, now_ms, NULL, NULL);
}

int rl_ban_offence(struct rl_table *t, const struct rl_cidr *c,
		   const struct rl_ban_rule *r, uint64_t now_ms,
		   uint64_t *expires_ms, uint32_t *offences)
{
	struct ban_put rq = { r, 0, RL_BAN_LOCAL, rule_byte(r->rule) };

	return ban_put(t, c, &rq, now_ms, expires_ms, offences);
}

/*
 * The entries that hold exactly `c`, live or lifted (more than one if two
 * processes added it at once), in `out` with their expiries. Returns how
 * many.
 */
static unsigned entries_of(struct rl_table *t, const struct rl_cidr *c,
			   struct rl_shm_ban *out[PROBE], uint64_t exp[PROBE])
{
	struct rl_addr a = c->addr;
	uint64_t tag, mask = RL_BANS - 1;
	unsigned n = 0;

	rl_addr_mask(&a, c->prefix);
	tag = ban_tag(t, a.family, c->prefix, a.bytes);
	for (unsigned i = 0; i < PROBE; i++) {
		struct rl_shm_ban *b = &t->bans[(tag + i) & mask];

		if (atomic_load_explicit(&b->tag, memory_order_acquire) == 0)
			break;
		if (entry_is(b, tag, a.family, c->prefix, a.bytes, &exp[n]))
			out[n++] = b;
	}
	return n;
}

static int lift(struct rl_table *t, const struct rl_cidr *c, int by_hand)
{
	struct rl_shm_ban *b[PROBE];
	uint64_t exp[PROBE];
	unsigned n = entries_of(t, c, b, exp);
	int found = 0;

	for (unsigned i = 0; i < n; i++) {
		if (exp[i]) {
			found = 1;
			atomic_store_explicit(&b[i]->lifted_exp,
					      by_hand ? exp[i] : 0,
					      memory_order_relaxed);
		}
		atomic_store_explicit(&b[i]->expires_ms, 0, memory_order_release);
	}
	if (found)
		gen_bump(t);
	return found ? 0 : -ENOENT;
}

int rl_ban_remove(struct rl_table *t, const struct rl_cidr *c)
{
	return lift(t, c, 0);
}

int rl_ban_unban(struct rl_table *t, const struct rl_cidr *c)
{
	return lift(t, c, 1);
}

uint64_t rl_ban_lifted(struct rl_table *t, const struct rl_cidr *c)
{
	struct rl_shm_ban *b[PROBE];
	uint64_t exp[PROBE];
	unsigned n = entries_of(t, c, b, exp);

	for (unsigned i = 0; i < n; i++)
		if (exp[i] == 0)
			return atomic_load_explicit(&b[i]->lifted_exp,
						    memory_order_relaxed);
	return 0;
}

uint64_t rl_ban_lookup(struct rl_table *t, const struct rl_addr *a,
		       uint64_t now_ms)
{
	const _Atomic uint64_t *lens = t->hdr->ban_lens[family_index(a->family)];
	unsigned bits = rl_addr_bits(a);

	if (!rl_ban_any(t, a->family))
		return 0;
	for (unsigned p = 0; p <= bits; p++) {
		struct rl_addr m = *a;
		uint64_t tag;

		if (!(atomic_load_explicit(&lens[p / 64], memory_order_relaxed) &
		      (1ull << (p % 64))))
			continue;
		rl_addr_mask(&m, p);
		tag = ban_tag(t, m.family, (uint8_t)p, m.bytes);
		for (unsigned i = 0; i < PROBE; i++) {
			struct rl_shm_ban *b = &t->bans[(tag + i) & (RL_BANS - 1)];
			uint64_t exp;

			if (atomic_load_explicit(&b->tag, memory_order_acquire) == 0)
				break;
			if (entry_is(b, tag, m.family, (uint8_t)p, m.bytes, &exp) &&
			    exp > now_ms) {
				atomic_fetch_add_explicit(&b->hits, 1,
							  memory_order_relaxed);
				return exp;
			}
		}
	}
	return 0;
}

int rl_ban_check(struct rl_table *t, const struct rl_addr *a, uint64_t now_ms)
{
	return rl_ban_lookup(t, a, now_ms) != 0;
}

int rl_ban_foreach(struct rl_table *t, uint64_t now_ms,
		   int (*fn)(const struct rl_ban_view *b, void *arg), void *arg)
{
	for (unsigned i = 0; i < RL_BANS; i++) {
		struct rl_shm_ban *b = &t->bans[i];
		uint64_t tag = atomic_load_explicit(&b->tag, memory_order_acquire);
		struct rl_ban_view v;
		int r;

		if (!(tag & 1))
			continue;
		memset(&v, 0, sizeof(v));
		v.cidr.addr.family = b->family;
		memcpy(v.cidr.addr.bytes, b->addr, 16);
		v.cidr.prefix = b->prefix;
		v.created_ms = b->created_ms;
		v.origin = b->origin;
		v.rule = b->rule;
		v.offences = atomic_load_explicit(&b->offences,
						  memory_order_relaxed);
		v.hits = atomic_load_explicit(&b->hits, memory_order_relaxed);
		v.expires_ms = atomic_load_explicit(&b->expires_ms,
						    memory_order_acquire);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&b->tag, memory_order_relaxed) != tag ||
		    v.expires_ms <= now_ms ||
		    (v.cidr.addr.family != RL_AF_INET &&
		     v.cidr.addr.family != RL_AF_INET6))
			continue;
		r = fn(&v, arg);
		if (r)
			return r;
	}
	return 0;
}
