/* SPDX-License-Identifier: MIT */
/*
 * url.h - the store URL, read one way by everything that reads it: the
 * configuration's check (config_value.c), rlshimd's store (store.c) and
 * its cluster seeds (cluster.c), and rlshimctl through them.
 *
 *   redis://[[user:]pass@]host[:port][/[db]]            port 6379
 *   unix:///absolute/path
 *   redis-sentinel://[[user:]pass@]H[:P][,H[:P]...]/master[/[db]]
 *                                                        port 26379, 8 at most
 *   redis-cluster://[[user:]pass@]H[:P][,H[:P]...][/[0]] port 6379, 16 at most
 *
 * A host is a name or an IPv4 address, or an IPv6 address in brackets;
 * no control character, blank or any of "[]/@,:?#" in a name. A port is 1 to
 * 65535, digits only. The user and password end at the last '@' before the
 * path, so a password may hold an '@'; either may be percent-encoded (a '/'
 * in a password must be: %2F), and a %00 is refused. A database is 0 to
 * 65535. Nothing here allocates or connects.
 */
#ifndef RL_URL_H
#define RL_URL_H

#include <stddef.h>

#define RL_URL_HOST_MAX      256 /* a hostname's 253 characters, the NUL */
#define RL_URL_USER_MAX      128
#define RL_URL_PASS_MAX      256
#define RL_URL_MASTER_MAX    128
#define RL_URL_ADDRS_MAX     16  /* cluster seeds */
#define RL_URL_SENTINELS_MAX 8
#define RL_URL_PORT          6379
#define RL_URL_SENTINEL_PORT 26379

enum rl_url_kind {
	RL_URL_UNKNOWN = 0, /* no scheme known */
	RL_URL_REDIS,
	RL_URL_UNIX,
	RL_URL_SENTINEL,
	RL_URL_CLUSTER,
};

struct rl_url_addr {
	char host[RL_URL_HOST_MAX];
	int port;
};

struct rl_url {
	enum rl_url_kind kind;
	char path[RL_URL_HOST_MAX];     /* unix:// */
	char user[RL_URL_USER_MAX];     /* ACL user; "" for none */
	char pass[RL_URL_PASS_MAX];     /* "" for none */
	char master[RL_URL_MASTER_MAX]; /* redis-sentinel:// */
	int db;
	unsigned naddrs;                /* redis:// 1, sentinels, seeds */
	struct rl_url_addr addr[RL_URL_ADDRS_MAX];
};

/*
 * Parse `url` into `out`. Returns 0, or -EINVAL with out->kind still
 * naming the scheme if it was known (so a caller can say which form it
 * expected) and nothing else kept.
 */
int rl_url_parse(const char *url, struct rl_url *out);

/* The URL as configured, without the password (for the log): scheme,
 * "user@" if any, hosts and ports as given or defaulted, master, db. For
 * people: read back, "user@" would be a password. */
void rl_url_format(const struct rl_url *u, char *out, size_t len);

/* `url` verbatim but for its password, "***" in its place (the userinfo
 * read as rl_url_parse reads it: up to the last '@' before the path; a
 * userinfo without ':' is the password). For a terminal, a log or a
 * metrics file. */
void rl_url_mask(const char *url, char *out, size_t len);

/* host:port, or [v6]:port, into out[len]. */
void rl_url_format_addr(const char *host, int port, char *out, size_t len);

/* The pieces, for the other texts that name hosts (a cluster's MOVED):
 * a port of digits only, 1..65535, in p[0..len); a host h[0..len) copied
 * to out[cap] if it has no control character, blank or any of "[]/@,?#".
 * 0 or -EINVAL. */
int rl_url_port(const char *p, size_t len, int *port);
int rl_url_host(const char *h, size_t len, char *out, size_t cap);

/* Percent-decode p[0..len) into out[cap]; a NUL or a bad escape refused.
 * 0 or -EINVAL. */
int rl_url_unescape(const char *p, size_t len, char *out, size_t cap);

#endif /* RL_URL_H */
