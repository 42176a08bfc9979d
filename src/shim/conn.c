/* SPDX-License-Identifier: MIT */
/*
 * conn.c - the fd table and the pools of connections and hold buffers.
 *
 * The pools are lock-free stacks (Treiber, with a generation count against
 * ABA) over memory that is mapped in chunks and never unmapped: a thread
 * can be anywhere when another forks, and a lock held at fork would stay
 * held forever in the child.
 */
#include "conn.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define CONN_CHUNK (1u << RL_CONN_CHUNK_SHIFT) /* connections per chunk */
#define CONN_CHUNKS RL_CONN_CHUNKS /* up to 1M connections */
#define HOLD_CHUNK 16u          /* hold buffers per chunk (320 KiB) */
#define HOLD_CHUNKS 256u        /* up to 4,096 heads in progress at once */

struct rl_fd *rl_fd_table;
_Atomic unsigned rl_fd_high_;

struct pool {
	_Atomic uint64_t head;      /* (generation << 32) | (index + 1) */
	_Atomic uint32_t nchunks;
	_Atomic uint32_t live;
	uint32_t shift, max_chunks; /* items per chunk: 1 << shift */
	size_t item;                /* bytes per item */
	void *_Atomic *chunks;
};

/* The connections' chunks are in conn.h's view, for the inline lookup. */
void *_Atomic rl_conn_chunks[RL_CONN_CHUNKS];
static void *_Atomic hold_chunks[HOLD_CHUNKS];

static struct pool conns = { .shift = RL_CONN_CHUNK_SHIFT,
			     .max_chunks = CONN_CHUNKS,
			     .item = sizeof(struct rl_conn),
			     .chunks = rl_conn_chunks };
static struct pool holds = { .shift = 4, .max_chunks = HOLD_CHUNKS,
			     .item = sizeof(struct rl_hold),
			     .chunks = hold_chunks };

/* Holds link through their first 4 bytes while free (`len`). */
static uint32_t *link_of(struct pool *p, void *item)
{
	if (p == &conns)
		return &((struct rl_conn *)item)->next_free;
	return &((struct rl_hold *)item)->len;
}

static void *item_at(struct pool *p, uint32_t index)
{
	char *chunk = atomic_load_explicit(&p->chunks[index >> p->shift],
					   memory_order_acquire);

	return chunk + (size_t)(index & ((1u << p->shift) - 1)) * p->item;
}

static void push(struct pool *p, uint32_t index)
{
	uint64_t old = atomic_load_explicit(&p->head, memory_order_relaxed);
	uint64_t new;

	do {
		*link_of(p, item_at(p, index)) = (uint32_t)old;
		new = ((old >> 32) + 1) << 32 | (index + 1);
	} while (!atomic_compare_exchange_weak_explicit(
		&p->head, &old, new, memory_order_release, memory_order_relaxed));
}

/* Map one more chunk and push its items. 0, or -ENOMEM. */
static int grow(struct pool *p)
{
	uint32_t c = atomic_fetch_add(&p->nchunks, 1);
	uint32_t per_chunk = 1u << p->shift;
	size_t bytes = (size_t)per_chunk * p->item;
	void *mem;

	if (c >= p->max_chunks) {
		atomic_fetch_sub(&p->nchunks, 1);
		return -ENOMEM;
	}
	mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		atomic_fetch_sub(&p->nchunks, 1);
		return -ENOMEM;
	}
	atomic_store_explicit(&p->chunks[c], mem, memory_order_release);
	for (uint32_t i = per_chunk; i-- > 0;)
		push(p, c * per_chunk + i);
	return 0;
}

/* An item's index, or UINT32_MAX if the pool cannot grow. */
static uint32_t pop(struct pool *p)
{
	for (;;) {
		uint64_t old = atomic_load_explicit(&p->head, memory_order_acquire);
		uint32_t top = (uint32_t)old, next;

		if (top == 0) {
			if (grow(p))
				return UINT32_MAX;
			continue;
		}
		/* May read a link that changes under us; the generation in
		 * the CAS catches it. The memory is never unmapped. */
		next = *link_of(p, item_at(p, top - 1));
		if (atomic_compare_exchange_weak_explicit(
			    &p->head, &old, ((old >> 32) + 1) << 32 | next,
			    memory_order_acquire, memory_order_relaxed)) {
			atomic_fetch_add(&p->live, 1);
			return top - 1;
		}
	}
}

static void give_back(struct pool *p, uint32_t index)
{
	atomic_fetch_sub(&p->live, 1);
	push(p, index);
}

/* ---- the fd table ---------------------------------------------------------- */

int rl_conn_setup(void)
{
	void *mem;

	if (rl_fd_table)
		return 0;
	mem = mmap(NULL, (size_t)RL_FD_MAX * sizeof(struct rl_fd),
		   PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED)
		return -ENOMEM;
	rl_fd_table = mem;
	return 0;
}

struct rl_conn *rl_conn_new(struct rl_fd *e)
{
	uint32_t i = pop(&conns);
	struct rl_conn *c;

	if (i == UINT32_MAX)
		return NULL;
	c = item_at(&conns, i);
	memset(c, 0, sizeof(*c));
	atomic_store(&c->refs, 1);
	rl_http_init(&c->http);
	e->kind = RL_FD_CONN;
	e->conn = i + 1;
	e->guarded = 1;
	return c;
}

void rl_fd_share(struct rl_fd *to, const struct rl_fd *from)
{
	struct rl_conn *c = rl_conn_of(from);

	*to = *from;
	if (c)
		atomic_fetch_add(&c->refs, 1);
}

int rl_fd_last(const struct rl_fd *e)
{
	struct rl_conn *c = rl_conn_of(e);

	return c && atomic_load(&c->refs) == 1;
}

void rl_fd_forget(struct rl_fd *e)
{
	struct rl_conn *c = rl_conn_of(e);
	uint32_t index = e->conn;

	memset(e, 0, sizeof(*e));
	if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	if (c->hold) {
		c->hold->len = 0;
		rl_conn_unhold(c);
	}
	rl_conn_unahead(c);
	rl_owed_done(c);
	give_back(&conns, index - 1);
}

/* ---- hold buffers ------------------------------------------------------------ */

static uint32_t hold_index(struct rl_hold *h)
{
	for (uint32_t c = 0; c < atomic_load(&holds.nchunks); c++) {
		char *chunk = atomic_load(&hold_chunks[c]);

		if (chunk && (char *)h >= chunk &&
		    (char *)h < chunk + HOLD_CHUNK * sizeof(struct rl_hold))
			return c * HOLD_CHUNK +
			       (uint32_t)(((char *)h - chunk) / sizeof(struct rl_hold));
	}
	return UINT32_MAX;
}

/* A hold buffer into *hp, from the pool, unless it has one; NULL if the
 * pool cannot grow. */
static struct rl_hold *hold_get(struct rl_hold **hp)
{
	uint32_t i;

	if (*hp)
		return *hp;
	i = pop(&holds);
	if (i == UINT32_MAX)
		return NULL;
	*hp = item_at(&holds, i);
	return *hp;
}

struct rl_hold *rl_conn_hold(struct rl_conn *c)
{
	struct rl_hold *h = c->hold;

	if (h)
		return h;
	h = hold_get(&c->hold);
	if (h) {
		h->len = 0;
		h->decided = 0;
		h->unread = 0;
	}
	return h;
}

static void hold_put(struct rl_hold **hp)
{
	uint32_t i = hold_index(*hp);

	*hp = NULL;
	if (i != UINT32_MAX)
		give_back(&holds, i);
}

void rl_conn_unhold(struct rl_conn *c)
{
	if (c->hold && !c->hold->len)
		hold_put(&c->hold);
}

struct rl_hold *rl_conn_ahead(struct rl_conn *c)
{
	return hold_get(&c->ahead);
}

void rl_conn_unahead(struct rl_conn *c)
{
	if (c->ahead)
		hold_put(&c->ahead);
}

struct rl_owed *rl_owed_find(struct rl_conn *c, uint32_t k)
{
	struct rl_owed *o = &c->owed_req[(k - 1) % RL_OWED];

	if (o->req == k)
		return o;
	if (!c->owed_more)
		return NULL;
	o = (struct rl_owed *)(void *)c->owed_more->data + (k - 1) % RL_OWED_MORE;
	return o->req == k ? o : NULL;
}

struct rl_owed *rl_owed_new(struct rl_conn *c, uint32_t k, uint32_t answered)
{
	struct rl_owed *o = &c->owed_req[(k - 1) % RL_OWED];
	int fresh = !c->owed_more;

	if (!o->req || o->req <= answered)
		return o;
	if (!hold_get(&c->owed_more))
		return NULL;
	if (fresh)
		memset(c->owed_more->data, 0,
		       RL_OWED_MORE * sizeof(struct rl_owed));
	o = (struct rl_owed *)(void *)c->owed_more->data + (k - 1) % RL_OWED_MORE;
	return !o->req || o->req <= answered ? o : NULL;
}

void rl_owed_done(struct rl_conn *c)
{
	if (c->owed_more)
		hold_put(&c->owed_more);
}

void rl_conn_stats(struct rl_conn_stats *out)
{
	out->conns_live = atomic_load(&conns.live);
	out->conns_cap = atomic_load(&conns.nchunks) * CONN_CHUNK;
	out->holds_live = atomic_load(&holds.live);
	out->holds_cap = atomic_load(&holds.nchunks) * HOLD_CHUNK;
	out->fds_cap = rl_fd_table ? RL_FD_MAX : 0;
}
