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
			if (h->requests == 0 && h->blank_lines == 0 && c == 0x16) {
				/* A TLS handshake record: not ours to frame. */
				h->phase = RL_HTTP_PASS;
				out->used = i;
				out->event = RL_HTTP_EV_PASS;
				return;
			}
			if (!tchar[c])
				return fail(h, out, i, "not an HTTP request");
			h->phase = RL_HTTP_HEAD;
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
				h->phase = RL_HTTP_IDLE;
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
				h->phase = RL_HTTP_IDLE;
			continue;
		case RL_HTTP_CHUNK_SIZE:
			v = rl_ascii_hexval(c);
			if (v >= 0) {
				if (++h->ext_len > 15)
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
			/* fall through */
		case RL_HTTP_CHUNK_EXT:
			if (c == '\r') {
				h->phase = RL_HTTP_CHUNK_LF;
				i++;
				continue;
			}
			if (!value_byte(c))
				return fail(h, out, i, "bad chunk extension");
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
	h->blank_lines = 0;
	h->phase = RL_HTTP_IDLE;
}

void rl_http_pass(struct rl_http *h)
{
	h->phase = RL_HTTP_PASS;
}

void rl_http_begin_body(struct rl_http *h, const struct rl_http_req *req)
{
	h->remaining = 0;
	h->ext_len = 0;
	if (req->chunked) {
		h->phase = RL_HTTP_CHUNK_SIZE;
	} else if (req->has_length && req->content_length > 0) {
		h->phase = RL_HTTP_BODY;
		h->remaining = req->content_length;
	} else {
		/* RFC 9112 6.3: a request with neither has no body. */
		h->phase = RL_HTTP_IDLE;
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
static int header(struct rl_http_req *req, const struct rl_http_want *want,
		  const char *name, size_t nlen, const char *v, size_t vlen,
		  uint8_t *te_seen, uint8_t *chunked_last, uint8_t *chunked_seen)
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
		req->upgrade = 1;
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
	uint8_t te_seen = 0, chunked_last = 0, chunked_seen = 0;

	/* Only what a head may leave unset: the path is written in full
	 * below, the values only as counted. */
	req->method[0] = '\0';
	req->path[0] = '\0';
	req->path_len = 0;
	req->path_truncated = req->http10 = req->head = req->connect = 0;
	req->upgrade = req->preface = req->chunked = req->has_length = 0;
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
	 * time (the first flagged byte of a word is a true one) */
	while (i + 8 <= len) {
		uint64_t w, m;

		memcpy(&w, p + i, 8);
		m = rl_ascii_ctl8(w) | rl_ascii_byte8(w, ' ');
		if (m) {
			i += (size_t)__builtin_ctzll(m) / 8;
			break;
		}
		i += 8;
	}
	while (i < len && p[i] > 0x20 && p[i] != 0x7f)
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
	req->head = me - ms == 4 && memcmp(h + ms, "HEAD", 4) == 0;
	req->connect = me - ms == 7 && memcmp(h + ms, "CONNECT", 7) == 0;
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
			if (i < len && p[i] != '\r' && p[i] != ' ' &&
			    p[i] != '\t' && !tchar[p[i]])
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
		if (header(req, want, h + ns, ne - ns, h + vs, ve - vs, &te_seen,
			   &chunked_last, &chunked_seen))
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
	*used = i + 2;
	return 0;
}
