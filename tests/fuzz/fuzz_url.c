/* SPDX-License-Identifier: MIT */
/*
 * fuzz_url.c - the store URL parser (src/core/url.c) on any bytes: no
 * crash, nothing out of bounds, and for every URL it accepts:
 *   - every host, port, count and database within url.h's limits;
 *   - the text the log shows (rl_url_format) parses again to the same
 *     store: same scheme, hosts, ports, master and database (without a
 *     user: the format shows one as "user@");
 *   - the masked text (rl_url_mask) parses again to the same store too,
 *     its password "***" where there was one.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "url.h"

static void same_store(const struct rl_url *a, const struct rl_url *b)
{
	if (a->kind != b->kind || a->naddrs != b->naddrs || a->db != b->db ||
	    strcmp(a->user, b->user) || strcmp(a->master, b->master) ||
	    strcmp(a->path, b->path))
		abort();
	for (unsigned i = 0; i < a->naddrs; i++)
		if (a->addr[i].port != b->addr[i].port ||
		    strcmp(a->addr[i].host, b->addr[i].host))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rl_url u, v;
	char url[400], out[2048];

	if (size >= sizeof(url))
		return 0;
	memcpy(url, data, size);
	url[size] = '\0';
	if (rl_url_parse(url, &u))
		return 0;
	if (u.kind == RL_URL_UNKNOWN || u.naddrs > RL_URL_ADDRS_MAX ||
	    (u.kind == RL_URL_SENTINEL && u.naddrs > RL_URL_SENTINELS_MAX) ||
	    (u.kind != RL_URL_UNIX && !u.naddrs) || u.db < 0 || u.db > 65535 ||
	    (u.kind == RL_URL_CLUSTER && u.db))
		abort();
	for (unsigned i = 0; i < u.naddrs; i++)
		if (u.addr[i].port < 1 || u.addr[i].port > 65535 ||
		    !u.addr[i].host[0] || strpbrk(u.addr[i].host, "[]/@, \t"))
			abort();
	/* the format shows a user as "user@", which read back is a password
	 * (it is for people, not for reading back): round-trip without one */
	if (!u.user[0]) {
		rl_url_format(&u, out, sizeof(out));
		if (rl_url_parse(out, &v))
			abort();
		same_store(&u, &v);
	}
	rl_url_mask(url, out, sizeof(out));
	if (rl_url_parse(out, &v))
		abort();
	same_store(&u, &v);
	/* a password, even an empty one ("redis://@h"), shows as *** */
	if (strcmp(v.pass, "***") && (u.pass[0] || v.pass[0]))
		abort();
	return 0;
}
