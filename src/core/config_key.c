/* SPDX-License-Identifier: MIT */
/*
 * config_key.c - the key table of rlshim.conf: every key of every section
 * with its type and field, and the checks that run when a section or the
 * file ends.
 *
 * Keys are one table of {section, name, type, field}: a typed key (a
 * choice, a number, a duration) is stored here, a key of its own syntax
 * goes to its parser in config_value.c. Checks that involve several keys
 * run when their section ends, at the line of the offending key. The
 * first error found is the one reported.
 */
#include "config_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"

#define GCRA_SPAN_MAX (1ull << 62)   /* burst * emission interval, ns */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- choices ---- */

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

static const struct choices headers_on_choices = {
	"denied or all",
	{ { "denied", RL_HEADERS_ON_DENIED }, { "all", RL_HEADERS_ON_ALL } },
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

static const struct choices sync_choices = {
	"async or strict",
	{ { "async", RL_SYNC_ASYNC }, { "strict", RL_SYNC_STRICT } },
};

/* V_CHOICE stores through an int pointer. */
_Static_assert(sizeof(enum rl_mode) == sizeof(int) &&
	       sizeof(enum rl_algorithm) == sizeof(int) &&
	       sizeof(enum rl_get_body) == sizeof(int) &&
	       sizeof(enum rl_headers_on) == sizeof(int),
	       "enums are int-sized");

/* ---- typed keys ---- */

static void *field(struct parser *p, const struct key_def *k)
{
	char *base = k->sec == SEC_LIMIT ? (char *)p->rule : (char *)p->cfg;

	return base + k->off;
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

static int parse_proxy_protocol(struct parser *p, const char *v)
{
	p->proxy_protocol_line = p->lineno;
	return set_choice(p, v);
}

/* ---- the key table ---- */

#define CFG(f) .off = offsetof(struct rl_config, f), \
	       .size = sizeof(((struct rl_config *)0)->f)
#define RULE(f) .off = offsetof(struct rl_rule_cfg, f), \
		.size = sizeof(((struct rl_rule_cfg *)0)->f)

static const struct key_def keys[] = {
	{ SEC_GLOBAL, "ports", V_FN, .fn = rl_cfg_parse_ports, .list = true },
	{ SEC_GLOBAL, "shm", V_FN, .fn = rl_cfg_parse_shm },
	{ SEC_GLOBAL, "capacity", V_UINT, CFG(capacity),
	  .min = RL_CAPACITY_MIN, .max = RL_CAPACITY_MAX },
	{ SEC_GLOBAL, "mode", V_CHOICE, CFG(mode), .choices = &mode_choices },
	{ SEC_GLOBAL, "headers", V_CHOICE, CFG(headers),
	  .choices = &headers_choices },
	{ SEC_GLOBAL, "headers_on", V_CHOICE, CFG(headers_on),
	  .choices = &headers_on_choices },
	{ SEC_GLOBAL, "get_body", V_CHOICE, CFG(get_body),
	  .choices = &get_body_choices },
	{ SEC_GLOBAL, "allow", V_FN, .fn = rl_cfg_parse_allow, .list = true },
	{ SEC_GLOBAL, "trusted_proxies", V_FN, .fn = rl_cfg_parse_trusted,
	  .list = true },
	{ SEC_GLOBAL, "client_ip_header", V_FN,
	  .fn = rl_cfg_parse_client_ip_header },
	{ SEC_GLOBAL, "proxy_protocol", V_BOOL, CFG(proxy_protocol),
	  .fn = parse_proxy_protocol },
	{ SEC_GLOBAL, "ipv4_prefix", V_UINT, CFG(ipv4_prefix), .max = 32 },
	{ SEC_GLOBAL, "ipv6_prefix", V_UINT, CFG(ipv6_prefix), .max = 128 },
	{ SEC_GLOBAL, "on_error", V_CHOICE, CFG(on_error),
	  .choices = &on_error_choices },
	{ SEC_GLOBAL, "log", V_CHOICE, CFG(log), .choices = &log_choices },
	{ SEC_GLOBAL, "log_level", V_CHOICE, CFG(log_level),
	  .choices = &log_level_choices },

	{ SEC_REDIS, "url", V_FN, .fn = rl_cfg_parse_url },
	{ SEC_REDIS, "timeout", V_DURATION, CFG(redis_timeout_ns),
	  .min = 1, .max = UINT64_MAX },
	{ SEC_REDIS, "sync_interval", V_DURATION, CFG(sync_interval_ns),
	  .min = RL_NS_PER_MS, .max = 60 * RL_NS_PER_SEC },
	{ SEC_REDIS, "prefix", V_FN, .fn = rl_cfg_parse_prefix },

	{ SEC_XDP, "interfaces", V_FN, .fn = rl_cfg_parse_interfaces,
	  .list = true },
	{ SEC_XDP, "mode", V_CHOICE, CFG(xdp_mode),
	  .choices = &xdp_mode_choices },

	{ SEC_LIMIT, "match", V_FN, .fn = rl_cfg_parse_match },
	{ SEC_LIMIT, "rate", V_FN, .fn = rl_cfg_parse_rate },
	{ SEC_LIMIT, "burst", V_FN, .fn = rl_cfg_parse_burst },
	{ SEC_LIMIT, "algorithm", V_CHOICE, RULE(algorithm),
	  .choices = &algorithm_choices },
	{ SEC_LIMIT, "key", V_FN, .fn = rl_cfg_parse_key },
	{ SEC_LIMIT, "jwt_secret", V_FN, .fn = rl_cfg_parse_jwt_secret },
	{ SEC_LIMIT, "deny_json", V_FN, .fn = rl_cfg_parse_deny_json },
	{ SEC_LIMIT, "deny_html", V_FN, .fn = rl_cfg_parse_deny_html },
	{ SEC_LIMIT, "on_store_down", V_CHOICE, RULE(on_store_down),
	  .choices = &store_down_choices },
	{ SEC_LIMIT, "sync", V_CHOICE, RULE(sync), .choices = &sync_choices },
	{ SEC_LIMIT, "count_status", V_FN, .fn = rl_cfg_parse_count_status,
	  .list = true },
	{ SEC_LIMIT, "plans", V_FN, .fn = rl_cfg_parse_plans, .list = true },
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
_Static_assert(NKEYS <= KEYS_MAX, "the parser has a line for every key");

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

void rl_cfg_rule_defaults(struct rl_rule_cfg *r)
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

void rl_cfg_global_defaults(struct rl_config *c)
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

/* 1 when burst * (period / count) leaves no room to add a clock to it. */
static bool gcra_too_large(const struct rl_rate *r)
{
	uint64_t span;

	return __builtin_mul_overflow(r->period_ns / r->count,
				      (uint64_t)r->burst, &span) ||
	       span >= GCRA_SPAN_MAX;
}

static void end_limit(struct parser *p)
{
	struct rl_rule_cfg *r = p->rule;
	int rate_line = given_at(p, "rate");
	int burst_line = given_at(p, "burst");
	int plans_line = given_at(p, "plans");
	int key_line = given_at(p, "key");
	int max_line = given_at(p, "bantime_max");

	if (plans_line && !p->plans_line)
		p->plans_line = plans_line;
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
	if (r->key != RL_KEY_IP && r->key != RL_KEY_GLOBAL &&
	    r->match == RL_MATCH_ACCEPT)
		perr_at(p, key_line, "key = %s:%s cannot be used with "
			"match = accept (no headers at accept)",
			rl_config_key_kind(r), r->header);
	if (r->jwt_secret_len && r->key != RL_KEY_JWT)
		perr_at(p, given_at(p, "jwt_secret"), "jwt_secret needs "
			"key = jwt:CLAIM");
	if (r->count_status_on && r->match == RL_MATCH_ACCEPT)
		perr_at(p, given_at(p, "count_status"), "count_status cannot "
			"be used with match = accept (no answer at accept)");
	if (r->count_status_on && r->sync == RL_SYNC_STRICT)
		perr_at(p, given_at(p, "count_status"), "count_status cannot "
			"be used with sync = strict (the store keeps what it "
			"admitted: nothing is given back there)");
	if (!max_line && r->bantime_max_ns < r->bantime_ns)
		r->bantime_max_ns = r->bantime_ns;
	if (max_line && r->bantime_max_ns < r->bantime_ns)
		perr_at(p, max_line, "bantime_max must be at least bantime");
	if (r->sync == RL_SYNC_STRICT && !p->strict_line)
		p->strict_line = given_at(p, "sync");
}

/* [global] comes once, so its end is the end of its keys. */
static void end_global(struct parser *p)
{
	struct rl_config *c = p->cfg;

	if (c->proxy_protocol && c->trusted_proxies.n == 0)
		perr_at(p, p->proxy_protocol_line,
			"proxy_protocol = on needs trusted_proxies");
}

/* [redis] comes once too. In a cluster the first '{' of a name starts its
 * hash tag: a prefix with one would put every key in the prefix's slot. */
static void end_redis(struct parser *p)
{
	const struct rl_config *c = p->cfg;

	if (strncmp(c->redis_url, "redis-cluster://", 16) == 0 &&
	    strpbrk(c->redis_prefix, "{}"))
		perr_at(p, given_at(p, "prefix"), "prefix cannot have '{' or '}' "
			"with redis-cluster:// (they would make the hash tag)");
}

/* Checks that need the whole section. */
void rl_cfg_end_section(struct parser *p)
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
	case SEC_REDIS:
		end_redis(p);
		break;
	default:
		break;
	}
	p->sec = SEC_BAD;
	p->rule = NULL;
}

/* Checks across sections, once the whole file is read. */
void rl_cfg_end_file(struct parser *p)
{
	struct rl_config *c = p->cfg;

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
	/* Strict decisions are made in the store: there must be one. */
	if (p->strict_line && !c->redis)
		perr_at(p, p->strict_line, "sync = strict needs [redis]");
	/* A key's plan is read from the store: without one, never. */
	if (p->plans_line && !c->redis)
		perr_at(p, p->plans_line, "plans needs [redis] (each key's plan "
			"is read from it)");
	/* The headers a request is parsed for: client_ip_header (where a
	 * proxy is trusted) and each distinct key header. */
	{
		const char *names[RL_MAX_KEY_HEADERS + 1];
		unsigned n = 0;

		if (c->trusted_proxies.n > 0 && c->client_ip_header[0])
			names[n++] = c->client_ip_header;
		for (unsigned i = 0; i < c->nrules; i++) {
			const struct rl_rule_cfg *r = &c->rules[i];
			const char *h = rl_config_key_header(r);
			unsigned k = 0;

			if (!h)
				continue;
			while (k < n && strcasecmp(names[k], h) != 0)
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
			names[n++] = h;
		}
	}
	/* Each distinct claim and secret is a decode of the token (and an
	 * HMAC) per request: a few at most, each given its slot here, the
	 * rules that share one the same. */
	for (unsigned i = 0, n = 0; i < c->nrules; i++) {
		struct rl_rule_cfg *r = &c->rules[i];
		unsigned k = 0;

		if (r->key != RL_KEY_JWT)
			continue;
		while (k < i && !rl_config_same_jwt(&c->rules[k], r))
			k++;
		if (k < i) {
			r->jwt_slot = c->rules[k].jwt_slot;
			continue;
		}
		if (n == RL_JWT_KEYS_MAX) {
			perr_at(p, r->line, "[limit:%s]: too many distinct jwt "
				"keys (%u claims or secrets at most)", r->name,
				RL_JWT_KEYS_MAX);
			break;
		}
		r->jwt_slot = (uint8_t)n++;
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
void rl_cfg_begin_section(struct parser *p, const char *text, size_t len)
{
	struct rl_config *c = p->cfg;
	int q = quote_len(len);

	rl_cfg_end_section(p);
	memset(p->key_line, 0, sizeof(p->key_line));
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
			if (same_text(c->rules[i].name, name, nlen)) {
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
		rl_cfg_rule_defaults(p->rule);
		set_text(p->rule->name, RL_RULE_NAME_MAX, name, nlen);
		p->rule->line = p->lineno;
		p->sec = SEC_LIMIT;
	} else if (len == 6 && !memcmp(text, "limit:", 6)) {
		perr(p, "bad rule name '' (expected 1..31 of A-Z a-z 0-9 _ . -)");
	} else {
		perr(p, "unknown section [%.*s]", q, text);
	}
}

/* ---- key lines ---- */

int rl_cfg_on_key(struct parser *p, const char *name, const char *value)
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
int rl_cfg_on_continuation(struct parser *p, const char *value)
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

/* ---- names ---- */

/* The name the file gives `value` among `ch`, or "?". */
static const char *choice_name(const struct choices *ch, int value)
{
	for (const struct choice *c = ch->c; c->name; c++) {
		if (c->value == value)
			return c->name;
	}
	return "?";
}

void rl_config_store_impact(const struct rl_config *cfg, char *buf,
			    size_t len)
{
	size_t n = 0;

	for (int closed = 1; closed >= 0; closed--) {
		int first = 1;

		n += (size_t)snprintf(buf + n, len - n,
				      closed ? " refusing=\"" : " local_share=\"");
		for (unsigned i = 0; i < cfg->nrules && n < len; i++) {
			if ((cfg->rules[i].on_store_down == RL_STORE_DOWN_CLOSED) !=
			    closed)
				continue;
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
					      first ? "" : ",", cfg->rules[i].name);
			first = 0;
		}
		if (n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s\"",
					      first ? "none" : "");
	}
	if (n >= len)
		buf[0] = '\0';
}

const char *rl_config_algorithm_name(enum rl_algorithm a)
{
	return choice_name(&algorithm_choices, (int)a);
}

const char *rl_config_headers_name(enum rl_headers h)
{
	return choice_name(&headers_choices, (int)h);
}
