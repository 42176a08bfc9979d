/* SPDX-License-Identifier: MIT */
/*
 * addr.h - IPv4/IPv6 addresses, prefixes and CIDR sets.
 *
 * An address is 16 bytes plus a family; IPv4 uses the first 4 bytes. An
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d) is folded to plain IPv4 by every
 * constructor, so a dual-stack listener keys a v4 client the same way a v4
 * listener does. Nothing here allocates.
 */
#ifndef RL_ADDR_H
#define RL_ADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define RL_AF_INET 4
#define RL_AF_INET6 6

struct rl_addr {
	uint8_t family; /* RL_AF_INET or RL_AF_INET6; 0 = none */
	uint8_t bytes[16];
};

/* Longest text form, with NUL: "ffff:ffff:...:255.255.255.255". */
#define RL_ADDR_STRLEN 46
/* ... and with "/128". */
#define RL_CIDR_STRLEN 50

/*
 * Parse a numeric address of `len` bytes (not necessarily NUL-terminated):
 * dotted-quad IPv4 (exactly four decimal parts) or IPv6 text (RFC 4291,
 * including an embedded IPv4 tail). Surrounding spaces are not accepted.
 * Returns 0 or -EINVAL.
 */
int rl_addr_parse(const char *s, size_t len, struct rl_addr *out);

/* From a sockaddr (AF_INET or AF_INET6). Returns 0 or -EAFNOSUPPORT. */
int rl_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len,
			  struct rl_addr *out);

/* Text form (inet_ntop's), NUL-terminated. Returns 0 or -ENOSPC. */
int rl_addr_format(const struct rl_addr *a, char *buf, size_t len);

/* Clear every bit after the first `prefix` bits (clamped to 32 or 128). */
void rl_addr_mask(struct rl_addr *a, unsigned prefix);

/* 1 if equal (same family and bytes), else 0. */
int rl_addr_equal(const struct rl_addr *a, const struct rl_addr *b);

/* Maximum prefix length of the family: 32 or 128. */
unsigned rl_addr_bits(const struct rl_addr *a);

/*
 * The bytes that key a client: the family byte and the masked address (5 or
 * 17 bytes). Returns the length written to `out` (at least 17 bytes).
 */
size_t rl_addr_key(const struct rl_addr *a, unsigned prefix, uint8_t *out);

struct rl_cidr {
	struct rl_addr addr; /* host bits already cleared */
	uint8_t prefix;
};

/*
 * Parse `a.b.c.d/n`, `x::y/n`, or a bare address (a host route). Host bits
 * past the prefix are cleared, as nginx and fail2ban accept them. A mapped
 * ::ffff:a.b.c.d/n with n >= 96 becomes a.b.c.d/(n-96). Returns 0 or
 * -EINVAL.
 */
int rl_cidr_parse(const char *s, size_t len, struct rl_cidr *out);

/* `addr/prefix`, NUL-terminated. Returns 0 or -ENOSPC. */
int rl_cidr_format(const struct rl_cidr *c, char *buf, size_t len);

/* 1 if `a` is inside `c`, else 0. */
int rl_cidr_contains(const struct rl_cidr *c, const struct rl_addr *a);

#define RL_CIDR_SET_MAX 256

/* A small fixed set of prefixes (allow, trusted_proxies). */
struct rl_cidr_set {
	uint32_t n;
	struct rl_cidr items[RL_CIDR_SET_MAX];
};

/* Add one prefix. Returns 0, or -ENOSPC when the set is full. */
int rl_cidr_set_add(struct rl_cidr_set *set, const struct rl_cidr *c);

/* 1 if any prefix of the set contains `a`, else 0. */
int rl_cidr_set_contains(const struct rl_cidr_set *set,
			 const struct rl_addr *a);

/* The first prefix of the set that shares an address with `c` (one holds
 * the other), or NULL: a ban that would cut off part of the allow list. */
const struct rl_cidr *rl_cidr_set_overlap(const struct rl_cidr_set *set,
					  const struct rl_cidr *c);

#endif /* RL_ADDR_H */
