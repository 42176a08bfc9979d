/* SPDX-License-Identifier: MIT */
/*
 * fuzz_jwt.c - the JWT claim reader (src/core/jwt.c) on any bytes.
 *
 * 1. The input as an Authorization value, read unverified and with a
 *    secret: no crash, nothing out of bounds, only the documented errors,
 *    and a key found fits `cap`, is NUL-terminated at *outlen and holds
 *    no control character.
 * 2. The input (up to 512 bytes) as a claim, each byte a code point
 *    (0xff standing for U+1F600), written into a token of our own encoder
 *    with a mix of raw UTF-8 and \u escapes the input chooses, signed:
 *    it verifies and gives back exactly that claim as UTF-8 (or no key:
 *    empty, or a control character); an int64 from the input gives back
 *    its decimal text; and a one-bit flip at eight places in the signed
 *    token never verifies.
 * 3. The input as the payload's JSON, then as the header's, of a token
 *    signed by our encoder: the signed token gives with the secret just
 *    what it gives unverified (the signature right, only the header's alg
 *    may refuse it), and never a key the unverified read does not give.
 * 4. Every read of 1. also through one cache of tokens read, kept across
 *    inputs, twice: the same result and key as the plain read, whatever
 *    the cache held from earlier inputs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jwt.h"
#include "sha256.h"

#define NOW 1764633600

static const uint8_t SECRET[] = "fuzz secret";

static void check(const char *auth, size_t len, const struct rl_sha256_hmac *key)
{
	char out[300];
	size_t outlen = 7;
	int rc = rl_jwt_claim_key(auth, len, "sub", key, NOW, out, sizeof(out), &outlen);

	static struct rl_jwt_cache cache;
	static const uint64_t seed[2] = { 0x1234, 0x5678 };
	static int ready;

	if (rc != 0 && rc != -ENOENT && rc != -EINVAL && rc != -EACCES &&
	    rc != -ETIME && rc != -E2BIG)
		abort();
	if (!ready++)
		rl_jwt_cache_init(&cache, seed);
	for (int round = 0; round < 2; round++) {
		char c[300];
		size_t clen = 7;
		int crc = rl_jwt_claim_key_cached(&cache, key ? 2 : 1, auth, len,
						  "sub", key, NOW, c, sizeof(c),
						  &clen);

		if (crc != rc || clen != outlen || (!rc && memcmp(c, out, outlen + 1)))
			abort();
	}
	if (rc) {
		if (outlen || out[0])
			abort();
		return;
	}
	if (!outlen || outlen >= sizeof(out) || out[outlen] || strlen(out) != outlen)
		abort();
	for (size_t i = 0; i < outlen; i++)
		if ((uint8_t)out[i] < 0x20 || out[i] == 0x7f)
			abort();
}

static size_t put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 63));
		return 2;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 63));
	o[2] = (char)(0x80 | ((cp >> 6) & 63));
	o[3] = (char)(0x80 | (cp & 63));
	return 4;
}

static const char HS[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";

/* "Bearer " header "." payload "." HMAC, our own encoder. */
static size_t mint_h(const char *hdr, size_t hlen, const char *payload,
		     size_t plen, char *tok, size_t cap)
{
	uint8_t mac[RL_SHA256_LEN];
	size_t n = 7, k;

	memcpy(tok, "Bearer ", 7);
	if (rl_jwt_b64url_encode(hdr, hlen, tok + n, cap - n, &k))
		abort();
	n += k;
	tok[n++] = '.';
	if (rl_jwt_b64url_encode(payload, plen, tok + n, cap - n, &k))
		abort();
	n += k;
	rl_sha256_hmac(SECRET, sizeof(SECRET) - 1, tok + 7, n - 7, mac);
	tok[n++] = '.';
	if (rl_jwt_b64url_encode(mac, sizeof(mac), tok + n, cap - n, &k))
		abort();
	return n + k;
}

static size_t mint(const char *payload, size_t plen, char *tok, size_t cap)
{
	return mint_h(HS, sizeof(HS) - 1, payload, plen, tok, cap);
}

/* The same token read with the key and without. */
static void same_both_ways(const char *tok, size_t tlen,
			   const struct rl_sha256_hmac *key, int header)
{
	char a[300], b[300];
	size_t alen, blen;
	int ra = rl_jwt_claim_key(tok, tlen, "sub", key, NOW, a, sizeof(a), &alen);
	int rb = rl_jwt_claim_key(tok, tlen, "sub", NULL, NOW, b, sizeof(b), &blen);

	if (ra == 0 && (rb != 0 || alen != blen || memcmp(a, b, alen)))
		abort();
	if (!header && ra != rb)
		abort();
	if (header && ra != rb && ra != -EACCES)
		abort();
}

static void as_json(const uint8_t *data, size_t size,
		    const struct rl_sha256_hmac *key)
{
	static char tok[16384];
	static const char pl[] = "{\"sub\":\"x\"}";
	size_t tlen;

	if (size > 3000)
		return;
	tlen = mint((const char *)data, size, tok, sizeof(tok));
	same_both_ways(tok, tlen, key, 0);
	tlen = mint_h((const char *)data, size, pl, sizeof(pl) - 1, tok, sizeof(tok));
	same_both_ways(tok, tlen, key, 1);
}

static void round_trip(const uint8_t *data, size_t size,
		       const struct rl_sha256_hmac *key)
{
	static char payload[8192], want[4096], tok[16384];
	char out[4096];
	size_t n = 0, w = 0, outlen, tlen;
	int ctl = 0, rc;

	n += (size_t)sprintf(payload, "{\"exp\":%d,\"sub\":\"", NOW + 100);
	for (size_t i = 0; i < size; i++) {
		uint32_t cp = data[i] == 0xff ? 0x1f600 : data[i];
		/* escape every byte whose neighbour is odd, and what must be */
		int esc = cp < 0x20 || cp == '"' || cp == '\\' ||
			  (i + 1 < size && (data[i + 1] & 1));

		w += put_utf8(want + w, cp);
		ctl |= cp < 0x20 || cp == 0x7f;
		if (!esc) {
			n += put_utf8(payload + n, cp);
		} else if (cp == 0x1f600) {
			n += (size_t)sprintf(payload + n, "\\ud83d\\ude00");
		} else if (cp == '"' && (data[i] & 2)) {
			n += (size_t)sprintf(payload + n, "\\\"");
		} else {
			n += (size_t)sprintf(payload + n, "\\u%04" PRIX32, cp);
		}
	}
	n += (size_t)sprintf(payload + n, "\"}");
	tlen = mint(payload, n, tok, sizeof(tok));
	rc = rl_jwt_claim_key(tok, tlen, "sub", key, NOW, out, sizeof(out), &outlen);
	if (tlen - 7 > RL_JWT_TOKEN_MAX) {
		if (rc != -E2BIG)
			abort();
		return;
	}
	if (ctl ? rc != -EINVAL : !w ? rc != -ENOENT : rc != 0)
		abort();
	if (!rc && (outlen != w || memcmp(out, want, w)))
		abort();
	/* one bit flipped, eight places in the token (not "Bearer "), never
	 * verifies */
	for (unsigned k = 0; k < 8; k++) {
		size_t at = 7 + (size ? (data[k % size] * 131u + k * 977u) : k) % (tlen - 7);
		unsigned bit = (unsigned)(size ? data[(k + 1) % size] : k) % 8;

		tok[at] ^= (char)(1u << bit);
		rc = rl_jwt_claim_key(tok, tlen, "sub", key, NOW, out, sizeof(out), &outlen);
		if (rc == 0)
			abort();
		tok[at] ^= (char)(1u << bit);
	}
	/* an integer claim */
	if (size >= 8) {
		int64_t v;
		char num[32];

		memcpy(&v, data, 8);
		n = (size_t)sprintf(payload, "{\"sub\":%" PRId64 "}", v);
		sprintf(num, "%" PRId64, v);
		tlen = mint(payload, n, tok, sizeof(tok));
		rc = rl_jwt_claim_key(tok, tlen, "sub", key, NOW, out, sizeof(out), &outlen);
		if (rc || strcmp(out, num))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rl_sha256_hmac key;
	char *copy = malloc(size ? size : 1);

	rl_sha256_hmac_init(&key, SECRET, sizeof(SECRET) - 1);
	memcpy(copy, data, size);
	check(copy, size, NULL);
	check(copy, size, &key);
	free(copy);
	if (size <= 512)
		round_trip(data, size, &key);
	as_json(data, size, &key);
	return 0;
}
