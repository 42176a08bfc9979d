/* SPDX-License-Identifier: MIT */
/*
 * jwt.c - a claim of an HS256 (or unverified) JWT: base64url, a small
 * bounded JSON reader, the signature and the time claims.
 *
 * Everything is read from hostile bytes over (pointer, length), nothing
 * past the length. The JSON reader is RFC 8259 without extensions: one
 * value per document, no trailing commas, no comments, no leading zeros or
 * '+', strings of valid UTF-8 (no overlong forms, no encoded surrogates,
 * nothing past U+10FFFF) with the eight escapes and \uXXXX, a surrogate
 * pair decoded to one code point and a lone surrogate refused. Values
 * nested deeper than RL_JWT_DEPTH_MAX are refused, so the recursion is
 * bounded. RFC 7519 section 4 lets a parser refuse a repeated member
 * name, and we do (at the top level, after decoding escapes: "s\u0075b"
 * is "sub"), for a reader that took the first and an issuer's library that
 * took the last would let an attacker's second "sub" choose the key.
 * Repeats are found by a 64-bit hash of each decoded name; two different
 * names with one hash count as a repeat (refused, never accepted).
 */
#include "jwt.h"

#include <errno.h>
#include <string.h>

#include "ascii.h"
#include "hash.h"

/* ---- base64url ---- */

/* Each byte's value in the base64url alphabet, 64 for every other byte
 * (read-only: a table, not state). */
#define X64 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64
static const uint8_t B64[256] = {
	X64, X64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 62, 64, 64,
	52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 64, 64, 64, 64, 64, 64,
	64, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
	15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 64, 64, 64, 64, 63,
	64, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
	41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 64, 64, 64, 64, 64,
	X64, X64, X64, X64, X64, X64, X64, X64,
};

static int b64val(uint8_t c)
{
	return B64[c] == 64 ? -1 : B64[c];
}

int rl_jwt_b64url_decode(const char *s, size_t len, uint8_t *out, size_t cap,
			 size_t *outlen)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t full = len / 4, rest = len % 4, n = full * 3, i, o = 0;
	uint32_t v = 0;

	if (rest == 1)
		return -EINVAL;
	n += rest ? rest - 1 : 0;
	if (n > cap)
		return -ENOSPC;
	for (i = 0; i < full * 4; i += 4) {
		uint32_t a = B64[p[i]], b = B64[p[i + 1]];
		uint32_t c = B64[p[i + 2]], d = B64[p[i + 3]];

		if ((a | b | c | d) & 64)
			return -EINVAL;
		v = a << 18 | b << 12 | c << 6 | d;
		out[o++] = (uint8_t)(v >> 16);
		out[o++] = (uint8_t)(v >> 8);
		out[o++] = (uint8_t)v;
	}
	if (rest) {
		int a = b64val(p[i]), b = b64val(p[i + 1]);
		int c = rest == 3 ? b64val(p[i + 2]) : 0;

		if ((a | b | c) < 0)
			return -EINVAL;
		v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6;
		/* the bits past the last whole byte must be zero */
		if (rest == 2 ? (v & 0xffff) : (v & 0xff))
			return -EINVAL;
		out[o++] = (uint8_t)(v >> 16);
		if (rest == 3)
			out[o++] = (uint8_t)(v >> 8);
	}
	*outlen = o;
	return 0;
}

int rl_jwt_b64url_encode(const void *in, size_t len, char *out, size_t cap,
			 size_t *outlen)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				  "0123456789-_";
	const uint8_t *p = in;
	size_t n = len / 3 * 4 + (len % 3 ? len % 3 + 1 : 0), o = 0, i;

	if (n > cap)
		return -ENOSPC;
	for (i = 0; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = abc[(v >> 6) & 63];
		out[o++] = abc[v & 63];
	}
	if (len - i == 1) {
		out[o++] = abc[p[i] >> 2];
		out[o++] = abc[(p[i] & 3) << 4];
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)p[i] << 8 | p[i + 1];

		out[o++] = abc[v >> 10];
		out[o++] = abc[(v >> 4) & 63];
		out[o++] = abc[(v & 15) << 2];
	}
	*outlen = o;
	return 0;
}

/* ---- JSON ---- */

struct jr {
	const uint8_t *p;
	size_t n, i;
};

/* Where a string's decoded bytes go: up to `cap` into `out` (which may be
 * NULL), all of them counted in `len` and hashed (FNV-1a). */
struct sink {
	uint8_t *out;
	size_t cap, len;
	uint64_t hash;
};

#define FNV_BASIS 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static void put(struct sink *k, uint8_t c)
{
	if (!k)
		return;
	if (k->out && k->len < k->cap)
		k->out[k->len] = c;
	k->len++;
	k->hash = (k->hash ^ c) * FNV_PRIME;
}

static void put_cp(struct sink *k, uint32_t cp)
{
	if (cp < 0x80) {
		put(k, (uint8_t)cp);
	} else if (cp < 0x800) {
		put(k, (uint8_t)(0xc0 | cp >> 6));
		put(k, (uint8_t)(0x80 | (cp & 63)));
	} else if (cp < 0x10000) {
		put(k, (uint8_t)(0xe0 | cp >> 12));
		put(k, (uint8_t)(0x80 | ((cp >> 6) & 63)));
		put(k, (uint8_t)(0x80 | (cp & 63)));
	} else {
		put(k, (uint8_t)(0xf0 | cp >> 18));
		put(k, (uint8_t)(0x80 | ((cp >> 12) & 63)));
		put(k, (uint8_t)(0x80 | ((cp >> 6) & 63)));
		put(k, (uint8_t)(0x80 | (cp & 63)));
	}
}

static void ws(struct jr *r)
{
	while (r->i < r->n && (r->p[r->i] == ' ' || r->p[r->i] == '\t' ||
			       r->p[r->i] == '\n' || r->p[r->i] == '\r'))
		r->i++;
}

/* Four hex digits after "\u", or -1. */
static int32_t hex4(struct jr *r)
{
	int32_t v = 0;

	if (r->n - r->i < 4)
		return -1;
	for (int k = 0; k < 4; k++) {
		int h = rl_ascii_hexval(r->p[r->i++]);

		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

/* The escape after a backslash (r->i at the byte after it). */
static int escape(struct jr *r, struct sink *k)
{
	int32_t cp, lo;

	if (r->i >= r->n)
		return -EINVAL;
	switch (r->p[r->i++]) {
	case '"': put(k, '"'); return 0;
	case '\\': put(k, '\\'); return 0;
	case '/': put(k, '/'); return 0;
	case 'b': put(k, '\b'); return 0;
	case 'f': put(k, '\f'); return 0;
	case 'n': put(k, '\n'); return 0;
	case 'r': put(k, '\r'); return 0;
	case 't': put(k, '\t'); return 0;
	case 'u': break;
	default: return -EINVAL;
	}
	cp = hex4(r);
	if (cp < 0 || (cp >= 0xdc00 && cp <= 0xdfff))
		return -EINVAL; /* a low surrogate first */
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (r->n - r->i < 2 || r->p[r->i] != '\\' || r->p[r->i + 1] != 'u')
			return -EINVAL; /* a lone high surrogate */
		r->i += 2;
		lo = hex4(r);
		if (lo < 0xdc00 || lo > 0xdfff)
			return -EINVAL;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	put_cp(k, (uint32_t)cp);
	return 0;
}

/* One UTF-8 sequence of 2-4 bytes starting at r->i (RFC 3629 section 4). */
static int utf8(struct jr *r, struct sink *k)
{
	uint8_t c = r->p[r->i], lo = 0x80, hi = 0xbf;
	size_t need;

	if (c >= 0xc2 && c <= 0xdf)
		need = 1;
	else if (c >= 0xe0 && c <= 0xef)
		need = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		need = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return -EINVAL;
	if (r->n - r->i <= need)
		return -EINVAL;
	put(k, c);
	r->i++;
	for (size_t j = 0; j < need; j++, lo = 0x80, hi = 0xbf) {
		uint8_t d = r->p[r->i];

		if (d < lo || d > hi)
			return -EINVAL;
		put(k, d);
		r->i++;
	}
	return 0;
}

/* A string, r->i at its opening quote; decoded into `k` (may be NULL). */
static int string(struct jr *r, struct sink *k)
{
	r->i++;
	while (r->i < r->n) {
		uint8_t c = r->p[r->i];
		int rc;

		if (c == '"') {
			r->i++;
			return 0;
		}
		if (c < 0x20)
			return -EINVAL;
		if (c == '\\') {
			r->i++;
			rc = escape(r, k);
		} else if (c >= 0x80) {
			rc = utf8(r, k);
		} else {
			put(k, c);
			r->i++;
			rc = 0;
		}
		if (rc)
			return rc;
	}
	return -EINVAL;
}

static size_t digits(struct jr *r)
{
	size_t start = r->i;

	while (r->i < r->n && r->p[r->i] >= '0' && r->p[r->i] <= '9')
		r->i++;
	return r->i - start;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? ; sets *integral when
 * there is neither a fraction nor an exponent. */
static int number(struct jr *r, int *integral)
{
	size_t start;

	*integral = 1;
	if (r->i < r->n && r->p[r->i] == '-')
		r->i++;
	start = r->i;
	if (!digits(r) || (r->p[start] == '0' && r->i - start > 1))
		return -EINVAL;
	if (r->i < r->n && r->p[r->i] == '.') {
		r->i++;
		if (!digits(r))
			return -EINVAL;
		*integral = 0;
	}
	if (r->i < r->n && (r->p[r->i] == 'e' || r->p[r->i] == 'E')) {
		r->i++;
		if (r->i < r->n && (r->p[r->i] == '+' || r->p[r->i] == '-'))
			r->i++;
		if (!digits(r))
			return -EINVAL;
		*integral = 0;
	}
	return 0;
}

static int literal(struct jr *r, const char *word, size_t len)
{
	if (r->n - r->i < len || memcmp(r->p + r->i, word, len))
		return -EINVAL;
	r->i += len;
	return 0;
}

/* Any value, r->i at its first byte (whitespace skipped), `depth` the level
 * an object or array here would be. */
static int value(struct jr *r, unsigned depth)
{
	int integral, rc;
	uint8_t open, close;

	if (r->i >= r->n)
		return -EINVAL;
	switch (r->p[r->i]) {
	case '"':
		return string(r, NULL);
	case 't':
		return literal(r, "true", 4);
	case 'f':
		return literal(r, "false", 5);
	case 'n':
		return literal(r, "null", 4);
	case '{':
	case '[':
		break;
	default:
		return number(r, &integral);
	}
	if (depth > RL_JWT_DEPTH_MAX)
		return -EINVAL;
	open = r->p[r->i++];
	close = open == '{' ? '}' : ']';
	ws(r);
	if (r->i < r->n && r->p[r->i] == close) {
		r->i++;
		return 0;
	}
	for (;;) {
		ws(r);
		if (open == '{') {
			if (r->i >= r->n || r->p[r->i] != '"')
				return -EINVAL;
			if ((rc = string(r, NULL)))
				return rc;
			ws(r);
			if (r->i >= r->n || r->p[r->i] != ':')
				return -EINVAL;
			r->i++;
			ws(r);
		}
		if ((rc = value(r, depth + 1)))
			return rc;
		ws(r);
		if (r->i >= r->n)
			return -EINVAL;
		if (r->p[r->i] == close) {
			r->i++;
			return 0;
		}
		if (r->p[r->i++] != ',')
			return -EINVAL;
	}
}

/* A member the caller wants: where its value starts in the document. */
struct want {
	const char *name;
	size_t len;
	size_t at; /* offset of the value; 0 = absent (a value is never at 0) */
};

/*
 * The document p[0..n) is one object, with whitespace around it; each
 * wanted member's value offset is set. -EINVAL for anything else.
 */
static int object(const uint8_t *p, size_t n, struct want *w, size_t nw)
{
	uint64_t seen[RL_JWT_MEMBERS_MAX];
	size_t count = 0;
	struct jr r = { p, n, 0 };
	int rc;

	for (size_t j = 0; j < nw; j++)
		w[j].at = 0;
	ws(&r);
	if (r.i >= r.n || p[r.i] != '{')
		return -EINVAL;
	r.i++;
	ws(&r);
	if (r.i < r.n && p[r.i] == '}') {
		r.i++;
		goto out;
	}
	for (;;) {
		uint8_t name[RL_JWT_CLAIM_MAX];
		struct sink k = { name, sizeof(name), 0, FNV_BASIS };

		ws(&r);
		if (r.i >= r.n || p[r.i] != '"')
			return -EINVAL;
		if ((rc = string(&r, &k)))
			return rc;
		k.hash ^= k.len * 0x9e3779b97f4a7c15ull;
		if (count == RL_JWT_MEMBERS_MAX)
			return -EINVAL;
		for (size_t j = 0; j < count; j++)
			if (seen[j] == k.hash)
				return -EINVAL;
		seen[count++] = k.hash;
		ws(&r);
		if (r.i >= r.n || p[r.i] != ':')
			return -EINVAL;
		r.i++;
		ws(&r);
		for (size_t j = 0; j < nw; j++)
			if (k.len == w[j].len && k.len <= sizeof(name) &&
			    !memcmp(name, w[j].name, k.len))
				w[j].at = r.i;
		if ((rc = value(&r, 2)))
			return rc;
		ws(&r);
		if (r.i >= r.n)
			return -EINVAL;
		if (p[r.i] == '}') {
			r.i++;
			break;
		}
		if (p[r.i++] != ',')
			return -EINVAL;
	}
out:
	ws(&r);
	return r.i == r.n ? 0 : -EINVAL;
}

/* ---- the claims ---- */

/* Beyond any date that matters (31 million years), and far from overflow
 * when the leeway is added or taken. */
#define DATE_LIMIT 1000000000000000ll

/*
 * A NumericDate's value rounded up to a whole second (now < exp holds for a
 * whole `now` exactly when now < ceil(exp); the same for nbf), clamped to
 * +-DATE_LIMIT. The number at p[at..) was validated by object().
 */
static int numeric_date(const uint8_t *p, size_t n, size_t at, int64_t *out)
{
	struct jr r = { p, n, at };
	size_t int_start, int_len, frac_start = 0, frac_len = 0;
	int neg, eneg = 0, up = 0;
	int64_t e = 0, point, v = 0;

	if (at >= n || !(p[at] == '-' || (p[at] >= '0' && p[at] <= '9')))
		return -EINVAL;
	neg = p[r.i] == '-';
	r.i += (size_t)neg;
	int_start = r.i;
	int_len = digits(&r);
	if (r.i < n && p[r.i] == '.') {
		r.i++;
		frac_start = r.i;
		frac_len = digits(&r);
	}
	if (r.i < n && (p[r.i] == 'e' || p[r.i] == 'E')) {
		r.i++;
		if (r.i < n && (p[r.i] == '+' || p[r.i] == '-'))
			eneg = p[r.i++] == '-';
		while (r.i < n && p[r.i] >= '0' && p[r.i] <= '9') {
			if (e < 100000)
				e = e * 10 + (p[r.i] - '0');
			r.i++;
		}
		if (eneg)
			e = -e;
	}
	/* digit k of the mantissa (integer digits, then the fraction's) */
	point = (int64_t)int_len + e; /* digits before the decimal point */
	for (int64_t k = 0; k < point; k++) {
		int d = 0;

		/* past the mantissa only zeros follow: 0 stays 0 ("0e99999") */
		if ((size_t)k >= int_len + frac_len && !v)
			break;

		if ((size_t)k < int_len)
			d = p[int_start + (size_t)k] - '0';
		else if ((size_t)k < int_len + frac_len)
			d = p[frac_start + (size_t)k - int_len] - '0';
		v = v * 10 + d;
		if (v > DATE_LIMIT) {
			v = DATE_LIMIT;
			break;
		}
	}
	for (int64_t k = point < 0 ? 0 : point; (size_t)k < int_len + frac_len; k++) {
		int d = (size_t)k < int_len ? p[int_start + (size_t)k] - '0' :
					      p[frac_start + (size_t)k - int_len] - '0';
		if (d) {
			up = 1;
			break;
		}
	}
	if (neg)
		v = -v; /* ceil of a negative number: its integer part */
	else if (up && v < DATE_LIMIT)
		v++;
	*out = v;
	return 0;
}

/* The claim at p[at..) as key text into out (cap counts the NUL). */
static int claim_text(const uint8_t *p, size_t n, size_t at, char *out,
		      size_t cap, size_t *outlen)
{
	struct jr r = { p, n, at };
	int integral;

	if (p[at] == '"') {
		struct sink k = { (uint8_t *)out, cap - 1, 0, 0 };

		if (string(&r, &k))
			return -EINVAL;
		if (k.len > cap - 1)
			return -E2BIG;
		for (size_t i = 0; i < k.len; i++)
			if ((uint8_t)out[i] < 0x20 || out[i] == 0x7f)
				return -EINVAL;
		if (!k.len)
			return -ENOENT;
		*outlen = k.len;
		out[k.len] = '\0';
		return 0;
	}
	if (!(p[at] == '-' || (p[at] >= '0' && p[at] <= '9')) ||
	    number(&r, &integral) || !integral)
		return -EINVAL;
	/* an integer: canonical already (no '+', no leading zero) but "-0" */
	size_t len = r.i - at;
	const uint8_t *s = p + at;
	int neg = s[0] == '-';
	const char *max = neg ? "9223372036854775808" : "9223372036854775807";
	size_t dl = len - (size_t)neg;

	if (dl > 19 || (dl == 19 && memcmp(s + neg, max, 19) > 0))
		return -EINVAL;
	if (neg && dl == 1 && s[1] == '0')
		s++, len--;
	if (len > cap - 1)
		return -E2BIG;
	memcpy(out, s, len);
	out[len] = '\0';
	*outlen = len;
	return 0;
}

static int ows(char c)
{
	return c == ' ' || c == '\t';
}

/* The decoded signature `got` is the HMAC of tok[0..signed_len). */
static int verify(const struct rl_sha256_hmac *key, const char *tok,
		  size_t signed_len, const uint8_t *got, size_t glen)
{
	struct rl_sha256_hmac c = *key;
	uint8_t want[RL_SHA256_LEN];

	if (glen != RL_SHA256_LEN)
		return -EACCES;
	rl_sha256_hmac_update(&c, tok, signed_len);
	rl_sha256_hmac_final(&c, want);
	return rl_sha256_equal(want, got, glen) ? 0 : -EACCES;
}

/* The token of an Authorization value: "Bearer" (any case), one or more
 * spaces, the token; spaces and tabs around the whole value ignored.
 * 0 with *tok, *tlen; -ENOENT none; -E2BIG over RL_JWT_TOKEN_MAX. */
static int bearer(const char *auth, size_t len, const char **tok,
		  size_t *tlen)
{
	const char *end, *t;

	if (!auth)
		return -ENOENT;
	end = auth + len;
	while (auth < end && ows(*auth))
		auth++;
	while (end > auth && ows(end[-1]))
		end--;
	if (end - auth < 7 || rl_ascii_lower((uint8_t)auth[0]) != 'b' ||
	    rl_ascii_lower((uint8_t)auth[1]) != 'e' ||
	    rl_ascii_lower((uint8_t)auth[2]) != 'a' ||
	    rl_ascii_lower((uint8_t)auth[3]) != 'r' ||
	    rl_ascii_lower((uint8_t)auth[4]) != 'e' ||
	    rl_ascii_lower((uint8_t)auth[5]) != 'r' || auth[6] != ' ')
		return -ENOENT;
	t = auth + 7;
	while (t < end && *t == ' ')
		t++;
	*tok = t;
	*tlen = (size_t)(end - t);
	return *tlen > RL_JWT_TOKEN_MAX ? -E2BIG : 0;
}

/* A claim name rl_jwt_claim_key takes: non-empty, at most
 * RL_JWT_CLAIM_MAX bytes. 0 or -EINVAL; *clen its length. */
static int claim_name(const char *claim, size_t *clen)
{
	if (!claim || !(*clen = strlen(claim)) || *clen > RL_JWT_CLAIM_MAX)
		return -EINVAL;
	return 0;
}

/*
 * rl_jwt_claim_key's work on the token itself (tok, tlen: bearer's), the
 * claim name checked. The seconds the token is valid in, by its exp and
 * nbf with the leeway, go to win[0] (from, inclusive) and win[1] (until,
 * exclusive): INT64_MIN and INT64_MAX where it has neither.
 */
static int claim_key(const char *tok, size_t tlen, const char *claim,
		     size_t clen, const struct rl_sha256_hmac *key,
		     int64_t now_s, char *out, size_t cap, size_t *outlen,
		     int64_t win[2])
{
	uint8_t buf[RL_JWT_PART_MAX];
	const char *d1, *d2, *end = tok + tlen;
	size_t blen;
	int rc;

	d1 = memchr(tok, '.', tlen);
	d2 = d1 ? memchr(d1 + 1, '.', (size_t)(end - d1 - 1)) : NULL;
	if (!d2 || memchr(d2 + 1, '.', (size_t)(end - d2 - 1)))
		return -EINVAL;

	/* the header */
	struct want hw[2] = { { "alg", 3, 0 }, { "crit", 4, 0 } };
	if (rl_jwt_b64url_decode(tok, (size_t)(d1 - tok), buf, sizeof(buf), &blen) ||
	    object(buf, blen, hw, 2))
		return -EINVAL;
	if (key) {
		uint8_t alg[6];
		struct sink k = { alg, sizeof(alg), 0, 0 };
		struct jr r = { buf, blen, hw[0].at };

		if (!hw[0].at || buf[hw[0].at] != '"' || string(&r, &k) ||
		    k.len != 5 || memcmp(alg, "HS256", 5) || hw[1].at)
			return -EACCES;
		/* the signature: well-formed, then the right one */
		if (rl_jwt_b64url_decode(d2 + 1, (size_t)(end - d2 - 1), buf,
					 sizeof(buf), &blen))
			return -EINVAL;
		if ((rc = verify(key, tok, (size_t)(d2 - tok), buf, blen)))
			return rc;
	} else if (rl_jwt_b64url_decode(d2 + 1, (size_t)(end - d2 - 1), buf,
					sizeof(buf), &blen)) {
		return -EINVAL;
	}

	/* the payload */
	struct want pw[3] = { { claim, clen, 0 }, { "exp", 3, 0 }, { "nbf", 3, 0 } };
	if (rl_jwt_b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), buf, sizeof(buf), &blen) ||
	    object(buf, blen, pw, 3))
		return -EINVAL;
	win[0] = INT64_MIN;
	win[1] = INT64_MAX;
	if (pw[1].at) {
		int64_t exp;

		if (numeric_date(buf, blen, pw[1].at, &exp))
			return -EINVAL;
		win[1] = exp + RL_JWT_LEEWAY_S;
	}
	if (pw[2].at) {
		int64_t nbf;

		if (numeric_date(buf, blen, pw[2].at, &nbf))
			return -EINVAL;
		win[0] = nbf - RL_JWT_LEEWAY_S;
	}
	if (now_s >= win[1] || now_s < win[0])
		return -ETIME;
	if (!pw[0].at)
		return -ENOENT;
	if (!cap)
		return -E2BIG;
	return claim_text(buf, blen, pw[0].at, out, cap, outlen);
}

/* What every way in returns on error: no key. */
static int no_key(int rc, char *out, size_t cap, size_t *outlen)
{
	*outlen = 0;
	if (cap)
		out[0] = '\0';
	return rc;
}

int rl_jwt_claim_key(const char *auth, size_t len, const char *claim,
		     const struct rl_sha256_hmac *key, int64_t now_s, char *out,
		     size_t cap, size_t *outlen)
{
	const char *tok;
	size_t tlen, clen;
	int64_t win[2];
	int rc;

	*outlen = 0;
	if ((rc = claim_name(claim, &clen)) || (rc = bearer(auth, len, &tok, &tlen)) ||
	    (rc = claim_key(tok, tlen, claim, clen, key, now_s, out, cap, outlen,
			    win)))
		return no_key(rc, out, cap, outlen);
	return 0;
}

int rl_jwt_claim(const char *auth, size_t len, const char *claim,
		 const uint8_t *secret, size_t slen, int64_t now_s, char *out,
		 size_t cap, size_t *outlen)
{
	struct rl_sha256_hmac key;

	if (secret && !slen)
		return no_key(-EACCES, out, cap, outlen);
	if (secret)
		rl_sha256_hmac_init(&key, secret, slen);
	return rl_jwt_claim_key(auth, len, claim, secret ? &key : NULL, now_s,
				out, cap, outlen);
}

/* ---- the cache of tokens read ---- */

void rl_jwt_cache_init(struct rl_jwt_cache *c, const uint64_t seed[2])
{
	memset(c, 0, sizeof(*c));
	c->k[0][0] = seed[0] ^ 0x6a77742d63616368ull; /* "jwt-cach" */
	c->k[0][1] = seed[1] ^ 0x652d6b65792d6f6eull; /* "e-key-on" */
	c->k[1][0] = seed[0] ^ 0x6a77742d63616368ull ^ 0x9E3779B97F4A7C15ull;
	c->k[1][1] = ~seed[1] ^ 0x652d6b65792d7477ull;
}

/* Entry `e` under `tag` and digest `d`, copied out consistently: 1 with
 * the claim in out (cap > its length) and its window in win, else 0. */
static int cache_get(const struct rl_jwt_cached *e, uint64_t tag,
		     const uint64_t d[2], char *out, size_t cap,
		     size_t *outlen, int64_t win[2])
{
	uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	size_t n;

	if ((s & 1) || __atomic_load_n(&e->tag, __ATOMIC_RELAXED) != tag ||
	    __atomic_load_n(&e->d[0], __ATOMIC_RELAXED) != d[0] ||
	    __atomic_load_n(&e->d[1], __ATOMIC_RELAXED) != d[1])
		return 0;
	n = __atomic_load_n(&e->keylen, __ATOMIC_RELAXED);
	if (n >= cap || n >= RL_JWT_CACHE_KEY_MAX)
		return 0;
	win[0] = __atomic_load_n(&e->from_s, __ATOMIC_RELAXED);
	win[1] = __atomic_load_n(&e->until_s, __ATOMIC_RELAXED);
	memcpy(out, e->key, n);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s)
		return 0;
	out[n] = '\0';
	*outlen = n;
	return 1;
}

/* Keep a claim read in entry `e`, unless another thread is writing it. */
static void cache_put(struct rl_jwt_cached *e, uint64_t tag,
		      const uint64_t d[2], const char *key, size_t n,
		      const int64_t win[2])
{
	uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

	if ((s & 1) || !__atomic_compare_exchange_n(&e->seq, &s, s + 1, 0,
						    __ATOMIC_ACQUIRE,
						    __ATOMIC_RELAXED))
		return;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&e->tag, tag, __ATOMIC_RELAXED);
	__atomic_store_n(&e->d[0], d[0], __ATOMIC_RELAXED);
	__atomic_store_n(&e->d[1], d[1], __ATOMIC_RELAXED);
	__atomic_store_n(&e->from_s, win[0], __ATOMIC_RELAXED);
	__atomic_store_n(&e->until_s, win[1], __ATOMIC_RELAXED);
	__atomic_store_n(&e->keylen, (uint8_t)n, __ATOMIC_RELAXED);
	memcpy(e->key, key, n);
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

int rl_jwt_claim_key_cached(struct rl_jwt_cache *c, uint64_t tag,
			    const char *auth, size_t len, const char *claim,
			    const struct rl_sha256_hmac *key, int64_t now_s,
			    char *out, size_t cap, size_t *outlen)
{
	struct rl_jwt_cached *set;
	const char *tok;
	size_t tlen, clen;
	uint64_t d[2];
	int64_t win[2];
	unsigned w;
	int rc;

	*outlen = 0;
	if ((rc = claim_name(claim, &clen)) || (rc = bearer(auth, len, &tok, &tlen)))
		return no_key(rc, out, cap, outlen);
	d[0] = rl_hash_sip13(c->k[0], tok, tlen);
	d[1] = rl_hash_sip13(c->k[1], tok, tlen);
	set = c->e[d[0] % RL_JWT_CACHE_SETS];
	for (w = 0; w < RL_JWT_CACHE_WAYS; w++)
		if (cache_get(&set[w], tag, d, out, cap, outlen, win)) {
			if (now_s >= win[1] || now_s < win[0])
				return no_key(-ETIME, out, cap, outlen);
			return 0;
		}
	rc = claim_key(tok, tlen, claim, clen, key, now_s, out, cap, outlen, win);
	if (rc)
		return no_key(rc, out, cap, outlen);
	if (*outlen < RL_JWT_CACHE_KEY_MAX) {
		uint8_t *v = &c->victim[d[0] % RL_JWT_CACHE_SETS];
		unsigned at = __atomic_load_n(v, __ATOMIC_RELAXED) % RL_JWT_CACHE_WAYS;

		__atomic_store_n(v, (uint8_t)(at + 1), __ATOMIC_RELAXED);
		cache_put(&set[at], tag, d, out, *outlen, win);
	}
	return 0;
}

int rl_json_valid(const uint8_t *p, size_t n)
{
	struct jr r = { p, n, 0 };

	ws(&r);
	if (value(&r, 1))
		return -EINVAL;
	ws(&r);
	return r.i == n ? 0 : -EINVAL;
}
