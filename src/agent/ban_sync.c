/* SPDX-License-Identifier: MIT */
/*
 * ban_sync.c - bans between the segment and the store, both ways, each round.
 *
 * The store keeps a sorted set <prefix>bans (member: the address or CIDR
 * as text, score: its expiry in Unix ms) and announces changes on the
 * channel <prefix>bans; anybody may ZADD + PUBLISH there. Each round the
 * agent reads the live part of the set and reconciles it with the live bans
 * of its segment, remembering what it pushed itself:
 *
 *   ours (local or manual) and not in the store  push it (ZADD, PUBLISH)
 *   ours, pushed, gone from the store            the store restarted or was
 *                                                flushed: push it again;
 *                                                else, gone a round later
 *                                                still, somebody lifted it
 *                                                everywhere: lift it here
 *   ours, lifted here, still in the store        lift it there (ZREM)
 *   remote, lifted here by hand, still there     lift it there (ZREM)
 *   in the store, not here                       ban it here (remote)
 *   remote here, gone from the store             lift it here
 *   expiries that differ                         the side that changed wins
 */
#include "agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ban.h"
#include "log.h"
#include "clock.h"

#define MAP_CAP 32768u /* twice RL_BANS: a low load */

/* A map from prefix to expiry, open addressing with tombstones. */
struct map_entry {
	uint8_t used;    /* 0 free, 1 used, 2 deleted */
	uint8_t origin;
	uint8_t gone;    /* pushed: gone from the store at the last round */
	struct rl_cidr cidr;
	uint64_t exp;
};

struct map {
	uint32_t n;
	uint8_t dirty;   /* written since cleared: clearing costs a memset */
	struct map_entry e[MAP_CAP];
};

struct bans_state {
	struct map pushed;  /* what this agent put in the store */
	struct map remote;  /* the store's live set, this round */
	struct map local;   /* the segment's live bans, this round */
	int fetched;        /* remote read with the round's sync already */
};

static uint32_t cidr_hash(const struct rl_cidr *c)
{
	uint32_t h = 2166136261u;
	const uint8_t *p = (const uint8_t *)&c->addr;

	for (size_t i = 0; i < sizeof(c->addr); i++)
		h = (h ^ p[i]) * 16777619u;
	return (h ^ c->prefix) * 16777619u;
}

static int cidr_eq(const struct rl_cidr *a, const struct rl_cidr *b)
{
	return a->prefix == b->prefix && rl_addr_equal(&a->addr, &b->addr);
}

static struct map_entry *map_find(struct map *m, const struct rl_cidr *c)
{
	for (uint32_t i = 0, h = cidr_hash(c); i < MAP_CAP; i++) {
		struct map_entry *e = &m->e[(h + i) & (MAP_CAP - 1)];

		if (e->used == 0)
			return NULL;
		if (e->used == 1 && cidr_eq(&e->cidr, c))
			return e;
	}
	return NULL;
}

static struct map_entry *map_put(struct map *m, const struct rl_cidr *c,
				 uint64_t exp, uint8_t origin)
{
	struct map_entry *e = map_find(m, c);

	if (!e) {
		if (m->n >= MAP_CAP / 2)
			return NULL;
		for (uint32_t i = 0, h = cidr_hash(c); i < MAP_CAP; i++) {
			e = &m->e[(h + i) & (MAP_CAP - 1)];
			if (e->used != 1)
				break;
		}
		e->used = 1;
		e->cidr = *c;
		m->n++;
		m->dirty = 1;
	}
	e->exp = exp;
	e->origin = origin;
	e->gone = 0;
	return e;
}

static void map_del(struct map *m, struct map_entry *e)
{
	e->used = 2;
	m->n--;
}

static void map_clear(struct map *m)
{
	if (m->dirty)
		memset(m, 0, sizeof(*m));
}

int rl_agent_bans_init(struct rl_agent *a)
{
	a->bans = calloc(1, sizeof(struct bans_state));
	return a->bans ? 0 : -ENOMEM;
}

void rl_agent_bans_free(struct rl_agent *a)
{
	free(a->bans);
	a->bans = NULL;
}

/* ---- the store's side ------------------------------------------------------------- */

/* The store's live set (ZRANGEBYSCORE ... WITHSCORES) into st->remote;
 * 0, or -EIO if the reply is not one. */
static int remote_read(struct bans_state *st, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements % 2)
		return -EIO;
	for (size_t k = 0; k + 1 < r->elements; k += 2) {
		redisReply *m = r->element[k], *s = r->element[k + 1];
		struct rl_cidr c;

		if (m->type != REDIS_REPLY_STRING || s->type != REDIS_REPLY_STRING ||
		    rl_cidr_parse(m->str, m->len, &c))
			continue; /* not an address: somebody else's */
		map_put(&st->remote, &c, strtoull(s->str, NULL, 10), RL_BAN_REMOTE);
	}
	return 0;
}

struct fetch {
	struct bans_state *st;
	int ok;
};

static int on_fetch(redisReply *r, unsigned i, void *arg)
{
	struct fetch *f = arg;

	if (i == 0)
		return 0; /* the ZREMRANGEBYSCORE of expired members */
	f->ok = !remote_read(f->st, r);
	return 0;
}

/* Queue the drop of the expired bans (if `prune`) and the read of the
 * live ones. */
static void queue_fetch(struct rl_agent *a, struct bans_state *st,
			uint64_t now_ms, int prune)
{
	char key[160], now[32], now1[32];
	const char *zr[4] = { "ZREMRANGEBYSCORE", key, "-inf", now };
	const char *zq[5] = { "ZRANGEBYSCORE", key, now1, "+inf", "WITHSCORES" };
	size_t l1[4], l2[5];

	snprintf(key, sizeof(key), "%sbans", a->cfg->redis_prefix);
	snprintf(now, sizeof(now), "%llu", (unsigned long long)now_ms);
	snprintf(now1, sizeof(now1), "(%llu", (unsigned long long)now_ms);
	for (int i = 0; i < 4; i++)
		l1[i] = strlen(zr[i]);
	for (int i = 0; i < 5; i++)
		l2[i] = strlen(zq[i]);
	map_clear(&st->remote);
	if (prune)
		rl_store_queue(a->store, 4, zr, l1);
	rl_store_queue(a->store, 5, zq, l2);
}

static int fetch_remote(struct rl_agent *a, struct bans_state *st,
			uint64_t now_ms, uint64_t now_ns)
{
	struct fetch f = { st, 0 };

	queue_fetch(a, st, now_ms, 1);
	if (rl_store_flush(a->store, on_fetch, &f, now_ns) || !f.ok)
		return -EIO;
	return 0;
}

/* The round's sync (sync.c) reads the set on its own pipeline, a round
 * trip fewer, and drops the expired members only every few rounds (the
 * read skips them anyway): the commands queued here, whose replies (the
 * last one's) go to rl_agent_bans_fetched. */
unsigned rl_agent_bans_queue(struct rl_agent *a, int prune)
{
	struct bans_state *st = a->bans;

	if (!st)
		return 0;
	st->fetched = 0;
	queue_fetch(a, st, rl_time_wall_ms(), prune);
	return prune ? 2 : 1;
}

void rl_agent_bans_fetched(struct rl_agent *a, const redisReply *r)
{
	struct bans_state *st = a->bans;

	if (st)
		st->fetched = !remote_read(st, r);
}

/* Queue ZADD/ZREM and the announcement of one change. */
static void announce(struct rl_agent *a, const struct rl_cidr *c, uint64_t exp,
		     int add)
{
	char key[160], text[RL_CIDR_STRLEN], score[32], msg[96];
	const char *argv[4];
	size_t lens[4];

	snprintf(key, sizeof(key), "%sbans", a->cfg->redis_prefix);
	rl_cidr_format(c, text, sizeof(text));
	if (add) {
		snprintf(score, sizeof(score), "%llu", (unsigned long long)exp);
		argv[0] = "ZADD";
		argv[1] = key;
		argv[2] = score;
		argv[3] = text;
		snprintf(msg, sizeof(msg), "ban %s %s", text, score);
	} else {
		argv[0] = "ZREM";
		argv[1] = key;
		argv[2] = text;
		snprintf(msg, sizeof(msg), "unban %s", text);
	}
	for (int i = 0; i < (add ? 4 : 3); i++)
		lens[i] = strlen(argv[i]);
	rl_store_queue(a->store, add ? 4 : 3, argv, lens);
	argv[0] = "PUBLISH";
	argv[1] = key; /* the channel is named as the set */
	argv[2] = msg;
	for (int i = 0; i < 3; i++)
		lens[i] = strlen(argv[i]);
	rl_store_queue(a->store, 3, argv, lens);
}

static int ignore_reply(redisReply *r, unsigned i, void *arg)
{
	(void)r;
	(void)i;
	(void)arg;
	return 0;
}

/* ---- the segment's side ----------------------------------------------------------- */

static int gather_local(const struct rl_ban_view *v, void *arg)
{
	struct bans_state *st = arg;

	map_put(&st->local, &v->cidr, v->expires_ms, v->origin);
	return 0;
}

void rl_agent_bans_sync(struct rl_agent *a, uint64_t now_ns)
{
	struct bans_state *st = a->bans;
	uint64_t now_ms = rl_time_wall_ms();
	unsigned changes = 0;

	if (!st)
		return;
	if (!st->fetched && fetch_remote(a, st, now_ms, now_ns))
		return;
	st->fetched = 0;
	map_clear(&st->local);
	rl_ban_foreach(a->table, now_ms, gather_local, st);

	for (uint32_t i = 0; st->local.n && i < MAP_CAP; i++) {
		struct map_entry *l = &st->local.e[i], *r, *p;

		if (l->used != 1)
			continue;
		r = map_find(&st->remote, &l->cidr);
		p = map_find(&st->pushed, &l->cidr);
		if (l->origin == RL_BAN_REMOTE) {
			if (!r)
				rl_ban_remove(a->table, &l->cidr); /* lifted */
			else if (r->exp != l->exp)
				rl_ban_add(a->table, &l->cidr, r->exp,
					   RL_BAN_REMOTE, RL_BAN_NO_RULE, now_ms);
			continue;
		}
		/* ours */
		if (r && r->exp == l->exp) {
			map_put(&st->pushed, &l->cidr, l->exp, l->origin);
		} else if (!r && p && p->exp == l->exp) {
			if (a->restarted) {
				announce(a, &l->cidr, l->exp, 1);
				p->gone = 0;
				changes++;
			} else if (!p->gone) {
				/* a round more: a store flushed after this
				 * round read its epoch is seen at the next */
				p->gone = 1;
			} else {
				/* lifted everywhere by somebody */
				rl_ban_remove(a->table, &l->cidr);
				map_del(&st->pushed, p);
			}
		} else if (r && p && p->exp == l->exp) {
			/* the store changed it since we pushed: follow */
			rl_ban_add(a->table, &l->cidr, r->exp, l->origin,
				   RL_BAN_NO_RULE, now_ms);
			map_put(&st->pushed, &l->cidr, r->exp, l->origin);
		} else {
			/* new here, or changed here: tell everybody */
			announce(a, &l->cidr, l->exp, 1);
			map_put(&st->pushed, &l->cidr, l->exp, l->origin);
			changes++;
		}
	}
	for (uint32_t i = 0; st->remote.n && i < MAP_CAP; i++) {
		struct map_entry *r = &st->remote.e[i], *p;

		if (r->used != 1 || map_find(&st->local, &r->cidr))
			continue;
		p = map_find(&st->pushed, &r->cidr);
		if (p && p->exp == r->exp) {
			/* we pushed it and lifted it since: lift it there */
			announce(a, &r->cidr, 0, 0);
			map_del(&st->pushed, p);
			changes++;
		} else if (rl_ban_lifted(a->table, &r->cidr) == r->exp) {
			/* somebody else's, lifted here by hand (rlshimctl
			 * unban): lifted everywhere, not brought back */
			announce(a, &r->cidr, 0, 0);
			changes++;
		} else {
			rl_ban_add(a->table, &r->cidr, r->exp, RL_BAN_REMOTE,
				   RL_BAN_NO_RULE, now_ms);
			rl_agent_fails_banned(a, &r->cidr, now_ns);
		}
	}
	/* forget what is gone from both sides */
	for (uint32_t i = 0; st->pushed.n && i < MAP_CAP; i++) {
		struct map_entry *p = &st->pushed.e[i];

		if (p->used == 1 && !map_find(&st->local, &p->cidr) &&
		    !map_find(&st->remote, &p->cidr))
			map_del(&st->pushed, p);
	}
	if (changes)
		rl_store_flush(a->store, ignore_reply, NULL, now_ns);
}
