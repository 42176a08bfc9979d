/* SPDX-License-Identifier: MIT */
/*
 * conn.h - what the shim knows about each file descriptor of the host
 * program, and the state of each connection it frames.
 *
 * The fd table is indexed by fd number and mapped lazily (untouched pages
 * cost nothing), so a lookup on the read path is one load. A connection's
 * state lives in a pooled `struct rl_conn` that every fd referring to the
 * socket points at (dup, dup2, fcntl(F_DUPFD) share it; the last close
 * frees it). Held bytes (a request head that is not complete yet) live in a
 * pooled buffer. Pools grow by whole chunks and never shrink; nothing is
 * allocated per request.
 */
#ifndef RL_CONN_H
#define RL_CONN_H

#include <stdatomic.h>
#include <stdint.h>

#include "addr.h"
#include "http.h"
#include "policy.h"
#include "table.h"

enum rl_fd_kind {
	RL_FD_UNKNOWN = 0, /* never seen, or closed since: may be adopted */
	RL_FD_IGNORED = 1, /* not ours: not a TCP socket, not a guarded port */
	RL_FD_LISTEN = 2,  /* a listening socket; `port`, `guarded` cached */
	RL_FD_CONN = 3,    /* a connection we frame: `conn` */
};

struct rl_fd {
	uint8_t kind;
	uint8_t guarded;
	uint16_t port;
	uint32_t conn; /* index + 1 in the connection pool */
};

enum rl_conn_state {
	RL_CONN_HTTP = 0,  /* framing requests */
	RL_CONN_PASS = 1,  /* not HTTP/1.x (TLS, HTTP/2, upgraded): untouched */
	RL_CONN_DENY = 2,  /* a reply is due at the application's next read */
	RL_CONN_DONE = 3,  /* replied and shut down: reads see EOF (once the
			      client has sent its own), writes are
			      swallowed */
};

enum rl_reply_kind {
	RL_REPLY_NONE = 0,
	RL_REPLY_429 = 1,
	RL_REPLY_400 = 2,
	RL_REPLY_H2 = 3, /* HTTP/2 refused: SETTINGS and GOAWAY */
};

/* What answer would hand the connection over to another protocol. */
enum rl_switch { RL_SWITCH_NONE = 0, RL_SWITCH_UPGRADE = 1, RL_SWITCH_CONNECT = 2 };

#define RL_HOLD_SIZE (RL_HEAD_MAX + 4096)
#define RL_OWED 16       /* requests a connection may have unanswered whose
			    answers the shim follows, in the connection;
			    a longer pipeline takes a hold buffer for
			    RL_OWED_MORE more (a HEAD past them all stops
			    the following; another request's answer just
			    goes as written) */
#define RL_FIELDS_MAX 256 /* the rate-limit fields inserted into one head */

/*
 * A request given to the application, for its answer (io_answers.c): whose
 * fields it carries, what count_status gives back, which rules count it in
 * the metrics, and how long the application took.
 */
struct rl_owed {
	uint32_t req;            /* its number on the connection, 0: none */
	int8_t near;             /* headers_on = all: the rule (an index in
				    cfg) whose fields the answer carries, or
				    -1 */
	uint8_t head;            /* HEAD: its answer has no body */
	uint8_t ncharge;
	uint8_t settled;         /* its answer's status is out: counted,
				    given back (its fields may still be
				    owed) */
	uint32_t limit, remaining; /* `near`'s figures when it was decided */
	uint64_t reset_ns;
	uint64_t t_ns;           /* CLOCK_MONOTONIC when its head was decided */
	uint64_t rules;          /* the table ids of the rules that counted it */
	const struct rl_config *cfg; /* that decided it (never freed) */
	struct rl_charge charge[RL_CHARGES_MAX]; /* count_status rules */
};

/* The framing of the application's answers: a function of the bytes it
 * writes (io_answers.c walks a copy to see what a write will do). */
struct rl_ans {
	struct rl_http h;        /* a body's framing */
	uint32_t heads;          /* final answer heads written whole */
	uint32_t answered;       /* final answers written whole */
	uint32_t ahead_len;      /* bytes of a head in pieces, in c->ahead */
	uint8_t final;           /* a final answer is being written */
	uint8_t ins;             /* the head being written had its fields
				    inserted */
	uint8_t broken;          /* answers not framed (any more): the reply
				    to a denial goes at the next read */
};

struct rl_hold {
	uint32_t len;     /* bytes held */
	uint32_t decided; /* of which may be delivered (a prefix) */
	uint32_t unread;  /* of which, at the end, bytes a TLS session gave
			     past a decided head, not framed yet: the
			     application's next read frames them as its own
			     (at most len - decided) */
	/* 8-aligned: a long pipeline's records are kept in it (owed_more) */
	_Alignas(uint64_t) uint8_t data[RL_HOLD_SIZE];
};

struct rl_conn {
	_Atomic uint32_t refs;   /* fds pointing here */
	uint8_t state;           /* enum rl_conn_state */
	uint8_t proxy;           /* a PROXY header is still expected */
	uint8_t upgrade_wait;    /* enum rl_switch: an Upgrade or CONNECT was
				    allowed, the application's answer (101,
				    2xx) decides PASS */
	uint8_t reply;           /* enum rl_reply_kind, while DENY */
	uint16_t port;           /* local port */
	struct rl_peer peer;     /* the client: TCP peer or PROXY source */
	struct rl_http http;
	struct rl_hold *hold;
	uint32_t skip;           /* bytes of a head decided from a peek that
				    are still in the socket: they pass */
	int32_t mask_at;         /* where decide() blanked an h2c offer in
				    its region, or -1 */
	/* The application's answers, framed to know whose they are. */
	struct rl_ans ans;
	uint32_t delivered;      /* requests given to the application */
	uint32_t switch_at;      /* the request (1-based) an answer of 101 or
				    2xx hands over, with upgrade_wait */
	struct rl_owed owed_req[RL_OWED]; /* rl_owed_at() */
	struct rl_hold *owed_more; /* a long pipeline's records past those */
	uint32_t fields_owed;    /* records whose answers carry fields */
	struct rl_hold *ahead;   /* an answer head written in pieces */
	/* Fields inserted into an answer head that have not gone out yet:
	 * they go before the application's next byte. */
	uint16_t pend_len, pend_off;
	char pend[RL_FIELDS_MAX];
	uint8_t deny_wait;       /* DENY: the reply waits until `owed`
				    answers are written */
	uint8_t reply_now;       /* DENY in a body: its request will never
				    be answered, the reply cannot wait for it */
	uint32_t owed;           /* answers the reply to a denial follows */
	uint8_t raw;             /* the held head is not scanned yet: parsed
				    whole once the rest has come */
	uint8_t ended;           /* bytes went to another process in a way
				    the framing cannot follow: reads end */
	uint8_t tls_seen;        /* a TLS record opened the connection */
	uint8_t tls_freed;       /* DONE because its session was freed, not
				    answered: nothing to drain at close */
	uint8_t tls_app_bio;     /* the session reads through a BIO of the
				    application's (apache's), which may hold
				    records the socket no longer has */
	/* The libssl session the application moves this connection's
	 * bytes through (SSL*), or NULL: then its reads and writes on the
	 * socket carry records, and only SSL_read and SSL_write are framed
	 * (io_tls.c). */
	void *ssl;
	/* rl_io_tls_send: of the application's SSL_write of tls_wlen bytes,
	 * the first tls_wdone went (its retry goes on from there). */
	size_t tls_wlen, tls_wdone;
	unsigned fork_seen;      /* rl_io.forks at the last look */
	uint64_t taken;          /* bytes this process took from the socket */
	/* DONE: CLOCK_MONOTONIC until which the connection lingers, its
	 * reads waiting for the client's end (io_deny.c); 0: they see end of
	 * file. */
	uint64_t linger_ns;
	/* the reply due in DENY */
	struct rl_verdict verdict;
	uint8_t reply_http10;
	uint8_t reply_head;
	uint8_t reply_html; /* the denied request prefers text/html */
	const char *reply_why;
	uint32_t next_free;      /* pool free list */
};

#define RL_OWED_MORE ((uint32_t)(RL_HOLD_SIZE / sizeof(struct rl_owed)))

/* The record of request `k` (1-based) of `c`, or NULL: in the connection
 * at (k - 1) % RL_OWED, or, for a long pipeline, in its hold buffer. */
struct rl_owed *rl_owed_find(struct rl_conn *c, uint32_t k);

/* Where the record of request `k`, just delivered, goes: its place in the
 * connection if the request there has been answered, else one in the hold
 * buffer (taken from the pool); NULL if there is none free. `answered` is
 * how many answer heads the application has written. */
struct rl_owed *rl_owed_new(struct rl_conn *c, uint32_t k, uint32_t answered);

/* Give the long pipeline's records back once every answer is out. */
void rl_owed_done(struct rl_conn *c);

/* Reserve the fd table: RL_FD_MAX entries of address space, touched only
 * where fds are used. Returns 0 or -ENOMEM. Idempotent. */
int rl_conn_setup(void);

/* fd numbers never exceed the kernel's nr_open, 1,048,576 by default. */
#define RL_FD_MAX (1u << 20)
#define RL_CONN_CHUNK_SHIFT 8u    /* connections per pool chunk: 256 */
#define RL_CONN_CHUNKS 4096u      /* chunks: up to 1M connections */

/* conn.c's tables, here for the lookups every hook makes inline. */
extern struct rl_fd *rl_fd_table;
extern _Atomic unsigned rl_fd_high_;
extern void *_Atomic rl_conn_chunks[RL_CONN_CHUNKS];

/* The entry of `fd`, or NULL if the table is not set up or fd is out of
 * range (then the fd is simply not tracked). */
static inline struct rl_fd *rl_fd_get(int fd)
{
	unsigned high;

	if (!rl_fd_table || fd < 0 || (unsigned)fd >= RL_FD_MAX)
		return NULL;
	/* Only ever up: two threads raising it race, so CAS. */
	high = atomic_load_explicit(&rl_fd_high_, memory_order_relaxed);
	while ((unsigned)fd > high &&
	       !atomic_compare_exchange_weak_explicit(&rl_fd_high_, &high,
						      (unsigned)fd,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
	return &rl_fd_table[fd];
}

/* The highest fd number ever looked up: a bound for close_range(). */
static inline unsigned rl_fd_high(void)
{
	return atomic_load_explicit(&rl_fd_high_, memory_order_relaxed);
}

/* The entry of `fd` if it may be known (looked up before: at most the
 * highest fd number ever looked up), else NULL: an fd above that is
 * unknown, and looking does not raise the bound. For the hooks that never
 * adopt an fd (writes, close). */
static inline struct rl_fd *rl_fd_peek(int fd)
{
	if (!rl_fd_table || fd < 0 || (unsigned)fd > rl_fd_high())
		return NULL;
	return &rl_fd_table[fd];
}

/* The connection of an entry of kind RL_FD_CONN. */
static inline struct rl_conn *rl_conn_of(const struct rl_fd *e)
{
	uint32_t i;
	char *chunk;

	if (e->kind != RL_FD_CONN || e->conn == 0)
		return NULL;
	i = e->conn - 1;
	chunk = atomic_load_explicit(&rl_conn_chunks[i >> RL_CONN_CHUNK_SHIFT],
				     memory_order_acquire);
	return (struct rl_conn *)(void *)chunk +
	       (i & ((1u << RL_CONN_CHUNK_SHIFT) - 1));
}

/* A new connection (refs = 1) bound to entry `e`; NULL if the pool cannot
 * grow. */
struct rl_conn *rl_conn_new(struct rl_fd *e);

/* Point entry `to` at the connection of `from` (dup). */
void rl_fd_share(struct rl_fd *to, const struct rl_fd *from);

/* Forget entry `e` (close, or dup2 over it): resets it and drops its
 * reference; the last reference frees the connection and its hold
 * buffer. */
void rl_fd_forget(struct rl_fd *e);

/* 1 if `e` holds the only reference to its connection. */
int rl_fd_last(const struct rl_fd *e);

/* The connection's hold buffer, taken from the pool if it has none; NULL
 * if the pool cannot grow. */
struct rl_hold *rl_conn_hold(struct rl_conn *c);

/* Give the hold buffer back once it is empty. */
void rl_conn_unhold(struct rl_conn *c);

/* The buffer of an answer head written in pieces (c->ahead), from the
 * same pool; NULL if it cannot grow. Given back by rl_conn_unahead. */
struct rl_hold *rl_conn_ahead(struct rl_conn *c);
void rl_conn_unahead(struct rl_conn *c);

/* Pool figures, for tests. */
struct rl_conn_stats {
	uint32_t conns_live, conns_cap, holds_live, holds_cap, fds_cap;
};
void rl_conn_stats(struct rl_conn_stats *out);

#endif /* RL_CONN_H */
