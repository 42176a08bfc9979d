/* SPDX-License-Identifier: MIT */
/*
 * io_hold.c - the hold buffer: a request head that is not complete yet,
 * advanced from what the socket has (peeked, so that the bytes after it
 * stay in the socket; under TLS read from the session, whose bytes no
 * other reader wants), decided once whole; and a PROXY header taken into
 * it and stripped.
 */
#include "io.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "io_int.h"
#include "proxy.h"
#include "clock.h"

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
		rl_io_deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
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
		rl_io_deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
		return -1;
	}
	return 1;
}

/* Take from the socket `n` bytes a peek has already copied to `dst`. */
static int take(struct rl_conn *c, int fd, uint8_t *dst, size_t n)
{
	while (n > 0) {
		ssize_t k = rl_conn_recv(c, fd, dst, n, 0);

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
size_t rl_hold_give(struct rl_conn *c, const struct rl_read *r, size_t at,
		    size_t total)
{
	struct rl_hold *h = c->hold;
	size_t n = h->decided < total - at ? h->decided : total - at;

	rl_iov_put(r->iov, r->iovcnt, at, h->data, n);
	hold_shift(c, n);
	if (h->unread > h->len - h->decided)
		h->unread = h->len - h->decided; /* decided since (PASS) */
	if (r->msg) {
		r->msg->msg_controllen = 0;
		r->msg->msg_flags = 0;
	}
	if (h->len == 0)
		rl_conn_unhold(c);
	return n;
}

/* Out of line, as rl_hold_before: the plaintext read never comes here. */
__attribute__((noinline, cold)) ssize_t
rl_hold_unread(struct rl_conn *c, const struct rl_read *r, size_t total)
{
	struct rl_hold *h = c->hold;
	size_t n = h->unread < total ? h->unread : total;

	rl_iov_put(r->iov, r->iovcnt, 0, h->data, n);
	memmove(h->data, h->data + n, h->len - n);
	h->len -= (uint32_t)n;
	h->unread -= (uint32_t)n;
	if (h->len == 0)
		rl_conn_unhold(c);
	return (ssize_t)n;
}

__attribute__((noinline, cold)) void rl_hold_before(struct rl_conn *c,
						   const struct rl_read *r,
						   size_t from, size_t to)
{
	struct rl_hold *h = c->hold;
	size_t k = to - from;

	memmove(h->data + k, h->data, h->len);
	rl_iov_gather(r->iov, r->iovcnt, from, h->data, k);
	h->len += (uint32_t)k;
	h->decided = 0;
}

/*
 * The held head was allowed; its last `tail` bytes are still in the
 * socket (peeked). They pass when the application reads them, unless the
 * head was changed (an h2c offer blanked): then they are taken too, so
 * that the application gets the changed bytes, changed again over what
 * the socket gave. Under TLS (`came`: the bytes read after the held ones,
 * into the hold buffer) they are all held already, the offer blanked in
 * place: the head is decided, and what came past it is held unread.
 */
static enum rl_held held_decided(struct rl_conn *c, int fd, size_t tail,
				 ssize_t came)
{
	struct rl_hold *h = c->hold;

	if (came > 0) {
		h->decided = h->len + (uint32_t)tail;
		h->len += (uint32_t)came;
		h->unread = (uint32_t)((size_t)came - tail);
		return RL_HELD_DECIDED;
	}
	if (c->mask_at >= 0 && (size_t)c->mask_at + sizeof(rl_frame_no_h2c) > h->len) {
		if (take(c, fd, h->data + h->len, tail) < 0) {
			rl_io_deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			return RL_HELD_DENIED;
		}
		h->len += (uint32_t)tail;
		memcpy(h->data + c->mask_at, rl_frame_no_h2c, sizeof(rl_frame_no_h2c));
	} else {
		c->skip = (uint32_t)tail;
	}
	h->decided = h->len;
	return RL_HELD_DECIDED;
}

/* A long head held unparsed (no blank line in it) that is wrong already:
 * refused now (1), not once more comes (it may never). errno is kept
 * otherwise. */
static int held_bad(struct rl_conn *c)
{
	struct rl_hold *h = c->hold;
	const char *why = NULL;
	size_t used;
	int ok, saved = errno;

	if (rl_frame_whole(c, h->data, h->len, &used, &ok, &why) == RL_WHOLE_BAD) {
		rl_io_deny(c, RL_REPLY_400, NULL, NULL, why);
		return 1;
	}
	errno = saved;
	return 0;
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
 *
 * Under TLS what came is read from the session into the hold buffer at
 * once (the session's bytes are nobody else's): one read, where a peek
 * then the application's read of the same bytes were two, through
 * libssl's record code each time. The head's tail is held decided; bytes
 * past it are held unread (h->unread), what the session gives first at
 * the application's next read; they are what came, first, when a held
 * head looks for more. The application sees the same bytes in the same
 * reads, and SSL_pending counts held bytes as libssl's own.
 */
enum rl_held rl_hold_advance(struct rl_conn *c, int fd)
{
	struct rl_hold *h = c->hold;
	struct rl_http_feed f;
	ssize_t n, came = 0;

	if (h->unread) {
		/* Read from the session before: what came. */
		n = (ssize_t)h->unread;
		h->len -= h->unread;
		h->unread = 0;
	} else {
		/* Through a BIO of the application's, the look for more may
		 * wait for the client (apache's read blocks until it sends,
		 * or for its Timeout): a long head wrong already is refused
		 * before it, or the client that sends no more waits for its
		 * 400 as long. */
		if (c->raw && c->tls_app_bio && held_bad(c))
			return RL_HELD_DENIED;
		n = rl_conn_recv(c, fd, h->data + h->len, RL_HOLD_SIZE - h->len,
				 c->ssl ? 0 : MSG_PEEK);
	}
	if (n > 0 && c->ssl)
		came = n;
	if (n == 0)
		return RL_HELD_EOF;
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		return RL_HELD_ERR;
	if (n < 0) {
		/* Nothing more yet: a long head wrong already is refused now
		 * (through an application's BIO it was just looked at). */
		if (c->raw && !c->tls_app_bio && held_bad(c))
			return RL_HELD_DENIED;
		return RL_HELD_WAIT;
	}
	if (c->raw) {
		/* Held unscanned: parse it once, whole if the rest has come
		 * (a browser's head that straddles nginx's first 1 KiB read
		 * is parsed one time, not scanned twice and parsed again). */
		const char *why = NULL;
		size_t used;
		uint8_t *p = h->data;
		enum rl_whole st;
		int ok;

		c->raw = 0;
		st = rl_frame_whole(c, p, h->len + (size_t)n, &used, &ok, &why);
		if (st == RL_WHOLE_BAD) {
			rl_io_deny(c, RL_REPLY_400, NULL, NULL, why);
			return RL_HELD_DENIED;
		}
		if (st == RL_WHOLE_TAKEN) {
			if (!ok)
				return RL_HELD_DENIED;
			if (c->state == RL_CONN_PASS) {
				h->len += (uint32_t)came;
				h->decided = h->len;
				return RL_HELD_DECIDED;
			}
			return held_decided(c, fd, used - h->len, came);
		}
		/* Not whole yet (or not valid): the scanner takes it from
		 * here, over what is held, then what came. */
		rl_http_feed(&c->http, p, h->len, &f);
		if (f.event == RL_HTTP_EV_ERROR) {
			rl_io_deny(c, RL_REPLY_400, NULL, NULL, c->http.error);
			return RL_HELD_DENIED;
		}
	}
	rl_http_feed(&c->http, h->data + h->len, (size_t)n, &f);
	switch (f.event) {
	case RL_HTTP_EV_HEAD: {
		struct iovec v = { h->data, h->len + f.used };
		struct rl_region rg = { &v, 1, h->len + f.used };

		if (!rl_frame_decide(c, &rg, 0, rg.len))
			return RL_HELD_DENIED;
		return held_decided(c, fd, f.used, came);
	}
	case RL_HTTP_EV_ERROR:
		rl_io_deny(c, RL_REPLY_400, NULL, NULL, c->http.error);
		return RL_HELD_DENIED;
	default:
		if (!came && take(c, fd, h->data + h->len, (size_t)n) < 0) {
			rl_io_deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			return RL_HELD_DENIED;
		}
		h->len += (uint32_t)n;
		return RL_HELD_MORE;
	}
}

/*
 * A PROXY header is expected: take exactly it into the hold buffer (never
 * a byte past it), strip it, key the connection by its source. Returns 1
 * when framing may go on, or what the read returns.
 */
int rl_hold_proxy_read(struct rl_conn *c, struct rl_read *r, ssize_t *ret)
{
	struct rl_hold *h = c->hold ? c->hold : rl_conn_hold(c);

	while (c->proxy) {
		struct rl_proxy_result pr;
		size_t before, want;
		ssize_t n;
		int st;

		if (!h) {
			rl_io_deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			*ret = rl_io_answer(c, r);
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
			if (rl_read_nonblocking(r) || rl_read_wait(r->fd)) {
				*ret = -1;
				return 0;
			}
			continue;
		}
		want = (size_t)n;
		if (rl_proxy_parse(h->data, before + (size_t)n, &pr) == RL_PROXY_OK)
			want = pr.len - before;
		if (take(c, r->fd, h->data + before, want) < 0) {
			rl_io_deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			*ret = rl_io_answer(c, r);
			return 0;
		}
		h->len = (uint32_t)(before + want);
		st = hold_proxy(c);
		if (st < 0) {
			*ret = rl_io_answer(c, r);
			return 0;
		}
		if (st == 0 && h->len >= RL_PROXY_MAX) {
			rl_io_deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			*ret = rl_io_answer(c, r);
			return 0;
		}
	}
	if (h) {
		h->len = h->decided = 0;
		rl_conn_unhold(c);
	}
	return 1;
}
