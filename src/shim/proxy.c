/* SPDX-License-Identifier: MIT */
/*
 * proxy.c - the PROXY protocol, versions 1 and 2 (haproxy's
 * doc/proxy-protocol.txt).
 *
 * These are the first bytes of a connection, straight from the network, so
 * the parser is written over (pointer, length), never looks at p[len], and
 * keys nothing on a header it is not sure of. It also answers "more" only
 * while what it has seen can still become a valid header: a connection that
 * does not start with one is refused after at most 6 (v1) or 12 (v2) bytes,
 * instead of being held while the shim waits for a header that will never
 * come. No allocation, no state between calls: the caller passes everything
 * it has read so far each time.
 */
#include "proxy.h"

#include <string.h>

static const char v1_magic[] = "PROXY ";
#define V1_MAGIC_LEN (sizeof(v1_magic) - 1)

static const uint8_t v2_sig[12] = {
	0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
};
#define V2_HDR_LEN 16 /* signature, ver_cmd, fam, 16-bit length */

/* v2 address block sizes (src, dst, sport, dport), by family nibble. */
#define V2_INET_LEN 12
#define V2_INET6_LEN 36
#define V2_UNIX_LEN 216

/* Longest address text each family can spell (rl_addr_parse's limits). */
#define V1_INET_TEXT_MAX 15  /* 255.255.255.255 */
#define V1_INET6_TEXT_MAX 45 /* ffff:...:ffff:255.255.255.255 */

/* 1 if the first min(len, n) bytes of p equal those of want. */
static int prefix_matches(const uint8_t *p, size_t len, const void *want,
			  size_t n)
{
	return memcmp(p, want, len < n ? len : n) == 0;
}

/* ---- version 1: text ---- */

enum v1_proto { V1_NONE, V1_TCP4, V1_TCP6, V1_UNKNOWN };

static const struct {
	const char *name;
	enum v1_proto proto;
} v1_protos[] = {
	{ "TCP4", V1_TCP4 },
	{ "TCP6", V1_TCP6 },
	{ "UNKNOWN", V1_UNKNOWN },
};

/*
 * The protocol word s[0..n). Complete, it must be one of the names;
 * incomplete (more bytes may follow), a prefix of one. Returns the protocol,
 * V1_NONE for a valid incomplete prefix, or -1.
 */
static int v1_proto(const uint8_t *s, size_t n, int complete)
{
	for (size_t i = 0; i < sizeof(v1_protos) / sizeof(v1_protos[0]); i++) {
		size_t want = strlen(v1_protos[i].name);

		if (complete && n == want &&
		    memcmp(s, v1_protos[i].name, n) == 0)
			return v1_protos[i].proto;
		if (!complete && n <= want &&
		    memcmp(s, v1_protos[i].name, n) == 0)
			return V1_NONE;
	}
	return -1;
}

/*
 * An address of the line's family. Complete, it must parse, and be spelled
 * in that family's syntax: TCP4 wants a dotted quad, TCP6 IPv6 text (which
 * may be an IPv4-mapped address; rl_addr_parse folds it, as it would the
 * peer address of a dual-stack socket). Incomplete, only its characters and
 * length are checked, which is enough to refuse garbage early.
 */
static int v1_addr(const uint8_t *s, size_t n, int complete,
		   enum v1_proto proto, struct rl_addr *out)
{
	const char *t = (const char *)s;
	int has_colon = memchr(s, ':', n) != NULL;
	size_t max = proto == V1_TCP4 ? V1_INET_TEXT_MAX : V1_INET6_TEXT_MAX;

	if (n > max)
		return -1;
	if (proto == V1_TCP4 && has_colon)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = t[i];

		if (c >= '0' && c <= '9')
			continue;
		if (c == '.')
			continue;
		if (proto == V1_TCP6 &&
		    (c == ':' || (c >= 'a' && c <= 'f') ||
		     (c >= 'A' && c <= 'F')))
			continue;
		return -1;
	}
	if (!complete)
		return 0;
	if (proto == V1_TCP6 && !has_colon)
		return -1; /* "PROXY TCP6 1.2.3.4 ...": the wrong family */
	if (rl_addr_parse(t, n, out))
		return -1;
	return 0;
}

/*
 * A port: 0..65535 in decimal, without leading zeros (as haproxy emits it,
 * and so that one port has one spelling). Incomplete, a prefix of that.
 */
static int v1_port(const uint8_t *s, size_t n, int complete, uint16_t *out)
{
	uint32_t v = 0;

	if (n == 0)
		return complete ? -1 : 0;
	if (n > 5 || (s[0] == '0' && n > 1))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint32_t)(s[i] - '0');
	}
	if (v > 65535)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

/*
 * "PROXY TCP4 <src> <dst> <sport> <dport>\r\n", "PROXY TCP6 ...", or
 * "PROXY UNKNOWN[ anything]\r\n"; fields separated by exactly one space, the
 * whole line at most RL_PROXY_V1_MAX bytes with its CRLF. The caller has
 * checked the "PROXY " magic.
 */
static enum rl_proxy_status v1_parse(const uint8_t *p, size_t len,
				     struct rl_proxy_result *out)
{
	size_t scan = len < RL_PROXY_V1_MAX ? len : RL_PROXY_V1_MAX;
	size_t end = 0;    /* the line's length with CRLF, once seen */
	size_t body_end;   /* where the fields stop: the CR, or len */
	int body_done;     /* no field byte can follow body_end */
	enum v1_proto proto = V1_NONE;
	struct rl_addr src = { 0 }, dst = { 0 };
	uint16_t sport = 0, dport = 0;
	size_t pos = V1_MAGIC_LEN;
	unsigned field = 0;

	/*
	 * Find the end of the line first. A CR must be followed by LF and an
	 * LF preceded by CR: a bare one of either is what a request smuggler
	 * would try, and no sender emits it. The last byte a line may use is
	 * RL_PROXY_V1_MAX - 1 and it must be the LF.
	 */
	for (size_t i = V1_MAGIC_LEN; i < scan; i++) {
		if (p[i] == '\n') {
			if (p[i - 1] != '\r')
				return RL_PROXY_BAD;
			end = i + 1;
			break;
		}
		if (p[i] == '\r' && i + 1 < len && p[i + 1] != '\n')
			return RL_PROXY_BAD;
		if (i == RL_PROXY_V1_MAX - 1)
			return RL_PROXY_BAD;
	}
	if (end) {
		body_end = end - 2;
		body_done = 1;
	} else if (len > V1_MAGIC_LEN && p[len - 1] == '\r') {
		body_end = len - 1;
		body_done = 1;
	} else {
		body_end = len;
		body_done = 0;
	}

	/*
	 * Check each field, the last one possibly cut short by the end of
	 * what has arrived: then it only has to be a prefix of a valid one.
	 */
	for (;;) {
		const uint8_t *sp = memchr(p + pos, ' ', body_end - pos);
		size_t fend = sp ? (size_t)(sp - p) : body_end;
		const uint8_t *s = p + pos;
		size_t n = fend - pos;
		int complete = sp != NULL || body_done;
		int r;

		switch (field) {
		case 0:
			r = v1_proto(s, n, complete);
			if (r < 0)
				return RL_PROXY_BAD;
			proto = (enum v1_proto)r;
			break;
		case 1:
			if (v1_addr(s, n, complete, proto, &src))
				return RL_PROXY_BAD;
			break;
		case 2:
			if (v1_addr(s, n, complete, proto, &dst))
				return RL_PROXY_BAD;
			break;
		case 3:
			if (v1_port(s, n, complete, &sport))
				return RL_PROXY_BAD;
			break;
		case 4:
			if (v1_port(s, n, complete, &dport))
				return RL_PROXY_BAD;
			break;
		default:
			return RL_PROXY_BAD; /* a sixth field */
		}
		/* What follows UNKNOWN is to be ignored, says the spec. */
		if (proto == V1_UNKNOWN)
			break;
		if (!sp)
			break;
		pos = fend + 1;
		field++;
	}

	if (proto != V1_UNKNOWN && body_done && field != 4)
		return RL_PROXY_BAD; /* the line ended early */
	if (!end)
		return RL_PROXY_MORE;

	memset(out, 0, sizeof(*out));
	out->len = end;
	if (proto == V1_UNKNOWN) {
		out->local = 1;
		return RL_PROXY_OK;
	}
	out->addr = src;
	out->port = sport;
	return RL_PROXY_OK;
}

/* ---- version 2: binary ---- */

static const uint8_t v4mapped_prefix[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
};

/*
 * Signature, then ver_cmd (version 2 in the high nibble, LOCAL 0 or PROXY 1
 * in the low), fam (address family, transport), a big-endian length, and
 * that many bytes: the addresses, then TLVs, which we skip. The caller has
 * checked as much of the signature as it has.
 */
static enum rl_proxy_status v2_parse(const uint8_t *p, size_t len,
				     struct rl_proxy_result *out)
{
	size_t body, need;
	unsigned cmd, fam, proto;

	if (len <= sizeof(v2_sig))
		return RL_PROXY_MORE;
	if ((p[12] >> 4) != 2)
		return RL_PROXY_BAD;
	cmd = p[12] & 0x0f;
	if (cmd > 1)
		return RL_PROXY_BAD;
	if (len < 14)
		return RL_PROXY_MORE;
	fam = p[13] >> 4;
	proto = p[13] & 0x0f;
	/*
	 * For LOCAL the spec has the receiver ignore the family; for PROXY,
	 * families past UNIX and transports past DGRAM are refused, as squid
	 * and haproxy do.
	 */
	if (cmd == 1 && (fam > 3 || proto > 2))
		return RL_PROXY_BAD;
	if (len < V2_HDR_LEN)
		return RL_PROXY_MORE;

	body = (size_t)p[14] << 8 | p[15];
	if (V2_HDR_LEN + body > RL_PROXY_MAX)
		return RL_PROXY_BAD;
	if (cmd == 1) {
		static const size_t block[4] = {
			0, V2_INET_LEN, V2_INET6_LEN, V2_UNIX_LEN,
		};

		if (body < block[fam])
			return RL_PROXY_BAD;
	}
	need = V2_HDR_LEN + body;
	if (len < need)
		return RL_PROXY_MORE;

	memset(out, 0, sizeof(*out));
	out->len = need;
	/*
	 * Only TCP over IPv4 or IPv6 names a client we can key. LOCAL (a
	 * health check), UNSPEC, UDP and UNIX sockets do not: the caller
	 * keeps the connection's own peer.
	 */
	if (cmd == 0 || proto != 1 || (fam != 1 && fam != 2)) {
		out->local = 1;
		return RL_PROXY_OK;
	}
	if (fam == 1) {
		out->addr.family = RL_AF_INET;
		memcpy(out->addr.bytes, p + 16, 4);
		out->port = (uint16_t)(p[24] << 8 | p[25]);
	} else {
		out->addr.family = RL_AF_INET6;
		memcpy(out->addr.bytes, p + 16, 16);
		out->port = (uint16_t)(p[48] << 8 | p[49]);
		/* A dual-stack proxy reports v4 clients as ::ffff:a.b.c.d;
		 * key them as the v4 clients they are. */
		if (memcmp(out->addr.bytes, v4mapped_prefix,
			   sizeof(v4mapped_prefix)) == 0) {
			out->addr.family = RL_AF_INET;
			memmove(out->addr.bytes, out->addr.bytes + 12, 4);
			memset(out->addr.bytes + 4, 0, 12);
		}
	}
	return RL_PROXY_OK;
}

/* ---- entry point ---- */

enum rl_proxy_status rl_proxy_parse(const uint8_t *p, size_t len,
				    struct rl_proxy_result *out)
{
	if (!out || (!p && len))
		return RL_PROXY_BAD;
	if (len == 0)
		return RL_PROXY_MORE;
	if (p[0] == 'P') {
		if (!prefix_matches(p, len, v1_magic, V1_MAGIC_LEN))
			return RL_PROXY_BAD;
		if (len <= V1_MAGIC_LEN)
			return RL_PROXY_MORE;
		return v1_parse(p, len, out);
	}
	if (p[0] == v2_sig[0]) {
		if (!prefix_matches(p, len, v2_sig, sizeof(v2_sig)))
			return RL_PROXY_BAD;
		return v2_parse(p, len, out);
	}
	return RL_PROXY_BAD;
}
