/* SPDX-License-Identifier: MIT */
/*
 * io_frame.c - framing what was read: each request head in a region of
 * bytes parsed, decided by the policy and counted, the region cut where
 * the application must stop (a denial, a head not complete yet).
 */
#include "io.h"

#include <errno.h>
#include <string.h>

#include "io_int.h"
#include "reply.h"
#include "shim.h"
#include "clock.h"

/* A method, whatever its letter case. */
static int method_is(const char *m, const char *want)
{
	size_t n = strlen(want);

	return rl_http_name_eq(m, strlen(m), want, n);
}

/*
 * Remember what the answer to the request just delivered needs: a HEAD's
 * answer has no body; headers_on = all puts fields in it; count_status
 * gives back what its status does not list; the metrics count it per rule
 * with its service time. With no room left (RL_OWED in the connection,
 * RL_OWED_MORE in a hold buffer a long pipeline takes):
 * a HEAD then stops the following of answers (its answer could not be
 * told from the next), any other request's answer goes as written.
 */
static void owe(struct rl_conn *c, const struct rl_http_req *req,
		const struct rl_verdict *v, uint64_t now)
{
	struct rl_owed *o;

	if (c->ans.broken)
		return;
	o = rl_owed_new(c, c->delivered, c->ans.heads);
	if (!o) {
		if (req->head)
			c->ans.broken = 1;
		return;
	}
	o->req = c->delivered;
	o->head = (uint8_t)req->head;
	o->rules = v->counted;
	o->t_ns = now;
	o->cfg = v->cfg;
	o->near = (int8_t)v->near;
	if (v->near >= 0) {
		o->limit = v->near_res.limit;
		o->remaining = v->near_res.remaining;
		o->reset_ns = v->near_res.reset_after_ns;
		c->fields_owed++;
	}
	o->ncharge = (uint8_t)v->ncharge;
	o->settled = 0;
	for (unsigned i = 0; i < v->ncharge; i++)
		o->charge[i] = v->charge[i];
}

/* Decide a parsed request, its head head[0..hlen). Returns 1 if
 * allowed. */
static int decide_req(struct rl_conn *c, const struct rl_policy *pol,
		      const uint8_t *head, size_t hlen,
		      const struct rl_http_req *req, uint64_t now)
{
	struct rl_verdict v;

	if (req->preface) {
		/* HTTP/2 with prior knowledge: its streams are not framed
		 * here, so it is refused the HTTP/2 way (a client retries
		 * over HTTP/1.1), never passed uncounted. */
		rl_io_deny(c, RL_REPLY_H2, NULL, req, "HTTP/2 is not served here");
		return 0;
	}
	if ((req->chunked || req->content_length > 0) &&
	    pol->cfg->get_body == RL_GET_BODY_REFUSE &&
	    (method_is(req->method, "GET") || req->head)) {
		/* A server that never reads such a body would take it for
		 * the next request, which nobody counted. */
		rl_io_deny(c, RL_REPLY_400, NULL, req, "GET or HEAD with a body");
		return 0;
	}
	if (rl_policy_request_peer(pol, &c->peer, req, now, &v)) {
		rl_io_deny(c, RL_REPLY_400, NULL, req, "ambiguous key header");
		return 0;
	}
	if (!v.allowed) {
		rl_io_deny(c, RL_REPLY_429, &v, req, NULL);
		/* the body a browser can read, for this denial only */
		c->reply_html = (uint8_t)rl_reply_prefers_html(head, hlen);
		return 0;
	}
	rl_http_begin_body(&c->http, req);
	c->delivered++;
	owe(c, req, &v, now);
	/* Only the application's answer to this very request can hand the
	 * connection to another protocol: 101 to an Upgrade, 2xx to a
	 * CONNECT (rl_io_wrote() counts the answers). Where the answers are
	 * not framed, nothing is handed over. */
	if (!c->ans.broken && (req->connect || (req->upgrade && !req->h2c_at))) {
		c->upgrade_wait = req->connect ? RL_SWITCH_CONNECT
					       : RL_SWITCH_UPGRADE;
		c->switch_at = c->delivered;
	}
	return 1;
}

/* The bytes that stand for an h2c offer the server is not to see. */
const char rl_frame_no_h2c[3] = { ' ', ' ', ' ' };

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
int rl_frame_decide(struct rl_conn *c, const struct rl_region *rg, size_t hs,
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
			rl_io_deny(c, RL_REPLY_NONE, NULL, NULL, NULL);
			return 0;
		}
		rl_iov_gather(rg->iov, rg->cnt, hs, h->data, he - hs);
		head = h->data;
	}
	now = rl_read_clock();
	rl_shim_tick(now);
	pol = rl_io_policy();
	if (rl_http_parse_head(head, he - hs, &pol->want, &req)) {
		rl_io_deny(c, RL_REPLY_400, NULL, &req, req.error);
		return 0;
	}
	ok = decide_req(c, pol, head, he - hs, &req, now);
	if (ok && req.h2c_at) {
		c->mask_at = (int32_t)(hs + req.h2c_at);
		rl_iov_put(rg->iov, rg->cnt, hs + req.h2c_at, rl_frame_no_h2c, 3);
	}
	return ok;
}

/*
 * The common case, in one pass: at a request boundary, with the rest of
 * the read in one buffer, parse the head where it stands.
 */
enum rl_whole rl_frame_whole(struct rl_conn *c, uint8_t *p, size_t len,
			     size_t *used, int *allowed, const char **why)
{
	const struct rl_policy *pol;
	struct rl_http_req req;
	uint64_t now;
	int rc;

	if (len == 0 || c->http.phase != RL_HTTP_IDLE || c->http.cr ||
	    (rl_http_tls_may_start(&c->http) && p[0] == 0x16))
		return RL_WHOLE_NOT;
	now = rl_read_clock();
	rl_shim_tick(now);
	pol = rl_io_policy();
	rc = rl_http_parse_prefix(p, len, &pol->want, &req, used);
	if (rc == -EINVAL && rl_http_is_token(p[0])) {
		/* A head already wrong, complete or not: 400 now, not once
		 * the rest has come (it may never). */
		*why = req.error;
		return RL_WHOLE_BAD;
	}
	if (rc)
		return rc == -EAGAIN ? RL_WHOLE_MORE : RL_WHOLE_NOT;
	rl_http_took_head(&c->http);
	*allowed = decide_req(c, pol, p, *used, &req, now);
	c->mask_at = -1;
	if (*allowed && req.h2c_at) {
		memcpy(p + req.h2c_at, rl_frame_no_h2c, 3);
		c->mask_at = (int32_t)req.h2c_at;
	}
	return RL_WHOLE_TAKEN;
}

/* A head at [start, end) decided: the application may have the region up
 * to its end if it was allowed, only up to its start if not. Returns
 * `allowed`. */
static int decided(struct rl_outcome *out, int allowed, size_t start,
		   size_t end)
{
	out->deliver = allowed ? end : start;
	return allowed;
}

/*
 * Frame rg[from, len): first what is left of a head decided before
 * (c->skip), then request by request. Sets c->state to DENY or PASS as
 * decided. out->deliver is how much of the region the application may
 * have; out->partial where a head that is not complete yet starts, or -1.
 */
__attribute__((noinline)) void rl_frame_region(struct rl_conn *c,
					       const struct rl_region *rg,
					       size_t from,
					       struct rl_outcome *out)
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
		int ok;

		if (end > rg->len)
			end = rg->len;
		if (pos >= end) {
			seg_off += rg->iov[seg].iov_len;
			seg++;
			continue;
		}
		if (head_start < 0 && c->http.phase == RL_HTTP_IDLE) {
			const char *why = NULL;
			size_t used;
			uint8_t *p = (uint8_t *)rg->iov[seg].iov_base + (pos - seg_off);
			/* the rest of the read, small enough to hold */
			int tail = end == rg->len && end - pos <= RL_HEAD_MAX;
			enum rl_whole st;

			/* A long read that ends inside a head: held unparsed,
			 * parsed once whole (the hold finds it bad or not). */
			if (tail && end - pos >= RL_WHOLE_LOOK && !c->http.cr &&
			    rl_http_is_token(p[0]) && !rl_http_may_end(p, end - pos))
				st = RL_WHOLE_MORE;
			else
				st = rl_frame_whole(c, p, end - pos, &used, &ok, &why);

			if (st == RL_WHOLE_BAD) {
				out->deliver = pos;
				rl_io_deny(c, RL_REPLY_400, NULL, NULL, why);
				return;
			}
			if (st == RL_WHOLE_MORE && tail) {
				/* A head that is valid so far runs to the end:
				 * held unscanned, to be parsed once whole. A
				 * longer one is too large already (the parse
				 * looked at RL_HEAD_MAX of it), and more than
				 * a hold buffer holds: the scanner says so. */
				c->raw = 1;
				out->partial = (ssize_t)pos;
				return;
			}
			if (st == RL_WHOLE_TAKEN) {
				if (!decided(out, ok, pos, pos + used))
					return;
				pos += used;
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
			ok = rl_frame_decide(c, rg, (size_t)head_start, pos);
			if (!decided(out, ok, (size_t)head_start, pos))
				return;
			head_start = -1;
			continue;
		case RL_HTTP_EV_DONE:
			/* The last request the application will answer has
			 * ended: nothing after it is delivered or counted. */
			out->deliver = pos;
			return;
		case RL_HTTP_EV_PASS:
			c->state = RL_CONN_PASS;
			out->deliver = rg->len;
			if (c->http.requests == 0 && !c->tls_seen) {
				c->tls_seen = 1;
				rl_io_tls_seen();
			}
			return;
		case RL_HTTP_EV_ERROR:
			/* A bad head never reaches the application; a bad
			 * body does up to the bad byte, and its request will
			 * never be answered: the reply cannot wait for it. */
			if (head_start < 0) {
				out->deliver = pos;
				c->reply_now = c->http.in_body;
			}
			rl_io_deny(c, RL_REPLY_400, NULL, NULL, c->http.error);
			return;
		}
	}
	if (head_start >= 0)
		out->partial = head_start;
}
