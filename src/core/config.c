/* SPDX-License-Identifier: MIT */
/*
 * config.c - rlshim.conf into an immutable struct rl_config.
 *
 * libinih splits lines into sections and `key = value` pairs (stripping
 * whitespace and " ;" comments); every meaning is ours. inih is driven
 * through ini_parse_stream() with our own line reader, which sees each raw
 * line before inih does. The reader
 *
 *   - counts lines, so every message can say `file:line:` (the handler that
 *     inih calls has no line number);
 *   - refuses over-long lines itself, instead of letting inih cut them;
 *   - handles `[section]` headers, so a duplicate or unknown section is
 *     reported at its own line even when it holds no key;
 *   - mirrors inih's rule for continuation lines (Debian builds inih with
 *     INI_ALLOW_MULTILINE: an indented line after a key continues that key),
 *     so the handler knows a new key from a continued one.
 *
 * Keys are one table of {section, name, type, field}. Checks that involve
 * several keys run when their section ends, at the line of the offending
 * key. The first error found is the one reported.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <ini.h>

#include "hash.h"
#include "path.h"
#include "sys.h"
#include "table.h"
#include "time.h"

#define LINE_MAX_BYTES 1024          /* longest line, without its newline */
#define QUOTE_MAX 100                /* longest value quoted in a message */
#define GCRA_SPAN_MAX (1ull << 62)   /* burst * emission interval, ns */
#define METHOD_MAX 15                /* sizeof(rule.method) - 1 */
#define IFACE_MAX 15                 /* IFNAMSIZ - 1 */
#define NS_PER_MIN (60 * RL_NS_PER_SEC)
#define NS_PER_DAY (86400 * RL_NS_PER_SEC)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- parser state ---- */

enum sec_kind {
	SEC_NONE = 0, /* before the first header */
	SEC_GLOBAL,
	SEC_REDIS,
	SEC_XDP,
	SEC_LIMIT,
	SEC_BAD,      /* invalid header, already reported: keys are ignored */
};

struct key_def;

struct parser {
	struct rl_config *cfg;
	const char *name;             /* the path, for messages */

	/* input: a FILE or a NUL-terminated string */
	FILE *file;
	const char *text;
	int io_err;                   /* errno of a failed read */

	/* the current line, as read */
	int lineno;
	bool cont;                    /* continues the previous key */
	bool have_key;                /* inih's prev_name is set */
	char line[LINE_MAX_BYTES + 1];

	/* the current section */
	enum sec_kind sec;
	int sec_line;
	char sec_text[48];            /* "limit:sms", for messages */
	struct rl_rule_cfg *rule;     /* SEC_LIMIT */
	const struct key_def *key;    /* the key being parsed (NULL: ignore) */
	int *key_line;                /* per key_def: line it was given, 0 */
	uint32_t burst;               /* given burst, applied at section end */

	/* sections seen once */
	int global_line, redis_line, xdp_line;

	/* [global] facts checked at the end */
	int proxy_protocol_line;
	bool allow_none, trusted_none;

	/* the first error */
	int err_line;
	char err[RL_ERR_MAX];
};

/*
 * Keep the first error found. Lines are read in order and a section's
 * cross-key checks run when the section ends, so this is the first problem
 * in the file, except that a key's own error beats a check of its section
 * ("rat = 3/m" is reported, not the rate that is then missing).
 */
__attribute__((format(printf, 3, 4)))
static void perr_at(struct parser *p, int line, const char *fmt, ...)
{
	va_list ap;

	if (p->err_line)
		return;
	p->err_line = line;
	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
}

#define perr(p, ...) perr_at((p), (p)->lineno, __VA_ARGS__)

/* ---- character classes and small parsers ---- */

static bool is_space(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

/* RFC 9110 tchar: the characters of a method or a header field name. */
static bool is_tchar(int c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_token(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!is_tchar((unsigned char)s[i]))
			return false;
	}
	return true;
}

/* Rule, plan and segment names: [A-Za-z0-9_.-]. */
static bool is_name(const char *s, size_t len, size_t max)
{
	if (len == 0 || len > max)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return false;
	}
	return true;
}

/*
 * inih's inline comment: a ';' after whitespace. Returns the first of
 * `chars` or of such a comment, or the end of the string.
 */
static const char *find_or_comment(const char *s, const char *chars)
{
	bool was_space = false;

	for (; *s; s++) {
		if (strchr(chars, *s) || (was_space && *s == ';'))
			break;
		was_space = is_space((unsigned char)*s);
	}
	return s;
}

/* Decimal digits only: no sign, no space. Returns 0, -EINVAL or -ERANGE. */
static int parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(s[i] - '0'), &v))
			return -ERANGE;
	}
	*out = v;
	return 0;
}

/*
 * The next item of a list separated by spaces, tabs or commas, or NULL at
 * the end. *sp advances past it.
 */
static const char *next_item(const char **sp, size_t *len)
{
	const char *s = *sp, *start;

	while (*s == ' ' || *s == '\t' || *s == ',')
		s++;
	if (!*s)
		return NULL;
	start = s;
	while (*s && *s != ' ' && *s != '\t' && *s != ',')
		s++;
	*len = (size_t)(s - start);
	*sp = s;
	return start;
}

/* 1 when burst * (period / count) leaves no room to add a clock to it. */
static bool gcra_too_large(const struct rl_rate *r)
{
	uint64_t span;

	return __builtin_mul_overflow(r->period_ns / r->count,
				      (uint64_t)r->burst, &span) ||
	       span >= GCRA_SPAN_MAX;
}

static const char rate_expected[] = "expected N/s, N/m, N/h or N/d";

/* ---- key types ---- */

struct choice {
	const char *name;
	int value;
};

struct choices {
	const char *expected;         /* for the message */
	struct choice c[9];           /* ends with a NULL name */
};

static const struct choices bool_choices = {
	"on or off",
	{ { "on", 1 }, { "off", 0 }, { "yes", 1 }, { "no", 0 },
	  { "true", 1 }, { "false", 0 }, { "1", 1 }, { "0", 0 } },
};

static const struct choices mode_choices = {
	"enforce or dry-run",
	{ { "enforce", RL_MODE_ENFORCE }, { "dry-run", RL_MODE_DRY_RUN } },
};

static const struct choices headers_choices = {
	"ratelimit, ietf, x-ratelimit or none",
	{ { "ratelimit", RL_HEADERS_RATELIMIT }, { "ietf", RL_HEADERS_IETF },
	  { "x-ratelimit", RL_HEADERS_XRATELIMIT },
	  { "none", RL_HEADERS_NONE } },
};

static const struct choices get_body_choices = {
	"refuse or pass",
	{ { "refuse", RL_GET_BODY_REFUSE }, { "pass", RL_GET_BODY_PASS } },
};

static const struct choices on_error_choices = {
	"refuse or passthrough",
	{ { "refuse", RL_ON_ERROR_REFUSE },
	  { "passthrough", RL_ON_ERROR_PASSTHROUGH } },
};

static const struct choices log_choices = {
	"stderr or syslog",
	{ { "stderr", RL_LOG_STDERR }, { "syslog", RL_LOG_SYSLOG } },
};

static const struct choices log_level_choices = {
	"error, warn, info or debug",
	{ { "error", RL_LOG_ERROR }, { "warn", RL_LOG_WARN },
	  { "info", RL_LOG_INFO }, { "debug", RL_LOG_DEBUG } },
};

static const struct choices xdp_mode_choices = {
	"native, generic or auto",
	{ { "native", RL_XDP_NATIVE }, { "generic", RL_XDP_GENERIC },
	  { "auto", RL_XDP_AUTO } },
};

static const struct choices algorithm_choices = {
	"token-bucket, fixed-window or sliding-window",
	{ { "token-bucket", RL_ALGO_GCRA },
	  { "fixed-window", RL_ALGO_FIXED_WINDOW },
	  { "sliding-window", RL_ALGO_SLIDING_WINDOW } },
};

static const struct choices store_down_choices = {
	"open or closed",
	{ { "open", RL_STORE_DOWN_OPEN }, { "closed", RL_STORE_DOWN_CLOSED } },
};

/* V_CHOICE stores through an int pointer. */
_Static_assert(sizeof(enum rl_mode) == sizeof(int) &&
	       sizeof(enum rl_algorithm) == sizeof(int) &&
	       sizeof(enum rl_get_body) == sizeof(int),
	       "enums are int-sized");

enum val_type {
	V_FN,       /* fn(p, value) does everything */
	V_CHOICE,   /* an enum (int-sized) from `choices` */
	V_BOOL,     /* a bool from bool_choices */
	V_UINT,     /* min..max into a field of `size` bytes */
	V_DURATION, /* min..max nanoseconds into a uint64_t */
};

struct key_def {
	enum sec_kind sec;
	const char *name;
	enum val_type type;
	size_t off;                   /* in rl_config, or rl_rule_cfg (SEC_LIMIT) */
	size_t size;
	uint64_t min, max;
	const struct choices *choices;
	int (*fn)(struct parser *p, const char *v);
	bool list;                    /* continuation lines append */
};

/* ---- scalar values ---- */

static void *field(struct parser *p, const struct key_def *k)
{
	char *base = k->sec == SEC_LIMIT ? (char *)p->rule : (char *)p->cfg;

	return base + k->off;
}

static int bad_value(struct parser *p, const char *v, const char *expected)
{
	perr(p, "bad %s '%.*s' (%s)", p->key->name, QUOTE_MAX, v, expected);
	return -EINVAL;
}

static int set_choice(struct parser *p, const char *v)
{
	const struct key_def *k = p->key;
	const struct choices *ch = k->type == V_BOOL ? &bool_choices :
						       k->choices;
	char expected[96];

	for (const struct choice *c = ch->c; c->name; c++) {
		if (strcmp(c->name, v) != 0)
			continue;
		if (k->type == V_BOOL)
			*(bool *)field(p, k) = c->value;
		else
			*(int *)field(p, k) = c->value;
		return 0;
	}
	snprintf(expected, sizeof(expected), "expected %s", ch->expected);
	return bad_value(p, v, expected);
}

static int set_uint(struct parser *p, const char *v)
{
	const struct key_def *k = p->key;
	char expected[64];
	uint64_t n;

	if (parse_u64(v, strlen(v), &n) || n < k->min || n > k->max) {
		snprintf(expected, sizeof(expected), "expected %llu..%llu",
			 (unsigned long long)k->min,
			 (unsigned long long)k->max);
		return bad_value(p, v, expected);
	}
	switch (k->size) {
	case 1:
		*(uint8_t *)field(p, k) = (uint8_t)n;
		break;
	case 2:
		*(uint16_t *)field(p, k) = (uint16_t)n;
		break;
	case 4:
		*(uint32_t *)field(p, k) = (uint32_t)n;
		break;
	default:
		*(uint64_t *)field(p, k) = n;
		break;
	}
	return 0;
}

static int set_duration(struct parser *p, const char *v)
{
	const struct key_def *k = p->key;
	char expected[80], lo[24], hi[24];
	uint64_t ns;
	int err;

	err = rl_time_parse_duration(v, &ns);
	if (err == -ERANGE)
		return bad_value(p, v, "too large");
	if (err)
		return bad_value(p, v,
				 "expected a duration: 100ms, 30s, 10m, 1h or 1d");
	if (ns < k->min || ns > k->max) {
		rl_time_format_duration(lo, sizeof(lo), k->min);
		rl_time_format_duration(hi, sizeof(hi), k->max);
		if (k->min == 1 && k->max == UINT64_MAX)
			snprintf(expected, sizeof(expected),
				 "expected a duration above 0");
		else if (k->max == UINT64_MAX)
			snprintf(expected, sizeof(expected),
				 "expected at least %s", lo);
		else
			snprintf(expected, sizeof(expected),
				 "expected %s..%s", lo, hi);
		return bad_value(p, v, expected);
	}
	*(uint64_t *)field(p, k) = ns;
	return 0;
}

/* Copy `v` into a char array field that is known to be large enough. */
static void set_text(char *dst, size_t size, const char *v, size_t len)
{
	if (len >= size)
		len = size - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

/* ---- [global] ---- */

static int parse_ports(struct parser *p, const char *v)
{
	struct rl_config *c = p->cfg;
	const char *item;
	uint64_t port;
	size_t len;

	while ((item = next_item(&v, &len))) {
		if (parse_u64(item, len, &port) || port < 1 || port > 65535) {
			perr(p, "bad port '%.*s' (expected 1..65535)",
			     (int)(len < QUOTE_MAX ? len : QUOTE_MAX), item);
			return -EINVAL;
		}
		for (unsigned i = 0; i < c->nports; i++) {
			if (c->ports[i] == port) {
				perr(p, "duplicate port %u", (unsigned)port);
				return -EINVAL;
			}
		}
		if (c->nports == RL_MAX_PORTS) {
			perr(p, "too many ports (max %d)", RL_MAX_PORTS);
			return -EINVAL;
		}
		c->ports[c->nports++] = (uint16_t)port;
	}
	return 0;
}

static int parse_shm(struct parser *p, const char *v)
{
	size_t len = strlen(v);

	if (!is_name(v, len, RL_SHM_NAME_MAX - 1) || v[0] == '.')
		return bad_value(p, v, "expected 1..63 of A-Z a-z 0-9 _ . -, "
				       "not starting with '.'");
	set_text(p->cfg->shm, sizeof(p->cfg->shm), v, len);
	return 0;
}

/* A CIDR list; `none` alone means empty. */
static int parse_cidrs(struct parser *p, const char *v,
		       struct rl_cidr_set *set, bool *none)
{
	struct rl_cidr cidr;
	const char *item;
	size_t len;

	while ((item = next_item(&v, &len))) {
		if (len == 4 && memcmp(item, "none", 4) == 0) {
			if (set->n || *none)
				goto only_none;
			*none = true;
			continue;
		}
		if (*none)
			goto only_none;
		if (rl_cidr_parse(item, len, &cidr)) {
			perr(p, "bad %s '%.*s' (expected ADDRESS[/PREFIX] items or none)",
			     p->key->name,
			     (int)(len < QUOTE_MAX ? len : QUOTE_MAX), item);
			return -EINVAL;
		}
		if (rl_cidr_set_add(set, &cidr)) {
			perr(p, "too many prefixes in %s (max %d)",
			     p->key->name, RL_CIDR_SET_MAX);
			return -EINVAL;
		}
	}
	return 0;

only_none:
	perr(p, "'none' must be the only item of %s", p->key->name);
	return -EINVAL;
}

static int parse_allow(struct parser *p, const char *v)
{
	return parse_cidrs(p, v, &p->cfg->allow, &p->allow_none);
}

static int parse_trusted(struct parser *p, const char *v)
{
	return parse_cidrs(p, v, &p->cfg->trusted_proxies, &p->trusted_none);
}

static int parse_client_ip_header(struct parser *p, const char *v)
{
	size_t len = strlen(v);

	if (!is_token(v, len) || len >= RL_HEADER_NAME_MAX)
		return bad_value(p, v, "expected a header field name");
	set_text(p->cfg->client_ip_header, RL_HEADER_NAME_MAX, v, len);
	return 0;
}

static int parse_proxy_protocol(struct parser *p, const char *v)
{
	p->proxy_protocol_line = p->lineno;
	return set_choice(p, v);
}

/* ---- [redis] ---- */

/* host[:port] or [v6]:port, up to `end`. */
static bool valid_host_port(const char *s, const char *end)
{
	const char *colon;
	uint64_t port;

	if (s < end && *s == '[') {
		const char *close = memchr(s, ']', (size_t)(end - s));

		if (!close || close == s + 1)
			return false;
		colon = close + 1;
		if (colon == end)
			return true;
		if (*colon != ':')
			return false;
	} else {
		colon = memchr(s, ':', (size_t)(end - s));
		if (!colon)
			return s < end;
		if (colon == s)
			return false;
	}
	return !parse_u64(colon + 1, (size_t)(end - colon - 1), &port) &&
	       port >= 1 && port <= 65535;
}

/*
 * redis://[user:pass@]host[:port][/db] or unix:///path. The text is kept
 * verbatim for the agent; only its shape is checked here.
 */
static int parse_url(struct parser *p, const char *v)
{
	static const char expected[] =
		"expected redis://[user:pass@]host[:port][/db] or unix:///path";
	size_t len = strlen(v);
	const char *host, *end, *at;
	uint64_t db;

	if (len >= RL_URL_MAX) {
		perr(p, "url too long (max %d bytes)", RL_URL_MAX - 1);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)v[i];

		if (ch <= ' ' || ch == 0x7f)
			return bad_value(p, v, expected);
	}
	if (strncmp(v, "unix://", 7) == 0) {
		if (v[7] != '/' || v[8] == '\0')
			return bad_value(p, v, expected);
	} else if (strncmp(v, "redis://", 8) == 0) {
		host = v + 8;
		end = strchr(host, '/');
		at = strrchr(host, '@');
		if (at && (!end || at < end)) {
			host = at + 1;
			end = strchr(host, '/');
		}
		if (!end)
			end = v + len;
		if (!valid_host_port(host, end))
			return bad_value(p, v, expected);
		if (*end == '/' && end[1] &&
		    (parse_u64(end + 1, strlen(end + 1), &db) || db > 65535))
			return bad_value(p, v, expected);
	} else {
		return bad_value(p, v, expected);
	}
	memcpy(p->cfg->redis_url, v, len + 1);
	return 0;
}

static int parse_prefix(struct parser *p, const char *v)
{
	size_t len = strlen(v);
	bool ok = len < RL_SHM_NAME_MAX;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c <= ' ' || c >= 0x7f)
			ok = false;
	}
	if (!ok)
		return bad_value(p, v, "expected at most 63 printable characters "
				       "and no spaces");
	set_text(p->cfg->redis_prefix, RL_SHM_NAME_MAX, v, len);
	return 0;
}

/* ---- [xdp] ---- */

/* As the kernel's dev_valid_name(): 1..15 bytes, no '/', ':' or space. */
static bool valid_ifname(const char *s, size_t len)
{
	if (len == 0 || len > IFACE_MAX)
		return false;
	if ((len == 1 && s[0] == '.') || (len == 2 && !memcmp(s, "..", 2)))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '/' || c == ':' || c <= ' ' || c == 0x7f)
			return false;
	}
	return true;
}

static int parse_interfaces(struct parser *p, const char *v)
{
	struct rl_config *c = p->cfg;
	const char *item;
	size_t len;

	while ((item = next_item(&v, &len))) {
		int q = (int)(len < QUOTE_MAX ? len : QUOTE_MAX);

		if (!valid_ifname(item, len)) {
			perr(p, "bad interface '%.*s' (expected 1..15 characters, "
				"no '/' or ':')", q, item);
			return -EINVAL;
		}
		for (unsigned i = 0; i < c->nifaces; i++) {
			if (strlen(c->ifaces[i]) == len &&
			    !memcmp(c->ifaces[i], item, len)) {
				perr(p, "duplicate interface '%.*s'", q, item);
				return -EINVAL;
			}
		}
		if (c->nifaces == RL_MAX_IFACES) {
			perr(p, "too many interfaces (max %d)", RL_MAX_IFACES);
			return -EINVAL;
		}
		set_text(c->ifaces[c->nifaces++], sizeof(c->ifaces[0]), item,
			 len);
	}
	return 0;
}

/* ---- [limit:NAME] ---- */

static int bad_match(struct parser *p, const char *v, const char *why)
{
	perr(p, "bad match '%.*s' (%s)", QUOTE_MAX, v, why);
	return -EINVAL;
}

/* `*`, `accept`, or `METHOD PATH` (either may be `*`). */
static int parse_match(struct parser *p, const char *v)
{
	struct rl_rule_cfg *r = p->rule;
	const char *m, *path, *rest;
	size_t mlen, plen;
	bool prefix = false;

	r->match = RL_MATCH_REQUEST;
	r->method[0] = '\0';
	r->path[0] = '\0';
	r->path_prefix = false;
	if (strcmp(v, "accept") == 0) {
		r->match = RL_MATCH_ACCEPT;
		return 0;
	}
	if (strcmp(v, "*") == 0)
		return 0;

	m = v;
	mlen = strcspn(m, " \t");
	path = m + mlen + strspn(m + mlen, " \t");
	plen = strcspn(path, " \t");
	rest = path + plen + strspn(path + plen, " \t");
	if (mlen == 0 || plen == 0 || *rest)
		return bad_match(p, v, "expected *, accept or METHOD PATH");

	if (!(mlen == 1 && m[0] == '*')) {
		if (!is_token(m, mlen) || mlen > METHOD_MAX)
			return bad_match(p, v, "METHOD must be * or a token of "
					       "at most 15 characters");
		set_text(r->method, sizeof(r->method), m, mlen);
	}

	if (plen == 1 && path[0] == '*')
		return 0;
	if (path[0] != '/')
		return bad_match(p, v, "PATH must be * or start with '/'");
	if (path[plen - 1] == '*') {
		prefix = true;
		plen--;
	}
	for (size_t i = 0; i < plen; i++) {
		unsigned char c = (unsigned char)path[i];

		if (c < 0x20 || c == 0x7f || c == '?' || c == '#')
			return bad_match(p, v, "PATH has no query, fragment "
					       "or control characters");
		if (c == '*')
			return bad_match(p, v, "'*' only at the end of PATH");
	}
	if (plen >= RL_PATH_MAX)
		return bad_match(p, v, "PATH longer than 255 bytes");
	{
		/* Written as requests will be matched: "/a//b", "/%73ms"
		 * and "/a/../b" mean what they will be normalised to. */
		uint32_t nlen;
		uint8_t cut;

		if (rl_path_normalize(path, plen, r->path, sizeof(r->path),
				      &nlen, &cut) || cut)
			return bad_match(p, v, "PATH has bad percent-encoding");
	}
	r->path_prefix = prefix;
	return 0;
}

static int parse_rate(struct parser *p, const char *v)
{
	int err = rl_time_parse_rate(v, &p->rule->rate);

	if (err == -ERANGE) {
		perr(p, "rate too large");
		return err;
	}
	if (err)
		return bad_value(p, v, rate_expected);
	return 0;
}

static int parse_burst(struct parser *p, const char *v)
{
	uint64_t n;

	if (parse_u64(v, strlen(v), &n) || n < 1 || n > UINT32_MAX)
		return bad_value(p, v, "expected 1..4294967295");
	p->burst = (uint32_t)n;
	return 0;
}

static int parse_key(struct parser *p, const char *v)
{
	struct rl_rule_cfg *r = p->rule;

	if (strcmp(v, "ip") == 0) {
		r->key = RL_KEY_IP;
	} else if (strcmp(v, "global") == 0) {
		r->key = RL_KEY_GLOBAL;
	} else if (strncmp(v, "header:", 7) == 0 &&
		   is_token(v + 7, strlen(v + 7)) &&
		   strlen(v + 7) < RL_HEADER_NAME_MAX) {
		r->key = RL_KEY_HEADER;
		set_text(r->header, sizeof(r->header), v + 7, strlen(v + 7));
	} else {
		return bad_value(p, v, "expected ip, global or header:NAME");
	}
	return 0;
}

/* `name:RATE` items. */
static int parse_plans(struct parser *p, const char *v)
{
	struct rl_rule_cfg *r = p->rule;
	char rate[64];
	const char *item, *colon;
	size_t len, nlen;
	int q, err;

	while ((item = next_item(&v, &len))) {
		q = (int)(len < QUOTE_MAX ? len : QUOTE_MAX);
		colon = memchr(item, ':', len);
		nlen = colon ? (size_t)(colon - item) : len;
		if (!colon || !is_name(item, nlen, RL_RULE_NAME_MAX - 1) ||
		    len - nlen - 1 >= sizeof(rate)) {
			perr(p, "bad plan '%.*s' (expected NAME:RATE, e.g. free:100/h)",
			     q, item);
			return -EINVAL;
		}
		for (unsigned i = 0; i < r->nplans; i++) {
			if (strlen(r->plans[i].name) == nlen &&
			    !memcmp(r->plans[i].name, item, nlen)) {
				perr(p, "duplicate plan '%.*s'", (int)nlen, item);
				return -EINVAL;
			}
		}
		if (r->nplans == RL_MAX_PLANS) {
			perr(p, "too many plans (max %d)", RL_MAX_PLANS);
			return -EINVAL;
		}
		set_text(rate, sizeof(rate), colon + 1, len - nlen - 1);
		err = rl_time_parse_rate(rate, &r->plans[r->nplans].rate);
		if (err == -ERANGE) {
			perr(p, "rate too large");
			return err;
		}
		if (err) {
			perr(p, "bad plan '%.*s' (%s)", q, item, rate_expected);
			return err;
		}
		set_text(r->plans[r->nplans].name, RL_RULE_NAME_MAX, item, nlen);
		r->nplans++;
	}
	return 0;
}

/* ---- the key table ---- */

#define CFG(f) .off = offsetof(struct rl_config, f), \
	       .size = sizeof(((struct rl_config *)0)->f)
#define RULE(f) .off = offsetof(struct rl_rule_cfg, f), \
		.size = sizeof(((struct rl_rule_cfg *)0)->f)

static const struct key_def keys[] = {
	{ SEC_GLOBAL, "ports", V_FN, .fn = parse_ports, .list = true },
	{ SEC_GLOBAL, "shm", V_FN, .fn = parse_shm },
	{ SEC_GLOBAL, "capacity", V_UINT, CFG(capacity),
	  .min = RL_CAPACITY_MIN, .max = RL_CAPACITY_MAX },
	{ SEC_GLOBAL, "mode", V_CHOICE, CFG(mode), .choices = &mode_choices },
	{ SEC_GLOBAL, "headers", V_CHOICE, CFG(headers),
	  .choices = &headers_choices },
	{ SEC_GLOBAL, "get_body", V_CHOICE, CFG(get_body),
	  .choices = &get_body_choices },
	{ SEC_GLOBAL, "allow", V_FN, .fn = parse_allow, .list = true },
	{ SEC_GLOBAL, "trusted_proxies", V_FN, .fn = parse_trusted,
	  .list = true },
	{ SEC_GLOBAL, "client_ip_header", V_FN, .fn = parse_client_ip_header },
	{ SEC_GLOBAL, "proxy_protocol", V_BOOL, CFG(proxy_protocol),
	  .fn = parse_proxy_protocol },
	{ SEC_GLOBAL, "ipv4_prefix", V_UINT, CFG(ipv4_prefix), .max = 32 },
	{ SEC_GLOBAL, "ipv6_prefix", V_UINT, CFG(ipv6_prefix), .max = 128 },
	{ SEC_GLOBAL, "on_error", V_CHOICE, CFG(on_error),
	  .choices = &on_error_choices },
	{ SEC_GLOBAL, "log", V_CHOICE, CFG(log), .choices = &log_choices },
	{ SEC_GLOBAL, "log_level", V_CHOICE, CFG(log_level),
	  .choices = &log_level_choices },

	{ SEC_REDIS, "url", V_FN, .fn = parse_url },
	{ SEC_REDIS, "timeout", V_DURATION, CFG(redis_timeout_ns),
	  .min = 1, .max = UINT64_MAX },
	{ SEC_REDIS, "sync_interval", V_DURATION, CFG(sync_interval_ns),
	  .min = RL_NS_PER_MS, .max = 60 * RL_NS_PER_SEC },
	{ SEC_REDIS, "prefix", V_FN, .fn = parse_prefix },

	{ SEC_XDP, "interfaces", V_FN, .fn = parse_interfaces, .list = true },
	{ SEC_XDP, "mode", V_CHOICE, CFG(xdp_mode),
	  .choices = &xdp_mode_choices },

	{ SEC_LIMIT, "match", V_FN, .fn = parse_match },
	{ SEC_LIMIT, "rate", V_FN, .fn = parse_rate },
	{ SEC_LIMIT, "burst", V_FN, .fn = parse_burst },
	{ SEC_LIMIT, "algorithm", V_CHOICE, RULE(algorithm),
	  .choices = &algorithm_choices },
	{ SEC_LIMIT, "key", V_FN, .fn = parse_key },
	{ SEC_LIMIT, "on_store_down", V_CHOICE, RULE(on_store_down),
	  .choices = &store_down_choices },
	{ SEC_LIMIT, "plans", V_FN, .fn = parse_plans, .list = true },
	{ SEC_LIMIT, "maxretry", V_UINT, RULE(maxretry), .max = 1000000 },
	{ SEC_LIMIT, "findtime", V_DURATION, RULE(findtime_ns),
	  .min = 1, .max = UINT64_MAX },
	{ SEC_LIMIT, "bantime", V_DURATION, RULE(bantime_ns),
	  .min = 1, .max = UINT64_MAX },
	{ SEC_LIMIT, "bantime_increment", V_BOOL, RULE(bantime_increment) },
	{ SEC_LIMIT, "bantime_max", V_DURATION, RULE(bantime_max_ns),
	  .min = 1, .max = UINT64_MAX },
};

#define NKEYS ARRAY_SIZE(keys)

static const struct key_def *find_key(enum sec_kind sec, const char *name)
{
	for (size_t i = 0; i < NKEYS; i++) {
		if (keys[i].sec == sec && strcmp(keys[i].name, name) == 0)
			return &keys[i];
	}
	return NULL;
}

/* The line where key `name` of the current section was given, or 0. */
static int given_at(struct parser *p, const char *name)
{
	const struct key_def *k = find_key(p->sec, name);

	return k ? p->key_line[k - keys] : 0;
}

static int apply(struct parser *p, const char *v)
{
	const struct key_def *k = p->key;

	if (k->fn)
		return k->fn(p, v);
	switch (k->type) {
	case V_CHOICE:
	case V_BOOL:
		return set_choice(p, v);
	case V_UINT:
		return set_uint(p, v);
	case V_DURATION:
		return set_duration(p, v);
	case V_FN:
		break;
	}
	return -EINVAL;
}

/* ---- sections ---- */

static void rule_defaults(struct rl_rule_cfg *r)
{
	memset(r, 0, sizeof(*r));
	r->match = RL_MATCH_REQUEST;
	r->algorithm = RL_ALGO_GCRA;
	r->key = RL_KEY_IP;
	r->on_store_down = RL_STORE_DOWN_OPEN;
	r->findtime_ns = 10 * NS_PER_MIN;
	r->bantime_ns = 10 * NS_PER_MIN;
	r->bantime_max_ns = 7 * NS_PER_DAY;
}

static void global_defaults(struct rl_config *c)
{
	snprintf(c->shm, sizeof(c->shm), "%s", RL_SHM_DEFAULT);
	c->capacity = RL_CAPACITY_DEFAULT;
	c->mode = RL_MODE_ENFORCE;
	c->headers = RL_HEADERS_RATELIMIT;
	c->get_body = RL_GET_BODY_REFUSE;
	snprintf(c->client_ip_header, sizeof(c->client_ip_header),
		 "X-Forwarded-For");
	c->ipv4_prefix = 32;
	c->ipv6_prefix = 64;
	c->on_error = RL_ON_ERROR_REFUSE;
	c->log = RL_LOG_STDERR;
	c->log_level = RL_LOG_INFO;
	snprintf(c->redis_url, sizeof(c->redis_url), "redis://127.0.0.1:6379/0");
	c->redis_timeout_ns = 100 * RL_NS_PER_MS;
	c->sync_interval_ns = 50 * RL_NS_PER_MS;
	snprintf(c->redis_prefix, sizeof(c->redis_prefix), "rlshim:");
	c->xdp_mode = RL_XDP_AUTO;
}

static void end_limit(struct parser *p)
{
	struct rl_rule_cfg *r = p->rule;
	int rate_line = given_at(p, "rate");
	int burst_line = given_at(p, "burst");
	int plans_line = given_at(p, "plans");
	int key_line = given_at(p, "key");
	int max_line = given_at(p, "bantime_max");

	if (!rate_line) {
		perr_at(p, r->line, "[limit:%s] needs a rate", r->name);
		return;
	}
	if (r->rate.count == 0)
		return; /* a bad rate, already reported */
	r->rate.burst = burst_line ? p->burst : r->rate.count;
	if (burst_line && r->algorithm != RL_ALGO_GCRA)
		perr_at(p, burst_line,
			"burst applies to algorithm = token-bucket only");
	if (gcra_too_large(&r->rate))
		perr_at(p, burst_line ? burst_line : rate_line, "rate too large");
	for (unsigned i = 0; i < r->nplans; i++) {
		if (gcra_too_large(&r->plans[i].rate))
			perr_at(p, plans_line, "rate too large");
	}
	if (r->algorithm == RL_ALGO_SLIDING_WINDOW) {
		if (r->rate.count > RL_SLIDING_MAX)
			perr_at(p, rate_line, "sliding-window allows at most "
				"%u requests per period", RL_SLIDING_MAX);
		for (unsigned i = 0; i < r->nplans; i++) {
			if (r->plans[i].rate.count > RL_SLIDING_MAX)
				perr_at(p, plans_line, "sliding-window allows "
					"at most %u requests per period",
					RL_SLIDING_MAX);
		}
	}
	if (r->key == RL_KEY_HEADER && r->match == RL_MATCH_ACCEPT)
		perr_at(p, key_line, "key = header:%s cannot be used with "
			"match = accept (no headers at accept)", r->header);
	if (!max_line && r->bantime_max_ns < r->bantime_ns)
		r->bantime_max_ns = r->bantime_ns;
	if (max_line && r->bantime_max_ns < r->bantime_ns)
		perr_at(p, max_line, "bantime_max must be at least bantime");
}

/* [global] comes once, so its end is the end of its keys. */
static void end_global(struct parser *p)
{
	struct rl_config *c = p->cfg;

	if (c->proxy_protocol && c->trusted_proxies.n == 0)
		perr_at(p, p->proxy_protocol_line,
			"proxy_protocol = on needs trusted_proxies");
}

/* Checks that need the whole section. */
static void end_section(struct parser *p)
{
	switch (p->sec) {
	case SEC_LIMIT:
		end_limit(p);
		break;
	case SEC_XDP:
		if (p->cfg->nifaces == 0)
			perr_at(p, p->sec_line, "[xdp] needs interfaces");
		break;
	case SEC_GLOBAL:
		end_global(p);
		break;
	default:
		break;
	}
	p->sec = SEC_BAD;
	p->rule = NULL;
}

/* Checks across sections, once the whole file is read. */
static void end_file(struct parser *p)
{
	const struct rl_config *c = p->cfg;

	/* A ban covers the client's address at the key prefix: at 0 bits,
	 * one client's offences would ban every client of the family. */
	for (unsigned i = 0; i < c->nrules; i++) {
		const struct rl_rule_cfg *r = &c->rules[i];

		if (r->maxretry && (c->ipv4_prefix == 0 || c->ipv6_prefix == 0))
			perr_at(p, r->line, "[limit:%s] has maxretry, but "
				"%s = 0 would make each of its bans cover "
				"every %s client", r->name,
				c->ipv4_prefix == 0 ? "ipv4_prefix" : "ipv6_prefix",
				c->ipv4_prefix == 0 ? "IPv4" : "IPv6");
	}
	/* The headers a request is parsed for: client_ip_header (where a
	 * proxy is trusted) and each distinct key header. */
	{
		const char *names[RL_MAX_KEY_HEADERS + 1];
		unsigned n = 0;

		if (c->trusted_proxies.n > 0 && c->client_ip_header[0])
			names[n++] = c->client_ip_header;
		for (unsigned i = 0; i < c->nrules; i++) {
			const struct rl_rule_cfg *r = &c->rules[i];
			unsigned k = 0;

			if (r->key != RL_KEY_HEADER)
				continue;
			while (k < n && strcasecmp(names[k], r->header) != 0)
				k++;
			if (k < n)
				continue;
			if (n == RL_MAX_KEY_HEADERS) {
				perr_at(p, r->line, "[limit:%s]: too many distinct "
					"key headers (%u at most, counting "
					"client_ip_header)", r->name,
					RL_MAX_KEY_HEADERS);
				break;
			}
			names[n++] = r->header;
		}
	}
}

/* Once-only sections: true if this one is new. */
static bool once(struct parser *p, int *first_line, const char *text)
{
	if (*first_line) {
		perr(p, "duplicate section [%s] (first at line %d)", text,
		     *first_line);
		return false;
	}
	*first_line = p->lineno;
	return true;
}

/* A `[text]` header at the current line. */
static void begin_section(struct parser *p, const char *text, size_t len)
{
	struct rl_config *c = p->cfg;
	int q = (int)(len < QUOTE_MAX ? len : QUOTE_MAX);

	end_section(p);
	memset(p->key_line, 0, NKEYS * sizeof(p->key_line[0]));
	p->key = NULL;
	p->sec_line = p->lineno;
	set_text(p->sec_text, sizeof(p->sec_text), text, len);

	if (len == 6 && !memcmp(text, "global", 6)) {
		if (once(p, &p->global_line, "global"))
			p->sec = SEC_GLOBAL;
	} else if (len == 5 && !memcmp(text, "redis", 5)) {
		if (once(p, &p->redis_line, "redis")) {
			p->sec = SEC_REDIS;
			c->redis = true;
		}
	} else if (len == 3 && !memcmp(text, "xdp", 3)) {
		if (once(p, &p->xdp_line, "xdp")) {
			p->sec = SEC_XDP;
			c->xdp = true;
		}
	} else if (len > 6 && !memcmp(text, "limit:", 6)) {
		const char *name = text + 6;
		size_t nlen = len - 6;

		if (!is_name(name, nlen, RL_RULE_NAME_MAX - 1)) {
			perr(p, "bad rule name '%.*s' (expected 1..31 of "
			     "A-Z a-z 0-9 _ . -)", q - 6, name);
			return;
		}
		for (unsigned i = 0; i < c->nrules; i++) {
			if (strlen(c->rules[i].name) == nlen &&
			    !memcmp(c->rules[i].name, name, nlen)) {
				perr(p, "duplicate rule [%s] (first at line %d)",
				     p->sec_text, c->rules[i].line);
				return;
			}
		}
		if (c->nrules == RL_MAX_RULES) {
			perr(p, "too many rules (max %d)", RL_MAX_RULES);
			return;
		}
		p->rule = &c->rules[c->nrules++];
		rule_defaults(p->rule);
		set_text(p->rule->name, RL_RULE_NAME_MAX, name, nlen);
		p->rule->line = p->lineno;
		p->sec = SEC_LIMIT;
	} else if (len == 6 && !memcmp(text, "limit:", 6)) {
		perr(p, "bad rule name '' (expected 1..31 of A-Z a-z 0-9 _ . -)");
	} else {
		perr(p, "unknown section [%.*s]", q, text);
	}
}

/* ---- inih callbacks ---- */

static int on_key(struct parser *p, const char *name, const char *value)
{
	const struct key_def *k;
	int *first;

	p->key = NULL;
	if (p->sec == SEC_NONE) {
		perr(p, "key '%.*s' outside any section", QUOTE_MAX, name);
		return 1;
	}
	if (p->sec == SEC_BAD)
		return 1;
	k = find_key(p->sec, name);
	if (!k) {
		perr(p, "unknown key '%.*s' in [%s]", QUOTE_MAX, name,
		     p->sec_text);
		return 1;
	}
	first = &p->key_line[k - keys];
	if (*first) {
		perr(p, "duplicate key '%s' (first at line %d)", k->name,
		     *first);
		return 1;
	}
	*first = p->lineno;
	p->key = k;
	apply(p, value);
	return 1;
}

/*
 * An indented line after a key. Debian's inih (r55) passes it without
 * removing an inline comment, so that is done here, as for a key's line.
 */
static int on_continuation(struct parser *p, const char *value)
{
	char v[LINE_MAX_BYTES + 1];
	size_t len;

	if (!p->key)
		return 1; /* the key itself was refused */
	if (!p->key->list) {
		perr(p, "key '%s' continued on an indented line", p->key->name);
		p->key = NULL;
		return 1;
	}
	len = (size_t)(find_or_comment(value, "") - value);
	while (len && is_space((unsigned char)value[len - 1]))
		len--;
	set_text(v, sizeof(v), value, len);
	apply(p, v);
	return 1;
}

/*
 * inih's handler. The section inih passes is ignored: begin_section() has
 * already seen the header line, and inih truncates long section names.
 * Always returns 1 (success): errors are recorded in the parser.
 */
static int on_pair(void *user, const char *section, const char *name,
		   const char *value)
{
	struct parser *p = user;

	(void)section;
	if (p->cont)
		return on_continuation(p, value);
	return on_key(p, name, value);
}

/* ---- the line reader ---- */

static int next_char(struct parser *p)
{
	int c;

	if (!p->file)
		return *p->text ? (unsigned char)*p->text++ : EOF;
	c = getc_unlocked(p->file);
	if (c == EOF && ferror(p->file))
		p->io_err = errno ? errno : EIO;
	return c;
}

/*
 * Classify the line just read, as inih will: a comment or blank, a
 * continuation of the previous key, a section header, or a key. Headers are
 * handled here; inih still sees them, so its state stays like ours.
 */
static void classify(struct parser *p)
{
	const char *s = p->line, *end, *t;

	p->cont = false;
	while (is_space((unsigned char)*s))
		s++;
	if (*s == '\0' || *s == ';' || *s == '#')
		return;
	if (s > p->line && p->have_key) {
		p->cont = true;
		return;
	}
	if (*s == '[') {
		end = find_or_comment(s + 1, "]");
		if (*end != ']') {
			perr(p, "unterminated section header");
			return;
		}
		for (t = end + 1; is_space((unsigned char)*t); t++)
			;
		if (*t && *t != ';')
			perr(p, "unexpected text after ']'");
		p->have_key = false;
		begin_section(p, s + 1, (size_t)(end - s - 1));
		return;
	}
	end = find_or_comment(s, "=:");
	if (*end != '=' && *end != ':') {
		perr(p, "expected 'key = value' or '[section]'");
		return;
	}
	for (t = end; t > s && is_space((unsigned char)t[-1]); t--)
		;
	p->have_key = t > s;
	if (t == s)
		perr(p, "missing key name before '%c'", *end);
}

/*
 * ini_reader: one physical line, with its newline, into `buf`. A line that
 * is too long or holds a NUL byte is reported and handed to inih as a blank
 * line, so that inih never splits a line and its count stays ours.
 */
static char *read_line(char *buf, int num, void *stream)
{
	struct parser *p = stream;
	bool any = false, too_long = false, nul = false;
	size_t n = 0, skip = 0;
	int c;

	if (num < 2)
		return NULL; /* never: inih passes ini_max_line */
	while ((c = next_char(p)) != EOF) {
		any = true;
		if (c == '\n')
			break;
		if (c == '\0')
			nul = true;
		if (n < LINE_MAX_BYTES)
			p->line[n++] = (char)c;
		else
			too_long = true;
	}
	if (!any)
		return NULL;
	p->line[n] = '\0';
	p->lineno++;
	p->cont = false;
	/* A UTF-8 byte order mark, as inih would skip it. */
	if (p->lineno == 1 && n >= 3 && !memcmp(p->line, "\xEF\xBB\xBF", 3))
		skip = 3;
	if (too_long || n + 2 > (size_t)num) {
		perr(p, "line too long (max %d bytes)", LINE_MAX_BYTES);
		p->line[0] = '\0';
	} else if (nul) {
		perr(p, "NUL byte in line");
		p->line[0] = '\0';
	} else if (skip) {
		memmove(p->line, p->line + skip, n - skip + 1);
	}
	classify(p);
	n = strlen(p->line);
	memcpy(buf, p->line, n);
	buf[n] = '\n';
	buf[n + 1] = '\0';
	return buf;
}

/* ---- entry points ---- */

static void report(const struct parser *p, char *err, size_t errlen)
{
	if (!err || !errlen)
		return;
	if (p->err_line)
		snprintf(err, errlen, "%s:%d: %s", p->name, p->err_line, p->err);
	else
		err[0] = '\0';
}

static void report_errno(const char *name, int errnum, char *err,
			 size_t errlen)
{
	if (err && errlen)
		snprintf(err, errlen, "%s: %s", name, strerror(errnum));
}

static int parse(struct parser *p, struct rl_config **out, char *err,
		 size_t errlen)
{
	int key_line[NKEYS];
	struct rl_config *c;
	int rc;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	c = calloc(1, sizeof(*c));
	if (!c) {
		report_errno(p->name, ENOMEM, err, errlen);
		return -ENOMEM;
	}
	global_defaults(c);
	snprintf(c->source, sizeof(c->source), "%s", p->name);
	p->cfg = c;
	p->key_line = key_line;
	memset(key_line, 0, sizeof(key_line));

	/*
	 * inih's line buffer is a VLA of ini_max_line bytes: make room for a
	 * whole line plus "\r\n\0"; read_line() refuses longer ones. It is
	 * not restored afterwards: every parse sets the same value, so two
	 * threads parsing at once cannot shrink each other's buffer, and no
	 * other code in the process uses this (statically linked) inih.
	 */
	ini_max_line = LINE_MAX_BYTES + 3;
	rc = ini_parse_stream(read_line, p, on_pair, p);

	if (p->io_err) {
		report_errno(p->name, p->io_err, err, errlen);
		free(c);
		return -p->io_err;
	}
	end_section(p);
	end_file(p);
	if (rc > 0)
		perr_at(p, rc, "syntax error"); /* inih saw what we did not */
	if (rc < 0 && !p->err_line) {
		report_errno(p->name, ENOMEM, err, errlen);
		free(c);
		return -ENOMEM;
	}
	if (p->err_line) {
		report(p, err, errlen);
		free(c);
		return -EINVAL;
	}
	*out = c;
	return 0;
}

int rl_config_load(const char *path, struct rl_config **out, char *err,
		   size_t errlen)
{
	struct parser p;
	int rc;

	if (!path || !out)
		return -EINVAL;
	memset(&p, 0, sizeof(p));
	p.name = path;
	p.file = fopen(path, "re");
	if (!p.file) {
		rc = -errno;
		*out = NULL;
		report_errno(path, -rc, err, errlen);
		return rc;
	}
	errno = 0;
	rc = parse(&p, out, err, errlen);
	fclose(p.file);
	return rc;
}

int rl_config_read(const char *path, char **text, size_t *len, char *err,
		   size_t errlen)
{
	size_t cap = 4096, n = 0;
	char *buf = NULL;
	int fd, rc = 0;

	*text = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		report_errno(path, -rc, err, errlen);
		return rc;
	}
	for (;;) {
		ssize_t r;

		if (n + 1 >= cap || !buf) {
			char *nb;

			if (buf)
				cap *= 2;
			if (cap > RL_CONFIG_FILE_MAX) {
				snprintf(err, errlen, "%s: larger than %u bytes",
					 path, RL_CONFIG_FILE_MAX);
				rc = -EFBIG;
				break;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				rc = -ENOMEM;
				report_errno(path, ENOMEM, err, errlen);
				break;
			}
			buf = nb;
		}
		r = rl_sys.read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			report_errno(path, -rc, err, errlen);
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	rl_sys.close(fd);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

int rl_config_parse(const char *text, const char *name,
		    struct rl_config **out, char *err, size_t errlen)
{
	struct parser p;

	if (!text || !out)
		return -EINVAL;
	memset(&p, 0, sizeof(p));
	p.name = name ? name : "<string>";
	p.text = text;
	return parse(&p, out, err, errlen);
}

int rl_config_default(struct rl_config **out)
{
	struct rl_config *c;
	struct rl_rule_cfg *r;

	if (!out)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		*out = NULL;
		return -ENOMEM;
	}
	global_defaults(c);
	r = &c->rules[0];
	rule_defaults(r);
	snprintf(r->name, sizeof(r->name), "default");
	r->rate.period_ns = NS_PER_MIN;
	r->rate.count = 60;
	r->rate.burst = 60;
	c->nrules = 1;
	*out = c;
	return 0;
}

/* $RLSHIM_CONFIG as it was when rl_config_remember_env() ran. */
static char remembered[RL_PATH_MAX];

void rl_config_remember_env(void)
{
	const char *env = getenv(RL_CONFIG_ENV);

	if (env && *env && strlen(env) < sizeof(remembered))
		memcpy(remembered, env, strlen(env) + 1);
}

const char *rl_config_path(void)
{
	const char *env = getenv(RL_CONFIG_ENV);

	if (env && *env)
		return env;
	if (remembered[0])
		return remembered;
	if (access(RL_CONFIG_DEFAULT_PATH, F_OK) == 0)
		return RL_CONFIG_DEFAULT_PATH;
	return NULL;
}

/* Rule `r` as the table's API takes it; `plans` is its storage. */
static void rule_def(const struct rl_rule_cfg *r, struct rl_rate *plans,
		     struct rl_rule_def *def)
{
	for (unsigned k = 0; k < r->nplans; k++)
		plans[k] = r->plans[k].rate;
	def->name = r->name;
	def->algorithm = r->algorithm;
	def->rate = r->rate;
	def->nplans = r->nplans;
	def->plans = plans;
}

int rl_config_register(const struct rl_config *c, struct rl_table *t,
		       unsigned ids[RL_MAX_RULES], char *err, size_t errlen)
{
	for (unsigned i = 0; i < c->nrules; i++) {
		const struct rl_rule_cfg *r = &c->rules[i];
		struct rl_rate plans[RL_MAX_PLANS];
		struct rl_rule_def def;
		int rc;

		rule_def(r, plans, &def);
		rc = rl_table_rule_claim(t, &def, &ids[i]);
		if (rc) {
			snprintf(err, errlen, "rule [limit:%s]: %s", r->name,
				 rc == -ENOSPC ? "the segment holds 64 rules "
						 "already (every name it has "
						 "seen, until it is removed)"
					       : "cannot be registered");
			return rc;
		}
	}
	return 0;
}

int rl_config_use(const struct rl_config *c, struct rl_table *t,
		  const unsigned ids[RL_MAX_RULES], char *err, size_t errlen)
{
	for (unsigned i = 0; i < c->nrules; i++) {
		struct rl_rate plans[RL_MAX_PLANS];
		struct rl_rule_def def;
		int rc;

		rule_def(&c->rules[i], plans, &def);
		rc = rl_table_rule_use(t, ids[i], &def);
		if (rc) {
			snprintf(err, errlen, "rule [limit:%s]: %s",
				 c->rules[i].name, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

int rl_config_reload_ok(const struct rl_config *next, char *err,
			size_t errlen)
{
	if (next->nrules > 0)
		return 0;
	snprintf(err, errlen, "%s: no [limit:*] rule (to lift every limit on "
		 "purpose, set mode = dry-run)", next->source);
	return -EINVAL;
}

int rl_config_guards(const struct rl_config *c, uint16_t port)
{
	if (c->nports == 0)
		return 1;
	for (unsigned i = 0; i < c->nports; i++)
		if (c->ports[i] == port)
			return 1;
	return 0;
}

uint64_t rl_config_stamp(const char *path)
{
	struct stat st;
	uint64_t v[5];

	if (!path)
		return 1;
	if (stat(path, &st) < 0)
		return 0;
	v[0] = (uint64_t)st.st_dev;
	v[1] = (uint64_t)st.st_ino;
	v[2] = (uint64_t)st.st_size;
	v[3] = (uint64_t)st.st_mtim.tv_sec;
	v[4] = (uint64_t)st.st_mtim.tv_nsec;
	/* 0 and 1 mean "none" and "built-in" */
	return rl_hash_sip13(rl_hash_public_key, v, sizeof(v)) | 2;
}

void rl_config_free(struct rl_config *c)
{
	free(c);
}

const char *rl_config_algorithm_name(enum rl_algorithm a)
{
	for (const struct choice *c = algorithm_choices.c; c->name; c++) {
		if (c->value == (int)a)
			return c->name;
	}
	return "?";
}

const char *rl_config_headers_name(enum rl_headers h)
{
	for (const struct choice *c = headers_choices.c; c->name; c++) {
		if (c->value == (int)h)
			return c->name;
	}
	return "?";
}
