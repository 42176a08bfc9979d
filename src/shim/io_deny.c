/* SPDX-License-Identifier: MIT */
/*
 * io_deny.c - a denied connection: marked for a reply, then answered (the
 * reply, a FIN, the rest of the request read and dropped), then closed
 * lingering.
 *
 * A connection the shim answered may still have bytes on their way from
 * the client: the rest of a pipeline, of a body, of a client that has not
 * read the answer yet. Whatever comes after the application's close makes
 * the kernel reset the connection (RFC 1122 4.2.2.13), and a reset throws
 * away what the send queue still holds: the answers to the requests before
 * the denied one and the reply, when the client reads slower than it
 * sends. So the shim closes as nginx and lighttpd do (lingering_close):
 * after the reply's FIN, the connection's reads drop what comes and say
 * EAGAIN until the client's own FIN, and only then end of file, for the
 * application to close on. The application's event loop does the waiting,
 * with its own timeouts; the shim gives up after LINGER_NS.
 */
#include "io.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "io_int.h"
#include "reply.h"
#include "clock.h"

#define DRAIN_MAX (1u << 20) /* bytes of a denied request read and dropped */
/* A connection answered lingers this long at most, as nginx's
 * lingering_time: a client still sending after that is cut off. */
#define LINGER_NS (30 * RL_NS_PER_SEC)

/* Deny the request starting at `at`: the connection answers at the next
 * read. */
void rl_io_deny(struct rl_conn *c, int kind, const struct rl_verdict *v,
		const struct rl_http_req *req, const char *why)
{
	c->state = RL_CONN_DENY;
	c->reply = (uint8_t)kind;
	if (v)
		c->verdict = *v;
	c->reply_http10 = req ? req->http10 : 0;
	c->reply_head = req ? req->head : 0;
	c->reply_html = 0;
	c->reply_why = why;
}

/* Read and drop what the client sent, up to DRAIN_MAX. 0 if it has gone
 * (end of file, or the connection failed), 1 if all it sent is read, 2 if
 * more is there than one call drops. errno is kept. */
int rl_io_drain(int fd)
{
	char junk[4096];
	size_t total = 0;
	int saved = errno, rc = 2;

	while (total < DRAIN_MAX) {
		ssize_t n = rl_io.sys.recv(fd, junk, sizeof(junk), MSG_DONTWAIT);

		if (n == 0) {
			rc = 0;
			break;
		}
		if (n < 0) {
			rc = errno == EAGAIN || errno == EWOULDBLOCK ||
			     errno == EINTR;
			break;
		}
		total += (size_t)n;
	}
	errno = saved;
	return rc;
}

/*
 * Send the reply without waiting. Right after an answer that filled the
 * socket's send buffer (a big body to a slow reader) there is no room for
 * it, and the shim, inside the application's call, must not wait for the
 * client: the buffer is made a little larger, enough for the reply (the
 * connection ends with it), and it is sent again. A buffer already past
 * what SO_SNDBUF may set (autotuned beyond net.core.wmem_max) is left
 * as it is.
 */
static void send_reply(struct rl_conn *c, int fd, const char *buf, size_t n)
{
	ssize_t r = rl_conn_send(c, fd, buf, n);
	int cur = 0, want, now = 0;
	socklen_t len = sizeof(cur);

	if (r == (ssize_t)n || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
		return;
	if (r > 0) {
		buf += r;
		n -= (size_t)r;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &cur, &len) || cur <= 0)
		return;
	/* The kernel doubles what it is given; what is queued may pass the
	 * limit by a segment's worth. */
	want = cur / 2 + 64 * 1024;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want)))
		return;
	len = sizeof(now);
	if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &now, &len) || now <= cur) {
		/* clamped below what it was: put it back */
		want = cur / 2;
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
		return;
	}
	/* A session's record waiting to go is sent again from the same
	 * bytes, as libssl wants. */
	rl_conn_send(c, fd, buf, n);
}

/* Answer a connection in DENY: the reply, a FIN, the rest of the request
 * read and dropped; it lingers unless the client has gone already. errno
 * is kept. */
void rl_io_reply(struct rl_conn *c, int fd)
{
	int saved = errno;
	char buf[RL_REPLY_MAX];
	uint64_t wall_ms = rl_time_wall_ms();
	struct rl_reply_req rr = { c->reply_http10, c->reply_head, wall_ms,
				   c->reply_html, NULL, 0 };
	int n = 0;

	if (c->reply == RL_REPLY_429 && c->verdict.banned) {
		/* Banned: Retry-After is the time the ban has left; no rule's
		 * bucket to describe. */
		n = rl_reply_429(buf, sizeof(buf), &rr, NULL, &c->verdict.res,
				 NULL, RL_HEADERS_NONE, 0, 0);
	} else if (c->reply == RL_REPLY_429) {
		const struct rl_config *cfg = c->verdict.cfg;
		const struct rl_rule_cfg *rule = &cfg->rules[c->verdict.rule];
		unsigned kind = c->reply_html ? RL_BODY_HTML : RL_BODY_JSON;

		rr.body = rule->deny_body[kind];
		rr.body_len = rule->deny_body_len[kind];
		n = rl_reply_429(buf, sizeof(buf), &rr, rule->name,
				 &c->verdict.res, &rule->rate, cfg->headers,
				 wall_ms, c->verdict.store_down);
	} else if (c->reply == RL_REPLY_H2) {
		/* The server preface (an empty SETTINGS) and GOAWAY with
		 * HTTP_1_1_REQUIRED, last stream 0 (RFC 9113 3.4, 6.8). */
		static const uint8_t h2[] = {
			0, 0, 0, 4, 0, 0, 0, 0, 0,
			0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0d,
		};

		memcpy(buf, h2, sizeof(h2));
		n = (int)sizeof(h2);
	} else if (c->reply == RL_REPLY_400) {
		n = rl_reply_400(buf, sizeof(buf), &rr,
				 c->reply_why ? c->reply_why : "bad request");
	}
	if (n > 0)
		send_reply(c, fd, buf, (size_t)n);
	if (c->ssl)
		rl_io.sys.tls_close(c->ssl); /* close_notify */
	shutdown(fd, SHUT_WR);
	c->linger_ns = rl_io_drain(fd) ? rl_time_now_ns() + LINGER_NS : 0;
	c->state = RL_CONN_DONE;
	if (c->hold) {
		c->hold->len = c->hold->decided = 0;
		rl_conn_unhold(c);
	}
	errno = saved;
}

/*
 * 1 if a read of a connection answered still lingers (`drained`: right
 * after the reply's own drain): then errno is EAGAIN. A blocking read is
 * not made to wait for the client (the server's thread would wait with
 * it). Past the deadline, or once the client has gone, no read lingers. A
 * drain that leaves bytes behind (a flood) still lingers: the bytes still
 * there wake a level-triggered server again, more bytes an edge-triggered
 * one.
 */
static int lingers(struct rl_conn *c, const struct rl_read *r, int drained)
{
	int saved = errno;

	if (c->linger_ns && rl_read_nonblocking(r)) {
		if ((drained || rl_io_drain(r->fd)) &&
		    rl_time_now_ns() < c->linger_ns) {
			errno = EAGAIN;
			return 1;
		}
		c->linger_ns = 0;
	}
	errno = saved;
	return 0;
}

/*
 * The end a read sees once the connection no longer lingers: end of file,
 * except once after a body cut at a bad byte, which is the client's reset
 * (ECONNRESET, as the kernel says it once; a peek leaves it to the read).
 * The application had the body up to that byte and waits for the rest;
 * an end of file there is a client that stopped sending in the middle of
 * a chunk, which some servers wait on forever (gunicorn 20's chunked
 * reader loops on it, at 100% CPU, until its worker is killed), where a
 * reset is a client gone.
 */
static ssize_t end(struct rl_conn *c, const struct rl_read *r)
{
	if (!c->reply_now || (r->flags & MSG_PEEK))
		return 0;
	c->reply_now = 0;
	errno = ECONNRESET;
	return -1;
}

ssize_t rl_io_ended(struct rl_conn *c, const struct rl_read *r)
{
	return lingers(c, r, 0) ? -1 : end(c, r);
}

ssize_t rl_io_answer(struct rl_conn *c, const struct rl_read *r)
{
	rl_io_reply(c, r->fd);
	return lingers(c, r, 1) ? -1 : end(c, r);
}
