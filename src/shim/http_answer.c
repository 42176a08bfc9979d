/* SPDX-License-Identifier: MIT */
/*
 * http_answer.c - reading the application's answers: the status line and
 * what frames the body (Content-Length, Transfer-Encoding), in one pass
 * over a head whole in one buffer or over a head gathered whole.
 */
#include "http.h"

#include <errno.h>
#include <string.h>

#include "http_int.h"

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

/* The first bytes of the lines answer_line() reads (Content-Length,
 * Transfer-Encoding), and of the blank line: the status line (an 'H')
 * and the rest are passed over with one look. */
static const uint8_t starts_ct[256] = {
	['C'] = 1, ['c'] = 1, ['T'] = 1, ['t'] = 1,
	['\r'] = 2, /* the blank line, or a line no head may have */
};

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
		if (rl_http_parse_length((const char *)p + vs, ve - vs, &n) ||
		    (a->has_length && n != a->length))
			return -EINVAL;
		a->has_length = 1;
		a->length = n;
	} else if (e - i > 18 && p[i + 17] == ':' &&
		   lower8(p + i) == word8("transfer") &&
		   lower8(p + i + 8) == word8("-encodin") && (p[i + 16] | 0x20) == 'g') {
		*te = 1;
		if (rl_http_parse_codings((const char *)p + i + 18, e - 1 - (i + 18),
					  chunked_last, chunked_seen))
			return -EINVAL;
	}
	return 0;
}

int rl_http_status_of(const uint8_t *p, size_t len)
{
	if (len < 12)
		return -EAGAIN;
	if (memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9' ||
	    p[8] != ' ' || p[9] < '0' || p[9] > '9' || p[10] < '0' ||
	    p[10] > '9' || p[11] < '0' || p[11] > '9')
		return -EINVAL;
	return (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
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
	a->status = rl_http_status_of(p, len);
	if (a->status < 0)
		return -EINVAL;
	/* Lines by their LF, sixty-four bytes at a time (then sixteen, then
	 * one) as a bit per LF. Every line ends in CRLF; only a line that
	 * starts like Content-Length or Transfer-Encoding is read further. */
	for (;;) {
		uint64_t m = 0;
		size_t step;

		if (k + 64 <= len) {
			m = rl_http_lf_mask64(p + k);
			step = 64;
		} else if (k + 16 <= len) {
			m = rl_http_lf_mask16(p + k);
			step = 16;
		} else if (k < len) {
			/* the last sixteen bytes, shifted to start at k */
			if (len >= 16) {
				m = rl_http_lf_mask16(p + len - 16) >> (16 - (len - k));
			} else {
				for (size_t j = 0; j < len - k; j++)
					m |= (uint64_t)(p[k + j] == '\n') << j;
			}
			step = len - k;
		} else {
			return -EAGAIN;
		}
		while (m) {
			size_t e = k + (size_t)__builtin_ctzll(m);

			m &= m - 1;
			if (p[e - 1] != '\r')
				return -EINVAL;
			if (__builtin_expect(starts_ct[p[ls]], 0)) {
				if (p[ls] != '\r') {
					if (answer_line(p, ls, e, a, &te, &chunked_last,
							&chunked_seen))
						return -EINVAL;
				} else if (e != ls + 1) {
					return -EINVAL; /* a CR inside a line */
				} else {
					if (te) {
						a->has_length = 0;
						a->chunked = chunked_last;
						a->length = 0;
					}
					*used = e + 1;
					return 0;
				}
			}
			ls = e + 1;
		}
		k += step;
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

		ne = rl_http_name_end(p, i, len);
		if (ne == ns || ne >= len || p[ne] != ':')
			return -EINVAL;
		vs = ne + 1;
		while (vs < len && (p[vs] == ' ' || p[vs] == '\t'))
			vs++;
		end = rl_http_value_end(p, vs, len);
		if (end < 0 || (size_t)end + 1 >= len || p[end + 1] != '\n')
			return -EINVAL;
		ve = (size_t)end;
		i = ve + 2;
		while (ve > vs && (p[ve - 1] == ' ' || p[ve - 1] == '\t'))
			ve--;
		if (ne - ns == 14 &&
		    rl_http_name_eq((const char *)p + ns, 14, "content-length", 14)) {
			uint64_t n;

			if (rl_http_parse_length((const char *)p + vs, ve - vs, &n) ||
			    (a->has_length && n != a->length))
				return -EINVAL;
			a->has_length = 1;
			a->length = n;
		} else if (ne - ns == 17 &&
			   rl_http_name_eq((const char *)p + ns, 17,
					   "transfer-encoding", 17)) {
			te = 1;
			if (rl_http_parse_codings((const char *)p + vs, ve - vs,
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
