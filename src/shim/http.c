/* SPDX-License-Identifier: MIT */
/*
 * http.c - the request framer (RFC 9112): the scanner that walks any
 * split of a connection's stream, skips bodies and stops at the end of
 * each request head, strict where leniency could let a request past the
 * shim uncounted.
 *
 * The scanner keeps a few bytes of state so that any split of the stream,
 * down to one byte per call, frames exactly as the whole would. Heads are
 * only delimited by the scanner; the caller keeps each head contiguous and
 * hands it to rl_http_parse_head() (http_head.c) once complete. A chunked
 * body's grammar is http_chunk.c's, the fields' http_field.c's, the
 * answers' http_answer.c's.
 */
#include "http.h"

#include <errno.h>
#include <string.h>

#include "http_int.h"

void rl_http_init(struct rl_http *h)
{
	memset(h, 0, sizeof(*h));
}

static void fail(struct rl_http *h, struct rl_http_feed *out, size_t at,
		 const char *why)
{
	h->in_body = h->phase >= RL_HTTP_BODY && h->phase <= RL_HTTP_TRAILER;
	h->phase = RL_HTTP_ERROR;
	h->error = why;
	out->used = at;
	out->event = RL_HTTP_EV_ERROR;
}

enum lines { LINES_MORE, LINES_END, LINES_BAD };

/*
 * Lines of a head or a trailer section, from p[*i]: every LF must follow a
 * CR, and an empty line ends the section. Advances *i past what it consumed
 * (past the empty line on LINES_END). On LINES_BAD, *i is the offending
 * byte, the same wherever the stream was split, and h->error says why.
 */
static enum lines scan_lines(struct rl_http *h, const uint8_t *p, size_t *i,
			     size_t len, uint32_t max)
{
	size_t at = *i;

	while (at < len) {
		const uint8_t *q = memchr(p + at, '\n', len - at);
		size_t j = q ? (size_t)(q - p) : len;
		size_t n = q ? j - at + 1 : len - at;
		size_t line;
		uint8_t before;

		if (h->head_len + n > max) {
			/* the first byte past the limit */
			*i = at + (max - h->head_len);
			h->error = "request head too large";
			return LINES_BAD;
		}
		h->head_len += (uint32_t)n;
		if (!q) {
			h->line_len += (uint32_t)n;
			h->prev = p[len - 1];
			*i = len;
			return LINES_MORE;
		}
		before = j > at ? p[j - 1] : h->prev;
		line = h->line_len + (j - at); /* with its CR, before the LF */
		if (before != '\r' || line == 0) {
			h->error = "bare LF in head";
			*i = j;
			return LINES_BAD;
		}
		at = j + 1;
		h->line_len = 0;
		h->prev = '\n';
		if (line == 1) { /* "\r\n" alone: the section ends */
			*i = at;
			return LINES_END;
		}
	}
	*i = at;
	return LINES_MORE;
}

void rl_http_feed(struct rl_http *h, const uint8_t *p, size_t len,
		  struct rl_http_feed *out)
{
	size_t i = 0;

	out->used = 0;
	out->head_begin = -1;
	out->event = RL_HTTP_EV_NONE;
	while (i < len) {
		uint8_t c = p[i];
		uint64_t take;

		switch ((enum rl_http_phase)h->phase) {
		case RL_HTTP_IDLE:
			if (h->cr) {
				if (c != '\n')
					return fail(h, out, i, "bare CR before request");
				h->cr = 0;
				if (++h->blank_lines > RL_BLANK_LINES_MAX)
					return fail(h, out, i, "too many empty lines");
				i++;
				continue;
			}
			if (c == '\r') {
				h->cr = 1;
				i++;
				continue;
			}
			if (c == '\n')
				return fail(h, out, i, "bare LF before request");
			if (rl_http_tls_may_start(h) && h->blank_lines == 0 &&
			    c == 0x16) {
				/* A TLS handshake record: not ours to frame. */
				h->phase = RL_HTTP_PASS;
				out->used = i;
				out->event = RL_HTTP_EV_PASS;
				return;
			}
			if (!rl_http_tchar[c])
				return fail(h, out, i, "not an HTTP request");
			h->phase = RL_HTTP_HEAD;
			h->tunnel = 0;
			h->blank_lines = 0;
			h->head_len = 0;
			h->line_len = 0;
			h->prev = 0;
			out->head_begin = (ssize_t)i;
			/* fall through */
		case RL_HTTP_HEAD:
		case RL_HTTP_TRAILER: {
			int head = h->phase == RL_HTTP_HEAD;
			uint32_t line = h->line_len;
			uint8_t prev = h->prev;
			size_t from = i;
			enum lines st = scan_lines(h, p, &i, len,
						   head ? RL_HEAD_MAX : RL_TRAILER_MAX);

			if (!head) {
				/* The first bad byte wins, whichever check
				 * finds it: bytes up to where the line scan
				 * stopped (the bad LF itself is in its
				 * verdict). */
				const char *why = h->error;
				ssize_t bad = rl_http_trailer_check(h, p + from, i - from,
								    line, prev);

				if (bad >= 0)
					return fail(h, out, from + (size_t)bad,
						    h->error);
				h->error = why;
			}
			if (st == LINES_BAD)
				return fail(h, out, i, h->error);
			if (st == LINES_MORE)
				continue;
			if (!head) {
				h->phase = h->last ? RL_HTTP_DONE : RL_HTTP_IDLE;
				continue;
			}
			h->requests++;
			out->used = i;
			out->event = RL_HTTP_EV_HEAD;
			return;
		}
		case RL_HTTP_BODY:
			take = h->remaining < len - i ? h->remaining : len - i;
			h->remaining -= take;
			i += take;
			if (h->remaining == 0)
				h->phase = h->last ? RL_HTTP_DONE : RL_HTTP_IDLE;
			continue;
		case RL_HTTP_CHUNK_SIZE:
		case RL_HTTP_CHUNK_EXT:
		case RL_HTTP_CHUNK_LF:
		case RL_HTTP_CHUNK_DATA:
		case RL_HTTP_CHUNK_DCR:
		case RL_HTTP_CHUNK_DLF: {
			const char *why;

			if (rl_http_chunk_step(h, p, &i, len, &why))
				return fail(h, out, i, why);
			continue;
		}
		case RL_HTTP_PASS:
			i = len;
			continue;
		case RL_HTTP_DONE:
			out->used = i;
			out->event = RL_HTTP_EV_DONE;
			return;
		case RL_HTTP_ERROR:
			out->used = i;
			out->event = RL_HTTP_EV_ERROR;
			return;
		}
	}
	out->used = len;
}

void rl_http_took_head(struct rl_http *h)
{
	h->requests++;
	h->tunnel = 0;
	h->blank_lines = 0;
	h->phase = RL_HTTP_IDLE;
}

void rl_http_pass(struct rl_http *h)
{
	h->phase = RL_HTTP_PASS;
}

void rl_http_begin_answer(struct rl_http *h, const struct rl_http_answer *a,
			  int no_body)
{
	h->remaining = 0;
	h->ext_len = 0;
	h->last = 0;
	if (no_body || (a->status >= 100 && a->status < 200) || a->status == 204 ||
	    a->status == 304) {
		h->phase = RL_HTTP_IDLE;
	} else if (a->chunked) {
		h->phase = RL_HTTP_CHUNK_SIZE;
	} else if (a->has_length) {
		h->phase = a->length ? RL_HTTP_BODY : RL_HTTP_IDLE;
		h->remaining = a->length;
	} else {
		h->phase = RL_HTTP_PASS; /* to the end of the connection */
	}
}

void rl_http_begin_body(struct rl_http *h, const struct rl_http_req *req)
{
	h->remaining = 0;
	h->ext_len = 0;
	h->last = req->last;
	if (req->chunked) {
		h->phase = RL_HTTP_CHUNK_SIZE;
	} else if (req->has_length && req->content_length > 0) {
		h->phase = RL_HTTP_BODY;
		h->remaining = req->content_length;
	} else {
		/* RFC 9112 6.3: a request with neither has no body. */
		h->phase = req->last ? RL_HTTP_DONE : RL_HTTP_IDLE;
	}
}
