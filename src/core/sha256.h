/* SPDX-License-Identifier: MIT */
/*
 * sha256.h - SHA-256 (FIPS 180-4), HMAC-SHA-256 (RFC 2104) and a
 * constant-time comparison, for verifying HS256 tokens (jwt.c).
 *
 * The states live in the caller's memory; nothing here allocates, keeps
 * global state or fails. A state is a plain struct: copying a prepared HMAC
 * state (key absorbed) and continuing from the copy is how a caller that
 * verifies many messages with one key saves the two key blocks each time.
 */
#ifndef RL_SHA256_H
#define RL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define RL_SHA256_LEN 32   /* digest bytes */
#define RL_SHA256_BLOCK 64 /* block bytes */

struct rl_sha256 {
	uint32_t h[8];
	uint64_t bytes; /* absorbed so far */
	uint8_t buf[RL_SHA256_BLOCK];
	uint32_t n; /* bytes of buf in use, < 64 */
};

void rl_sha256_init(struct rl_sha256 *c);
void rl_sha256_update(struct rl_sha256 *c, const void *data, size_t len);
/* The digest; `c` is spent afterwards (init it again to reuse it). */
void rl_sha256_final(struct rl_sha256 *c, uint8_t out[RL_SHA256_LEN]);
/* One-shot. */
void rl_sha256_digest(const void *data, size_t len, uint8_t out[RL_SHA256_LEN]);

struct rl_sha256_hmac {
	struct rl_sha256 inner, outer;
};

/*
 * Absorb the key (any length: a key longer than a block is hashed first,
 * RFC 2104 section 2). The prepared state may be copied and reused.
 */
void rl_sha256_hmac_init(struct rl_sha256_hmac *c, const uint8_t *key,
			 size_t klen);
void rl_sha256_hmac_update(struct rl_sha256_hmac *c, const void *data,
			   size_t len);
void rl_sha256_hmac_final(struct rl_sha256_hmac *c,
			  uint8_t out[RL_SHA256_LEN]);
/* One-shot. */
void rl_sha256_hmac(const uint8_t *key, size_t klen, const void *data,
		    size_t len, uint8_t out[RL_SHA256_LEN]);

/*
 * 1 if the `len` bytes at a and b are equal, else 0, in time that depends
 * on `len` only (never on where they differ): a signature check must not
 * tell an attacker how many leading bytes of a forgery were right.
 */
int rl_sha256_equal(const void *a, const void *b, size_t len);

/* "sha256:" and the first 12 hex digits of the SHA-256 of data[0..len):
 * how a secret key (a session cookie's value) is named to people, in
 * rlshimctl and in the log, instead of its text. out needs 20 bytes. */
#define RL_SHA256_NAME_LEN 20
void rl_sha256_name(const void *data, size_t len, char out[RL_SHA256_NAME_LEN]);

#endif /* RL_SHA256_H */
