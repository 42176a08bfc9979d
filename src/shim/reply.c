/* SPDX-License-Identifier: MIT */
/*
 * reply.c - the shim's own responses, byte for byte as DESIGN.md "The
 * denial" shows them.
 *
 * They are written by the shim into a connection the application owns, from
 * inside one of its read calls, so nothing here allocates, takes a lock or
 * reads a clock: the caller passes the wall time. Output goes through a
 * small bounded appender rather than snprintf chains, so a short buffer is
 * one -ENOSPC and never a partial write past its end.
 */
#include "reply.h"

#include <errno.h>
#include <string.h>

#include "clock.h"

/* Retry-After for a request that can never pass (cost above the bucket):
 * a year, rather than a number no client expects. */
#define RETRY_AFTER_CAP_SEC (86400ull * 365)

/* The part of a 400's reason that goes into its body, before escaping. */
#define WHY_MAX 128

static const char body_429[] =
	"{\"error\":{\"code\":\"rate_limited\",\"message\":"
	"\"too many requests\"}}";
static const char body_400_head[] =
	"{\"error\":{\"code\":\"bad_request\",\"message\":\"";
static const char body_400_tail[] = "\"}}";

/* ---- a bounded appender ---- */

/*
 * Writes into buf[0..len) and always keeps one byte back for the NUL, so a
 * finished reply is a C string as well (handy for logs and tests) and its
 * length is < len, as reply.h promises. Once something does not fit, the
 * appender stops writing and remembers it.
 */
struct out {
	char *buf;
	size_t len;
	size_t pos;
	int full;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->full)
		return;
	if (n >= o->len - o->pos) {
		o->full = 1;
		return;
	}
	memcpy(o->buf + o->pos, s, n);
	o->pos += n;
}

static void put_str(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void put_char(struct out *o, char c)
{
	put(o, &c, 1);
}

static void put_u64(struct out *o, uint64_t v)
{
	char tmp[20]; /* UINT64_MAX has 20 digits */
	size_t i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(o, tmp + i, sizeof(tmp) - i);
}

/* A header line "name: value\r\n" with a decimal value, `name` a string
 * literal: one bounds check, its length known (the line goes into every
 * allowed answer with headers_on = all). */
#define put_field_u64(o, name, v) \
	put_field_n((o), name ": ", sizeof(name ": ") - 1, (v))

static void put_field_n(struct out *o, const char *name, size_t n, uint64_t v)
{
	char tmp[20]; /* UINT64_MAX has 20 digits */
	size_t i = sizeof(tmp), d;

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	d = sizeof(tmp) - i;
	if (o->full || n + d + 2 >= o->len - o->pos) {
		o->full = 1;
		return;
	}
	memcpy(o->buf + o->pos, name, n);
	memcpy(o->buf + o->pos + n, tmp + i, d);
	memcpy(o->buf + o->pos + n + d, "\r\n", 2);
	o->pos += n + d + 2;
}

/*
 * A structured-field string (RFC 8941 sf-string) holding a rule name.
 * Config only admits [A-Za-z0-9_.-], but this ends up in a header, so
 * anything else is made harmless here too: '"' and '\' escaped as the
 * syntax wants, bytes sf-string cannot carry (controls, CR, LF, non-ASCII)
 * replaced by '?', and the name cut at the longest a rule name can be.
 */
static void put_sf_string(struct out *o, const char *s)
{
	size_t n = strnlen(s, RL_RULE_NAME_MAX - 1);

	put_char(o, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			put_char(o, '\\');
			put_char(o, (char)c);
		} else if (c < 0x20 || c > 0x7e) {
			put_char(o, '?');
		} else {
			put_char(o, (char)c);
		}
	}
	put_char(o, '"');
}

static int finish(struct out *o)
{
	if (o->full)
		return -ENOSPC;
	o->buf[o->pos] = '\0';
	return (int)o->pos;
}

static void put_status(struct out *o, const struct rl_reply_req *req,
		       const char *status)
{
	put_str(o, req && req->http10 ? "HTTP/1.0 " : "HTTP/1.1 ");
	put_str(o, status);
	put(o, "\r\n", 2);
}

static void put_2(struct out *o, unsigned v)
{
	put_char(o, (char)('0' + v / 10 % 10));
	put_char(o, (char)('0' + v % 10));
}

/* Date: IMF-fixdate (RFC 9110 5.6.7), "Sun, 06 Nov 1994 08:49:37 GMT",
 * from the epoch without the C library's locale or time zone. */
static void put_date(struct out *o, uint64_t wall_ms)
{
	static const char wd[] = "SunMonTueWedThuFriSat";
	static const char mon[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	struct rl_civil c;

	rl_time_civil(wall_ms, &c);
	put_str(o, "Date: ");
	put(o, wd + 3 * c.wday, 3);
	put_str(o, ", ");
	put_2(o, c.day);
	put_char(o, ' ');
	put(o, mon + 3 * (c.month - 1), 3);
	put_char(o, ' ');
	put_u64(o, c.year);
	put_char(o, ' ');
	put_2(o, c.hour);
	put_char(o, ':');
	put_2(o, c.min);
	put_char(o, ':');
	put_2(o, c.sec);
	put_str(o, " GMT\r\n");
}

static const char type_json[] = "application/json";
static const char type_html[] = "text/html; charset=utf-8";

/* The headers both replies share: a body of `body_len` bytes of `type`
 * on a connection that is about to close, which no cache may keep. */
static void put_fixed_fields(struct out *o, const struct rl_reply_req *req,
			     const char *type, size_t body_len)
{
	put_str(o, "Content-Type: ");
	put_str(o, type);
	put(o, "\r\n", 2);
	put_field_u64(o, "Content-Length", body_len);
	put_str(o, "Connection: close\r\n");
	if (req && req->wall_ms)
		put_date(o, req->wall_ms);
	put_str(o, "Cache-Control: no-store\r\n");
}

/* ---- 429 ---- */

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

/* Whole seconds, rounded up, never 0 (a client told 0 retries at once),
 * and capped for "never". */
static uint64_t retry_after_sec(const struct rl_result *res, int store_down)
{
	uint64_t s;

	if (store_down)
		return 1;
	if (res->retry_after_ns == UINT64_MAX)
		return RETRY_AFTER_CAP_SEC;
	s = rl_time_ceil_sec(res->retry_after_ns);
	if (s == 0)
		return 1;
	return s < RETRY_AFTER_CAP_SEC ? s : RETRY_AFTER_CAP_SEC;
}

/* GitHub's X-RateLimit-Reset: the Unix time, in seconds rounded up, at
 * which the bucket is full again. Saturates rather than wraps. */
static uint64_t reset_epoch_sec(uint64_t wall_ms, uint64_t reset_after_ns)
{
	uint64_t reset_ms = ceil_div(reset_after_ns, RL_NS_PER_MS);
	uint64_t at_ms = wall_ms + reset_ms;

	if (at_ms < wall_ms)
		at_ms = UINT64_MAX;
	return ceil_div(at_ms, 1000);
}

/*
 * The fields of `style` for rule `rule_name` with `res`: the 429's, and
 * those headers_on = all inserts into allowed answers. `t` is the IETF
 * RateLimit field's t: Retry-After on a 429, the reset on an allowed
 * answer.
 */
static void put_fields(struct out *o, const char *rule_name,
		       const struct rl_result *res, const struct rl_rate *rate,
		       enum rl_headers style, uint64_t wall_ms, uint64_t t)
{
	switch (style) {
	case RL_HEADERS_RATELIMIT:
		put_field_u64(o, "RateLimit-Limit", res->limit);
		put_field_u64(o, "RateLimit-Remaining", res->remaining);
		put_field_u64(o, "RateLimit-Reset",
			      rl_time_ceil_sec(res->reset_after_ns));
		break;
	case RL_HEADERS_IETF: {
		/* draft-ietf-httpapi-ratelimit-headers-10: the policy is
		 * q units per w seconds; w is an integer of at least 1. */
		uint64_t w = rl_time_ceil_sec(rate->period_ns);

		put_str(o, "RateLimit-Policy: ");
		put_sf_string(o, rule_name);
		put_str(o, ";q=");
		put_u64(o, rate->count);
		put_str(o, ";w=");
		put_u64(o, w ? w : 1);
		put(o, "\r\n", 2);

		put_str(o, "RateLimit: ");
		put_sf_string(o, rule_name);
		put_str(o, ";r=");
		put_u64(o, res->remaining);
		put_str(o, ";t=");
		put_u64(o, t);
		put(o, "\r\n", 2);
		break;
	}
	case RL_HEADERS_XRATELIMIT:
		put_field_u64(o, "X-RateLimit-Limit", res->limit);
		put_field_u64(o, "X-RateLimit-Remaining", res->remaining);
		put_field_u64(o, "X-RateLimit-Reset",
			      reset_epoch_sec(wall_ms, res->reset_after_ns));
		break;
	case RL_HEADERS_NONE:
	default:
		break;
	}
}

/* The page a browser gets: what happened and when to try again. */
static const char html_head[] =
	"<!DOCTYPE html>\n"
	"<html lang=\"en\">\n"
	"<head><meta charset=\"utf-8\"><title>429 Too Many Requests</title></head>\n"
	"<body>\n"
	"<h1>Too Many Requests</h1>\n";
static const char html_over[] =
	"<p>More requests came from you than this site allows.</p>\n";
static const char html_down[] =
	"<p>This site cannot check its request limits right now.</p>\n";
static const char html_tail[] = "</body>\n</html>\n";

static size_t html_429(char *page, size_t cap, uint64_t retry, int store_down)
{
	struct out o = { .buf = page, .len = cap };

	put(&o, html_head, sizeof(html_head) - 1);
	if (store_down)
		put(&o, html_down, sizeof(html_down) - 1);
	else
		put(&o, html_over, sizeof(html_over) - 1);
	put_str(&o, "<p>Please try again in ");
	put_u64(&o, retry);
	put_str(&o, retry == 1 ? " second.</p>\n" : " seconds.</p>\n");
	put(&o, html_tail, sizeof(html_tail) - 1);
	return o.full ? 0 : o.pos;
}

int rl_reply_429(char *buf, size_t len, const struct rl_reply_req *req,
		 const char *rule_name, const struct rl_result *res,
		 const struct rl_rate *rate, enum rl_headers style,
		 uint64_t wall_ms, int store_down)
{
	/* A caller bug must not crash the server the shim lives in: missing
	 * inputs read as zeros (Retry-After still comes out as 1). */
	static const struct rl_result no_res;
	static const struct rl_rate no_rate;
	struct out o = { .buf = buf, .len = buf ? len : 0, .full = !buf };
	const char *body = body_429;
	size_t body_len = sizeof(body_429) - 1;
	char page[sizeof(html_head) + sizeof(html_over) + sizeof(html_down) +
		  sizeof(html_tail) + 40];
	uint64_t retry;
	int html;

	if (!res)
		res = &no_res;
	if (!rate)
		rate = &no_rate;
	if (!rule_name)
		rule_name = "";
	retry = retry_after_sec(res, store_down);
	html = req && req->html;
	if (req && req->body) {
		body = req->body;
		body_len = req->body_len;
	} else if (html) {
		body_len = html_429(page, sizeof(page), retry, store_down);
		body = page;
	}

	put_status(&o, req, "429 Too Many Requests");
	put_fixed_fields(&o, req, html ? type_html : type_json, body_len);
	put_field_u64(&o, "Retry-After", retry);

	put_fields(&o, rule_name, res, rate, style, wall_ms, retry);

	put(&o, "\r\n", 2);
	if (!(req && req->head))
		put(&o, body, body_len);
	return finish(&o);
}

int rl_reply_fields(char *buf, size_t len, const char *rule_name,
		    const struct rl_result *res, const struct rl_rate *rate,
		    enum rl_headers style, uint64_t wall_ms)
{
	struct out o = { .buf = buf, .len = len };

	put_fields(&o, rule_name, res, rate, style, wall_ms,
		   rl_time_ceil_sec(res->reset_after_ns));
	return finish(&o);
}

/* ---- 400 ---- */

/*
 * JSON string content for `why`: '"' and '\' escaped, control characters
 * as \u00XX. Bytes past ASCII become '?', so a reason cut at WHY_MAX (or
 * not UTF-8 at all) can never make the body invalid JSON. `dst` holds at
 * least 6 * WHY_MAX bytes. Returns the length.
 */
static size_t json_escape(char *dst, const char *why)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strnlen(why, WHY_MAX);
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)why[i];

		if (c == '"' || c == '\\') {
			dst[k++] = '\\';
			dst[k++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			memcpy(dst + k, "\\u00", 4);
			dst[k + 4] = hex[c >> 4];
			dst[k + 5] = hex[c & 0xf];
			k += 6;
		} else if (c > 0x7f) {
			dst[k++] = '?';
		} else {
			dst[k++] = (char)c;
		}
	}
	return k;
}

int rl_reply_400(char *buf, size_t len, const struct rl_reply_req *req,
		 const char *why)
{
	struct out o = { .buf = buf, .len = buf ? len : 0, .full = !buf };
	char msg[6 * WHY_MAX];
	size_t msg_len = json_escape(msg, why ? why : "");
	size_t body_len = sizeof(body_400_head) - 1 + msg_len +
			  sizeof(body_400_tail) - 1;

	put_status(&o, req, "400 Bad Request");
	put_fixed_fields(&o, req, type_json, body_len);
	put(&o, "\r\n", 2);
	if (!(req && req->head)) {
		put(&o, body_400_head, sizeof(body_400_head) - 1);
		put(&o, msg, msg_len);
		put(&o, body_400_tail, sizeof(body_400_tail) - 1);
	}
	return finish(&o);
}

/* ---- Accept ---- */

static int lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int ows(uint8_t c)
{
	return c == ' ' || c == '\t';
}

/* p[0..n) is `word` in any case. */
static int same(const uint8_t *p, size_t n, const char *word)
{
	size_t k = strlen(word);

	if (n != k)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (lower(p[i]) != (uint8_t)word[i])
			return 0;
	return 1;
}

/* A qvalue (RFC 9110 12.4.2) in thousandths, or -1. */
static int qvalue(const uint8_t *p, size_t n)
{
	int q, scale = 100;

	if (!n || (p[0] != '0' && p[0] != '1'))
		return -1;
	q = (p[0] - '0') * 1000;
	if (n == 1)
		return q;
	if (p[1] != '.' || n > 5)
		return -1;
	for (size_t i = 2; i < n; i++, scale /= 10) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		q += (p[i] - '0') * scale;
	}
	return q > 1000 ? -1 : q;
}

/* How well media range p[0..n) ("type/sub;params") names type/sub: 3
 * exactly, 2 as type/x, 1 as x/x, 0 not; its q in *q. */
static int range_match(const uint8_t *p, size_t n, const char *type,
		       const char *sub, int *q)
{
	size_t e = 0, slash, tl, sl;
	int how;

	while (e < n && p[e] != ';')
		e++;
	tl = e;
	while (tl && ows(p[tl - 1]))
		tl--;
	for (slash = 0; slash < tl && p[slash] != '/'; slash++)
		;
	if (slash == tl)
		return 0;
	sl = tl - slash - 1;
	if (same(p, slash, "*") && sl == 1 && p[slash + 1] == '*')
		how = 1;
	else if (!same(p, slash, type))
		return 0;
	else if (sl == 1 && p[slash + 1] == '*')
		how = 2;
	else if (same(p + slash + 1, sl, sub))
		how = 3;
	else
		return 0;
	*q = 1000;
	while (e < n) { /* ";" params: q, the others ignored */
		size_t s = ++e, v;

		while (e < n && p[e] != ';')
			e++;
		while (s < e && ows(p[s]))
			s++;
		v = e;
		while (v > s && ows(p[v - 1]))
			v--;
		if (v - s >= 2 && lower(p[s]) == 'q' && p[s + 1] == '=') {
			*q = qvalue(p + s + 2, v - s - 2);
			if (*q < 0)
				return 0;
		}
	}
	return how;
}

struct pref {
	int how, q;
};

/* One Accept value's ranges, each list member against html and json. */
static void accept_value(const uint8_t *p, size_t n, struct pref *html,
			 struct pref *json)
{
	size_t s = 0;

	while (s < n) {
		size_t e = s;
		int how, q;

		while (e < n && p[e] != ',')
			e++;
		while (s < e && ows(p[s]))
			s++;
		if ((how = range_match(p + s, e - s, "text", "html", &q)) &&
		    how > html->how)
			html->how = how, html->q = q;
		if ((how = range_match(p + s, e - s, "application", "json", &q)) &&
		    how > json->how)
			json->how = how, json->q = q;
		s = e + 1;
	}
}

int rl_reply_prefers_html(const uint8_t *head, size_t len)
{
	struct pref html = { 0, 0 }, json = { 0, 0 };
	size_t i = 0;

	/* past the request line: each field line "Name: value" */
	while (i < len && head[i] != '\n')
		i++;
	while (++i < len) {
		size_t s = i, colon;

		while (i < len && head[i] != '\n')
			i++;
		for (colon = s; colon < i && head[colon] != ':'; colon++)
			;
		if (colon < i && same(head + s, colon - s, "accept")) {
			size_t v = colon + 1, e = i;

			if (e > v && head[e - 1] == '\r')
				e--;
			accept_value(head + v, e - v, &html, &json);
		}
	}
	return html.how && html.q > 0 && html.q > (json.how ? json.q : 0);
}
