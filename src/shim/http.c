/* SPDX-License-Identifier: MIT */
/*
 * http.c - the request framer (RFC 9112), strict where leniency could let a
 * request past the shim uncounted.
 *
 * The scanner keeps a few bytes of state so that any split of the stream,
 * down to one byte per call, frames exactly as the whole would. Heads are
 * only delimited by the scanner; the caller keeps each head contiguous and
 * hands it to rl_http_parse_head() once complete.
 */
#include "http.h"

#include <errno.h>
#include <string.h>

#include "ascii.h"
#include "path.h"

/* value_end() reads words and takes the first flagged byte as the lowest. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the word-at-a-time scans assume little-endian");

/* ---- character classes --------------------------------------------------- */

/* RFC 9110 tchar: "!#$%&'*+-.^_`|~" DIGIT ALPHA */
static const uint8_t tchar[256] = {
	['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1,
	['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1,
	['`'] = 1, ['|'] = 1, ['~'] = 1,
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1,
	['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
	['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1,
	['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1,
	['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1,
	['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
	['Y'] = 1, ['Z'] = 1,
	['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1,
	['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1,
	['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1,
	['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
	['y'] = 1, ['z'] = 1,
};

/* Field-value bytes: VCHAR, obs-text, SP, HTAB. No CTL, no DEL. */
static inline int value_byte(uint8_t c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

int rl_http_is_token(uint8_t c)
{
	return tchar[c];
}

int rl_http_name_eq(const char *a, size_t alen, const char *b, size_t blen)
{
	if (alen != blen)
		return 0;
	for (size_t i = 0; i < alen; i++)
		if (rl_ascii_lower((uint8_t)a[i]) != rl_ascii_lower((uint8_t)b[i]))
			return 0;
	return 1;
}

/* ---- the scanner --------------------------------------------------------- */

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

/*
 * A trailer line may not fold and may carry no control character but HTAB
 * and its CRLF. Checked byte by byte over p[0..len), the trailer bytes only
 * (trailers are rare), continuing from `line` bytes into the current line
 * with `prev` the byte before p[0]. Returns the offset of the first bad
 * byte, or -1.
 */
static ssize_t trailer_check(struct rl_http *h, const uint8_t *p, size_t len,
			     uint32_t line, uint8_t prev)
{
	for (size_t i = 0; i < len; prev = p[i], i++) {
		uint8_t c = p[i];

		if (prev == '\r' && c != '\n') {
			h->error = "bare CR in trailer";
			return (ssize_t)i;
		}
		if (c == '\n') {
			line = 0;
			continue;
		}
		if (line == 0 && (c == ' ' || c == '\t')) {
			h->error = "obs-fold in trailer";
			return (ssize_t)i;
		}
		if (c != '\r' && !value_byte(c)) {
			h->error = "control character in trailer";
			return (ssize_t)i;
		}
		line++;
	}
	return -1;
}

/*
 * The rest of a chunk-size line after its digits, RFC 9112 7.1.1 exactly:
 *
 *   chunk-line     = chunk-size [ chunk-ext ] CRLF
 *   chunk-ext      = *( BWS ";" BWS chunk-ext-name
 *                       [ BWS "=" BWS chunk-ext-val ] )
 *   chunk-ext-name = token
 *   chunk-ext-val  = token / quoted-string
 *
 * BWS comes only before and after ";" and "=": whitespace before the CRLF
 * ("a \r\n", "2;a \r\n") is not in the grammar, nor is an empty name or
 * value. One byte at a time, with the state in h->ext.
 */
enum chunk_ext {
	EXT_AFTER = 0, /* after the size, a value or its closing quote */
	EXT_WS,        /* whitespace there: a ";" must follow */
	EXT_NAME_BWS,  /* after ";": whitespace, then a name */
	EXT_NAME,      /* in a name */
	EXT_NAME_WS,   /* whitespace after a name: "=" or ";" must follow */
	EXT_VAL_BWS,   /* after "=": whitespace, then a token or a quote */
	EXT_TOKEN,     /* in a token value */
	EXT_QUOTED,    /* in a quoted-string */
	EXT_QPAIR,     /* after its backslash */
};

/* 1: the CR ending the line; 0: c is valid, more to come; -1: invalid. */
static int chunk_ext_byte(struct rl_http *h, uint8_t c)
{
	int ws = c == ' ' || c == '\t';

	switch ((enum chunk_ext)h->ext) {
	case EXT_TOKEN:
		if (tchar[c])
			return 0;
		/* fall through */
	case EXT_AFTER:
		if (c == '\r')
			return 1;
		/* fall through */
	case EXT_WS:
		if (c == ';')
			h->ext = EXT_NAME_BWS;
		else if (ws)
			h->ext = EXT_WS;
		else
			return -1;
		return 0;
	case EXT_NAME_BWS:
		if (tchar[c])
			h->ext = EXT_NAME;
		else if (!ws)
			return -1;
		return 0;
	case EXT_NAME:
		if (tchar[c])
			return 0;
		if (c == '\r')
			return 1;
		/* fall through */
	case EXT_NAME_WS:
		if (c == '=')
			h->ext = EXT_VAL_BWS;
		else if (c == ';')
			h->ext = EXT_NAME_BWS;
		else if (ws)
			h->ext = EXT_NAME_WS;
		else
			return -1;
		return 0;
	case EXT_VAL_BWS:
		if (tchar[c])
			h->ext = EXT_TOKEN;
		else if (c == '"')
			h->ext = EXT_QUOTED;
		else if (!ws)
			return -1;
		return 0;
	case EXT_QUOTED:
		/* qdtext: HTAB, SP, VCHAR but DQUOTE and "\", obs-text */
		if (c == '"')
			h->ext = EXT_AFTER;
		else if (c == '\\')
			h->ext = EXT_QPAIR;
		else if (!value_byte(c))
			return -1;
		return 0;
	case EXT_QPAIR:
		/* quoted-pair: "\" ( HTAB / SP / VCHAR / obs-text ) */
		if (!value_byte(c))
			return -1;
		h->ext = EXT_QUOTED;
		return 0;
	}
	return -1;
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
		int v;

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
			if ((h->requests == 0 || h->tunnel) && h->blank_lines == 0 &&
			    c == 0x16) {
				/* A TLS handshake record: not ours to frame. */
				h->phase = RL_HTTP_PASS;
				out->used = i;
				out->event = RL_HTTP_EV_PASS;
				return;
			}
			if (!tchar[c])
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
				ssize_t bad = trailer_check(h, p + from, i - from,
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
			v = rl_ascii_hexval(c);
			if (v >= 0) {
				/* Leading zeros are digits like any (RFC 9112
				 * 7.1: 1*HEXDIG), so only the value is bounded
				 * (below 2^60), and the line's length. */
				if (++h->ext_len > RL_CHUNK_EXT_MAX)
					return fail(h, out, i, "chunk size too long");
				if (h->remaining >= (1ull << 56))
					return fail(h, out, i, "chunk size too large");
				h->remaining = (h->remaining << 4) | (uint64_t)v;
				i++;
				continue;
			}
			if (h->ext_len == 0)
				return fail(h, out, i, "bad chunk size");
			h->ext_len = 0;
			if (c == '\r') {
				h->phase = RL_HTTP_CHUNK_LF;
				i++;
				continue;
			}
			if (c != ';' && c != ' ' && c != '\t')
				return fail(h, out, i, "bad chunk size");
			h->phase = RL_HTTP_CHUNK_EXT;
			h->ext = EXT_AFTER;
			/* fall through */
		case RL_HTTP_CHUNK_EXT:
			v = chunk_ext_byte(h, c);
			if (v < 0)
				return fail(h, out, i, "bad chunk extension");
			if (v > 0) {
				h->phase = RL_HTTP_CHUNK_LF;
				i++;
				continue;
			}
			if (++h->ext_len > RL_CHUNK_EXT_MAX)
				return fail(h, out, i, "chunk extension too long");
			i++;
			continue;
		case RL_HTTP_CHUNK_LF:
			if (c != '\n')
				return fail(h, out, i, "bare CR in chunk size line");
			i++;
			if (h->remaining == 0) {
				h->phase = RL_HTTP_TRAILER;
				h->head_len = 0;
				h->line_len = 0;
				h->prev = '\n';
			} else {
				h->phase = RL_HTTP_CHUNK_DATA;
			}
			continue;
		case RL_HTTP_CHUNK_DATA:
			take = h->remaining < len - i ? h->remaining : len - i;
			h->remaining -= take;
			i += take;
			if (h->remaining == 0)
				h->phase = RL_HTTP_CHUNK_DCR;
			continue;
		case RL_HTTP_CHUNK_DCR:
			if (c != '\r')
				return fail(h, out, i, "chunk data longer than its size");
			h->phase = RL_HTTP_CHUNK_DLF;
			i++;
			continue;
		case RL_HTTP_CHUNK_DLF:
			if (c != '\n')
				return fail(h, out, i, "bare CR after chunk data");
			h->phase = RL_HTTP_CHUNK_SIZE;
			h->remaining = 0;
			h->ext_len = 0;
			i++;
			continue;
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

/* ---- the head ------------------------------------------------------------ */

static int bad(struct rl_http_req *req, const char *why)
{
	req->error = why;
	return -EINVAL;
}

/* The value of Content-Length: 1*DIGIT, nothing else, below 2^62. */
static int parse_length(const char *v, size_t n, uint64_t *out)
{
	uint64_t x = 0;

	if (n == 0 || n > 19)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	if (x >= (1ull << 62))
		return -1;
	*out = x;
	return 0;
}

/*
 * Transfer-Encoding: a list of codings, each a token with optional
 * parameters. Tracks whether "chunked" was seen and whether it is the last
 * coding so far; a coding after chunked, or chunked twice, is an error.
 */
static int parse_codings(const char *v, size_t n, uint8_t *chunked_last,
			 uint8_t *chunked_seen)
{
	size_t i = 0;

	while (i < n) {
		size_t s, e;

		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		if (i == n)
			break;
		s = i;
		while (i < n && tchar[(uint8_t)v[i]])
			i++;
		e = i;
		if (e == s)
			return -1;
		/* parameters: skip to the next comma */
		while (i < n && v[i] != ',')
			i++;
		if (*chunked_seen)
			return -1; /* anything after chunked */
		if (rl_http_name_eq(v + s, e - s, "chunked", 7)) {
			*chunked_seen = 1;
			*chunked_last = 1;
		} else {
			*chunked_last = 0;
		}
	}
	return 0;
}

/*
 * The end of a field value starting at p[i]: the offset of its CR, found
 * and checked in one pass, eight bytes at a time: the first control
 * character in a word is either the CR that ends the value, an HTAB (a
 * value byte: look on after it), or an error. -1 on a control character (a
 * bare LF among them), -2 when the bytes end first.
 */
static ssize_t value_end(const uint8_t *p, size_t i, size_t len)
{
#ifdef __SSE2__
	while (i + 16 <= len) {
		uint32_t m = rl_ascii_ctl16(p + i);

		if (!m) {
			i += 16;
			continue;
		}
		i += (size_t)__builtin_ctz(m);
		if (p[i] == '\r')
			return (ssize_t)i;
		if (p[i] != '\t')
			return -1;
		i++;
	}
#endif
	while (i + 8 <= len) {
		uint64_t w, m;

		memcpy(&w, p + i, 8);
		m = rl_ascii_ctl8(w);
		if (!m) {
			i += 8;
			continue;
		}
		/* the first flagged byte (little-endian: lowest set bit) */
		i += (size_t)__builtin_ctzll(m) / 8;
		if (p[i] == '\r')
			return (ssize_t)i;
		if (p[i] != '\t')
			return -1;
		i++;
	}
	for (; i < len; i++) {
		if (p[i] == '\r')
			return (ssize_t)i;
		if (!value_byte(p[i]))
			return -1;
	}
	return -2;
}

/*
 * The end of a field name starting at p[i]: the first byte that is a
 * control character, a space, a colon or above 0x7e, eight at a time. A
 * name is good if that byte is its colon. Names are not held to RFC 9110's
 * token characters: what matters is that nothing in a name can make a
 * lenient server see a Content-Length or Transfer-Encoding the shim did not
 * (whitespace, controls, bytes beyond ASCII); a name with a '(' is just a
 * header nobody asks for, as nginx treats it.
 */
static size_t name_end(const uint8_t *p, size_t i, size_t len)
{
	while (i + 8 <= len) {
		uint64_t w, m;

		memcpy(&w, p + i, 8);
		m = rl_ascii_ctl8(w) | rl_ascii_byte8(w, ' ') |
		    rl_ascii_byte8(w, ':') | (w & 0x8080808080808080ull);
		if (m)
			return i + (size_t)__builtin_ctzll(m) / 8;
		i += 8;
	}
	while (i < len && p[i] > 0x20 && p[i] < 0x7f && p[i] != ':')
		i++;
	return i;
}

/* A header the framer or the rules need? Dispatched by length first. */
/*
 * Call `fn` for each element of a comma-separated list (RFC 9110 5.6.1),
 * whitespace around it dropped; stops early when it returns non-zero.
 */
static int each_token(const char *v, size_t n,
		      int (*fn)(const char *t, size_t tlen, void *arg), void *arg)
{
	size_t i = 0;

	while (i < n) {
		size_t s, e;
		int r;

		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > s && (r = fn(v + s, e - s, arg)))
			return r;
	}
	return 0;
}

/* Upgrade: where "h2c" is offered, whatever follows its name (lighttpd
 * upgrades on "h2c;q=1"; RFC 9110 7.8 allows "name/version"), and how many
 * times. */
struct h2c_offers {
	const char *at;
	unsigned n;
};

static int h2c_token(const char *t, size_t n, void *arg)
{
	struct h2c_offers *o = arg;

	if (n < 3 || !rl_http_name_eq(t, 3, "h2c", 3) ||
	    (n > 3 && t[3] != ';' && t[3] != '/' && t[3] != ' ' && t[3] != '\t'))
		return 0;
	if (!o->n++)
		o->at = t;
	return 0;
}

static int header(struct rl_http_req *req, const struct rl_http_want *want,
		  const char *base, const char *name, size_t nlen,
		  const char *v, size_t vlen, uint8_t *te_seen,
		  uint8_t *chunked_last, uint8_t *chunked_seen, uint8_t *conn)
{
	if (nlen == 14 && rl_http_name_eq(name, nlen, "content-length", 14)) {
		if (req->has_length)
			return bad(req, "repeated Content-Length");
		if (parse_length(v, vlen, &req->content_length))
			return bad(req, "bad Content-Length");
		req->has_length = 1;
	} else if (nlen == 17 &&
		   rl_http_name_eq(name, nlen, "transfer-encoding", 17)) {
		*te_seen = 1;
		if (parse_codings(v, vlen, chunked_last, chunked_seen))
			return bad(req, "bad Transfer-Encoding");
	} else if (nlen == 7 && rl_http_name_eq(name, nlen, "upgrade", 7)) {
		struct h2c_offers o = { NULL, 0 };

		req->upgrade = 1;
		each_token(v, vlen, h2c_token, &o);
		if (o.n) {
			/* One offer is blanked where it stands; a second
			 * one could only be there to get past that. */
			if (req->h2c_at || o.n > 1)
				return bad(req, "h2c offered twice");
			req->h2c_at = (uint32_t)(o.at - base);
		}
	} else if (nlen == 10 && rl_http_name_eq(name, nlen, "connection", 10)) {
		/* The last request only where every server agrees it is:
		 * one Connection field, exactly "close" (nginx reads the last
		 * field and looks for "close" in it, Python compares the first
		 * one whole, lighttpd and apache read tokens). Anything else
		 * keeps the connection as the version says, and the requests
		 * after it are framed and counted. */
		*conn = *conn ? 4 : (rl_http_name_eq(v, vlen, "close", 5) ? 1 : 2);
	}
	for (unsigned w = 0; want && w < want->n; w++) {
		unsigned k;

		if (want->len[w] != nlen ||
		    !rl_http_name_eq(name, nlen, want->name[w], want->len[w]))
			continue;
		/* keep the last RL_WANT_VALUES occurrences */
		k = req->nvalues[w] < RL_WANT_VALUES ? req->nvalues[w]
						      : RL_WANT_VALUES - 1;
		if (req->nvalues[w] >= RL_WANT_VALUES)
			memmove(&req->values[w][0], &req->values[w][1],
				sizeof(req->values[w][0]) * (RL_WANT_VALUES - 1));
		req->values[w][k].p = v;
		req->values[w][k].len = (uint32_t)vlen;
		req->nvalues[w]++;
	}
	return 0;
}

/* 8 bytes of a name, letters in lower case (the names compared here have
 * only letters and '-', which the OR leaves alone). */
static inline uint64_t lower8(const uint8_t *p)
{
	uint64_t w;

	memcpy(&w, p, 8);
	return w | 0x2020202020202020ull;
}

static inline uint64_t word8(const char *s)
{
	uint64_t w;

	memcpy(&w, s, 8);
	return w;
}

/* A bit for each LF among p[0..16). */
#ifdef __SSE2__
#include <emmintrin.h>
static inline uint32_t lf_mask16(const uint8_t *p)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);

	return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n')));
}
#else
static inline uint32_t lf_mask16(const uint8_t *p)
{
	uint32_t m = 0;

	for (int j = 0; j < 16; j++)
		m |= (uint32_t)(p[j] == '\n') << j;
	return m;
}
#endif

/* One header line of an answer, [i, e) with e its LF: only what frames
 * the body is read. 0, or -EINVAL. */
static int answer_line(const uint8_t *p, size_t i, size_t e,
		       struct rl_http_answer *a, uint8_t *te,
		       uint8_t *chunked_last, uint8_t *chunked_seen)
{
	size_t vs, ve;

	if (p[e - 1] != '\r' || e - i < 2)
		return -EINVAL;
	if (e - i > 15 && p[i + 14] == ':' && lower8(p + i) == word8("content-") &&
	    (lower8(p + i + 6) >> 16) == (word8("t-length") >> 16)) {
		uint64_t n;

		for (vs = i + 15; p[vs] == ' ' || p[vs] == '\t'; vs++)
			;
		for (ve = e - 1; ve > vs && (p[ve - 1] == ' ' || p[ve - 1] == '\t'); ve--)
			;
		if (parse_length((const char *)p + vs, ve - vs, &n) ||
		    (a->has_length && n != a->length))
			return -EINVAL;
		a->has_length = 1;
		a->length = n;
	} else if (e - i > 18 && p[i + 17] == ':' &&
		   lower8(p + i) == word8("transfer") &&
		   lower8(p + i + 8) == word8("-encodin") && (p[i + 16] | 0x20) == 'g') {
		*te = 1;
		if (parse_codings((const char *)p + i + 18, e - 1 - (i + 18),
				  chunked_last, chunked_seen))
			return -EINVAL;
	}
	return 0;
}

int rl_http_answer_prefix(const uint8_t *p, size_t len,
			  struct rl_http_answer *a, size_t *used)
{
	uint8_t chunked_last = 0, chunked_seen = 0, te = 0;
	size_t ls = 0, k = 12;

	a->status = 0;
	a->chunked = a->has_length = 0;
	a->length = 0;
	if (len < 14)
		return -EAGAIN;
	if (memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9' ||
	    p[8] != ' ' || p[9] < '0' || p[9] > '9' || p[10] < '0' ||
	    p[10] > '9' || p[11] < '0' || p[11] > '9')
		return -EINVAL;
	a->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	/* Lines by their LF, sixteen bytes at a time: a bit per LF. */
	for (;;) {
		uint32_t m = 0;

		if (k + 16 <= len) {
			m = lf_mask16(p + k);
		} else if (k < len) {
			for (size_t j = 0; j < len - k; j++)
				m |= (uint32_t)(p[k + j] == '\n') << j;
		} else {
			return -EAGAIN;
		}
		while (m) {
			size_t e = k + (size_t)__builtin_ctz(m);

			m &= m - 1;
			if (ls == 0) {
				if (p[e - 1] != '\r')
					return -EINVAL;
			} else if (e == ls + 1 && p[ls] == '\r') {
				if (te) {
					a->has_length = 0;
					a->chunked = chunked_last;
					a->length = 0;
				}
				*used = e + 1;
				return 0;
			} else if (answer_line(p, ls, e, a, &te, &chunked_last,
					       &chunked_seen)) {
				return -EINVAL;
			}
			ls = e + 1;
		}
		k += 16;
	}
}

int rl_http_parse_answer(const uint8_t *p, size_t len, struct rl_http_answer *a)
{
	uint8_t chunked_last = 0, chunked_seen = 0, te = 0;
	const uint8_t *nl;
	size_t i;

	a->status = 0;
	a->chunked = a->has_length = 0;
	a->length = 0;
	/* status-line = HTTP-version SP 3DIGIT SP [ reason ] CRLF */
	if (len < 14 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9' ||
	    p[8] != ' ')
		return -EINVAL;
	for (i = 9; i < 12; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -EINVAL;
		a->status = a->status * 10 + (p[i] - '0');
	}
	nl = memchr(p, '\n', len);
	if (!nl)
		return -EINVAL;
	i = (size_t)(nl - p) + 1;
	while (i + 2 <= len && !(p[i] == '\r' && p[i + 1] == '\n')) {
		size_t ns = i, ne, vs, ve;
		ssize_t end;

		ne = name_end(p, i, len);
		if (ne == ns || ne >= len || p[ne] != ':')
			return -EINVAL;
		vs = ne + 1;
		while (vs < len && (p[vs] == ' ' || p[vs] == '\t'))
			vs++;
		end = value_end(p, vs, len);
		if (end < 0 || (size_t)end + 1 >= len || p[end + 1] != '\n')
			return -EINVAL;
		ve = (size_t)end;
		i = ve + 2;
		while (ve > vs && (p[ve - 1] == ' ' || p[ve - 1] == '\t'))
			ve--;
		if (ne - ns == 14 &&
		    rl_http_name_eq((const char *)p + ns, 14, "content-length", 14)) {
			uint64_t n;

			if (parse_length((const char *)p + vs, ve - vs, &n) ||
			    (a->has_length && n != a->length))
				return -EINVAL;
			a->has_length = 1;
			a->length = n;
		} else if (ne - ns == 17 &&
			   rl_http_name_eq((const char *)p + ns, 17,
					   "transfer-encoding", 17)) {
			te = 1;
			if (parse_codings((const char *)p + vs, ve - vs,
					  &chunked_last, &chunked_seen))
				return -EINVAL;
		}
	}
	if (i + 2 != len)
		return -EINVAL;
	if (te) {
		/* RFC 9112 6.3: chunked last frames it; else to the end */
		a->has_length = 0;
		a->chunked = chunked_last;
		a->length = 0;
	}
	return 0;
}

int rl_http_parse_head(const uint8_t *p, size_t len,
		       const struct rl_http_want *want,
		       struct rl_http_req *req)
{
	size_t used;
	int rc = rl_http_parse_prefix(p, len, want, req, &used);

	if (rc == -EAGAIN || (rc == 0 && used != len))
		return bad(req, "truncated head");
	return rc;
}

/* Out of bytes while all was valid so far: the head goes on. */
static int more(struct rl_http_req *req)
{
	req->error = "incomplete head";
	return -EAGAIN;
}

int rl_http_parse_prefix(const uint8_t *p, size_t len,
			 const struct rl_http_want *want,
			 struct rl_http_req *req, size_t *used)
{
	const char *h = (const char *)p;
	size_t i = 0, ms, me, ts, te;
	uint8_t te_seen = 0, chunked_last = 0, chunked_seen = 0, conn = 0;

	/* Only what a head may leave unset: the path is written in full
	 * below, the values only as counted. */
	req->method[0] = '\0';
	req->path[0] = '\0';
	req->path_len = 0;
	req->path_truncated = req->http10 = req->head = req->connect = 0;
	req->upgrade = req->preface = req->chunked = req->has_length = 0;
	req->last = 0;
	req->h2c_at = 0;
	req->content_length = 0;
	req->error = NULL;
	memset(req->nvalues, 0, sizeof(req->nvalues));
	if (len > RL_HEAD_MAX + 2)
		len = RL_HEAD_MAX + 2; /* past that it is too large anyway */

	/* request-line = method SP request-target SP HTTP-version CRLF */
	ms = i;
	while (i < len && tchar[p[i]])
		i++;
	me = i;
	if (i == len)
		return more(req);
	if (me == ms || p[i] != ' ')
		return bad(req, "bad request line");
	if (me - ms < RL_METHOD_MAX) {
		memcpy(req->method, h + ms, me - ms);
		req->method[me - ms] = '\0';
	}
	ts = ++i;
	/* the target runs to the first space or control byte, eight at a
	 * time (the first flagged byte of a word is a true one). A '#' or a
	 * byte beyond ASCII ends it too, as an error: no client sends them
	 * (RFC 3986), and servers read them differently (busybox resolves
	 * "/x#/../a" to /a, Python's split takes \xa0 and \x85 for spaces) */
	while (i + 8 <= len) {
		uint64_t w, m;

		memcpy(&w, p + i, 8);
		m = rl_ascii_ctl8(w) | rl_ascii_byte8(w, ' ') |
		    rl_ascii_byte8(w, '#') | (w & 0x8080808080808080ull);
		if (m) {
			i += (size_t)__builtin_ctzll(m) / 8;
			break;
		}
		i += 8;
	}
	while (i < len && p[i] > 0x20 && p[i] < 0x7f && p[i] != '#')
		i++;
	te = i;
	if (i == len)
		return more(req);
	if (te == ts || p[i] != ' ')
		return bad(req, "bad request target");
	i++;
	if (len - i < 10) {
		/* a prefix of a version line, or not one at all */
		static const char v[] = "HTTP/1.0\r\n";

		for (size_t k = 0; k < len - i; k++)
			if (p[i + k] != (uint8_t)v[k] && !(k == 5 && p[i + k] == '2') &&
			    !(k == 7 && p[i + k] >= '0' && p[i + k] <= '9'))
				return bad(req, "unsupported HTTP version");
		return more(req);
	}
	if (memcmp(h + i, "HTTP/1.", 7) == 0 &&
	    p[i + 7] >= '0' && p[i + 7] <= '9' && p[i + 8] == '\r' &&
	    p[i + 9] == '\n') {
		req->http10 = p[i + 7] == '0';
		i += 10;
	} else if (memcmp(h + i, "HTTP/2.0\r\n", 10) == 0 &&
		   me - ms == 3 && memcmp(h + ms, "PRI", 3) == 0 &&
		   te - ts == 1 && h[ts] == '*') {
		/* the preface's head is the request line and an empty line */
		if (len - i < 12)
			return more(req);
		if (p[i + 10] != '\r' || p[i + 11] != '\n')
			return bad(req, "unsupported HTTP version");
		req->preface = 1;
		*used = i + 12;
		return 0;
	} else {
		return bad(req, "unsupported HTTP version");
	}
	/* Methods are told apart in any letter case: some servers do. */
	req->head = rl_http_name_eq(h + ms, me - ms, "HEAD", 4);
	req->connect = rl_http_name_eq(h + ms, me - ms, "CONNECT", 7);
	if (want && !want->need_path && h[ts] == '/') {
		/* an origin-form target, and no rule looks at paths */
		req->path[0] = '/';
		req->path[1] = '\0';
		req->path_len = 1;
	} else if (rl_path_normalize(h + ts, te - ts, req->path,
				     sizeof(req->path), &req->path_len,
				     &req->path_truncated)) {
		return bad(req, "bad request target");
	}
	/* authority-form (no path) is for CONNECT only */
	if (req->path_len == 0 && !req->connect)
		return bad(req, "bad request target");

	/* header lines, up to the empty line */
	for (;;) {
		size_t ns, ne, vs, ve;
		ssize_t end;

		if (i + 2 > len) {
			/* one byte of the next line: refused only if no
			 * name can start with it (as name_end() reads
			 * names), so that a prefix is never refused where
			 * the whole head is not */
			if (i < len && (p[i] == ':' || p[i] >= 0x7f ||
					(p[i] < 0x20 && p[i] != '\r' && p[i] != '\t')))
				return bad(req, "bad header name");
			return i + 2 > RL_HEAD_MAX + 2 ? bad(req, "request head too large")
						       : more(req);
		}
		if (p[i] == '\r' && p[i + 1] == '\n')
			break;
		if (p[i] == ' ' || p[i] == '\t')
			return bad(req, "obs-fold in head");
		ns = i;
		i = name_end(p, i, len);
		ne = i;
		if (i == len)
			return more(req);
		if (ne == ns || p[i] != ':')
			return bad(req, "bad header name");
		i++;
		while (i < len && (p[i] == ' ' || p[i] == '\t'))
			i++;
		vs = i;
		end = value_end(p, i, len);
		if (end == -1)
			return bad(req, "control character in header");
		if (end == -2 || (size_t)end + 1 == len)
			return more(req);
		if (p[end + 1] != '\n')
			return bad(req, "bare CR in head");
		ve = (size_t)end;
		i = ve + 2;
		while (ve > vs && (p[ve - 1] == ' ' || p[ve - 1] == '\t'))
			ve--;
		if (header(req, want, h, h + ns, ne - ns, h + vs, ve - vs,
			   &te_seen, &chunked_last, &chunked_seen, &conn))
			return -EINVAL;
	}
	if (i + 2 > RL_HEAD_MAX)
		return bad(req, "request head too large");
	if (te_seen) {
		if (req->has_length)
			return bad(req, "Content-Length with Transfer-Encoding");
		if (req->http10)
			return bad(req, "Transfer-Encoding in HTTP/1.0");
		if (!chunked_last)
			return bad(req, "Transfer-Encoding not ending in chunked");
		req->chunked = 1;
	}
	/* conn: 0 no Connection field, 1 exactly "close", 2 another value,
	 * 4 more than one field */
	req->last = conn == 1 || (req->http10 && conn == 0);
	*used = i + 2;
	return 0;
}
