/* SPDX-License-Identifier: MIT */
/*
 * addr.c - IPv4/IPv6 addresses, prefixes and CIDR sets.
 *
 * The text parsers read hostile input (X-Forwarded-For values, PROXY
 * headers, config files) from buffers that are not NUL-terminated, so they
 * are written by hand over (pointer, length) and never look at s[len]. They
 * are strict in the way Go's net/netip is: an IPv4 part with a leading zero
 * ("010") is refused, because inet_aton() and some proxies read it as octal
 * and a limiter that disagrees with its peers about which client it is
 * looking at can be steered around. No locale, no allocation, no errno.
 */
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "ascii.h"

/* Longest text we accept: "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255". */
#define ADDR_TEXT_MAX (RL_ADDR_STRLEN - 1)
/* ... and a "/128" after it. */
#define CIDR_TEXT_MAX (RL_CIDR_STRLEN - 1)

/* ---- text parsing ---- */

/*
 * Exactly four decimal parts 0..255 separated by single dots, covering all
 * of s[0..len). "0" is a part; "00" and "01" are not (octal ambiguity).
 */
static int parse_v4(const char *s, size_t len, uint8_t out[4])
{
	uint8_t b[4];
	size_t i = 0;
	int part;

	for (part = 0; part < 4; part++) {
		unsigned v = 0;
		size_t start = i;

		if (part > 0) {
			if (i >= len || s[i] != '.')
				return -EINVAL;
			start = ++i;
		}
		/* At most three digits, so v stays small and cannot wrap. */
		while (i < len && i - start < 3 && s[i] >= '0' && s[i] <= '9')
			v = v * 10 + (unsigned)(s[i++] - '0');
		if (i == start || v > 255)
			return -EINVAL;
		if (s[start] == '0' && i - start > 1)
			return -EINVAL;
		b[part] = (uint8_t)v;
	}
	/* A fourth digit, a fifth part, a trailing dot: all left over here. */
	if (i != len)
		return -EINVAL;
	memcpy(out, b, 4);
	return 0;
}

/*
 * RFC 4291 section 2.2: eight groups of 1-4 hex digits, at most one "::"
 * standing for one or more zero groups, and optionally dotted-quad IPv4 in
 * place of the last two groups. The "::" must stand for at least one group
 * ("1:2:3:4:5:6:7::8" is refused), as glibc's inet_pton and Go's netip do.
 */
static int parse_v6(const char *s, size_t len, uint8_t out[16])
{
	uint8_t ip[16] = { 0 };
	int ellipsis = -1; /* byte offset where "::" stands, or -1 */
	size_t n = 0;      /* bytes of ip filled */
	size_t i = 0;

	if (len >= 2 && s[0] == ':' && s[1] == ':') {
		ellipsis = 0;
		i = 2;
	}
	while (i < len) {
		size_t start = i;
		unsigned v = 0;
		int h;

		/* Stop at five digits: enough to know there are too many. */
		while (i < len && i - start < 5 && (h = rl_ascii_hexval((uint8_t)s[i])) >= 0) {
			v = (v << 4) | (unsigned)h;
			i++;
		}
		if (i == start)
			return -EINVAL; /* ":::", ":1", "1:2::3::" ... */
		if (i < len && s[i] == '.') {
			/*
			 * What we read as hex was the first part of an IPv4
			 * tail; reparse it as decimal. It must end the text;
			 * that it lands in the last four bytes is checked with
			 * the group count below.
			 */
			if (n + 4 > 16)
				return -EINVAL;
			if (parse_v4(s + start, len - start, ip + n))
				return -EINVAL;
			n += 4;
			break;
		}
		if (i - start > 4 || n + 2 > 16)
			return -EINVAL;
		ip[n++] = (uint8_t)(v >> 8);
		ip[n++] = (uint8_t)v;
		if (i == len)
			break;
		if (s[i] != ':')
			return -EINVAL; /* '%' of a zone id lands here */
		i++;
		if (i < len && s[i] == ':') {
			if (ellipsis >= 0)
				return -EINVAL; /* "1::2::3" */
			ellipsis = (int)n;
			i++;
		} else if (i == len) {
			return -EINVAL; /* "1:2:3:4:5:6:7:8:" */
		}
	}

	if (ellipsis < 0) {
		if (n != 16)
			return -EINVAL;
	} else {
		size_t gap = 16 - n;

		if (gap == 0)
			return -EINVAL;
		/* Slide the groups after "::" to the end; zeros fill in. */
		memmove(ip + ellipsis + gap, ip + ellipsis,
			n - (size_t)ellipsis);
		memset(ip + ellipsis, 0, gap);
	}
	memcpy(out, ip, 16);
	return 0;
}

static const uint8_t v4mapped_prefix[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
};

static int is_v4mapped(const struct rl_addr *a)
{
	return a->family == RL_AF_INET6 &&
	       memcmp(a->bytes, v4mapped_prefix, sizeof(v4mapped_prefix)) == 0;
}

/* ::ffff:a.b.c.d -> a.b.c.d, with the now unused bytes zeroed. */
static void fold(struct rl_addr *a)
{
	if (!is_v4mapped(a))
		return;
	a->family = RL_AF_INET;
	memmove(a->bytes, a->bytes + 12, 4);
	memset(a->bytes + 4, 0, 12);
}

/*
 * Parse without folding, so rl_cidr_parse can still tell "::ffff:1.2.3.4/120"
 * (a v6 prefix length) from "1.2.3.4/24". Any ':' makes it IPv6: a dotted
 * quad never contains one.
 */
static int parse_text(const char *s, size_t len, struct rl_addr *out)
{
	struct rl_addr a;

	if (!s || len == 0 || len > ADDR_TEXT_MAX)
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	if (memchr(s, ':', len)) {
		if (parse_v6(s, len, a.bytes))
			return -EINVAL;
		a.family = RL_AF_INET6;
	} else {
		if (parse_v4(s, len, a.bytes))
			return -EINVAL;
		a.family = RL_AF_INET;
	}
	*out = a;
	return 0;
}

int rl_addr_parse(const char *s, size_t len, struct rl_addr *out)
{
	struct rl_addr a;

	if (!out || parse_text(s, len, &a))
		return -EINVAL;
	fold(&a);
	*out = a;
	return 0;
}

/* ---- sockaddr, text form ---- */

int rl_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len,
			  struct rl_addr *out)
{
	struct rl_addr a;

	/* A short length would have us read past what the kernel filled in. */
	if (!sa || !out || len < (socklen_t)sizeof(sa->sa_family))
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	switch (sa->sa_family) {
	case AF_INET: {
		struct sockaddr_in sin;

		if (len < (socklen_t)sizeof(sin))
			return -EINVAL;
		/* Copy out: the caller's storage may be any alignment. */
		memcpy(&sin, sa, sizeof(sin));
		a.family = RL_AF_INET;
		memcpy(a.bytes, &sin.sin_addr, 4);
		break;
	}
	case AF_INET6: {
		struct sockaddr_in6 sin6;

		if (len < (socklen_t)sizeof(sin6))
			return -EINVAL;
		memcpy(&sin6, sa, sizeof(sin6));
		/* The scope id is dropped: a client is keyed by address. */
		a.family = RL_AF_INET6;
		memcpy(a.bytes, &sin6.sin6_addr, 16);
		fold(&a);
		break;
	}
	default:
		return -EAFNOSUPPORT;
	}
	*out = a;
	return 0;
}

int rl_addr_format(const struct rl_addr *a, char *buf, size_t len)
{
	char tmp[RL_ADDR_STRLEN];
	size_t n;
	int af;

	if (!a || (!buf && len))
		return -EINVAL;
	if (a->family == RL_AF_INET)
		af = AF_INET;
	else if (a->family == RL_AF_INET6)
		af = AF_INET6;
	else
		return -EINVAL;
	/* Format on the stack: a short buffer gets "", never a prefix. */
	if (!inet_ntop(af, a->bytes, tmp, sizeof(tmp)))
		return -EINVAL;
	n = strlen(tmp);
	if (n >= len) {
		if (len)
			buf[0] = '\0';
		return -ENOSPC;
	}
	memcpy(buf, tmp, n + 1);
	return 0;
}

/* ---- prefixes ---- */

unsigned rl_addr_bits(const struct rl_addr *a)
{
	if (!a)
		return 0;
	if (a->family == RL_AF_INET)
		return 32;
	if (a->family == RL_AF_INET6)
		return 128;
	return 0;
}

void rl_addr_mask(struct rl_addr *a, unsigned prefix)
{
	unsigned bits = rl_addr_bits(a);
	unsigned i;

	if (!bits)
		return;
	if (prefix > bits)
		prefix = bits;
	/*
	 * Clear through byte 15 even for IPv4: the bytes past the family's
	 * width are zero by contract, and this restores that for a struct
	 * the caller filled in by hand, so rl_addr_equal stays a memcmp.
	 */
	i = prefix / 8;
	if (prefix % 8)
		a->bytes[i++] &= (uint8_t)(0xff << (8 - prefix % 8));
	for (; i < sizeof(a->bytes); i++)
		a->bytes[i] = 0;
}

int rl_addr_equal(const struct rl_addr *a, const struct rl_addr *b)
{
	if (!a || !b)
		return 0;
	return a->family == b->family &&
	       memcmp(a->bytes, b->bytes, sizeof(a->bytes)) == 0;
}

size_t rl_addr_key(const struct rl_addr *a, unsigned prefix, uint8_t *out)
{
	struct rl_addr m;
	size_t n = rl_addr_bits(a) / 8;

	/* No family, no key: 0 bytes written, which no real key ever is. */
	if (!n || !out)
		return 0;
	m = *a;
	rl_addr_mask(&m, prefix);
	out[0] = m.family;
	memcpy(out + 1, m.bytes, n);
	return n + 1;
}

/* 1 if the first `prefix` bits of x and y agree. */
static int prefix_equal(const uint8_t *x, const uint8_t *y, unsigned prefix)
{
	unsigned full = prefix / 8;
	unsigned rem = prefix % 8;
	uint8_t m;

	if (memcmp(x, y, full))
		return 0;
	if (!rem)
		return 1;
	m = (uint8_t)(0xff << (8 - rem));
	return ((x[full] ^ y[full]) & m) == 0;
}

/* ---- CIDR ---- */

/* Decimal 0..max, no sign, no leading zero except "0" itself. */
static int parse_prefix(const char *s, size_t len, unsigned max,
			unsigned *out)
{
	unsigned v = 0;
	size_t i;

	if (len == 0 || len > 3 || (s[0] == '0' && len > 1))
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int rl_cidr_parse(const char *s, size_t len, struct rl_cidr *out)
{
	struct rl_cidr c;
	const char *slash;
	size_t alen = len;
	unsigned prefix;

	if (!s || !out || len == 0 || len > CIDR_TEXT_MAX)
		return -EINVAL;
	memset(&c, 0, sizeof(c));
	slash = memchr(s, '/', len);
	if (slash)
		alen = (size_t)(slash - s);
	if (parse_text(s, alen, &c.addr))
		return -EINVAL;
	prefix = rl_addr_bits(&c.addr);
	if (slash && parse_prefix(slash + 1, len - alen - 1, prefix, &prefix))
		return -EINVAL;
	if (is_v4mapped(&c.addr)) {
		/*
		 * A mapped prefix shorter than 96 bits reaches outside
		 * ::ffff:0:0/96 into real IPv6 space; folding it to IPv4
		 * would change its meaning, and keeping it as IPv6 would
		 * match nothing (every constructor folds), so refuse it.
		 */
		if (prefix < 96)
			return -EINVAL;
		fold(&c.addr);
		prefix -= 96;
	}
	rl_addr_mask(&c.addr, prefix);
	c.prefix = (uint8_t)prefix;
	*out = c;
	return 0;
}

int rl_cidr_format(const struct rl_cidr *c, char *buf, size_t len)
{
	char tmp[RL_CIDR_STRLEN];
	char a[RL_ADDR_STRLEN];
	int n;

	if (!c || (!buf && len))
		return -EINVAL;
	if (c->prefix > rl_addr_bits(&c->addr) ||
	    rl_addr_format(&c->addr, a, sizeof(a)))
		return -EINVAL;
	n = snprintf(tmp, sizeof(tmp), "%s/%u", a, (unsigned)c->prefix);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -EINVAL; /* cannot happen: 45 + "/128" fits */
	if ((size_t)n >= len) {
		if (len)
			buf[0] = '\0';
		return -ENOSPC;
	}
	memcpy(buf, tmp, (size_t)n + 1);
	return 0;
}

int rl_cidr_contains(const struct rl_cidr *c, const struct rl_addr *a)
{
	unsigned bits;
	unsigned prefix;

	if (!c || !a)
		return 0;
	bits = rl_addr_bits(&c->addr);
	/* A v4 client is never inside a v6 prefix; both sides are folded. */
	if (!bits || a->family != c->addr.family)
		return 0;
	prefix = c->prefix > bits ? bits : c->prefix;
	/*
	 * Compare only the prefix bits rather than masking `a` and comparing
	 * all 16 bytes: no copy, and a hand-built `c` with host bits left set
	 * still matches what its text form would.
	 */
	return prefix_equal(c->addr.bytes, a->bytes, prefix);
}

/* ---- sets ---- */

int rl_cidr_set_add(struct rl_cidr_set *set, const struct rl_cidr *c)
{
	struct rl_cidr norm;
	uint32_t i, n;
	unsigned bits;

	if (!set || !c)
		return -EINVAL;
	bits = rl_addr_bits(&c->addr);
	if (!bits || c->prefix > bits)
		return -EINVAL;
	/* Store the canonical form so a duplicate is recognised by bytes. */
	memset(&norm, 0, sizeof(norm));
	norm.addr = c->addr;
	norm.prefix = c->prefix;
	rl_addr_mask(&norm.addr, norm.prefix);

	/* Never trust n past the array, whatever the caller left in it. */
	n = set->n < RL_CIDR_SET_MAX ? set->n : RL_CIDR_SET_MAX;
	for (i = 0; i < n; i++) {
		if (set->items[i].prefix == norm.prefix &&
		    rl_addr_equal(&set->items[i].addr, &norm.addr))
			return 0;
	}
	if (n >= RL_CIDR_SET_MAX)
		return -ENOSPC;
	set->items[n] = norm;
	set->n = n + 1;
	return 0;
}

int rl_cidr_set_contains(const struct rl_cidr_set *set,
			 const struct rl_addr *a)
{
	uint32_t i, n;

	if (!set || !a)
		return 0;
	n = set->n < RL_CIDR_SET_MAX ? set->n : RL_CIDR_SET_MAX;
	for (i = 0; i < n; i++) {
		if (rl_cidr_contains(&set->items[i], a))
			return 1;
	}
	return 0;
}

const struct rl_cidr *rl_cidr_set_overlap(const struct rl_cidr_set *set,
					  const struct rl_cidr *c)
{
	uint32_t i, n;

	if (!set || !c)
		return NULL;
	n = set->n < RL_CIDR_SET_MAX ? set->n : RL_CIDR_SET_MAX;
	for (i = 0; i < n; i++) {
		const struct rl_cidr *a = &set->items[i];

		if (rl_cidr_contains(c, &a->addr) || rl_cidr_contains(a, &c->addr))
			return a;
	}
	return NULL;
}
