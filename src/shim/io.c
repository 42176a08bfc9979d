/* SPDX-License-Identifier: MIT */
/*
 * io.c - the shim's read path, and the bookkeeping around it.
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
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy.h"
#include "shim.h"
#include "reply.h"
#include "time.h"

struct rl_io rl_io;

#define DRAIN_MAX (1u << 20) /* bytes of a denied request read and dropped */

/* ---- start ------------------------------------------------------------------ */

/*
 * 1 if this process owns the memory the tables live in. A vfork() child
 * does not: it runs in its parent's memory until it execs, and the dup2()
 * and close() it makes on its way there (busybox's CGI) must not change
 * what the parent knows of its own fds. fork() children get their own pid
 * recorded by the atfork handler; vfork() runs no handlers.
 */
static pid_t owner;

static void owner_forked(void)
{
	owner = getpid();
}

/* In the parent, after a fork: a child may read a connection's bytes
 * (Python's CGI child reads the body from the socket it inherits). */
static void parent_forked(void)
{
	__atomic_add_fetch(&rl_io.forks, 1, __ATOMIC_RELAXED);
}

static int owner_here(void)
{
	return getpid() == owner;
}


/* Build a policy for `cfg` over `table` and put it in force. */
static int publish(const struct rl_config *cfg, struct rl_table *table,
		   char *err, size_t errlen)
{
	struct rl_policy *p = malloc(sizeof(*p));
	int rc;

	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = rl_policy_init(p, cfg, table, err, errlen);
	if (rc) {
		free(p);
		return rc;
	}
	__atomic_store_n(&rl_io.pol, p, __ATOMIC_RELEASE);
	return 0;
}

int rl_io_reload(const struct rl_config *cfg, char *err, size_t errlen)
{
	const struct rl_policy *old = rl_io_policy();

	if (!old) {
		snprintf(err, errlen, "not started");
		return -EINVAL;
	}
	return publish(cfg, old->table, err, errlen);
}

int rl_io_start(const struct rl_sys *sys, const struct rl_config *cfg,
		struct rl_table *table, char *err, size_t errlen)
{
	int rc;

	rl_io.sys = *sys;
	rc = rl_conn_setup();
	if (rc) {
		snprintf(err, errlen, "cannot map the fd table");
		return rc;
	}
	rc = publish(cfg, table, err, errlen);
	if (rc)
		return rc;
	rl_io.cfg = cfg;
	owner = getpid();
	pthread_atfork(NULL, parent_forked, owner_forked);
	return 0;
}

void rl_io_refuse(const struct rl_sys *sys)
{
	rl_io.sys = *sys;
	rl_conn_setup();
	rl_io.refuse = 1;
}

/* ---- iovec helpers ------------------------------------------------------------ */

/* Copy `len` bytes between the iovecs, from offset `off`, and `buf`: out
 * of them, or into them with `into`. */
static void iov_copy(const struct iovec *iov, int cnt, size_t off, void *buf,
		     size_t len, int into)
{
	char *b = buf;

	for (int i = 0; i < cnt && len; i++) {
		size_t n = iov[i].iov_len;
		char *at;

		if (off >= n) {
			off -= n;
			continue;
		}
		at = (char *)iov[i].iov_base + off;
		n -= off;
		if (n > len)
			n = len;
		if (into)
			memcpy(at, b, n);
		else
			memcpy(b, at, n);
		b += n;
		len -= n;
		off = 0;
	}
}

static void iov_gather(const struct iovec *iov, int cnt, size_t off, void *dst,
		       size_t len)
{
	iov_copy(iov, cnt, off, dst, len, 0);
}

/* Write `len` bytes into the iovecs from offset `off`. */
static void iov_put(const struct iovec *iov, int cnt, size_t off,
		    const void *src, size_t len)
{
	iov_copy(iov, cnt, off, (void *)src, len, 1);
}

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t n = 0;

	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* ---- framing a region ---------------------------------------------------------- */

/* Bytes the framer walks: the application's buffers, or the hold buffer. */
struct region {
	const struct iovec *iov;
	int cnt;
	size_t len;    /* valid bytes */
};

struct outcome {
	size_t deliver;  /* a prefix of the region that may go to the app */
	ssize_t partial; /* start of a head still incomplete at the end */
};

/* Deny the request starting at `at`: the connection answers at the next
 * read. */
static void deny(struct rl_conn *c, int kind, const struct rl_verdict *v,
		 const struct rl_http_req *req, const char *why)
{
	c->state = RL_CONN_DENY;
	c->reply = (uint8_t)kind;
	if (v)
		c->verdict = *v;
	c->reply_http10 = req ? req->http10 : 0;
	c->reply_head = req ? req->head : 0;
	c->reply_why = why;
}

/* A method, whatever its letter case. */
static int method_is(const char *m, const char *want)
{
	size_t n = strlen(want);

	return rl_http_name_eq(m, strlen(m), want, n);
}

/* Decide a parsed request. Returns 1 if allowed. */
static int decide_req(struct rl_conn *c, const struct rl_policy *pol,
		      const struct rl_http_req *req, uint64_t now)
{
	struct rl_verdict v;

	if (req->preface) {
		/* HTTP/2 with prior knowledge: its streams are not framed
		 * here, so it is refused the HTTP/2 way (a client retries
		 * over HTTP/1.1), never passed uncounted. */
		deny(c, RL_REPLY_H2, NULL, req, "HTTP/2 is not served here");
		return 0;
	}
	if ((req->chunked || req->content_length > 0) &&
	    pol->cfg->get_body == RL_GET_BODY_REFUSE &&
	    (method_is(req->method, "GET") || req->head)) {
		/* A server that never reads such a body would take it for
		 * the next request, which nobody counted. */
		deny(c, RL_REPLY_400, NULL, req, "GET or HEAD with a body");
		return 0;
	}
	if (rl_policy_request_peer(pol, &c->peer, req, now, &v)) {
		deny(c, RL_REPLY_400, NULL, req, "ambiguous key header");
		return 0;
	}
	if (!v.allowed) {
		deny(c, RL_REPLY_429, &v, req, NULL);
		return 0;
	}
	rl_http_begin_body(&c->http, req);
	c->delivered++;
	if (req->head) {
		/* Its answer has no body: remembered until it is written.
		 * Past RL_HEADS_OWED of them, answers are not followed. */
		if (c->nheads < RL_HEADS_OWED)
			c->heads[c->nheads++] = c->delivered;
		else
			c->ans_broken = 1;
	}
	/* Only the application's answer to this very request can hand the
	 * connection to another protocol: 101 to an Upgrade, 2xx to a
	 * CONNECT (rl_io_wrote() counts the answers). Where the answers are
	 * not framed, nothing is handed over. */
	if (!c->ans_broken && (req->connect || (req->upgrade && !req->h2c_at))) {
		c->upgrade_wait = req->connect ? RL_SWITCH_CONNECT
					       : RL_SWITCH_UPGRADE;
		c->switch_at = c->delivered;
	}
	return 1;
}

/* The bytes that stand for an h2c offer the server is not to see. */
static const char no_h2c[3] = { ' ', ' ', ' ' };

/*
 * Parse and decide the head at [hs, he) of `rg`. Returns 1 if allowed. A
 * head split over two of the application's buffers (readv) is gathered
 * into the connection's hold buffer, which is empty whenever the
 * application's buffers are being framed. An allowed head that offers an
 * upgrade to h2c (cleartext HTTP/2, whose streams are not framed here)
 * has the offer blanked where it stands: the server answers in HTTP/1.1,
 * as RFC 9110 lets it, and every request stays counted. c->mask_at says
 * where (in the region), or -1.
 */
static int decide(struct rl_conn *c, const struct region *rg, size_t hs,
		  size_t he)
{
	const uint8_t *head = NULL;
	const struct rl_policy *pol;
	struct rl_http_req req;
	size_t off = hs;
	uint64_t now;
	int ok;

	c->mask_at = -1;
	/* Contiguous in one segment? Else gather into the scratch. */
	for (int i = 0; i < rg->cnt; i++) {
		size_t n = rg->iov[i].iov_len;

		if (off < n) {
			if (he - hs <= n - off)
				head = (const uint8_t *)rg->iov[i].iov_base + off;
			break;
		}
		off -= n;
	}
	if (!head) {
		struct rl_hold *h = rl_conn_hold(c);

		if (!h) {
			deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			return 0;
		}
		iov_gather(rg->iov, rg->cnt, hs, h->data, he - hs);
		head = h->data;
	}
	now = rl_time_now_ns();
	rl_shim_tick(now);
	pol = rl_io_policy();
	if (rl_http_parse_head(head, he - hs, &pol->want, &req)) {
		deny(c, RL_REPLY_400, NULL, &req, req.error);
		return 0;
	}
	ok = decide_req(c, pol, &req, now);
	if (ok && req.h2c_at) {
		c->mask_at = (int32_t)(hs + req.h2c_at);
		iov_put(rg->iov, rg->cnt, hs + req.h2c_at, no_h2c, 3);
	}
	return ok;
}

/*
 * The common case, in one pass: at a request boundary, with the rest of
 * the read in one buffer, parse the head where it stands.
 */
enum whole {
	WHOLE_NOT,   /* not at a request's start: the scanner frames these */
	WHOLE_TAKEN, /* a head, decided (*allowed); *used is past it */
	WHOLE_MORE,  /* valid so far, and the bytes end inside it */
	WHOLE_BAD,   /* already wrong, complete or not (*why) */
};

static enum whole decide_whole(struct rl_conn *c, uint8_t *p, size_t len,
			       size_t *used, int *allowed, const char **why)
{
	const struct rl_policy *pol;
	struct rl_http_req req;
	uint64_t now;
	int rc;

	if (len == 0 || c->http.phase != RL_HTTP_IDLE || c->http.cr ||
	    ((c->http.requests == 0 || c->http.tunnel) && p[0] == 0x16))
		return WHOLE_NOT;
	now = rl_time_now_ns();
	rl_shim_tick(now);
	pol = rl_io_policy();
	rc = rl_http_parse_prefix(p, len, &pol->want, &req, used);
	if (rc == -EINVAL && rl_http_is_token(p[0])) {
		/* A head already wrong, complete or not: 400 now, not once
		 * the rest has come (it may never). */
		*why = req.error;
		return WHOLE_BAD;
	}
	if (rc)
		return rc == -EAGAIN ? WHOLE_MORE : WHOLE_NOT;
	rl_http_took_head(&c->http);
	*allowed = decide_req(c, pol, &req, now);
	c->mask_at = -1;
	if (*allowed && req.h2c_at) {
		memcpy(p + req.h2c_at, no_h2c, 3);
		c->mask_at = (int32_t)req.h2c_at;
	}
	return WHOLE_TAKEN;
}

/*
 * Frame rg[from, len): first what is left of a head decided before
 * (c->skip), then request by request. Sets c->state to DENY or PASS as
 * decided. out->deliver is how much of the region the application may
 * have; out->partial where a head that is not complete yet starts, or -1.
 */
static void frame(struct rl_conn *c, const struct region *rg, size_t from,
		  struct outcome *out)
{
	size_t pos = from, seg_off = 0;
	ssize_t head_start = -1;
	int seg = 0;

	if (c->skip) {
		size_t k = rg->len - pos < c->skip ? rg->len - pos : c->skip;

		c->skip -= (uint32_t)k;
		pos += k;
	}
	out->deliver = pos;
	out->partial = -1;
	/* find the segment holding `pos` */
	while (seg < rg->cnt && seg_off + rg->iov[seg].iov_len <= pos) {
		seg_off += rg->iov[seg].iov_len;
		seg++;
	}
	while (pos < rg->len && seg < rg->cnt) {
		size_t end = seg_off + rg->iov[seg].iov_len;
		struct rl_http_feed f;

		if (end > rg->len)
			end = rg->len;
		if (pos >= end) {
			seg_off += rg->iov[seg].iov_len;
			seg++;
			continue;
		}
		if (head_start < 0 && c->http.phase == RL_HTTP_IDLE) {
			size_t used;
			int ok;

			const char *why = NULL;
			enum whole st = decide_whole(c, (uint8_t *)rg->iov[seg].iov_base +
						     (pos - seg_off), end - pos,
						     &used, &ok, &why);

			if (st == WHOLE_BAD) {
				out->deliver = pos;
				deny(c, RL_REPLY_400, NULL, NULL, why);
				return;
			}
			if (st == WHOLE_MORE && end == rg->len) {
				/* A head that is valid so far runs to the end:
				 * held unscanned, to be parsed once whole. */
				c->raw = 1;
				out->partial = (ssize_t)pos;
				return;
			}
			if (st == WHOLE_TAKEN) {
				if (!ok) {
					out->deliver = pos;
					return;
				}
				pos += used;
				out->deliver = pos;
				continue;
			}
		}
		rl_http_feed(&c->http,
			     (const uint8_t *)rg->iov[seg].iov_base + (pos - seg_off),
			     end - pos, &f);
		if (f.head_begin >= 0) {
			head_start = (ssize_t)(pos + (size_t)f.head_begin);
			out->deliver = (size_t)head_start;
		}
		pos += f.used;
		switch (f.event) {
		case RL_HTTP_EV_NONE:
			if (head_start < 0)
				out->deliver = pos;
			continue;
		case RL_HTTP_EV_HEAD:
			if (!decide(c, rg, (size_t)head_start, pos))
				return; /* deliver stays at the head's start */
			head_start = -1;
			out->deliver = pos;
			continue;
		case RL_HTTP_EV_DONE:
			/* The last request the application will answer has
			 * ended: nothing after it is delivered or counted. */
			out->deliver = pos;
			return;
		case RL_HTTP_EV_PASS:
			c->state = RL_CONN_PASS;
			out->deliver = rg->len;
			return;
		case RL_HTTP_EV_ERROR:
			/* A bad head never reaches the application; a bad
			 * body does up to the bad byte, and its request will
			 * never be answered: the reply cannot wait for it. */
			if (head_start < 0) {
				out->deliver = pos;
				c->reply_now = c->http.in_body;
			}
			deny(c, RL_REPLY_400, NULL, NULL, c->http.error);
			return;
		}
	}
	if (head_start >= 0)
		out->partial = head_start;
}

/* ---- answering ------------------------------------------------------------------ */

/* Read and drop what the client sent, up to DRAIN_MAX. 0 if it has gone
 * (end of file), 1 otherwise. */
static int drain(int fd)
{
	char junk[4096];
	size_t total = 0;

	while (total < DRAIN_MAX) {
		ssize_t n = rl_io.sys.recv(fd, junk, sizeof(junk), MSG_DONTWAIT);

		if (n == 0)
			return 0;
		if (n < 0)
			break;
		total += (size_t)n;
	}
	return 1;
}

/* Answer a connection in DENY: the reply, a FIN, the rest of the request
 * read and dropped (so that closing it sends no RST over the reply). The
 * application then sees end of file. */
static ssize_t answer(struct rl_conn *c, int fd)
{
	int saved = errno;
	char buf[RL_REPLY_MAX];
	uint64_t wall_ms = rl_time_wall_ms();
	struct rl_reply_req rr = { c->reply_http10, c->reply_head, wall_ms };
	int n = 0;

	if (c->reply == RL_REPLY_429 && c->verdict.banned) {
		/* Banned: Retry-After is the time the ban has left; no rule's
		 * bucket to describe. */
		n = rl_reply_429(buf, sizeof(buf), &rr, NULL, &c->verdict.res,
				 NULL, RL_HEADERS_NONE, 0, 0);
	} else if (c->reply == RL_REPLY_429) {
		const struct rl_config *cfg = c->verdict.cfg;
		const struct rl_rule_cfg *rule = &cfg->rules[c->verdict.rule];

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
		rl_io.sys.send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	shutdown(fd, SHUT_WR);
	drain(fd);
	c->state = RL_CONN_DONE;
	if (c->hold) {
		c->hold->len = c->hold->decided = 0;
		rl_conn_unhold(c);
	}
	errno = saved; /* end of file, as if from the real read */
	return 0;
}

/* ---- the hold buffer ------------------------------------------------------------ */

static int nonblocking(const struct rl_read *r)
{
	int fl;

	if (r->flags & MSG_DONTWAIT)
		return 1;
	fl = rl_io.sys.getfl(r->fd);
	return fl >= 0 && (fl & O_NONBLOCK);
}

/* Wait for more bytes as a blocking read would: honours SO_RCVTIMEO.
 * Returns 0 when readable, else -1 with errno (EINTR, EAGAIN). */
static int wait_readable(int fd)
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

/* Drop the first `n` bytes of the hold buffer. */
static void hold_shift(struct rl_conn *c, size_t n)
{
	struct rl_hold *h = c->hold;

	memmove(h->data, h->data + n, h->len - n);
	h->len -= (uint32_t)n;
	h->decided -= (uint32_t)n;
}

/* A PROXY header at the start of the hold buffer: strip it and key the
 * connection by its source. Returns 1 done, 0 need more, -1 refused. */
static int hold_proxy(struct rl_conn *c)
{
	struct rl_hold *h = c->hold;
	struct rl_proxy_result pr;
	struct rl_verdict v;

	switch (rl_proxy_parse(h->data, h->len, &pr)) {
	case RL_PROXY_MORE:
		return 0;
	case RL_PROXY_BAD:
		deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
		return -1;
	case RL_PROXY_OK:
		break;
	}
	memmove(h->data, h->data + pr.len, h->len - pr.len);
	h->len -= (uint32_t)pr.len;
	c->proxy = 0;
	if (!pr.local)
		rl_policy_peer(rl_io_policy(), &pr.addr, &c->peer);
	/* The accept-level rules, now that the client is known. */
	rl_policy_accept(rl_io_policy(), &c->peer.addr, rl_time_now_ns(), &v);
	if (!v.allowed) {
		deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
		return -1;
	}
	return 1;
}

/* Take from the socket `n` bytes a peek has already copied to `dst`. */
static int take(struct rl_conn *c, int fd, uint8_t *dst, size_t n)
{
	while (n > 0) {
		ssize_t k = rl_io.sys.recv(fd, dst, n, MSG_DONTWAIT);

		if (k <= 0)
			return -1;
		c->taken += (uint64_t)k;
		dst += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Copy decided held bytes into the application's buffers at `at`.
 * Returns how many. */
static size_t hold_give(struct rl_conn *c, const struct rl_read *r, size_t at,
			size_t total)
{
	struct rl_hold *h = c->hold;
	size_t n = h->decided < total - at ? h->decided : total - at;

	iov_put(r->iov, r->iovcnt, at, h->data, n);
	hold_shift(c, n);
	if (r->msg) {
		r->msg->msg_controllen = 0;
		r->msg->msg_flags = 0;
	}
	if (h->len == 0)
		rl_conn_unhold(c);
	return n;
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

enum held {
	HELD_DECIDED, /* the held head is decided and allowed */
	HELD_DENIED,  /* ... or refused: c->state is DENY */
	HELD_MORE,    /* more of it was taken; still not complete */
	HELD_WAIT,    /* nothing more has come */
	HELD_EOF,     /* the client went away */
	HELD_ERR,     /* errno */
};

/*
 * The held head was allowed; its last `tail` bytes are still in the
 * socket (peeked). They pass when the application reads them, unless the
 * head was changed (an h2c offer blanked): then they are taken too, so
 * that the application gets the changed bytes, changed again over what
 * the socket gave.
 */
static enum held held_decided(struct rl_conn *c, int fd, size_t tail)
{
	struct rl_hold *h = c->hold;

	if (c->mask_at >= 0 && (size_t)c->mask_at + sizeof(no_h2c) > h->len) {
		if (take(c, fd, h->data + h->len, tail) < 0) {
			deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			return HELD_DENIED;
		}
		h->len += (uint32_t)tail;
		memcpy(h->data + c->mask_at, no_h2c, sizeof(no_h2c));
	} else {
		c->skip = (uint32_t)tail;
	}
	h->decided = h->len;
	return HELD_DECIDED;
}

/*
 * The hold buffer has the start of a head that the application's read
 * took from the socket (undecided, so not given to it). Look at what has
 * come since (MSG_PEEK): if the head ends there, decide it and leave its
 * tail in the socket (c->skip counts it through when the application reads
 * it), so the socket stays readable for the server for every byte after
 * the held ones; bytes past the head are never taken here (a CGI child
 * reading the body from the socket it inherits finds them there). If the
 * head does not end, take what came: it is all head, it waits for the
 * client, and a level-triggered server is not woken for it again and again.
 */
static enum held held_advance(struct rl_conn *c, int fd)
{
	struct rl_hold *h = c->hold;
	ssize_t n = rl_io.sys.recv(fd, h->data + h->len, RL_HOLD_SIZE - h->len,
				   MSG_PEEK | MSG_DONTWAIT);
	struct rl_http_feed f;

	if (n == 0)
		return HELD_EOF;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? HELD_WAIT : HELD_ERR;
	if (c->raw) {
		/* Held unscanned: parse it once, whole if the rest has come
		 * (a browser's head that straddles nginx's first 1 KiB read
		 * is parsed one time, not scanned twice and parsed again). */
		const char *why = NULL;
		size_t used;
		uint8_t *p = h->data;
		enum whole st;
		int ok;

		c->raw = 0;
		st = decide_whole(c, p, h->len + (size_t)n, &used, &ok, &why);
		if (st == WHOLE_BAD) {
			deny(c, RL_REPLY_400, NULL, NULL, why);
			return HELD_DENIED;
		}
		if (st == WHOLE_TAKEN) {
			if (!ok)
				return HELD_DENIED;
			if (c->state == RL_CONN_PASS) {
				h->decided = h->len;
				return HELD_DECIDED;
			}
			return held_decided(c, fd, used - h->len);
		}
		/* Not whole yet (or not valid): the scanner takes it from
		 * here, over what is held, then what came. */
		rl_http_feed(&c->http, p, h->len, &f);
		if (f.event == RL_HTTP_EV_ERROR) {
			deny(c, RL_REPLY_400, NULL, NULL, c->http.error);
			return HELD_DENIED;
		}
	}
	rl_http_feed(&c->http, h->data + h->len, (size_t)n, &f);
	switch (f.event) {
	case RL_HTTP_EV_HEAD: {
		struct iovec v = { h->data, h->len + f.used };
		struct region rg = { &v, 1, h->len + f.used };

		if (!decide(c, &rg, 0, rg.len))
			return HELD_DENIED;
		return held_decided(c, fd, f.used);
	}
	case RL_HTTP_EV_ERROR:
		deny(c, RL_REPLY_400, NULL, NULL, c->http.error);
		return HELD_DENIED;
	default:
		if (take(c, fd, h->data + h->len, (size_t)n) < 0) {
			deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			return HELD_DENIED;
		}
		h->len += (uint32_t)n;
		return HELD_MORE;
	}
}

/*
 * A PROXY header is expected: take exactly it into the hold buffer (never
 * a byte past it), strip it, key the connection by its source. Returns 1
 * when framing may go on, or what the read returns.
 */
static int proxy_read(struct rl_conn *c, struct rl_read *r, ssize_t *ret)
{
	struct rl_hold *h = c->hold ? c->hold : rl_conn_hold(c);

	while (c->proxy) {
		struct rl_proxy_result pr;
		size_t before, want;
		ssize_t n;
		int st;

		if (!h) {
			deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			*ret = answer(c, r->fd);
			return 0;
		}
		before = h->len;
		n = rl_io.sys.recv(r->fd, h->data + h->len,
				   RL_PROXY_MAX - h->len, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0) {
			h->len = 0;
			rl_conn_unhold(c);
			*ret = 0;
			return 0;
		}
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				*ret = -1;
				return 0;
			}
			if (nonblocking(r) || wait_readable(r->fd)) {
				*ret = -1;
				return 0;
			}
			continue;
		}
		want = (size_t)n;
		if (rl_proxy_parse(h->data, before + (size_t)n, &pr) == RL_PROXY_OK)
			want = pr.len - before;
		if (take(c, r->fd, h->data + before, want) < 0) {
			deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			*ret = answer(c, r->fd);
			return 0;
		}
		h->len = (uint32_t)(before + want);
		st = hold_proxy(c);
		if (st < 0) {
			*ret = answer(c, r->fd);
			return 0;
		}
		if (st == 0 && h->len >= RL_PROXY_MAX) {
			deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			*ret = answer(c, r->fd);
			return 0;
		}
	}
	if (h) {
		h->len = h->decided = 0;
		rl_conn_unhold(c);
	}
	return 1;
}

/* ---- the read path ----------------------------------------------------------------- */

/* The kernel's TCP states (include/net/tcp_states.h) after the peer's
 * FIN has come: TIME_WAIT, CLOSE, CLOSE_WAIT, LAST_ACK, CLOSING. */
static int fin_received(uint8_t state)
{
	return state == 6 || state == 7 || state == 8 || state == 9 || state == 11;
}

/*
 * This process forked since it last read `c`: did another process read
 * the socket meanwhile (Python's CGI child reads the body from the socket
 * it inherits)? The kernel's count of bytes received, less those still
 * queued, is what all readers took; less what this process took, what the
 * others took. Bytes of the body the framing expects are counted off it,
 * so the requests after it are framed and counted where they are; anything
 * else (a head, a chunked body, held bytes) cannot be followed: returns
 * -1, and the connection ends for the application. Two system calls, once
 * per fork per connection.
 */
static int others_took(struct rl_conn *c, int fd)
{
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);
	uint64_t gone, others;
	int queued;

	c->fork_seen = rl_io.forks;
	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0 ||
	    tl < offsetof(struct tcp_info, tcpi_bytes_received) +
			 sizeof(ti.tcpi_bytes_received) ||
	    (queued = rl_io.sys.inq(fd)) < 0)
		return 0; /* cannot tell: as before */
	gone = ti.tcpi_bytes_received - (uint64_t)queued;
	/* The peer's FIN is counted as a byte received, and is no byte
	 * anybody reads. */
	if (gone && fin_received(ti.tcpi_state))
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
	if (!nonblocking(r))
		return answer(c, r->fd);
	if (drain(r->fd) == 0)
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
 */
ssize_t rl_io_read(struct rl_conn *c, struct rl_read *r)
{
	int saved = errno;
	size_t total, filled = 0;

	if (r->flags & (MSG_PEEK | MSG_TRUNC | MSG_OOB)) {
		/* The application's own peeks pass untouched, except while
		 * an answer is due: nginx peeks to see whether a client went
		 * away, and the shut-down read side would say it did. */
		if (c->state == RL_CONN_DENY) {
			errno = EAGAIN;
			return -1;
		}
		if (c->state == RL_CONN_DONE)
			return 0;
		return r->real(r->ctx);
	}
	switch ((enum rl_conn_state)c->state) {
	case RL_CONN_PASS:
		break;
	case RL_CONN_DENY:
		if (c->deny_wait && !c->ans_broken && c->answered < c->owed)
			return deny_waiting(c, r);
		return answer(c, r->fd);
	case RL_CONN_DONE:
		return 0;
	case RL_CONN_HTTP:
		if (__builtin_expect(c->fork_seen != rl_io.forks, 0) &&
		    others_took(c, r->fd))
			c->ended = 1;
		if (c->ended)
			return 0;
		if (c->proxy) {
			ssize_t ret;

			if (!proxy_read(c, r, &ret))
				return ret;
		}
		break;
	}
	total = iov_total(r->iov, r->iovcnt);
	if (total == 0)
		return r->real(r->ctx);
	for (;;) {
		struct rl_hold *h = c->hold;
		struct region rg;
		struct outcome o;
		size_t space;
		ssize_t n;

		if (h && h->decided) {
			filled += hold_give(c, r, filled, total);
			if (filled == total)
				break;
			continue;
		}
		if (h && h->len && c->state == RL_CONN_PASS) {
			h->decided = h->len;
			continue;
		}
		if (h && h->len) {
			switch (held_advance(c, r->fd)) {
			case HELD_DECIDED:
			case HELD_MORE:
				continue;
			case HELD_DENIED:
				goto denied;
			case HELD_EOF:
				/* The client stopped sending mid-head: the
				 * application never sees the incomplete
				 * request, the client gets a 400 (it may
				 * still be reading). */
				deny(c, RL_REPLY_400, NULL, NULL,
				     "incomplete request head");
				goto denied;
			case HELD_ERR:
				if (filled)
					goto out;
				return -1;
			case HELD_WAIT:
				if (filled)
					goto out;
				if (nonblocking(r)) {
					errno = EAGAIN;
					return -1;
				}
				if (wait_readable(r->fd))
					return -1;
				continue;
			}
		}
		if (h && h->len == 0)
			rl_conn_unhold(c); /* only used to gather a split head */
		/* Nothing held: the socket. */
		space = total - filled;
		n = filled ? recv_at(r->fd, r->iov, r->iovcnt, filled)
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
		frame(c, &rg, filled, &o);
		if (c->hold && c->hold->len == 0 && o.partial < 0)
			rl_conn_unhold(c);
		if (o.partial >= 0) {
			h = rl_conn_hold(c);
			if (!h) {
				/* Too many heads in progress at once: refuse
				 * this one rather than pass it unframed. */
				deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
				o.deliver = (size_t)o.partial;
			} else {
				h->len = (uint32_t)(rg.len - (size_t)o.partial);
				iov_gather(r->iov, r->iovcnt, (size_t)o.partial,
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
			if (nonblocking(r)) {
				if (drain(r->fd) == 0) {
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
	 * one; a request whose body was refused is never answered. */
	c->owed = c->delivered - (c->reply_now && c->delivered ? 1 : 0);
	if (c->answered >= c->owed && filled == 0)
		return answer(c, r->fd);
	if (!c->ans_broken) {
		if (c->answered >= c->owed) {
			/* Those answers are out: the reply goes now, the
			 * application gets what came before the bad byte,
			 * then the end. */
			answer(c, r->fd);
			errno = saved;
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
		return answer(c, r->fd);
	/* Answers not framed: the requests before the denied one go first;
	 * a server waiting for readiness is woken to read again and be
	 * answered then. */
	shutdown(r->fd, SHUT_RD);
	errno = saved;
	return (ssize_t)filled;
}

/* ---- sockets: listeners, accepted, adopted --------------------------------------- */

static int tcp_port(int fd, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int type = 0;
	socklen_t tl = sizeof(type);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
	    type != SOCK_STREAM)
		return -1;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET)
		*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else if (ss.ss_family == AF_INET6)
		*port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else
		return -1;
	return 0;
}

static void remember_listener(uint16_t port)
{
	unsigned n = __atomic_load_n(&rl_io.nlisten, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < n; i++)
		if (rl_io.listen_ports[i] == port)
			return;
	if (n < RL_MAX_PORTS) {
		rl_io.listen_ports[n] = port;
		__atomic_store_n(&rl_io.nlisten, n + 1, __ATOMIC_RELEASE);
	}
}

int rl_io_listener(int lfd)
{
	struct rl_fd *e = rl_fd_get(lfd);
	uint16_t port;

	if (!e)
		return 0;
	if (e->kind == RL_FD_LISTEN)
		return e->guarded;
	if (tcp_port(lfd, &port) < 0) {
		e->kind = RL_FD_IGNORED;
		return 0;
	}
	e->kind = RL_FD_LISTEN;
	e->port = port;
	e->guarded = (uint8_t)(rl_io.refuse || !rl_io.cfg ||
			       rl_config_guards(rl_io.cfg, port));
	if (e->guarded)
		remember_listener(port);
	return e->guarded;
}

/* Close a refused connection at once: an RST, no TIME_WAIT kept here. */
static void refuse_close(int fd)
{
	struct linger lg = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	rl_io.sys.close(fd);
}

int rl_io_accepted(int lfd, int fd, const struct sockaddr *peer,
		   socklen_t peerlen)
{
	struct rl_fd *e = rl_fd_get(fd), *l = rl_fd_get(lfd);
	const struct rl_policy *pol;
	struct rl_verdict v;
	struct rl_addr client;
	struct rl_conn *c;

	if (rl_io.refuse) {
		refuse_close(fd);
		return 0;
	}
	if (!e || rl_addr_from_sockaddr(peer, peerlen, &client)) {
		/* Not an address we can key (or an fd beyond the table):
		 * refuse rather than let it through unframed. */
		refuse_close(fd);
		return 0;
	}
	if (e->kind == RL_FD_CONN)
		rl_fd_forget(e); /* a stale entry: closed behind our back */
	pol = rl_io_policy();
	if (!rl_policy_expects_proxy(pol, &client)) {
		rl_policy_accept(pol, &client, rl_time_now_ns(), &v);
		if (!v.allowed) {
			refuse_close(fd);
			return 0;
		}
	}
	c = rl_conn_new(e);
	if (!c) {
		refuse_close(fd);
		return 0;
	}
	rl_policy_peer(pol, &client, &c->peer);
	c->port = l ? l->port : 0;
	c->proxy = (uint8_t)rl_policy_expects_proxy(pol, &client);
	return 1;
}

void rl_io_adopt(int fd, struct rl_fd *e)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct rl_addr client;
	uint16_t port;
	int known = 0, listening = 0;
	socklen_t ll = sizeof(listening);
	const struct rl_policy *pol;
	struct rl_conn *c;

	e->kind = RL_FD_IGNORED;
	if (rl_io.refuse || !rl_io.cfg || tcp_port(fd, &port) < 0)
		return;
	/* With no ports configured, only ports this process has accepted on:
	 * an outgoing connection (to a database, say) is never framed. */
	if (rl_io.cfg->nports) {
		known = rl_config_guards(rl_io.cfg, port);
	} else {
		unsigned n = __atomic_load_n(&rl_io.nlisten, __ATOMIC_ACQUIRE);

		for (unsigned i = 0; i < n; i++)
			known |= rl_io.listen_ports[i] == port;
	}
	if (!known)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) == 0 &&
	    listening)
		return;
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    rl_addr_from_sockaddr((struct sockaddr *)&ss, len, &client))
		return;
	c = rl_conn_new(e);
	if (!c)
		return;
	pol = rl_io_policy();
	rl_policy_peer(pol, &client, &c->peer);
	c->port = port;
	c->proxy = (uint8_t)rl_policy_expects_proxy(pol, &client);
}

/* ---- close, dup, write --------------------------------------------------------------- */

void rl_io_close(int fd)
{
	struct rl_fd *e = rl_fd_get(fd);
	struct rl_conn *c;

	if (!e)
		return;
	if ((e->kind == RL_FD_CONN || e->kind == RL_FD_LISTEN) && !owner_here())
		return;
	c = rl_conn_of(e);
	/* Whatever of a denied request came since, read it so that the close
	 * sends a FIN after our answer, not an RST that could destroy it. */
	if (c && rl_fd_last(e) && c->state == RL_CONN_DONE)
		drain(fd);
	rl_fd_forget(e);
}

void rl_io_dup(int oldfd, int newfd)
{
	struct rl_fd *from = rl_fd_get(oldfd), *to = rl_fd_get(newfd);

	if (!to)
		return;
	if ((to->kind == RL_FD_CONN || to->kind == RL_FD_LISTEN ||
	     (from && from->kind == RL_FD_CONN)) && !owner_here())
		return;
	if (to->kind != RL_FD_UNKNOWN)
		rl_fd_forget(to); /* dup2 over an fd closes it */
	if (from)
		rl_fd_share(to, from);
}

/* ---- the answers ---------------------------------------------------------------------- */

int rl_io_write(struct rl_conn *c, const struct iovec *iov, int iovcnt)
{
	(void)iov;
	(void)iovcnt;
	return c->state == RL_CONN_DONE;
}

/* The answers can no longer be told apart: a denial that waited for them
 * is answered at the next read, which the shut-down read side wakes the
 * server for. */
static void ans_fail(struct rl_conn *c, int fd)
{
	c->ans_broken = 1;
	c->upgrade_wait = 0;
	if (c->state == RL_CONN_DENY && c->deny_wait) {
		c->deny_wait = 0;
		shutdown(fd, SHUT_RD);
	}
}

/* The final answer being written, if one is, has ended. */
static void answer_ended(struct rl_conn *c)
{
	if (c->ans_final) {
		c->answered++;
		c->ans_final = 0;
	}
}

/* Count `n` bytes of a body with a length off; returns how many it took.
 * The answer ends with its last byte. */
static size_t answer_body(struct rl_conn *c, size_t n)
{
	if (n > c->ans.remaining)
		n = (size_t)c->ans.remaining;
	c->ans.remaining -= n;
	if (c->ans.remaining == 0) {
		c->ans.phase = RL_HTTP_IDLE;
		answer_ended(c);
	}
	return n;
}

/* After a write: the reply to a denial goes once the answers it follows
 * are out. */
static void answers_out(struct rl_conn *c, int fd)
{
	if (c->state == RL_CONN_DENY && c->deny_wait && c->answered >= c->owed)
		answer(c, fd);
}

/* An answer whose head the application has written: whose is it, and
 * what follows it. */
static void answer_begun(struct rl_conn *c, int fd, const struct rl_http_answer *ap)
{
	struct rl_http_answer a = *ap;
	uint32_t k;
	int head_req;

	answer_ended(c); /* the one before, if its body had no length */
	if (a.status < 200 && a.status != 101) {
		rl_http_begin_answer(&c->ans, &a, 1); /* interim: 100, 103 */
		return;
	}
	k = c->answered + 1;
	if (k > c->delivered) {
		ans_fail(c, fd); /* an answer to no request it was given */
		return;
	}
	head_req = 0;
	for (unsigned i = 0; i < c->nheads; i++) {
		if (c->heads[i] == k) {
			head_req = 1;
			c->heads[i] = c->heads[--c->nheads];
			break;
		}
	}
	if (c->upgrade_wait && k == c->switch_at) {
		enum rl_switch sw = (enum rl_switch)c->upgrade_wait;

		c->upgrade_wait = 0;
		if (sw == RL_SWITCH_UPGRADE && a.status == 101) {
			c->state = RL_CONN_PASS;
			rl_http_pass(&c->http);
			if (c->hold)
				c->hold->decided = c->hold->len;
			c->ans_broken = 1;
			return;
		}
		if (sw == RL_SWITCH_CONNECT && a.status / 100 == 2) {
			/* A tunnel: TLS in it passes untouched, but requests
			 * the application may still read as HTTP/1.x (a
			 * server that answers 200 and does not tunnel) are
			 * framed and counted. */
			c->http.tunnel = 1;
			ans_fail(c, fd);
			return;
		}
	}
	if (a.status == 101) {
		ans_fail(c, fd); /* a switch nobody was allowed: stop here */
		return;
	}
	c->ans_final = 1;
	rl_http_begin_answer(&c->ans, &a, head_req);
	if (c->ans.phase == RL_HTTP_PASS)
		ans_fail(c, fd); /* to the end: no answer after it */
}

void rl_io_wrote(struct rl_conn *c, int fd, const struct iovec *iov, int iovcnt,
		 size_t n)
{
	uint8_t gather[RL_ANSWER_HEAD_MAX];
	size_t pos = 0, seg_off = 0;
	ssize_t head_start = -1;

	if (c->ans_broken || c->state == RL_CONN_PASS || c->state == RL_CONN_DONE)
		return;
	if (c->ans.phase == RL_HTTP_HEAD) {
		/* A head written in more than one call: not followed. */
		ans_fail(c, fd);
		return;
	}
	for (int seg = 0; seg < iovcnt && pos < n && !c->ans_broken; seg++) {
		size_t end = seg_off + iov[seg].iov_len;

		if (end > n)
			end = n;
		while (pos < end && !c->ans_broken) {
			const uint8_t *b = (const uint8_t *)iov[seg].iov_base;
			struct rl_http_answer a;
			struct rl_http_feed f;
			size_t used;
			int rc;

			if (c->ans.phase == RL_HTTP_BODY) {
				pos += answer_body(c, end - pos);
				continue;
			}
			if (c->ans.phase == RL_HTTP_IDLE && !c->ans.cr) {
				/* A head whole in this buffer: one pass. */
				rc = rl_http_answer_prefix(b + (pos - seg_off),
							   end - pos, &a, &used);
				if (rc == 0) {
					pos += used;
					answer_begun(c, fd, &a);
					continue;
				}
				if (rc == -EINVAL) {
					ans_fail(c, fd);
					break;
				}
			}
			rl_http_feed(&c->ans, b + (pos - seg_off), end - pos, &f);
			if (f.head_begin >= 0)
				head_start = (ssize_t)(pos + (size_t)f.head_begin);
			pos += f.used;
			if (f.event == RL_HTTP_EV_NONE)
				continue;
			if (f.event != RL_HTTP_EV_HEAD || head_start < 0 ||
			    pos - (size_t)head_start > sizeof(gather)) {
				ans_fail(c, fd);
				break;
			}
			{
				const uint8_t *hp = gather;
				struct rl_http_answer a2;

				if ((size_t)head_start >= seg_off)
					hp = b + (head_start - (ssize_t)seg_off);
				else
					iov_gather(iov, iovcnt, (size_t)head_start,
						   gather, pos - (size_t)head_start);
				if (rl_http_parse_answer(hp, pos - (size_t)head_start,
							 &a2))
					ans_fail(c, fd);
				else
					answer_begun(c, fd, &a2);
			}
			head_start = -1;
		}
		seg_off += iov[seg].iov_len;
	}
	if (c->ans_broken)
		return;
	if (c->ans.phase == RL_HTTP_HEAD) {
		ans_fail(c, fd);
		return;
	}
	if (c->ans.phase == RL_HTTP_IDLE)
		answer_ended(c); /* a chunked one, or one with no body */
	answers_out(c, fd);
}

void rl_io_wrote_file(struct rl_conn *c, int fd, size_t n)
{
	if (c->ans_broken || c->state == RL_CONN_PASS || c->state == RL_CONN_DONE)
		return;
	/* A file's bytes can only be a body with a length. */
	if (c->ans.phase != RL_HTTP_BODY || c->ans.remaining < n) {
		ans_fail(c, fd);
		return;
	}
	answer_body(c, n);
	answers_out(c, fd);
}
