/* SPDX-License-Identifier: MIT */
/*
 * config.h - rlshim.conf, parsed once into an immutable structure.
 *
 * The file is INI (libinih). Every key of DESIGN.md "Configuration" is
 * known; anything else is an error naming `file:line`. A parsed struct
 * rl_config is never modified afterwards, so a later hot reload can publish
 * a new one with a single pointer swap.
 */
#ifndef RL_CONFIG_H
#define RL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rlshim.h"
#include "addr.h"
#include "log.h"

#define RL_CONFIG_DEFAULT_PATH "/etc/rlshim.conf"
#define RL_CONFIG_ENV "RLSHIM_CONFIG"

#define RL_MAX_PORTS 64
#define RL_MAX_IFACES 8
#define RL_PATH_MAX 256     /* a rule's match path */
#define RL_HEADER_NAME_MAX 64
#define RL_SHM_NAME_MAX 64
#define RL_URL_MAX 256

#define RL_CONFIG_WARN_MAX 4

#define RL_CAPACITY_MIN 16u
#define RL_CAPACITY_MAX (1u << 24)
#define RL_CAPACITY_DEFAULT 65536u

enum rl_mode { RL_MODE_ENFORCE = 0, RL_MODE_DRY_RUN = 1 };

enum rl_headers {
	RL_HEADERS_RATELIMIT = 0, /* RateLimit-Limit/-Remaining/-Reset */
	RL_HEADERS_IETF = 1,      /* RateLimit-Policy + RateLimit */
	RL_HEADERS_XRATELIMIT = 2,/* X-RateLimit-*, reset as epoch seconds */
	RL_HEADERS_NONE = 3,      /* Retry-After only */
};

enum rl_on_error { RL_ON_ERROR_REFUSE = 0, RL_ON_ERROR_PASSTHROUGH = 1 };

/* A GET or HEAD with a body: answered 400, or passed to the server. */
enum rl_get_body { RL_GET_BODY_REFUSE = 0, RL_GET_BODY_PASS = 1 };

/* headers_on: which answers carry the `headers` fields */
enum rl_headers_on { RL_HEADERS_ON_DENIED = 0, RL_HEADERS_ON_ALL = 1 };

/* count_status: a bit per status 100..599 */
#define RL_STATUS_MIN 100
#define RL_STATUS_MAX 599
#define RL_STATUS_WORDS ((RL_STATUS_MAX - RL_STATUS_MIN) / 64 + 1)

enum rl_match {
	RL_MATCH_REQUEST = 0, /* METHOD PATH, either may be a wildcard */
	RL_MATCH_ACCEPT = 1,  /* new connections, at accept() */
};

enum rl_key_kind {
	RL_KEY_IP = 0,     /* client address at ipv4_prefix/ipv6_prefix */
	RL_KEY_HEADER = 1, /* value of a request header (API key) */
	RL_KEY_GLOBAL = 2, /* one bucket for everybody */
	RL_KEY_COOKIE = 3, /* value of a cookie (a session) */
	RL_KEY_JWT = 4,    /* a claim of the Authorization: Bearer JWT */
};

#define RL_JWT_SECRET_MAX 256 /* bytes of a jwt_secret file's key */
#define RL_DENY_BODY_MAX 4096 /* bytes of a deny_html or deny_json file */
/* The 429's bodies (rl_rule_cfg.deny_body): for a client that prefers
 * text/html (a browser), and for the others. */
enum rl_deny_body { RL_BODY_JSON = 0, RL_BODY_HTML = 1 };
#define RL_JWT_KEYS_MAX 4     /* distinct jwt:CLAIM and secret pairs: each
				 one decode a request */

enum rl_store_down { RL_STORE_DOWN_OPEN = 0, RL_STORE_DOWN_CLOSED = 1 };

/* sync: how a rule is one limit across hosts, with [redis] */
enum rl_sync { RL_SYNC_ASYNC = 0, RL_SYNC_STRICT = 1 };

enum rl_xdp_mode { RL_XDP_AUTO = 0, RL_XDP_NATIVE = 1, RL_XDP_GENERIC = 2 };

struct rl_plan {
	char name[RL_RULE_NAME_MAX];
	struct rl_rate rate;
};

struct rl_rule_cfg {
	char name[RL_RULE_NAME_MAX];  /* from [limit:NAME] */
	int line;                     /* line of the section header */

	enum rl_match match;
	char method[16];              /* "" matches any method */
	char path[RL_PATH_MAX];       /* "" matches any path */
	bool path_prefix;             /* PATH ended in '*' (stripped) */
	/* The bytes of path a request's path starts with: a prefix's all, an
	 * exact path's without its trailing slashes ("/" stays "/"). */
	uint16_t path_len;
	/* An exact path whose last segment names an index file ("index",
	 * "index.EXT"): its directory's length as path_len counts it ("/a"
	 * of "/a/index.php", "/" of "/index.php"), which servers run it for;
	 * else 0. */
	uint16_t path_dir_len;

	struct rl_rate rate;          /* burst defaults to rate.count */
	enum rl_algorithm algorithm;
	enum rl_key_kind key;
	/* key = header:NAME, cookie:NAME, jwt:CLAIM: the NAME or CLAIM */
	char header[RL_HEADER_NAME_MAX];
	/* jwt_secret = FILE: the HS256 key, read when the file is loaded
	 * (0 bytes: the claim is read unverified) */
	uint16_t jwt_secret_len;
	uint8_t jwt_secret[RL_JWT_SECRET_MAX];
	/* key = jwt:CLAIM: its claim and secret's slot among the distinct
	 * ones (0..RL_JWT_KEYS_MAX-1, in the file's order; rules that read
	 * the same key share it), decoded once a request */
	uint8_t jwt_slot;
	/* deny_json = FILE, deny_html = FILE: the 429's body instead of the
	 * built-in one, by enum rl_deny_body (NULL: the built-in), read when
	 * the file is loaded, freed by rl_config_free */
	char *deny_body[2];
	uint16_t deny_body_len[2];
	enum rl_store_down on_store_down;
	enum rl_sync sync;
	/* count_status: only answers with these statuses are charged (none
	 * set: every request is) */
	bool count_status_on;
	uint64_t count_status[RL_STATUS_WORDS];

	unsigned nplans;
	struct rl_plan plans[RL_MAX_PLANS];

	/* bans, fail2ban's vocabulary; maxretry 0 = never ban */
	uint32_t maxretry;
	uint64_t findtime_ns;
	uint64_t bantime_ns;
	bool bantime_increment;       /* double per repeat offence ... */
	uint64_t bantime_max_ns;      /* ... up to this */
};

struct rl_config {
	/* where it came from: the file, or "" for the built-in default */
	char source[RL_PATH_MAX];

	/* [global] */
	unsigned nports;              /* 0: every accepted TCP connection */
	uint16_t ports[RL_MAX_PORTS];
	char shm[RL_SHM_NAME_MAX];
	uint32_t capacity;
	enum rl_mode mode;
	enum rl_headers headers;
	enum rl_headers_on headers_on;
	enum rl_get_body get_body;
	struct rl_cidr_set allow;
	struct rl_cidr_set trusted_proxies;
	char client_ip_header[RL_HEADER_NAME_MAX];
	bool proxy_protocol;
	uint8_t ipv4_prefix;
	uint8_t ipv6_prefix;
	enum rl_on_error on_error;
	enum rl_log_target log;
	enum rl_log_level log_level;

	/* [redis] */
	bool redis;
	char redis_url[RL_URL_MAX];
	uint64_t redis_timeout_ns;
	uint64_t sync_interval_ns;
	char redis_prefix[RL_SHM_NAME_MAX];

	/* [xdp] */
	bool xdp;
	unsigned nifaces;
	char ifaces[RL_MAX_IFACES][16];
	enum rl_xdp_mode xdp_mode;

	/* [limit:*], in file order */
	unsigned nrules;
	struct rl_rule_cfg rules[RL_MAX_RULES];

	/* what loads but is likely not meant ("allow = 10.0.0.1/8"), each
	 * `file:line: warning: message`, the first RL_CONFIG_WARN_MAX;
	 * nwarnings counts them all */
	unsigned nwarnings;
	char warnings[RL_CONFIG_WARN_MAX][RL_ERR_MAX];
};

/*
 * Parse the file at `path`. On success *out is a new configuration (free
 * with rl_config_free) and 0 is returned. On error, -EINVAL (content),
 * -ENOENT/-EACCES/... (the file itself) is returned and `err` holds one line
 * `path:line: message` (or `path: message` when no line applies).
 */
int rl_config_load(const char *path, struct rl_config **out, struct rl_err *err);

#define RL_SHM_DEFAULT "rlshim"
#define RL_MAX_KEY_HEADERS 8 /* distinct header names requests are parsed
				for: key headers and client_ip_header */
#define RL_CONFIG_FILE_MAX (1u << 20)

/* The whole file at `path` in *text (NUL-terminated, freed by
 * rl_config_text_free: not malloc's, mem.h), its length in *len. Returns 0, or a negative errno with `path: reason` in
 * `err`. */
int rl_config_read(const char *path, char **text, size_t *len, struct rl_err *err);

/* As rl_config_load, from text in memory; `name` stands for the path in
 * messages. */
int rl_config_parse(const char *text, const char *name,
		    struct rl_config **out, struct rl_err *err);

/*
 * The built-in default: one rule "default", 60/m per client IP, every
 * request on every accepted TCP connection, local only.
 */
int rl_config_default(struct rl_config **out);

/* The file to use: $RLSHIM_CONFIG if set and non-empty (now, or when
 * rl_config_remember_env() ran), else /etc/rlshim.conf if it exists, else
 * NULL (use the default). */
const char *rl_config_path(void);

/*
 * Note $RLSHIM_CONFIG now. The shim calls it when it is loaded: a server
 * may clear its environment before its workers accept (nginx keeps only
 * TZ unless told otherwise with `env`), but the workers still run the
 * master's configuration.
 */
void rl_config_remember_env(void);

/*
 * May `next` replace a configuration in force (a reload)? 0 if so, else
 * -EINVAL with the reason in `err`: a file with no rule at all is refused,
 * being far more likely caught half-written than meant (mode = dry-run
 * lifts every limit on purpose).
 */
int rl_config_reload_ok(const struct rl_config *next, struct rl_err *err);

/*
 * `rlshimctl check`: the file at `path` read and parsed as a reload reads
 * it (rl_config_read, rl_config_parse), then rl_config_reload_ok, so that
 * check refuses exactly what a reload refuses. Returns 0 with *out set, or
 * a negative errno with `file:line: message` in `err`.
 */
int rl_config_check(const char *path, struct rl_config **out, struct rl_err *err);

/*
 * Claim every rule of `c` in the segment `t` (rl_table_rule_claim): rule
 * i's id in ids[i]. Returns 0, or a negative errno with a one-line reason
 * naming the rule in `err`. Nothing changes for this process's decisions
 * until rl_config_use() puts the rules' rates in force.
 */
int rl_config_register(const struct rl_config *c, struct rl_table *t,
		       unsigned ids[RL_MAX_RULES], struct rl_err *err);
int rl_config_use(const struct rl_config *c, struct rl_table *t,
		  const unsigned ids[RL_MAX_RULES], struct rl_err *err);

/* The prefix an `ip` rule keys a client of `a`'s family at. */
unsigned rl_config_ip_prefix(const struct rl_config *c, const struct rl_addr *a);

/* The bytes an `ip` rule keys client `a` by: its address at the prefix
 * (rl_addr_key), 5 or 17 bytes into `out`. Returns the length. */
size_t rl_config_ip_key(const struct rl_config *c, const struct rl_addr *a,
			uint8_t out[17]);

/*
 * The bytes the shim decides rule `r`'s key by, from the text the store
 * names it by (the agent's rl_agent_key_text, inverted): an address parsed
 * and masked to the prefix (into `buf`), a header value as it is, "" for
 * `*`. Returns them, their length in *len, or NULL for a text no request
 * could key the rule by: not an address, empty, or longer than RL_KEY_MAX
 * (the store names such a header value by a digest, whose value cannot be
 * had back).
 */
const void *rl_config_key_of_text(const struct rl_config *c,
				  const struct rl_rule_cfg *r, const char *text,
				  size_t tlen, uint8_t buf[17], size_t *len);

/* 1 if `port` is guarded by `c` (no ports = every port). */
int rl_config_guards(const struct rl_config *c, uint16_t port);

/*
 * What the file at `path` is now, in 64 bits (device, inode, size and
 * modification time, hashed): a change means the file was edited or
 * replaced. 1 for NULL (the built-in default), 0 if it cannot be stat'ed.
 * Every process computes the same stamp for the same file, so the segment
 * can record which configuration is in force.
 */
uint64_t rl_config_stamp(const char *path);

void rl_config_free(struct rl_config *c);

/* Free the text of rl_config_read (and rl_kept_config). NULL: nothing. */
void rl_config_text_free(char *text);

/*
 * What a store outage does, for the lines that say it (the agent's "store
 * unreachable", the servers' echo of it): ` refusing="A,B"
 * local_share="C"`, the rules with on_store_down = closed, which answer
 * 429 meanwhile, and those that decide on this host's share ("none" for
 * none). "" if the names do not fit in `len`: said by neither.
 */
void rl_config_store_impact(const struct rl_config *cfg, char *buf,
			    size_t len);

/* Names for the enums, as the file spells them. */
const char *rl_config_algorithm_name(enum rl_algorithm a);
const char *rl_config_headers_name(enum rl_headers h);

/* 1 if rule `r` charges an answer of `status` (a rule without
 * count_status charges every request, answered or not). */
static inline int rl_rule_charges(const struct rl_rule_cfg *r, unsigned status)
{
	unsigned b = status - RL_STATUS_MIN;

	if (!r->count_status_on)
		return 1;
	return status >= RL_STATUS_MIN && status <= RL_STATUS_MAX &&
	       (r->count_status[b / 64] >> (b % 64) & 1);
}

/* The request header a rule's key is read from: header:NAME's NAME,
 * "Cookie", "Authorization"; NULL for ip and global keys. */
const char *rl_config_key_header(const struct rl_rule_cfg *r);

/* Two key = jwt:CLAIM rules read the same key: same claim, same secret
 * (or none). */
bool rl_config_same_jwt(const struct rl_rule_cfg *a, const struct rl_rule_cfg *b);

/* "ip", "header", "cookie", "jwt" or "global": key = KIND[:NAME]. */
const char *rl_config_key_kind(const struct rl_rule_cfg *r);

#endif /* RL_CONFIG_H */
