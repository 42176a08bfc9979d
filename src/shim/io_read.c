/* SPDX-License-Identifier: MIT */
/*
 * io_read.c - the read path: what the application's read of a framed
 * connection returns.
 *
 * The common path costs no system call of its own: the application's read
 * fills the application's buffer, the framer walks what arrived, and every
 * head is decided before the read returns. What the application gets is a
 * prefix of what was read:
 *
 *   - all of it, when every request in it is allowed;
 *   - the bytes before a denied request, which is then answered at the
 *     application's next read (the answers to the requests before it have
 *     been written by then), or at once when nothing comes before it;
 *   - the bytes before a head that is not complete yet: those are held, and
 *     more is read into the hold buffer until the head can be decided. The
 *     application never sees a head the shim has not counted.
 *
 * Held bytes are only ever an undecided head (or decided bytes that did not
 * fit the application's buffer), so an edge-triggered server never waits
 * for bytes the shim sits on: the client has to send more for the head to
 * complete, and that wakes the server again.
 *
 * A denial after allowed requests in one read (pipelining) shuts the read
 * side of the socket down, so that a server waiting for readiness wakes up,
 * reads again, and gets the 429 and end of file.
 */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "io_int.h"

__thread uint64_t rl_read_now __attribute__((tls_model("initial-exec")));

int rl_read_nonblocking(const struct rl_read *r)
{
	int fl;

	if (r->flags & MSG_DONTWAIT)
		return 1;
	fl = rl_io.sys.getfl(r->fd);
	return fl >= 0 && (fl & O_NONBLOCK);
}

/* Wait for more bytes as a blocking read would: honours SO_RCVTIMEO.
 * Returns 0 when readable, else -1 with errno (EINTR, EAGAIN). */
int rl_read_wait(int fd)
{
	struct timeval tv = { 0, 0 };
	socklen_t tl = sizeof(tv);
	struct pollfd p = { fd, POLLIN, 0 };
	int ms = -1, rc;

	if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl) == 0 &&
	    (tv.tv_sec || tv.tv_usec))
		ms = (int)(tv.tv_sec * 1000 + tv.tv_usec / 1000);
	rc = poll(&p, 1, ms);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		errno = EAGAIN;
		return -1;
	}
	return 0;
}

/*
 * More of the socket into the application's buffers at `at`, without
 * blocking, until a segment is left short (the socket is drained) or all
 * are full. Returns bytes, 0 at end of file, -1 with errno.
 */
static ssize_t recv_at(int fd, const struct iovec *iov, int cnt, size_t at)
{
	size_t got = 0;

	for (int i = 0; i < cnt; i++) {
		size_t n = iov[i].iov_len;
		ssize_t k;

		if (at >= n) {
			at -= n;
			continue;
		}
		k = rl_io.sys.recv(fd, (char *)iov[i].iov_base + at, n - at,
				   MSG_DONTWAIT);
		if (k <= 0)
			return got ? (ssize_t)got : k;
		got += (size_t)k;
		if ((size_t)k < n - at)
			break;
		at = 0;
	}
	return (ssize_t)got;
}

/* The kernel's TCP states (include/net/tcp_states.h) after the peer's
 * FIN has come: TIME_WAIT, CLOSE, CLOSE_WAIT, LAST_ACK, CLOSING. */
static int fin_received(uint8_t state)
{
	return state == 6 || state == 7 || state == 8 || state == 9 || state == 11;
}

/* The kernel's count of bytes received on `fd` (its peer's FIN counted
 * as one), and its state. 0, or -1 if it cannot tell. */
static int received(int fd, uint64_t *bytes, uint8_t *state)
{
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0 ||
	    tl < offsetof(struct tcp_info, tcpi_bytes_received) +
			 sizeof(ti.tcpi_bytes_received))
		return -1;
	*bytes = ti.tcpi_bytes_received;
	*state = ti.tcpi_state;
	return 0;
}

/*
 * This process forked since it last read `c`: did another process read
 * the socket meanwhile (Python's CGI child reads the body from the socket
 * it inherits)? The kernel's count of bytes received, less those still
 * queued, is what all readers took; less what this process took, what the
 * others took. Bytes of the body the framing expects are counted off it,
 * so the requests after it are framed and counted where they are; anything
 * else (a head, a chunked body, held bytes) cannot be followed: returns
 * -1, and the connection ends for the application.
 *
 * The count and the queue come from two calls, and bytes that arrive
 * between them are queued but not counted: what was taken comes out too
 * small, or below zero (busybox's child looking as the rest of a split
 * head came: the connection ended unanswered, and closed on the unread
 * head with an RST). The count is read again after the queue, until it
 * has not moved; if it keeps moving, it cannot tell. Three system calls,
 * once per fork per connection.
 */
static int others_took(struct rl_conn *c, int fd)
{
	uint64_t before, after, gone, others;
	uint8_t state;
	int queued, tries = 4;

	c->fork_seen = rl_io.forks;
	if (received(fd, &before, &state))
		return 0; /* cannot tell: as before */
	do {
		if ((queued = rl_io.sys.inq(fd)) < 0 ||
		    received(fd, &after, &state))
			return 0;
		if (after == before)
			break;
		before = after;
	} while (--tries);
	if (!tries || after < (uint64_t)queued)
		return 0;
	gone = after - (uint64_t)queued;
	/* The peer's FIN is counted as a byte received, and is no byte
	 * anybody reads. */
	if (gone && fin_received(state))
		gone--;
	if (gone <= c->taken)
		return 0;
	others = gone - c->taken;
	c->taken = gone;
	if (c->http.phase == RL_HTTP_BODY && !c->skip && !c->hold &&
	    others <= c->http.remaining) {
		c->http.remaining -= others;
		if (c->http.remaining == 0)
			c->http.phase = c->http.last ? RL_HTTP_DONE : RL_HTTP_IDLE;
		return 0;
	}
	return -1;
}

/*
 * A denial waits for the answers to the requests before it; the
 * application reads meanwhile. Nothing is for it: what the client sends
 * is dropped (a level-triggered server is not woken for it again), a
 * nonblocking read says EAGAIN. A blocking server answers in order, so
 * when it reads, its answers are out: it gets the reply now.
 */
static ssize_t deny_waiting(struct rl_conn *c, struct rl_read *r)
{
	if (!rl_read_nonblocking(r))
		return rl_io_answer(c, r);
	if (rl_io_drain(r->fd) == 0)
		return 0; /* the client went away */
	errno = EAGAIN;
	return -1;
}

/*
 * Fill the application's buffers as its own read would, with the held
 * bytes first: decided held bytes, then what the socket has. A read comes
 * back short only when the socket had no more (its last recv was short or
 * would block), when what follows is the start of a head that waits for
 * the client (taken into the hold buffer: the socket is empty), or before
 * a denial (the read side is shut down, so the server is woken for it).
 * `saved` is the application's errno; `first` > 0 says that rl_io_read()
 * made the first read already (into an empty hold, at filled 0) and
 * framed it as `first_o`: the loop goes on from there.
 */
static __attribute__((noinline)) ssize_t read_framed(struct rl_conn *c,
						     struct rl_read *r,
						     int saved, ssize_t first,
						     const struct rl_outcome *first_o)
{
	size_t total, filled = 0;

	if (first > 0) {
		total = r->iov[0].iov_len;
		goto frame_on;
	}
	if (r->flags & (MSG_PEEK | MSG_TRUNC | MSG_OOB)) {
		/* The application's own peeks pass untouched, except while
		 * an answer is due: nginx peeks to see whether a client went
		 * away, and the shut-down read side would say it did. */
		if (c->state == RL_CONN_DENY) {
			errno = EAGAIN;
			return -1;
		}
		if (c->state == RL_CONN_DONE)
			return rl_io_ended(c, r);
		return r->real(r->ctx);
	}
	/* A socket under TLS carries records: only SSL_read is framed. */
	if (__builtin_expect(c->ssl != r->ssl, 0))
		return r->real(r->ctx);
	switch ((enum rl_conn_state)c->state) {
	case RL_CONN_PASS:
		break;
	case RL_CONN_DENY:
		if (c->deny_wait && !c->ans.broken && c->ans.answered < c->owed)
			return deny_waiting(c, r);
		return rl_io_answer(c, r);
	case RL_CONN_DONE:
		return rl_io_ended(c, r);
	case RL_CONN_HTTP:
		if (__builtin_expect(c->fork_seen != rl_io.forks, 0) &&
		    !c->ssl && others_took(c, r->fd))
			c->ended = 1;
		if (c->ended)
			return 0;
		if (c->proxy) {
			ssize_t ret;

			if (!rl_hold_proxy_read(c, r, &ret))
				return ret;
		}
		break;
	}
	total = rl_iov_total(r->iov, r->iovcnt);
	if (total == 0)
		return r->real(r->ctx);
frame_on:
	for (;;) {
		struct rl_hold *h = c->hold;
		struct rl_region rg;
		struct rl_outcome o;
		size_t space;
		ssize_t n;

		if (first > 0) {
			/* rl_io_read() read and framed these already, at a
			 * request boundary with nothing held: on from there */
			n = first;
			first = 0;
			space = total;
			rg.iov = r->iov;
			rg.cnt = r->iovcnt;
			rg.len = (size_t)n;
			o = *first_o;
			goto framed;
		}
		if (h && h->decided) {
			filled += rl_hold_give(c, r, filled, total);
			if (filled == total)
				break;
			continue;
		}
		if (h && h->len && c->state == RL_CONN_PASS) {
			h->decided = h->len;
			continue;
		}
		if (h && h->len > h->unread) {
			switch (rl_hold_advance(c, r->fd)) {
			case RL_HELD_DECIDED:
			case RL_HELD_MORE:
				continue;
			case RL_HELD_DENIED:
				goto denied;
			case RL_HELD_EOF:
				/* The client stopped sending mid-head: the
				 * application never sees the incomplete
				 * request, the client gets a 400 (it may
				 * still be reading). */
				rl_io_deny(c, RL_REPLY_400, NULL, NULL,
					   "incomplete request head");
				goto denied;
			case RL_HELD_ERR:
				if (filled)
					goto out;
				return -1;
			case RL_HELD_WAIT:
				if (filled)
					goto out;
				if (rl_read_nonblocking(r)) {
					errno = EAGAIN;
					return -1;
				}
				if (rl_read_wait(r->fd))
					return -1;
				rl_read_now = 0; /* it waited */
				continue;
			}
		}
		if (h && h->len == 0)
			rl_conn_unhold(c); /* only used to gather a split head */
		/* Nothing held: the socket. Through TLS, what came is
		 * enough: a look for more could block on a record that has
		 * not come whole. */
		if (filled && c->ssl)
			goto out;
		space = total - filled;
		n = filled ? recv_at(r->fd, r->iov, r->iovcnt, filled)
		    : __builtin_expect(c->hold != NULL, 0)
			    ? rl_hold_unread(c, r, total) /* TLS: held first */
			    : r->real(r->ctx);
		if (n <= 0) {
			if (filled)
				goto out;
			return n;
		}
		c->taken += (uint64_t)n;
		if (c->state == RL_CONN_PASS) {
			filled += (size_t)n;
			goto out;
		}
		rg.iov = r->iov;
		rg.cnt = r->iovcnt;
		rg.len = filled + (size_t)n;
		if (filled)
			rl_frame_region(c, &rg, filled, &o);
		else
			rl_frame_read(c, &rg, &o);
framed:
		if (c->hold && c->hold->len == 0 && o.partial < 0)
			rl_conn_unhold(c);
		if (o.partial >= 0) {
			h = rl_conn_hold(c);
			if (!h) {
				/* Too many heads in progress at once: refuse
				 * this one rather than pass it unframed. */
				rl_io_deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
				o.deliver = (size_t)o.partial;
			} else if (h->len) {
				/* before bytes still unread (TLS) */
				rl_hold_before(c, r, (size_t)o.partial, rg.len);
			} else {
				h->len = (uint32_t)(rg.len - (size_t)o.partial);
				rl_iov_gather(r->iov, r->iovcnt, (size_t)o.partial,
					      h->data, h->len);
				h->decided = 0;
			}
		}
		if (c->state == RL_CONN_DENY) {
			filled = o.deliver;
			goto denied;
		}
		if (c->state == RL_CONN_PASS) {
			filled = rg.len;
			goto out;
		}
		if (o.partial >= 0) {
			/* Decide it now if the rest has come: every byte
			 * before it is the application's already. */
			filled = o.deliver;
			continue;
		}
		if (c->http.phase == RL_HTTP_DONE && o.deliver == filled) {
			/* Past the last request the application answers:
			 * what came is nobody's. Read on as it would. */
			if (filled)
				goto out;
			if (rl_read_nonblocking(r)) {
				if (rl_io_drain(r->fd) == 0) {
					errno = saved;
					return 0;
				}
				errno = EAGAIN;
				return -1;
			}
			continue;
		}
		filled = o.deliver;
		if ((size_t)n < space || filled == total ||
		    c->http.phase == RL_HTTP_DONE)
			break;
	}
out:
	errno = saved;
	return (ssize_t)filled;
denied:
	/* The reply follows the answers to the requests before the denied
	 * one; a request whose body was refused is never answered. The
	 * application's errno is its own again (a look for more that said
	 * EAGAIN may have come before the denial). */
	errno = saved;
	c->owed = c->delivered - (c->reply_now && c->delivered ? 1 : 0);
	if (c->ans.answered >= c->owed && filled == 0)
		return rl_io_answer(c, r);
	if (!c->ans.broken) {
		if (c->ans.answered >= c->owed) {
			/* Those answers are out: the reply goes now, the
			 * application gets what came before the bad byte,
			 * then the end. */
			rl_io_reply(c, r->fd);
			return (ssize_t)filled;
		}
		/* The reply goes once the answers are written (the write
		 * hooks watch). */
		c->deny_wait = 1;
		if (filled)
			goto out;
		return deny_waiting(c, r);
	}
	if (filled == 0)
		return rl_io_answer(c, r);
	/* Answers not framed: the requests before the denied one go first;
	 * a server waiting for readiness is woken to read again and be
	 * answered then. */
	shutdown(r->fd, SHUT_RD);
	errno = saved;
	return (ssize_t)filled;
}

/*
 * The common read first, in a function small enough to save few
 * registers: a plain connection being framed, nothing held, one buffer. The read is made and framed as read_framed()'s
 * first step would (rl_frame_read); when all of it is the application's
 * and the socket had no more, it is returned here, else read_framed()
 * goes on from that very step.
 */
ssize_t rl_io_read(struct rl_conn *c, struct rl_read *r)
{
	int saved = errno;

	rl_read_now = 0;
	if (__builtin_expect(!(r->flags & (MSG_PEEK | MSG_TRUNC | MSG_OOB)) &&
			     !c->ssl && !r->ssl && c->state == RL_CONN_HTTP &&
			     c->fork_seen == rl_io.forks && !c->ended &&
			     !c->proxy && !c->hold && r->iovcnt == 1 &&
			     r->iov[0].iov_len > 0, 1)) {
		struct rl_region rg = { r->iov, 1, 0 };
		struct rl_outcome o;
		ssize_t n = r->real(r->ctx);

		if (n <= 0)
			return n;
		c->taken += (uint64_t)n;
		rg.len = (size_t)n;
		rl_frame_read(c, &rg, &o);
		if (o.partial < 0 && o.deliver == (size_t)n && !c->hold &&
		    c->state == RL_CONN_HTTP && (size_t)n < r->iov[0].iov_len) {
			errno = saved;
			return n;
		}
		return read_framed(c, r, saved, n, &o);
	}
	return read_framed(c, r, saved, 0, NULL);
}
