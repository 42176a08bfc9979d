/* SPDX-License-Identifier: MIT */
/*
 * sha256.c - SHA-256 (FIPS 180-4 section 6.2), HMAC-SHA-256 (RFC 2104),
 * constant-time comparison.
 *
 * Plain portable C, one 64-word schedule on the stack (256 bytes); no
 * tables but the round constants, no allocation, no global state.
 */
#include "sha256.h"

#include <string.h>

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t ror(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

#define S0(x) (ror(x, 2) ^ ror(x, 13) ^ ror(x, 22))
#define S1(x) (ror(x, 6) ^ ror(x, 11) ^ ror(x, 25))
#define CH(x, y, z) (z ^ (x & (y ^ z)))
#define MAJ(x, y, z) ((x & y) | (z & (x | y)))
/* One round with the eight words named in their rotated order, so that the
 * loop below does eight rounds without moving a word: about a third fewer
 * instructions than shifting all eight every round. */
#define ROUND(a, b, c, d, e, f, g, h, i)                                   \
	do {                                                               \
		uint32_t t1 = h + S1(e) + CH(e, f, g) + K[i] + w[i];       \
		d += t1;                                                   \
		h = t1 + S0(a) + MAJ(a, b, c);                             \
	} while (0)

static void compress(uint32_t st[8], const uint8_t *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, h;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = st[0], b = st[1], c = st[2], d = st[3];
	e = st[4], f = st[5], g = st[6], h = st[7];
	for (i = 0; i < 64; i += 8) {
		ROUND(a, b, c, d, e, f, g, h, i);
		ROUND(h, a, b, c, d, e, f, g, i + 1);
		ROUND(g, h, a, b, c, d, e, f, i + 2);
		ROUND(f, g, h, a, b, c, d, e, i + 3);
		ROUND(e, f, g, h, a, b, c, d, i + 4);
		ROUND(d, e, f, g, h, a, b, c, i + 5);
		ROUND(c, d, e, f, g, h, a, b, i + 6);
		ROUND(b, c, d, e, f, g, h, a, i + 7);
	}
	st[0] += a, st[1] += b, st[2] += c, st[3] += d;
	st[4] += e, st[5] += f, st[6] += g, st[7] += h;
}

void rl_sha256_init(struct rl_sha256 *c)
{
	static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372,
					0xa54ff53a, 0x510e527f, 0x9b05688c,
					0x1f83d9ab, 0x5be0cd19 };

	memcpy(c->h, iv, sizeof(iv));
	c->bytes = 0;
	c->n = 0;
}

void rl_sha256_update(struct rl_sha256 *c, const void *data, size_t len)
{
	const uint8_t *p = data;

	c->bytes += len;
	if (c->n) {
		size_t take = RL_SHA256_BLOCK - c->n;

		if (take > len)
			take = len;
		memcpy(c->buf + c->n, p, take);
		c->n += (uint32_t)take;
		p += take;
		len -= take;
		if (c->n < RL_SHA256_BLOCK)
			return;
		compress(c->h, c->buf);
		c->n = 0;
	}
	for (; len >= RL_SHA256_BLOCK; p += RL_SHA256_BLOCK, len -= RL_SHA256_BLOCK)
		compress(c->h, p);
	if (len) {
		memcpy(c->buf, p, len);
		c->n = (uint32_t)len;
	}
}

void rl_sha256_final(struct rl_sha256 *c, uint8_t out[RL_SHA256_LEN])
{
	uint64_t bits = c->bytes * 8;
	int i;

	c->buf[c->n++] = 0x80;
	if (c->n > RL_SHA256_BLOCK - 8) {
		memset(c->buf + c->n, 0, RL_SHA256_BLOCK - c->n);
		compress(c->h, c->buf);
		c->n = 0;
	}
	memset(c->buf + c->n, 0, RL_SHA256_BLOCK - 8 - c->n);
	for (i = 0; i < 8; i++)
		c->buf[RL_SHA256_BLOCK - 1 - i] = (uint8_t)(bits >> (8 * i));
	compress(c->h, c->buf);
	for (i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
}

void rl_sha256_digest(const void *data, size_t len, uint8_t out[RL_SHA256_LEN])
{
	struct rl_sha256 c;

	rl_sha256_init(&c);
	rl_sha256_update(&c, data, len);
	rl_sha256_final(&c, out);
}

/* ---- HMAC ---- */

void rl_sha256_hmac_init(struct rl_sha256_hmac *c, const uint8_t *key,
			 size_t klen)
{
	uint8_t k[RL_SHA256_BLOCK] = { 0 }, pad[RL_SHA256_BLOCK];
	int i;

	if (klen > RL_SHA256_BLOCK)
		rl_sha256_digest(key, klen, k);
	else if (klen)
		memcpy(k, key, klen);
	for (i = 0; i < RL_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	rl_sha256_init(&c->inner);
	rl_sha256_update(&c->inner, pad, sizeof(pad));
	for (i = 0; i < RL_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	rl_sha256_init(&c->outer);
	rl_sha256_update(&c->outer, pad, sizeof(pad));
}

void rl_sha256_hmac_update(struct rl_sha256_hmac *c, const void *data,
			   size_t len)
{
	rl_sha256_update(&c->inner, data, len);
}

void rl_sha256_hmac_final(struct rl_sha256_hmac *c, uint8_t out[RL_SHA256_LEN])
{
	uint8_t ih[RL_SHA256_LEN];

	rl_sha256_final(&c->inner, ih);
	rl_sha256_update(&c->outer, ih, sizeof(ih));
	rl_sha256_final(&c->outer, out);
}

void rl_sha256_hmac(const uint8_t *key, size_t klen, const void *data,
		    size_t len, uint8_t out[RL_SHA256_LEN])
{
	struct rl_sha256_hmac c;

	rl_sha256_hmac_init(&c, key, klen);
	rl_sha256_hmac_update(&c, data, len);
	rl_sha256_hmac_final(&c, out);
}

int rl_sha256_equal(const void *a, const void *b, size_t len)
{
	const volatile uint8_t *x = a, *y = b;
	uint8_t d = 0;
	size_t i;

	for (i = 0; i < len; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

void rl_sha256_name(const void *data, size_t len, char out[RL_SHA256_NAME_LEN])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t d[RL_SHA256_LEN];

	rl_sha256_digest(data, len, d);
	memcpy(out, "sha256:", 7);
	for (unsigned i = 0; i < 6; i++) {
		out[7 + 2 * i] = hex[d[i] >> 4];
		out[8 + 2 * i] = hex[d[i] & 15];
	}
	out[19] = '\0';
}
