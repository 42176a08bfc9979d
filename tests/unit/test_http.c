/* SPDX-License-Identifier: MIT */
/* test_http.c - the request framer: every split of a stream frames as the
 * whole does, and everything DESIGN.md calls uncertain is an error. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "http_int.h"
#include "../framer.h"

/* ---- a caller like the shim's: heads kept contiguous, bodies skipped ---- */

#define MAX_EVENTS 32

struct trace {
	int n;
	size_t at[MAX_EVENTS];      /* absolute offset after the event */
	int event[MAX_EVENTS];
	char method[MAX_EVENTS][16];
	char path[MAX_EVENTS][RL_PATH_MAX];
	const char *error;
};

struct pieces {
	const size_t *sizes;
	size_t n;
	struct trace *t;
};

static size_t piece(void *arg, size_t k)
{
	const struct pieces *p = arg;

	return p->sizes[k % p->n];
}

static int event(void *arg, const struct rl_http *h, int ev, size_t at,
		 size_t head_start, int rc, const struct rl_http_req *req)
{
	struct trace *t = ((const struct pieces *)arg)->t;

	(void)head_start;
	t->at[t->n] = at;
	t->event[t->n] = ev;
	if (ev == RL_HTTP_EV_HEAD) {
		if (rc) {
			t->event[t->n] = RL_HTTP_EV_ERROR;
			t->error = req->error;
			t->n++;
			return 1;
		}
		snprintf(t->method[t->n], 16, "%s", req->method);
		memcpy(t->path[t->n], req->path, sizeof(t->path[t->n]) - 1);
		t->path[t->n][sizeof(t->path[t->n]) - 1] = '\0';
	}
	t->n++;
	if (ev == RL_HTTP_EV_ERROR) {
		t->error = h->error;
		return 1;
	}
	return ev == RL_HTTP_EV_PASS || ev == RL_HTTP_EV_DONE ||
	       t->n == MAX_EVENTS;
}

/* Feed `s` in chunks: chunk k has size sizes[k % nsizes]. */
static void frame(const char *s, size_t len, const size_t *sizes,
		  size_t nsizes, struct trace *t)
{
	struct pieces p = { sizes, nsizes, t };
	struct framer fr = { piece, NULL, event, NULL, &p };

	memset(t, 0, sizeof(*t));
	framer_run((const uint8_t *)s, len, &fr);
}

static void frame_whole(const char *s, struct trace *t)
{
	size_t all = strlen(s);

	frame(s, all, &all, 1, t);
}

static void assert_same(const struct trace *a, const struct trace *b)
{
	assert_int_equal(a->n, b->n);
	for (int i = 0; i < a->n; i++) {
		assert_int_equal(a->at[i], b->at[i]);
		assert_int_equal(a->event[i], b->event[i]);
		assert_string_equal(a->method[i], b->method[i]);
		assert_string_equal(a->path[i], b->path[i]);
	}
}

static const char pipelined[] =
	"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
	"POST /sms HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
	"POST /c HTTP/1.1\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"
	"5;ext=1\r\nhello\r\n"
	"A\r\n0123456789\r\n"
	"0\r\nTrailer: x\r\n\r\n"
	"\r\n" /* a client's stray CRLF between requests */
	"GET /d?x=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
	"POST /e HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	"HEAD /f HTTP/1.1\r\n\r\n";

static void test_pipelined_whole(void **state)
{
	struct trace t;

	(void)state;
	frame_whole(pipelined, &t);
	assert_null(t.error);
	assert_int_equal(t.n, 6);
	assert_string_equal(t.method[0], "GET");
	assert_string_equal(t.path[0], "/a");
	assert_int_equal(t.at[0], 28);
	assert_string_equal(t.method[1], "POST");
	assert_string_equal(t.path[1], "/sms");
	assert_string_equal(t.path[2], "/c");
	assert_string_equal(t.path[3], "/d");
	assert_string_equal(t.path[4], "/e");
	assert_string_equal(t.method[5], "HEAD");
	assert_int_equal(t.at[5], strlen(pipelined));
}

/* A request that ends the connection (Connection: close, HTTP/1.0 without
 * keep-alive) is the last one framed: the scanner says so where its
 * message ends, however the bytes are split, and frames nothing after. */
static void test_last_request(void **state)
{
	static const struct {
		const char *s;
		size_t at;
		int heads;
	} cases[] = {
		{ "GET /a HTTP/1.0\r\n\r\nGET /b HTTP/1.0\r\n\r\n", 19, 1 },
		{ "GET /a HTTP/1.1\r\nConnection: Close\r\n\r\n"
		  "GET /b HTTP/1.1\r\n\r\n", 38, 1 },
		{ "POST /a HTTP/1.1\r\nConnection: close\r\nContent-Length: 3\r\n\r\n"
		  "abcGET /b HTTP/1.1\r\n\r\n", 61, 1 },
		{ "GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.0\r\n"
		  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /c HTTP/1.1\r\n\r\n", 0, 2 },
		{ "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
		  "GET /b HTTP/1.0\r\n\r\nGET /c", 62, 2 },
		/* not the last where a server would go on: two Connection
		 * fields (nginx reads the last), a list with close in it
		 * (Python compares it whole) */
		{ "GET /a HTTP/1.1\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n"
		  "GET /b HTTP/1.1\r\nConnection: close\r\n\r\nGET /c", 100, 2 },
		{ "GET /a HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n"
		  "GET /b HTTP/1.0\r\n\r\nGET /c", 69, 2 },
	};
	static const size_t sizes[] = { 1, 2, 3, 5, 7, 11, 1000 };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			struct trace t;
			int heads = 0;

			frame(cases[i].s, strlen(cases[i].s), &sizes[k], 1, &t);
			for (int e = 0; e < t.n; e++)
				heads += t.event[e] == RL_HTTP_EV_HEAD;
			if (cases[i].at == 0) {
				/* HTTP/1.0 with chunked: refused outright */
				assert_int_equal(t.event[t.n - 1], RL_HTTP_EV_ERROR);
				continue;
			}
			assert_int_equal(heads, cases[i].heads);
			assert_int_equal(t.event[t.n - 1], RL_HTTP_EV_DONE);
			assert_int_equal(t.at[t.n - 1], cases[i].at);
		}
	}
}

/* Answers: the one-pass reader and the scanner with the full parse agree
 * on every head, and frame the body as a client would. */
static void test_answers(void **state)
{
	static const struct {
		const char *s;
		int rc, status, chunked, has_length;
		uint64_t length;
	} cases[] = {
		{ "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", 0, 200, 0, 1, 12 },
		{ "HTTP/1.1 200 OK\r\nServer: x\r\ncontent-length:7 \r\nDate: y\r\n\r\n", 0, 200, 0, 1, 7 },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, 200, 1, 0, 0 },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n", 0, 200, 0, 0, 0 },
		{ "HTTP/1.0 404 Not Found\r\n\r\n", 0, 404, 0, 0, 0 },
		{ "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 0, 101, 0, 0, 0 },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", 0, 200, 0, 1, 1 },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", -EINVAL, 0, 0, 0, 0 },
		{ "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", -EINVAL, 0, 0, 0, 0 },
		{ "HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\n", -EINVAL, 0, 0, 0, 0 },
		{ "HTTP/1.1 200 OK\r\nX: 1\n\r\n", -EINVAL, 0, 0, 0, 0 },
		{ "HTTP/2 200\r\n\r\n", -EINVAL, 0, 0, 0, 0 },
		{ "HTTP/1.1 2x0 OK\r\n\r\n", -EINVAL, 0, 0, 0, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint8_t *p = (const uint8_t *)cases[i].s;
		size_t len = strlen(cases[i].s), used = 0;
		struct rl_http_answer a, b;
		int rc = rl_http_answer_prefix(p, len, &a, &used);

		assert_int_equal(rc, cases[i].rc);
		if (rc)
			continue;
		assert_int_equal(used, len);
		assert_int_equal(rl_http_parse_answer(p, len, &b), 0);
		assert_int_equal(a.status, cases[i].status);
		assert_int_equal(b.status, cases[i].status);
		assert_int_equal(a.chunked, cases[i].chunked);
		assert_int_equal(b.chunked, cases[i].chunked);
		assert_int_equal(a.has_length, cases[i].has_length);
		assert_int_equal(b.has_length, cases[i].has_length);
		assert_int_equal(a.length, cases[i].length);
		assert_int_equal(b.length, cases[i].length);
		/* Cut short anywhere, it says so; with a body after, the head
		 * is where it ends. */
		for (size_t cut = 0; cut < len; cut++)
			assert_int_equal(rl_http_answer_prefix(p, cut, &a, &used), -EAGAIN);
		{
			char more[256];

			snprintf(more, sizeof(more), "%sBODYBODYBODYBODY", cases[i].s);
			assert_int_equal(rl_http_answer_prefix((const uint8_t *)more,
							       strlen(more), &a, &used), 0);
			assert_int_equal(used, len);
		}
	}
}

static const char *show(const char *s);

/* A head refused before it is complete (the shim answers 400 at once)
 * must be wrong already: every prefix of a good head is "more". */
static void test_prefixes_of_good_heads(void **state)
{
	static const char *heads[] = {
		"GET / HTTP/1.1\r\n\r\n",
		"GET /a/b?c=d&e HTTP/1.0\r\nHost: x\r\nX-Empty:\r\nX-Tab:\tv\t\r\n\r\n",
		"POST http://h.example:8080/sms HTTP/1.1\r\nContent-Length: 2\r\n\r\n",
		"CONNECT h.example:443 HTTP/1.1\r\nHost: h.example:443\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /%73ms HTTP/1.1\r\nCookie: a=\xc3\xa9\x80\r\nUser-Agent: curl/8\r\n\r\n",
		"GET /u HTTP/1.1\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\n",
		"M-SEARCH * HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	};
	struct rl_http_req req;

	(void)state;
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		size_t len = strlen(heads[i]), used = 0;

		assert_int_equal(rl_http_parse_prefix((const uint8_t *)heads[i], len,
						      NULL, &req, &used), 0);
		assert_int_equal(used, len);
		for (size_t cut = 1; cut < len; cut++) {
			int rc = rl_http_parse_prefix((const uint8_t *)heads[i], cut,
						      NULL, &req, &used);

			if (rc != -EAGAIN)
				fail_msg("%s cut at %zu: %d (%s)", show(heads[i]), cut,
					 rc, req.error ? req.error : "");
		}
	}
}

/* An h2c offer, however it is written, is found (to be blanked); two are
 * refused; an escape in an absolute-form authority is refused. */
static void test_h2c_offers(void **state)
{
	static const struct {
		const char *up;
		int rc;
		size_t at; /* offset of "h2c" in the value, or 0 */
	} cases[] = {
		{ "h2c", 0, 1 },
		{ "H2C", 0, 1 },
		{ "h2c;q=1", 0, 1 },
		{ "h2c/1.0", 0, 1 },
		{ "websocket, h2c ;x", 0, 12 },
		{ "h2cx", 0, 0 },
		{ "xh2c", 0, 0 },
		{ "h2c, h2c", -EINVAL, 0 },
		{ "h2c,h2c;q=1", -EINVAL, 0 },
	};
	struct rl_http_req req;
	char head[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = snprintf(head, sizeof(head),
				 "GET / HTTP/1.1\r\nUpgrade: %s\r\n\r\n", cases[i].up);
		size_t used;
		int rc = rl_http_parse_prefix((const uint8_t *)head, (size_t)n,
					      NULL, &req, &used);

		assert_int_equal(rc, cases[i].rc);
		if (rc)
			continue;
		if (cases[i].at)
			assert_int_equal(req.h2c_at, 25 + cases[i].at - 1);
		else
			assert_int_equal(req.h2c_at, 0);
	}
	/* in two fields: refused */
	assert_int_equal(rl_http_parse_head(
		(const uint8_t *)"GET / HTTP/1.1\r\nUpgrade: h2c\r\nUpgrade: h2c\r\n\r\n",
		45, NULL, &req), -EINVAL);
	assert_int_equal(rl_http_parse_head(
		(const uint8_t *)"GET x://..%2fsecret HTTP/1.0\r\n\r\n", 32, NULL, &req),
		-EINVAL);
	assert_int_equal(rl_http_parse_head(
		(const uint8_t *)"GET http://h/%2e%2e/a HTTP/1.0\r\n\r\n", 34, NULL, &req), 0);
	assert_string_equal(req.path, "/a");
}

/* Every split in two, and every chunk size from 1 to 13. */
static void test_every_split(void **state)
{
	size_t len = strlen(pipelined);
	struct trace whole, part;

	(void)state;
	frame_whole(pipelined, &whole);
	for (size_t cut = 1; cut < len; cut++) {
		size_t sizes[2] = { cut, len };

		frame(pipelined, len, sizes, 2, &part);
		assert_same(&whole, &part);
	}
	for (size_t sz = 1; sz <= 13; sz++) {
		frame(pipelined, len, &sz, 1, &part);
		assert_same(&whole, &part);
	}
	{
		size_t odd[3] = { 1, 7, 2 };

		frame(pipelined, len, odd, 3, &part);
		assert_same(&whole, &part);
	}
}

/* ---- errors: each is found whole and one byte at a time ------------------ */

static void expect_error(const char *s, const char *why)
{
	size_t one = 1;
	struct trace t;

	frame_whole(s, &t);
	if (!t.error)
		fail_msg("%s: accepted, want '%s'", s, why);
	if (strcmp(t.error, why) != 0)
		fail_msg("%s: got '%s', want '%s'", s, t.error, why);
	frame(s, strlen(s), &one, 1, &t);
	if (!t.error)
		fail_msg("%s (1 byte at a time): accepted, want '%s'", s, why);
	if (strcmp(t.error, why) != 0)
		fail_msg("%s (1 byte at a time): got '%s', want '%s'", s,
			 t.error, why);
}

static void test_framing_errors(void **state)
{
	(void)state;
	expect_error("GET / HTTP/1.1\nHost: x\r\n\r\n", "bare LF in head");
	expect_error("GET / HTTP/1.1\r\nHost: x\n\r\n", "bare LF in head");
	expect_error("GET / HTTP/1.1\r\nHost: x\r\n\n", "bare LF in head");
	expect_error("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", "obs-fold in head");
	expect_error("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", "bare CR in head");
	expect_error("GET / HTTP/1.1\r\nX: a\x01\r\n\r\n",
		     "control character in header");
	expect_error("GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n",
		     "control character in header");
	expect_error("GET / HTTP/1.1\r\nHost : x\r\n\r\n", "bad header name");
	expect_error("GET / HTTP/1.1\r\nHo\x80st: x\r\n\r\n", "bad header name");
	expect_error("GET / HTTP/1.1\r\nTransfer-Encoding\x0b: chunked\r\n\r\n",
		     "bad header name");
	expect_error("GET / HTTP/1.1\r\n: x\r\n\r\n", "bad header name");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 5\r\n"
		     "Transfer-Encoding: chunked\r\n\r\n",
		     "Content-Length with Transfer-Encoding");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 5\r\n"
		     "Content-Length: 5\r\n\r\n", "repeated Content-Length");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
		     "bad Content-Length");
	expect_error("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
		     "bad Content-Length");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 0x5\r\n\r\n",
		     "bad Content-Length");
	expect_error("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n",
		     "bad Content-Length");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 4611686018427387904\r\n\r\n",
		     "bad Content-Length");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
		     "Transfer-Encoding not ending in chunked");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
		     "bad Transfer-Encoding");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
		     "Transfer-Encoding: chunked\r\n\r\n", "bad Transfer-Encoding");
	expect_error("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
		     "Transfer-Encoding in HTTP/1.0");
	expect_error("GET  / HTTP/1.1\r\n\r\n", "bad request target");
	expect_error("GET / HTTP/1.1 \r\n\r\n", "unsupported HTTP version");
	expect_error("GET / http/1.1\r\n\r\n", "unsupported HTTP version");
	expect_error("GET / HTTP/2.0\r\n\r\n", "unsupported HTTP version");
	expect_error("GET /\r\n\r\n", "bad request target");
	expect_error("GET sms HTTP/1.1\r\n\r\n", "bad request target");
	expect_error("GET /%zz HTTP/1.1\r\n\r\n", "bad request target");
	expect_error("GET /a%00 HTTP/1.1\r\n\r\n", "bad request target");
	expect_error("\x01GET / HTTP/1.1\r\n\r\n", "not an HTTP request");
	expect_error("\xffGET / HTTP/1.1\r\n\r\n", "not an HTTP request");
	expect_error(" GET / HTTP/1.1\r\n\r\n", "not an HTTP request");
	expect_error("\rGET / HTTP/1.1\r\n\r\n", "bare CR before request");
	expect_error("\nGET / HTTP/1.1\r\n\r\n", "bare LF before request");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		     "bad chunk size");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
		     "bad chunk size");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "1000000000000000\r\n", "chunk size too large");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "5\r\nhelloX\r\n", "chunk data longer than its size");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "5\nhello\r\n", "bad chunk size");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "5\r\rhello\r\n", "bare CR in chunk size line");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "5\r\nhello\r\r", "bare CR after chunk data");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "5;a=\x01\r\nhello\r\n", "bad chunk extension");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "0\r\nX: y\n\r\n", "bare LF in head");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "0\r\nX: y\r\n z\r\n\r\n", "obs-fold in trailer");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "0\r\nX: y\rz\r\n\r\n", "bare CR in trailer");
	expect_error("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n"
		     "\r\n\r\n\r\nGET / HTTP/1.1\r\n\r\n", "too many empty lines");
}

/* ---- chunk-size lines: RFC 9112 7.1.1's grammar, nothing looser ---------- */

#define CHUNKED_HEAD "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"

/* `s` printable, for failure messages: CR, LF and others escaped. */
static const char *show(const char *s)
{
	static char buf[512];
	size_t n = 0;

	for (; *s && n + 5 < sizeof(buf); s++) {
		uint8_t c = (uint8_t)*s;

		if (c == '\r')
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\\r");
		else if (c == '\n')
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\\n");
		else if (c < 0x20 || c >= 0x7f)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\\x%02x", c);
		else
			buf[n++] = (char)c;
	}
	buf[n] = '\0';
	return buf;
}

/* A chunked request whose first chunk-size line is `line` (its CRLF
 * included), carrying "hi", then a GET: two heads, whole or byte by byte,
 * framed the same. */
static void expect_chunk_line_ok(const char *line)
{
	char s[512];
	size_t one = 1, len;
	struct trace whole, part;

	len = (size_t)snprintf(s, sizeof(s), "%s%shi\r\n0\r\n\r\nGET /n HTTP/1.1\r\n\r\n",
			       CHUNKED_HEAD, line);
	frame_whole(s, &whole);
	if (whole.error)
		fail_msg("%s: refused: %s", show(line), whole.error);
	assert_int_equal(whole.n, 2);
	assert_string_equal(whole.path[1], "/n");
	assert_int_equal(whole.at[1], len);
	frame(s, len, &one, 1, &part);
	if (part.error)
		fail_msg("%s (1 byte at a time): refused: %s", show(line), part.error);
	assert_same(&whole, &part);
}

/* A chunk-size line refused at byte `at` of it, whole and byte by byte,
 * with "bad chunk extension" unless `why` says otherwise. */
static void expect_chunk_line_bad(const char *line, size_t at, const char *why)
{
	char s[512];
	size_t one = 1, len, head = strlen(CHUNKED_HEAD);
	struct trace t;

	if (!why)
		why = "bad chunk extension";
	len = (size_t)snprintf(s, sizeof(s), "%s%shi\r\n0\r\n\r\n", CHUNKED_HEAD, line);
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0)
			frame_whole(s, &t);
		else
			frame(s, len, &one, 1, &t);
		if (!t.error)
			fail_msg("%s%s: accepted, want '%s'", show(line),
				 pass ? " (1 byte at a time)" : "", why);
		if (strcmp(t.error, why) != 0)
			fail_msg("%s%s: got '%s', want '%s'", show(line),
				 pass ? " (1 byte at a time)" : "", t.error, why);
		assert_int_equal(t.n, 2);
		assert_int_equal(t.event[1], RL_HTTP_EV_ERROR);
		if (t.at[1] != head + at)
			fail_msg("%s%s: refused at %zu, want %zu", show(line),
				 pass ? " (1 byte at a time)" : "",
				 t.at[1] - head, at);
	}
}

static void test_chunk_ext_valid(void **state)
{
	(void)state;
	expect_chunk_line_ok("2\r\n");
	expect_chunk_line_ok("02\r\n");
	expect_chunk_line_ok("2;a\r\n");
	expect_chunk_line_ok("2;a=b\r\n");
	expect_chunk_line_ok("2 ; a = b\r\n");
	expect_chunk_line_ok("2\t;\ta\t=\tb\r\n");
	expect_chunk_line_ok("2  ;a\r\n");
	expect_chunk_line_ok("2;a=\"x;y\\\"z\"\r\n");
	expect_chunk_line_ok("2;a;b=c\r\n");
	expect_chunk_line_ok("2;a=b;c\r\n");
	expect_chunk_line_ok("2;a=\"\"\r\n");
	expect_chunk_line_ok("2;a=\"x\" ;b\r\n");
	expect_chunk_line_ok("2;a=\"x\";b=\"y\"\r\n");
	expect_chunk_line_ok("2;a=\"\t \\\t\\ \\\\ \x80\xff\"\r\n");
	expect_chunk_line_ok("2;a = \"x\"\r\n");
	expect_chunk_line_ok("2;!#$%&'*+-.^_`|~09AZaz=!#$%&'*+-.^_`|~\r\n");
}

static void test_chunk_ext_invalid(void **state)
{
	(void)state;
	/* Whitespace after the size leads to ";" only. */
	expect_chunk_line_bad("2 erfrferferf\r\n", 2, NULL);
	expect_chunk_line_bad("a \r\n", 2, NULL);
	expect_chunk_line_bad("a\t\r\n", 2, NULL);
	expect_chunk_line_bad("2 =b\r\n", 2, NULL);
	/* Not a size, as before. */
	expect_chunk_line_bad("2x\r\n", 1, "bad chunk size");
	expect_chunk_line_bad("2=b\r\n", 1, "bad chunk size");
	expect_chunk_line_bad(";a\r\n", 0, "bad chunk size");
	/* A name is a token, never empty. */
	expect_chunk_line_bad("2;\r\n", 2, NULL);
	expect_chunk_line_bad("2; \r\n", 3, NULL);
	expect_chunk_line_bad("2;=b\r\n", 2, NULL);
	expect_chunk_line_bad("2;;a\r\n", 2, NULL);
	expect_chunk_line_bad("2;a;\r\n", 4, NULL);
	expect_chunk_line_bad("2;a(b)\r\n", 3, NULL);
	expect_chunk_line_bad("2;a\"b\"\r\n", 3, NULL);
	expect_chunk_line_bad("2;\"a\"\r\n", 2, NULL);
	/* BWS comes before ";" or "=", never before the CRLF. */
	expect_chunk_line_bad("2;a \r\n", 4, NULL);
	expect_chunk_line_bad("2;a=b \r\n", 6, NULL);
	expect_chunk_line_bad("2;a=\"b\" \r\n", 8, NULL);
	expect_chunk_line_bad("2;a b\r\n", 4, NULL);
	expect_chunk_line_bad("2;a=b c\r\n", 6, NULL);
	/* A value is a token or a quoted-string, never empty. */
	expect_chunk_line_bad("2;a=\r\n", 4, NULL);
	expect_chunk_line_bad("2;a= \r\n", 5, NULL);
	expect_chunk_line_bad("2;a=;b\r\n", 4, NULL);
	expect_chunk_line_bad("2;a==b\r\n", 4, NULL);
	expect_chunk_line_bad("2;a=b=c\r\n", 5, NULL);
	expect_chunk_line_bad("2;a=b\"c\"\r\n", 5, NULL);
	expect_chunk_line_bad("2;a=\"b\"c\r\n", 7, NULL);
	expect_chunk_line_bad("2;a=\"b\"\"c\"\r\n", 7, NULL);
	expect_chunk_line_bad("2;a=b/c\r\n", 5, NULL);
	/* An unbalanced quote: the CR is inside the string. */
	expect_chunk_line_bad("2;a=\"x\r\n", 6, NULL);
	expect_chunk_line_bad("2;a=\"x\\\"\r\n", 8, NULL);
	/* Control characters, in a quoted-string or a quoted-pair. */
	expect_chunk_line_bad("2;a=\"x\x01\"\r\n", 6, NULL);
	expect_chunk_line_bad("2;a=\"x\x7f\"\r\n", 6, NULL);
	expect_chunk_line_bad("2;a=\"x\\\x01\"\r\n", 7, NULL);
	expect_chunk_line_bad("2;a=\"x\\\x7f\"\r\n", 7, NULL);
	expect_chunk_line_bad("2;a=\"x\\\r\n", 7, NULL);
	expect_chunk_line_bad("2;a=\x01\r\n", 4, NULL);
	expect_chunk_line_bad("2;a\x80\r\n", 3, NULL);
	/* Only CRLF ends the line. */
	expect_chunk_line_bad("2;a\n", 3, NULL);
	expect_chunk_line_bad("2;a=b\n", 5, NULL);
	expect_chunk_line_bad("2;a\r\r\n", 4, "bare CR in chunk size line");
}

/* Extensions are bounded: RL_CHUNK_EXT_MAX bytes after the digits, at the
 * first byte past it however the line arrives. */
static void test_chunk_ext_limit(void **state)
{
	size_t head = strlen(CHUNKED_HEAD);
	size_t n = head + 1 + RL_CHUNK_EXT_MAX + 64;
	char *s = malloc(n + 16);
	size_t one = 1, len;
	struct trace t;

	(void)state;
	memcpy(s, CHUNKED_HEAD "2;", head + 2);
	memset(s + head + 2, 'a', n - head - 2);
	memcpy(s + n, "\r\nhi\r\n0\r\n\r\n", 12);
	len = n + 11;
	frame_whole(s, &t);
	assert_string_equal(t.error, "chunk extension too long");
	assert_int_equal(t.at[1], head + 1 + RL_CHUNK_EXT_MAX);
	frame(s, len, &one, 1, &t);
	assert_string_equal(t.error, "chunk extension too long");
	assert_int_equal(t.at[1], head + 1 + RL_CHUNK_EXT_MAX);
	/* Exactly RL_CHUNK_EXT_MAX bytes of extension is still a line. */
	memcpy(s + head + 1 + RL_CHUNK_EXT_MAX, "\r\nhi\r\n0\r\n\r\n", 12);
	frame_whole(s, &t);
	assert_null(t.error);
	assert_int_equal(t.n, 1);
	free(s);
}

static void test_head_too_large(void **state)
{
	size_t n = RL_HEAD_MAX + 100;
	char *s = malloc(n + 1);
	struct trace t;
	size_t one = 1, big = 4096;

	(void)state;
	memcpy(s, "GET / HTTP/1.1\r\nX: ", 19);
	memset(s + 19, 'a', n - 19);
	s[n] = '\0';
	frame_whole(s, &t);
	assert_string_equal(t.error, "request head too large");
	/* The error comes as soon as the limit is passed, not at the end. */
	assert_true(t.at[0] <= RL_HEAD_MAX);
	frame(s, n, &one, 1, &t);
	assert_string_equal(t.error, "request head too large");
	frame(s, n, &big, 1, &t);
	assert_string_equal(t.error, "request head too large");
	/* Exactly RL_HEAD_MAX bytes is still a head. */
	memcpy(s + RL_HEAD_MAX - 4, "\r\n\r\n", 4);
	s[RL_HEAD_MAX] = '\0';
	frame_whole(s, &t);
	assert_null(t.error);
	assert_int_equal(t.event[0], RL_HTTP_EV_HEAD);
	free(s);
}

/* ---- not HTTP ------------------------------------------------------------- */

static void test_tls_passes(void **state)
{
	static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
	struct rl_http h;
	struct rl_http_feed f;

	(void)state;
	rl_http_init(&h);
	rl_http_feed(&h, (const uint8_t *)hello, sizeof(hello) - 1, &f);
	assert_int_equal(f.event, RL_HTTP_EV_PASS);
	assert_int_equal(f.used, 0);
	/* Everything after passes without events. */
	rl_http_feed(&h, (const uint8_t *)"GET / HTTP/1.1\r\n\r\n", 18, &f);
	assert_int_equal(f.event, RL_HTTP_EV_NONE);
	assert_int_equal(f.used, 18);
	/* TLS bytes after a request are not a new connection: an error. */
	expect_error("GET / HTTP/1.1\r\n\r\n\x16\x03\x01", "not an HTTP request");

	/* The plaintext of a TLS session (issue 27): a record byte first is
	 * no TLS to pass but a bad request line, or what follows would reach
	 * the application unframed (test_diff --tls: nginx logged it). */
	rl_http_init(&h);
	h.in_tls = 1;
	rl_http_feed(&h, (const uint8_t *)hello, sizeof(hello) - 1, &f);
	assert_int_equal(f.event, RL_HTTP_EV_ERROR);
	assert_int_equal(f.used, 0);
	assert_string_equal(h.error, "not an HTTP request");
	/* ... but inside a CONNECT tunnel opened in the session, TLS passes
	 * as it does in one on a plain socket. */
	rl_http_init(&h);
	h.in_tls = 1;
	h.requests = 1;
	h.tunnel = 1;
	rl_http_feed(&h, (const uint8_t *)hello, sizeof(hello) - 1, &f);
	assert_int_equal(f.event, RL_HTTP_EV_PASS);
}

static void test_h2_preface(void **state)
{
	static const char pri[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	struct rl_http_req req;

	(void)state;
	assert_int_equal(rl_http_parse_head((const uint8_t *)pri, 18, NULL, &req), 0);
	assert_true(req.preface);
	/* PRI with another target is no preface. */
	assert_int_equal(rl_http_parse_head((const uint8_t *)"PRI / HTTP/2.0\r\n\r\n",
					    18, NULL, &req), -EINVAL);
}

/* ---- the parsed head -------------------------------------------------------- */

static void test_parse_fields(void **state)
{
	static const char s[] =
		"HEAD /x?y HTTP/1.0\r\n"
		"X-Forwarded-For: 1.1.1.1, 2.2.2.2\r\n"
		"x-api-key:   secret  \r\n"
		"X-FORWARDED-FOR:3.3.3.3\r\n"
		"Upgrade: websocket\r\n"
		"Content-Length: 0042\r\n"
		"\r\n";
	struct rl_http_want want = { 2, { "X-Forwarded-For", "X-Api-Key" },
				     { 15, 9 }, 1 };
	struct rl_http_req req;

	(void)state;
	assert_int_equal(rl_http_parse_head((const uint8_t *)s, strlen(s), &want,
					    &req), 0);
	assert_string_equal(req.method, "HEAD");
	assert_true(req.head);
	assert_true(req.http10);
	assert_true(req.upgrade);
	assert_false(req.connect);
	assert_string_equal(req.path, "/x");
	assert_true(req.has_length);
	assert_int_equal(req.content_length, 42);
	assert_int_equal(req.nvalues[0], 2);
	assert_int_equal(req.values[0][0].len, 16);
	assert_memory_equal(req.values[0][0].p, "1.1.1.1, 2.2.2.2", 16);
	assert_memory_equal(req.values[0][1].p, "3.3.3.3", 7);
	assert_int_equal(req.nvalues[1], 1);
	assert_int_equal(req.values[1][0].len, 6);
	assert_memory_equal(req.values[1][0].p, "secret", 6);
}

/* With more occurrences than kept, the last ones stay, in order. */
static void test_many_values(void **state)
{
	char s[2048];
	struct rl_http_want want = { 1, { "xff" }, { 3 }, 1 };
	struct rl_http_req req;
	size_t n = 0;

	(void)state;
	n += (size_t)sprintf(s + n, "GET / HTTP/1.1\r\n");
	for (int i = 0; i < 20; i++)
		n += (size_t)sprintf(s + n, "XFF: 10.0.0.%d\r\n", i);
	n += (size_t)sprintf(s + n, "\r\n");
	assert_int_equal(rl_http_parse_head((const uint8_t *)s, n, &want, &req), 0);
	assert_int_equal(req.nvalues[0], 20);
	for (int i = 0; i < RL_WANT_VALUES; i++) {
		char v[32];

		snprintf(v, sizeof(v), "10.0.0.%d", 20 - RL_WANT_VALUES + i);
		assert_int_equal(req.values[0][i].len, strlen(v));
		assert_memory_equal(req.values[0][i].p, v, strlen(v));
	}
}

/* A name with separators is a header nobody asks for (nginx ignores it
 * too); it cannot pass for a framing header. */
static void test_odd_names(void **state)
{
	static const char s[] = "GET / HTTP/1.1\r\nX(Y)/z: 1\r\nContent-Length(: 5\r\n\r\n";
	struct rl_http_req req;

	(void)state;
	assert_int_equal(rl_http_parse_head((const uint8_t *)s, strlen(s), NULL, &req), 0);
	assert_false(req.has_length);
}

static void test_methods(void **state)
{
	struct rl_http_req req;

	(void)state;
	assert_int_equal(rl_http_parse_head((const uint8_t *)"CONNECT example.com:443 HTTP/1.1\r\n\r\n",
					    36, NULL, &req), 0);
	assert_true(req.connect);
	assert_string_equal(req.path, "");
	assert_int_equal(rl_http_parse_head((const uint8_t *)"OPTIONS * HTTP/1.1\r\n\r\n",
					    22, NULL, &req), 0);
	assert_string_equal(req.path, "*");
	/* Methods are case-sensitive tokens: "get" is a method, not GET. */
	assert_int_equal(rl_http_parse_head((const uint8_t *)"get /sms HTTP/1.1\r\n\r\n",
					    21, NULL, &req), 0);
	assert_string_equal(req.method, "get");
	/* A long method is valid and matches only "*". */
	assert_int_equal(rl_http_parse_head((const uint8_t *)"AVERYVERYLONGMETHODNAME / HTTP/1.1\r\n\r\n",
					    38, NULL, &req), 0);
	assert_string_equal(req.method, "");
	/* HTTP/1.x minor versions above 1 are 1.1. */
	assert_int_equal(rl_http_parse_head((const uint8_t *)"GET / HTTP/1.7\r\n\r\n",
					    18, NULL, &req), 0);
	assert_false(req.http10);
}

/* Where a value ends, found a block at a time (64 bytes, by AVX2 where
 * the CPU has it), is where a byte-by-byte reading ends it: every byte
 * value at every offset of long values, both sides of each block edge. */
static ssize_t value_end_bytes(const uint8_t *p, size_t i, size_t len)
{
	for (; i < len; i++) {
		if (p[i] == '\r')
			return (ssize_t)i;
		if (p[i] < 0x20 ? p[i] != '\t' : p[i] == 0x7f)
			return -1;
	}
	return -2;
}

static void test_value_end_blocks(void **state)
{
	static uint8_t buf[400];

	(void)state;
	for (unsigned b = 0; b < 256; b++) {
		for (size_t at = 0; at < 300; at += (at < 140 ? 1 : 7)) {
			for (size_t start = 0; start < 6; start++) {
				/* 100 bytes: the SSE2 blocks; 300: AVX2's */
				size_t len = (start < 3 ? 300 : 100) + start;

				if (at >= len - start)
					continue;

				for (size_t k = 0; k < sizeof(buf); k++)
					buf[k] = (uint8_t)('a' + k % 26);
				buf[start + at] = (uint8_t)b;
				assert_int_equal(rl_http_value_end(buf, start, len),
						 value_end_bytes(buf, start, len));
			}
		}
	}
	/* obs-text and tabs all the way, then the CR */
	for (size_t k = 0; k < 300; k++)
		buf[k] = (uint8_t)(k % 3 == 0 ? 0x80 + k % 128 : k % 3 == 1 ? '\t' : 0xff);
	buf[299] = '\r';
	assert_int_equal(rl_http_value_end(buf, 0, 300), 299);
}

/* The same with an HTAB (a value byte that stops the blocks) before the
 * changed byte, so that the runs of clean blocks the scan counts before
 * it skips 64 bytes at a time begin anywhere; every length 0..200 of a
 * value ending in CR; and random values of bytes near the classes'
 * edges, at random starts and lengths. */
static void test_value_end_runs(void **state)
{
	static const size_t tabs[] = { 0, 1, 15, 16, 17, 31, 47, 48, 63, 64, 65,
				       79, 80, 127, 128, 129, 143, 191, 192 };
	static const uint8_t pick[] = { 'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a',
					'\t', '\r', '\n', 0, 0x1f, 0x20, 0x7e,
					0x7f, 0x80, 0xff };
	static uint8_t buf[400];
	uint32_t x = 2463534242u;

	(void)state;
	for (size_t t = 0; t < sizeof(tabs) / sizeof(tabs[0]); t++) {
		for (unsigned b = 0; b < 256; b++) {
			for (size_t at = tabs[t] + 1; at < 300; at += (at < 200 ? 1 : 5)) {
				for (size_t start = 0; start < 3; start++) {
					size_t len = 300 + start;

					memset(buf, 'v', sizeof(buf));
					buf[start + tabs[t]] = '\t';
					buf[start + at] = (uint8_t)b;
					assert_int_equal(rl_http_value_end(buf, start, len),
							 value_end_bytes(buf, start, len));
				}
			}
		}
	}
	for (size_t len = 0; len <= 200; len++) {
		for (size_t start = 0; start <= len && start < 4; start++) {
			memset(buf, 'v', sizeof(buf));
			if (len)
				buf[len - 1] = '\r';
			assert_int_equal(rl_http_value_end(buf, start, len),
					 value_end_bytes(buf, start, len));
		}
	}
	for (unsigned n = 0; n < 200000; n++) {
		size_t len, start;
		/* one control byte in 256 to one in 16: runs of every size */
		unsigned clean = 256 - (1 + n % 16);

		for (size_t k = 0; k < sizeof(buf); k++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			/* mostly clean, a control byte now and then */
			buf[k] = (x & 0xff) < clean ? (uint8_t)('a' + (x >> 8) % 26)
						  : pick[(x >> 8) % sizeof(pick)];
		}
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		len = x % sizeof(buf);
		start = len ? (x >> 16) % (len < 70 ? len : 70) : 0;
		assert_int_equal(rl_http_value_end(buf, start, len),
				 value_end_bytes(buf, start, len));
	}
}

/* rl_http_may_end() says 0 only where no CRLF CRLF is: every place of
 * one in reads of 1 to 1,100 bytes (the AVX2 blocks, their edges, the
 * tail), and near misses (LF LF, CR LF LF, CR CR LF) say 0. */
static void test_may_end(void **state)
{
	static uint8_t buf[1100];

	(void)state;
	for (size_t len = 1; len <= sizeof(buf); len += (len < 200 ? 1 : 37)) {
		memset(buf, 'x', len);
		assert_int_equal(rl_http_may_end(buf, len), 0);
		for (size_t at = 0; at + 4 <= len; at += (at < 140 ? 1 : 13)) {
			static const char *miss[] = { "\n\n", "\r\n\n", "\r\r\n", "\n\r\r\n" };

			memset(buf, 'x', len);
			memcpy(buf + at, "\r\n\r\n", 4);
			assert_int_equal(rl_http_may_end(buf, len), 1);
			for (size_t m = 0; m < 4; m++) {
				size_t ml = strlen(miss[m]);

				if (at + ml > len)
					continue;
				memset(buf, 'x', len);
				memcpy(buf + at, miss[m], ml);
				assert_int_equal(rl_http_may_end(buf, len), 0);
			}
		}
	}
}

/* rl_http_lit_eq() against the byte-by-byte compare: each literal the
 * head parser looks for, in mixed case, and with each byte changed to
 * every other value. */
static void test_lit_eq(void **state)
{
	static const char *lits[] = { "content-length", "transfer-encoding",
				      "upgrade", "connection", "host", "te", "x" };

	(void)state;
	for (size_t l = 0; l < sizeof(lits) / sizeof(lits[0]); l++) {
		size_t n = strlen(lits[l]);
		char a[32];

		for (size_t k = 0; k < n; k++)
			a[k] = (char)(k % 2 && lits[l][k] != '-' ? lits[l][k] - 32 : lits[l][k]);
		assert_true(rl_http_lit_eq(a, lits[l], n));
		for (size_t k = 0; k < n; k++) {
			char keep = a[k];

			for (unsigned b = 1; b < 256; b++) {
				a[k] = (char)b;
				/* names hold no control bytes (name_end stops) */
				if (b < 0x20 || b == 0x7f)
					continue;
				assert_int_equal(rl_http_lit_eq(a, lits[l], n),
						 rl_http_name_eq(a, n, lits[l], n));
			}
			a[k] = keep;
		}
	}
}

/* rl_http_name_end(), sixteen bytes at a time, ends a name where a byte
 * at a time does: every byte value at every offset, both sides of the
 * block edges. */
static void test_name_end_blocks(void **state)
{
	uint8_t buf[64];

	(void)state;
	for (unsigned b = 0; b < 256; b++) {
		for (size_t at = 0; at < 40; at++) {
			for (size_t start = 0; start < 3; start++) {
				size_t want = start;

				memset(buf, 'n', sizeof(buf));
				buf[start + at] = (uint8_t)b;
				while (want < 48 && buf[want] > 0x20 && buf[want] < 0x7f &&
				       buf[want] != ':')
					want++;
				assert_int_equal(rl_http_name_end(buf, start, 48), want);
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipelined_whole),
		cmocka_unit_test(test_last_request),
		cmocka_unit_test(test_answers),
		cmocka_unit_test(test_prefixes_of_good_heads),
		cmocka_unit_test(test_h2c_offers),
		cmocka_unit_test(test_every_split),
		cmocka_unit_test(test_framing_errors),
		cmocka_unit_test(test_chunk_ext_valid),
		cmocka_unit_test(test_chunk_ext_invalid),
		cmocka_unit_test(test_chunk_ext_limit),
		cmocka_unit_test(test_head_too_large),
		cmocka_unit_test(test_tls_passes),
		cmocka_unit_test(test_h2_preface),
		cmocka_unit_test(test_parse_fields),
		cmocka_unit_test(test_many_values),
		cmocka_unit_test(test_odd_names),
		cmocka_unit_test(test_methods),
		cmocka_unit_test(test_value_end_blocks),
		cmocka_unit_test(test_value_end_runs),
		cmocka_unit_test(test_may_end),
		cmocka_unit_test(test_lit_eq),
		cmocka_unit_test(test_name_end_blocks),
	};

	return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}
