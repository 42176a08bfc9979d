/* SPDX-License-Identifier: MIT */
/* url.c - the store URL: one grammar for the configuration, the agent and
 * rlshimctl (url.h). */
#include "url.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ascii.h"

int rl_url_port(const char *p, size_t len, int *port)
{
	unsigned long v = 0;

	if (len == 0 || len > 5)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(p[i] - '0');
	}
	if (v < 1 || v > 65535)
		return -EINVAL;
	*port = (int)v;
	return 0;
}

int rl_url_host(const char *h, size_t len, char *out, size_t cap)
{
	if (len >= cap)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)h[i] <= ' ' || h[i] == 0x7f || h[i] == '[' ||
		    h[i] == ']' || h[i] == '/' || h[i] == '@' || h[i] == ',' ||
		    h[i] == '?' || h[i] == '#')
			return -EINVAL;
	memcpy(out, h, len);
	out[len] = '\0';
	return 0;
}

int rl_url_unescape(const char *p, size_t len, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)p[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -EINVAL;
			hi = rl_ascii_hexval((uint8_t)p[i + 1]);
			lo = rl_ascii_hexval((uint8_t)p[i + 2]);
			if (hi < 0 || lo < 0 || (hi | lo) == 0)
				return -EINVAL;
			c = hi << 4 | lo;
			i += 2;
		}
		if (o + 1 >= cap)
			return -EINVAL;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return 0;
}

/* [user:]password@ at the start of *p..end (the part before the path):
 * it ends at the last '@' (hosts never hold one), each part decoded, *p
 * moved past it. 0 or -EINVAL. */
static int userinfo(const char **p, const char *end, struct rl_url *u)
{
	const char *at = NULL, *sep;

	for (const char *q = *p; q < end; q++)
		if (*q == '@')
			at = q;
	if (!at)
		return 0;
	sep = memchr(*p, ':', (size_t)(at - *p));
	if (sep ? rl_url_unescape(*p, (size_t)(sep - *p), u->user, sizeof(u->user)) ||
		  rl_url_unescape(sep + 1, (size_t)(at - sep - 1), u->pass,
				  sizeof(u->pass))
		: rl_url_unescape(*p, (size_t)(at - *p), u->pass, sizeof(u->pass)))
		return -EINVAL;
	*p = at + 1;
	return 0;
}

/* host[:port] or [v6][:port] in p[0..len): `port` if none is given. */
static int hostport(const char *p, size_t len, int port, struct rl_url_addr *a)
{
	const char *hend, *colon;

	a->port = port;
	if (len && p[0] == '[') {
		hend = memchr(p, ']', len);
		if (!hend || hend == p + 1)
			return -EINVAL;
		colon = hend + 1 < p + len ? hend + 1 : NULL;
		if (colon && *colon != ':')
			return -EINVAL;
		if (rl_url_host(p + 1, (size_t)(hend - p - 1), a->host, sizeof(a->host)))
			return -EINVAL;
	} else {
		/* A bare IPv6 address would lose its last group to the port. */
		colon = memchr(p, ':', len);
		hend = colon ? colon : p + len;
		if (hend == p || (colon && memchr(colon + 1, ':',
						  len - (size_t)(colon + 1 - p))))
			return -EINVAL;
		if (rl_url_host(p, (size_t)(hend - p), a->host, sizeof(a->host)))
			return -EINVAL;
	}
	if (colon && rl_url_port(colon + 1, len - (size_t)(colon + 1 - p), &a->port))
		return -EINVAL;
	return 0;
}

/* The hosts, "h:p,h:p" in p[0..end), at most `max`. */
static int hosts(const char *p, const char *end, unsigned max, int port,
		 struct rl_url *u)
{
	for (;;) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma ? comma : end;

		if (u->naddrs == max ||
		    hostport(p, (size_t)(stop - p), port, &u->addr[u->naddrs]))
			return -EINVAL;
		u->naddrs++;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* The database, "" or "/" or "/N" (N at most `max`), the rest of the URL. */
static int database(const char *p, unsigned long max, int *db)
{
	unsigned long v = 0;

	if (!*p || (*p == '/' && !p[1]))
		return 0;
	if (*p != '/' || !p[1] || strlen(p + 1) > 5)
		return -EINVAL;
	for (p++; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v > max)
		return -EINVAL;
	*db = (int)v;
	return 0;
}

static const struct {
	const char *scheme;
	enum rl_url_kind kind;
} schemes[] = {
	{ "redis://", RL_URL_REDIS },
	{ "unix://", RL_URL_UNIX },
	{ "redis-sentinel://", RL_URL_SENTINEL },
	{ "redis-cluster://", RL_URL_CLUSTER },
};

static int parse(const char *url, struct rl_url *u)
{
	const char *p = NULL, *slash, *end;

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t n = strlen(schemes[i].scheme);

		if (strncmp(url, schemes[i].scheme, n) == 0) {
			u->kind = schemes[i].kind;
			p = url + n;
		}
	}
	if (!p)
		return -EINVAL;
	for (const char *q = url; *q; q++)
		if ((unsigned char)*q <= ' ' || *q == 0x7f)
			return -EINVAL;
	if (u->kind == RL_URL_UNIX) {
		if (*p != '/' || !p[1] || strlen(p) >= sizeof(u->path))
			return -EINVAL;
		strcpy(u->path, p);
		return 0;
	}
	slash = strchr(p, '/');
	end = slash ? slash : p + strlen(p);
	if (userinfo(&p, end, u))
		return -EINVAL;
	switch (u->kind) {
	case RL_URL_REDIS:
		if (hostport(p, (size_t)(end - p), RL_URL_PORT, &u->addr[0]))
			return -EINVAL;
		u->naddrs = 1;
		return database(end, 65535, &u->db);
	case RL_URL_CLUSTER: /* a cluster has only database 0 */
		if (hosts(p, end, RL_URL_ADDRS_MAX, RL_URL_PORT, u))
			return -EINVAL;
		return database(end, 0, &u->db);
	default: /* RL_URL_SENTINEL: the master is asked for by name */
		if (!slash || hosts(p, end, RL_URL_SENTINELS_MAX,
				    RL_URL_SENTINEL_PORT, u))
			return -EINVAL;
		p = slash + 1;
		end = strchr(p, '/');
		if (!end)
			end = p + strlen(p);
		if (end == p || (size_t)(end - p) >= sizeof(u->master))
			return -EINVAL;
		memcpy(u->master, p, (size_t)(end - p));
		u->master[end - p] = '\0';
		return database(end, 65535, &u->db);
	}
}

int rl_url_parse(const char *url, struct rl_url *out)
{
	memset(out, 0, sizeof(*out));
	if (parse(url, out)) {
		enum rl_url_kind kind = out->kind;

		memset(out, 0, sizeof(*out));
		out->kind = kind;
		return -EINVAL;
	}
	return 0;
}

void rl_url_mask(const char *url, char *out, size_t len)
{
	const char *auth = strstr(url, "://"), *at = NULL, *end, *colon;

	if (auth && strncmp(url, "unix://", 7) != 0) {
		auth += 3;
		end = strchr(auth, '/');
		if (!end)
			end = auth + strlen(auth);
		for (const char *q = auth; q < end; q++)
			if (*q == '@')
				at = q;
	}
	if (!at) {
		snprintf(out, len, "%s", url);
		return;
	}
	colon = memchr(auth, ':', (size_t)(at - auth));
	snprintf(out, len, "%.*s***%s", (int)((colon ? colon + 1 : auth) - url),
		 url, at);
}

void rl_url_format_addr(const char *host, int port, char *out, size_t len)
{
	int v6 = strchr(host, ':') != NULL;

	snprintf(out, len, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

void rl_url_format(const struct rl_url *u, char *out, size_t len)
{
	size_t o;

	if (!len)
		return;
	out[0] = '\0';
	if (u->kind == RL_URL_UNIX) {
		snprintf(out, len, "unix://%s", u->path);
		return;
	}
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (schemes[i].kind == u->kind)
			snprintf(out, len, "%s%s%s", schemes[i].scheme, u->user,
				 u->user[0] ? "@" : "");
	o = strlen(out);
	for (unsigned i = 0; i < u->naddrs && o < len; i++) {
		char a[RL_URL_HOST_MAX + 16];

		rl_url_format_addr(u->addr[i].host, u->addr[i].port, a, sizeof(a));
		o += (size_t)snprintf(out + o, len - o, "%s%s", i ? "," : "", a);
	}
	if (o >= len)
		return;
	if (u->kind == RL_URL_SENTINEL)
		snprintf(out + o, len - o, "/%s/%d", u->master, u->db);
	else if (u->kind == RL_URL_REDIS)
		snprintf(out + o, len - o, "/%d", u->db);
}
