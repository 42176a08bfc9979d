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

static void frame(const uint8_t *s, size_t len, const uint8_t *sizes,
		  size_t nsizes, struct trace *t)
{
	struct rl_http h;
	size_t off = 0, head_start = 0, k = 0;

	memset(t, 0, sizeof(*t));
	rl_http_init(&h);
	while (off < len && t->n < MAX_EV) {
		size_t n = nsizes ? (size_t)(sizes[k++ % nsizes] % 17) + 1 : len;
		size_t pos = 0;

		if (n > len - off)
			n = len - off;
		while (pos < n && t->n < MAX_EV) {
			struct rl_http_feed f;
			struct rl_http_req req;
			struct rl_http_req fast;
			size_t fast_used = 0;
			int fast_rc = -1;

			/* The shim's one-pass parse, tried where it would be: at
			 * a request boundary, over all the bytes that follow. */
			if (!nsizes && h.phase == RL_HTTP_IDLE && !h.cr)
				fast_rc = rl_http_parse_prefix(s + off + pos,
							       len - off - pos,
							       &want, &fast,
							       &fast_used);
			rl_http_feed(&h, s + off + pos, n - pos, &f);
			if (f.head_begin >= 0)
				head_start = off + pos + (size_t)f.head_begin;
			if (f.used > n - pos)
				abort(); /* consumed more than given */
			pos += f.used;
			if (f.event == RL_HTTP_EV_NONE)
				continue;
			t->at[t->n] = off + pos;
			t->ev[t->n] = f.event;
			if (f.event == RL_HTTP_EV_HEAD) {
				t->parsed[t->n] = rl_http_parse_head(
					s + head_start, off + pos - head_start,
					&want, &req);
				if (t->parsed[t->n] == 0) {
					if (req.path_len >= sizeof(req.path) ||
					    req.path[req.path_len] != '\0')
						abort();
					rl_http_begin_body(&h, &req);
				}
			}
			/* What the one pass took must be exactly what the two
			 * passes take: the same head, the same request. */
			if (fast_rc == 0 &&
			    (f.event != RL_HTTP_EV_HEAD || t->parsed[t->n] != 0 ||
			     head_start + fast_used != off + pos ||
			     strcmp(fast.method, req.method) ||
			     strcmp(fast.path, req.path) ||
			     fast.http10 != req.http10 || fast.head != req.head ||
			     fast.chunked != req.chunked ||
			     fast.has_length != req.has_length ||
			     fast.content_length != req.content_length ||
			     fast.upgrade != req.upgrade ||
			     fast.connect != req.connect ||
			     fast.preface != req.preface ||
			     fast.last != req.last || fast.h2c_at != req.h2c_at ||
			     memcmp(fast.nvalues, req.nvalues, sizeof(req.nvalues))))
				abort();
			t->n++;
			if (f.event != RL_HTTP_EV_HEAD || t->parsed[t->n - 1])
				return;
		}
		off += n;
	}
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
