/* SPDX-License-Identifier: MIT */
/*
 * ascii.h - character helpers for the parsers (addresses, paths, HTTP).
 * ASCII only, whatever the locale: the bytes come from the network.
 */
#ifndef RL_ASCII_H
#define RL_ASCII_H

#include <stdint.h>

/* The value of a hex digit, or -1. */
static inline int rl_ascii_hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static inline uint8_t rl_ascii_lower(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
}

/*
 * Eight bytes at a time: nonzero if any of them is a control character
 * (below 0x20, or DEL), the bytes a header value may not hold but for HTAB
 * (a caller that sees nonzero looks at each byte). Bytes of 0x80 and up
 * (obs-text) are fine. The classic "has less than" and "has zero" tricks.
 */
static inline uint64_t rl_ascii_ctl8(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	uint64_t below = (x - ones * 0x20) & ~x & high;
	uint64_t del = x ^ (ones * 0x7f);

	return below | ((del - ones) & ~del & high);
}

#ifdef __SSE2__
#include <emmintrin.h>
/* Sixteen bytes at a time: a bit for each control character (below 0x20,
 * or DEL), exactly. */
static inline uint32_t rl_ascii_ctl16(const uint8_t *p)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i low = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);

	return (uint32_t)_mm_movemask_epi8(
		_mm_or_si128(low, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f))));
}

/* Nonzero if any of the sixty-four bytes at p is a control character: the
 * four blocks' flags ORed before the one test, for long values (a
 * browser's Cookie) that have none. */
static inline int rl_ascii_any_ctl64(const uint8_t *p)
{
	const __m128i *q = (const __m128i *)(const void *)p;
	const __m128i del = _mm_set1_epi8(0x7f);
	__m128i a = _mm_loadu_si128(q), b = _mm_loadu_si128(q + 1);
	__m128i c = _mm_loadu_si128(q + 2), d = _mm_loadu_si128(q + 3);
	/* the smallest byte of each lane, and the smallest distance to DEL */
	__m128i lo = _mm_min_epu8(_mm_min_epu8(a, b), _mm_min_epu8(c, d));
	__m128i dl = _mm_min_epu8(_mm_min_epu8(_mm_xor_si128(a, del), _mm_xor_si128(b, del)),
				  _mm_min_epu8(_mm_xor_si128(c, del), _mm_xor_si128(d, del)));
	__m128i bad = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(lo, _mm_set1_epi8(0x1f)), lo),
				   _mm_cmpeq_epi8(dl, _mm_setzero_si128()));

	return _mm_movemask_epi8(bad) != 0;
}
#endif

/* Nonzero if any of the eight bytes is `c` (the lowest flagged is). */
static inline uint64_t rl_ascii_byte8(uint64_t x, uint8_t c)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	uint64_t y = x ^ (ones * c);

	return (y - ones) & ~y & high;
}

#endif /* RL_ASCII_H */
