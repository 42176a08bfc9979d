/* SPDX-License-Identifier: MIT */
/*
 * hash.h - SipHash-1-3, a keyed hash: with a secret 128-bit key no client
 * can choose inputs that collide in the table.
 *
 * The hash is inline here, in two steps, so that a caller that hashes
 * under the same key again and again (the table, once per decision, under
 * one key per rule) keeps the keyed state and does only the rounds.
 */
#ifndef RL_HASH_H
#define RL_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

uint64_t rl_hash_sip13(const uint64_t key[2], const void *data, size_t len);

/* A fixed, public key, for names that must agree between hosts (digests of
 * long keys, rule identities); the per-segment seed keys everything a client
 * could aim at. */
extern const uint64_t rl_hash_public_key[2];

#define RL_SIP_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define RL_SIPROUND                                                          \
	do {                                                                 \
		v0 += v1; v1 = RL_SIP_ROTL(v1, 13); v1 ^= v0;                 \
		v0 = RL_SIP_ROTL(v0, 32);                                     \
		v2 += v3; v3 = RL_SIP_ROTL(v3, 16); v3 ^= v2;                 \
		v0 += v3; v3 = RL_SIP_ROTL(v3, 21); v3 ^= v0;                 \
		v2 += v1; v1 = RL_SIP_ROTL(v1, 17); v1 ^= v2;                 \
		v2 = RL_SIP_ROTL(v2, 32);                                     \
	} while (0)

static inline uint64_t rl_hash_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline uint64_t rl_hash_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	return v;
}

/* The last 0-7 bytes as a little-endian word: two overlapping loads for
 * 4-7 (the bytes both cover are the same, so or-ing them is exact), three
 * single bytes for 1-3, instead of a byte at a time. */
static inline uint64_t rl_hash_tail(const uint8_t *p, size_t n)
{
	if (n >= 4)
		return rl_hash_le32(p) | rl_hash_le32(p + n - 4) << (8 * (n - 4));
	if (n == 0)
		return 0;
	return (uint64_t)p[0] | (uint64_t)p[n >> 1] << (8 * (n >> 1)) |
	       (uint64_t)p[n - 1] << (8 * (n - 1));
}

/*
 * SipHash's state for key `key`, a quarter round in: the first round's
 * first line depends on the key alone (v0 and v1, before any message word
 * comes in), so a caller that keeps the state does only the rest.
 */
static inline void rl_hash_sip13_init(const uint64_t key[2], uint64_t v[4])
{
	uint64_t v0 = 0x736f6d6570736575ull ^ key[0];
	uint64_t v1 = 0x646f72616e646f6dull ^ key[1];

	v0 += v1; v1 = RL_SIP_ROTL(v1, 13); v1 ^= v0; v0 = RL_SIP_ROTL(v0, 32);
	v[0] = v0;
	v[1] = v1;
	v[2] = 0x6c7967656e657261ull ^ key[0];
	v[3] = 0x7465646279746573ull ^ key[1];
}

/* SIPROUND but its first line (rl_hash_sip13_init's). */
#define RL_SIPROUND_REST                                                     \
	do {                                                                 \
		v2 += v3; v3 = RL_SIP_ROTL(v3, 16); v3 ^= v2;                 \
		v0 += v3; v3 = RL_SIP_ROTL(v3, 21); v3 ^= v0;                 \
		v2 += v1; v1 = RL_SIP_ROTL(v1, 17); v1 ^= v2;                 \
		v2 = RL_SIP_ROTL(v2, 32);                                     \
	} while (0)

/* SipHash-1-3 of `len` bytes at `data`, from the keyed state `v`
 * (rl_hash_sip13_init). */
static inline __attribute__((always_inline)) uint64_t
rl_hash_sip13_from(const uint64_t v[4], const void *data, size_t len)
{
	const uint8_t *in = data;
	const uint8_t *end = in + (len & ~(size_t)7);
	uint64_t v0 = v[0], v1 = v[1], v2 = v[2], v3 = v[3];
	uint64_t b = (uint64_t)len << 56;
	uint64_t m;

	/* The first word: a whole block, or the last (and only) one. */
	m = in != end ? rl_hash_le64(in) : b | rl_hash_tail(in, len);
	v3 ^= m;
	RL_SIPROUND_REST;
	v0 ^= m;
	if (in != end) {
		for (in += 8; in != end; in += 8) {
			m = rl_hash_le64(in);
			v3 ^= m;
			RL_SIPROUND;
			v0 ^= m;
		}
		b |= rl_hash_tail(in, len & 7);
		v3 ^= b;
		RL_SIPROUND;
		v0 ^= b;
	}
	v2 ^= 0xff;
	RL_SIPROUND;
	RL_SIPROUND;
	RL_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

#endif /* RL_HASH_H */
