/* SPDX-License-Identifier: MIT */
/*
 * framer.h - a caller of the request framer like the shim, shared by
 * tests/unit/test_http.c and tests/fuzz/fuzz_http.c: the stream fed in
 * pieces, each head kept contiguous and parsed once the scanner ends it,
 * its body then skipped by the scanner.
 */
#ifndef RL_TEST_FRAMER_H
#define RL_TEST_FRAMER_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "http.h"

struct framer {
	/* The size of piece `k` (0, 1, ...) of the stream. */
	size_t (*piece)(void *arg, size_t k);
	/* Before each feed, at offset `at` of the stream (may be NULL). */
	void (*before)(void *arg, const struct rl_http *h, size_t at);
	/* Each event but RL_HTTP_EV_NONE, ending at offset `at`. For
	 * RL_HTTP_EV_HEAD, the head [head_start, at) was parsed into *req
	 * with result `rc` (0: its body is being skipped). Returns nonzero to
	 * stop. */
	int (*event)(void *arg, const struct rl_http *h, int ev, size_t at,
		     size_t head_start, int rc, const struct rl_http_req *req);
	const struct rl_http_want *want;
	void *arg;
};

/* Frame s[0, len) through `fr`, up to the first event it stops at. */
static inline void framer_run(const uint8_t *s, size_t len,
			      const struct framer *fr)
{
	struct rl_http h;
	size_t off = 0, head_start = 0, k = 0;

	rl_http_init(&h);
	while (off < len) {
		size_t n = fr->piece(fr->arg, k++), pos = 0;

		if (n > len - off)
			n = len - off;
		while (pos < n) {
			struct rl_http_feed f;
			struct rl_http_req req;
			int rc = 0;

			if (fr->before)
				fr->before(fr->arg, &h, off + pos);
			rl_http_feed(&h, s + off + pos, n - pos, &f);
			if (f.head_begin >= 0)
				head_start = off + pos + (size_t)f.head_begin;
			if (f.used > n - pos)
				abort(); /* consumed more than given */
			pos += f.used;
			if (f.event == RL_HTTP_EV_NONE)
				continue;
			if (f.event == RL_HTTP_EV_HEAD) {
				rc = rl_http_parse_head(s + head_start,
							off + pos - head_start,
							fr->want, &req);
				if (rc == 0)
					rl_http_begin_body(&h, &req);
			}
			if (fr->event(fr->arg, &h, f.event, off + pos, head_start,
				      rc, &req))
				return;
		}
		off += n;
	}
}

#endif /* RL_TEST_FRAMER_H */
