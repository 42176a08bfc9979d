/* SPDX-License-Identifier: MIT */
/*
 * hash.h - SipHash-1-3, a keyed hash: with a secret 128-bit key no client
 * can choose inputs that collide in the table.
 */
#ifndef RL_HASH_H
#define RL_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t rl_hash_sip13(const uint64_t key[2], const void *data, size_t len);

/* A fixed, public key, for names that must agree between hosts (digests of
 * long keys, rule identities); the per-segment seed keys everything a client
 * could aim at. */
extern const uint64_t rl_hash_public_key[2];

#endif /* RL_HASH_H */
