/* SPDX-License-Identifier: MIT */
/*
 * io_answers.c - the application's answers, framed as it writes them:
 * whose request each one answers and where its body ends. That puts the
 * reply to a pipelined denial after the answers before it, hands the
 * connection over only on the 101 or 2xx that answers its Upgrade or
 * CONNECT, counts every answer in the metrics, gives back what count_status
 * does not charge, and (headers_on = all) inserts the rate-limit fields
 * into each answer's head; and the writes are swallowed once the shim has
 * answered.
 *
 * The framing is a walk over the bytes written (walk()), a function of the
 * state in struct rl_ans and those bytes. Where fields are to be inserted,
 * the walk first runs over a copy of the state to find where (the blank
 * line ending each head), the bytes go out with the fields in place
 * (rl_io_send), and then the walk runs for real over what was written. A
 * write that stops inside inserted fields leaves the rest of them to go
 * before the application's next byte; what the application is told is
 * always a count of its own bytes.
 */
#include "io.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "io_int.h"
#include "clock.h"
#include "reply.h"

struct rl_conn *rl_io_written(int fd)
{
	struct rl_fd *e = rl_fd_peek(fd);
	struct rl_conn *conn = e ? rl_conn_of(e) : NULL;

	/* Under TLS the socket carries records (SSL_write is framed): once
	 * the shim has answered, they are swallowed with the rest. */
	if (conn && conn->ssl)
		return conn->state == RL_CONN_DONE ? conn : NULL;
	if (!conn || conn->state == RL_CONN_PASS ||
	    (conn->ans.broken && conn->state != RL_CONN_DONE &&
	     conn->pend_off == conn->pend_len))
		return NULL;
	return conn;
}

int rl_io_write(struct rl_conn *c, const struct iovec *iov, int iovcnt)
{
	(void)iov;
	(void)iovcnt;
	return c->state == RL_CONN_DONE;
}

/* ---- the walk ------------------------------------------------------------------ */

#define INS_MAX 4 /* fields inserted by one system call at most */

/* Fields to insert before the application's byte `at` (of this write). */
struct ins {
	size_t at;
	uint16_t off, len; /* in walk.text */
};

/* What a look ahead finds: where the fields go, and their text. */
struct look {
	struct ins ins[INS_MAX];
	unsigned nins;
	size_t stop;         /* it stopped before this byte (no more room) */
	size_t text_len;
	char text[INS_MAX * RL_FIELDS_MAX];
};

/* Small, set field by field: it is on the path of every answer. */
struct walk {
	struct rl_conn *c;
	struct rl_ans *a;    /* c->ans, or a copy (a look ahead) */
	int fd;
	int real;            /* the bytes went out: act on what they say */
	ssize_t base;        /* the write's offset of c->ahead->data[0] */
	struct look *look;   /* a look ahead's findings, else NULL */
};

/* The answers can no longer be told apart: a denial that waited for them
 * is answered at the next read, which the shut-down read side wakes the
 * server for. */
static void fail(struct walk *w)
{
	struct rl_conn *c = w->c;

	w->a->broken = 1;
	if (!w->real)
		return;
	c->upgrade_wait = 0;
	if (c->state == RL_CONN_DENY && c->deny_wait) {
		c->deny_wait = 0;
		shutdown(w->fd, SHUT_RD);
	}
}

/* The final answer being written, if one is, has ended. */
static void answer_ended(struct rl_ans *a)
{
	if (a->final) {
		a->answered++;
		a->final = 0;
	}
}

/* Count `n` bytes of a body with a length off; returns how many it took.
 * The answer ends with its last byte. */
static size_t answer_body(struct rl_ans *a, size_t n)
{
	if (n > a->h.remaining)
		n = (size_t)a->h.remaining;
	a->h.remaining -= n;
	if (a->h.remaining == 0) {
		a->h.phase = RL_HTTP_IDLE;
		answer_ended(a);
	}
	return n;
}

/* The answer to request `o` has its head out with `status`: count it for
 * the rules that counted the request, give back what count_status does
 * not charge. */
static void settle(struct rl_owed *o, unsigned status)
{
	struct rl_table *t = rl_io_policy()->table;
	uint64_t now, took;

	if (o->settled)
		return;
	o->settled = 1;
	now = rl_time_now_ns();
	took = now > o->t_ns ? now - o->t_ns : 0;
	for (uint64_t m = o->rules; m; m &= m - 1)
		rl_table_count_answer(t, (unsigned)__builtin_ctzll(m), status, took);
	for (unsigned i = 0; i < o->ncharge; i++)
		if (!rl_rule_charges(&o->cfg->rules[o->charge[i].rule], status))
			rl_table_give_back_ref(t, o->charge[i].id,
					       &o->charge[i].ref, 1, now);
}

/* The answer to request `o` has its head out whole: settled, and its
 * record free. */
static void answered(struct rl_conn *c, struct rl_owed *o, unsigned status)
{
	settle(o, status);
	if (o->near >= 0)
		c->fields_owed--;
	o->req = 0;
}

/* A look ahead found where the fields of request `o`'s answer go: before
 * the write's byte `at`. 0, or -1 when no more fit in this write. */
static int insert(struct walk *w, const struct rl_owed *o, size_t at)
{
	const struct rl_rule_cfg *r = &o->cfg->rules[o->near];
	struct rl_result res = { .allowed = 1, .limit = o->limit,
				 .remaining = o->remaining,
				 .reset_after_ns = o->reset_ns };
	struct look *l = w->look;
	uint64_t wall = 0;
	int n;

	if (l->nins == INS_MAX) {
		l->stop = at;
		return -1;
	}
	if (o->cfg->headers == RL_HEADERS_XRATELIMIT) {
		/* X-RateLimit-Reset is a time: the decision's, plus the
		 * reset. */
		uint64_t since = rl_time_now_ns() - o->t_ns;

		wall = rl_time_wall_ms() - since / RL_NS_PER_MS;
	}
	n = rl_reply_fields(l->text + l->text_len, RL_FIELDS_MAX, r->name, &res,
			    &r->rate, o->cfg->headers, wall);
	if (n <= 0)
		return 0; /* nothing to say (headers = none) */
	l->ins[l->nins].at = at;
	l->ins[l->nins].off = (uint16_t)l->text_len;
	l->ins[l->nins].len = (uint16_t)n;
	l->nins++;
	l->text_len += (size_t)n;
	return 0;
}

/* 1 if `status`, answering the request an Upgrade or a CONNECT was
 * allowed for, hands the connection over: 101 to the Upgrade, 2xx to the
 * CONNECT. Any other is an answer like the rest (a server that declines a
 * WebSocket). */
static int switches(enum rl_switch sw, unsigned status)
{
	return (sw == RL_SWITCH_UPGRADE && status == 101) ||
	       (sw == RL_SWITCH_CONNECT && status / 100 == 2);
}

/*
 * The answer to the request an Upgrade or a CONNECT was allowed for, with
 * `ans`: 1 if it hands the connection over (a look ahead looks no further:
 * what comes after may not be HTTP), 0 if it is an answer like the rest,
 * fields and all (a server that declines a WebSocket).
 */
static int switch_head(struct walk *w, struct rl_owed *o,
		       const struct rl_http_answer *ans)
{
	struct rl_conn *c = w->c;
	enum rl_switch sw = (enum rl_switch)c->upgrade_wait;

	if (!switches(sw, (unsigned)ans->status)) {
		if (w->real)
			c->upgrade_wait = 0;
		return 0;
	}
	if (!w->real) {
		w->a->broken = 1;
		return 1;
	}
	c->upgrade_wait = 0;
	if (o)
		answered(c, o, (unsigned)ans->status);
	if (sw == RL_SWITCH_UPGRADE) {
		c->state = RL_CONN_PASS;
		rl_http_pass(&c->http);
		if (c->hold)
			c->hold->decided = c->hold->len;
		w->a->broken = 1;
		return 1;
	}
	/* A tunnel: TLS in it passes untouched, but requests the application
	 * may still read as HTTP/1.x (a server that answers 200 and does not
	 * tunnel) are framed and counted. */
	c->http.tunnel = 1;
	fail(w);
	return 1;
}

/*
 * An answer head with `ap` is written whole; its blank line starts at the
 * write's byte `cr` (negative: in an earlier write). Whose answer is it,
 * and what follows it? A look ahead only notes where fields go. Returns
 * -1 when a look ahead must stop before it.
 */
static int head_done(struct walk *w, const struct rl_http_answer *ap, ssize_t cr)
{
	struct rl_conn *c = w->c;
	struct rl_ans *a = w->a;
	struct rl_http_answer ans = *ap;
	struct rl_owed *o;
	uint32_t k;
	int ins = a->ins;

	a->ins = 0;
	answer_ended(a); /* the one before, if it had no body */
	if (ans.status < 200 && ans.status != 101) {
		rl_http_begin_answer(&a->h, &ans, 1); /* interim: 100, 103 */
		return 0;
	}
	k = a->heads + 1;
	if (k > c->delivered) {
		fail(w); /* an answer to no request it was given */
		return 0;
	}
	o = rl_owed_find(c, k);
	if (c->upgrade_wait && k == c->switch_at && switch_head(w, o, &ans))
		return 0;
	if (ans.status == 101) {
		fail(w); /* a switch nobody was allowed: stop here */
		return 0;
	}
	if (!w->real) {
		if (o && o->near >= 0 && !ins && cr >= 0 &&
		    insert(w, o, (size_t)cr))
			return -1;
	} else if (o) {
		answered(c, o, (unsigned)ans.status);
	}
	a->heads = k;
	a->final = 1;
	rl_http_begin_answer(&a->h, &ans, o && o->head);
	if (a->h.phase == RL_HTTP_CHUNK_SIZE)
		a->h.last = 1; /* the feed stops at the body's end */
	if (a->h.phase == RL_HTTP_PASS)
		fail(w); /* to the end: no answer after it */
	return 0;
}

/* The status of the head in `h`, `len` bytes up to its blank line's CR,
 * if the walk will frame it once the LF comes (head_piece's parse), else
 * 0: fields inserted into a head it then fails would not leave that head
 * unchanged. The LF goes past the bytes any walk keeps (RL_HOLD_SIZE >
 * RL_ANSWER_HEAD_MAX). */
static unsigned head_status(struct rl_hold *h, uint32_t len)
{
	struct rl_http_answer ans;

	h->data[len] = '\n';
	if (rl_http_parse_answer(h->data, len + 1, &ans))
		return 0;
	return (unsigned)ans.status;
}

/*
 * A head in pieces whose status line is out: its status is the answer's,
 * whatever follows, so it is counted and given back now. The rest of the
 * head may never come through this process: Python's http.server writes
 * the status line, its CGI child the rest.
 */
static void status_out(struct rl_conn *c, const struct rl_ans *a,
		       const struct rl_hold *h, size_t len)
{
	struct rl_owed *o = rl_owed_find(c, a->heads + 1);
	int st;

	if (!o || o->settled || len < 14 || !memchr(h->data, '\n', len))
		return;
	st = rl_http_status_of(h->data, len);
	if (st >= 200 && st <= 599) /* interim answers (1xx) are not the
				       request's */
		settle(o, (unsigned)st);
}

/*
 * A head in pieces: bytes [pos, end) of the write (b is the segment at
 * write offset `seg_off`) go into c->ahead until the head ends. Returns
 * the bytes taken, or 0 when the walk must stop there (fail, or a look
 * ahead out of room).
 */
static size_t head_piece(struct walk *w, const uint8_t *b, size_t seg_off,
			 size_t pos, size_t end)
{
	struct rl_conn *c = w->c;
	struct rl_ans *a = w->a;
	struct rl_hold *h = rl_conn_ahead(c);
	uint32_t old = a->ahead_len;
	size_t n = end - pos, from;

	if (!h) {
		fail(w);
		return 0;
	}
	if (old == 0 && !w->real && c->ans.ahead_len) {
		/* A look ahead that ended the head the buffer holds and
		 * begins another would write over it before the walk for
		 * real reads it: this call goes up to here, the next looks
		 * on. */
		w->look->stop = pos;
		return 0;
	}
	if (old == 0)
		w->base = (ssize_t)pos;
	if (n > RL_ANSWER_HEAD_MAX - old)
		n = RL_ANSWER_HEAD_MAX - old;
	memcpy(h->data + old, b + (pos - seg_off), n);
	from = old > 3 ? old - 3 : 0;
	for (size_t i = from; i + 4 <= old + n; i++) {
		struct rl_http_answer ans;
		size_t e = i + 4;

		if (memcmp(h->data + i, "\r\n\r\n", 4) != 0)
			continue;
		if (rl_http_parse_answer(h->data, e, &ans)) {
			fail(w);
			return 0;
		}
		a->ahead_len = 0;
		if (head_done(w, &ans, w->base + (ssize_t)e - 2))
			return 0;
		return e - old;
	}
	if (w->real)
		status_out(c, a, h, old + n);
	if (old + n >= RL_ANSWER_HEAD_MAX) {
		fail(w); /* too long to frame: it and all after pass */
		return 0;
	}
	a->ahead_len = old + (uint32_t)n;
	/* The blank line has begun (its CR is this write's last byte): the
	 * fields go before it, now. */
	if (!w->real && !a->ins && a->ahead_len >= 3 &&
	    h->data[a->ahead_len - 1] == '\r' && h->data[a->ahead_len - 2] == '\n') {
		unsigned st = head_status(h, a->ahead_len);
		struct rl_owed *o = rl_owed_find(c, a->heads + 1);

		if (st >= 200 && o && o->near >= 0 &&
		    !(c->upgrade_wait && a->heads + 1 == c->switch_at &&
		      switches((enum rl_switch)c->upgrade_wait, st))) {
			if (insert(w, o, end - 1))
				return 0;
			a->ins = 1; /* not again when the head ends */
		}
	}
	return n;
}

/* Walk the first `n` bytes of `iov`, from the write's byte `from` (what
 * came before it walked already: quick_head). */
static void walk(struct walk *w, const struct iovec *iov, int iovcnt, size_t n,
		 size_t from)
{
	struct rl_ans *a = w->a;
	size_t pos = from, seg_off = 0;

	w->base = -(ssize_t)a->ahead_len;
	for (int seg = 0; seg < iovcnt && pos < n && !a->broken; seg++) {
		const uint8_t *b = (const uint8_t *)iov[seg].iov_base;
		size_t end = seg_off + iov[seg].iov_len;

		if (end > n)
			end = n;
		while (pos < end && !a->broken) {
			struct rl_http_answer ans;
			struct rl_http_feed f;
			size_t used;
			int rc;

			switch (a->h.phase) {
			case RL_HTTP_BODY:
				pos += answer_body(a, end - pos);
				continue;
			case RL_HTTP_IDLE:
				break;
			default: /* a chunked body, to its end (h.last) */
				rl_http_feed(&a->h, b + (pos - seg_off), end - pos, &f);
				pos += f.used;
				if (f.event != RL_HTTP_EV_NONE &&
				    f.event != RL_HTTP_EV_DONE) {
					fail(w);
				} else if (a->h.phase == RL_HTTP_DONE) {
					/* its last byte, here or at the end */
					a->h.phase = RL_HTTP_IDLE;
					answer_ended(a);
				}
				continue;
			}
			if (a->ahead_len == 0) {
				/* A head whole in this buffer: one pass. Only
				 * as far as a head may go: a longer one is
				 * not framed here either (head_piece). */
				size_t max = end - pos < RL_ANSWER_HEAD_MAX ?
					     end - pos : RL_ANSWER_HEAD_MAX;

				rc = rl_http_answer_prefix(b + (pos - seg_off),
							   max, &ans, &used);
				if (rc == 0) {
					if (head_done(w, &ans, (ssize_t)(pos + used - 2)))
						return;
					pos += used;
					continue;
				}
				if (rc == -EINVAL) {
					fail(w);
					return;
				}
			}
			used = head_piece(w, b, seg_off, pos, end);
			if (!used)
				return;
			pos += used;
		}
		seg_off += iov[seg].iov_len;
	}
}

/* After a write: the reply to a denial goes once the answers it follows
 * are out. */
static void answers_out(struct rl_conn *c, int fd)
{
	if (c->state == RL_CONN_DENY && c->deny_wait && c->ans.answered >= c->owed)
		rl_io_reply(c, fd);
}

/* A walk over `c`'s answers as they are (real) or over a copy `a`. */
static void walk_init(struct walk *w, struct rl_conn *c, struct rl_ans *a,
		      int fd, struct look *look)
{
	w->c = c;
	w->a = a;
	w->fd = fd;
	w->real = !look;
	w->base = 0;
	w->look = look;
}

/*
 * The common answer, ahead of the walk: at an answer boundary, its head
 * whole in the write's first buffer with a final status (not 101), the
 * request it answers given to the application, no Upgrade or CONNECT
 * waiting on it. What head_done() does for it, without the walk's
 * generality; then the body that follows, when the rest of the write is
 * all body. Returns the write's byte the walk goes on from: 0 when it is
 * not that answer (the walk reads it as before), n when nothing is left.
 */
static size_t quick_head(struct walk *w, const struct iovec *iov, size_t n)
{
	struct rl_conn *c = w->c;
	struct rl_ans *a = &c->ans;
	struct rl_http_answer ans;
	struct rl_owed *o;
	size_t len = iov[0].iov_len < n ? iov[0].iov_len : n, used;
	uint32_t k = a->heads + 1;

	if (a->h.phase != RL_HTTP_IDLE || a->ahead_len || a->ins ||
	    c->upgrade_wait || k > c->delivered || len < 14)
		return 0;
	if (c->http.phase == RL_HTTP_DONE && k == c->delivered &&
	    c->state == RL_CONN_HTTP && !c->owed_more) {
		/* The answer to the last request the connection frames
		 * (Connection: close, HTTP/1.0): nothing comes after it
		 * whose place depends on where it ends, so only its status
		 * is read, from its first bytes, as for a head written in
		 * pieces (status_out), unless fields go into it. Its bytes
		 * and whatever the application writes after them pass as
		 * written. */
		int st = rl_http_status_of(iov[0].iov_base, len);

		o = rl_owed_find(c, k);
		if (st >= 200 && st <= 599 && (!o || o->near < 0)) {
			answer_ended(a);
			if (o)
				answered(c, o, (unsigned)st);
			a->heads = k;
			fail(w);
			return n;
		}
	}
	if (len > RL_ANSWER_HEAD_MAX)
		len = RL_ANSWER_HEAD_MAX;
	if (rl_http_answer_prefix(iov[0].iov_base, len, &ans, &used) ||
	    ans.status < 200 || ans.status == 101)
		return 0;
	answer_ended(a); /* the one before, if it had no body */
	o = rl_owed_find(c, k);
	if (o)
		answered(c, o, (unsigned)ans.status);
	a->heads = k;
	a->final = 1;
	rl_http_begin_answer(&a->h, &ans, o && o->head);
	switch (a->h.phase) {
	case RL_HTTP_BODY:
		/* The rest of the write within the body: counted off it, as
		 * the walk would segment by segment. */
		if (n - used <= a->h.remaining) {
			answer_body(a, n - used);
			return n;
		}
		break;
	case RL_HTTP_CHUNK_SIZE:
		a->h.last = 1; /* the feed stops at the body's end */
		break;
	case RL_HTTP_PASS:
		fail(w); /* to the end: no answer after it */
		return n;
	}
	return used;
}

void rl_io_wrote(struct rl_conn *c, int fd, const struct iovec *iov, int iovcnt,
		 size_t n)
{
	struct walk w;
	size_t from = 0;

	if (c->ans.broken || c->state == RL_CONN_PASS || c->state == RL_CONN_DONE)
		return;
	walk_init(&w, c, &c->ans, fd, NULL);
	if (iovcnt > 0)
		from = quick_head(&w, iov, n);
	if (from < n)
		walk(&w, iov, iovcnt, n, from);
	if (c->ans.broken)
		return;
	if (c->ans.h.phase == RL_HTTP_IDLE && !c->ans.ahead_len)
		answer_ended(&c->ans); /* a chunked one, or one with no body */
	if (!c->ans.ahead_len)
		rl_conn_unahead(c);
	if (c->owed_more && c->ans.heads == c->delivered)
		rl_owed_done(c); /* the long pipeline is answered */
	answers_out(c, fd);
}

void rl_io_wrote_file(struct rl_conn *c, int fd, size_t n)
{
	if (c->ans.broken || c->state == RL_CONN_PASS || c->state == RL_CONN_DONE)
		return;
	/* A file's bytes can only be a body with a length. */
	if (c->ans.h.phase != RL_HTTP_BODY || c->ans.h.remaining < n) {
		struct walk w;

		walk_init(&w, c, &c->ans, fd, NULL);
		fail(&w);
		return;
	}
	answer_body(&c->ans, n);
	answers_out(c, fd);
}

/* ---- writes with fields inserted ------------------------------------------------ */

#define SEND_IOV 64 /* iovecs of one system call */

int rl_io_inserting(const struct rl_conn *c)
{
	return c->pend_off < c->pend_len ||
	       (c->fields_owed && !c->ans.broken && c->state != RL_CONN_DONE);
}

/* iov from byte `skip` on, at most `max` entries, into `out`: how many. */
static int iov_from(const struct iovec *iov, int cnt, size_t skip,
		    struct iovec *out, int max, size_t *len)
{
	int n = 0;

	*len = 0;
	for (int i = 0; i < cnt && n < max; i++) {
		size_t l = iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		out[n].iov_base = (char *)iov[i].iov_base + skip;
		out[n].iov_len = l - skip;
		*len += l - skip;
		skip = 0;
		n++;
	}
	return n;
}

/* Lay out `view` (its first `len` bytes) with the insertions of `w` in
 * place (`w`, the look ahead's), after `npend` bytes still owed from
 * before. */
static int lay_out(const struct look *w, const struct iovec *view, int vcnt,
		   size_t len, const char *pend, size_t npend, struct iovec *out)
{
	size_t at = 0;
	unsigned j = 0;
	int n = 0;

	if (npend)
		out[n++] = (struct iovec){ (void *)pend, npend };
	for (int i = 0; i < vcnt && at < len; i++) {
		char *p = view[i].iov_base;
		size_t l = view[i].iov_len < len - at ? view[i].iov_len : len - at;
		size_t s = 0;

		for (; j < w->nins && w->ins[j].at < at + l; j++) {
			size_t cut = w->ins[j].at - at;

			if (cut > s)
				out[n++] = (struct iovec){ p + s, cut - s };
			s = cut;
			out[n++] = (struct iovec){ (void *)(w->text + w->ins[j].off),
						   w->ins[j].len };
		}
		if (l > s)
			out[n++] = (struct iovec){ p + s, l - s };
		at += l;
	}
	return n;
}

/*
 * Of `r` bytes out, after `npend` owed ones: how many were the
 * application's (*app), and where the stop fell: inside insertion *in
 * (then *in_off of it went), or -1.
 */
static size_t mapped(const struct look *w, size_t r, size_t npend, int *in,
		     size_t *in_off)
{
	size_t app = 0;

	*in = -1;
	if (r < npend)
		return 0;
	r -= npend;
	for (unsigned j = 0; j < w->nins; j++) {
		size_t before = w->ins[j].at - app;

		if (r <= before)
			return app + r;
		app += before;
		r -= before;
		if (r <= w->ins[j].len) {
			/* inside it, or right after it (the application's
			 * next byte not written) */
			*in = (int)j;
			*in_off = r;
			return app;
		}
		r -= w->ins[j].len;
	}
	return app + r;
}

ssize_t rl_io_send(struct rl_conn *c, int fd, const struct iovec *iov,
		   int iovcnt, int flags, const struct msghdr *app_msg)
{
	size_t total = rl_iov_total(iov, iovcnt), done = 0;
	int saved = errno, first = 1;

	for (;;) {
		struct walk w;
		struct look lk;
		struct rl_ans look = c->ans;
		struct iovec view[SEND_IOV / 2 - INS_MAX], out[SEND_IOV];
		struct msghdr m = { 0 };
		size_t len, npend = (size_t)(c->pend_len - c->pend_off), app,
			   in_off = 0;
		int vcnt = iov_from(iov, iovcnt, done, view,
				    (int)(sizeof(view) / sizeof(view[0])), &len);
		ssize_t r;
		int in;

		/* Where the fields go in this piece. */
		lk.nins = 0;
		lk.stop = SIZE_MAX;
		lk.text_len = 0;
		walk_init(&w, c, &look, fd, &lk);
		if (!c->ans.broken && c->state != RL_CONN_DONE)
			walk(&w, view, vcnt, len, 0);
		if (lk.stop < len)
			len = lk.stop;
		m.msg_iov = out;
		m.msg_iovlen = (size_t)lay_out(&lk, view, vcnt, len,
					       c->pend + c->pend_off, npend, out);
		if (first && app_msg) {
			m.msg_control = app_msg->msg_control;
			m.msg_controllen = app_msg->msg_controllen;
		}
		r = rl_io.sys.sendmsg(fd, &m, flags);
		if (r < 0) {
			if (!done)
				return -1;
			errno = saved;
			return (ssize_t)done;
		}
		first = 0;
		app = mapped(&lk, (size_t)r, npend, &in, &in_off);
		c->pend_off += (uint16_t)((size_t)r < npend ? (size_t)r : npend);
		if (c->pend_off == c->pend_len)
			c->pend_off = c->pend_len = 0;
		if (app)
			rl_io_wrote(c, fd, view, vcnt, app);
		if (in >= 0) {
			/* Stopped at fields of a head whose blank line is the
			 * application's next byte: the rest of them first. */
			const struct ins *x = &lk.ins[in];

			c->pend_len = (uint16_t)(x->len - in_off);
			c->pend_off = 0;
			memcpy(c->pend, lk.text + x->off + in_off, c->pend_len);
			c->ans.ins = 1;
		}
		done += app;
		if (done == total || c->state == RL_CONN_DONE) {
			/* All of it; or the shim has answered a denial that
			 * waited for these answers, and swallows the rest. */
			errno = saved;
			return (ssize_t)total;
		}
		if ((size_t)r < npend + len + lk.text_len && done) {
			errno = saved;
			return (ssize_t)done; /* a short write */
		}
		/* All of it went (another piece), or only owed fields did: go
		 * on, a blocking socket blocks as the application's call
		 * would, another says EAGAIN. */
	}
}

/*
 * Over TLS (rl_io_tls_send): the same fields, each piece its own SSL_write.
 * libssl's writes are all or nothing (a server such as apache's mod_ssl
 * takes a short one for an error), so the application is told all of its
 * bytes or "would block"; what of its call went already is remembered
 * (tls_wdone), and its retry of the same call, which libssl requires,
 * goes on from there with the very piece libssl holds: the same bytes of
 * its buffer, or the owed fields in c->pend.
 */
ssize_t rl_io_tls_send(struct rl_conn *c, int fd, const void *buf, size_t len)
{
	const char *app = buf;

	if (c->tls_wlen != len)
		c->tls_wdone = 0; /* another call than the one retried */
	c->tls_wlen = len;
	for (;;) {
		struct walk w;
		struct look lk;
		struct rl_ans look = c->ans;
		struct iovec view;
		size_t piece;
		ssize_t r;

		if (c->pend_off < c->pend_len) {
			r = rl_conn_send(c, fd, c->pend + c->pend_off,
					 (size_t)(c->pend_len - c->pend_off));
			if (r <= 0)
				return r;
			c->pend_off += (uint16_t)r;
			if (c->pend_off == c->pend_len)
				c->pend_off = c->pend_len = 0;
			continue;
		}
		if (c->tls_wdone >= len || c->state == RL_CONN_DONE) {
			/* All of it; or the shim answered a denial that waited
			 * for these answers, and swallows the rest. */
			c->tls_wdone = 0;
			c->tls_wlen = 0;
			return (ssize_t)len;
		}
		view.iov_base = (void *)(app + c->tls_wdone);
		view.iov_len = len - c->tls_wdone;
		lk.nins = 0;
		lk.stop = SIZE_MAX;
		lk.text_len = 0;
		walk_init(&w, c, &look, fd, &lk);
		if (!c->ans.broken)
			walk(&w, &view, 1, view.iov_len, 0);
		piece = view.iov_len;
		if (lk.stop < piece)
			piece = lk.stop;
		if (lk.nins && lk.ins[0].at < piece)
			piece = lk.ins[0].at;
		else if (!piece)
			piece = view.iov_len; /* never stuck: the rest as it is */
		if (piece) {
			r = rl_conn_send(c, fd, view.iov_base, piece);
			if (r <= 0)
				return r;
			view.iov_len = (size_t)r;
			rl_io_wrote(c, fd, &view, 1, (size_t)r);
			c->tls_wdone += (size_t)r;
			if ((size_t)r < piece)
				continue; /* libssl's partial write mode */
		}
		if (lk.nins && lk.ins[0].at == piece) {
			/* The fields, before the application's next byte. */
			c->pend_len = lk.ins[0].len;
			c->pend_off = 0;
			memcpy(c->pend, lk.text + lk.ins[0].off, c->pend_len);
			c->ans.ins = 1;
		}
	}
}

