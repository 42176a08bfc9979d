/* SPDX-License-Identifier: MIT */
/*
 * hash.c - SipHash-1-3 (Aumasson and Bernstein; one compression round and
 * three finalization rounds, as Rust's HashMap uses). Keyed with the
 * segment's random seed, so the bucket a key lands in cannot be predicted
 * by a client.
 */
#include "hash.h"

#include <string.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                             \
	do {                                                                 \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);     \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                        \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                        \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);     \
	} while (0)

static inline uint64_t load64_le(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

const uint64_t rl_hash_public_key[2] = { 0x726c7368696d2d31ull,
					 0x6b65792d64696721ull };

uint64_t rl_hash_sip13(const uint64_t key[2], const void *data, size_t len)
{
	const uint8_t *in = data;
	const uint8_t *end = in + len - (len % 8);
	uint64_t v0 = 0x736f6d6570736575ull ^ key[0];
	uint64_t v1 = 0x646f72616e646f6dull ^ key[1];
	uint64_t v2 = 0x6c7967656e657261ull ^ key[0];
	uint64_t v3 = 0x7465646279746573ull ^ key[1];
	uint64_t b = (uint64_t)len << 56;

	for (; in != end; in += 8) {
		uint64_t m = load64_le(in);

		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	switch (len & 7) {
	case 7: b |= (uint64_t)in[6] << 48; /* fall through */
	case 6: b |= (uint64_t)in[5] << 40; /* fall through */
	case 5: b |= (uint64_t)in[4] << 32; /* fall through */
	case 4: b |= (uint64_t)in[3] << 24; /* fall through */
	case 3: b |= (uint64_t)in[2] << 16; /* fall through */
	case 2: b |= (uint64_t)in[1] << 8;  /* fall through */
	case 1: b |= (uint64_t)in[0]; break;
	case 0: break;
	}
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}
