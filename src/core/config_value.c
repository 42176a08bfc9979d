/* SPDX-License-Identifier: MIT */
/*
 * config_value.c - the value parsers of rlshim.conf: one key's text, checked
 * and stored in its field (ports, addresses, URLs, interfaces, matches,
 * rates, plans).
 *
 * Each parser gets the value as inih left it (whitespace and " ;" comments
 * stripped) and records its error in the parser, naming the key and
 * quoting the value; the key table (config_key.c) says which key takes
 * which parser.
 */
#include "config_impl.h"
#include "url.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "path.h"
#include "clock.h"
#include "sys.h"
#include "jwt.h"
#include "mem.h"

#define METHOD_MAX 15                /* sizeof(rule.method) - 1 */
#define IFACE_MAX 15                 /* IFNAMSIZ - 1 */

/* ---- character classes and lists ---- */

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

static const char rate_expected[] = "expected N/s, N/m, N/h or N/d, or N/10m";

/* ---- [global] ---- */

int rl_cfg_parse_ports(struct parser *p, const char *v)
{
	struct rl_config *c = p->cfg;
	const char *item;
	uint64_t port;
	size_t len;

	while ((item = next_item(&v, &len))) {
		if (parse_u64(item, len, &port) || port < 1 || port > 65535) {
			perr(p, "bad port '%.*s' (expected 1..65535)",
			     quote_len(len), item);
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

int rl_cfg_parse_shm(struct parser *p, const char *v)
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
			     p->key->name, quote_len(len), item);
			return -EINVAL;
		}
		{
			/* nginx -t's "low address bits are meaningless" */
			const char *slash = memchr(item, '/', len);
			struct rl_cidr host;

			if (slash && rl_cidr_parse(item, (size_t)(slash - item),
						   &host) == 0 &&
			    memcmp(&host.addr, &cidr.addr, sizeof(host.addr))) {
				char net[RL_CIDR_STRLEN];

				rl_cidr_format(&cidr, net, sizeof(net));
				rl_cfg_pwarn_at(p, p->lineno, "%s '%.*s' has bits "
						"set past its prefix: it means %s",
						p->key->name, quote_len(len), item,
						net);
			}
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

int rl_cfg_parse_allow(struct parser *p, const char *v)
{
	return parse_cidrs(p, v, &p->cfg->allow, &p->allow_none);
}

int rl_cfg_parse_trusted(struct parser *p, const char *v)
{
	return parse_cidrs(p, v, &p->cfg->trusted_proxies, &p->trusted_none);
}

int rl_cfg_parse_client_ip_header(struct parser *p, const char *v)
{
	size_t len = strlen(v);

	if (!is_token(v, len) || len >= RL_HEADER_NAME_MAX)
		return bad_value(p, v, "expected a header field name");
	set_text(p->cfg->client_ip_header, RL_HEADER_NAME_MAX, v, len);
	return 0;
}

/* ---- [redis] ---- */

/*
 * redis://, unix://, redis-sentinel:// or redis-cluster:// (url.h: the
 * agent reads it with the same parser, so what passes here connects as
 * written). The text is kept verbatim for the agent.
 */
int rl_cfg_parse_url(struct parser *p, const char *v)
{
#define PLAIN "expected redis://[user:pass@]host[:port][/db] or unix:///path"
	static const char *const expected[] = {
		[RL_URL_UNKNOWN] = PLAIN,
		[RL_URL_REDIS] = PLAIN,
		[RL_URL_UNIX] = PLAIN,
		[RL_URL_SENTINEL] = "expected redis-sentinel://[user:pass@]"
				    "host[:port][,host[:port]...]/master[/db]",
		[RL_URL_CLUSTER] = "expected redis-cluster://[user:pass@]"
				   "host[:port][,host[:port]...]",
	};
	struct rl_url u;
	size_t len = strlen(v);

	if (len >= RL_URL_MAX) {
		perr(p, "url too long (max %d bytes)", RL_URL_MAX - 1);
		return -EINVAL;
	}
	if (rl_url_parse(v, &u))
		return bad_value(p, v, expected[u.kind]);
	memcpy(p->cfg->redis_url, v, len + 1);
	return 0;
#undef PLAIN
}

int rl_cfg_parse_prefix(struct parser *p, const char *v)
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

int rl_cfg_parse_interfaces(struct parser *p, const char *v)
{
	struct rl_config *c = p->cfg;
	const char *item;
	size_t len;

	while ((item = next_item(&v, &len))) {
		int q = quote_len(len);

		if (!valid_ifname(item, len)) {
			perr(p, "bad interface '%.*s' (expected 1..15 characters, "
				"no '/' or ':')", q, item);
			return -EINVAL;
		}
		for (unsigned i = 0; i < c->nifaces; i++) {
			if (same_text(c->ifaces[i], item, len)) {
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

/*
 * What a request's path is compared with (policy.c, rule_matches): an
 * exact path matches itself, its trailing slashes and everything below it
 * ("/a.php" matches "/a.php/x": the PATH_INFO a server hands the script it
 * runs for both, RFC 3875 4.1.5), so path_len leaves the trailing slashes
 * out. A last segment "index" or "index.EXT" is what servers run for its
 * directory too (nginx's index, apache's DirectoryIndex, php -S).
 */
static void rl_cfg_path_lengths(struct rl_rule_cfg *r)
{
	size_t n = strlen(r->path), last;

	r->path_dir_len = 0;
	if (r->path_prefix || n == 0) {
		r->path_len = (uint16_t)n;
		return;
	}
	while (n > 1 && r->path[n - 1] == '/')
		n--;
	r->path_len = (uint16_t)n;
	for (last = n; last > 0 && r->path[last - 1] != '/'; last--)
		;
	if (last > 0 && strncmp(r->path + last, "index", 5) == 0 &&
	    (n - last == 5 || r->path[last + 5] == '.'))
		r->path_dir_len = (uint16_t)(last > 1 ? last - 1 : 1);
}

/* `*`, `accept`, or `METHOD PATH` (either may be `*`). */
int rl_cfg_parse_match(struct parser *p, const char *v)
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
	rl_cfg_path_lengths(r);
	return 0;
}

int rl_cfg_parse_rate(struct parser *p, const char *v)
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

int rl_cfg_parse_burst(struct parser *p, const char *v)
{
	uint64_t n;

	if (parse_u64(v, strlen(v), &n) || n < 1 || n > UINT32_MAX)
		return bad_value(p, v, "expected 1..4294967295");
	p->burst = (uint32_t)n;
	return 0;
}

/* A claim's name as the JSON member is spelled: visible ASCII but '"'
 * and '\\' (no escapes to compare: "sub", "https://example.com/tenant"). */
static bool is_claim(const char *s, size_t len)
{
	if (!len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

int rl_cfg_parse_key(struct parser *p, const char *v)
{
	static const struct {
		const char *prefix;
		enum rl_key_kind kind;
		bool (*valid)(const char *s, size_t len);
	} named[] = {
		{ "header:", RL_KEY_HEADER, is_token },
		{ "cookie:", RL_KEY_COOKIE, is_token }, /* RFC 6265 cookie-name */
		{ "jwt:", RL_KEY_JWT, is_claim },
	};
	struct rl_rule_cfg *r = p->rule;

	if (strcmp(v, "ip") == 0) {
		r->key = RL_KEY_IP;
		return 0;
	}
	if (strcmp(v, "global") == 0) {
		r->key = RL_KEY_GLOBAL;
		return 0;
	}
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		size_t n = strlen(named[i].prefix), len = strlen(v) - n;

		if (strncmp(v, named[i].prefix, n) == 0 &&
		    named[i].valid(v + n, len) && len < RL_HEADER_NAME_MAX) {
			r->key = named[i].kind;
			set_text(r->header, sizeof(r->header), v + n, len);
			return 0;
		}
	}
	return bad_value(p, v, "expected ip, global, header:NAME, cookie:NAME "
			 "or jwt:CLAIM");
}

/*
 * A key's FILE (`what`: its name, for errors), relative to the
 * configuration file's directory, read into buf[0..cap): *n bytes, cap
 * when the file has at least that many (a caller's cap is more than it
 * takes, so that a file too long shows). It must be a regular
 * file; a `secret` one, as sshd wants of its keys, owned by root or by
 * this process's user and writable by neither its group nor others (who
 * could write it could mint tokens). 0, or -EINVAL with the error given.
 */
static int read_key_file(struct parser *p, const char *what, const char *v,
			 int secret, uint8_t *buf, size_t cap, size_t *n,
			 char *path, size_t pathcap)
{
	const char *slash = strrchr(p->name, '/');
	const char *why = NULL;
	struct stat st;
	int fd, e = 0;

	*n = 0;
	if (!*v)
		return bad_value(p, v, "expected a file");
	if (*v != '/' && slash)
		snprintf(path, pathcap, "%.*s/%s", (int)(slash - p->name),
			 p->name, v);
	else
		snprintf(path, pathcap, "%s", v);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		perr(p, "%s %s: %s", what, path, strerror(errno));
		return -EINVAL;
	}
	if (fstat(fd, &st))
		e = errno;
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (secret && st.st_uid != 0 && st.st_uid != geteuid())
		why = "owned by another user than root or this one (its owner "
		      "could mint tokens)";
	else if (secret && (st.st_mode & (S_IWGRP | S_IWOTH)))
		why = st.st_mode & S_IWOTH
			? "writable by others (who can write it can mint tokens)"
			: "writable by its group (who can write it can mint tokens)";
	else
		while (*n < cap) {
			ssize_t got = rl_sys.read(fd, buf + *n, cap - *n);

			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0)
				e = errno;
			if (got <= 0)
				break;
			*n += (size_t)got;
		}
	rl_sys.close(fd);
	if (e)
		why = strerror(e);
	if (why) {
		perr(p, "%s %s: %s", what, path, why);
		return -EINVAL;
	}
	return 0;
}

/*
 * jwt_secret = FILE: the HS256 key is the file's bytes, less one final
 * newline (what `echo` or `openssl rand -hex 32 > FILE` leaves), read now.
 * FILE is relative to the configuration file's directory; a secret file
 * (read_key_file).
 */
int rl_cfg_parse_jwt_secret(struct parser *p, const char *v)
{
	struct rl_rule_cfg *r = p->rule;
	char path[RL_PATH_MAX];
	uint8_t buf[RL_JWT_SECRET_MAX + 3];
	size_t n;

	if (read_key_file(p, "jwt_secret", v, 1, buf, sizeof(buf), &n, path,
			  sizeof(path)))
		return -EINVAL;
	if (n && buf[n - 1] == '\n')
		n -= n > 1 && buf[n - 2] == '\r' ? 2 : 1;
	if (n > RL_JWT_SECRET_MAX) {
		perr(p, "jwt_secret %s: over %u bytes", path, RL_JWT_SECRET_MAX);
		return -EINVAL;
	}
	if (!n) {
		perr(p, "jwt_secret %s: empty", path);
		return -EINVAL;
	}
	/* RFC 7518 section 3.2: a key of the hash's size at least */
	if (n < 32)
		rl_cfg_pwarn_at(p, p->lineno, "jwt_secret %s: %zu bytes, shorter "
				"than the 32 RFC 7518 asks of an HS256 key", path, n);
	memcpy(r->jwt_secret, buf, n);
	r->jwt_secret_len = (uint16_t)n;
	memset(buf, 0, sizeof(buf));
	return 0;
}

/* 1 if p[0..n) is UTF-8 (RFC 3629: no overlong forms, no surrogates,
 * nothing past U+10FFFF) without NUL. */
static int utf8_text(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = p[i];
		size_t k;
		uint32_t cp;

		if (c == 0)
			return 0;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3, cp = c & 0x07;
		else
			return 0;
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((p[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

/*
 * deny_json = FILE, deny_html = FILE: the 429's body, as the file has it,
 * for clients that do not prefer text/html and for those that do. Read
 * now: 1 to RL_DENY_BODY_MAX bytes of UTF-8 without NUL; a deny_json file
 * must be one JSON value (RFC 8259, as JWTs are read).
 */
static int deny_body(struct parser *p, const char *v, enum rl_deny_body kind)
{
	struct rl_rule_cfg *r = p->rule;
	const char *what = kind == RL_BODY_HTML ? "deny_html" : "deny_json";
	char path[RL_PATH_MAX];
	uint8_t buf[RL_DENY_BODY_MAX + 1];
	size_t n;
	char *copy;

	if (read_key_file(p, what, v, 0, buf, sizeof(buf), &n, path, sizeof(path)))
		return -EINVAL;
	if (n > RL_DENY_BODY_MAX) {
		perr(p, "%s %s: over %u bytes", what, path, RL_DENY_BODY_MAX);
		return -EINVAL;
	}
	if (!n) {
		perr(p, "%s %s: empty", what, path);
		return -EINVAL;
	}
	if (!utf8_text(buf, n)) {
		perr(p, "%s %s: not UTF-8 text (a NUL, or a byte UTF-8 has not "
		     "there)", what, path);
		return -EINVAL;
	}
	if (kind == RL_BODY_JSON && rl_json_valid(buf, n)) {
		perr(p, "deny_json %s: not one JSON value (RFC 8259)", path);
		return -EINVAL;
	}
	copy = rl_mem_alloc(n);
	if (!copy) {
		perr(p, "%s %s: %s", what, path, strerror(ENOMEM));
		return -EINVAL;
	}
	memcpy(copy, buf, n);
	r->deny_body[kind] = copy;
	r->deny_body_len[kind] = (uint16_t)n;
	return 0;
}

int rl_cfg_parse_deny_json(struct parser *p, const char *v)
{
	return deny_body(p, v, RL_BODY_JSON);
}

int rl_cfg_parse_deny_html(struct parser *p, const char *v)
{
	return deny_body(p, v, RL_BODY_HTML);
}

/* `name:RATE` items. */
int rl_cfg_parse_plans(struct parser *p, const char *v)
{
	struct rl_rule_cfg *r = p->rule;
	char rate[64];
	const char *item, *colon;
	size_t len, nlen;
	int q, err;

	while ((item = next_item(&v, &len))) {
		q = quote_len(len);
		colon = memchr(item, ':', len);
		nlen = colon ? (size_t)(colon - item) : len;
		if (!colon || !is_name(item, nlen, RL_RULE_NAME_MAX - 1) ||
		    len - nlen - 1 >= sizeof(rate)) {
			perr(p, "bad plan '%.*s' (expected NAME:RATE, e.g. free:100/h)",
			     q, item);
			return -EINVAL;
		}
		for (unsigned i = 0; i < r->nplans; i++) {
			if (same_text(r->plans[i].name, item, nlen)) {
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

/* count_status = 401 403 5xx: statuses 100..599, or whole classes. */
int rl_cfg_parse_count_status(struct parser *p, const char *v)
{
	struct rl_rule_cfg *r = p->rule;
	const char *item;
	size_t len;

	while ((item = next_item(&v, &len))) {
		unsigned lo, hi;

		if (len == 3 && item[0] >= '1' && item[0] <= '5' &&
		    (item[1] | 0x20) == 'x' && (item[2] | 0x20) == 'x') {
			lo = (unsigned)(item[0] - '0') * 100;
			hi = lo + 99;
		} else if (len == 3 && item[0] >= '1' && item[0] <= '5' &&
			   item[1] >= '0' && item[1] <= '9' && item[2] >= '0' &&
			   item[2] <= '9') {
			lo = hi = (unsigned)(item[0] - '0') * 100 +
				  (unsigned)(item[1] - '0') * 10 +
				  (unsigned)(item[2] - '0');
		} else {
			perr(p, "bad count_status '%.*s' (expected statuses "
			     "100-599 or classes 1xx-5xx, e.g. 401 403 5xx)",
			     quote_len(len), item);
			return -EINVAL;
		}
		for (unsigned s = lo; s <= hi; s++) {
			unsigned b = s - RL_STATUS_MIN;

			r->count_status[b / 64] |= 1ull << (b % 64);
		}
		r->count_status_on = true;
	}
	if (!r->count_status_on) {
		perr(p, "count_status needs at least one status");
		return -EINVAL;
	}
	return 0;
}
