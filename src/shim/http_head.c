/* SPDX-License-Identifier: MIT */
/*
 * http_head.c - parsing one complete request head: the request line, the
 * headers that frame the body, the headers rules are keyed by, and the
 * path normalised for matching.
 */
#include "http.h"

#include <errno.h>
#include <string.h>

#include "ascii.h"
#include "http_int.h"
#include "path.h"

static int bad(struct rl_http_req *req, const char *why)
{
	req->error = why;
	return -EINVAL;
}

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

/* A header the framer or the rules need? Dispatched by length first. */
static int header(struct rl_http_req *req, const struct rl_http_want *want,
		  const char *base, const char *name, size_t nlen,
		  const char *v, size_t vlen, uint8_t *te_seen,
		  uint8_t *chunked_last, uint8_t *chunked_seen, uint8_t *conn)
{
	if (nlen == 14 && rl_http_lit_eq(name, "content-length", 14)) {
		if (req->has_length)
			return bad(req, "repeated Content-Length");
		if (rl_http_parse_length(v, vlen, &req->content_length))
			return bad(req, "bad Content-Length");
		req->has_length = 1;
	} else if (nlen == 17 &&
		   rl_http_lit_eq(name, "transfer-encoding", 17)) {
		*te_seen = 1;
		if (rl_http_parse_codings(v, vlen, chunked_last, chunked_seen))
			return bad(req, "bad Transfer-Encoding");
	} else if (nlen == 7 && rl_http_lit_eq(name, "upgrade", 7)) {
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
	} else if (nlen == 10 && rl_http_lit_eq(name, "connection", 10)) {
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The first 64-byte block from p[k] with a CR LF CR LF ending in it (or
 * the last one before the end), thirty-two bytes a register. */
__attribute__((target("avx2"))) static size_t no_end_avx2(const uint8_t *p,
							  size_t k, size_t len)
{
	const __m256i lf = _mm256_set1_epi8('\n'), cr = _mm256_set1_epi8('\r');

	for (; k + 64 <= len; k += 64) {
		/* an LF whose byte two before is an LF, the two between CRs:
		 * tested loosely (LF at i and i - 2), exactly below */
		__m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(p + k));
		__m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + k + 32));
		uint64_t l = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(a, lf)) |
			     (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, lf)) << 32;
		uint64_t c = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(a, cr)) |
			     (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, cr)) << 32;

		if (l & (l << 2) & (c << 1))
			break;
		/* a blank line across the block's start */
		if (k && (l & 3) && (p[k - 1] == '\n' || p[k - 1] == '\r'))
			break;
	}
	return k;
}
#endif

/* The LF at p[e] ends a CR LF CR LF. */
static inline int blank_line_at(const uint8_t *p, size_t e)
{
	return e >= 3 && p[e - 1] == '\r' && p[e - 2] == '\n' && p[e - 3] == '\r';
}

int rl_http_may_end(const uint8_t *p, size_t len)
{
	size_t k = 0;

#if defined(__x86_64__) && defined(__GNUC__)
	if (len >= 128 && rl_http_avx2()) {
		k = no_end_avx2(p, 0, len);
		/* from a block before the one it stopped in: a blank line may
		 * straddle their edge */
		k = k >= 64 ? k - 64 : 0;
	}
#endif
	for (; k + 64 <= len; k += 64) {
		for (uint64_t m = rl_http_lf_mask64(p + k); m; m &= m - 1)
			if (blank_line_at(p, k + (size_t)__builtin_ctzll(m)))
				return 1;
	}
	for (; k < len; k++)
		if (p[k] == '\n' && blank_line_at(p, k))
			return 1;
	return 0;
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
	if (len >= 4 && memcmp(p, "GET ", 4) == 0)
		i = 3; /* the common method: where the loop would stop */
	while (i < len && rl_http_tchar[p[i]])
		i++;
	me = i;
	if (i == len)
		return more(req);
	if (me == ms || p[i] != ' ')
		return bad(req, "bad request line");
	if (me - ms < RL_METHOD_MAX) {
		/* A whole word where the head has it: one copy of a size the
		 * compiler knows, no call (bytes after the NUL are never
		 * read). */
		if (len - ms >= RL_METHOD_MAX)
			memcpy(req->method, h + ms, RL_METHOD_MAX);
		else
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
			 * name can start with it (as rl_http_name_end() reads
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
		i = rl_http_name_end(p, i, len);
		ne = i;
		if (i == len)
			return more(req);
		if (ne == ns || p[i] != ':')
			return bad(req, "bad header name");
		i++;
		while (i < len && (p[i] == ' ' || p[i] == '\t'))
			i++;
		vs = i;
		end = rl_http_value_end(p, i, len);
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
