/* SPDX-License-Identifier: MIT */
/*
 * test_sha256.c - SHA-256, HMAC-SHA-256 and the constant-time comparison
 * (src/core/sha256.c) against FIPS 180-4 / NIST's examples and RFC 4231's
 * HMAC test cases 1-7.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void hex(const uint8_t *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void assert_digest(const uint8_t d[RL_SHA256_LEN], const char *want)
{
	char got[2 * RL_SHA256_LEN + 1];

	hex(d, RL_SHA256_LEN, got);
	assert_string_equal(got, want);
}

/* FIPS 180-4's examples (NIST's "SHA256.pdf", and the "a" x 1e6 vector). */
static const struct {
	const char *msg;
	const char *want;
} nist[] = {
	{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
	{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
	/* 448 bits: the padding spills into a second block */
	{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	/* 896 bits */
	{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
	  "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
	  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
};

static void test_nist_one_shot(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(nist); i++) {
		uint8_t d[RL_SHA256_LEN];

		rl_sha256_digest(nist[i].msg, strlen(nist[i].msg), d);
		assert_digest(d, nist[i].want);
	}
}

/* The same messages fed one byte, then every split point, at a time. */
static void test_nist_incremental(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(nist); i++) {
		size_t len = strlen(nist[i].msg);

		for (size_t cut = 0; cut <= len; cut++) {
			struct rl_sha256 c;
			uint8_t d[RL_SHA256_LEN];

			rl_sha256_init(&c);
			rl_sha256_update(&c, nist[i].msg, cut);
			rl_sha256_update(&c, nist[i].msg + cut, len - cut);
			rl_sha256_final(&c, d);
			assert_digest(d, nist[i].want);
		}
		struct rl_sha256 c;
		uint8_t d[RL_SHA256_LEN];

		rl_sha256_init(&c);
		for (size_t j = 0; j < len; j++)
			rl_sha256_update(&c, nist[i].msg + j, 1);
		rl_sha256_final(&c, d);
		assert_digest(d, nist[i].want);
	}
}

static void test_million_a(void **state)
{
	char chunk[1000];
	struct rl_sha256 c;
	uint8_t d[RL_SHA256_LEN];
	char *all = malloc(1000000);

	(void)state;
	memset(chunk, 'a', sizeof(chunk));
	rl_sha256_init(&c);
	for (int i = 0; i < 1000; i++)
		rl_sha256_update(&c, chunk, sizeof(chunk));
	rl_sha256_final(&c, d);
	assert_digest(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	assert_non_null(all);
	memset(all, 'a', 1000000);
	rl_sha256_digest(all, 1000000, d);
	assert_digest(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(all);
}

/* Every length around the padding boundaries (55, 56, 63, 64 bytes) gives a
 * different digest, the same fed in one piece or two. */
static void test_padding_boundaries(void **state)
{
	uint8_t msg[200], prev[RL_SHA256_LEN] = { 0 };

	(void)state;
	memset(msg, 'x', sizeof(msg));
	for (size_t len = 0; len < sizeof(msg); len++) {
		uint8_t a[RL_SHA256_LEN], b[RL_SHA256_LEN];
		struct rl_sha256 c;

		rl_sha256_digest(msg, len, a);
		rl_sha256_init(&c);
		rl_sha256_update(&c, msg, len / 3);
		rl_sha256_update(&c, msg + len / 3, len - len / 3);
		rl_sha256_final(&c, b);
		assert_memory_equal(a, b, sizeof(a));
		assert_memory_not_equal(a, prev, sizeof(a));
		memcpy(prev, a, sizeof(a));
	}
}

/* ---- RFC 4231 ---- */

static void fill(uint8_t *p, uint8_t v, size_t n)
{
	memset(p, v, n);
}

static void test_rfc4231(void **state)
{
	uint8_t k20[20], k25[25], k131[131], d50[50], out[RL_SHA256_LEN];
	char got[65];

	(void)state;
	/* 1 */
	fill(k20, 0x0b, 20);
	rl_sha256_hmac(k20, 20, "Hi There", 8, out);
	assert_digest(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	/* 2: a key shorter than the output */
	rl_sha256_hmac((const uint8_t *)"Jefe", 4, "what do ya want for nothing?", 28, out);
	assert_digest(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	/* 3 */
	fill(k20, 0xaa, 20);
	fill(d50, 0xdd, 50);
	rl_sha256_hmac(k20, 20, d50, 50, out);
	assert_digest(out, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
	/* 4 */
	for (int i = 0; i < 25; i++)
		k25[i] = (uint8_t)(i + 1);
	fill(d50, 0xcd, 50);
	rl_sha256_hmac(k25, 25, d50, 50, out);
	assert_digest(out, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
	/* 5: truncated to 128 bits */
	fill(k20, 0x0c, 20);
	rl_sha256_hmac(k20, 20, "Test With Truncation", 20, out);
	hex(out, 16, got);
	assert_string_equal(got, "a3b6167473100ee06e0c796c2955552b");
	/* 6: a key longer than the block is hashed first */
	fill(k131, 0xaa, 131);
	rl_sha256_hmac(k131, 131, "Test Using Larger Than Block-Size Key - Hash Key First",
		       54, out);
	assert_digest(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
	/* 7: and a message longer than the block */
	const char *m7 = "This is a test using a larger than block-size key and a "
			 "larger than block-size data. The key needs to be hashed "
			 "before being used by the HMAC algorithm.";
	rl_sha256_hmac(k131, 131, m7, strlen(m7), out);
	assert_digest(out, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

/* A prepared key state copied and reused gives the one-shot's answer. */
static void test_hmac_prepared_copy(void **state)
{
	struct rl_sha256_hmac key, c;
	uint8_t a[RL_SHA256_LEN], b[RL_SHA256_LEN];

	(void)state;
	rl_sha256_hmac_init(&key, (const uint8_t *)"Jefe", 4);
	for (int i = 0; i < 2; i++) {
		c = key;
		rl_sha256_hmac_update(&c, "what do ya want ", 16);
		rl_sha256_hmac_update(&c, "for nothing?", 12);
		rl_sha256_hmac_final(&c, a);
		assert_digest(a, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	}
	/* an empty key is a key of 64 zero bytes (RFC 2104) */
	uint8_t zero[64] = { 0 };
	rl_sha256_hmac(NULL, 0, "x", 1, a);
	rl_sha256_hmac(zero, 64, "x", 1, b);
	assert_memory_equal(a, b, sizeof(a));
}

static void test_equal(void **state)
{
	uint8_t a[32], b[32];

	(void)state;
	memset(a, 7, sizeof(a));
	memcpy(b, a, sizeof(b));
	assert_int_equal(rl_sha256_equal(a, b, 32), 1);
	assert_int_equal(rl_sha256_equal(a, b, 0), 1);
	for (int i = 0; i < 32; i++)
		for (int bit = 0; bit < 8; bit++) {
			b[i] ^= (uint8_t)(1 << bit);
			assert_int_equal(rl_sha256_equal(a, b, 32), 0);
			b[i] ^= (uint8_t)(1 << bit);
		}
}

/* The name a secret is shown by: sha256: and 12 hex digits. */
static void test_name(void **state)
{
	char name[RL_SHA256_NAME_LEN];

	(void)state;
	rl_sha256_name("", 0, name);
	assert_string_equal(name, "sha256:e3b0c44298fc");
	rl_sha256_name("abc", 3, name);
	assert_string_equal(name, "sha256:ba7816bf8f01");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nist_one_shot),
		cmocka_unit_test(test_nist_incremental),
		cmocka_unit_test(test_million_a),
		cmocka_unit_test(test_padding_boundaries),
		cmocka_unit_test(test_rfc4231),
		cmocka_unit_test(test_hmac_prepared_copy),
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
