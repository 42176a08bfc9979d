/* SPDX-License-Identifier: MIT */
/*
 * test_jwt.c - a JWT claim as a key (src/core/jwt.c): base64url, the JSON
 * reader, HS256 verification, exp/nbf, against RFC 7519's example, tokens
 * minted by Python's hmac/hashlib and by the test itself, and hostile
 * tokens.
 *
 * Every Authorization value is copied into a heap buffer of exactly its
 * length, with no NUL after it: under ASan a read past `len` fails here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the tables of cases below give printf formats */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

#include "jwt.h"
#include "sha256.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* A "now" between iat and exp of the tokens below: 2025-12-02. */
#define NOW 1764633600

static const uint8_t SECRET[] = "rlshim unit test secret, 32 byte";
#define SLEN (sizeof(SECRET) - 1)

/* Python's: hmac.new(b"python-minted secret, 32 bytes!!", ...). */
static const uint8_t PYSECRET[] = "python-minted secret, 32 bytes!!";
#define PYSLEN (sizeof(PYSECRET) - 1)

/* RFC 7515 appendix A.1's key (the JWK's "k"), which signs RFC 7519's
 * section 3.1 example. */
static const uint8_t RFC_KEY[64] =
	"\x03\x23\x35\x4b\x2b\x0f\xa5\xbc\x83\x7e\x06\x65\x77\x7b\xa6\x8f"
	"\x5a\xb3\x28\xe6\xf0\x54\xc9\x28\xa9\x0f\x84\xb2\xd2\x50\x2e\xbf"
	"\xd3\xfb\x5a\x92\xd2\x06\x47\xef\x96\x8a\xb4\xc3\x77\x62\x3d\x22"
	"\x3d\x2e\x21\x72\x05\x2e\x4f\x08\xc0\xcd\x9a\xf5\x67\xd0\x80\xa3";
static const char RFC_TOKEN[] =
	"eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9."
	"eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt"
	"cGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
	"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
#define RFC_EXP 1300819380

/* ---- helpers ---- */

static char got[512];

static struct rl_jwt_cache cache;
static uint64_t tags;
static const uint64_t SEED[2] = { 0x0123456789abcdefull, 0xfedcba9876543210ull };

/* The cache gives what rl_jwt_claim gave (rc, and got's claim), on its
 * first read of the token under a new tag and again from the entry. */
static void cached_same(const char *auth, size_t len, const char *claim,
			const uint8_t *secret, size_t slen, int64_t now,
			size_t cap, int want)
{
	struct rl_sha256_hmac key;
	char c[sizeof(got)];
	uint64_t tag = ++tags;

	if (tag == 1)
		rl_jwt_cache_init(&cache, SEED);
	if (secret && !slen)
		return; /* rl_jwt_claim's own refusal, before any key */
	if (secret)
		rl_sha256_hmac_init(&key, secret, slen);
	for (int round = 0; round < 2; round++) {
		size_t n = 99;
		int rc;

		memset(c, 'Y', sizeof(c));
		rc = rl_jwt_claim_key_cached(&cache, tag, auth, len, claim,
					     secret ? &key : NULL, now, c, cap, &n);
		assert_int_equal(rc, want);
		if (rc == 0) {
			assert_int_equal(n, strlen(got));
			assert_string_equal(c, got);
		} else if (cap) {
			assert_int_equal(n, 0);
			assert_int_equal(c[0], '\0');
		}
	}
}

/* rl_jwt_claim on an exact copy of `auth`, and through the cache. */
static int claim_n(const char *auth, size_t len, const char *claim,
		   const uint8_t *secret, size_t slen, int64_t now, size_t cap)
{
	char *buf = malloc(len ? len : 1);
	size_t outlen = 99;
	int rc;

	assert_non_null(buf);
	assert_true(cap <= sizeof(got));
	if (len)
		memcpy(buf, auth, len);
	memset(got, 'X', sizeof(got));
	rc = rl_jwt_claim(auth ? buf : NULL, len, claim, secret, slen, now, got, cap,
			  &outlen);
	if (rc == 0)
		assert_int_equal(strlen(got), outlen);
	else if (cap)
		assert_int_equal(outlen, 0), assert_int_equal(got[0], '\0');
	cached_same(auth ? buf : NULL, len, claim, secret, slen, now, cap, rc);
	free(buf);
	return rc;
}

static int claim(const char *auth, const char *name, const uint8_t *secret,
		 size_t slen, int64_t now)
{
	return claim_n(auth, strlen(auth), name, secret, slen, now, sizeof(got));
}

static void b64(const void *in, size_t len, char *out, size_t cap)
{
	size_t n;

	assert_int_equal(rl_jwt_b64url_encode(in, len, out, cap - 1, &n), 0);
	out[n] = '\0';
}

/* "Bearer " + base64url(header) "." base64url(payload) "." signature, the
 * signature HMAC-SHA-256 with `secret` (or `sig` as given when not NULL). */
static char *mint(const char *header, const char *payload, const uint8_t *secret,
		  size_t slen, const char *sig)
{
	static char tok[16384];
	uint8_t mac[RL_SHA256_LEN];
	size_t n;

	strcpy(tok, "Bearer ");
	n = strlen(tok);
	b64(header, strlen(header), tok + n, sizeof(tok) - n);
	strcat(tok, ".");
	n = strlen(tok);
	b64(payload, strlen(payload), tok + n, sizeof(tok) - n);
	if (sig) {
		strcat(tok, ".");
		strcat(tok, sig);
		return tok;
	}
	rl_sha256_hmac(secret, slen, tok + 7, strlen(tok) - 7, mac);
	strcat(tok, ".");
	n = strlen(tok);
	b64(mac, sizeof(mac), tok + n, sizeof(tok) - n);
	return tok;
}

static const char HS[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";

/* A payload signed with SECRET, claim "sub" read with SECRET at NOW. */
static int sub_of(const char *payload)
{
	return claim(mint(HS, payload, SECRET, SLEN, NULL), "sub", SECRET, SLEN, NOW);
}

/* The same without a secret: the JSON reader alone. */
static int sub_unverified(const char *payload)
{
	return claim(mint(HS, payload, NULL, 0, ""), "sub", NULL, 0, NOW);
}

/* ---- RFC 7519 ---- */

static void test_rfc7519_example(void **state)
{
	char auth[512];

	(void)state;
	snprintf(auth, sizeof(auth), "Bearer %s", RFC_TOKEN);
	/* its exp is in 2011: at a time before that it verifies */
	assert_int_equal(claim(auth, "iss", RFC_KEY, 64, RFC_EXP - 60), 0);
	assert_string_equal(got, "joe");
	assert_int_equal(claim(auth, "exp", RFC_KEY, 64, RFC_EXP - 60), 0);
	assert_string_equal(got, "1300819380");
	/* today it is expired, verified or not */
	assert_int_equal(claim(auth, "iss", RFC_KEY, 64, NOW), -ETIME);
	assert_int_equal(claim(auth, "iss", NULL, 0, NOW), -ETIME);
	/* the leeway: 29 s after exp still valid, 30 s not */
	assert_int_equal(claim(auth, "iss", RFC_KEY, 64, RFC_EXP + 29), 0);
	assert_int_equal(claim(auth, "iss", RFC_KEY, 64, RFC_EXP + 30), -ETIME);
	/* a bool claim is no key; an absent one neither */
	assert_int_equal(claim(auth, "http://example.com/is_root", RFC_KEY, 64,
			       RFC_EXP - 60), -EINVAL);
	assert_int_equal(claim(auth, "sub", RFC_KEY, 64, RFC_EXP - 60), -ENOENT);
	/* another key, or the key one byte short */
	assert_int_equal(claim(auth, "iss", SECRET, SLEN, RFC_EXP - 60), -EACCES);
	assert_int_equal(claim(auth, "iss", RFC_KEY, 63, RFC_EXP - 60), -EACCES);
	/* unverified it reads too */
	assert_int_equal(claim(auth, "iss", NULL, 0, RFC_EXP - 60), 0);
	assert_string_equal(got, "joe");
}

/* Tokens printed by Python (hmac, hashlib, json) when this test was
 * written: json.dumps(..., separators=(',',':')), ensure_ascii escapes. */
static void test_python_minted(void **state)
{
	(void)state;
	/* {"sub":"user-42","tenant":1234,"iat":1764633600,"exp":2000000000} */
	const char *t1 = "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
			 "eyJzdWIiOiJ1c2VyLTQyIiwidGVuYW50IjoxMjM0LCJpYXQiOjE3NjQ2MzM2MDAs"
			 "ImV4cCI6MjAwMDAwMDAwMH0.mJMAI7Wr8ner00X8FMRLtxpfcS2bMAv5fvo6w9UUyLo";
	assert_int_equal(claim(t1, "sub", PYSECRET, PYSLEN, NOW), 0);
	assert_string_equal(got, "user-42");
	assert_int_equal(claim(t1, "tenant", PYSECRET, PYSLEN, NOW), 0);
	assert_string_equal(got, "1234");
	assert_int_equal(claim(t1, "sub", SECRET, SLEN, NOW), -EACCES);
	assert_int_equal(claim(t1, "sub", PYSECRET, PYSLEN, 2000000000 + 30), -ETIME);
	/* {"sub":"\u00e9\ud83d\ude00","exp":2000000000.5,"nbf":1764633600.25} */
	const char *t2 = "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
			 "eyJzdWIiOiJcdTAwZTlcdWQ4M2RcdWRlMDAiLCJleHAiOjIwMDAwMDAwMDAuNSwi"
			 "bmJmIjoxNzY0NjMzNjAwLjI1fQ._na_GejYQXConJUqBzrag0g0CYKZKS7Nwach5CPv6No";
	assert_int_equal(claim(t2, "sub", PYSECRET, PYSLEN, NOW), 0);
	assert_string_equal(got, "\xc3\xa9\xf0\x9f\x98\x80");
	/* nbf 1764633600.25 is 1764633601 rounded up: valid from 30 s before */
	assert_int_equal(claim(t2, "sub", PYSECRET, PYSLEN, 1764633601 - 30), 0);
	assert_int_equal(claim(t2, "sub", PYSECRET, PYSLEN, 1764633601 - 31), -ETIME);
	/* exp 2000000000.5 is 2000000001: expired 30 s after */
	assert_int_equal(claim(t2, "sub", PYSECRET, PYSLEN, 2000000001 + 29), 0);
	assert_int_equal(claim(t2, "sub", PYSECRET, PYSLEN, 2000000001 + 30), -ETIME);
	/* {"sub":-9223372036854775808,"org":{"id":[1,2,{"x":null}]}} */
	const char *t3 = "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
			 "eyJzdWIiOi05MjIzMzcyMDM2ODU0Nzc1ODA4LCJvcmciOnsiaWQiOlsxLDIseyJ4"
			 "IjpudWxsfV19fQ.0BI7Jl9vz5dv-qG12EMDzdbtyDkP6wSc1UhlvwqAXVw";
	assert_int_equal(claim(t3, "sub", PYSECRET, PYSLEN, NOW), 0);
	assert_string_equal(got, "-9223372036854775808");
	assert_int_equal(claim(t3, "org", PYSECRET, PYSLEN, NOW), -EINVAL);
}

/* ---- the Authorization value ---- */

static void test_bearer_scheme(void **state)
{
	char auth[2048], *t = mint(HS, "{\"sub\":\"u1\"}", SECRET, SLEN, NULL);
	const char *tok = t + 7;

	(void)state;
	const char *ok[] = { "Bearer %s", "bearer %s", "BEARER %s", "bEaReR    %s",
			     "  Bearer %s \t", "\tBearer %s" };
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		snprintf(auth, sizeof(auth), ok[i], tok);
		assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), 0);
		assert_string_equal(got, "u1");
	}
	const char *none[] = { "Basic %s", "Bearer", "Bearer   ", "Bearer\t%s", "Bearer%s",
			       "%s", "", "Token %s", "Bearerx %s" };
	for (size_t i = 0; i < ARRAY_SIZE(none); i++) {
		snprintf(auth, sizeof(auth), none[i], tok);
		assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), -ENOENT);
	}
	assert_int_equal(claim_n(NULL, 0, "sub", SECRET, SLEN, NOW, 64), -ENOENT);
	/* a token of two or four parts, or with a space inside */
	snprintf(auth, sizeof(auth), "Bearer %s.x", tok);
	assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), -EINVAL);
	assert_int_equal(claim("Bearer abc.def", "sub", NULL, 0, NOW), -EINVAL);
	assert_int_equal(claim("Bearer abc", "sub", NULL, 0, NOW), -EINVAL);
	assert_int_equal(claim("Bearer ..", "sub", NULL, 0, NOW), -EINVAL);
	snprintf(auth, sizeof(auth), "Bearer %.10s %s", tok, tok + 10);
	assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), -EINVAL);
}

/* ---- base64url ---- */

static void test_b64url_round_trip(void **state)
{
	uint8_t in[300], back[300];
	char enc[500];

	(void)state;
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 37 + 11);
	for (size_t len = 0; len < sizeof(in); len++) {
		size_t n, m;

		assert_int_equal(rl_jwt_b64url_encode(in, len, enc, sizeof(enc), &n), 0);
		assert_int_equal(n, (len * 4 + 2) / 3);
		assert_null(memchr(enc, '=', n));
		assert_int_equal(rl_jwt_b64url_decode(enc, n, back, sizeof(back), &m), 0);
		assert_int_equal(m, len);
		assert_memory_equal(in, back, len);
		if (len)
			assert_int_equal(rl_jwt_b64url_decode(enc, n, back, len - 1, &m),
					 -ENOSPC);
	}
	assert_int_equal(rl_jwt_b64url_encode(in, 3, enc, 3, &(size_t){ 0 }), -ENOSPC);
}

static void test_b64url_strict(void **state)
{
	uint8_t out[16];
	size_t n;

	(void)state;
	/* RFC 4648's "f", "fo", "foo" without padding */
	assert_int_equal(rl_jwt_b64url_decode("Zg", 2, out, sizeof(out), &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(rl_jwt_b64url_decode("Zm8", 3, out, sizeof(out), &n), 0);
	assert_int_equal(rl_jwt_b64url_decode("Zm9v", 4, out, sizeof(out), &n), 0);
	assert_memory_equal(out, "foo", 3);
	assert_int_equal(rl_jwt_b64url_decode("", 0, out, sizeof(out), &n), 0);
	assert_int_equal(n, 0);
	/* padding, the other alphabet, blanks, a lone character */
	const char *bad[] = { "Zg==", "Zm8=", "Zg=", "+/8", "ab+c", "ab/c", "Zm 9v",
			      "Z", "Zm9vZ", "Zm9v\n", "Zm.v", "Zm9\x80" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(rl_jwt_b64url_decode(bad[i], strlen(bad[i]), out,
						      sizeof(out), &n), -EINVAL);
	/* non-canonical trailing bits: "Zh" is 'f' with a 1 in the unused bits */
	assert_int_equal(rl_jwt_b64url_decode("Zh", 2, out, sizeof(out), &n), -EINVAL);
	assert_int_equal(rl_jwt_b64url_decode("Zm9", 3, out, sizeof(out), &n), -EINVAL);
	/* '-' and '_' are 62 and 63 */
	assert_int_equal(rl_jwt_b64url_decode("-_8", 3, out, sizeof(out), &n), 0);
	assert_int_equal(out[0], 0xfb);
	assert_int_equal(out[1], 0xff);
}

/* Bad base64url in each part of a token is malformed. */
static void test_token_bad_base64(void **state)
{
	char auth[1024];
	char *t = mint(HS, "{\"sub\":\"u1\"}", SECRET, SLEN, NULL);
	char *d1 = strchr(t, '.'), *d2 = strchr(d1 + 1, '.');
	size_t h = (size_t)(d1 - t), p = (size_t)(d2 - t);

	(void)state;
	/* padding after the header, the payload, the signature */
	snprintf(auth, sizeof(auth), "%.*s=%s", (int)h, t, t + h);
	assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), -EINVAL);
	snprintf(auth, sizeof(auth), "%.*s=%s", (int)p, t, t + p);
	/* the signature is checked before the payload is read: what it does
	 * not cover is not looked at */
	assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), -EACCES);
	assert_int_equal(claim(auth, "sub", NULL, 0, NOW), -EINVAL);
	snprintf(auth, sizeof(auth), "%s=", t);
	assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), -EINVAL);
	assert_int_equal(claim(auth, "sub", NULL, 0, NOW), -EINVAL);
	/* '+' or '/' in the signature: malformed, not just a bad signature */
	snprintf(auth, sizeof(auth), "%s", t);
	auth[strlen(auth) - 5] = '+';
	assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), -EINVAL);
	auth[strlen(auth) - 5] = '/';
	assert_int_equal(claim(auth, "sub", NULL, 0, NOW), -EINVAL);
	/* the signature's last character with its unused bits set (43 chars:
	 * 2 bits unused); one that differs only there would decode to the
	 * same bytes: refused */
	snprintf(auth, sizeof(auth), "%s", t);
	char *last = auth + strlen(auth) - 1;
	int v = (*last >= 'A' && *last <= 'Z') ? *last - 'A' :
		(*last >= 'a' && *last <= 'z') ? *last - 'a' + 26 :
		(*last >= '0' && *last <= '9') ? *last - '0' + 52 :
		*last == '-' ? 62 : 63;
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	*last = abc[v | 1];
	assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), -EINVAL);
}

/* ---- the signature ---- */

static void test_alg_confusion(void **state)
{
	const char *pl = "{\"sub\":\"admin\"}";
	const char *hdrs[] = {
		"{\"alg\":\"none\"}", "{\"alg\":\"hs256\"}", "{\"alg\":\"RS256\"}",
		"{\"alg\":\"HS512\"}", "{\"alg\":\"HS256 \"}", "{\"typ\":\"JWT\"}",
		"{\"alg\":null}", "{\"alg\":[\"HS256\"]}", "{}",
		"{\"alg\":\"HS256\",\"crit\":[\"exp\"]}",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(hdrs); i++) {
		/* signed with the right secret, even so */
		assert_int_equal(claim(mint(hdrs[i], pl, SECRET, SLEN, NULL), "sub", SECRET,
				       SLEN, NOW), -EACCES);
		/* unverified, any alg reads */
		assert_int_equal(claim(mint(hdrs[i], pl, SECRET, SLEN, NULL), "sub", NULL,
				       0, NOW), 0);
	}
	/* "alg":"none" with the empty signature RFC 7519 section 6 gives it */
	assert_int_equal(claim(mint("{\"alg\":\"none\"}", pl, NULL, 0, ""), "sub", SECRET,
			       SLEN, NOW), -EACCES);
	assert_int_equal(claim(mint("{\"alg\":\"none\"}", pl, NULL, 0, ""), "sub", NULL,
			       0, NOW), 0);
	assert_string_equal(got, "admin");
	/* "HS256" escaped is "HS256" */
	assert_int_equal(claim(mint("{\"alg\":\"HS\\u0032\\u00356\"}", pl, SECRET, SLEN,
				    NULL), "sub", SECRET, SLEN, NOW), 0);
	/* a repeated alg is malformed, whichever would win */
	assert_int_equal(claim(mint("{\"alg\":\"none\",\"alg\":\"HS256\"}", pl, SECRET,
				    SLEN, NULL), "sub", SECRET, SLEN, NOW), -EINVAL);
}

static void test_bad_signatures(void **state)
{
	const char *pl = "{\"sub\":\"u1\"}";
	static const uint8_t other[] = "another secret of the same size!";
	char auth[1024];

	(void)state;
	/* HS256 and an empty signature */
	assert_int_equal(claim(mint(HS, pl, NULL, 0, ""), "sub", SECRET, SLEN, NOW), -EACCES);
	/* another secret's */
	assert_int_equal(claim(mint(HS, pl, other, sizeof(other) - 1, NULL), "sub", SECRET,
			       SLEN, NOW), -EACCES);
	/* one too short, one too long (valid base64url both) */
	snprintf(auth, sizeof(auth), "%s", mint(HS, pl, SECRET, SLEN, NULL));
	auth[strlen(auth) - 3] = '\0';
	assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), -EACCES);
	snprintf(auth, sizeof(auth), "%sAAAA", mint(HS, pl, SECRET, SLEN, NULL));
	assert_int_equal(claim(auth, "sub", SECRET, SLEN, NOW), -EACCES);
	/* a zero-length secret verifies nothing, not even its own tokens */
	assert_int_equal(claim(mint(HS, pl, SECRET, 0, NULL), "sub", SECRET, 0, NOW), -EACCES);
	/* a long secret (hashed first) works */
	uint8_t big[200];
	memset(big, 0x5a, sizeof(big));
	assert_int_equal(claim(mint(HS, pl, big, sizeof(big), NULL), "sub", big, sizeof(big),
			       NOW), 0);
	/* the prepared-key entry point gives the same */
	struct rl_sha256_hmac key;
	size_t n;
	const char *t = mint(HS, pl, SECRET, SLEN, NULL);
	rl_sha256_hmac_init(&key, SECRET, SLEN);
	assert_int_equal(rl_jwt_claim_key(t, strlen(t), "sub", &key, NOW, got, 64, &n), 0);
	assert_int_equal(rl_jwt_claim_key(t, strlen(t), "sub", &key, NOW, got, 64, &n), 0);
	assert_string_equal(got, "u1");
}

/* Every single-bit flip anywhere in a signed token: never verifies. */
static void test_bit_flips(void **state)
{
	char auth[512];
	size_t len;
	int verified = 0;

	(void)state;
	snprintf(auth, sizeof(auth), "%s",
		 mint(HS, "{\"sub\":\"u1\",\"exp\":2000000000}", SECRET, SLEN, NULL));
	len = strlen(auth);
	for (size_t i = 7; i < len; i++)
		for (int b = 0; b < 8; b++) {
			auth[i] ^= (char)(1 << b);
			int rc = claim_n(auth, len, "sub", SECRET, SLEN, NOW, 64);
			if (rc == 0)
				verified++;
			auth[i] ^= (char)(1 << b);
		}
	assert_int_equal(verified, 0);
	assert_int_equal(claim_n(auth, len, "sub", SECRET, SLEN, NOW, 64), 0);
}

/* ---- exp and nbf ---- */

static void test_exp_nbf(void **state)
{
	char pl[256];

	(void)state;
	struct {
		const char *fmt;
		long long arg;
		int want;
	} cases[] = {
		{ "{\"sub\":\"u\",\"exp\":%lld}", NOW + 1, 0 },
		{ "{\"sub\":\"u\",\"exp\":%lld}", NOW - 29, 0 },
		{ "{\"sub\":\"u\",\"exp\":%lld}", NOW - 30, -ETIME },
		{ "{\"sub\":\"u\",\"exp\":%lld}", 0, -ETIME },
		{ "{\"sub\":\"u\",\"exp\":%lld}", -1, -ETIME },
		/* now < exp + 30 exactly, with a fraction */
		{ "{\"sub\":\"u\",\"exp\":%lld.5}", NOW - 30, 0 },
		{ "{\"sub\":\"u\",\"exp\":%lld.5}", NOW - 31, -ETIME },
		{ "{\"sub\":\"u\",\"nbf\":%lld}", NOW + 30, 0 },
		{ "{\"sub\":\"u\",\"nbf\":%lld}", NOW + 31, -ETIME },
		/* now >= nbf - 30 exactly, with a fraction */
		{ "{\"sub\":\"u\",\"nbf\":%lld.01}", NOW + 29, 0 },
		{ "{\"sub\":\"u\",\"nbf\":%lld.01}", NOW + 30, -ETIME },
		{ "{\"sub\":\"u\",\"nbf\":%lld,\"exp\":1}", NOW, -ETIME },
		{ "{\"sub\":\"u\",\"exp\":%llde0}", 2000000000, 0 },
		{ "{\"sub\":\"u\",\"exp\":2e9,\"x\":%lld}", 0, 0 },
		{ "{\"sub\":\"u\",\"exp\":1.7646335e9,\"x\":%lld}", 0, -ETIME },
		{ "{\"sub\":\"u\",\"exp\":17646336600e-1,\"x\":%lld}", 0, 0 },
		{ "{\"sub\":\"u\",\"exp\":1e999999999,\"x\":%lld}", 0, 0 },
		{ "{\"sub\":\"u\",\"exp\":1e-999999999,\"x\":%lld}", 0, -ETIME },
		{ "{\"sub\":\"u\",\"exp\":0e999999999,\"x\":%lld}", 0, -ETIME },
		{ "{\"sub\":\"u\",\"nbf\":-1e999,\"x\":%lld}", 0, 0 },
		{ "{\"sub\":\"u\",\"exp\":99999999999999999999999,\"x\":%lld}", 0, 0 },
		/* not numbers: malformed, even unverified */
		{ "{\"sub\":\"u\",\"exp\":\"%lld\"}", 2000000000, -EINVAL },
		{ "{\"sub\":\"u\",\"exp\":true,\"x\":%lld}", 0, -EINVAL },
		{ "{\"sub\":\"u\",\"exp\":null,\"x\":%lld}", 0, -EINVAL },
		{ "{\"sub\":\"u\",\"nbf\":[%lld]}", 0, -EINVAL },
		{ "{\"sub\":\"u\",\"nbf\":{},\"x\":%lld}", 0, -EINVAL },
		/* a repeated exp is malformed */
		{ "{\"sub\":\"u\",\"exp\":%lld,\"exp\":1}", 2000000000, -EINVAL },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		snprintf(pl, sizeof(pl), cases[i].fmt, cases[i].arg);
		assert_int_equal(sub_of(pl), cases[i].want);
		assert_int_equal(sub_unverified(pl), cases[i].want);
	}
}

/* ---- the claim's value ---- */

static void test_claim_types(void **state)
{
	(void)state;
	struct {
		const char *payload;
		int want;
		const char *text;
	} cases[] = {
		{ "{\"sub\":\"alice\"}", 0, "alice" },
		{ "{\"sub\":42}", 0, "42" },
		{ "{\"sub\":0}", 0, "0" },
		{ "{\"sub\":-0}", 0, "0" },
		{ "{\"sub\":-17}", 0, "-17" },
		{ "{\"sub\":9223372036854775807}", 0, "9223372036854775807" },
		{ "{\"sub\":-9223372036854775808}", 0, "-9223372036854775808" },
		{ "{\"sub\":9223372036854775808}", -EINVAL, NULL },
		{ "{\"sub\":-9223372036854775809}", -EINVAL, NULL },
		{ "{\"sub\":100000000000000000000}", -EINVAL, NULL },
		{ "{\"sub\":1.0}", -EINVAL, NULL },
		{ "{\"sub\":1e3}", -EINVAL, NULL },
		{ "{\"sub\":1E+3}", -EINVAL, NULL },
		{ "{\"sub\":true}", -EINVAL, NULL },
		{ "{\"sub\":false}", -EINVAL, NULL },
		{ "{\"sub\":null}", -EINVAL, NULL },
		{ "{\"sub\":{\"id\":\"x\"}}", -EINVAL, NULL },
		{ "{\"sub\":[\"x\"]}", -EINVAL, NULL },
		{ "{\"sub\":\"\"}", -ENOENT, NULL },
		{ "{\"other\":\"x\"}", -ENOENT, NULL },
		{ "{}", -ENOENT, NULL },
		{ " \r\n\t{ \"sub\" : \"spaced\" } \n", 0, "spaced" },
		/* a member nested deeper is not the claim */
		{ "{\"a\":{\"sub\":\"inner\"}}", -ENOENT, NULL },
		{ "{\"a\":{\"sub\":\"inner\"},\"sub\":\"outer\"}", 0, "outer" },
		/* nested repeats are not the top level's business */
		{ "{\"a\":{\"k\":1,\"k\":2},\"sub\":\"u\"}", 0, "u" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		assert_int_equal(sub_of(cases[i].payload), cases[i].want);
		if (cases[i].text)
			assert_string_equal(got, cases[i].text);
	}
}

static void test_unicode(void **state)
{
	(void)state;
	struct {
		const char *payload;
		int want;
		const char *text;
	} cases[] = {
		{ "{\"sub\":\"caf\\u00e9\"}", 0, "caf\xc3\xa9" },
		{ "{\"sub\":\"caf\xc3\xa9\"}", 0, "caf\xc3\xa9" },
		{ "{\"sub\":\"\\u20AC\"}", 0, "\xe2\x82\xac" },
		{ "{\"sub\":\"\\ud83d\\ude00\"}", 0, "\xf0\x9f\x98\x80" },
		{ "{\"sub\":\"\\uDBFF\\uDFFF\"}", 0, "\xf4\x8f\xbf\xbf" },
		{ "{\"sub\":\"a\\\"b\\\\c\\/d\"}", 0, "a\"b\\c/d" },
		{ "{\"s\\u0075b\":\"escaped name\"}", 0, "escaped name" },
		/* lone surrogates, a high one before a non-low one */
		{ "{\"sub\":\"\\ud83d\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\\ude00\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\\ud83dx\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\\ud83d\\u0041\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\\ud83d\\ud83d\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\\u12\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\\u12G4\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\\x41\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\\'\"}", -EINVAL, NULL },
		/* control characters, decoded or raw: no key text */
		{ "{\"sub\":\"a\\u0000b\"}", -EINVAL, NULL },
		{ "{\"sub\":\"a\\nb\"}", -EINVAL, NULL },
		{ "{\"sub\":\"a\\u007fb\"}", -EINVAL, NULL },
		{ "{\"sub\":\"a\tb\"}", -EINVAL, NULL },
		/* invalid UTF-8: overlong, encoded surrogate, past U+10FFFF,
		 * a lone continuation, a cut sequence */
		{ "{\"sub\":\"\xc0\x80\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\xe0\x80\xaf\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\xed\xa0\x80\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\xf4\x90\x80\x80\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\x80\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\xe2\x82\"}", -EINVAL, NULL },
		{ "{\"sub\":\"\xff\"}", -EINVAL, NULL },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		assert_int_equal(sub_of(cases[i].payload), cases[i].want);
		if (cases[i].text)
			assert_string_equal(got, cases[i].text);
	}
}

/* ---- malformed JSON ---- */

static void test_strict_json(void **state)
{
	const char *bad[] = {
		"", " ", "[]", "\"sub\"", "42", "null", "{", "}", "{\"sub\":\"u\"",
		"{\"sub\":\"u\",}", "{,\"sub\":\"u\"}", "{\"sub\":\"u\"}x", "{\"sub\":\"u\"}{}",
		"{\"sub\" \"u\"}", "{\"sub\"::\"u\"}", "{sub:\"u\"}", "{'sub':'u'}",
		"{\"sub\":\"u\" /* c */}", "{\"sub\":\"u\"} // c", "{\"n\":01,\"sub\":\"u\"}",
		"{\"n\":+1,\"sub\":\"u\"}", "{\"n\":.5,\"sub\":\"u\"}", "{\"n\":1.,\"sub\":\"u\"}",
		"{\"n\":1e,\"sub\":\"u\"}", "{\"n\":-,\"sub\":\"u\"}", "{\"n\":NaN,\"sub\":\"u\"}",
		"{\"n\":Infinity,\"sub\":\"u\"}", "{\"n\":tru,\"sub\":\"u\"}",
		"{\"n\":[1,],\"sub\":\"u\"}", "{\"n\":[,1],\"sub\":\"u\"}",
		"{\"n\":{\"a\"},\"sub\":\"u\"}", "{\"n\":\"\x01\",\"sub\":\"u\"}",
		"{\"sub\":\"u\"}\x00", "\xef\xbb\xbf{\"sub\":\"u\"}", "{\"sub\":\"u\"\f}",
		/* repeated top-level names, however spelled */
		"{\"sub\":\"a\",\"sub\":\"b\"}", "{\"sub\":\"a\",\"s\\u0075b\":\"b\"}",
		"{\"x\":1,\"sub\":\"a\",\"x\":2}", "{\"\":1,\"\":2,\"sub\":\"u\"}",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		/* a NUL inside: by length, not strlen */
		char pl[256];
		size_t n = strlen(bad[i]);

		memcpy(pl, bad[i], n + 1);
		if (!strcmp(bad[i], "{\"sub\":\"u\"}"))
			continue;
		assert_int_equal(sub_of(pl), -EINVAL);
		assert_int_equal(sub_unverified(pl), -EINVAL);
	}
	/* the header is held to the same */
	assert_int_equal(claim(mint("{\"alg\":\"HS256\",}", "{\"sub\":\"u\"}", SECRET, SLEN,
				    NULL), "sub", SECRET, SLEN, NOW), -EINVAL);
	assert_int_equal(claim(mint("[\"HS256\"]", "{\"sub\":\"u\"}", SECRET, SLEN, NULL),
			       "sub", NULL, 0, NOW), -EINVAL);
}

static void test_depth(void **state)
{
	static char pl[4000];
	size_t n;

	(void)state;
	/* the top-level object is depth 1: 31 arrays inside is 32, the limit */
	for (int depth = 30; depth <= 34; depth++) {
		n = (size_t)sprintf(pl, "{\"sub\":\"u\",\"a\":");
		for (int i = 0; i < depth - 1; i++)
			pl[n++] = '[';
		for (int i = 0; i < depth - 1; i++)
			pl[n++] = ']';
		pl[n++] = '}';
		pl[n] = '\0';
		assert_int_equal(sub_unverified(pl), depth <= RL_JWT_DEPTH_MAX ? 0 : -EINVAL);
	}
	/* objects and arrays alternating, 1000 deep: refused, no recursion
	 * past the limit (the token is under 4096 bytes) */
	n = (size_t)sprintf(pl, "{\"sub\":\"u\",\"a\":");
	for (int i = 0; i < 1000 && n < 1300; i++)
		n += (size_t)sprintf(pl + n, i & 1 ? "[" : "{\"k\":");
	pl[n] = '\0';
	assert_int_equal(sub_unverified(pl), -EINVAL);
	assert_int_equal(sub_of(pl), -EINVAL);
	/* 1000 unclosed brackets */
	n = (size_t)sprintf(pl, "{\"a\":");
	memset(pl + n, '[', 1000);
	pl[n + 1000] = '\0';
	assert_int_equal(sub_unverified(pl), -EINVAL);
}

static void test_members_limit(void **state)
{
	static char pl[3000];
	size_t n;

	(void)state;
	for (int count = 63; count <= 66; count++) {
		n = (size_t)sprintf(pl, "{\"sub\":\"u\"");
		for (int i = 1; i < count; i++)
			n += (size_t)sprintf(pl + n, ",\"c%d\":%d", i, i);
		sprintf(pl + n, "}");
		assert_int_equal(sub_of(pl), count <= RL_JWT_MEMBERS_MAX ? 0 : -EINVAL);
	}
}

/* ---- sizes ---- */

static void test_sizes(void **state)
{
	static char pl[4000], auth[8192];
	size_t n, outlen;

	(void)state;
	/* a token of exactly RL_JWT_TOKEN_MAX bytes reads; one more is E2BIG */
	for (size_t pad = 2900; pad < 3100; pad++) {
		memset(pl, 0, sizeof(pl));
		n = (size_t)sprintf(pl, "{\"sub\":\"u\",\"p\":\"");
		memset(pl + n, 'x', pad);
		strcpy(pl + n + pad, "\"}");
		snprintf(auth, sizeof(auth), "%s", mint(HS, pl, SECRET, SLEN, NULL));
		size_t tlen = strlen(auth) - 7;
		int rc = claim(auth, "sub", SECRET, SLEN, NOW);
		if (tlen <= RL_JWT_TOKEN_MAX)
			assert_int_equal(rc, 0);
		else
			assert_int_equal(rc, -E2BIG);
	}
	/* a huge header value of garbage */
	char *huge = malloc(1 << 20);
	assert_non_null(huge);
	memcpy(huge, "Bearer ", 7);
	memset(huge + 7, 'A', (1 << 20) - 7);
	assert_int_equal(claim_n(huge, 1 << 20, "sub", SECRET, SLEN, NOW, 64), -E2BIG);
	free(huge);
	/* the claim against cap: it and its NUL fit exactly, or E2BIG */
	const char *t = mint(HS, "{\"sub\":\"abcdef\",\"n\":123456}", SECRET, SLEN, NULL);
	assert_int_equal(claim_n(t, strlen(t), "sub", SECRET, SLEN, NOW, 7), 0);
	assert_string_equal(got, "abcdef");
	assert_int_equal(claim_n(t, strlen(t), "sub", SECRET, SLEN, NOW, 6), -E2BIG);
	assert_int_equal(claim_n(t, strlen(t), "n", SECRET, SLEN, NOW, 7), 0);
	assert_int_equal(claim_n(t, strlen(t), "n", SECRET, SLEN, NOW, 6), -E2BIG);
	assert_int_equal(rl_jwt_claim(t, strlen(t), "sub", SECRET, SLEN, NOW, got, 0,
				      &outlen), -E2BIG);
	/* claim names: empty, or longer than RL_JWT_CLAIM_MAX */
	char longname[RL_JWT_CLAIM_MAX + 2];
	memset(longname, 'c', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(claim(t, "", SECRET, SLEN, NOW), -EINVAL);
	assert_int_equal(claim(t, longname, SECRET, SLEN, NOW), -EINVAL);
	longname[RL_JWT_CLAIM_MAX] = '\0';
	char pl2[256];
	snprintf(pl2, sizeof(pl2), "{\"%s\":\"long\"}", longname);
	t = mint(HS, pl2, SECRET, SLEN, NULL);
	assert_int_equal(claim(t, longname, SECRET, SLEN, NOW), 0);
	assert_string_equal(got, "long");
}


/* ---- the cache of tokens read ---- */

static size_t n_out;

static int cached(uint64_t tag, const char *auth, const uint8_t *secret,
		  size_t slen, int64_t now)
{
	struct rl_sha256_hmac key;

	rl_sha256_hmac_init(&key, secret, slen);
	return rl_jwt_claim_key_cached(&cache, tag, auth, strlen(auth), "sub",
				       &key, now, got, sizeof(got), &n_out);
}

static const uint8_t OTHER[] = "another secret, not the issuer's";

static void test_cache(void **state)
{
	char tok[512], bad[512], pl[64];
	uint64_t t1, t2;

	(void)state;
	if (!tags++)
		rl_jwt_cache_init(&cache, SEED);
	t1 = ++tags;
	t2 = ++tags;
	snprintf(pl, sizeof(pl), "{\"sub\":\"u1\",\"exp\":%lld}", (long long)NOW + 10);
	snprintf(tok, sizeof(tok), "%s", mint(HS, pl, SECRET, SLEN, NULL));
	assert_int_equal(cached(t1, tok, SECRET, SLEN, NOW), 0);
	assert_string_equal(got, "u1");
	/* a hit: the entry answers without the key (the tag stands for it,
	 * which is why a caller's tags are per claim and key) */
	assert_int_equal(cached(t1, tok, OTHER, sizeof(OTHER) - 1, NOW), 0);
	assert_string_equal(got, "u1");
	/* under another tag it is read again, and another key refuses it */
	assert_int_equal(cached(t2, tok, OTHER, sizeof(OTHER) - 1, NOW), -EACCES);
	/* the entry's window: exp NOW + 10, and 30 s of leeway */
	assert_int_equal(cached(t1, tok, SECRET, SLEN, NOW + 39), 0);
	assert_int_equal(cached(t1, tok, SECRET, SLEN, NOW + 40), -ETIME);
	assert_int_equal(n_out, 0);
	assert_int_equal(got[0], '\0');
	assert_int_equal(cached(t1, tok, SECRET, SLEN, NOW), 0);
	/* every other token is its own: one bit of the signature, the
	 * payload's, a space more inside: none is the entry */
	for (size_t i = 7; tok[i]; i++) {
		snprintf(bad, sizeof(bad), "%s", tok);
		bad[i] ^= 1;
		assert_int_not_equal(cached(t1, bad, OTHER, sizeof(OTHER) - 1, NOW), 0);
	}
	/* the spaces around and the scheme's case are not the token's */
	snprintf(bad, sizeof(bad), " bEARER   %.400s\t", tok + 7);
	assert_int_equal(cached(t1, bad, OTHER, sizeof(OTHER) - 1, NOW), 0);
	assert_string_equal(got, "u1");
}

/* More tokens than entries, each read and read again: every answer is its
 * own token's, whatever was evicted. */
static void test_cache_evicts(void **state)
{
	char pl[128], toks[600][160];
	uint64_t tag;

	(void)state;
	if (!tags++)
		rl_jwt_cache_init(&cache, SEED);
	tag = ++tags;
	for (int i = 0; i < 600; i++) {
		snprintf(pl, sizeof(pl), "{\"sub\":\"user-%d\"}", i);
		snprintf(toks[i], sizeof(toks[i]), "%s", mint(HS, pl, SECRET, SLEN, NULL));
	}
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 600; i++) {
			int k = round == 1 ? 599 - i : i;
			char want[32];

			snprintf(want, sizeof(want), "user-%d", k);
			assert_int_equal(cached(tag, toks[k], SECRET, SLEN, NOW), 0);
			assert_string_equal(got, want);
		}
}

/* A claim too long for an entry is read every time, never cut. */
static void test_cache_long_claim(void **state)
{
	char pl[256], tok[1024], want[RL_JWT_CACHE_KEY_MAX + 1];
	uint64_t tag;

	(void)state;
	if (!tags++)
		rl_jwt_cache_init(&cache, SEED);
	tag = ++tags;
	memset(want, 'a', sizeof(want) - 1);
	want[sizeof(want) - 1] = '\0';
	snprintf(pl, sizeof(pl), "{\"sub\":\"%s\"}", want);
	snprintf(tok, sizeof(tok), "%s", mint(HS, pl, SECRET, SLEN, NULL));
	assert_int_equal(cached(tag, tok, SECRET, SLEN, NOW), 0);
	assert_string_equal(got, want);
	assert_int_equal(cached(tag, tok, OTHER, sizeof(OTHER) - 1, NOW), -EACCES);
	assert_int_equal(cached(tag, tok, SECRET, SLEN, NOW), 0);
	assert_string_equal(got, want);
}

/* Threads reading and replacing the same few entries at once: each answer
 * is its own token's or a fresh read's, never a torn entry. */
struct racer {
	int id;
	char (*toks)[160];
	int bad;
};

#define RACE_TOKENS 700
static void *race(void *arg)
{
	struct racer *r = arg;
	struct rl_sha256_hmac key;
	char out[128];
	size_t n;

	rl_sha256_hmac_init(&key, SECRET, SLEN);
	for (int j = 0; j < 4000; j++) {
		int k = (j * 7 + r->id * 131) % RACE_TOKENS;
		char want[32];

		snprintf(want, sizeof(want), "user-%d", k);
		if (rl_jwt_claim_key_cached(&cache, 1000000, r->toks[k],
					    strlen(r->toks[k]), "sub", &key, NOW,
					    out, sizeof(out), &n) ||
		    strcmp(out, want) || n != strlen(want))
			r->bad++;
	}
	return NULL;
}

static void test_cache_threads(void **state)
{
	static char toks[RACE_TOKENS][160];
	struct racer r[4];
	pthread_t t[4];
	char pl[128];

	(void)state;
	if (!tags++)
		rl_jwt_cache_init(&cache, SEED);
	for (int i = 0; i < RACE_TOKENS; i++) {
		snprintf(pl, sizeof(pl), "{\"sub\":\"user-%d\"}", i);
		snprintf(toks[i], sizeof(toks[i]), "%s", mint(HS, pl, SECRET, SLEN, NULL));
	}
	for (int i = 0; i < 4; i++) {
		r[i] = (struct racer){ i, toks, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].bad, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc7519_example),
		cmocka_unit_test(test_python_minted),
		cmocka_unit_test(test_bearer_scheme),
		cmocka_unit_test(test_b64url_round_trip),
		cmocka_unit_test(test_b64url_strict),
		cmocka_unit_test(test_token_bad_base64),
		cmocka_unit_test(test_alg_confusion),
		cmocka_unit_test(test_bad_signatures),
		cmocka_unit_test(test_bit_flips),
		cmocka_unit_test(test_exp_nbf),
		cmocka_unit_test(test_claim_types),
		cmocka_unit_test(test_unicode),
		cmocka_unit_test(test_strict_json),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_members_limit),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_cache_evicts),
		cmocka_unit_test(test_cache_long_claim),
		cmocka_unit_test(test_cache_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
