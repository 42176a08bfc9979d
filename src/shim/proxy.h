/* SPDX-License-Identifier: MIT */
/*
 * proxy.h - the PROXY protocol (HAProxy's), versions 1 and 2, as sent by a
 * load balancer in front of the server: the real client's address, before
 * the first byte of HTTP. The shim reads it, keys the client by it, and
 * strips it so the application never sees it. Pure: no I/O, no allocation.
 */
#ifndef RL_PROXY_H
#define RL_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "addr.h"

/* v1 is at most 107 bytes; v2 is 16 bytes plus a length of up to 65535, but
 * we accept address blocks (with TLVs) of up to RL_PROXY_MAX in total. */
#define RL_PROXY_V1_MAX 107
#define RL_PROXY_MAX 1024

enum rl_proxy_status {
	RL_PROXY_MORE = 0,   /* not enough bytes yet to tell; call again */
	RL_PROXY_OK = 1,     /* a complete header: see `len` and `addr` */
	RL_PROXY_BAD = -1,   /* not a PROXY header, or a malformed one */
};

struct rl_proxy_result {
	size_t len;          /* bytes of the header, to strip */
	int local;           /* v2 LOCAL or v1 UNKNOWN: no client address
				(health checks); `addr` is unset */
	struct rl_addr addr; /* the client (source) address, folded */
	uint16_t port;       /* the client's port */
};

/*
 * Parse the start of a connection's bytes `p[0..len)`. Returns RL_PROXY_MORE
 * while `len` is a proper prefix of a valid header (never more than
 * RL_PROXY_MAX bytes are needed), RL_PROXY_OK with `out` filled once the
 * header is complete (bytes after it are not looked at), or RL_PROXY_BAD.
 * Never reads past len.
 */
enum rl_proxy_status rl_proxy_parse(const uint8_t *p, size_t len,
				    struct rl_proxy_result *out);

#endif /* RL_PROXY_H */
