/* SPDX-License-Identifier: MIT */
/*
 * test_addr.c - addresses, prefixes, CIDR parsing and sets (src/core/addr.c).
 *
 * Every text input is copied into a heap buffer of exactly its length, with
 * no NUL after it, before it is parsed: under ASan a parser that looks one
 * byte past `len` fails here instead of in somebody's server.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "addr.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers ---- */

/* Parse `s` from an exact-size, unterminated heap copy. */
static int parse_exact(const char *s, struct rl_addr *out)
{
	size_t len = strlen(s);
	char *buf = malloc(len ? len : 1);
	int rc;

	assert_non_null(buf);
	memcpy(buf, s, len);
	rc = rl_addr_parse(buf, len, out);
	free(buf);
	return rc;
}

static int cidr_exact(const char *s, struct rl_cidr *out)
{
	size_t len = strlen(s);
	char *buf = malloc(len ? len : 1);
	int rc;

	assert_non_null(buf);
	memcpy(buf, s, len);
	rc = rl_cidr_parse(buf, len, out);
	free(buf);
	return rc;
}

static struct rl_addr addr_of(const char *s)
{
	struct rl_addr a;

	memset(&a, 0xaa, sizeof(a));
	if (parse_exact(s, &a))
		fail_msg("cannot parse \"%s\"", s);
	return a;
}

static struct rl_cidr cidr_of(const char *s)
{
	struct rl_cidr c;

	memset(&c, 0xaa, sizeof(c));
	if (cidr_exact(s, &c))
		fail_msg("cannot parse cidr \"%s\"", s);
	return c;
}

/* What parse_exact or cidr_exact answers for `s`, the result dropped. */
static int addr_rc(const char *s)
{
	struct rl_addr a;

	return parse_exact(s, &a);
}

static int cidr_rc(const char *s)
{
	struct rl_cidr c;

	return cidr_exact(s, &c);
}

/* Every one of `bad` is refused with -EINVAL. */
static void check_refused(int (*parse)(const char *), const char *const *bad,
			  size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (parse(bad[i]) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
}

static void assert_addr(const struct rl_addr *a, uint8_t family,
			const uint8_t bytes[16])
{
	assert_int_equal(a->family, family);
	assert_memory_equal(a->bytes, bytes, 16);
}

/* Deterministic xorshift, so a failure reproduces. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void rand_addr(struct rl_addr *a, uint8_t family)
{
	unsigned i;

	memset(a, 0, sizeof(*a));
	a->family = family;
	for (i = 0; i < (family == RL_AF_INET ? 4u : 16u); i++)
		a->bytes[i] = (uint8_t)rng();
	/* A random v6 address that happens to be mapped is not canonical. */
	if (family == RL_AF_INET6)
		a->bytes[10] = 0x12;
}

/* ---- IPv4 parsing ---- */

static void test_parse_v4_valid(void **state)
{
	static const struct {
		const char *s;
		uint8_t b[4];
	} t[] = {
		{ "0.0.0.0", { 0, 0, 0, 0 } },
		{ "1.2.3.4", { 1, 2, 3, 4 } },
		{ "255.255.255.255", { 255, 255, 255, 255 } },
		{ "10.0.0.1", { 10, 0, 0, 1 } },
		{ "192.168.100.200", { 192, 168, 100, 200 } },
		{ "100.0.10.9", { 100, 0, 10, 9 } },
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		uint8_t want[16] = { 0 };
		struct rl_addr a;

		memset(&a, 0xaa, sizeof(a));
		memcpy(want, t[i].b, 4);
		assert_int_equal(parse_exact(t[i].s, &a), 0);
		assert_addr(&a, RL_AF_INET, want);
	}
}

static void test_parse_v4_invalid(void **state)
{
	static const char *const bad[] = {
		"",
		"01.2.3.4",      /* leading zero: octal to inet_aton */
		"1.2.3.04",
		"1.2.3.00",
		"00.0.0.0",
		"0x1.2.3.4",
		"256.1.1.1",
		"1.2.3.256",
		"1.2.3.999",
		"1.2.3.1000",
		"1.2.3.4.5",
		"1.2.3",
		"1.2",
		"1",
		"16909060",      /* inet_aton's single-number form */
		"1.2.3.4.",
		".1.2.3.4",
		"1..2.3",
		"1.2..3.4",
		" 1.2.3.4",
		"1.2.3.4 ",
		"1.2. 3.4",
		"+1.2.3.4",
		"-1.2.3.4",
		"1.2.3.-4",
		"1.2.3.a",
		"a.b.c.d",
		"1.2.3.4/24",
		"1.2.3.4\n",
		"1,2,3,4",
		"\xff.1.1.1",
	};

	(void)state;
	check_refused(addr_rc, bad, ARRAY_SIZE(bad));
}

/* Every one-, two- and three-digit spelling of the last part, leading zeros
 * included: accepted exactly when canonical and at most 255. */
static void test_parse_v4_every_octet_spelling(void **state)
{
	unsigned width, v;

	(void)state;
	for (width = 1; width <= 3; width++) {
		for (v = 0; v < 1000; v++) {
			char s[32];
			struct rl_addr a;
			int canonical, rc;

			snprintf(s, sizeof(s), "9.9.9.%0*u", (int)width, v);
			if (strlen(s) != 6 + width)
				continue; /* v needs more digits than width */
			canonical = (v == 0 && width == 1) ||
				    (v >= 1 && v <= 9 && width == 1) ||
				    (v >= 10 && v <= 99 && width == 2) ||
				    (v >= 100 && width == 3);
			rc = parse_exact(s, &a);
			if (canonical && v <= 255) {
				assert_int_equal(rc, 0);
				assert_int_equal(a.bytes[3], v);
			} else if (rc != -EINVAL) {
				fail_msg("accepted \"%s\"", s);
			}
		}
	}
}

/* ---- IPv6 parsing ---- */

static void test_parse_v6_valid(void **state)
{
	static const struct {
		const char *s;
		uint8_t b[16];
	} t[] = {
		{ "::", { 0 } },
		{ "::1", { [15] = 1 } },
		{ "1::", { 0, 1 } },
		{ "2001:db8::1",
		  { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 } },
		{ "2001:DB8::A:b",
		  { 0x20, 0x01, 0x0d, 0xb8, [13] = 0x0a, [15] = 0x0b } },
		{ "2001:0db8:0000:0000:0000:0000:0000:0001",
		  { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 } },
		{ "1:2:3:4:5:6:7:8",
		  { 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8 } },
		{ "1::8", { 0, 1, [15] = 8 } },
		{ "1:2:3:4:5:6:7::",
		  { 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 0 } },
		{ "::2:3:4:5:6:7:8",
		  { 0, 0, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8 } },
		{ "1:2:3::6:7:8",
		  { 0, 1, 0, 2, 0, 3, 0, 0, 0, 0, 0, 6, 0, 7, 0, 8 } },
		{ "fe80::1", { 0xfe, 0x80, [15] = 1 } },
		{ "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		  { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } },
		{ "64:ff9b::1.2.3.4",
		  { 0, 0x64, 0xff, 0x9b, [12] = 1, 2, 3, 4 } },
		{ "::1.2.3.4", { [12] = 1, 2, 3, 4 } },
		{ "1:2:3:4:5:6:1.2.3.4",
		  { 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 1, 2, 3, 4 } },
		{ "1::5:6:255.255.255.255",
		  { 0, 1, [8] = 0, 5, 0, 6, 255, 255, 255, 255 } },
		/* 0:ffff:... is not the mapped prefix and must not fold. */
		{ "::ffff:0:1.2.3.4",
		  { [8] = 0xff, 0xff, 0, 0, 1, 2, 3, 4 } },
		{ "::fffe:1.2.3.4",
		  { [10] = 0xff, 0xfe, 1, 2, 3, 4 } },
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		struct rl_addr a;

		memset(&a, 0xaa, sizeof(a));
		if (parse_exact(t[i].s, &a))
			fail_msg("rejected \"%s\"", t[i].s);
		assert_addr(&a, RL_AF_INET6, t[i].b);
	}
}

static void test_parse_v6_invalid(void **state)
{
	static const char *const bad[] = {
		":",
		":::",
		"::::",
		":1",
		"1:",
		":1::",
		"1::2::3",
		"::1::",
		"1:2:3:4:5:6:7",
		"1:2:3:4:5:6:7:8:9",
		"1:2:3:4:5:6:7:8:",
		":1:2:3:4:5:6:7:8",
		"1:2:3:4:5:6:7:8::",
		"::1:2:3:4:5:6:7:8",
		"1:2:3:4:5:6:7::8",     /* "::" must stand for a zero group */
		"1:2:3:4::5:6:7:8",
		"12345::",
		"::00000",
		"g::1",
		"::1 ",
		" ::1",
		"::1\n",
		"fe80::1%eth0",
		"fe80::1%1",
		"[::1]",
		"::1/128",
		"::-1",
		"::+1",
		"::ffff:1.2.3",
		"::ffff:1.2.3.4.5",
		"::ffff:01.2.3.4",      /* leading zero in the v4 tail too */
		"::ffff:256.2.3.4",
		"::1.2.3.4:1",          /* v4 tail must come last */
		"1.2.3.4::",
		"1:2:3:4:5:6:7:1.2.3.4",
		"1:2:3:4:5:1.2.3.4",
		"1:2:3:4:5:6::1.2.3.4", /* "::" would stand for nothing */
		"::a.2.3.4",
		"::ffff:1.2.3.4.",
		"1:2:3:4:5:6:7:8\xff",
	};

	(void)state;
	check_refused(addr_rc, bad, ARRAY_SIZE(bad));
}

static void test_parse_length_limits(void **state)
{
	static const uint8_t max_b[16] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 255, 255, 255, 254,
	};
	/* 45 characters: the longest valid text. */
	const char *max = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.254";
	struct rl_addr a;

	(void)state;
	assert_int_equal(strlen(max), 45);
	assert_int_equal(parse_exact(max, &a), 0);
	assert_addr(&a, RL_AF_INET6, max_b);

	/* 46 characters, otherwise valid-looking: refused on length alone. */
	assert_int_equal(parse_exact("0ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.254",
				     &a), -EINVAL);
	assert_int_equal(parse_exact("1.2.3.4                                       ",
				     &a), -EINVAL);
	/* Length 0 is refused even with a valid address in the buffer. */
	assert_int_equal(rl_addr_parse("1.2.3.4", 0, &a), -EINVAL);
	assert_int_equal(rl_addr_parse(NULL, 7, &a), -EINVAL);
	assert_int_equal(rl_addr_parse("1.2.3.4", 7, NULL), -EINVAL);
}

/* The parser stops at len: what follows in memory must not matter. */
static void test_parse_unterminated(void **state)
{
	static const uint8_t v4[16] = { 1, 2, 3, 4 };
	static const uint8_t v4b[16] = { 10, 0, 0, 1 };
	static const uint8_t v6[16] = { [14] = 0x00, [15] = 0x12 };
	static const uint8_t v6b[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
	static const uint8_t mapped[16] = { 192, 0, 2, 1 };
	struct rl_addr a;

	(void)state;
	assert_int_equal(rl_addr_parse("1.2.3.45", 7, &a), 0);
	assert_addr(&a, RL_AF_INET, v4);
	assert_int_equal(rl_addr_parse("10.0.0.1, 10.0.0.2", 8, &a), 0);
	assert_addr(&a, RL_AF_INET, v4b);
	assert_int_equal(rl_addr_parse("::1234", 4, &a), 0);
	assert_addr(&a, RL_AF_INET6, v6);
	assert_int_equal(rl_addr_parse("2001:db8::1%eth0", 11, &a), 0);
	assert_addr(&a, RL_AF_INET6, v6b);
	assert_int_equal(rl_addr_parse("::ffff:192.0.2.1:80", 16, &a), 0);
	assert_addr(&a, RL_AF_INET, mapped);
	/* A prefix that is not itself an address. */
	assert_int_equal(rl_addr_parse("1.2.3.4", 6, &a), -EINVAL);
	assert_int_equal(rl_addr_parse("1.2.3.4", 5, &a), -EINVAL);
	assert_int_equal(rl_addr_parse("::1", 1, &a), -EINVAL);
	assert_int_equal(rl_addr_parse("1::1", 2, &a), -EINVAL);
}

static void test_parse_error_leaves_out(void **state)
{
	struct rl_addr a, before;

	(void)state;
	memset(&a, 0x5a, sizeof(a));
	before = a;
	assert_int_equal(parse_exact("1.2.3.256", &a), -EINVAL);
	assert_memory_equal(&a, &before, sizeof(a));
	assert_int_equal(parse_exact("1::2::3", &a), -EINVAL);
	assert_memory_equal(&a, &before, sizeof(a));
}

static void test_parse_mapped_folds(void **state)
{
	static const uint8_t want[16] = { 1, 2, 3, 4 };
	static const uint8_t zero[16] = { 0 };
	static const uint8_t ones[16] = { 255, 255, 255, 255 };
	struct rl_addr a, b;

	(void)state;
	a = addr_of("::ffff:1.2.3.4");
	assert_addr(&a, RL_AF_INET, want);
	a = addr_of("::FFFF:102:304");
	assert_addr(&a, RL_AF_INET, want);
	a = addr_of("0:0:0:0:0:ffff:0102:0304");
	assert_addr(&a, RL_AF_INET, want);
	a = addr_of("::ffff:0.0.0.0");
	assert_addr(&a, RL_AF_INET, zero);
	a = addr_of("::ffff:255.255.255.255");
	assert_addr(&a, RL_AF_INET, ones);
	b = addr_of("1.2.3.4");
	a = addr_of("::ffff:1.2.3.4");
	assert_true(rl_addr_equal(&a, &b));

	/* Not mapped: IPv4-compatible and NAT64 stay IPv6. */
	a = addr_of("::1.2.3.4");
	assert_int_equal(a.family, RL_AF_INET6);
	a = addr_of("64:ff9b::1.2.3.4");
	assert_int_equal(a.family, RL_AF_INET6);
	assert_false(rl_addr_equal(&a, &b));
}

/* ---- sockaddr ---- */

static void test_from_sockaddr(void **state)
{
	static const uint8_t v4[16] = { 192, 0, 2, 7 };
	static const uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x42 };
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	struct rl_addr a;

	(void)state;
	memset(&ss, 0, sizeof(ss));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(8080);
	assert_int_equal(inet_pton(AF_INET, "192.0.2.7", &sin->sin_addr), 1);
	memset(&a, 0xaa, sizeof(a));
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)sin,
					       sizeof(*sin), &a), 0);
	assert_addr(&a, RL_AF_INET, v4);
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)sin,
					       sizeof(*sin) - 1, &a), -EINVAL);

	memset(&ss, 0, sizeof(ss));
	sin6->sin6_family = AF_INET6;
	sin6->sin6_scope_id = 3;
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::42",
				   &sin6->sin6_addr), 1);
	memset(&a, 0xaa, sizeof(a));
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)sin6,
					       sizeof(*sin6), &a), 0);
	assert_addr(&a, RL_AF_INET6, v6);
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)sin6,
					       sizeof(*sin6) - 1, &a), -EINVAL);
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)sin6,
					       sizeof(struct sockaddr_in), &a),
			 -EINVAL);

	/* A v4 client on a dual-stack listener: folded. */
	assert_int_equal(inet_pton(AF_INET6, "::ffff:192.0.2.7",
				   &sin6->sin6_addr), 1);
	memset(&a, 0xaa, sizeof(a));
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)sin6,
					       sizeof(*sin6), &a), 0);
	assert_addr(&a, RL_AF_INET, v4);
}

static void test_from_sockaddr_errors(void **state)
{
	struct sockaddr_un un;
	struct sockaddr_storage ss;
	struct rl_addr a, before;

	(void)state;
	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	memset(&a, 0x5a, sizeof(a));
	before = a;
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)&un,
					       sizeof(un), &a), -EAFNOSUPPORT);
	assert_memory_equal(&a, &before, sizeof(a));
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = AF_UNSPEC;
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)&ss,
					       sizeof(ss), &a), -EAFNOSUPPORT);
	assert_int_equal(rl_addr_from_sockaddr(NULL, sizeof(ss), &a), -EINVAL);
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)&ss,
					       sizeof(ss), NULL), -EINVAL);
	ss.ss_family = AF_INET;
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)&ss, 0, &a),
			 -EINVAL);
	assert_int_equal(rl_addr_from_sockaddr((struct sockaddr *)&ss, 1, &a),
			 -EINVAL);
	assert_memory_equal(&a, &before, sizeof(a));
}

/* ---- text form ---- */

static void test_format(void **state)
{
	/* input, inet_ntop's canonical output */
	static const char *const t[][2] = {
		{ "0.0.0.0", "0.0.0.0" },
		{ "1.2.3.4", "1.2.3.4" },
		{ "255.255.255.255", "255.255.255.255" },
		{ "::", "::" },
		{ "::1", "::1" },
		{ "2001:0DB8:0:0:0:0:0:1", "2001:db8::1" },
		{ "2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1" },
		{ "1:0:0:1:0:0:0:1", "1:0:0:1::1" },
		{ "1:0:0:2:0:0:3:4", "1::2:0:0:3:4" },
		{ "fe80::1", "fe80::1" },
		{ "::ffff:1.2.3.4", "1.2.3.4" },
		{ "64:ff9b::1.2.3.4", "64:ff9b::102:304" },
		{ "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		  "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff" },
	};
	char buf[RL_ADDR_STRLEN];
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		struct rl_addr a = addr_of(t[i][0]), b;

		assert_int_equal(rl_addr_format(&a, buf, sizeof(buf)), 0);
		assert_string_equal(buf, t[i][1]);
		b = addr_of(buf);
		assert_true(rl_addr_equal(&a, &b));
	}
}

static void test_format_round_trip_random(void **state)
{
	char buf[RL_ADDR_STRLEN];
	int i;

	(void)state;
	for (i = 0; i < 2000; i++) {
		struct rl_addr a, b;

		rand_addr(&a, (i & 1) ? RL_AF_INET6 : RL_AF_INET);
		assert_int_equal(rl_addr_format(&a, buf, sizeof(buf)), 0);
		assert_int_equal(parse_exact(buf, &b), 0);
		assert_true(rl_addr_equal(&a, &b));
	}
}

static void test_format_errors(void **state)
{
	struct rl_addr a = addr_of("192.168.1.1"); /* 11 chars */
	struct rl_addr none;
	char buf[RL_ADDR_STRLEN];

	(void)state;
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(rl_addr_format(&a, buf, 11), -ENOSPC);
	assert_string_equal(buf, "");
	assert_int_equal(rl_addr_format(&a, buf, 12), 0);
	assert_string_equal(buf, "192.168.1.1");
	assert_int_equal(rl_addr_format(&a, NULL, 0), -ENOSPC);

	a = addr_of("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"); /* 39 */
	assert_int_equal(rl_addr_format(&a, buf, 39), -ENOSPC);
	assert_int_equal(rl_addr_format(&a, buf, 40), 0);

	memset(&none, 0, sizeof(none));
	assert_int_equal(rl_addr_format(&none, buf, sizeof(buf)), -EINVAL);
	none.family = 5;
	assert_int_equal(rl_addr_format(&none, buf, sizeof(buf)), -EINVAL);
}

/* ---- masks and keys ---- */

/* The obvious definition, one bit at a time. */
static void ref_mask(uint8_t bytes[16], unsigned nbits, unsigned prefix)
{
	unsigned bit;

	for (bit = 0; bit < 128; bit++) {
		if (bit >= prefix || bit >= nbits)
			bytes[bit / 8] &= (uint8_t)~(0x80u >> (bit % 8));
	}
}

static void check_mask_all_prefixes(uint8_t family, unsigned nbits)
{
	int round;

	for (round = 0; round < 64; round++) {
		struct rl_addr a;
		unsigned p;

		rand_addr(&a, family);
		if (round == 0)
			memset(a.bytes, 0xff, nbits / 8);
		for (p = 0; p <= nbits + 8; p++) {
			struct rl_addr m = a;
			uint8_t want[16];

			memcpy(want, a.bytes, 16);
			ref_mask(want, nbits, p);
			rl_addr_mask(&m, p);
			assert_int_equal(m.family, family);
			assert_memory_equal(m.bytes, want, 16);
		}
	}
}

static void test_mask_v4_every_prefix(void **state)
{
	(void)state;
	check_mask_all_prefixes(RL_AF_INET, 32);
}

static void test_mask_v6_every_prefix(void **state)
{
	(void)state;
	check_mask_all_prefixes(RL_AF_INET6, 128);
}

static void test_mask_exact(void **state)
{
	struct rl_addr a;
	char buf[RL_ADDR_STRLEN];

	(void)state;
	a = addr_of("192.168.171.205");
	rl_addr_mask(&a, 20);
	assert_int_equal(rl_addr_format(&a, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "192.168.160.0");

	a = addr_of("2001:db8:abcd:ef01:2345:6789:abcd:ef01");
	rl_addr_mask(&a, 64);
	assert_int_equal(rl_addr_format(&a, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "2001:db8:abcd:ef01::");
	rl_addr_mask(&a, 45);
	assert_int_equal(rl_addr_format(&a, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "2001:db8:abc8::");

	/* Clamped: 33 and 4 billion on v4 change nothing. */
	a = addr_of("1.2.3.4");
	rl_addr_mask(&a, 33);
	rl_addr_mask(&a, 4000000000u);
	assert_int_equal(rl_addr_format(&a, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1.2.3.4");

	/* Family 0 and NULL: no-ops, no crash. */
	memset(&a, 0, sizeof(a));
	rl_addr_mask(&a, 0);
	assert_int_equal(a.family, 0);
	rl_addr_mask(NULL, 8);
}

static void test_key(void **state)
{
	static const uint8_t k4_32[] = { 4, 203, 0, 113, 77 };
	static const uint8_t k4_24[] = { 4, 203, 0, 113, 0 };
	static const uint8_t k4_0[] = { 4, 0, 0, 0, 0 };
	static const uint8_t k6_128[] = { 6, 0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34,
					  0x56, 0x78, 0x9a, 0xbc, 0, 0, 0, 0,
					  0, 0xff };
	static const uint8_t k6_64[] = { 6, 0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34,
					 0x56, 0x78, 0, 0, 0, 0, 0, 0, 0, 0 };
	static const uint8_t k6_36[] = { 6, 0x20, 0x01, 0x0d, 0xb8, 0x10, 0, 0,
					 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	uint8_t out[20];
	struct rl_addr a, before, none;

	(void)state;
	a = addr_of("203.0.113.77");
	before = a;
	memset(out, 0xee, sizeof(out));
	assert_int_equal(rl_addr_key(&a, 32, out), 5);
	assert_memory_equal(out, k4_32, 5);
	assert_int_equal(out[5], 0xee); /* nothing past the key */
	assert_int_equal(rl_addr_key(&a, 24, out), 5);
	assert_memory_equal(out, k4_24, 5);
	assert_int_equal(rl_addr_key(&a, 0, out), 5);
	assert_memory_equal(out, k4_0, 5);
	assert_int_equal(rl_addr_key(&a, 64, out), 5); /* clamped */
	assert_memory_equal(out, k4_32, 5);
	assert_memory_equal(&a, &before, sizeof(a)); /* *a untouched */

	/* A mapped client keys exactly as the v4 one does. */
	a = addr_of("::ffff:203.0.113.77");
	assert_int_equal(rl_addr_key(&a, 32, out), 5);
	assert_memory_equal(out, k4_32, 5);

	a = addr_of("2001:db8:1234:5678:9abc::ff");
	before = a;
	memset(out, 0xee, sizeof(out));
	assert_int_equal(rl_addr_key(&a, 128, out), 17);
	assert_memory_equal(out, k6_128, 17);
	assert_int_equal(out[17], 0xee);
	assert_int_equal(rl_addr_key(&a, 64, out), 17);
	assert_memory_equal(out, k6_64, 17);
	assert_int_equal(rl_addr_key(&a, 36, out), 17);
	assert_memory_equal(out, k6_36, 17);
	assert_memory_equal(&a, &before, sizeof(a));

	memset(&none, 0, sizeof(none));
	assert_int_equal(rl_addr_key(&none, 32, out), 0);
}

static void test_equal_and_bits(void **state)
{
	struct rl_addr a = addr_of("10.0.0.1"), b = addr_of("10.0.0.1");
	struct rl_addr c = addr_of("::a00:1"); /* same low bytes, v6 */
	struct rl_addr none;

	(void)state;
	memset(&none, 0, sizeof(none));
	assert_int_equal(rl_addr_equal(&a, &b), 1);
	assert_int_equal(rl_addr_equal(&a, &c), 0);
	b.bytes[3] = 2;
	assert_int_equal(rl_addr_equal(&a, &b), 0);
	assert_int_equal(rl_addr_equal(&a, NULL), 0);
	assert_int_equal(rl_addr_bits(&a), 32);
	assert_int_equal(rl_addr_bits(&c), 128);
	assert_int_equal(rl_addr_bits(&none), 0);
	assert_int_equal(rl_addr_bits(NULL), 0);
}

/* ---- CIDR ---- */

static void test_cidr_parse_valid(void **state)
{
	static const struct {
		const char *in;
		const char *out; /* rl_cidr_format of the result */
		uint8_t family;
	} t[] = {
		{ "10.0.0.0/8", "10.0.0.0/8", RL_AF_INET },
		{ "10.1.2.3/8", "10.0.0.0/8", RL_AF_INET }, /* host bits */
		{ "192.168.1.77/26", "192.168.1.64/26", RL_AF_INET },
		{ "1.2.3.4", "1.2.3.4/32", RL_AF_INET },
		{ "1.2.3.4/32", "1.2.3.4/32", RL_AF_INET },
		{ "1.2.3.4/0", "0.0.0.0/0", RL_AF_INET },
		{ "0.0.0.0/0", "0.0.0.0/0", RL_AF_INET },
		{ "2001:db8::/32", "2001:db8::/32", RL_AF_INET6 },
		{ "2001:db8:ffff::1/33", "2001:db8:8000::/33", RL_AF_INET6 },
		{ "::1", "::1/128", RL_AF_INET6 },
		{ "::/0", "::/0", RL_AF_INET6 },
		{ "fe80::1/10", "fe80::/10", RL_AF_INET6 },
		{ "64:ff9b::1.2.3.4/96", "64:ff9b::/96", RL_AF_INET6 },
		/* Mapped: folded, prefix less 96. */
		{ "::ffff:1.2.3.4/120", "1.2.3.0/24", RL_AF_INET },
		{ "::ffff:1.2.3.4", "1.2.3.4/32", RL_AF_INET },
		{ "::ffff:1.2.3.4/128", "1.2.3.4/32", RL_AF_INET },
		{ "::ffff:1.2.3.4/96", "0.0.0.0/0", RL_AF_INET },
		{ "::ffff:0:0/96", "0.0.0.0/0", RL_AF_INET },
		{ "::ffff:10.255.0.0/104", "10.0.0.0/8", RL_AF_INET },
	};
	char buf[RL_CIDR_STRLEN];
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		struct rl_cidr c = cidr_of(t[i].in), d;

		assert_int_equal(c.addr.family, t[i].family);
		assert_int_equal(rl_cidr_format(&c, buf, sizeof(buf)), 0);
		if (strcmp(buf, t[i].out))
			fail_msg("\"%s\" -> \"%s\", want \"%s\"", t[i].in, buf,
				 t[i].out);
		/* The text form parses back to the same prefix. */
		d = cidr_of(buf);
		assert_int_equal(d.prefix, c.prefix);
		assert_true(rl_addr_equal(&d.addr, &c.addr));
	}
}

static void test_cidr_parse_exact_fields(void **state)
{
	static const uint8_t net4[16] = { 172, 16, 0, 0 };
	static const uint8_t net6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x80 };
	struct rl_cidr c;

	(void)state;
	c = cidr_of("172.31.255.255/12");
	assert_addr(&c.addr, RL_AF_INET, net4);
	assert_int_equal(c.prefix, 12);
	c = cidr_of("2001:db8:ff::/41");
	assert_addr(&c.addr, RL_AF_INET6, net6);
	assert_int_equal(c.prefix, 41);
}

static void test_cidr_parse_invalid(void **state)
{
	static const char *const bad[] = {
		"",
		"/",
		"/8",
		"10.0.0.0/",
		"10.0.0.0/33",
		"10.0.0.0/100",
		"10.0.0.0/08",
		"10.0.0.0/00",
		"10.0.0.0/+8",
		"10.0.0.0/-8",
		"10.0.0.0/ 8",
		"10.0.0.0/8 ",
		" 10.0.0.0/8",
		"10.0.0.0 /8",
		"10.0.0.0/8/8",
		"10.0.0.0/0x8",
		"10.0.0.0/1000",
		"10.0.0/8",
		"010.0.0.0/8",
		"::/129",
		"::/0128",
		"::/1280",
		"2001:db8::/64a",
		"fe80::/10%eth0",
		"fe80::%eth0/10",
		"1::2::3/64",
		"::ffff:1.2.3.4/95",   /* mapped, shorter than /96 */
		"::ffff:1.2.3.4/64",
		"::ffff:1.2.3.4/0",
		"ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/1280",
	};

	(void)state;
	check_refused(cidr_rc, bad, ARRAY_SIZE(bad));
}

static void test_cidr_parse_unterminated(void **state)
{
	static const uint8_t net[16] = { 10, 0, 0, 0 };
	static const uint8_t host[16] = { 10, 1, 2, 3 };
	struct rl_cidr c, before;
	/* 49 characters: the longest valid text, then one past it. */
	const char *max = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/128";

	(void)state;
	assert_int_equal(rl_cidr_parse("10.1.2.3/8 10.0.0.0/9", 10, &c), 0);
	assert_addr(&c.addr, RL_AF_INET, net);
	assert_int_equal(c.prefix, 8);
	/* "/24" is past len: a bare address, a host route. */
	assert_int_equal(rl_cidr_parse("10.1.2.3/24", 8, &c), 0);
	assert_addr(&c.addr, RL_AF_INET, host);
	assert_int_equal(c.prefix, 32);
	/* "/1" of "/16" is inside len. */
	assert_int_equal(rl_cidr_parse("10.1.2.3/16", 10, &c), 0);
	assert_int_equal(c.prefix, 1);
	assert_int_equal(rl_cidr_parse("10.1.2.3/", 9, &c), -EINVAL);
	assert_int_equal(rl_cidr_parse("10.1.2.3/8", 0, &c), -EINVAL);

	assert_int_equal(strlen(max), 49);
	assert_int_equal(cidr_exact(max, &c), 0);
	assert_int_equal(c.prefix, 128);
	assert_int_equal(cidr_exact("0ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/128",
				    &c), -EINVAL);

	memset(&c, 0x5a, sizeof(c));
	before = c;
	assert_int_equal(cidr_exact("10.0.0.0/33", &c), -EINVAL);
	assert_int_equal(cidr_exact("::ffff:1.2.3.4/95", &c), -EINVAL);
	assert_memory_equal(&c, &before, sizeof(c));
	assert_int_equal(rl_cidr_parse(NULL, 3, &c), -EINVAL);
	assert_int_equal(rl_cidr_parse("::", 2, NULL), -EINVAL);
}

static void test_cidr_format(void **state)
{
	struct rl_cidr c = cidr_of("192.168.100.0/24"); /* 16 chars */
	char buf[RL_CIDR_STRLEN];

	(void)state;
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(rl_cidr_format(&c, buf, 16), -ENOSPC);
	assert_string_equal(buf, "");
	assert_int_equal(rl_cidr_format(&c, buf, 17), 0);
	assert_string_equal(buf, "192.168.100.0/24");
	assert_int_equal(rl_cidr_format(&c, NULL, 0), -ENOSPC);

	c = cidr_of("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
	assert_int_equal(rl_cidr_format(&c, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128");

	c = cidr_of("10.0.0.0/8");
	c.prefix = 33; /* corrupt: refused, not printed */
	assert_int_equal(rl_cidr_format(&c, buf, sizeof(buf)), -EINVAL);
	memset(&c, 0, sizeof(c));
	assert_int_equal(rl_cidr_format(&c, buf, sizeof(buf)), -EINVAL);
}

/* One membership case: `addr` in the CIDR or set under test, or not. */
struct in_case {
	const char *addr;
	int want;
};

static void check_cidr_contains(const struct rl_cidr *c, const char *what,
				const char *addr, int want)
{
	struct rl_addr a = addr_of(addr);
	int got = rl_cidr_contains(c, &a);

	if (got != want)
		fail_msg("%s in %s: %d, want %d", addr, what, got, want);
}

static void check_set_contains(const struct rl_cidr_set *set,
			       const struct in_case *t, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct rl_addr a = addr_of(t[i].addr);
		int got = rl_cidr_set_contains(set, &a);

		if (got != t[i].want)
			fail_msg("%s in the set: %d, want %d", t[i].addr, got,
				 t[i].want);
	}
}

/* Adds `cidr` to `set` and checks the answer (0 for a no-op duplicate). */
static void check_set_add(struct rl_cidr_set *set, const char *cidr, int want)
{
	struct rl_cidr c = cidr_of(cidr);
	int rc = rl_cidr_set_add(set, &c);

	if (rc != want)
		fail_msg("adding %s: %d, want %d", cidr, rc, want);
}

static void test_cidr_contains(void **state)
{
	static const struct {
		const char *cidr;
		const char *addr;
		int want;
	} t[] = {
		{ "10.0.0.0/8", "10.255.255.255", 1 },
		{ "::ffff:10.0.0.0/104", "10.255.255.255", 1 },
		{ "10.0.0.0/8", "11.0.0.0", 0 },
		{ "10.0.0.0/8", "9.255.255.255", 0 },
		{ "10.0.0.0/8", "::ffff:10.1.2.3", 1 }, /* folded client */

		{ "192.168.1.64/26", "192.168.1.64", 1 },
		{ "192.168.1.64/26", "192.168.1.127", 1 },
		{ "192.168.1.64/26", "192.168.1.128", 0 },
		{ "192.168.1.64/26", "192.168.1.63", 0 },

		{ "192.0.2.1", "192.0.2.1", 1 },
		{ "192.0.2.1", "192.0.2.0", 0 },

		{ "2001:db8::/32", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", 1 },
		{ "2001:db8:8000::/33", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", 1 },
		{ "2001:db8::/32", "2001:db8:7fff::1", 1 },
		{ "2001:db8:8000::/33", "2001:db8:7fff::1", 0 },
		{ "2001:db8::/32", "2001:db9::", 0 },

		/* /0 matches its own family only. */
		{ "0.0.0.0/0", "255.255.255.255", 1 },
		{ "::/0", "255.255.255.255", 0 },
		{ "2001:db8::/32", "255.255.255.255", 0 },
		{ "0.0.0.0/0", "::ffff:1.2.3.4", 1 },
		{ "::/0", "::ffff:1.2.3.4", 0 },
		{ "::/0", "::", 1 },
		{ "0.0.0.0/0", "::", 0 },
		/* ::a00:1 has 10.0.0.1's bytes at the end but is IPv6. */
		{ "10.0.0.0/8", "::a00:1", 0 },
		/* Same leading bytes, different family. */
		{ "10.0.0.0/8", "a00::", 0 },
	};
	struct rl_cidr n8 = cidr_of("10.0.0.0/8");
	struct rl_cidr h;
	struct rl_addr a;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		struct rl_cidr c = cidr_of(t[i].cidr);

		check_cidr_contains(&c, t[i].cidr, t[i].addr, t[i].want);
	}

	/* A hand-built prefix with host bits still set matches by prefix. */
	h.addr = addr_of("10.9.9.9");
	h.prefix = 8;
	check_cidr_contains(&h, "10.9.9.9/8 by hand", "10.0.0.1", 1);

	/* A hand-built length past the family's is clamped, never read past. */
	h.addr = addr_of("2001:db8::1");
	h.prefix = 255;
	check_cidr_contains(&h, "2001:db8::1/255 by hand", "2001:db8::1", 1);
	check_cidr_contains(&h, "2001:db8::1/255 by hand", "2001:db8::2", 0);
	h.addr = addr_of("10.0.0.1");
	h.prefix = 40;
	check_cidr_contains(&h, "10.0.0.1/40 by hand", "10.0.0.1", 1);

	/* Empty and NULL never match. */
	memset(&h, 0, sizeof(h));
	check_cidr_contains(&h, "an empty cidr", "0.0.0.0", 0);
	memset(&a, 0, sizeof(a));
	assert_int_equal(rl_cidr_contains(&h, &a), 0);
	assert_int_equal(rl_cidr_contains(&n8, NULL), 0);
	assert_int_equal(rl_cidr_contains(NULL, &a), 0);
}

/* contains() must agree with comparing keys: the definition it shortcuts. */
static void test_cidr_contains_matches_key(void **state)
{
	int i;

	(void)state;
	for (i = 0; i < 4000; i++) {
		uint8_t fam = (i & 1) ? RL_AF_INET6 : RL_AF_INET;
		unsigned bits = fam == RL_AF_INET ? 32 : 128;
		struct rl_cidr c;
		struct rl_addr a;
		uint8_t ka[17], kc[17];
		unsigned flip;
		int want;

		memset(&c, 0, sizeof(c));
		rand_addr(&c.addr, fam);
		c.prefix = (uint8_t)(rng() % (bits + 1));
		rl_addr_mask(&c.addr, c.prefix);
		/* Flip one bit, on either side of the prefix boundary. */
		rand_addr(&a, fam);
		memcpy(a.bytes, c.addr.bytes, bits / 8);
		flip = (unsigned)(rng() % bits);
		a.bytes[flip / 8] ^= (uint8_t)(0x80u >> (flip % 8));
		rl_addr_key(&a, c.prefix, ka);
		rl_addr_key(&c.addr, c.prefix, kc);
		want = memcmp(ka, kc, bits / 8 + 1) == 0;
		assert_int_equal(want, flip >= c.prefix);
		assert_int_equal(rl_cidr_contains(&c, &a), want);
	}
}

/* ---- sets ---- */

static void test_set_basic(void **state)
{
	static struct rl_cidr_set set;
	static const struct in_case empty[] = { { "10.0.0.1", 0 } };
	static const struct in_case t[] = {
		{ "10.1.2.3", 1 },    /* in both overlapping entries */
		{ "10.200.2.3", 1 },  /* only the /8 */
		{ "::ffff:10.9.9.9", 1 },
		{ "192.0.2.1", 1 },
		{ "192.0.2.2", 0 },
		{ "2001:db8:1::1", 1 },
		{ "2001:db9::1", 0 },
		{ "::a00:1", 0 },     /* v6 with 10.0.0.1's low bytes */
		{ "a00::1", 0 },      /* v6 with 10.0.0.0's high bytes */
	};
	struct rl_addr a;

	(void)state;
	memset(&set, 0, sizeof(set));
	check_set_contains(&set, empty, ARRAY_SIZE(empty));

	check_set_add(&set, "10.0.0.0/8", 0);
	check_set_add(&set, "10.1.0.0/16", 0); /* inside the /8 */
	check_set_add(&set, "2001:db8::/32", 0);
	check_set_add(&set, "192.0.2.1", 0);
	assert_int_equal(set.n, 4);

	/* Duplicates, including one spelled with host bits: no-ops. */
	check_set_add(&set, "10.0.0.0/8", 0);
	check_set_add(&set, "10.200.0.0/8", 0);
	check_set_add(&set, "::ffff:192.0.2.1", 0);
	assert_int_equal(set.n, 4);
	/* Same address, other length: a different entry. */
	check_set_add(&set, "10.0.0.0/9", 0);
	assert_int_equal(set.n, 5);

	check_set_contains(&set, t, ARRAY_SIZE(t));

	a = addr_of("a00::1");
	assert_int_equal(rl_cidr_set_contains(NULL, &a), 0);
	assert_int_equal(rl_cidr_set_contains(&set, NULL), 0);
}

/* A ban and the allow list share an address when either holds the other. */
static void test_set_overlap(void **state)
{
	static struct rl_cidr_set set;
	static const struct { const char *c; const char *hit; } t[] = {
		{ "0.0.0.0/0", "10.1.0.0/16" },      /* holds every entry */
		{ "10.0.0.0/8", "10.1.0.0/16" },
		{ "10.1.2.3", "10.1.0.0/16" },       /* inside one */
		{ "10.2.0.0/16", NULL },             /* beside it */
		{ "192.0.2.0/24", "192.0.2.5/32" },
		{ "192.0.2.6/31", NULL },
		{ "192.0.2.4/30", "192.0.2.5/32" },
		{ "::/0", "2001:db8::/48" },
		{ "2001:db8:0:1::/64", "2001:db8::/48" },
		{ "2001:db9::/32", NULL },
		{ "::ffff:192.0.2.5", "192.0.2.5/32" }, /* mapped: the IPv4 one */
		{ "::/96", NULL },                   /* IPv6, not the IPv4 entries */
	};
	struct rl_cidr c;
	char buf[RL_CIDR_STRLEN];

	(void)state;
	memset(&set, 0, sizeof(set));
	check_set_add(&set, "10.1.0.0/16", 0);
	check_set_add(&set, "192.0.2.5", 0);
	check_set_add(&set, "2001:db8::/48", 0);
	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		const struct rl_cidr *got;

		assert_int_equal(rl_cidr_parse(t[i].c, strlen(t[i].c), &c), 0);
		got = rl_cidr_set_overlap(&set, &c);
		if (!t[i].hit) {
			if (got)
				fail_msg("%s: overlaps, expected none", t[i].c);
			continue;
		}
		if (!got)
			fail_msg("%s: no overlap, expected %s", t[i].c, t[i].hit);
		assert_int_equal(rl_cidr_format(got, buf, sizeof(buf)), 0);
		assert_string_equal(buf, t[i].hit);
	}
	assert_null(rl_cidr_set_overlap(NULL, &c));
	assert_null(rl_cidr_set_overlap(&set, NULL));
}

static void test_set_zero_prefix(void **state)
{
	static struct rl_cidr_set set;
	static const struct in_case v4_only[] = {
		{ "0.0.0.0", 1 },
		{ "255.255.255.255", 1 },
		{ "::ffff:8.8.8.8", 1 },
		{ "::", 0 },
		{ "2001:db8::1", 0 },
	};
	static const struct in_case both[] = {
		{ "2001:db8::1", 1 },
		{ "::", 1 },
	};

	(void)state;
	memset(&set, 0, sizeof(set));
	check_set_add(&set, "0.0.0.0/0", 0);
	check_set_contains(&set, v4_only, ARRAY_SIZE(v4_only));

	check_set_add(&set, "::/0", 0);
	assert_int_equal(set.n, 2);
	check_set_contains(&set, both, ARRAY_SIZE(both));
}

static void test_set_full(void **state)
{
	static struct rl_cidr_set set;
	/* First, last, and not there. */
	static const struct in_case t[] = {
		{ "10.0.0.9", 1 },
		{ "10.0.255.254", 1 },
		{ "10.1.0.1", 0 },
		{ "192.0.2.1", 0 },
	};
	struct rl_cidr c, before;
	struct rl_addr a;
	unsigned i;

	(void)state;
	memset(&set, 0, sizeof(set));
	for (i = 0; i < RL_CIDR_SET_MAX; i++) {
		char s[32];

		snprintf(s, sizeof(s), "10.%u.%u.0/24", i / 256, i % 256);
		check_set_add(&set, s, 0);
	}
	assert_int_equal(set.n, RL_CIDR_SET_MAX);
	before = set.items[RL_CIDR_SET_MAX - 1];

	check_set_add(&set, "192.0.2.0/24", -ENOSPC);
	assert_int_equal(set.n, RL_CIDR_SET_MAX);
	assert_memory_equal(&set.items[RL_CIDR_SET_MAX - 1], &before,
			    sizeof(before));
	/* A duplicate of a present entry is still a no-op, not an error. */
	check_set_add(&set, "10.0.255.0/24", 0);
	check_set_add(&set, "10.0.0.0/24", 0);

	check_set_contains(&set, t, ARRAY_SIZE(t));

	/* A count past the array is not trusted. */
	set.n = 100000;
	a = addr_of("192.0.2.1");
	assert_int_equal(rl_cidr_set_contains(&set, &a), 0);
	c = cidr_of("10.0.0.0/24");
	assert_int_equal(rl_cidr_set_add(&set, &c), 0);
	check_set_add(&set, "192.0.2.0/24", -ENOSPC);
}

static void test_set_add_normalizes(void **state)
{
	static struct rl_cidr_set set;
	static const uint8_t net[16] = { 10, 0, 0, 0 };
	struct rl_cidr c;
	struct rl_addr a;

	(void)state;
	memset(&set, 0, sizeof(set));
	/* Hand-built, host bits set: stored with them cleared. */
	memset(&c, 0, sizeof(c));
	c.addr = addr_of("10.9.9.9");
	c.prefix = 8;
	assert_int_equal(rl_cidr_set_add(&set, &c), 0);
	assert_addr(&set.items[0].addr, RL_AF_INET, net);
	assert_int_equal(set.items[0].prefix, 8);
	a = addr_of("10.0.0.1");
	assert_int_equal(rl_cidr_set_contains(&set, &a), 1);

	/* Bad family or length: refused. */
	memset(&c, 0, sizeof(c));
	assert_int_equal(rl_cidr_set_add(&set, &c), -EINVAL);
	c.addr = addr_of("10.0.0.0");
	c.prefix = 33;
	assert_int_equal(rl_cidr_set_add(&set, &c), -EINVAL);
	assert_int_equal(rl_cidr_set_add(&set, NULL), -EINVAL);
	assert_int_equal(rl_cidr_set_add(NULL, &c), -EINVAL);
	assert_int_equal(set.n, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_v4_valid),
		cmocka_unit_test(test_parse_v4_invalid),
		cmocka_unit_test(test_parse_v4_every_octet_spelling),
		cmocka_unit_test(test_parse_v6_valid),
		cmocka_unit_test(test_parse_v6_invalid),
		cmocka_unit_test(test_parse_length_limits),
		cmocka_unit_test(test_parse_unterminated),
		cmocka_unit_test(test_parse_error_leaves_out),
		cmocka_unit_test(test_parse_mapped_folds),
		cmocka_unit_test(test_from_sockaddr),
		cmocka_unit_test(test_from_sockaddr_errors),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_format_round_trip_random),
		cmocka_unit_test(test_format_errors),
		cmocka_unit_test(test_mask_v4_every_prefix),
		cmocka_unit_test(test_mask_v6_every_prefix),
		cmocka_unit_test(test_mask_exact),
		cmocka_unit_test(test_key),
		cmocka_unit_test(test_equal_and_bits),
		cmocka_unit_test(test_cidr_parse_valid),
		cmocka_unit_test(test_cidr_parse_exact_fields),
		cmocka_unit_test(test_cidr_parse_invalid),
		cmocka_unit_test(test_cidr_parse_unterminated),
		cmocka_unit_test(test_cidr_format),
		cmocka_unit_test(test_cidr_contains),
		cmocka_unit_test(test_cidr_contains_matches_key),
		cmocka_unit_test(test_set_basic),
		cmocka_unit_test(test_set_overlap),
		cmocka_unit_test(test_set_zero_prefix),
		cmocka_unit_test(test_set_full),
		cmocka_unit_test(test_set_add_normalizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
