/* SPDX-License-Identifier: MIT */
/*
 * jwt.h - a claim of the JWT in `Authorization: Bearer`, the key of a
 * `key = jwt:CLAIM` rule (issue 17), verified as HS256 when the rule has a
 * `jwt_secret`.
 *
 * Only HS256 (HMAC-SHA-256, RFC 7518 section 3.2) is verified: the shim
 * links libc alone, and RS256/ES256 need a bignum or curve library. Nothing
 * here allocates; the only state is a cache of tokens the caller owns. The
 * stack holds one decoded part (RL_JWT_PART_MAX bytes), a hash per
 * top-level member and at most RL_JWT_DEPTH_MAX frames of the JSON reader:
 * under 7 KB in all (gcc -O2 -fstack-usage, x86-64: 3,600 + 768 + 32 x 64
 * bytes, and SHA-256's 400).
 */
#ifndef RL_JWT_H
#define RL_JWT_H

#include <stddef.h>
#include <stdint.h>

#include "sha256.h"

/* Longest token read (the text after "Bearer "); longer is -E2BIG. */
#define RL_JWT_TOKEN_MAX 4096
/* Longest decoded header or payload: a part of a token that long. */
#define RL_JWT_PART_MAX (RL_JWT_TOKEN_MAX / 4 * 3)
/* Deepest nesting of a JSON value, the top-level object being 1. */
#define RL_JWT_DEPTH_MAX 32
/* Most members of the header's or the payload's object. */
#define RL_JWT_MEMBERS_MAX 64
/* Longest claim name (bytes). */
#define RL_JWT_CLAIM_MAX 64
/*
 * Seconds by which `exp` and `nbf` may be off (RFC 7519 sections 4.1.4-5
 * allow "some small leeway"): the issuer's clock and this host's differ by
 * far less with NTP, and every second more is a second more of life for a
 * stolen token; 30 s covers a host whose NTP has just started.
 */
#define RL_JWT_LEEWAY_S 30

/*
 * The value of claim `claim` (a NUL-terminated name, at most
 * RL_JWT_CLAIM_MAX bytes) of the token in an Authorization field value
 * `auth` of `len` bytes (not necessarily NUL-terminated), as key text.
 *
 * The value is "Bearer" (any case, RFC 6750 section 2.1), one or more
 * spaces and a compact JWS (RFC 7515 section 7.1): three base64url parts
 * without padding, separated by '.'; spaces and tabs around the whole value
 * are ignored. The header and the payload must each be one JSON object
 * (RFC 8259, strictly: see jwt.c), without a repeated member name.
 *
 * With `key` (an HMAC state prepared from the secret's bytes by
 * rl_sha256_hmac_init; the caller owns it, it is only copied) the header's
 * "alg" must be the string "HS256" and there must be no "crit"; the
 * signature must be the 32-byte HMAC-SHA-256 of "header.payload" (compared
 * in constant time). Without (`key` NULL) the token is read unverified, any
 * "alg", any signature: then a client can mint itself tokens with any
 * claim, and so a new key per request.
 *
 * In both cases "exp" and "nbf", when present, must be numbers (fractions
 * and exponents allowed: NumericDate) and `now_s` (Unix seconds) within
 * RL_JWT_LEEWAY_S of them: now < exp + leeway, now >= nbf - leeway.
 *
 * The claim must be a non-empty string, its decoded UTF-8 without control
 * characters (NUL included), or an integer within int64, given as its
 * canonical decimal text ("-0" is "0"). Returns, checked in that order:
 *
 *   0        out holds *outlen bytes and a NUL (cap counts the NUL);
 *   -ENOENT  no Bearer token, or the claim is absent or an empty string;
 *   -E2BIG   the token is over RL_JWT_TOKEN_MAX, or the value over cap-1;
 *   -EINVAL  anything malformed: the token, its base64url, its JSON (too
 *            deep, too many members, a duplicate), exp/nbf not numbers,
 *            the claim an object, array, fraction, bool or null, out of
 *            int64, or holding a control character; `claim` too long;
 *   -EACCES  with a key: alg not "HS256", "crit" present, or a signature
 *            that is not the right one (missing, another key's, one bit off);
 *   -ETIME   expired or not yet valid.
 *
 * On error *outlen is 0 and out[0] is NUL (when cap > 0).
 */
int rl_jwt_claim_key(const char *auth, size_t len, const char *claim,
		     const struct rl_sha256_hmac *key, int64_t now_s, char *out,
		     size_t cap, size_t *outlen);

/*
 * The same with the secret's bytes (a `jwt_secret` file's, exactly;
 * prepared for each call: rl_jwt_claim_key saves those two blocks).
 * `secret` NULL is unverified. A non-NULL secret of 0 bytes verifies
 * nothing (-EACCES): a key anybody can guess is no key.
 */
int rl_jwt_claim(const char *auth, size_t len, const char *claim,
		 const uint8_t *secret, size_t slen, int64_t now_s, char *out,
		 size_t cap, size_t *outlen);

/*
 * A process's cache of tokens already read (the caller's): a client sends
 * the same token with every request until it is refreshed, and verifying
 * it (SHA-256 over the signing input) and reading its claims costs more
 * than the server's own work for the request.
 *
 * An entry is what rl_jwt_claim_key returned 0 for: the claim's text and
 * the seconds the token is valid in (exp and nbf with the leeway), under
 * a tag the caller gives for the claim name and the key together (one per
 * distinct pair a configuration has, never 0, a new one when the
 * configuration is reloaded). It is found by a 128-bit digest of the
 * token's text (two SipHash-1-3 under keys derived from the segment's
 * secret seed): no client can compute a digest or choose a token whose
 * digest is another's, so a hit stands for the very token that was read.
 * Only successes are kept: a token refused is read again every time.
 * RL_JWT_CACHE_SETS sets of RL_JWT_CACHE_WAYS entries, a claim text up to
 * RL_JWT_CACHE_KEY_MAX - 1 bytes (a longer one is not kept); about 28 KB
 * in all, no allocation. Threads share it without a lock: each entry has a
 * sequence number, odd while it is written, that a reader checks around
 * its copy (a seqlock); a writer that finds an entry being written leaves
 * it.
 */
#define RL_JWT_CACHE_SETS 128
#define RL_JWT_CACHE_WAYS 2
#define RL_JWT_CACHE_KEY_MAX 64

struct rl_jwt_cached {
	uint32_t seq;          /* __atomic: odd while written */
	uint8_t keylen;
	uint64_t tag;          /* 0: empty */
	uint64_t d[2];         /* the token's digest */
	int64_t from_s, until_s;
	char key[RL_JWT_CACHE_KEY_MAX];
};

struct rl_jwt_cache {
	uint64_t k[2][2];      /* the digest's keys */
	uint8_t victim[RL_JWT_CACHE_SETS];
	struct rl_jwt_cached e[RL_JWT_CACHE_SETS][RL_JWT_CACHE_WAYS];
};

/* Empty, keyed from `seed` (the segment's, struct rl_table's seed). */
void rl_jwt_cache_init(struct rl_jwt_cache *c, const uint64_t seed[2]);

/*
 * rl_jwt_claim_key through cache `c` under `tag`: the same result for the
 * same arguments (a token read before gives its claim again while `now_s`
 * is in its window, -ETIME outside it), without reading it again.
 */
int rl_jwt_claim_key_cached(struct rl_jwt_cache *c, uint64_t tag,
			    const char *auth, size_t len, const char *claim,
			    const struct rl_sha256_hmac *key, int64_t now_s,
			    char *out, size_t cap, size_t *outlen);

/*
 * base64url (RFC 4648 section 5) without padding, strictly, as RFC 7515
 * section 2 writes it: only A-Z a-z 0-9 '-' '_', no '=', no length of 4n+1,
 * and the unused low bits of the last character zero (so each byte string
 * has one encoding). Returns 0 (*outlen bytes written), -EINVAL, or
 * -ENOSPC when more than `cap` bytes would come out.
 */
int rl_jwt_b64url_decode(const char *s, size_t len, uint8_t *out, size_t cap,
			 size_t *outlen);

/* The encoding of `len` bytes, unpadded, not NUL-terminated. Returns 0
 * (*outlen characters) or -ENOSPC. */
int rl_jwt_b64url_encode(const void *in, size_t len, char *out, size_t cap,
			 size_t *outlen);

/* 0 if p[0..n) is one JSON value with whitespace around it, read as a
 * token's parts are (RFC 8259 strictly, at most RL_JWT_DEPTH_MAX deep),
 * else -EINVAL: what a deny_json file must be. */
int rl_json_valid(const uint8_t *p, size_t n);

#endif /* RL_JWT_H */
