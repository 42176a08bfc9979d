/* SPDX-License-Identifier: MIT */
/*
 * io_int.h - what the io_*.c files share and nothing else sees: the
 * pieces of the read path, the reply to a denial, the iovec copies.
 * Never installed, never included outside src/shim/io*.c.
 */
#ifndef RL_IO_INT_H
#define RL_IO_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "io.h"
#include "clock.h"
#include "reply.h"

/*
 * The time the heads of the read being framed are decided at: the clock
 * is read once per read call (a pipelined read's heads came together),
 * again after the read waited. rl_io_read() clears it.
 */
extern __thread uint64_t rl_read_now __attribute__((tls_model("initial-exec")));

static inline uint64_t rl_read_clock(void)
{
	if (!rl_read_now)
		rl_read_now = rl_time_now_ns();
	return rl_read_now;
}

/* ---- io.c ---------------------------------------------------------------- */

/* 1 if this process owns the memory the fd table lives in (not a vfork()
 * child on its way to exec). */
int rl_io_owner_here(void);

/* ---- io_iov.c -------------------------------------------------------------- */

/* Copy `len` bytes of the iovecs, from offset `off`, into `dst`. */
void rl_iov_gather(const struct iovec *iov, int cnt, size_t off, void *dst,
		   size_t len);

/* Write `len` bytes into the iovecs from offset `off`. */
void rl_iov_put(const struct iovec *iov, int cnt, size_t off,
		const void *src, size_t len);

size_t rl_iov_total(const struct iovec *iov, int cnt);

/* ---- the transport ---------------------------------------------------------- */

/*
 * What the connection has for the application, without waiting: from the
 * socket (recv with MSG_DONTWAIT, `flags` MSG_PEEK or 0) or, under TLS,
 * from its session. A session says EAGAIN when neither it nor the socket
 * has a byte; with bytes of an incomplete record, a blocking socket waits
 * for the rest of it, as the application's own read would.
 */
ssize_t rl_conn_recv(struct rl_conn *c, int fd, void *buf, size_t len,
		     int flags);

/* The connection's bytes out, as send(fd, MSG_NOSIGNAL | MSG_DONTWAIT)
 * or through its session. */
ssize_t rl_conn_send(struct rl_conn *c, int fd, const void *buf, size_t len);

/* ---- io_deny.c ------------------------------------------------------------- */

/* Deny the request `req` (NULL: no request to describe) of `c` with reply
 * `kind` (enum rl_reply_kind), verdict `v` (NULL: none) and reason `why`:
 * the connection answers at the next read. */
void rl_io_deny(struct rl_conn *c, int kind, const struct rl_verdict *v,
		const struct rl_http_req *req, const char *why);

/* Answer a connection in DENY (the reply, a FIN, the rest of the request
 * dropped): it is DONE, lingering unless the client has already gone
 * (rl_io_ended). errno is kept. */
void rl_io_reply(struct rl_conn *c, int fd);

/*
 * What the application's read `r` of `c`, DONE, says. While the
 * connection lingers (the client has not sent its end since the reply),
 * what came is read and dropped and a nonblocking read says EAGAIN. Then,
 * and at once for a blocking read, end of file (0, errno kept); after a
 * body cut at a bad byte, the client's reset once first (-1, ECONNRESET).
 */
ssize_t rl_io_ended(struct rl_conn *c, const struct rl_read *r);

/* The reply (rl_io_reply) given at the application's read `r`, and what
 * that read says (rl_io_ended). */
ssize_t rl_io_answer(struct rl_conn *c, const struct rl_read *r);

/* Read and drop what the client sent (up to 1 MiB). 0 if it has gone
 * (end of file, or the connection failed), 1 if all it sent is read, 2 if
 * more is there. errno is kept. */
int rl_io_drain(int fd);

/* ---- io_frame.c ------------------------------------------------------------ */

/* Bytes the framer walks: the application's buffers, or the hold buffer. */
struct rl_region {
	const struct iovec *iov;
	int cnt;
	size_t len;    /* valid bytes */
};

struct rl_outcome {
	size_t deliver;  /* a prefix of the region that may go to the app */
	ssize_t partial; /* start of a head still incomplete at the end */
};

/* The bytes that stand for an h2c offer the server is not to see. */
extern const char rl_frame_no_h2c[3];

/*
 * Parse and decide the head at [hs, he) of `rg`. Returns 1 if allowed
 * (an h2c offer blanked where it stands: c->mask_at), else 0 with the
 * connection in DENY.
 */
int rl_frame_decide(struct rl_conn *c, const struct rl_region *rg, size_t hs,
		    size_t he);

/* A head parsed where it stands, in one pass (rl_frame_whole). */
enum rl_whole {
	RL_WHOLE_NOT,   /* not at a request's start: the scanner frames these */
	RL_WHOLE_TAKEN, /* a head, decided (*allowed); *used is past it */
	RL_WHOLE_MORE,  /* valid so far, and the bytes end inside it */
	RL_WHOLE_BAD,   /* already wrong, complete or not (*why) */
};

/* At a request boundary, the head at p[0, len) parsed and decided in one
 * pass if it is whole there. */
enum rl_whole rl_frame_whole(struct rl_conn *c, uint8_t *p, size_t len,
			     size_t *used, int *allowed, const char **why);

/*
 * Frame rg[from, len): the rest of a head decided before (c->skip), then
 * request by request. out->deliver is how much of the region the
 * application may have, out->partial where a head that is not complete
 * yet starts (or -1); c->state is DENY or PASS as decided.
 */
void rl_frame_region(struct rl_conn *c, const struct rl_region *rg,
		     size_t from, struct rl_outcome *out);

/* Bytes past which a head is looked for before it is parsed: a shorter one
 * costs less to parse twice. */
#define RL_WHOLE_LOOK 512

/*
 * rl_frame_region(c, rg, 0, out) for the common read: one short buffer at a
 * request boundary, without the scanner's loop. A head there is parsed
 * where it stands (none is held unparsed: it is too short for that).
 * Inline: it is the read hook's common step.
 */
static inline void rl_frame_read(struct rl_conn *c, const struct rl_region *rg,
				 struct rl_outcome *out)
{
	if (!c->skip && rg->cnt > 0 && rg->len < RL_WHOLE_LOOK &&
	    rg->iov[0].iov_len >= rg->len && c->http.phase == RL_HTTP_IDLE) {
		const char *why = NULL;
		size_t used;
		int ok;

		out->deliver = 0;
		out->partial = -1;
		switch (rl_frame_whole(c, rg->iov[0].iov_base, rg->len, &used,
				       &ok, &why)) {
		case RL_WHOLE_TAKEN:
			/* allowed: the application may have it; else only
			 * what came before it */
			if (!ok)
				return;
			out->deliver = used;
			if (used == rg->len)
				return;
			rl_frame_region(c, rg, used, out);
			return;
		case RL_WHOLE_BAD:
			rl_io_deny(c, RL_REPLY_400, NULL, NULL, why);
			return;
		case RL_WHOLE_MORE:
			/* valid so far, to the end: held unscanned */
			c->raw = 1;
			out->partial = 0;
			return;
		case RL_WHOLE_NOT:
			break; /* the scanner frames it */
		}
	}
	rl_frame_region(c, rg, 0, out);
}

/* ---- io_hold.c ------------------------------------------------------------- */

/* What became of a held head (rl_hold_advance). */
enum rl_held {
	RL_HELD_DECIDED, /* the held head is decided and allowed */
	RL_HELD_DENIED,  /* ... or refused: c->state is DENY */
	RL_HELD_MORE,    /* more of it was taken; still not complete */
	RL_HELD_WAIT,    /* nothing more has come */
	RL_HELD_EOF,     /* the client went away */
	RL_HELD_ERR,     /* errno */
};

/* Copy decided held bytes into the application's buffers at `at` (of
 * `total`). Returns how many. */
size_t rl_hold_give(struct rl_conn *c, const struct rl_read *r, size_t at,
		    size_t total);

/* The application's read of a connection whose hold buffer has only
 * unread bytes (TLS: past a head decided, not framed yet): up to `total`
 * of them into its buffers, as the session's read would have given them.
 * Returns how many. */
ssize_t rl_hold_unread(struct rl_conn *c, const struct rl_read *r,
		       size_t total);

/* A head not complete yet at r's bytes [from, to), before the bytes held
 * unread (TLS): put in front of them, held undecided. */
void rl_hold_before(struct rl_conn *c, const struct rl_read *r, size_t from,
		    size_t to);

/* Look at what came since the head was held, and decide it if it ends
 * there. */
enum rl_held rl_hold_advance(struct rl_conn *c, int fd);

/* A PROXY header is expected: take exactly it, strip it, key the
 * connection by its source. Returns 1 when framing may go on, else 0 with
 * what the read returns in *ret. */
int rl_hold_proxy_read(struct rl_conn *c, struct rl_read *r, ssize_t *ret);

/* ---- io_read.c ------------------------------------------------------------- */

/* 1 if the application's read `r` would not block. */
int rl_read_nonblocking(const struct rl_read *r);

/* Wait for more bytes as a blocking read would (SO_RCVTIMEO honoured).
 * 0 when readable, else -1 with errno (EINTR, EAGAIN). */
int rl_read_wait(int fd);

#endif /* RL_IO_INT_H */
