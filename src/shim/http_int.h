/* SPDX-License-Identifier: MIT */
/*
 * http_int.h - what the http*.c files share and nothing else sees: the
 * field grammar (http_field.c) and the chunked coding (http_chunk.c).
 * Never installed, never included outside src/shim/http*.c.
 */
#ifndef RL_HTTP_INT_H
#define RL_HTTP_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http.h"

/* The word-at-a-time scans take the first flagged byte as the lowest. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the word-at-a-time scans assume little-endian");

/* ---- http_field.c ------------------------------------------------------------ */

/* RFC 9110 tchar: 1 for each byte that may be in a token. */
extern const uint8_t rl_http_tchar[256];

/* Field-value bytes: VCHAR, obs-text, SP, HTAB. No CTL, no DEL. */
static inline int rl_http_value_byte(uint8_t c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* The value of Content-Length, v[0, n): 1*DIGIT, below 2^62. 0 or -1. */
int rl_http_parse_length(const char *v, size_t n, uint64_t *out);

/* Transfer-Encoding's codings, v[0, n): whether chunked was seen and is
 * the last so far. 0, or -1 (a coding after chunked, chunked twice). */
int rl_http_parse_codings(const char *v, size_t n, uint8_t *chunked_last,
			  uint8_t *chunked_seen);

/* The offset of the CR ending the field value at p[i], -1 on a control
 * character, -2 when the bytes end first. */
ssize_t rl_http_value_end(const uint8_t *p, size_t i, size_t len);

/* a[0, n) is `lit`, a literal of lower-case letters and '-', in any case:
 * a word at a time (OR 0x20 lowers letters, and maps to '-' only '-' and
 * CR, which no name holds). */
int rl_http_lit_eq(const char *a, const char *lit, size_t n);

/* The first byte at or after p[i] that cannot be in a field name. */
size_t rl_http_name_end(const uint8_t *p, size_t i, size_t len);

/* 1 if AVX2 may be used here (the CPU has it, the kernel saves its state). */
int rl_http_avx2(void);

/* ---- LFs, a bit each -------------------------------------------------------- */

/* A bit for each LF among p[0..16), and among p[0..64). */
#ifdef __SSE2__
#include <emmintrin.h>
static inline uint64_t rl_http_lf_mask16(const uint8_t *p)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);

	return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n')));
}

static inline uint64_t rl_http_lf_mask64(const uint8_t *p)
{
	const __m128i lf = _mm_set1_epi8('\n');
	const __m128i *q = (const __m128i *)(const void *)p;
	uint64_t m0 = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(q), lf));
	uint64_t m1 = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(q + 1), lf));
	uint64_t m2 = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(q + 2), lf));
	uint64_t m3 = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(q + 3), lf));

	return m0 | m1 << 16 | m2 << 32 | m3 << 48;
}
#else
static inline uint64_t rl_http_lf_mask16(const uint8_t *p)
{
	uint64_t m = 0;

	for (int j = 0; j < 16; j++)
		m |= (uint64_t)(p[j] == '\n') << j;
	return m;
}

static inline uint64_t rl_http_lf_mask64(const uint8_t *p)
{
	return rl_http_lf_mask16(p) | rl_http_lf_mask16(p + 16) << 16 |
	       rl_http_lf_mask16(p + 32) << 32 | rl_http_lf_mask16(p + 48) << 48;
}
#endif

/* ---- http_chunk.c ------------------------------------------------------------ */

/* The first bad byte of trailer bytes p[0, len) (h->error says why), or
 * -1; `line` bytes into the current line, `prev` the byte before p[0]. */
ssize_t rl_http_trailer_check(struct rl_http *h, const uint8_t *p, size_t len,
			      uint32_t line, uint8_t prev);

/*
 * One step of a chunked body in a chunk phase (RL_HTTP_CHUNK_*), from
 * p[*i] (< len): a byte of a size line, or a run of data. Advances *i
 * past what it took. 0, or -1 with *why and *i at the bad byte.
 */
int rl_http_chunk_step(struct rl_http *h, const uint8_t *p, size_t *i,
		       size_t len, const char **why);

#endif /* RL_HTTP_INT_H */
