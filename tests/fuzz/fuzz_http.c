/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http.c - libFuzzer target for the framer and the PROXY parser.
 *
 * The first byte picks chunk sizes; the rest is the stream. The stream is
 * framed whole and then in those chunks, the way the shim keeps heads
 * contiguous; the two must agree on every event and offset (a split that
 * frames differently is a way past the limiter). Every complete head is
 * parsed. Sanitizers catch any read past a length.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "proxy.h"
#include "../framer.h"

#define MAX_EV 64

struct trace {
	int n;
	size_t at[MAX_EV];
	int ev[MAX_EV];
	int parsed[MAX_EV];
};

static const struct rl_http_want want = {
	2, { "X-Forwarded-For", "X-Api-Key" }, { 15, 9 }, 1
};

struct run {
	const uint8_t *s;
	size_t len;
	const uint8_t *sizes;
	size_t nsizes;
	struct trace *t;
	/* the shim's one-pass parse, tried before the feed */
	struct rl_http_req fast;
	size_t fast_used;
	int fast_rc;
};

static size_t piece(void *arg, size_t k)
{
	const struct run *r = arg;

	return r->nsizes ? (size_t)(r->sizes[k % r->nsizes] % 17) + 1 : r->len;
}

/* The shim's one-pass parse, tried where it would be: at a request
 * boundary, over all the bytes that follow. */
static void before(void *arg, const struct rl_http *h, size_t at)
{
	struct run *r = arg;

	r->fast_rc = -1;
	r->fast_used = 0;
	if (!r->nsizes && h->phase == RL_HTTP_IDLE && !h->cr)
		r->fast_rc = rl_http_parse_prefix(r->s + at, r->len - at, &want,
						  &r->fast, &r->fast_used);
}

static int event(void *arg, const struct rl_http *h, int ev, size_t at,
		 size_t head_start, int rc, const struct rl_http_req *req)
{
	struct run *r = arg;
	struct trace *t = r->t;
	const struct rl_http_req *fast = &r->fast;

	(void)h;
	t->at[t->n] = at;
	t->ev[t->n] = ev;
	if (ev == RL_HTTP_EV_HEAD) {
		t->parsed[t->n] = rc;
		if (rc == 0 && (req->path_len >= sizeof(req->path) ||
				req->path[req->path_len] != '\0'))
			abort();
	}
	/* What the one pass took must be exactly what the two passes take:
	 * the same head, the same request. */
	if (r->fast_rc == 0 &&
	    (ev != RL_HTTP_EV_HEAD || t->parsed[t->n] != 0 ||
	     head_start + r->fast_used != at ||
	     strcmp(fast->method, req->method) ||
	     strcmp(fast->path, req->path) ||
	     fast->http10 != req->http10 || fast->head != req->head ||
	     fast->chunked != req->chunked ||
	     fast->has_length != req->has_length ||
	     fast->content_length != req->content_length ||
	     fast->upgrade != req->upgrade ||
	     fast->connect != req->connect ||
	     fast->preface != req->preface ||
	     fast->last != req->last || fast->h2c_at != req->h2c_at ||
	     memcmp(fast->nvalues, req->nvalues, sizeof(req->nvalues))))
		abort();
	t->n++;
	return ev != RL_HTTP_EV_HEAD || t->parsed[t->n - 1] || t->n == MAX_EV;
}

static void frame(const uint8_t *s, size_t len, const uint8_t *sizes,
		  size_t nsizes, struct trace *t)
{
	struct run r = { .s = s, .len = len, .sizes = sizes, .nsizes = nsizes,
			 .t = t, .fast_rc = -1 };
	struct framer fr = { piece, before, event, &want, &r };

	memset(t, 0, sizeof(*t));
	framer_run(s, len, &fr);
}

/* The same bytes as an answer: a head the one pass takes is where the
 * scanner ends it, and framed the same as by the full parse. */
static void answers(const uint8_t *s, size_t len)
{
	struct rl_http_answer a, b;
	struct rl_http_feed f;
	struct rl_http h;
	size_t used = 0;

	if (rl_http_answer_prefix(s, len, &a, &used))
		return;
	if (used > len || used > RL_HEAD_MAX)
		return;
	rl_http_init(&h);
	rl_http_feed(&h, s, len, &f);
	if (f.event != RL_HTTP_EV_HEAD || f.used != used)
		abort();
	if (rl_http_parse_answer(s, used, &b) == 0 &&
	    (a.status != b.status || a.chunked != b.chunked ||
	     a.has_length != b.has_length || a.length != b.length))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace whole, split;
	struct rl_proxy_result pr;
	uint8_t seed;

	if (size < 1)
		return 0;
	seed = data[0];
	data++;
	size--;
	frame(data, size, NULL, 0, &whole);
	frame(data, size, &seed, 1, &split);
	if (whole.n != split.n)
		abort();
	for (int i = 0; i < whole.n; i++)
		if (whole.at[i] != split.at[i] || whole.ev[i] != split.ev[i] ||
		    whole.parsed[i] != split.parsed[i])
			abort();
	rl_proxy_parse(data, size, &pr);
	answers(data, size);
	/* The look for a blank line before a long head is parsed (AVX2 or
	 * SSE2 blocks): exactly whether CR LF CR LF is anywhere in it. */
	if (rl_http_may_end(data, size) !=
	    (memmem(data, size, "\r\n\r\n", 4) != NULL))
		abort();
	{
		/* A head refused before it is whole must be wrong already:
		 * every prefix of one that parses is "more". */
		struct rl_http_req req;
		size_t used = 0, u2;

		if (rl_http_parse_prefix(data, size, &want, &req, &used) == 0)
			for (size_t cut = used > 600 ? used - 600 : 1; cut < used; cut++)
				if (rl_http_parse_prefix(data, cut, &want, &req, &u2) !=
				    -EAGAIN)
					abort();
	}
	return 0;
}
