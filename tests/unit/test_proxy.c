/* SPDX-License-Identifier: MIT */
/*
 * test_proxy.c - PROXY protocol v1 and v2: valid headers, every prefix of
 * them, and the hostile inputs a server's first bytes may hold.
 *
 * Every parse runs on a heap copy of exactly the bytes passed, so that
 * under ASan a read past `len` is a crash rather than a silent pass.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "proxy.h"

static const char http_req[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";

static const uint8_t sig[12] = {
	0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
};

/* Parse p[0..n) from an exact-size heap copy. */
static enum rl_proxy_status parse_exact(const void *p, size_t n,
					struct rl_proxy_result *out)
{
	uint8_t *copy = malloc(n ? n : 1);
	enum rl_proxy_status st;

	assert_non_null(copy);
	if (n)
		memcpy(copy, p, n);
	st = rl_proxy_parse(copy, n, out);
	free(copy);
	return st;
}

/*
 * A valid header of n bytes: every proper prefix asks for more, the whole
 * is OK with len n, and so is the header with a request after it (whose
 * bytes must not change the result). Returns the result for the caller to
 * check the address.
 */
static struct rl_proxy_result check_valid(const void *hdr, size_t n)
{
	struct rl_proxy_result r, r2;
	uint8_t buf[RL_PROXY_MAX + sizeof(http_req)];

	for (size_t i = 0; i < n; i++) {
		memset(&r, 0xa5, sizeof(r));
		assert_int_equal(parse_exact(hdr, i, &r), RL_PROXY_MORE);
	}
	memset(&r, 0xa5, sizeof(r));
	assert_int_equal(parse_exact(hdr, n, &r), RL_PROXY_OK);
	assert_int_equal(r.len, n);

	assert_true(n <= RL_PROXY_MAX);
	memcpy(buf, hdr, n);
	memcpy(buf + n, http_req, sizeof(http_req) - 1);
	memset(&r2, 0x5a, sizeof(r2));
	assert_int_equal(parse_exact(buf, n + sizeof(http_req) - 1, &r2),
			 RL_PROXY_OK);
	assert_int_equal(r2.len, n);
	assert_int_equal(r2.local, r.local);
	assert_int_equal(r2.port, r.port);
	assert_int_equal(r2.addr.family, r.addr.family);
	assert_memory_equal(r2.addr.bytes, r.addr.bytes, sizeof(r.addr.bytes));
	return r;
}

/*
 * Bad input of n bytes that first becomes recognisably bad at bad_at
 * bytes: shorter prefixes ask for more, every longer one is BAD. A failure
 * names the case `what`, or shows the input when that is NULL.
 */
static void check_bad_as(const char *what, const void *p, size_t n,
			 size_t bad_at)
{
	struct rl_proxy_result r;

	assert_true(bad_at >= 1 && bad_at <= n);
	for (size_t i = 0; i <= n; i++) {
		enum rl_proxy_status want = i < bad_at ? RL_PROXY_MORE :
							 RL_PROXY_BAD;

		if (parse_exact(p, i, &r) == want)
			continue;
		if (what)
			fail_msg("%s prefix %zu: got %d, want %d", what, i,
				 parse_exact(p, i, &r), want);
		fail_msg("case \"%.*s\" prefix %zu: got %d, want %d",
			 (int)n, (const char *)p, i, parse_exact(p, i, &r), want);
	}
}

static void check_bad(const void *p, size_t n, size_t bad_at)
{
	check_bad_as(NULL, p, n, bad_at);
}

/* bad_at given as the length of the longest acceptable prefix + 1. */
static void check_bad_str(const char *s, const char *good_prefix)
{
	assert_memory_equal(s, good_prefix, strlen(good_prefix));
	check_bad(s, strlen(s), strlen(good_prefix) + 1);
}

static void assert_addr(const struct rl_proxy_result *r, const char *text,
			uint16_t port)
{
	struct rl_addr want;

	assert_int_equal(rl_addr_parse(text, strlen(text), &want), 0);
	assert_int_equal(r->local, 0);
	assert_int_equal(r->addr.family, want.family);
	assert_memory_equal(r->addr.bytes, want.bytes, sizeof(want.bytes));
	assert_int_equal(r->port, port);
}

/* ---- v1 ---- */

static void test_v1_tcp4(void **state)
{
	static const char h1[] =
		"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n";
	static const char h2[] =
		"PROXY TCP4 0.0.0.0 255.255.255.255 0 65535\r\n";
	struct rl_proxy_result r;

	(void)state;
	r = check_valid(h1, sizeof(h1) - 1);
	assert_addr(&r, "192.168.0.1", 56324);

	r = check_valid(h2, sizeof(h2) - 1);
	assert_addr(&r, "0.0.0.0", 0);
}

static void test_v1_tcp6(void **state)
{
	static const char h1[] =
		"PROXY TCP6 2001:db8::1 2001:db8::2 65535 80\r\n";
	static const char h2[] =
		"PROXY TCP6 ::ffff:10.1.2.3 ::1 1234 8080\r\n";
	static const char h3[] =
		"PROXY TCP6 FFFF:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
		"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
	struct rl_proxy_result r;

	(void)state;
	r = check_valid(h1, sizeof(h1) - 1);
	assert_addr(&r, "2001:db8::1", 65535);
	assert_int_equal(r.addr.family, RL_AF_INET6);

	/* A dual-stack proxy's v4 client: folded to plain IPv4. */
	r = check_valid(h2, sizeof(h2) - 1);
	assert_addr(&r, "10.1.2.3", 1234);
	assert_int_equal(r.addr.family, RL_AF_INET);

	/* The spec's longest TCP6 line, 104 bytes. */
	assert_int_equal(sizeof(h3) - 1, 104);
	r = check_valid(h3, sizeof(h3) - 1);
	assert_addr(&r, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535);
}

static void test_v1_unknown(void **state)
{
	/* The spec's worst case: exactly 107 bytes. */
	static const char worst[] =
		"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
		"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
	char line[RL_PROXY_V1_MAX + 1];
	struct rl_proxy_result r;

	(void)state;
	r = check_valid("PROXY UNKNOWN\r\n", 15);
	assert_int_equal(r.local, 1);

	assert_int_equal(sizeof(worst) - 1, RL_PROXY_V1_MAX);
	r = check_valid(worst, sizeof(worst) - 1);
	assert_int_equal(r.local, 1);

	/* Whatever follows UNKNOWN is ignored, whatever it is. */
	r = check_valid("PROXY UNKNOWN  x  y\r\n", 21);
	assert_int_equal(r.local, 1);

	/* 107 bytes with the CRLF: still fine. */
	memcpy(line, "PROXY UNKNOWN ", 14);
	memset(line + 14, 'x', RL_PROXY_V1_MAX - 16);
	memcpy(line + RL_PROXY_V1_MAX - 2, "\r\n", 2);
	r = check_valid(line, RL_PROXY_V1_MAX);
	assert_int_equal(r.local, 1);
}

static void test_v1_bad(void **state)
{
	char line[RL_PROXY_V1_MAX + 2];

	(void)state;
	/* Not PROXY at all: refused at the first byte that differs. */
	check_bad_str("GET / HTTP/1.1\r\nHost: a\r\n\r\n", "");
	check_bad_str("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "PR");
	check_bad_str("PROXX TCP4", "PROX");
	check_bad_str("PROXYTCP4", "PROXY");
	check_bad_str("proxy TCP4", "");

	/* Bad protocol word. */
	check_bad_str("PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", "PROXY TCP");
	check_bad_str("PROXY UNKNOWNX\r\n", "PROXY UNKNOWN");
	check_bad_str("PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n", "PROXY ");
	check_bad_str("PROXY \r\n", "PROXY ");
	check_bad_str("PROXY TCP4\r\n", "PROXY TCP4");

	/* Bad addresses, and addresses of the other family. */
	check_bad_str("PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n",
		      "PROXY TCP4 1.2.3.256");
	check_bad_str("PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n", "PROXY TCP4 1.2.3");
	check_bad_str("PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n",
		      "PROXY TCP4 01.2.3.4");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8.9 1 2\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8.9");
	check_bad_str("PROXY TCP4 1.2.3.4x 5.6.7.8 1 2\r\n",
		      "PROXY TCP4 1.2.3.4");
	check_bad_str("PROXY TCP4 ::1 ::1 1 2\r\n", "PROXY TCP4 ");
	check_bad_str("PROXY TCP4 1.2.3.4 ::1 1 2\r\n", "PROXY TCP4 1.2.3.4 ");
	check_bad_str("PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n",
		      "PROXY TCP6 1.2.3.4");
	check_bad_str("PROXY TCP6 ::1 5.6.7.8 1 2\r\n",
		      "PROXY TCP6 ::1 5.6.7.8");
	check_bad_str("PROXY TCP6 ::1%eth0 ::1 1 2\r\n", "PROXY TCP6 ::1");
	check_bad_str("PROXY TCP6 1::2::3 ::1 1 2\r\n", "PROXY TCP6 1::2::3");
	check_bad_str("PROXY TCP6 g::1 ::1 1 2\r\n", "PROXY TCP6 ");

	/* Exactly one space between fields. */
	check_bad_str("PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n", "PROXY ");
	check_bad_str("PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", "PROXY TCP4 ");
	check_bad_str("PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
		      "PROXY TCP4 1.2.3.4 ");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8  1 2\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 ");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1  2\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 1 ");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 1 2");
	check_bad_str("PROXY TCP4 1.2.3.4\t5.6.7.8 1 2\r\n",
		      "PROXY TCP4 1.2.3.4");

	/* Too many or too few fields. */
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 1 2");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 1");
	check_bad_str("PROXY TCP4 1.2.3.4\r\n", "PROXY TCP4 1.2.3.4");

	/* Ports: 0..65535, no leading zeros, no sign. */
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 65536 80\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 6553");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 80 65536\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 80 6553");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 99999 80\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 9999");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 080 80\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 0");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 80 00\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 80 0");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 100000 80\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 10000");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 +1 80\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 ");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 -1 80\r\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 ");

	/* Line endings: CR must precede LF, and LF must follow CR. */
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 1 2");
	check_bad_str("PROXY UNKNOWN\n", "PROXY UNKNOWN");
	check_bad_str("PROXY UNKNOWN a\nb\r\n", "PROXY UNKNOWN a");
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX",
		      "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r");
	check_bad_str("PROXY UNKNOWN\r\r\n", "PROXY UNKNOWN\r");
	/* (the CR ends the fields, and two of five are too few) */
	check_bad_str("PROXY TCP4 1.2.3.4\r 5.6.7.8 1 2\r\n",
		      "PROXY TCP4 1.2.3.4");
	check_bad_str("PROXY \n", "PROXY ");

	/* No CRLF within 107 bytes: refused when byte 107 is not the LF. */
	memcpy(line, "PROXY UNKNOWN ", 14);
	memset(line + 14, 'x', sizeof(line) - 14);
	check_bad(line, sizeof(line), RL_PROXY_V1_MAX);
	/* ... and a CRLF one byte too late does not save it. */
	memcpy(line + RL_PROXY_V1_MAX - 1, "\r\n", 2);
	check_bad(line, RL_PROXY_V1_MAX + 1, RL_PROXY_V1_MAX);
}

/* ---- v2 ---- */

/* Build a v2 header into buf: returns its length. */
static size_t v2(uint8_t *buf, uint8_t ver_cmd, uint8_t fam,
		 const void *body, size_t body_len)
{
	memcpy(buf, sig, sizeof(sig));
	buf[12] = ver_cmd;
	buf[13] = fam;
	buf[14] = (uint8_t)(body_len >> 8);
	buf[15] = (uint8_t)body_len;
	if (body_len)
		memcpy(buf + 16, body, body_len);
	return 16 + body_len;
}

static const uint8_t body_v4[12] = {
	203, 0, 113, 7,   /* src */
	192, 0, 2, 1,     /* dst */
	0xc3, 0x50,       /* sport 50000 */
	0x01, 0xbb,       /* dport 443 */
};

/* A PROXY header of family `fam` and `body`: valid (check_valid: its
 * length is the header's), from addr:port. */
static struct rl_proxy_result check_v2_client(uint8_t fam, const uint8_t *body,
					      size_t body_len, const char *addr,
					      uint16_t port)
{
	uint8_t buf[RL_PROXY_MAX];
	struct rl_proxy_result r;

	r = check_valid(buf, v2(buf, 0x21, fam, body, body_len));
	assert_addr(&r, addr, port);
	return r;
}

static void test_v2_inet(void **state)
{
	struct rl_proxy_result r;

	(void)state;
	r = check_v2_client(0x11, body_v4, sizeof(body_v4), "203.0.113.7", 50000);
	assert_int_equal(r.len, 28);
}

static void test_v2_inet6(void **state)
{
	uint8_t body[36] = {
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
		0xff, 0xff, 0x00, 0x50,
	};
	struct rl_proxy_result r;

	(void)state;
	r = check_v2_client(0x21, body, sizeof(body), "2001:db8::42", 65535);
	assert_int_equal(r.len, 52);

	/* ::ffff:198.51.100.9 is a v4 client and is keyed as one. */
	memset(body, 0, 16);
	body[10] = 0xff;
	body[11] = 0xff;
	body[12] = 198;
	body[13] = 51;
	body[14] = 100;
	body[15] = 9;
	r = check_v2_client(0x21, body, sizeof(body), "198.51.100.9", 65535);
	assert_int_equal(r.addr.family, RL_AF_INET);
}

/* A v2 header that names no client to key by: valid, local, `len` bytes
 * long (0: the length is not part of the case). */
struct local_case {
	const char *what;
	uint8_t ver_cmd, fam;
	const uint8_t *body;
	size_t body_len, len;
};

static const uint8_t no_addr[216];

static void check_local(const struct local_case *t, size_t count)
{
	uint8_t buf[RL_PROXY_MAX];

	for (size_t i = 0; i < count; i++) {
		size_t n = v2(buf, t[i].ver_cmd, t[i].fam, t[i].body,
			      t[i].body_len);
		struct rl_proxy_result r = check_valid(buf, n);

		if (r.local != 1)
			fail_msg("%s: not local", t[i].what);
		if (t[i].len && r.len != t[i].len)
			fail_msg("%s: len %zu, want %zu", t[i].what,
				 r.len, t[i].len);
	}
}

static void test_v2_local(void **state)
{
	static const struct local_case t[] = {
		/* haproxy's health check: LOCAL, UNSPEC, no body. */
		{ "LOCAL UNSPEC", 0x20, 0x00, NULL, 0, 16 },
		/* LOCAL with addresses: they are ignored, the length honoured. */
		{ "LOCAL TCP4", 0x20, 0x11, body_v4, sizeof(body_v4), 28 },
		/* For LOCAL the family is not looked at at all. */
		{ "LOCAL family 0xff", 0x20, 0xff, NULL, 0, 0 },
	};

	(void)state;
	check_local(t, sizeof(t) / sizeof(t[0]));
}

static void test_v2_no_client(void **state)
{
	static const struct local_case t[] = {
		/* PROXY with UNSPEC: nothing to key by. */
		{ "PROXY UNSPEC", 0x21, 0x00, NULL, 0, 0 },
		/* UDP over IPv4 and IPv6, UNIX stream and datagram: no client
		 * address, but their blocks are skipped whole. */
		{ "PROXY UDP4", 0x21, 0x12, body_v4, sizeof(body_v4), 28 },
		{ "PROXY UDP6", 0x21, 0x22, no_addr, 36, 52 },
		{ "PROXY UNIX stream", 0x21, 0x31, no_addr, 216, 232 },
		{ "PROXY UNIX datagram", 0x21, 0x32, no_addr, 216, 0 },
		/* INET with an UNSPEC transport: not TCP either. */
		{ "PROXY INET UNSPEC", 0x21, 0x10, body_v4, sizeof(body_v4), 0 },
	};

	(void)state;
	check_local(t, sizeof(t) / sizeof(t[0]));
}

static void test_v2_tlvs(void **state)
{
	uint8_t body[RL_PROXY_MAX - 16];
	struct rl_proxy_result r;
	size_t k = 0;

	(void)state;
	memcpy(body, body_v4, sizeof(body_v4));
	k = sizeof(body_v4);
	/* PP2_TYPE_ALPN "h2", then PP2_TYPE_NOOP of 3 bytes. */
	memcpy(body + k, "\x01\x00\x02h2", 5);
	k += 5;
	memcpy(body + k, "\x04\x00\x03\x00\x00\x00", 6);
	k += 6;
	r = check_v2_client(0x11, body, k, "203.0.113.7", 50000);
	assert_int_equal(r.len, 16 + 12 + 11);

	/* TLVs are not validated: a bogus one is skipped all the same. */
	memcpy(body + sizeof(body_v4), "\xee\xff\xff", 3);
	check_v2_client(0x11, body, sizeof(body_v4) + 3, "203.0.113.7", 50000);

	/* The largest header we take: RL_PROXY_MAX bytes in all. */
	memset(body + sizeof(body_v4), 0, sizeof(body) - sizeof(body_v4));
	r = check_v2_client(0x11, body, sizeof(body), "203.0.113.7", 50000);
	assert_int_equal(r.len, RL_PROXY_MAX);
}

static void test_v2_bad(void **state)
{
	/* Bad from byte bad_at on. */
	static const struct {
		const char *what;
		uint8_t ver_cmd, fam;
		const uint8_t *body;
		size_t body_len, bad_at;
	} t[] = {
		/* Version 1 and 3 in the version nibble. */
		{ "version 1", 0x11, 0x11, body_v4, sizeof(body_v4), 13 },
		{ "version 3", 0x31, 0x11, body_v4, sizeof(body_v4), 13 },
		/* Commands other than LOCAL and PROXY. */
		{ "command 2", 0x22, 0x11, body_v4, sizeof(body_v4), 13 },
		{ "command 15", 0x2f, 0x11, body_v4, sizeof(body_v4), 13 },
		/* Families past UNIX, transports past DGRAM. */
		{ "family 4", 0x21, 0x41, body_v4, sizeof(body_v4), 14 },
		{ "transport 3", 0x21, 0x13, body_v4, sizeof(body_v4), 14 },
		/* A length shorter than the family's address block. */
		{ "TCP4 in 11", 0x21, 0x11, no_addr, 11, 16 },
		{ "TCP6 in 35", 0x21, 0x21, no_addr, 35, 16 },
		{ "TCP6 in 12", 0x21, 0x21, no_addr, 12, 16 },
		{ "UNIX in 64", 0x21, 0x31, no_addr, 64, 16 },
		{ "UDP4 in 0", 0x21, 0x12, NULL, 0, 16 },
	};
	uint8_t buf[RL_PROXY_MAX + 64];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		n = v2(buf, t[i].ver_cmd, t[i].fam, t[i].body, t[i].body_len);
		check_bad_as(t[i].what, buf, n, t[i].bad_at);
	}

	/* A length that would take us past RL_PROXY_MAX. */
	n = v2(buf, 0x21, 0x11, NULL, 0);
	buf[14] = (RL_PROXY_MAX - 16 + 1) >> 8;
	buf[15] = (RL_PROXY_MAX - 16 + 1) & 0xff;
	check_bad(buf, n, 16);
	buf[14] = 0xff;
	buf[15] = 0xff;
	check_bad(buf, n, 16);
	/* ... also for LOCAL: we would still have to read it all. */
	buf[12] = 0x20;
	check_bad(buf, n, 16);

	/* A signature that goes wrong at each of its bytes. */
	for (size_t i = 0; i < sizeof(sig); i++) {
		n = v2(buf, 0x21, 0x11, body_v4, sizeof(body_v4));
		buf[i] ^= 0x40;
		check_bad(buf, n, i + 1);
	}
	/* A blank line, then HTTP. */
	check_bad("\r\nGET / HTTP/1.1\r\n", 18, 3);
}

static void test_not_proxy(void **state)
{
	/* A TLS 1.0 record holding a ClientHello. */
	static const uint8_t tls[] = {
		0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03,
		0x03, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
	};
	static const uint8_t zeros[16] = { 0 };
	struct rl_proxy_result r;

	(void)state;
	check_bad(tls, sizeof(tls), 1);
	check_bad(zeros, sizeof(zeros), 1);
	check_bad(http_req, sizeof(http_req) - 1, 1);

	/* Nothing yet: wait. */
	assert_int_equal(rl_proxy_parse((const uint8_t *)"", 0, &r),
			 RL_PROXY_MORE);
	assert_int_equal(rl_proxy_parse(NULL, 0, &r), RL_PROXY_MORE);
	/* Misuse is refused, not dereferenced. */
	assert_int_equal(rl_proxy_parse(NULL, 5, &r), RL_PROXY_BAD);
	assert_int_equal(rl_proxy_parse((const uint8_t *)"PROXY", 5, NULL),
			 RL_PROXY_BAD);
}

/*
 * The answers for the prefixes of one input must read MORE..., then either
 * BAD for every longer prefix or OK with one and the same len: a caller
 * that feeds bytes as they arrive gets the answer it would get from all of
 * them at once.
 */
static void check_consistent(const uint8_t *p, size_t n)
{
	enum rl_proxy_status first = RL_PROXY_MORE;
	struct rl_proxy_result r;
	size_t ok_len = 0;

	for (size_t i = 0; i <= n; i++) {
		enum rl_proxy_status st = parse_exact(p, i, &r);

		if (first == RL_PROXY_MORE) {
			first = st;
			if (st == RL_PROXY_OK) {
				ok_len = r.len;
				assert_true(ok_len == i);
			}
			continue;
		}
		assert_int_equal(st, first);
		if (st == RL_PROXY_OK)
			assert_int_equal(r.len, ok_len);
	}
}

/*
 * Every byte value at every position of a valid header: the parser must
 * never read past len (ASan), whatever it says OK to must be a header of
 * no more than the bytes given, and the answers must be consistent.
 */
static void test_mutations(void **state)
{
	static const char v1[] =
		"PROXY TCP6 2001:db8::1 ::ffff:1.2.3.4 1 2\r\n";
	uint8_t base[64], buf[64];
	struct rl_proxy_result r;
	size_t sizes[2];
	const uint8_t *bases[2];
	uint8_t v2buf[64];

	(void)state;
	memcpy(base, v1, sizeof(v1) - 1);
	sizes[0] = sizeof(v1) - 1;
	bases[0] = base;
	sizes[1] = v2(v2buf, 0x21, 0x11, body_v4, sizeof(body_v4));
	bases[1] = v2buf;

	for (int b = 0; b < 2; b++) {
		for (size_t pos = 0; pos < sizes[b]; pos++) {
			for (unsigned v = 0; v < 256; v++) {
				enum rl_proxy_status st;

				memcpy(buf, bases[b], sizes[b]);
				buf[pos] = (uint8_t)v;
				st = parse_exact(buf, sizes[b], &r);
				if (st == RL_PROXY_OK)
					assert_true(r.len <= sizes[b]);
				check_consistent(buf, sizes[b]);
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v1_tcp4),
		cmocka_unit_test(test_v1_tcp6),
		cmocka_unit_test(test_v1_unknown),
		cmocka_unit_test(test_v1_bad),
		cmocka_unit_test(test_v2_inet),
		cmocka_unit_test(test_v2_inet6),
		cmocka_unit_test(test_v2_local),
		cmocka_unit_test(test_v2_no_client),
		cmocka_unit_test(test_v2_tlvs),
		cmocka_unit_test(test_v2_bad),
		cmocka_unit_test(test_not_proxy),
		cmocka_unit_test(test_mutations),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
