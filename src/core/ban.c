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

int rl_ban_add(struct rl_table *t, const struct rl_cidr *c, uint64_t expires_ms,
	       enum rl_ban_origin origin, unsigned rule, uint64_t now_ms)
{
	struct rl_addr a = c->addr;
	uint64_t tag, mask = RL_BANS - 1;
	int free_at = -1;

	rl_addr_mask(&a, c->prefix);
	tag = ban_tag(t, a.family, c->prefix, a.bytes);
	for (int attempt = 0; attempt < 4; attempt++) {
		free_at = -1;
		for (unsigned i = 0; i < PROBE; i++) {
			struct rl_shm_ban *b = &t->bans[(tag + i) & mask];
			uint64_t cur = atomic_load_explicit(&b->tag,
							    memory_order_acquire);
			uint64_t exp;

			if (entry_is(b, tag, a.family, c->prefix, a.bytes, &exp)) {
				/* Renew; the store echoing our own ban back
				 * does not make it someone else's. */
				if (origin != RL_BAN_REMOTE ||
				    b->origin == RL_BAN_REMOTE)
					b->origin = (uint8_t)origin;
				atomic_store_explicit(&b->expires_ms, expires_ms,
						      memory_order_release);
				return 0;
			}
			if (free_at < 0 &&
			    (cur == 0 || reservation_stale(cur, now_ms) ||
			     ((cur & 1) && atomic_load(&b->expires_ms) <= now_ms)))
				free_at = (int)i;
			if (cur == 0)
				break; /* nothing of ours beyond a never-used one */
		}
		if (free_at < 0)
			return -ENOSPC;
		{
			struct rl_shm_ban *b = &t->bans[(tag + (unsigned)free_at) & mask];
			uint64_t cur = atomic_load_explicit(&b->tag,
							    memory_order_acquire);
			uint64_t resv = (now_ms << 1) | 0; /* even: reserved */

			if (resv == 0)
				resv = 2;
			if (!(cur == 0 || reservation_stale(cur, now_ms) ||
			      ((cur & 1) && atomic_load(&b->expires_ms) <= now_ms)) ||
			    !atomic_compare_exchange_strong(&b->tag, &cur, resv))
				continue; /* taken meanwhile: look again */
			b->family = a.family;
			b->prefix = c->prefix;
			b->origin = (uint8_t)origin;
			b->rule = (uint8_t)(rule > RL_BAN_NO_RULE ? RL_BAN_NO_RULE : rule);
			memcpy(b->addr, a.bytes, 16);
			b->created_ms = now_ms;
			b->offences = 0;
			atomic_store_explicit(&b->hits, 0, memory_order_relaxed);
			atomic_store_explicit(&b->expires_ms, expires_ms,
					      memory_order_relaxed);
			lens_mark(t, a.family, c->prefix);
			atomic_store_explicit(&b->tag, tag, memory_order_release);
			return 0;
		}
	}
	return -ENOSPC;
}

int rl_ban_remove(struct rl_table *t, const struct rl_cidr *c)
{
	struct rl_addr a = c->addr;
	uint64_t tag, mask = RL_BANS - 1;
	int found = 0;

	rl_addr_mask(&a, c->prefix);
	tag = ban_tag(t, a.family, c->prefix, a.bytes);
	/* Every copy: two processes adding the same ban at once may both
	 * have taken an entry. */
	for (unsigned i = 0; i < PROBE; i++) {
		struct rl_shm_ban *b = &t->bans[(tag + i) & mask];
		uint64_t exp;

		if (atomic_load_explicit(&b->tag, memory_order_acquire) == 0)
			break;
		if (entry_is(b, tag, a.family, c->prefix, a.bytes, &exp)) {
			found |= exp != 0;
			atomic_store_explicit(&b->expires_ms, 0,
					      memory_order_release);
		}
	}
	return found ? 0 : -ENOENT;
}

int rl_ban_check(struct rl_table *t, const struct rl_addr *a, uint64_t now_ms)
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
				return 1;
			}
		}
	}
	return 0;
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
		v.offences = b->offences;
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
