/* SPDX-License-Identifier: MIT */
/*
 * http_field.c - the field grammar requests and answers share: token
 * characters, names compared in any case, the values of Content-Length
 * and Transfer-Encoding, and where a field's name and value end (a word
 * at a time).
 */
#include "http.h"

#include <stdatomic.h>
#include <string.h>

#include "ascii.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include "http_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

/* AVX2 usable: the CPU has it and the kernel saves the YMM state. Asked
 * once (cpuid and xgetbv are instructions, not system calls). */
int rl_http_avx2(void)
{
	static _Atomic int known = -1;
	int k = atomic_load_explicit(&known, memory_order_relaxed);
	unsigned a, b, c, d;

	if (k >= 0)
		return k;
	k = 0;
	if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && (c & bit_AVX)) {
		unsigned lo, hi;

		__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
		if ((lo & 6) == 6 && __get_cpuid_count(7, 0, &a, &b, &c, &d) &&
		    (b & bit_AVX2))
			k = 1;
	}
	atomic_store_explicit(&known, k, memory_order_relaxed);
	return k;
}

/* Past the sixty-four-byte blocks from p[i] that hold no control byte,
 * thirty-two bytes a register. */
__attribute__((target("avx2"))) static size_t clean64_avx2(const uint8_t *p,
							   size_t i, size_t len)
{
	const __m256i del = _mm256_set1_epi8(0x7f), top = _mm256_set1_epi8(0x1f);

	while (i + 64 <= len) {
		__m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(p + i));
		__m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32));
		__m256i lo = _mm256_min_epu8(a, b);
		__m256i dl = _mm256_min_epu8(_mm256_xor_si256(a, del),
					     _mm256_xor_si256(b, del));
		__m256i bad = _mm256_or_si256(
			_mm256_cmpeq_epi8(_mm256_min_epu8(lo, top), lo),
			_mm256_cmpeq_epi8(dl, _mm256_setzero_si256()));

		if (!_mm256_testz_si256(bad, bad))
			break;
		i += 64;
	}
	return i;
}

#endif

#ifdef __SSE2__
/* Past the sixty-four-byte blocks from p[i] that hold no control byte. */
static size_t clean64(const uint8_t *p, size_t i, size_t len)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (len - i >= 128 && rl_http_avx2())
		return clean64_avx2(p, i, len);
#endif
	while (i + 64 <= len && !rl_ascii_any_ctl64(p + i))
		i += 64;
	return i;
}
#endif

/* RFC 9110 tchar: "!#$%&'*+-.^_`|~" DIGIT ALPHA */
const uint8_t rl_http_tchar[256] = {
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

int rl_http_is_token(uint8_t c)
{
	return rl_http_tchar[c];
}

int rl_http_lit_eq(const char *a, const char *lit, size_t n)
{
	uint64_t x, y, u, w;
	uint32_t x4, y4, u4, w4;

	if (n >= 8) {
		/* whole words, the last one overlapping the one before */
		for (size_t i = 0; i + 8 < n; i += 8) {
			memcpy(&x, a + i, 8);
			memcpy(&u, lit + i, 8);
			if ((x | 0x2020202020202020ull) != u)
				return 0;
		}
		memcpy(&y, a + n - 8, 8);
		memcpy(&w, lit + n - 8, 8);
		return (y | 0x2020202020202020ull) == w;
	}
	if (n >= 4) {
		memcpy(&x4, a, 4);
		memcpy(&y4, a + n - 4, 4);
		memcpy(&u4, lit, 4);
		memcpy(&w4, lit + n - 4, 4);
		return (x4 | 0x20202020u) == u4 && (y4 | 0x20202020u) == w4;
	}
	for (size_t i = 0; i < n; i++)
		if (((uint8_t)a[i] | 0x20) != (uint8_t)lit[i])
			return 0;
	return 1;
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

/* The value of Content-Length: 1*DIGIT, nothing else, below 2^62. */
int rl_http_parse_length(const char *v, size_t n, uint64_t *out)
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
int rl_http_parse_codings(const char *v, size_t n, uint8_t *chunked_last,
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
		while (i < n && rl_http_tchar[(uint8_t)v[i]])
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
ssize_t rl_http_value_end(const uint8_t *p, size_t i, size_t len)
{
#ifdef __SSE2__
	unsigned clean = 0;

	/* Sixteen at a time first: most values end within their first 64
	 * bytes, where a look at whole 64-byte blocks (and AVX2's check) is
	 * spent for nothing; after four clean blocks in a row, the value is
	 * a long one (a Cookie), skipped 64 bytes at a time once. */
	while (i + 16 <= len) {
		uint32_t m = rl_ascii_ctl16(p + i);

		if (!m) {
			i += 16;
			if (++clean == 4 && i + 64 <= len)
				i = clean64(p, i, len);
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
		if (!rl_http_value_byte(p[i]))
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
size_t rl_http_name_end(const uint8_t *p, size_t i, size_t len)
{
#ifdef __SSE2__
	const __m128i colon = _mm_set1_epi8(':'), sp = _mm_set1_epi8(' ');
	const __m128i del = _mm_set1_epi8(0x7f), top = _mm_set1_epi8(0x1f);

	/* sixteen at a time: a bit for each byte that ends a name (the high
	 * bit of bytes above 0x7e is movemask's own) */
	while (i + 16 <= len) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
		__m128i end = _mm_or_si128(
			_mm_or_si128(_mm_cmpeq_epi8(v, colon), _mm_cmpeq_epi8(v, sp)),
			_mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, top), v),
				     _mm_cmpeq_epi8(v, del)));
		uint32_t m = (uint32_t)_mm_movemask_epi8(_mm_or_si128(end, v));

		if (m)
			return i + (size_t)__builtin_ctz(m);
		i += 16;
	}
#endif
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
