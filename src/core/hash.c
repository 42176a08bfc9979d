/* SPDX-License-Identifier: MIT */
/*
 * hash.c - SipHash-1-3 (Aumasson and Bernstein; one compression round and
 * three finalization rounds, as Rust's HashMap uses). Keyed with the
 * segment's random seed, so the bucket a key lands in cannot be predicted
 * by a client. The rounds are hash.h's, inline.
 */
#include "hash.h"

const uint64_t rl_hash_public_key[2] = { 0x726c7368696d2d31ull,
					 0x6b65792d64696721ull };

uint64_t rl_hash_sip13(const uint64_t key[2], const void *data, size_t len)
{
	uint64_t v[4];

	rl_hash_sip13_init(key, v);
	return rl_hash_sip13_from(v, data, len);
}
