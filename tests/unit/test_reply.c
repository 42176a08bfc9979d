/* SPDX-License-Identifier: MIT */
/*
 * test_reply.c - the 429 and the 400, byte for byte, in every header style,
 * and into buffers of every size too small to hold them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"

#define SEC 1000000000ull
#define MS 1000000ull

/* DESIGN.md's example: rule "sms", 3/m, burst 3, denied. */
static const struct rl_rate sms_rate = {
	.period_ns = 60 * SEC, .count = 3, .burst = 3,
};
static const struct rl_result sms_res = {
	.allowed = 0,
	.limit = 3,
	.remaining = 0,
	.retry_after_ns = 19 * SEC + 200 * MS, /* 19.2 s -> 20 */
	.reset_after_ns = 59 * SEC + 100 * MS, /* 59.1 s -> 60 */
};
static const struct rl_reply_req req11 = { 0 };

#define FIXED_429(status)                                  \
	status " 429 Too Many Requests\r\n"                \
	"Content-Type: application/json\r\n"               \
	"Content-Length: 63\r\n"                           \
	"Connection: close\r\n"                            \
	"Cache-Control: no-store\r\n"
#define BODY_429                                           \
	"{\"error\":{\"code\":\"rate_limited\","             \
	"\"message\":\"too many requests\"}}"

static const char design_example[] =
	FIXED_429("HTTP/1.1")
	"Retry-After: 20\r\n"
	"RateLimit-Limit: 3\r\n"
	"RateLimit-Remaining: 0\r\n"
	"RateLimit-Reset: 60\r\n"
	"\r\n"
	BODY_429;

static void assert_reply(const char *buf, int n, const char *want)
{
	assert_true(n >= 0);
	if ((size_t)n != strlen(want) || memcmp(buf, want, (size_t)n) != 0)
		fail_msg("got (%d bytes):\n%.*s\nwant (%zu bytes):\n%s", n, n,
			 buf, strlen(want), want);
	assert_int_equal(buf[n], '\0');
}

static int build_429(char *buf, size_t len, const struct rl_reply_req *req,
		     const struct rl_result *res, enum rl_headers style,
		     int store_down)
{
	return rl_reply_429(buf, len, req, "sms", res, &sms_rate, style,
			    1700000000123ull, store_down);
}

static void test_design_example(void **state)
{
	char buf[RL_REPLY_MAX];
	int n;

	(void)state;
	assert_int_equal(strlen(BODY_429), 63);
	n = build_429(buf, sizeof(buf), &req11, &sms_res, RL_HEADERS_RATELIMIT,
		      0);
	assert_reply(buf, n, design_example);
	/* No request description reads as HTTP/1.1 GET. */
	n = build_429(buf, sizeof(buf), NULL, &sms_res, RL_HEADERS_RATELIMIT,
		      0);
	assert_reply(buf, n, design_example);
}

static void test_styles(void **state)
{
	char buf[RL_REPLY_MAX];
	int n;

	(void)state;
	n = build_429(buf, sizeof(buf), &req11, &sms_res, RL_HEADERS_IETF, 0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 20\r\n"
		     "RateLimit-Policy: \"sms\";q=3;w=60\r\n"
		     "RateLimit: \"sms\";r=0;t=20\r\n"
		     "\r\n" BODY_429);

	/* 1700000000.123 s + 59.1 s = 1700000059.223 -> ...060. */
	n = build_429(buf, sizeof(buf), &req11, &sms_res,
		      RL_HEADERS_XRATELIMIT, 0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 20\r\n"
		     "X-RateLimit-Limit: 3\r\n"
		     "X-RateLimit-Remaining: 0\r\n"
		     "X-RateLimit-Reset: 1700000060\r\n"
		     "\r\n" BODY_429);

	n = build_429(buf, sizeof(buf), &req11, &sms_res, RL_HEADERS_NONE, 0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 20\r\n"
		     "\r\n" BODY_429);

	/* A style this file does not know: Retry-After is always sent. */
	n = build_429(buf, sizeof(buf), &req11, &sms_res, (enum rl_headers)42,
		      0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 20\r\n"
		     "\r\n" BODY_429);
}

/* The X-RateLimit-Reset of rule "api" at `rate` with `res`, reset after
 * reset_ns, at now_ms: the line `want`. */
static void check_x_reset(struct rl_result res, const struct rl_rate *rate,
			  uint64_t reset_ns, uint64_t now_ms, const char *want)
{
	char buf[RL_REPLY_MAX];
	int n;

	res.reset_after_ns = reset_ns;
	n = rl_reply_429(buf, sizeof(buf), &req11, "api", &res, rate,
			 RL_HEADERS_XRATELIMIT, now_ms, 0);
	assert_true(n > 0);
	if (!strstr(buf, want))
		fail_msg("reset %llu ns at %llu ms: no \"%s\" in\n%s",
			 (unsigned long long)reset_ns, (unsigned long long)now_ms,
			 want, buf);
}

static void test_values(void **state)
{
	struct rl_result res = {
		.limit = 4294967295u,
		.remaining = 17,
		.retry_after_ns = 1,
		.reset_after_ns = 0,
	};
	struct rl_rate rate = { .period_ns = 100 * MS, .count = 10,
				.burst = 20 };
	char buf[RL_REPLY_MAX];
	int n;

	(void)state;
	n = build_429(buf, sizeof(buf), &req11, &res, RL_HEADERS_RATELIMIT, 0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 1\r\n"
		     "RateLimit-Limit: 4294967295\r\n"
		     "RateLimit-Remaining: 17\r\n"
		     "RateLimit-Reset: 0\r\n"
		     "\r\n" BODY_429);

	/* A sub-second period is still a window of at least 1 s. */
	res.reset_after_ns = 1;
	n = rl_reply_429(buf, sizeof(buf), &req11, "api", &res, &rate,
			 RL_HEADERS_IETF, 0, 0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 1\r\n"
		     "RateLimit-Policy: \"api\";q=10;w=1\r\n"
		     "RateLimit: \"api\";r=17;t=1\r\n"
		     "\r\n" BODY_429);

	/* The epoch rounds up, even by one nanosecond. */
	check_x_reset(res, &rate, 1, 5000, "\r\nX-RateLimit-Reset: 6\r\n");
	check_x_reset(res, &rate, 0, 5000, "\r\nX-RateLimit-Reset: 5\r\n");
	/* ... and saturates instead of wrapping. */
	check_x_reset(res, &rate, UINT64_MAX, UINT64_MAX - 5,
		      "\r\nX-RateLimit-Reset: 18446744073709552\r\n");
}

/* Retry-After for one retry_after_ns, from the RateLimit reply. */
static uint64_t retry_after(uint64_t ns)
{
	struct rl_result res = sms_res;
	char buf[RL_REPLY_MAX];
	const char *p;
	int n;

	res.retry_after_ns = ns;
	n = build_429(buf, sizeof(buf), &req11, &res, RL_HEADERS_RATELIMIT, 0);
	assert_true(n > 0);
	p = strstr(buf, "\r\nRetry-After: ");
	assert_non_null(p);
	return strtoull(p + 15, NULL, 10);
}

static void test_retry_after(void **state)
{
	(void)state;
	assert_int_equal(retry_after(20 * SEC), 20);  /* exact: no round up */
	assert_int_equal(retry_after(20 * SEC + 1), 21);
	assert_int_equal(retry_after(19 * SEC + 200 * MS), 20);
	assert_int_equal(retry_after(1 * MS), 1);
	assert_int_equal(retry_after(1), 1);
	assert_int_equal(retry_after(0), 1);          /* never 0 */
	assert_int_equal(retry_after(SEC), 1);
	assert_int_equal(retry_after(SEC + 1), 2);
	/* "Never" (cost above the bucket) and anything past a year: a year. */
	assert_int_equal(retry_after(UINT64_MAX), 86400ull * 365);
	assert_int_equal(retry_after(UINT64_MAX - 1), 86400ull * 365);
	assert_int_equal(retry_after(86400ull * 365 * SEC), 86400ull * 365);
	assert_int_equal(retry_after(86400ull * 365 * SEC - 1), 86400ull * 365);
	assert_int_equal(retry_after(86400ull * 364 * SEC), 86400ull * 364);
}

static void test_store_down(void **state)
{
	char buf[RL_REPLY_MAX];
	int n;

	(void)state;
	n = build_429(buf, sizeof(buf), &req11, &sms_res, RL_HEADERS_RATELIMIT,
		      1);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 1\r\n"
		     "RateLimit-Limit: 3\r\n"
		     "RateLimit-Remaining: 0\r\n"
		     "RateLimit-Reset: 60\r\n"
		     "\r\n" BODY_429);

	n = build_429(buf, sizeof(buf), &req11, &sms_res, RL_HEADERS_IETF, 1);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 1\r\n"
		     "RateLimit-Policy: \"sms\";q=3;w=60\r\n"
		     "RateLimit: \"sms\";r=0;t=1\r\n"
		     "\r\n" BODY_429);
}

static void test_http10_head(void **state)
{
	const struct rl_reply_req req10 = { .http10 = 1 };
	const struct rl_reply_req head = { .head = 1 };
	const struct rl_reply_req head10 = { .http10 = 1, .head = 1 };
	char buf[RL_REPLY_MAX];
	int n;

	(void)state;
	n = build_429(buf, sizeof(buf), &req10, &sms_res, RL_HEADERS_RATELIMIT,
		      0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.0")
		     "Retry-After: 20\r\n"
		     "RateLimit-Limit: 3\r\n"
		     "RateLimit-Remaining: 0\r\n"
		     "RateLimit-Reset: 60\r\n"
		     "\r\n" BODY_429);

	/* HEAD: the headers a GET would get, Content-Length included. */
	n = build_429(buf, sizeof(buf), &head, &sms_res, RL_HEADERS_RATELIMIT,
		      0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 20\r\n"
		     "RateLimit-Limit: 3\r\n"
		     "RateLimit-Remaining: 0\r\n"
		     "RateLimit-Reset: 60\r\n"
		     "\r\n");

	n = build_429(buf, sizeof(buf), &head10, &sms_res, RL_HEADERS_NONE, 0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.0")
		     "Retry-After: 20\r\n"
		     "\r\n");
}

static void test_rule_name_escaping(void **state)
{
	char buf[RL_REPLY_MAX];
	int n;

	(void)state;
	/* Config never admits these; a header must still stay one line. */
	n = rl_reply_429(buf, sizeof(buf), &req11, "a\"b\\c\r\nX: y\x80",
			 &sms_res, &sms_rate, RL_HEADERS_IETF, 0, 0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 20\r\n"
		     "RateLimit-Policy: \"a\\\"b\\\\c??X: y?\";q=3;w=60\r\n"
		     "RateLimit: \"a\\\"b\\\\c??X: y?\";r=0;t=20\r\n"
		     "\r\n" BODY_429);

	/* Cut at the longest rule name (31 bytes). */
	n = rl_reply_429(buf, sizeof(buf), &req11,
			 "abcdefghijklmnopqrstuvwxyz0123456789", &sms_res,
			 &sms_rate, RL_HEADERS_IETF, 0, 0);
	assert_true(n > 0);
	assert_non_null(strstr(
		buf, "RateLimit: \"abcdefghijklmnopqrstuvwxyz01234\";"));

	/* Missing inputs are not dereferenced. */
	n = rl_reply_429(buf, sizeof(buf), NULL, NULL, NULL, NULL,
			 RL_HEADERS_IETF, 0, 0);
	assert_reply(buf, n,
		     FIXED_429("HTTP/1.1")
		     "Retry-After: 1\r\n"
		     "RateLimit-Policy: \"\";q=0;w=1\r\n"
		     "RateLimit: \"\";r=0;t=1\r\n"
		     "\r\n" BODY_429);
}

/* ---- 400 ---- */

#define FIXED_400(status, len)                             \
	status " 400 Bad Request\r\n"                      \
	"Content-Type: application/json\r\n"               \
	"Content-Length: " len "\r\n"                      \
	"Connection: close\r\n"                            \
	"Cache-Control: no-store\r\n"                      \
	"\r\n"

static void test_400(void **state)
{
	const struct rl_reply_req req10 = { .http10 = 1 };
	const struct rl_reply_req head = { .head = 1 };
	static const char body[] =
		"{\"error\":{\"code\":\"bad_request\","
		"\"message\":\"bare LF in head\"}}";
	char buf[RL_REPLY_MAX];
	int n;

	(void)state;
	assert_int_equal(strlen(body), 60);
	n = rl_reply_400(buf, sizeof(buf), &req11, "bare LF in head");
	assert_reply(buf, n, FIXED_400("HTTP/1.1", "60") "{\"error\":{\"code\":"
		     "\"bad_request\",\"message\":\"bare LF in head\"}}");

	n = rl_reply_400(buf, sizeof(buf), &req10, "bare LF in head");
	assert_reply(buf, n, FIXED_400("HTTP/1.0", "60") "{\"error\":{\"code\":"
		     "\"bad_request\",\"message\":\"bare LF in head\"}}");

	n = rl_reply_400(buf, sizeof(buf), &head, "bare LF in head");
	assert_reply(buf, n, FIXED_400("HTTP/1.1", "60"));

	n = rl_reply_400(buf, sizeof(buf), NULL, NULL);
	assert_reply(buf, n, FIXED_400("HTTP/1.1", "45") "{\"error\":{\"code\":"
		     "\"bad_request\",\"message\":\"\"}}");
}

static void test_400_escaping(void **state)
{
	char why[300], want[1024];
	char buf[RL_REPLY_MAX];
	int n;

	(void)state;
	n = rl_reply_400(buf, sizeof(buf), &req11,
			 "a\"b\\c\nd\te\x01\x1f\x7f\xc3\xa9z");
	/* 45 + a \" b \\ c \u000a d \u0009 e \u0001 \u001f \u007f ? ? z */
	assert_reply(buf, n, FIXED_400("HTTP/1.1", "87") "{\"error\":{\"code\":"
		     "\"bad_request\",\"message\":\"a\\\"b\\\\c\\u000ad\\u0009e"
		     "\\u0001\\u001f\\u007f??z\"}}");

	/* Cut to 128 bytes of reason. */
	memset(why, 'x', sizeof(why) - 1);
	why[sizeof(why) - 1] = '\0';
	n = rl_reply_400(buf, sizeof(buf), &req11, why);
	snprintf(want, sizeof(want),
		 FIXED_400("HTTP/1.1", "173")
		 "{\"error\":{\"code\":\"bad_request\","
		 "\"message\":\"%.128s\"}}",
		 why);
	assert_reply(buf, n, want);

	/* The worst case (128 control characters) still fits RL_REPLY_MAX. */
	memset(why, '\n', 128);
	why[128] = '\0';
	n = rl_reply_400(buf, sizeof(buf), &req11, why);
	assert_true(n > 0);
	assert_true(n < RL_REPLY_MAX);
	assert_non_null(strstr(buf, "Content-Length: 813\r\n"));
}

/* ---- short buffers ---- */

/*
 * Build a reply into buffers of every size from 0 to its full length: each
 * must be -ENOSPC, and the byte just past the buffer (a canary in a heap
 * block of exactly len + 1, so ASan sees anything further) untouched. One
 * byte more than the reply (room for its NUL) is enough.
 */
static int build_any(char *buf, size_t len, int which)
{
	static const struct rl_reply_req head = { .head = 1 };
	static const struct rl_reply_req req10 = { .http10 = 1 };

	switch (which) {
	case 0:
		return build_429(buf, len, &req11, &sms_res,
				 RL_HEADERS_RATELIMIT, 0);
	case 1:
		return build_429(buf, len, &req11, &sms_res, RL_HEADERS_IETF,
				 0);
	case 2:
		return build_429(buf, len, &req10, &sms_res,
				 RL_HEADERS_XRATELIMIT, 0);
	case 3:
		return build_429(buf, len, &head, &sms_res, RL_HEADERS_NONE, 1);
	case 4:
		return rl_reply_400(buf, len, &req11, "a\"\\\n reason");
	default:
		return rl_reply_400(buf, len, &head, "head");
	}
}

static void test_short_buffers(void **state)
{
	char full[RL_REPLY_MAX];

	(void)state;
	for (int which = 0; which < 6; which++) {
		int total = build_any(full, sizeof(full), which);

		assert_true(total > 0);
		for (size_t len = 0; len <= (size_t)total + 1; len++) {
			char *buf = malloc(len + 1);
			int n;

			assert_non_null(buf);
			memset(buf, 0xa5, len + 1);
			n = build_any(buf, len, which);
			if (len <= (size_t)total) {
				assert_int_equal(n, -ENOSPC);
				assert_int_equal((unsigned char)buf[len], 0xa5);
			} else {
				assert_int_equal(n, total);
				assert_memory_equal(buf, full, (size_t)total);
				assert_int_equal(buf[total], '\0');
			}
			free(buf);
		}
	}
	/* No buffer at all. */
	assert_int_equal(rl_reply_429(NULL, 100, &req11, "sms", &sms_res,
				      &sms_rate, RL_HEADERS_RATELIMIT, 0, 0),
			 -ENOSPC);
	assert_int_equal(rl_reply_400(NULL, 100, &req11, "x"), -ENOSPC);
}

/* The largest 429 there is, for `req` (its body): every style's fields
 * at their longest beside it fit RL_REPLY_MAX. */
static void worst_fits(const struct rl_reply_req *req, int min)
{
	struct rl_result res = {
		.limit = UINT32_MAX,
		.remaining = UINT32_MAX,
		.retry_after_ns = UINT64_MAX - 1,
		.reset_after_ns = UINT64_MAX,
	};
	struct rl_rate rate = { .period_ns = UINT64_MAX, .count = UINT32_MAX,
				.burst = UINT32_MAX };
	char name[RL_RULE_NAME_MAX];
	char buf[RL_REPLY_MAX];
	int n;

	memset(name, '"', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	for (int style = 0; style <= 3; style++) {
		n = rl_reply_429(buf, sizeof(buf), req, name, &res, &rate,
				 (enum rl_headers)style, UINT64_MAX, 0);
		assert_true(n > min);
		assert_true(n < RL_REPLY_MAX);
	}
}

static void test_worst_case_fits(void **state)
{
	struct rl_reply_req html = { .html = 1 };

	(void)state;
	worst_fits(&req11, 0);
	worst_fits(&html, 0);
}

/* Date (RFC 9110 6.6.1) on both replies, as IMF-fixdate, whatever the
 * process's locale and time zone. */
static void test_date(void **state)
{
	static const struct {
		uint64_t ms;
		const char *date;
	} cases[] = {
		{ 1796115600000ull, "Date: Tue, 01 Dec 2026 09:00:00 GMT\r\n" },
		{ 951782400000ull, "Date: Tue, 29 Feb 2000 00:00:00 GMT\r\n" },
		{ 4102444799999ull, "Date: Thu, 31 Dec 2099 23:59:59 GMT\r\n" },
		{ 1709296496000ull, "Date: Fri, 01 Mar 2024 12:34:56 GMT\r\n" },
	};
	char buf[RL_REPLY_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rl_reply_req r = { .wall_ms = cases[i].ms };

		assert_true(rl_reply_429(buf, sizeof(buf), &r, "sms", &sms_res,
					 &sms_rate, RL_HEADERS_RATELIMIT,
					 cases[i].ms, 0) > 0);
		assert_non_null(strstr(buf, cases[i].date));
		assert_non_null(strstr(buf, "Connection: close\r\nDate: "));
		assert_true(rl_reply_400(buf, sizeof(buf), &r, "bad") > 0);
		assert_non_null(strstr(buf, cases[i].date));
	}
}

/* ---- a browser's 429, and a rule's own bodies ---- */

#define HTML_PAGE(p, retry)                                                  \
	"<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">"  \
	"<title>429 Too Many Requests</title></head>\n<body>\n"              \
	"<h1>Too Many Requests</h1>\n" p "<p>Please try again in " retry     \
	".</p>\n</body>\n</html>\n"

/* Content-Length is the body's, the body is `body` (HEAD: none). */
static void assert_body(const char *buf, int n, const char *type,
			const char *body, int head)
{
	char want[64];
	const char *b;

	assert_true(n > 0);
	snprintf(want, sizeof(want), "Content-Type: %s\r\n", type);
	assert_non_null(strstr(buf, want));
	snprintf(want, sizeof(want), "Content-Length: %zu\r\n", strlen(body));
	assert_non_null(strstr(buf, want));
	b = strstr(buf, "\r\n\r\n");
	assert_non_null(b);
	assert_string_equal(b + 4, head ? "" : body);
}

static void test_html(void **state)
{
	struct rl_reply_req html = { .html = 1 }, html_head = { .html = 1, .head = 1 };
	struct rl_result one = sms_res;
	char buf[RL_REPLY_MAX];
	int n;

	(void)state;
	n = build_429(buf, sizeof(buf), &html, &sms_res, RL_HEADERS_RATELIMIT, 0);
	assert_body(buf, n, "text/html; charset=utf-8",
		    HTML_PAGE("<p>More requests came from you than this site allows.</p>\n",
			      "20 seconds"), 0);
	/* the same fields as the JSON answer */
	assert_non_null(strstr(buf, "Retry-After: 20\r\nRateLimit-Limit: 3\r\n"
				    "RateLimit-Remaining: 0\r\nRateLimit-Reset: 60\r\n"));
	one.retry_after_ns = 1;
	n = build_429(buf, sizeof(buf), &html, &one, RL_HEADERS_NONE, 0);
	assert_body(buf, n, "text/html; charset=utf-8",
		    HTML_PAGE("<p>More requests came from you than this site allows.</p>\n",
			      "1 second"), 0);
	n = build_429(buf, sizeof(buf), &html, &sms_res, RL_HEADERS_NONE, 1);
	assert_body(buf, n, "text/html; charset=utf-8",
		    HTML_PAGE("<p>This site cannot check its request limits right now.</p>\n",
			      "1 second"), 0);
	n = build_429(buf, sizeof(buf), &html_head, &sms_res, RL_HEADERS_NONE, 0);
	assert_body(buf, n, "text/html; charset=utf-8",
		    HTML_PAGE("<p>More requests came from you than this site allows.</p>\n",
			      "20 seconds"), 1);
}

static void test_own_body(void **state)
{
	static char big[RL_DENY_BODY_MAX + 1];
	struct rl_reply_req r = { .body = "{\"busy\":true}", .body_len = 13 };
	char buf[RL_REPLY_MAX];
	int n;

	(void)state;
	n = build_429(buf, sizeof(buf), &r, &sms_res, RL_HEADERS_RATELIMIT, 0);
	assert_body(buf, n, "application/json", "{\"busy\":true}", 0);
	r.html = 1;
	r.body = "<p>slow down</p>";
	r.body_len = 16;
	n = build_429(buf, sizeof(buf), &r, &sms_res, RL_HEADERS_RATELIMIT, 0);
	assert_body(buf, n, "text/html; charset=utf-8", "<p>slow down</p>", 0);
	/* the longest body a file may hold fits beside the longest fields */
	memset(big, 'x', RL_DENY_BODY_MAX);
	r.body = big;
	r.body_len = RL_DENY_BODY_MAX;
	worst_fits(&r, RL_DENY_BODY_MAX);
}

static int prefers(const char *fields)
{
	char head[2048];

	snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: h\r\n%s\r\n", fields);
	return rl_reply_prefers_html((const uint8_t *)head, strlen(head));
}

static void test_prefers_html(void **state)
{
	(void)state;
	/* browsers */
	assert_int_equal(prefers("Accept: text/html,application/xhtml+xml,"
				 "application/xml;q=0.9,*/*;q=0.8\r\n"), 1);
	assert_int_equal(prefers("Accept: text/html,application/xhtml+xml,"
				 "application/xml;q=0.9,image/avif,image/webp,"
				 "image/apng,*/*;q=0.8,application/signed-exchange;"
				 "v=b3;q=0.7\r\n"), 1);
	assert_int_equal(prefers("aCCEPT:TEXT/HTML\r\n"), 1);
	assert_int_equal(prefers("Accept: text/*\r\n"), 1);
	assert_int_equal(prefers("Accept: application/json;q=0.5, text/html\r\n"), 1);
	/* API clients, curl, no Accept, ties */
	assert_int_equal(prefers(""), 0);
	assert_int_equal(prefers("Accept: */*\r\n"), 0);
	assert_int_equal(prefers("Accept: application/json\r\n"), 0);
	assert_int_equal(prefers("Accept: application/json, text/html\r\n"), 0);
	assert_int_equal(prefers("Accept: text/html;q=0.9, */*\r\n"), 0);
	assert_int_equal(prefers("Accept: text/html;q=0\r\n"), 0);
	assert_int_equal(prefers("Accept: text/html;level=1;q=0.5, application/*;q=0.4\r\n"), 1);
	assert_int_equal(prefers("Accept: text/html;q=0.4, application/*;q=0.5\r\n"), 0);
	/* the most specific range decides, not the largest q */
	assert_int_equal(prefers("Accept: */*;q=1, text/html;q=0.1\r\n"), 0);
	/* two fields are one list */
	assert_int_equal(prefers("Accept: application/json;q=0.2\r\nAccept: text/html\r\n"), 1);
	/* not Accept: Accept-Language, X-Accept, a value that only says it */
	assert_int_equal(prefers("Accept-Language: text/html\r\n"), 0);
	assert_int_equal(prefers("X-Accept: text/html\r\n"), 0);
	assert_int_equal(prefers("Referer: http://x/?Accept: text/html\r\n"), 0);
	/* malformed: no answer of its own */
	assert_int_equal(prefers("Accept: text/html;q=2\r\n"), 0);
	assert_int_equal(prefers("Accept: text/html;q=0.12345\r\n"), 0);
	assert_int_equal(prefers("Accept: texthtml\r\n"), 0);
	assert_int_equal(prefers("Accept: ,,, ; ;q=\r\n"), 0);
	assert_int_equal(rl_reply_prefers_html(NULL, 0), 0);
	assert_int_equal(rl_reply_prefers_html((const uint8_t *)"Accept: text/html", 17), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_design_example),
		cmocka_unit_test(test_date),
		cmocka_unit_test(test_styles),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_store_down),
		cmocka_unit_test(test_http10_head),
		cmocka_unit_test(test_rule_name_escaping),
		cmocka_unit_test(test_400),
		cmocka_unit_test(test_400_escaping),
		cmocka_unit_test(test_short_buffers),
		cmocka_unit_test(test_worst_case_fits),
		cmocka_unit_test(test_html),
		cmocka_unit_test(test_own_body),
		cmocka_unit_test(test_prefers_html),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
