/* SPDX-License-Identifier: MIT */
/* test_config.c - rlshim.conf parsing: every key, every error class. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#define SEC 1000000000ull
#define MS 1000000ull

/* DESIGN.md "Configuration", verbatim. */
static const char design_ini[] =
	"[global]\n"
	"ports = 8080 8443          ; guarded local ports (default: every accepted TCP connection)\n"
	"shm = rlshim               ; segment name; processes with the same name share limits\n"
	"capacity = 65536           ; keys the segment holds (memory is fixed at creation)\n"
	"mode = enforce             ; enforce | dry-run (count and log, never deny)\n"
	"headers = ratelimit        ; ratelimit | ietf | x-ratelimit | none  (Retry-After is always sent)\n"
	"get_body = refuse          ; refuse | pass: a GET or HEAD with a body gets 400 (servers that never\n"
	"                           ; read such bodies, e.g. Python's http.server, would take them as requests)\n"
	"allow = 192.0.2.0/24 ::1   ; never limited, never banned (fail2ban's ignoreip); default none\n"
	"trusted_proxies = 10.0.0.0/8   ; only from these peers is client_ip_header believed; default none\n"
	"client_ip_header = X-Forwarded-For\n"
	"proxy_protocol = off       ; on: connections from trusted_proxies start with a PROXY v1/v2 header,\n"
	"                           ; which the shim reads for the client address and strips before the app\n"
	"ipv4_prefix = 32           ; clients are keyed by this prefix length\n"
	"ipv6_prefix = 64\n"
	"on_error = refuse          ; refuse | passthrough: bad config or unusable shm at start\n"
	"log = stderr               ; stderr | syslog\n"
	"log_level = info\n"
	"\n"
	"[redis]                    ; absent: local only\n"
	"url = redis://127.0.0.1:6379/0   ; also redis://user:pass@host:port/db and unix:///path\n"
	"timeout = 100ms\n"
	"sync_interval = 50ms\n"
	"prefix = rlshim:\n"
	"\n"
	"[xdp]                      ; absent: no XDP\n"
	"interfaces = eth0\n"
	"mode = auto                ; native | generic | auto\n"
	"\n"
	"[limit:api]\n"
	"match = *                  ; every request\n"
	"rate = 60/m\n"
	"key = ip\n"
	"\n"
	"[limit:sms]\n"
	"match = POST /sms          ; METHOD PATH; PATH may end in * (prefix); METHOD may be *\n"
	"rate = 3/m\n"
	"burst = 3                  ; default: the rate's count\n"
	"key = ip                   ; ip | header:NAME | global\n"
	"algorithm = token-bucket   ; token-bucket (GCRA) | fixed-window | sliding-window\n"
	"on_store_down = closed     ; open | closed (see Redis)\n"
	"plans = free:100/h paid:10000/h   ; per-key tariffs: the key's plan is read from the Redis hash\n"
	"                           ; <prefix>plans:<rule> (key -> plan name); unknown keys get `rate`\n"
	"maxretry = 10              ; ban after this many denials within findtime ...\n"
	"findtime = 1m\n"
	"bantime = 15m              ; ... for this long\n"
	"\n"
	"[limit:conn]\n"
	"match = accept             ; applies to new connections, at accept()\n"
	"rate = 20/s\n"
	"key = ip\n";

static struct rl_config *parse_ok(const char *text)
{
	struct rl_err err = { "" };
	struct rl_config *c = NULL;
	int rc = rl_config_parse(text, "x.conf", &c, &err);

	if (rc != 0)
		print_error("unexpected error %d: %s\n", rc, err.msg);
	assert_int_equal(rc, 0);
	assert_non_null(c);
	assert_string_equal(err.msg, "");
	return c;
}

static void expect_error(const char *text, const char *want)
{
	struct rl_err err = { "" };
	struct rl_config *c = (struct rl_config *)&err;
	int rc = rl_config_parse(text, "x.conf", &c, &err);

	if (rc != -EINVAL || strcmp(err.msg, want) != 0)
		print_error("--- config:\n%s--- got %d '%s'\n", text, rc, err.msg);
	assert_int_equal(rc, -EINVAL);
	assert_null(c);
	assert_string_equal(err.msg, want);
}

struct error_case {
	const char *text;
	const char *want;
};

static void expect_errors(const struct error_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++)
		expect_error(cases[i].text, cases[i].want);
}

#define EXPECT_ERRORS(cases) \
	expect_errors(cases, sizeof(cases) / sizeof(cases[0]))

static void assert_cidr(const struct rl_cidr_set *set, unsigned i,
			const char *want)
{
	char buf[RL_CIDR_STRLEN];

	assert_true(i < set->n);
	assert_int_equal(rl_cidr_format(&set->items[i], buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
}

/* ---- the defaults, as every test that meets them expects them ---- */

/* Every key with a single value at its default: the lists and the
 * sections' presence are the caller's to check. */
static void assert_default_values(const struct rl_config *c)
{
	assert_string_equal(c->shm, "rlshim");
	assert_int_equal(c->capacity, RL_CAPACITY_DEFAULT);
	assert_int_equal(c->mode, RL_MODE_ENFORCE);
	assert_int_equal(c->headers, RL_HEADERS_RATELIMIT);
	assert_int_equal(c->get_body, RL_GET_BODY_REFUSE);
	assert_string_equal(c->client_ip_header, "X-Forwarded-For");
	assert_false(c->proxy_protocol);
	assert_int_equal(c->ipv4_prefix, 32);
	assert_int_equal(c->ipv6_prefix, 64);
	assert_int_equal(c->on_error, RL_ON_ERROR_REFUSE);
	assert_int_equal(c->log, RL_LOG_STDERR);
	assert_int_equal(c->log_level, RL_LOG_INFO);
	assert_string_equal(c->redis_url, "redis://127.0.0.1:6379/0");
	assert_int_equal(c->redis_timeout_ns, 100 * MS);
	assert_int_equal(c->sync_interval_ns, 50 * MS);
	assert_string_equal(c->redis_prefix, "rlshim:");
	assert_int_equal(c->xdp_mode, RL_XDP_AUTO);
}

/* A file that says nothing: no lists, no [redis], no [xdp]. */
static void assert_global_defaults(const struct rl_config *c)
{
	assert_default_values(c);
	assert_int_equal(c->nports, 0);
	assert_int_equal(c->allow.n, 0);
	assert_int_equal(c->trusted_proxies.n, 0);
	assert_false(c->redis);
	assert_false(c->xdp);
	assert_int_equal(c->nifaces, 0);
}

/* A rule that gives its rate only (`period_ns`, `count`) and nothing else. */
static void assert_rule_defaults(const struct rl_rule_cfg *r,
				 uint64_t period_ns, uint32_t count)
{
	assert_int_equal(r->match, RL_MATCH_REQUEST);
	assert_string_equal(r->method, "");
	assert_string_equal(r->path, "");
	assert_false(r->path_prefix);
	assert_int_equal(r->rate.period_ns, period_ns);
	assert_int_equal(r->rate.count, count);
	assert_int_equal(r->rate.burst, count);
	assert_int_equal(r->algorithm, RL_ALGO_GCRA);
	assert_int_equal(r->key, RL_KEY_IP);
	assert_string_equal(r->header, "");
	assert_int_equal(r->on_store_down, RL_STORE_DOWN_OPEN);
	assert_int_equal(r->nplans, 0);
	assert_int_equal(r->maxretry, 0);
	assert_int_equal(r->findtime_ns, 600 * SEC);
	assert_int_equal(r->bantime_ns, 600 * SEC);
	assert_false(r->bantime_increment);
	assert_int_equal(r->bantime_max_ns, 7 * 86400 * SEC);
}

/* ---- a whole file ---- */

static void test_design_example(void **state)
{
	struct rl_config *c = parse_ok(design_ini);
	const struct rl_rule_cfg *r;

	(void)state;
	assert_string_equal(c->source, "x.conf");

	/* [global] */
	assert_int_equal(c->nports, 2);
	assert_int_equal(c->ports[0], 8080);
	assert_int_equal(c->ports[1], 8443);
	assert_int_equal(c->allow.n, 2);
	assert_cidr(&c->allow, 0, "192.0.2.0/24");
	assert_cidr(&c->allow, 1, "::1/128");
	assert_int_equal(c->trusted_proxies.n, 1);
	assert_cidr(&c->trusted_proxies, 0, "10.0.0.0/8");

	/* [redis] */
	assert_true(c->redis);

	/* [xdp] */
	assert_true(c->xdp);
	assert_int_equal(c->nifaces, 1);
	assert_string_equal(c->ifaces[0], "eth0");

	/* every other value the example spells out is the default */
	assert_int_equal(c->capacity, 65536);
	assert_default_values(c);

	assert_int_equal(c->nrules, 3);

	r = &c->rules[0];
	assert_string_equal(r->name, "api");
	assert_int_equal(r->line, 30);
	assert_rule_defaults(r, 60 * SEC, 60);

	r = &c->rules[1];
	assert_string_equal(r->name, "sms");
	assert_int_equal(r->line, 35);
	assert_int_equal(r->match, RL_MATCH_REQUEST);
	assert_string_equal(r->method, "POST");
	assert_string_equal(r->path, "/sms");
	assert_false(r->path_prefix);
	assert_int_equal(r->rate.period_ns, 60 * SEC);
	assert_int_equal(r->rate.count, 3);
	assert_int_equal(r->rate.burst, 3);
	assert_int_equal(r->key, RL_KEY_IP);
	assert_int_equal(r->algorithm, RL_ALGO_GCRA);
	assert_int_equal(r->on_store_down, RL_STORE_DOWN_CLOSED);
	assert_int_equal(r->nplans, 2);
	assert_string_equal(r->plans[0].name, "free");
	assert_int_equal(r->plans[0].rate.period_ns, 3600 * SEC);
	assert_int_equal(r->plans[0].rate.count, 100);
	assert_int_equal(r->plans[0].rate.burst, 100);
	assert_string_equal(r->plans[1].name, "paid");
	assert_int_equal(r->plans[1].rate.period_ns, 3600 * SEC);
	assert_int_equal(r->plans[1].rate.count, 10000);
	assert_int_equal(r->plans[1].rate.burst, 10000);
	assert_int_equal(r->maxretry, 10);
	assert_int_equal(r->findtime_ns, 60 * SEC);
	assert_int_equal(r->bantime_ns, 900 * SEC);
	assert_false(r->bantime_increment);
	assert_int_equal(r->bantime_max_ns, 7 * 86400 * SEC);

	r = &c->rules[2];
	assert_string_equal(r->name, "conn");
	assert_int_equal(r->line, 48);
	assert_int_equal(r->match, RL_MATCH_ACCEPT);
	assert_int_equal(r->rate.period_ns, SEC);
	assert_int_equal(r->rate.count, 20);
	assert_int_equal(r->rate.burst, 20);
	assert_int_equal(r->key, RL_KEY_IP);

	rl_config_free(c);
}

/* ---- defaults ---- */

/* What an outage does, as the agent's and the servers' lines say it. */
static void test_store_impact(void **state)
{
	struct rl_config *c = parse_ok(
		"[redis]\nurl = redis://127.0.0.1:6379\n"
		"[limit:login]\nrate = 5/m\non_store_down = closed\n"
		"[limit:site]\nrate = 5/m\n[limit:api]\nrate = 5/m\n");
	char buf[64];

	(void)state;
	rl_config_store_impact(c, buf, sizeof(buf));
	assert_string_equal(buf, " refusing=\"login\" local_share=\"site,api\"");
	rl_config_store_impact(c, buf, 20);
	assert_string_equal(buf, ""); /* too many names: said by neither */
	rl_config_free(c);
	c = parse_ok("[limit:site]\nrate = 5/m\n");
	rl_config_store_impact(c, buf, sizeof(buf));
	assert_string_equal(buf, " refusing=\"none\" local_share=\"site\"");
	rl_config_free(c);
}

static void test_default(void **state)
{
	struct rl_config *c = NULL;
	const struct rl_rule_cfg *r;

	(void)state;
	assert_int_equal(rl_config_default(&c), 0);
	assert_non_null(c);
	assert_string_equal(c->source, "");
	assert_global_defaults(c);
	assert_int_equal(c->nrules, 1);
	r = &c->rules[0];
	assert_string_equal(r->name, "default");
	assert_rule_defaults(r, 60 * SEC, 60);
	rl_config_free(c);
	rl_config_free(NULL);
}

static void test_parse_defaults(void **state)
{
	static const char *const texts[] = {
		"",
		"; nothing but a comment\n\n# and another\n",
		"[global]\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct rl_config *c = parse_ok(texts[i]);

		assert_global_defaults(c);
		assert_int_equal(c->nrules, 0);
		rl_config_free(c);
	}
}

static void test_minimal_rule_defaults(void **state)
{
	struct rl_config *c = parse_ok("[limit:a]\nrate = 10r/s\n");
	const struct rl_rule_cfg *r = &c->rules[0];

	(void)state;
	assert_int_equal(c->nrules, 1);
	assert_string_equal(r->name, "a");
	assert_int_equal(r->line, 1);
	assert_rule_defaults(r, SEC, 10);
	rl_config_free(c);
}

/* ---- values ---- */

static void test_global_values(void **state)
{
	struct rl_config *c = parse_ok(
		"[global]\n"
		"ports = 80,443, 8080\n"
		"shm = my_app-1.x\n"
		"capacity = 16\n"
		"mode = dry-run\n"
		"headers = x-ratelimit\n"
		"get_body = pass\n"
		"allow = none\n"
		"trusted_proxies = 10.1.2.3/8,2001:db8::/32 127.0.0.1\n"
		"client_ip_header = X-Real-IP\n"
		"proxy_protocol = yes\n"
		"ipv4_prefix = 24\n"
		"ipv6_prefix = 0\n"
		"on_error = passthrough\n"
		"log = syslog\n"
		"log_level = debug\n");

	(void)state;
	assert_int_equal(c->nports, 3);
	assert_int_equal(c->ports[0], 80);
	assert_int_equal(c->ports[1], 443);
	assert_int_equal(c->ports[2], 8080);
	assert_string_equal(c->shm, "my_app-1.x");
	assert_int_equal(c->capacity, 16);
	assert_int_equal(c->mode, RL_MODE_DRY_RUN);
	assert_int_equal(c->headers, RL_HEADERS_XRATELIMIT);
	assert_int_equal(c->get_body, RL_GET_BODY_PASS);
	assert_int_equal(c->allow.n, 0);
	assert_int_equal(c->trusted_proxies.n, 3);
	assert_cidr(&c->trusted_proxies, 0, "10.0.0.0/8");
	assert_cidr(&c->trusted_proxies, 1, "2001:db8::/32");
	assert_cidr(&c->trusted_proxies, 2, "127.0.0.1/32");
	assert_string_equal(c->client_ip_header, "X-Real-IP");
	assert_true(c->proxy_protocol);
	assert_int_equal(c->ipv4_prefix, 24);
	assert_int_equal(c->ipv6_prefix, 0);
	assert_int_equal(c->on_error, RL_ON_ERROR_PASSTHROUGH);
	assert_int_equal(c->log, RL_LOG_SYSLOG);
	assert_int_equal(c->log_level, RL_LOG_DEBUG);
	rl_config_free(c);
}

/* get_body: refuse by default, refuse or pass as given; a file changing
 * only it is a new configuration (a reload compares the whole struct). */
static void test_get_body(void **state)
{
	static const struct {
		const char *text;
		enum rl_get_body want;
	} cases[] = {
		{ "[limit:a]\nrate = 1/s\n", RL_GET_BODY_REFUSE },
		{ "[global]\n; by default\n[limit:a]\nrate = 1/s\n",
		  RL_GET_BODY_REFUSE },
		{ "[global]\nget_body = refuse\n[limit:a]\nrate = 1/s\n",
		  RL_GET_BODY_REFUSE },
		{ "[global]\nget_body = pass\n[limit:a]\nrate = 1/s\n",
		  RL_GET_BODY_PASS },
		{ "[global]\nget_body=pass ; comment\n[limit:a]\nrate = 1/s\n",
		  RL_GET_BODY_PASS },
	};
	struct rl_config *c[sizeof(cases) / sizeof(cases[0])];
	struct rl_config *def = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		c[i] = parse_ok(cases[i].text);
		assert_int_equal(c[i]->get_body, cases[i].want);
	}
	assert_int_equal(rl_config_default(&def), 0);
	assert_int_equal(def->get_body, RL_GET_BODY_REFUSE);
	rl_config_free(def);
	/* Refuse given or by default is the same configuration; pass is a
	 * change to apply. */
	assert_memory_equal(c[1], c[2], sizeof(*c[0]));
	assert_memory_not_equal(c[2], c[3], sizeof(*c[0]));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		rl_config_free(c[i]);

	expect_error("[global]\nget_body = allow\n",
		     "x.conf:2: bad get_body 'allow' (expected refuse or pass)");
	expect_error("[global]\nmode = enforce\nget_body = Pass\n",
		     "x.conf:3: bad get_body 'Pass' (expected refuse or pass)");
	expect_error("[global]\nget_body =\n",
		     "x.conf:2: bad get_body '' (expected refuse or pass)");
	expect_error("[limit:a]\nrate = 1/s\nget_body = pass\n",
		     "x.conf:3: unknown key 'get_body' in [limit:a]");
	expect_error("[global]\nget_body = pass\nget_body = refuse\n",
		     "x.conf:3: duplicate key 'get_body' (first at line 2)");
}

/* sync: async by default; strict decides in the store, so needs one. */
static void test_sync(void **state)
{
	struct rl_config *c;

	(void)state;
	c = parse_ok("[redis]\nurl = redis://127.0.0.1:6379/0\n"
		     "[limit:a]\nrate = 1/s\n"
		     "[limit:b]\nrate = 1/s\nsync = strict\n"
		     "[limit:c]\nrate = 1/s\nsync = async\n");
	assert_int_equal(c->rules[0].sync, RL_SYNC_ASYNC);
	assert_int_equal(c->rules[1].sync, RL_SYNC_STRICT);
	assert_int_equal(c->rules[2].sync, RL_SYNC_ASYNC);
	rl_config_free(c);
	/* [redis] after the rule is as good */
	c = parse_ok("[limit:b]\nrate = 1/s\nsync = strict\n[redis]\n");
	assert_int_equal(c->rules[0].sync, RL_SYNC_STRICT);
	rl_config_free(c);
	expect_error("[limit:a]\nrate = 1/s\n\n[limit:b]\nrate = 1/s\n"
		     "sync = strict\n",
		     "x.conf:6: sync = strict needs [redis]");
	expect_error("[limit:a]\nrate = 1/s\nsync = exact\n",
		     "x.conf:3: bad sync 'exact' (expected async or strict)");
	expect_error("[global]\nsync = strict\n",
		     "x.conf:2: unknown key 'sync' in [global]");
}

/* plans: a key's plan is read from the store, so they need one. */
static void test_plans_need_redis(void **state)
{
	struct rl_config *c;

	(void)state;
	c = parse_ok("[limit:a]\nrate = 1/s\nplans = free:1/m\n[redis]\n");
	assert_int_equal(c->rules[0].nplans, 1);
	rl_config_free(c);
	expect_error("[limit:a]\nrate = 1/s\n\n[limit:b]\nrate = 1/s\n"
		     "plans = free:1/m\n",
		     "x.conf:6: plans needs [redis] (each key's plan is read "
		     "from it)");
}

/* A CIDR with bits set past its prefix loads (masked), with a warning
 * naming file:line, as nginx -t warns of "low address bits". */
static void test_cidr_host_bits_warn(void **state)
{
	struct rl_config *c;

	(void)state;
	c = parse_ok("[global]\nallow = 10.0.0.0/8 ::1\n"
		     "trusted_proxies = 192.168.1.0/24\n[limit:a]\nrate = 1/s\n");
	assert_int_equal(c->nwarnings, 0);
	rl_config_free(c);
	c = parse_ok("[global]\nallow = ::1 10.0.0.1/8\n"
		     "  2001:db8::1/32\ntrusted_proxies = 127.0.0.1\n"
		     "[limit:a]\nrate = 1/s\n");
	assert_int_equal(c->nwarnings, 2);
	assert_string_equal(c->warnings[0], "x.conf:2: warning: allow "
			    "'10.0.0.1/8' has bits set past its prefix: it "
			    "means 10.0.0.0/8");
	assert_string_equal(c->warnings[1], "x.conf:3: warning: allow "
			    "'2001:db8::1/32' has bits set past its prefix: it "
			    "means 2001:db8::/32");
	assert_int_equal(c->allow.n, 3);
	rl_config_free(c);
}

/* rl_config_check: read as a reload reads, refused as a reload refuses. */
static void test_check_is_reload(void **state)
{
	char path[] = "/tmp/rlshim-check-XXXXXX";
	struct rl_config *c = (void *)1;
	struct rl_err err;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(rl_config_check(path, &c, &err), -EINVAL);
	assert_null(c);
	assert_true(strstr(err.msg, ": no [limit:*] rule (to lift every "
			   "limit on purpose, set mode = dry-run)") != NULL);
	assert_int_equal(write(fd, "[limit:a]\nrate = 1/s\n", 21), 21);
	assert_int_equal(rl_config_check(path, &c, &err), 0);
	assert_int_equal(c->nrules, 1);
	rl_config_free(c);
	close(fd);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rl_config_check(path, &c, &err), -ENOENT);
}

/* headers_on and count_status: the answer side. */
static void test_answers(void **state)
{
	struct rl_config *c;
	const struct rl_rule_cfg *r;

	(void)state;
	c = parse_ok("[limit:a]\nrate = 1/s\n");
	assert_int_equal(c->headers_on, RL_HEADERS_ON_DENIED);
	assert_false(c->rules[0].count_status_on);
	/* a rule without count_status charges every answer */
	assert_true(rl_rule_charges(&c->rules[0], 200));
	assert_true(rl_rule_charges(&c->rules[0], 0));
	rl_config_free(c);

	c = parse_ok("[global]\nheaders_on = all\n[limit:login]\n"
		     "match = POST /login\nrate = 5/10m\n"
		     "count_status = 401 403\n  5XX\n");
	assert_int_equal(c->headers_on, RL_HEADERS_ON_ALL);
	r = &c->rules[0];
	assert_true(r->count_status_on);
	for (unsigned st = 90; st < 620; st++)
		assert_int_equal(rl_rule_charges(r, st),
				 st == 401 || st == 403 || (st >= 500 && st <= 599));
	rl_config_free(c);

	c = parse_ok("[limit:a]\nrate = 1/s\ncount_status = 1xx 599\n");
	assert_true(rl_rule_charges(&c->rules[0], 100));
	assert_true(rl_rule_charges(&c->rules[0], 199));
	assert_false(rl_rule_charges(&c->rules[0], 200));
	assert_true(rl_rule_charges(&c->rules[0], 599));
	rl_config_free(c);

	expect_error("[global]\nheaders_on = allowed\n",
		     "x.conf:2: bad headers_on 'allowed' (expected denied or all)");
	expect_error("[limit:a]\nrate = 1/s\ncount_status = 401 6xx\n",
		     "x.conf:3: bad count_status '6xx' (expected statuses "
		     "100-599 or classes 1xx-5xx, e.g. 401 403 5xx)");
	expect_error("[limit:a]\nrate = 1/s\ncount_status = 99\n",
		     "x.conf:3: bad count_status '99' (expected statuses "
		     "100-599 or classes 1xx-5xx, e.g. 401 403 5xx)");
	expect_error("[limit:a]\nrate = 1/s\ncount_status = 4011\n",
		     "x.conf:3: bad count_status '4011' (expected statuses "
		     "100-599 or classes 1xx-5xx, e.g. 401 403 5xx)");
	expect_error("[limit:a]\nrate = 1/s\ncount_status =\n",
		     "x.conf:3: count_status needs at least one status");
	expect_error("[limit:a]\nmatch = accept\nrate = 1/s\n"
		     "count_status = 401\n",
		     "x.conf:4: count_status cannot be used with match = "
		     "accept (no answer at accept)");
	expect_error("[redis]\n[limit:a]\nrate = 1/s\nsync = strict\n"
		     "count_status = 401\n",
		     "x.conf:5: count_status cannot be used with sync = strict "
		     "(the store keeps what it admitted: nothing is given "
		     "back there)");
	expect_error("[global]\ncount_status = 401\n",
		     "x.conf:2: unknown key 'count_status' in [global]");
}

static void test_booleans(void **state)
{
	static const struct {
		const char *text;
		bool want;
	} cases[] = {
		{ "on", true },   { "off", false }, { "yes", true },
		{ "no", false },  { "true", true }, { "false", false },
		{ "1", true },    { "0", false },
	};
	char text[128];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rl_config *c;

		snprintf(text, sizeof(text),
			 "[limit:a]\nrate = 1/s\nbantime_increment = %s\n",
			 cases[i].text);
		c = parse_ok(text);
		assert_int_equal(c->rules[0].bantime_increment, cases[i].want);
		rl_config_free(c);
	}
}

static void test_redis_values(void **state)
{
	static const char *const urls[] = {
		"redis://cache.example.com",
		"redis://10.0.0.5:6380",
		"redis://user:secret@cache:6379/3",
		"redis://:secret@cache/0",
		"redis://[::1]:6379/1",
		"redis://host/",
		"unix:///run/redis/redis.sock",
	};
	char text[512];
	struct rl_config *c;

	(void)state;
	c = parse_ok("[redis]\n"
		     "timeout = 2s\n"
		     "sync_interval = 1ms\n"
		     "prefix =\n");
	assert_true(c->redis);
	assert_string_equal(c->redis_url, "redis://127.0.0.1:6379/0");
	assert_int_equal(c->redis_timeout_ns, 2 * SEC);
	assert_int_equal(c->sync_interval_ns, MS);
	assert_string_equal(c->redis_prefix, "");
	rl_config_free(c);

	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		snprintf(text, sizeof(text), "[redis]\nurl = %s\n", urls[i]);
		c = parse_ok(text);
		assert_string_equal(c->redis_url, urls[i]);
		rl_config_free(c);
	}
}

static void test_xdp_values(void **state)
{
	struct rl_config *c = parse_ok("[xdp]\n"
				       "interfaces = eth0 enp3s0f1, wlan0\n"
				       "mode = generic\n");

	(void)state;
	assert_true(c->xdp);
	assert_int_equal(c->nifaces, 3);
	assert_string_equal(c->ifaces[0], "eth0");
	assert_string_equal(c->ifaces[1], "enp3s0f1");
	assert_string_equal(c->ifaces[2], "wlan0");
	assert_int_equal(c->xdp_mode, RL_XDP_GENERIC);
	rl_config_free(c);
}

static void test_match_forms(void **state)
{
	static const struct {
		const char *match;
		enum rl_match kind;
		const char *method;
		const char *path;
		bool prefix;
		unsigned len, dir_len; /* path_len, path_dir_len */
	} cases[] = {
		{ "*", RL_MATCH_REQUEST, "", "", false, 0, 0 },
		{ "* *", RL_MATCH_REQUEST, "", "", false, 0, 0 },
		{ "accept", RL_MATCH_ACCEPT, "", "", false, 0, 0 },
		{ "POST /sms", RL_MATCH_REQUEST, "POST", "/sms", false, 4, 0 },
		{ "GET\t /api/*", RL_MATCH_REQUEST, "GET", "/api/", true, 5, 0 },
		{ "* /login", RL_MATCH_REQUEST, "", "/login", false, 6, 0 },
		{ "delete *", RL_MATCH_REQUEST, "delete", "", false, 0, 0 },
		{ "* /*", RL_MATCH_REQUEST, "", "/", true, 1, 0 },
		{ "PROPFIND /dav*", RL_MATCH_REQUEST, "PROPFIND", "/dav", true, 4, 0 },
		/* Paths are kept in the form requests are matched in. */
		{ "POST //sms", RL_MATCH_REQUEST, "POST", "/sms", false, 4, 0 },
		{ "POST /%73ms", RL_MATCH_REQUEST, "POST", "/sms", false, 4, 0 },
		{ "GET /a/../b/*", RL_MATCH_REQUEST, "GET", "/b/", true, 3, 0 },
		/* An exact path is compared without its trailing slashes; an
		 * index file's directory is kept beside it. */
		{ "* /sms/", RL_MATCH_REQUEST, "", "/sms/", false, 4, 0 },
		{ "* /", RL_MATCH_REQUEST, "", "/", false, 1, 0 },
		{ "* //", RL_MATCH_REQUEST, "", "/", false, 1, 0 },
		{ "* /index.php", RL_MATCH_REQUEST, "", "/index.php", false, 10, 1 },
		{ "* /a/b/index", RL_MATCH_REQUEST, "", "/a/b/index", false, 10, 4 },
		{ "* /a/index.cgi/", RL_MATCH_REQUEST, "", "/a/index.cgi/", false, 12, 2 },
		{ "* /a/index*", RL_MATCH_REQUEST, "", "/a/index", true, 8, 0 },
		{ "* /a/indexes", RL_MATCH_REQUEST, "", "/a/indexes", false, 10, 0 },
		{ "* /a/my.index.php", RL_MATCH_REQUEST, "", "/a/my.index.php", false, 15, 0 },
	};
	char text[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rl_config *c;
		const struct rl_rule_cfg *r;

		snprintf(text, sizeof(text), "[limit:m]\nmatch = %s\nrate = 1/s\n",
			 cases[i].match);
		c = parse_ok(text);
		r = &c->rules[0];
		assert_int_equal(r->match, cases[i].kind);
		assert_string_equal(r->method, cases[i].method);
		assert_string_equal(r->path, cases[i].path);
		assert_int_equal(r->path_prefix, cases[i].prefix);
		assert_int_equal(r->path_len, cases[i].len);
		assert_int_equal(r->path_dir_len, cases[i].dir_len);
		rl_config_free(c);
	}
}

static void test_rule_values(void **state)
{
	struct rl_config *c = parse_ok(
		"[limit:k.1]\n"
		"match = GET /v1/*\n"
		"rate = 100/hour\n"
		"burst = 500\n"
		"key = header:X-Api-Key\n"
		"plans = gold:5/s\n"  /* [redis] below */
		"maxretry = 1000000\n"
		"findtime = 30s\n"
		"bantime = 1h\n"
		"bantime_increment = on\n"
		"bantime_max = 2d\n"
		"[limit:fw]\n"
		"rate = 10/min\n"
		"algorithm = fixed-window\n"
		"key = global\n"
		"[limit:sw]\n"
		"rate = 1048575/day\n"
		"algorithm = sliding-window\n"
		"bantime = 30d\n"
		"[redis]\n");
	const struct rl_rule_cfg *r = &c->rules[0];

	(void)state;
	assert_int_equal(c->nrules, 3);
	assert_string_equal(r->name, "k.1");
	assert_string_equal(r->method, "GET");
	assert_string_equal(r->path, "/v1/");
	assert_true(r->path_prefix);
	assert_int_equal(r->rate.period_ns, 3600 * SEC);
	assert_int_equal(r->rate.count, 100);
	assert_int_equal(r->rate.burst, 500);
	assert_int_equal(r->key, RL_KEY_HEADER);
	assert_string_equal(r->header, "X-Api-Key");
	assert_int_equal(r->nplans, 1);
	assert_string_equal(r->plans[0].name, "gold");
	assert_int_equal(r->plans[0].rate.period_ns, SEC);
	assert_int_equal(r->plans[0].rate.count, 5);
	assert_int_equal(r->maxretry, 1000000);
	assert_int_equal(r->findtime_ns, 30 * SEC);
	assert_int_equal(r->bantime_ns, 3600 * SEC);
	assert_true(r->bantime_increment);
	assert_int_equal(r->bantime_max_ns, 2 * 86400 * SEC);

	r = &c->rules[1];
	assert_int_equal(r->algorithm, RL_ALGO_FIXED_WINDOW);
	assert_int_equal(r->key, RL_KEY_GLOBAL);
	assert_int_equal(r->rate.burst, 10);

	r = &c->rules[2];
	assert_int_equal(r->algorithm, RL_ALGO_SLIDING_WINDOW);
	assert_int_equal(r->rate.count, 1048575);
	/* bantime_max defaults to at least bantime */
	assert_int_equal(r->bantime_max_ns, 30 * 86400 * SEC);
	rl_config_free(c);
}

/* inih's syntax: "key: value", CRLF endings, a BOM, inline comments. */
static void test_syntax_variants(void **state)
{
	struct rl_config *c = parse_ok(
		"\xEF\xBB\xBF[global]\r\n"
		"shm: other ; a comment\r\n"
		"  ; an indented comment\r\n"
		"[limit:a] ; header comment\r\n"
		"rate = 5/s\r\n"
		"\r\n"
		"match = GET /x;y\r\n");

	(void)state;
	assert_string_equal(c->shm, "other");
	assert_int_equal(c->nrules, 1);
	assert_int_equal(c->rules[0].rate.count, 5);
	assert_string_equal(c->rules[0].path, "/x;y");
	rl_config_free(c);
}

/* ---- continuation lines ---- */

static void test_continuation_list(void **state)
{
	struct rl_config *c = parse_ok(
		"[global]\n"
		"ports = 80\n"
		"  443, 8080\n"
		"\t8443\n"
		"allow =\n"
		"    192.0.2.0/24\n"
		"    ; a comment inside the list\n"
		"    2001:db8::/48 ; inline\n"
		"[xdp]\n"
		"interfaces = eth0\n"
		"  eth1\n"
		"[limit:a]\n"
		"rate = 1/s\n"
		"plans = free:1/m\n"
		"        paid:100/m\n"
		"[redis]\n");

	(void)state;
	assert_int_equal(c->nports, 4);
	assert_int_equal(c->ports[0], 80);
	assert_int_equal(c->ports[1], 443);
	assert_int_equal(c->ports[2], 8080);
	assert_int_equal(c->ports[3], 8443);
	assert_int_equal(c->allow.n, 2);
	assert_cidr(&c->allow, 0, "192.0.2.0/24");
	assert_cidr(&c->allow, 1, "2001:db8::/48");
	assert_int_equal(c->nifaces, 2);
	assert_string_equal(c->ifaces[1], "eth1");
	assert_int_equal(c->rules[0].nplans, 2);
	assert_string_equal(c->rules[0].plans[1].name, "paid");
	rl_config_free(c);
}

static void test_continuation_scalar(void **state)
{
	static const struct error_case cases[] = {
		{ "[limit:a]\nrate = 1/s\nmatch = GET /x\n  /y\n",
		  "x.conf:4: key 'match' continued on an indented line" },
		{ "[global]\nshm = a\n\tb\n",
		  "x.conf:3: key 'shm' continued on an indented line" },
		/* an indented line continues the key even if it looks like
		 * a key or a section */
		{ "[limit:a]\nrate = 1/s\n  burst = 5\n",
		  "x.conf:3: key 'rate' continued on an indented line" },
		{ "[global]\nports = 80\n  [limit:a]\n",
		  "x.conf:3: bad port '[limit:a]' (expected 1..65535)" },
		{ "[global]\nports = 80\n  8o\n",
		  "x.conf:3: bad port '8o' (expected 1..65535)" },
	};
	struct rl_config *c;

	(void)state;
	EXPECT_ERRORS(cases);
	/* An indented key right after a header is a key, not a continuation. */
	c = parse_ok("[limit:a]\n   rate = 1/s\n");
	assert_int_equal(c->rules[0].rate.count, 1);
	rl_config_free(c);
}

/* ---- errors ---- */

static void test_error_unknown_key(void **state)
{
	static const struct error_case cases[] = {
		{ "[limit:sms]\nrat = 3/m\n",
		  "x.conf:2: unknown key 'rat' in [limit:sms]" },
		{ "[global]\nrate = 3/m\n",
		  "x.conf:2: unknown key 'rate' in [global]" },
		{ "[redis]\nhost = x\n", "x.conf:2: unknown key 'host' in [redis]" },
		{ "[xdp]\ninterfaces = eth0\nMode = auto\n",
		  "x.conf:3: unknown key 'Mode' in [xdp]" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_unknown_section(void **state)
{
	static const struct error_case cases[] = {
		{ "[global]\n\n[limt:api]\n", "x.conf:3: unknown section [limt:api]" },
		{ "[limt:api]\nrate = 1/s\n", "x.conf:1: unknown section [limt:api]" },
		{ "[Global]\n", "x.conf:1: unknown section [Global]" },
		{ "[]\n", "x.conf:1: unknown section []" },
		{ "[limit:]\n",
		  "x.conf:1: bad rule name '' (expected 1..31 of A-Z a-z 0-9 _ . -)" },
		{ "[limit:a b]\n",
		  "x.conf:1: bad rule name 'a b' (expected 1..31 of A-Z a-z 0-9 _ . -)" },
		{ "[limit:abcdefghijabcdefghijabcdefghijKL]\n",
		  "x.conf:1: bad rule name 'abcdefghijabcdefghijabcdefghijKL' "
		  "(expected 1..31 of A-Z a-z 0-9 _ . -)" },
		{ "[global\n", "x.conf:1: unterminated section header" },
		{ "[global] x\n", "x.conf:1: unexpected text after ']'" },
		{ "[global]\n[redis]\n[global]\n",
		  "x.conf:3: duplicate section [global] (first at line 1)" },
		{ "[xdp]\ninterfaces = lo\n[redis]\n[xdp]\n",
		  "x.conf:4: duplicate section [xdp] (first at line 1)" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_key_outside_section(void **state)
{
	static const struct error_case cases[] = {
		{ "rate = 1/s\n[limit:a]\nrate = 1/s\n",
		  "x.conf:1: key 'rate' outside any section" },
		{ "; comment\n\nports = 80\n",
		  "x.conf:3: key 'ports' outside any section" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_syntax(void **state)
{
	static const struct error_case cases[] = {
		{ "[global]\nports 80\n",
		  "x.conf:2: expected 'key = value' or '[section]'" },
		{ "[global]\n= 80\n", "x.conf:2: missing key name before '='" },
		{ "[global]\nshm ; = x\n",
		  "x.conf:2: expected 'key = value' or '[section]'" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_bad_rate(void **state)
{
	static const struct error_case cases[] = {
		{ "[limit:a]\n\nrate = 10/x\n",
		  "x.conf:3: bad rate '10/x' (expected N/s, N/m, N/h or N/d, or N/10m)" },
		{ "[limit:a]\nrate = 0/s\n",
		  "x.conf:2: bad rate '0/s' (expected N/s, N/m, N/h or N/d, or N/10m)" },
		{ "[limit:a]\nrate = 10\n",
		  "x.conf:2: bad rate '10' (expected N/s, N/m, N/h or N/d, or N/10m)" },
		{ "[limit:a]\nrate = 10/ms\n",
		  "x.conf:2: bad rate '10/ms' (expected N/s, N/m, N/h or N/d, or N/10m)" },
		{ "[limit:a]\nrate = 4294967296/d\n", "x.conf:2: rate too large" },
		{ "[limit:a]\nrate = 1/s\nplans = free:10/x\n",
		  "x.conf:3: bad plan 'free:10/x' (expected N/s, N/m, N/h or N/d, or N/10m)" },
		{ "[limit:a]\nrate = 1/s\nplans = free\n",
		  "x.conf:3: bad plan 'free' (expected NAME:RATE, e.g. free:100/h)" },
		{ "[limit:a]\nrate = 1/s\nplans = a:1/s b:2/s a:3/s\n",
		  "x.conf:3: duplicate plan 'a'" },
		{ "[limit:a]\nrate = 1/s\nplans = a:1/s b:1/s c:1/s d:1/s e:1/s\n"
		  "  f:1/s g:1/s h:1/s i:1/s\n",
		  "x.conf:4: too many plans (max 8)" },
		{ "[limit:a]\nkey = ip\n", "x.conf:1: [limit:a] needs a rate" },
		/* the GCRA's bucket depth must stay below 2^62 ns */
		{ "[limit:a]\nrate = 1/d\nburst = 100000\n",
		  "x.conf:3: rate too large" },
		{ "[limit:a]\nrate = 1048576/s\nalgorithm = sliding-window\n",
		  "x.conf:2: sliding-window allows at most 1048575 requests per period" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_bad_duration(void **state)
{
	static const struct error_case cases[] = {
		{ "[limit:a]\nrate = 1/s\nbantime = 10x\n",
		  "x.conf:3: bad bantime '10x' (expected a duration: 100ms, 30s, "
		  "10m, 1h or 1d)" },
		{ "[limit:a]\nrate = 1/s\nfindtime = 1.5m\n",
		  "x.conf:3: bad findtime '1.5m' (expected a duration: 100ms, 30s, "
		  "10m, 1h or 1d)" },
		{ "[redis]\ntimeout = 0ms\n",
		  "x.conf:2: bad timeout '0ms' (expected a duration above 0)" },
		{ "[redis]\nsync_interval = 2m\n",
		  "x.conf:2: bad sync_interval '2m' (expected 1ms..1m)" },
		{ "[redis]\ntimeout = 99999999999d\n",
		  "x.conf:2: bad timeout '99999999999d' (too large)" },
		{ "[limit:a]\nrate = 1/s\nbantime = 1h\nbantime_max = 30m\n",
		  "x.conf:4: bantime_max must be at least bantime" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_duplicate_rule(void **state)
{
	static const struct error_case cases[] = {
		{ "[global]\n[limit:sms]\nrate = 1/s\n[limit:api]\nrate = 1/s\n"
		  "\n[limit:sms]\nrate = 2/s\n",
		  "x.conf:7: duplicate rule [limit:sms] (first at line 2)" },
		/* empty duplicate still counts */
		{ "[limit:a]\nrate = 1/s\n[limit:a]\n",
		  "x.conf:3: duplicate rule [limit:a] (first at line 1)" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_duplicate_key(void **state)
{
	static const struct error_case cases[] = {
		{ "[limit:a]\nrate = 1/s\nkey = ip\nrate = 2/s\n",
		  "x.conf:4: duplicate key 'rate' (first at line 2)" },
		{ "[global]\nports = 80\nports = 81\n",
		  "x.conf:3: duplicate key 'ports' (first at line 2)" },
	};
	struct rl_config *c;

	(void)state;
	EXPECT_ERRORS(cases);
	/* the same key in two rules is fine */
	c = parse_ok("[limit:a]\nrate = 1/s\n[limit:b]\nrate = 1/s\n");
	rl_config_free(c);
}

static void test_error_burst_window(void **state)
{
	static const struct error_case cases[] = {
		{ "[limit:a]\nrate = 10/m\nburst = 20\nalgorithm = fixed-window\n",
		  "x.conf:3: burst applies to algorithm = token-bucket only" },
		{ "[limit:a]\nalgorithm = sliding-window\nburst = 20\nrate = 10/m\n",
		  "x.conf:3: burst applies to algorithm = token-bucket only" },
		{ "[limit:a]\nrate = 10/m\nburst = 0\n",
		  "x.conf:3: bad burst '0' (expected 1..4294967295)" },
		{ "[limit:a]\nrate = 10/m\nalgorithm = leaky\n",
		  "x.conf:3: bad algorithm 'leaky' (expected token-bucket, "
		  "fixed-window or sliding-window)" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_header_key_accept(void **state)
{
	static const struct error_case cases[] = {
		{ "[limit:a]\nmatch = accept\nrate = 1/s\nkey = header:X-Api-Key\n",
		  "x.conf:4: key = header:X-Api-Key cannot be used with match = "
		  "accept (no headers at accept)" },
		{ "[limit:a]\nrate = 1/s\nkey = header:\n",
		  "x.conf:3: bad key 'header:' (expected ip, global, header:NAME, cookie:NAME or jwt:CLAIM)" },
		{ "[limit:a]\nrate = 1/s\nkey = header:a b\n",
		  "x.conf:3: bad key 'header:a b' (expected ip, global, header:NAME, cookie:NAME or jwt:CLAIM)" },
		{ "[limit:a]\nrate = 1/s\nkey = cookie\n",
		  "x.conf:3: bad key 'cookie' (expected ip, global, header:NAME, cookie:NAME or jwt:CLAIM)" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

/* Requests are parsed for at most RL_MAX_KEY_HEADERS header names: the
 * key headers and, where a proxy is trusted, client_ip_header. */
static void test_error_key_headers(void **state)
{
	char text[2048];
	size_t n = 0;
	struct rl_config *c;

	(void)state;
	n += (size_t)snprintf(text + n, sizeof(text) - n,
			      "[global]\ntrusted_proxies = 10.0.0.0/8\n");
	for (int i = 0; i < 7; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n,
				      "[limit:h%d]\nrate = 1/s\nkey = header:X-K%d\n",
				      i, i);
	/* 7 and X-Forwarded-For: 8, at the limit; the same name again in
	 * another case is no new one. */
	n += (size_t)snprintf(text + n, sizeof(text) - n,
			      "[limit:again]\nrate = 1/s\nkey = header:x-k3\n");
	c = parse_ok(text);
	rl_config_free(c);
	snprintf(text + n, sizeof(text) - n,
		 "[limit:ninth]\nrate = 1/s\nkey = header:X-Nine\n");
	expect_error(text, "x.conf:27: [limit:ninth]: too many distinct key "
		     "headers (8 at most, counting client_ip_header)");
}

static void test_error_bad_match(void **state)
{
	static const struct error_case cases[] = {
		{ "[limit:a]\nmatch = GET\n",
		  "x.conf:2: bad match 'GET' (expected *, accept or METHOD PATH)" },
		{ "[limit:a]\nmatch = GET /a /b\n",
		  "x.conf:2: bad match 'GET /a /b' (expected *, accept or METHOD PATH)" },
		{ "[limit:a]\nmatch = GET api\n",
		  "x.conf:2: bad match 'GET api' (PATH must be * or start with '/')" },
		{ "[limit:a]\nmatch = GET /a?b=1\n",
		  "x.conf:2: bad match 'GET /a?b=1' (PATH has no query, fragment or "
		  "control characters)" },
		{ "[limit:a]\nmatch = GET /a/*/b\n",
		  "x.conf:2: bad match 'GET /a/*/b' ('*' only at the end of PATH)" },
		{ "[limit:a]\nmatch = G(T /a\n",
		  "x.conf:2: bad match 'G(T /a' (METHOD must be * or a token of at "
		  "most 15 characters)" },
		{ "[limit:a]\nmatch = ABCDEFGHIJKLMNOP /a\n",
		  "x.conf:2: bad match 'ABCDEFGHIJKLMNOP /a' (METHOD must be * or a "
		  "token of at most 15 characters)" },
		{ "[limit:a]\nmatch = GET /a%zz\n",
		  "x.conf:2: bad match 'GET /a%zz' (PATH has bad percent-encoding)" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_too_many_rules(void **state)
{
	size_t size = 80 * 32 + 1, off = 0;
	char *text = malloc(size);
	int i;

	(void)state;
	assert_non_null(text);
	for (i = 0; i < RL_MAX_RULES + 1; i++)
		off += (size_t)snprintf(text + off, size - off,
					"[limit:r%d]\nrate = 1/s\n", i);
	/* rule 65 starts at line 129 */
	expect_error(text, "x.conf:129: too many rules (max 64)");

	/* exactly 64 is fine */
	text[off - strlen("[limit:r64]\nrate = 1/s\n")] = '\0';
	struct rl_config *c = parse_ok(text);

	assert_int_equal(c->nrules, RL_MAX_RULES);
	assert_string_equal(c->rules[63].name, "r63");
	rl_config_free(c);
	free(text);
}

static void test_error_long_line(void **state)
{
	char text[4096];
	int n;

	(void)state;
	n = snprintf(text, sizeof(text), "[global]\n; short\nshm = ");
	memset(text + n, 'a', 2000);
	snprintf(text + n + 2000, sizeof(text) - (size_t)n - 2000,
		 "\nmode = nope\n");
	expect_error(text, "x.conf:3: line too long (max 1024 bytes)");

	/* 1024 bytes is still fine (a comment, so the value is no issue) */
	memset(text, ';', 1024);
	snprintf(text + 1024, sizeof(text) - 1024, "\n[global]\nmode = x\n");
	expect_error(text,
		     "x.conf:3: bad mode 'x' (expected enforce or dry-run)");
	memset(text, ';', 1025);
	snprintf(text + 1025, sizeof(text) - 1025, "\n[global]\nmode = x\n");
	expect_error(text, "x.conf:1: line too long (max 1024 bytes)");
}

static void test_error_bad_cidr(void **state)
{
	static const struct error_case cases[] = {
		{ "[global]\nallow = 10.0.0.0/33\n",
		  "x.conf:2: bad allow '10.0.0.0/33' (expected ADDRESS[/PREFIX] "
		  "items or none)" },
		{ "[global]\ntrusted_proxies = 10.0.0.1\n  example.com\n",
		  "x.conf:3: bad trusted_proxies 'example.com' (expected "
		  "ADDRESS[/PREFIX] items or none)" },
		{ "[global]\nallow = none 10.0.0.0/8\n",
		  "x.conf:2: 'none' must be the only item of allow" },
		{ "[global]\nallow = 10.0.0.0/8\n  none\n",
		  "x.conf:3: 'none' must be the only item of allow" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_bad_port(void **state)
{
	static const struct error_case cases[] = {
		{ "[global]\nports = 8080 0\n",
		  "x.conf:2: bad port '0' (expected 1..65535)" },
		{ "[global]\nports = 65536\n",
		  "x.conf:2: bad port '65536' (expected 1..65535)" },
		{ "[global]\nports = +80\n",
		  "x.conf:2: bad port '+80' (expected 1..65535)" },
		{ "[global]\nports = http\n",
		  "x.conf:2: bad port 'http' (expected 1..65535)" },
		{ "[global]\nports = 80 443 80\n", "x.conf:2: duplicate port 80" },
	};
	char text[1024];
	size_t off;

	(void)state;
	EXPECT_ERRORS(cases);
	off = (size_t)snprintf(text, sizeof(text), "[global]\nports =");
	for (int i = 1; i <= RL_MAX_PORTS + 1; i++)
		off += (size_t)snprintf(text + off, sizeof(text) - off, " %d", i);
	snprintf(text + off, sizeof(text) - off, "\n");
	expect_error(text, "x.conf:2: too many ports (max 64)");
}

static void test_error_integers(void **state)
{
	static const struct error_case cases[] = {
		{ "[global]\ncapacity = 15\n",
		  "x.conf:2: bad capacity '15' (expected 16..16777216)" },
		{ "[global]\ncapacity = 16777217\n",
		  "x.conf:2: bad capacity '16777217' (expected 16..16777216)" },
		{ "[global]\ncapacity = +1024\n",
		  "x.conf:2: bad capacity '+1024' (expected 16..16777216)" },
		{ "[global]\ncapacity = 0x100\n",
		  "x.conf:2: bad capacity '0x100' (expected 16..16777216)" },
		{ "[global]\ncapacity = 99999999999999999999999\n",
		  "x.conf:2: bad capacity '99999999999999999999999' (expected "
		  "16..16777216)" },
		{ "[global]\nipv4_prefix = 33\n",
		  "x.conf:2: bad ipv4_prefix '33' (expected 0..32)" },
		{ "[global]\nipv6_prefix = -1\n",
		  "x.conf:2: bad ipv6_prefix '-1' (expected 0..128)" },
		{ "[limit:a]\nrate = 1/s\nmaxretry = 3\n[global]\nipv6_prefix = 0\n",
		  "x.conf:1: [limit:a] has maxretry, but ipv6_prefix = 0 would "
		  "make each of its bans cover every IPv6 client" },
		{ "[limit:a]\nrate = 1/s\nmaxretry = 1000001\n",
		  "x.conf:3: bad maxretry '1000001' (expected 0..1000000)" },
		{ "[limit:a]\nrate = 1/s\nburst = 4294967296\n",
		  "x.conf:3: bad burst '4294967296' (expected 1..4294967295)" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_enums(void **state)
{
	static const struct error_case cases[] = {
		{ "[global]\nmode = Enforce\n",
		  "x.conf:2: bad mode 'Enforce' (expected enforce or dry-run)" },
		{ "[global]\nheaders = draft\n",
		  "x.conf:2: bad headers 'draft' (expected ratelimit, ietf, "
		  "x-ratelimit or none)" },
		{ "[global]\nproxy_protocol = v2\n",
		  "x.conf:2: bad proxy_protocol 'v2' (expected on or off)" },
		{ "[global]\nget_body = ignore\n",
		  "x.conf:2: bad get_body 'ignore' (expected refuse or pass)" },
		{ "[global]\non_error = ignore\n",
		  "x.conf:2: bad on_error 'ignore' (expected refuse or passthrough)" },
		{ "[global]\nlog = file\n",
		  "x.conf:2: bad log 'file' (expected stderr or syslog)" },
		{ "[global]\nlog_level = trace\n",
		  "x.conf:2: bad log_level 'trace' (expected error, warn, info or "
		  "debug)" },
		{ "[xdp]\ninterfaces = eth0\nmode = skb\n",
		  "x.conf:3: bad mode 'skb' (expected native, generic or auto)" },
		{ "[limit:a]\nrate = 1/s\non_store_down = fail\n",
		  "x.conf:3: bad on_store_down 'fail' (expected open or closed)" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_names(void **state)
{
	static const struct error_case cases[] = {
		{ "[global]\nshm = .hidden\n",
		  "x.conf:2: bad shm '.hidden' (expected 1..63 of A-Z a-z 0-9 _ . -, "
		  "not starting with '.')" },
		{ "[global]\nshm = a/b\n",
		  "x.conf:2: bad shm 'a/b' (expected 1..63 of A-Z a-z 0-9 _ . -, "
		  "not starting with '.')" },
		{ "[global]\nclient_ip_header = X Forwarded\n",
		  "x.conf:2: bad client_ip_header 'X Forwarded' (expected a header "
		  "field name)" },
		{ "[redis]\nprefix = a b\n",
		  "x.conf:2: bad prefix 'a b' (expected at most 63 printable "
		  "characters and no spaces)" },
		{ "[xdp]\ninterfaces = eth0 a/b\n",
		  "x.conf:2: bad interface 'a/b' (expected 1..15 characters, no '/' "
		  "or ':')" },
		{ "[xdp]\ninterfaces = abcdefghijklmnop\n",
		  "x.conf:2: bad interface 'abcdefghijklmnop' (expected 1..15 "
		  "characters, no '/' or ':')" },
		{ "[xdp]\ninterfaces = eth0 eth0\n",
		  "x.conf:2: duplicate interface 'eth0'" },
		{ "[xdp]\nmode = native\n", "x.conf:1: [xdp] needs interfaces" },
		{ "[global]\n[xdp]\n", "x.conf:2: [xdp] needs interfaces" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_bad_url(void **state)
{
	static const char *const urls[] = {
		"http://cache:6379",
		"redis://",
		"redis://:6379",
		"redis://host:port",
		"redis://host:0",
		"redis://host:6379/db",
		"redis://user@",
		"redis://[]:1",
		"unix://",
		"unix:///",
		"unix://relative/path",
		/* The agent's own parser checks them now: these passed the
		 * configuration and then failed in the agent ("bad redis url"). */
		"redis://a%zzb@host",
		"redis://pw%00@host",
		"redis://pw%4@host",
		"redis://::1:6379",
		"redis://ho,st:1",
		"redis://host:6379/1x",
		"redis://host:6379/+1",
	};
	char text[256], want[384];

	(void)state;
	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		snprintf(text, sizeof(text), "[redis]\nurl = %s\n", urls[i]);
		snprintf(want, sizeof(want),
			 "x.conf:2: bad url '%s' (expected redis://[user:pass@]"
			 "host[:port][/db] or unix:///path)", urls[i]);
		expect_error(text, want);
	}
}

/* key = cookie:NAME and jwt:CLAIM: names as RFC 6265 and JSON spell them,
 * refused at accept, counted among the key headers as Cookie and
 * Authorization. */
static void test_user_keys(void **state)
{
	static const struct error_case cases[] = {
		{ "[limit:a]\nrate = 1/s\nkey = cookie:\n",
		  "x.conf:3: bad key 'cookie:' (expected ip, global, header:NAME, cookie:NAME or jwt:CLAIM)" },
		{ "[limit:a]\nrate = 1/s\nkey = cookie:a;b\n",
		  "x.conf:3: bad key 'cookie:a;b' (expected ip, global, header:NAME, cookie:NAME or jwt:CLAIM)" },
		{ "[limit:a]\nrate = 1/s\nkey = cookie:a=b\n",
		  "x.conf:3: bad key 'cookie:a=b' (expected ip, global, header:NAME, cookie:NAME or jwt:CLAIM)" },
		{ "[limit:a]\nrate = 1/s\nkey = jwt:\n",
		  "x.conf:3: bad key 'jwt:' (expected ip, global, header:NAME, cookie:NAME or jwt:CLAIM)" },
		{ "[limit:a]\nrate = 1/s\nkey = jwt:a\"b\n",
		  "x.conf:3: bad key 'jwt:a\"b' (expected ip, global, header:NAME, cookie:NAME or jwt:CLAIM)" },
		{ "[limit:a]\nrate = 1/s\nkey = jwt:a\\b\n",
		  "x.conf:3: bad key 'jwt:a\\b' (expected ip, global, header:NAME, cookie:NAME or jwt:CLAIM)" },
		{ "[limit:a]\nmatch = accept\nrate = 1/s\nkey = cookie:sid\n",
		  "x.conf:4: key = cookie:sid cannot be used with match = accept (no headers at accept)" },
		{ "[limit:a]\nmatch = accept\nrate = 1/s\nkey = jwt:sub\n",
		  "x.conf:4: key = jwt:sub cannot be used with match = accept (no headers at accept)" },
	};
	struct rl_config *c;

	(void)state;
	EXPECT_ERRORS(cases);
	c = parse_ok("[limit:a]\nrate = 1/s\nkey = cookie:__Host-session_id\n"
		     "[limit:b]\nrate = 1/s\nkey = jwt:sub\n"
		     "[limit:c]\nrate = 1/s\nkey = jwt:https://example.com/tenant\n"
		     "[limit:d]\nrate = 1/s\nkey = header:Cookie\n");
	assert_int_equal(c->rules[0].key, RL_KEY_COOKIE);
	assert_string_equal(c->rules[0].header, "__Host-session_id");
	assert_string_equal(rl_config_key_header(&c->rules[0]), "Cookie");
	assert_string_equal(rl_config_key_kind(&c->rules[0]), "cookie");
	assert_int_equal(c->rules[1].key, RL_KEY_JWT);
	assert_string_equal(c->rules[1].header, "sub");
	assert_string_equal(rl_config_key_header(&c->rules[1]), "Authorization");
	assert_int_equal(c->rules[1].jwt_secret_len, 0);
	assert_string_equal(c->rules[2].header, "https://example.com/tenant");
	assert_null(rl_config_key_header(&(struct rl_rule_cfg){ .key = RL_KEY_IP }));
	rl_config_free(c);

	/* a decode slot per distinct claim, shared by the rules that read
	 * it; a fifth distinct one is refused at its section */
	c = parse_ok("[limit:a]\nrate = 1/s\nkey = jwt:sub\n"
		     "[limit:b]\nrate = 1/s\nkey = jwt:org\n"
		     "[limit:c]\nrate = 1/s\nkey = jwt:sub\n"
		     "[limit:d]\nrate = 1/s\nkey = jwt:x\n"
		     "[limit:e]\nrate = 1/s\nkey = jwt:y\n");
	assert_int_equal(c->rules[0].jwt_slot, 0);
	assert_int_equal(c->rules[1].jwt_slot, 1);
	assert_int_equal(c->rules[2].jwt_slot, 0);
	assert_int_equal(c->rules[3].jwt_slot, 2);
	assert_int_equal(c->rules[4].jwt_slot, 3);
	rl_config_free(c);
	expect_error("[limit:a]\nrate = 1/s\nkey = jwt:a\n"
		     "[limit:b]\nrate = 1/s\nkey = jwt:b\n"
		     "[limit:c]\nrate = 1/s\nkey = jwt:c\n"
		     "[limit:d]\nrate = 1/s\nkey = jwt:d\n"
		     "[limit:e]\nrate = 1/s\nkey = jwt:e\n",
		     "x.conf:13: [limit:e]: too many distinct jwt keys (4 claims "
		     "or secrets at most)");
}

/* A jwt_secret file in a fresh directory, `mode`, holding `text`. */
static void secret_file(const char *dir, const char *name, const char *text,
			size_t len, mode_t mode)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

/* jwt_secret = FILE: read at load, relative to the configuration's
 * directory, one final newline dropped; refused (file:line) when missing,
 * empty, too long, not a regular file, writable by group or others, or
 * owned by another user; only with key = jwt:CLAIM. */
static void test_jwt_secret(void **state)
{
	char dir[] = "/tmp/rl-jwt-XXXXXX", conf[600], text[1024], want[1200];
	struct rl_err err = { "" };
	struct rl_config *c = NULL;
	char big[RL_JWT_SECRET_MAX + 2];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/rlshim.conf", dir);
	secret_file(dir, "k", "s3cr3t\n", 7, 0600);
	secret_file(dir, "crlf", "ab\r\n", 4, 0400);
	secret_file(dir, "two", "ab\n\n", 4, 0644);
	secret_file(dir, "empty", "\n", 1, 0600);
	secret_file(dir, "g", "x", 1, 0620);
	secret_file(dir, "o", "x", 1, 0602);
	memset(big, 'k', sizeof(big));
	secret_file(dir, "big", big, RL_JWT_SECRET_MAX + 1, 0600);
	secret_file(dir, "max", big, RL_JWT_SECRET_MAX, 0600);

	/* relative to the file's directory; the newline is not the key */
	snprintf(text, sizeof(text), "[limit:a]\nrate = 1/s\nkey = jwt:sub\n"
		 "jwt_secret = k\n[limit:b]\nrate = 1/s\nkey = jwt:sub\n"
		 "jwt_secret = %s/crlf\n[limit:c]\nrate = 1/s\nkey = jwt:sub\n"
		 "jwt_secret = two\n[limit:d]\nrate = 1/s\nkey = jwt:sub\n"
		 "jwt_secret = max\n", dir);
	assert_int_equal(rl_config_parse(text, conf, &c, &err), 0);
	assert_int_equal(c->rules[0].jwt_secret_len, 6);
	assert_memory_equal(c->rules[0].jwt_secret, "s3cr3t", 6);
	assert_int_equal(c->rules[1].jwt_secret_len, 2);
	assert_memory_equal(c->rules[1].jwt_secret, "ab", 2);
	assert_int_equal(c->rules[2].jwt_secret_len, 3);  /* one newline only */
	assert_int_equal(c->rules[3].jwt_secret_len, RL_JWT_SECRET_MAX);
	/* the three short keys are warned of, not refused */
	assert_int_equal(c->nwarnings, 3);
	snprintf(want, sizeof(want), "%s:4: warning: jwt_secret %s/k: 6 bytes, "
		 "shorter than the 32 RFC 7518 asks of an HS256 key", conf, dir);
	assert_string_equal(c->warnings[0], want);
	rl_config_free(c);

	static const struct {
		const char *file, *why;
	} bad[] = {
		{ "none", "No such file or directory" },
		{ "empty", "empty" },
		{ "big", "over 256 bytes" },
		{ ".", "not a regular file" },
		{ "g", "writable by its group (who can write it can mint tokens)" },
		{ "o", "writable by others (who can write it can mint tokens)" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "[limit:a]\nrate = 1/s\nkey = jwt:sub\n"
			 "jwt_secret = %s\n", bad[i].file);
		c = (struct rl_config *)&err;
		assert_int_equal(rl_config_parse(text, conf, &c, &err), -EINVAL);
		assert_null(c);
		snprintf(want, sizeof(want), "%s:4: jwt_secret %s/%s: %s", conf, dir,
			 bad[i].file, bad[i].why);
		assert_string_equal(err.msg, want);
	}
	/* another user's file (root can make one; CI runs as root) */
	if (geteuid() == 0) {
		char path[600];

		snprintf(path, sizeof(path), "%s/k", dir);
		assert_int_equal(chown(path, 65534, 65534), 0);
		snprintf(text, sizeof(text), "[limit:a]\nrate = 1/s\nkey = jwt:sub\n"
			 "jwt_secret = k\n");
		assert_int_equal(rl_config_parse(text, conf, &c, &err), -EINVAL);
		snprintf(want, sizeof(want), "%s:4: jwt_secret %s/k: owned by another "
			 "user than root or this one (its owner could mint tokens)",
			 conf, dir);
		assert_string_equal(err.msg, want);
	} else if (getenv("CI")) {
		fail_msg("test_jwt_secret needs root in CI (another user's file)");
	} else {
		print_message("skipped: another user's jwt_secret (needs root)\n");
	}
	/* only with a jwt key */
	snprintf(text, sizeof(text), "[limit:a]\nrate = 1/s\nkey = cookie:sid\n"
		 "jwt_secret = %s/crlf\n", dir);
	assert_int_equal(rl_config_parse(text, conf, &c, &err), -EINVAL);
	snprintf(want, sizeof(want), "%s:4: jwt_secret needs key = jwt:CLAIM", conf);
	assert_string_equal(err.msg, want);

	snprintf(text, sizeof(text), "rm -rf '%s'", dir);
	assert_int_equal(system(text), 0);
}

/* redis-sentinel:// URLs: accepted verbatim, or refused with their own form. */
static void test_sentinel_url(void **state)
{
	static const char *const good[] = {
		"redis-sentinel://127.0.0.1:26379/mymaster",
		"redis-sentinel://a:1,b,[::1]:3/m/2",
		"redis-sentinel://user:pw@a:1,b:2/m/",
		"redis-sentinel://a,b,c,d,e,f,g,h/m",
	};
	static const char *const bad[] = {
		"redis-sentinel://",
		"redis-sentinel://h:26379",
		"redis-sentinel://h:26379/",
		"redis-sentinel:///m",
		"redis-sentinel://h:1,/m",
		"redis-sentinel://h:1,,h:2/m",
		"redis-sentinel://h:0/m",
		"redis-sentinel://[]:1/m",
		"redis-sentinel://h:1/m/db",
		"redis-sentinel://h:1//0",
		"redis-sentinel://a,b,c,d,e,f,g,h,i/m",
		"redis-sentinel://u:%zz@h:1/m",
		"redis-sentinel://::1:26379/m",
	};
	char text[256], want[384];
	struct rl_config *c;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(text, sizeof(text), "[redis]\nurl = %s\n", good[i]);
		c = parse_ok(text);
		assert_string_equal(c->redis_url, good[i]);
		rl_config_free(c);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "[redis]\nurl = %s\n", bad[i]);
		snprintf(want, sizeof(want),
			 "x.conf:2: bad url '%s' (expected redis-sentinel://"
			 "[user:pass@]host[:port][,host[:port]...]/master[/db])", bad[i]);
		expect_error(text, want);
	}
}

/* redis-cluster:// URLs: seed nodes, no database but 0; a prefix with a hash
 * tag's brace is refused there (and only there). */
static void test_cluster_url(void **state)
{
	static const char *const good[] = {
		"redis-cluster://127.0.0.1:7000",
		"redis-cluster://a:1,b,[::1]:3",
		"redis-cluster://user:pw@a:1,b:2/",
		"redis-cluster://a:1/0",
	};
	static const char *const bad[] = {
		"redis-cluster://",
		"redis-cluster://h:1,",
		"redis-cluster://h:1,,h:2",
		"redis-cluster://h:0",
		"redis-cluster://h:1/1",
		"redis-cluster://h:1/m",
		"redis-cluster://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q",
		"redis-cluster://::1:7000",
		"redis-cluster://u:%00@h",
		"redis-cluster://[::1]x",
	};
	char text[256], want[384];
	struct rl_config *c;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(text, sizeof(text), "[redis]\nurl = %s\n", good[i]);
		c = parse_ok(text);
		assert_string_equal(c->redis_url, good[i]);
		rl_config_free(c);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "[redis]\nurl = %s\n", bad[i]);
		snprintf(want, sizeof(want),
			 "x.conf:2: bad url '%s' (expected redis-cluster://"
			 "[user:pass@]host[:port][,host[:port]...])", bad[i]);
		expect_error(text, want);
	}
	expect_error("[redis]\nprefix = a{b}:\nurl = redis-cluster://h:1\n",
		     "x.conf:2: prefix cannot have '{' or '}' with "
		     "redis-cluster:// (they would make the hash tag)");
	c = parse_ok("[redis]\nprefix = a{b}:\nurl = redis://h:1\n");
	assert_string_equal(c->redis_prefix, "a{b}:");
	rl_config_free(c);
}

static void test_error_proxy_protocol(void **state)
{
	static const struct error_case cases[] = {
		{ "[global]\nproxy_protocol = on\n",
		  "x.conf:2: proxy_protocol = on needs trusted_proxies" },
		{ "[global]\nproxy_protocol = on\ntrusted_proxies = none\n",
		  "x.conf:2: proxy_protocol = on needs trusted_proxies" },
	};
	struct rl_config *c;

	(void)state;
	EXPECT_ERRORS(cases);
	c = parse_ok("[global]\nproxy_protocol = on\ntrusted_proxies = 10.0.0.0/8\n");
	assert_true(c->proxy_protocol);
	rl_config_free(c);
}

/*
 * The first error found is reported: a section's cross-key checks run when
 * the section ends, after the errors of its keys.
 */
static void test_error_first_wins(void **state)
{
	static const struct error_case cases[] = {
		{ "[limit:a]\nkey = ip\n[global]\nfoo = 1\n",
		  "x.conf:1: [limit:a] needs a rate" },
		{ "[global]\nproxy_protocol = on\nfoo = 1\n",
		  "x.conf:3: unknown key 'foo' in [global]" },
		{ "[global]\nproxy_protocol = on\n[limit:a]\nfoo = 1\n",
		  "x.conf:2: proxy_protocol = on needs trusted_proxies" },
		{ "[limit:a]\nrat = 1/s\n", "x.conf:2: unknown key 'rat' in [limit:a]" },
		{ "[global]\nfoo = 1\nbar = 2\n",
		  "x.conf:2: unknown key 'foo' in [global]" },
	};

	(void)state;
	EXPECT_ERRORS(cases);
}

static void test_error_null_err(void **state)
{
	struct rl_config *c = NULL;

	(void)state;
	assert_int_equal(rl_config_parse("[bad]\n", NULL, &c, NULL), -EINVAL);
	assert_null(c);
	assert_int_equal(rl_config_parse(NULL, "x", &c, NULL), -EINVAL);
}

/* ---- files ---- */

static void test_file(void **state)
{
	char path[] = "/tmp/rlshim-test-config-XXXXXX";
	struct rl_err err;
	char want[RL_ERR_MAX];
	struct rl_config *c = NULL;
	int fd;
	FILE *f;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs("[global]\nports = 8080\nshm = rlshim-demo\n"
	      "[limit:api]\nmatch = *\nrate = 60/m\nkey = ip\n", f);
	assert_int_equal(fclose(f), 0);

	assert_int_equal(rl_config_load(path, &c, &err), 0);
	assert_non_null(c);
	assert_string_equal(c->source, path);
	assert_int_equal(c->nports, 1);
	assert_int_equal(c->ports[0], 8080);
	assert_string_equal(c->shm, "rlshim-demo");
	assert_int_equal(c->nrules, 1);
	assert_string_equal(c->rules[0].name, "api");
	rl_config_free(c);

	/* a content error names the file */
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("[global]\n\n[limit:sms]\nrat = 3/m\n", f);
	assert_int_equal(fclose(f), 0);
	c = (struct rl_config *)&err;
	assert_int_equal(rl_config_load(path, &c, &err), -EINVAL);
	assert_null(c);
	snprintf(want, sizeof(want), "%s:4: unknown key 'rat' in [limit:sms]",
		 path);
	assert_string_equal(err.msg, want);

	assert_int_equal(unlink(path), 0);
}

/* The stamp changes when the file is rewritten, even to the same bytes
 * (a rename over it), and is the same for every reader. */
static void test_stamp(void **state)
{
	char path[] = "/tmp/rlshim-test-stamp-XXXXXX", tmp[64];
	uint64_t s1, s2;
	FILE *f;
	int fd;

	(void)state;
	assert_int_equal(rl_config_stamp(NULL), 1);
	assert_int_equal(rl_config_stamp("/nonexistent/rlshim.conf"), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	s1 = rl_config_stamp(path);
	assert_true(s1 > 1);
	assert_int_equal(rl_config_stamp(path), s1);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(tmp, path), 0);
	s2 = rl_config_stamp(path);
	assert_true(s2 > 1);
	assert_int_not_equal(s2, s1);
	f = fopen(path, "a");
	assert_non_null(f);
	fputs("; edited in place\n", f);
	assert_int_equal(fclose(f), 0);
	assert_int_not_equal(rl_config_stamp(path), s2);
	assert_int_equal(unlink(path), 0);
}

static void test_reload_ok(void **state)
{
	struct rl_config *c = NULL;
	struct rl_err err;

	(void)state;
	assert_int_equal(rl_config_parse("[limit:a]\nrate = 1/s\n", "a.conf", &c,
					 &err), 0);
	assert_int_equal(rl_config_reload_ok(c, &err), 0);
	rl_config_free(c);
	assert_int_equal(rl_config_parse("[global]\nshm = x\n", "b.conf", &c,
					 &err), 0);
	assert_int_equal(rl_config_reload_ok(c, &err), -EINVAL);
	assert_string_equal(err.msg, "b.conf: no [limit:*] rule (to lift every limit "
			    "on purpose, set mode = dry-run)");
	rl_config_free(c);
}

static void test_missing_file(void **state)
{
	const char *path = "/nonexistent/rlshim.conf";
	struct rl_err err;
	struct rl_config *c = (struct rl_config *)&err;

	(void)state;
	assert_int_equal(rl_config_load(path, &c, &err), -ENOENT);
	assert_null(c);
	assert_string_equal(err.msg,
			    "/nonexistent/rlshim.conf: No such file or directory");
}

static void test_directory(void **state)
{
	struct rl_err err;
	struct rl_config *c = NULL;

	(void)state;
	assert_int_equal(rl_config_load("/tmp", &c, &err), -EISDIR);
	assert_null(c);
	assert_string_equal(err.msg, "/tmp: Is a directory");
}

static void test_config_path(void **state)
{
	const char *p;

	(void)state;
	assert_int_equal(setenv(RL_CONFIG_ENV, "/srv/app/rlshim.conf", 1), 0);
	p = rl_config_path();
	assert_non_null(p);
	assert_string_equal(p, "/srv/app/rlshim.conf");

	/* empty counts as unset */
	assert_int_equal(setenv(RL_CONFIG_ENV, "", 1), 0);
	p = rl_config_path();
	if (access(RL_CONFIG_DEFAULT_PATH, F_OK) == 0)
		assert_string_equal(p, RL_CONFIG_DEFAULT_PATH);
	else
		assert_null(p);

	assert_int_equal(unsetenv(RL_CONFIG_ENV), 0);
	p = rl_config_path();
	if (access(RL_CONFIG_DEFAULT_PATH, F_OK) == 0)
		assert_string_equal(p, RL_CONFIG_DEFAULT_PATH);
	else
		assert_null(p);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(rl_config_algorithm_name(RL_ALGO_GCRA),
			    "token-bucket");
	assert_string_equal(rl_config_algorithm_name(RL_ALGO_FIXED_WINDOW),
			    "fixed-window");
	assert_string_equal(rl_config_algorithm_name(RL_ALGO_SLIDING_WINDOW),
			    "sliding-window");
	assert_string_equal(rl_config_algorithm_name((enum rl_algorithm)9), "?");
	assert_string_equal(rl_config_headers_name(RL_HEADERS_RATELIMIT),
			    "ratelimit");
	assert_string_equal(rl_config_headers_name(RL_HEADERS_IETF), "ietf");
	assert_string_equal(rl_config_headers_name(RL_HEADERS_XRATELIMIT),
			    "x-ratelimit");
	assert_string_equal(rl_config_headers_name(RL_HEADERS_NONE), "none");
	assert_string_equal(rl_config_headers_name((enum rl_headers)9), "?");
}

/* The key bytes of a store key's text, as the shim would build them from
 * a request (the agent's mirror of the plans): an address masked to the
 * prefix, a header value as it is, "" for `*`; NULL for a text no request
 * keys the rule by. */
static void test_key_of_text(void **state)
{
	struct rl_config *c = parse_ok(
		"[global]\nipv4_prefix = 24\n"
		"[limit:ip]\nmatch = *\nrate = 1/s\n"
		"[limit:h]\nmatch = *\nkey = header:X-Api-Key\nrate = 1/s\n"
		"[limit:all]\nmatch = *\nkey = global\nrate = 1/s\n");
	uint8_t buf[17], want[17];
	struct rl_addr a;
	const void *k;
	char long_key[RL_KEY_MAX + 1];
	size_t len;

	(void)state;
	assert_int_equal(c->nrules, 3);
	/* the shim's bytes for 192.0.2.77 at /24 */
	assert_int_equal(rl_addr_parse("192.0.2.77", 10, &a), 0);
	assert_int_equal(rl_config_ip_key(c, &a, want), 5);
	k = rl_config_key_of_text(c, &c->rules[0], "192.0.2.1", 9, buf, &len);
	assert_ptr_equal(k, buf);
	assert_int_equal(len, 5);
	assert_memory_equal(k, want, 5);
	/* IPv6 at the default /64; a mapped IPv4 is the IPv4 */
	k = rl_config_key_of_text(c, &c->rules[0], "2001:db8::1", 11, buf, &len);
	assert_non_null(k);
	assert_int_equal(len, 17);
	assert_non_null(rl_config_key_of_text(c, &c->rules[0], "::ffff:192.0.2.9",
					      16, buf, &len));
	assert_int_equal(len, 5);
	assert_memory_equal(buf, want, 5);
	assert_null(rl_config_key_of_text(c, &c->rules[0], "key-9", 5, buf, &len));
	assert_null(rl_config_key_of_text(c, &c->rules[0], "999.0.0.1", 9, buf,
					  &len));
	assert_null(rl_config_key_of_text(c, &c->rules[0], "", 0, buf, &len));
	/* header values as they are, up to RL_KEY_MAX */
	k = rl_config_key_of_text(c, &c->rules[1], "key-9", 5, buf, &len);
	assert_non_null(k);
	assert_int_equal(len, 5);
	assert_memory_equal(k, "key-9", 5);
	memset(long_key, 'k', sizeof(long_key));
	assert_non_null(rl_config_key_of_text(c, &c->rules[1], long_key,
					      RL_KEY_MAX, buf, &len));
	assert_null(rl_config_key_of_text(c, &c->rules[1], long_key,
					  RL_KEY_MAX + 1, buf, &len));
	assert_null(rl_config_key_of_text(c, &c->rules[1], "", 0, buf, &len));
	/* one key, "*" in the store, no bytes in the table */
	assert_non_null(rl_config_key_of_text(c, &c->rules[2], "*", 1, buf, &len));
	assert_int_equal(len, 0);
	assert_null(rl_config_key_of_text(c, &c->rules[2], "x", 1, buf, &len));
	rl_config_free(c);
}

/* deny_json = FILE, deny_html = FILE: read at load, relative to the
 * configuration's directory, kept as they are (a newline too); refused
 * (file:line) when missing, empty, over RL_DENY_BODY_MAX, not UTF-8 text,
 * not a regular file, or (deny_json) not one JSON value. */
static void test_deny_bodies(void **state)
{
	char dir[] = "/tmp/rl-deny-XXXXXX", conf[600], text[1024], want[1200];
	static char big[RL_DENY_BODY_MAX + 1];
	struct rl_err err = { "" };
	struct rl_config *c = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/rlshim.conf", dir);
	secret_file(dir, "page.html", "<p>wait</p>\n", 12, 0644);
	secret_file(dir, "e.json", " {\"e\":[1,2.5,\"\\u00e9\"]}\n", 24, 0644);
	secret_file(dir, "empty", "", 0, 0644);
	secret_file(dir, "nul", "a\0b", 3, 0644);
	secret_file(dir, "latin1", "caf\xe9", 4, 0644);
	secret_file(dir, "bad.json", "{\"e\":1,}", 8, 0644);
	secret_file(dir, "two.json", "{} {}", 5, 0644);
	memset(big, '<', sizeof(big));
	secret_file(dir, "big", big, RL_DENY_BODY_MAX + 1, 0644);
	secret_file(dir, "max", big, RL_DENY_BODY_MAX, 0644);

	snprintf(text, sizeof(text), "[limit:a]\nrate = 1/s\ndeny_html = page.html\n"
		 "deny_json = %s/e.json\n[limit:b]\nrate = 1/s\ndeny_html = max\n"
		 "[limit:c]\nrate = 1/s\n", dir);
	assert_int_equal(rl_config_parse(text, conf, &c, &err), 0);
	assert_int_equal(c->rules[0].deny_body_len[RL_BODY_HTML], 12);
	assert_memory_equal(c->rules[0].deny_body[RL_BODY_HTML], "<p>wait</p>\n", 12);
	assert_int_equal(c->rules[0].deny_body_len[RL_BODY_JSON], 24);
	assert_int_equal(c->rules[1].deny_body_len[RL_BODY_HTML], RL_DENY_BODY_MAX);
	assert_null(c->rules[1].deny_body[RL_BODY_JSON]);
	assert_null(c->rules[2].deny_body[RL_BODY_HTML]);
	rl_config_free(c);

	static const struct {
		const char *key, *file, *why;
	} bad[] = {
		{ "deny_html", "none", "No such file or directory" },
		{ "deny_html", "empty", "empty" },
		{ "deny_json", "big", "over 4096 bytes" },
		{ "deny_html", ".", "not a regular file" },
		{ "deny_html", "nul", "not UTF-8 text (a NUL, or a byte UTF-8 has not there)" },
		{ "deny_json", "latin1", "not UTF-8 text (a NUL, or a byte UTF-8 has not there)" },
		{ "deny_json", "bad.json", "not one JSON value (RFC 8259)" },
		{ "deny_json", "two.json", "not one JSON value (RFC 8259)" },
		{ "deny_json", "page.html", "not one JSON value (RFC 8259)" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "[limit:a]\nrate = 1/s\nkey = ip\n"
			 "%s = %s\n", bad[i].key, bad[i].file);
		c = (struct rl_config *)&err;
		assert_int_equal(rl_config_parse(text, conf, &c, &err), -EINVAL);
		assert_null(c);
		snprintf(want, sizeof(want), "%s:4: %s %s/%s: %s", conf, bad[i].key,
			 dir, bad[i].file, bad[i].why);
		assert_string_equal(err.msg, want);
	}
	/* a body read, then an error further on: nothing leaks (ASan) */
	snprintf(text, sizeof(text), "[limit:a]\nrate = 1/s\ndeny_html = page.html\n"
		 "[limit:b]\nrate = nonsense\n");
	assert_int_equal(rl_config_parse(text, conf, &c, &err), -EINVAL);
	snprintf(text, sizeof(text), "rm -rf '%s'", dir);
	assert_int_equal(system(text), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_design_example),
		cmocka_unit_test(test_default),
		cmocka_unit_test(test_store_impact),
		cmocka_unit_test(test_parse_defaults),
		cmocka_unit_test(test_minimal_rule_defaults),
		cmocka_unit_test(test_global_values),
		cmocka_unit_test(test_get_body),
		cmocka_unit_test(test_sync),
		cmocka_unit_test(test_answers),
		cmocka_unit_test(test_booleans),
		cmocka_unit_test(test_redis_values),
		cmocka_unit_test(test_xdp_values),
		cmocka_unit_test(test_match_forms),
		cmocka_unit_test(test_rule_values),
		cmocka_unit_test(test_syntax_variants),
		cmocka_unit_test(test_continuation_list),
		cmocka_unit_test(test_continuation_scalar),
		cmocka_unit_test(test_error_unknown_key),
		cmocka_unit_test(test_error_unknown_section),
		cmocka_unit_test(test_error_key_outside_section),
		cmocka_unit_test(test_error_syntax),
		cmocka_unit_test(test_error_bad_rate),
		cmocka_unit_test(test_error_bad_duration),
		cmocka_unit_test(test_error_duplicate_rule),
		cmocka_unit_test(test_error_duplicate_key),
		cmocka_unit_test(test_error_burst_window),
		cmocka_unit_test(test_error_header_key_accept),
		cmocka_unit_test(test_error_key_headers),
		cmocka_unit_test(test_error_bad_match),
		cmocka_unit_test(test_error_too_many_rules),
		cmocka_unit_test(test_error_long_line),
		cmocka_unit_test(test_error_bad_cidr),
		cmocka_unit_test(test_error_bad_port),
		cmocka_unit_test(test_error_integers),
		cmocka_unit_test(test_error_enums),
		cmocka_unit_test(test_error_names),
		cmocka_unit_test(test_error_bad_url),
		cmocka_unit_test(test_sentinel_url),
		cmocka_unit_test(test_cluster_url),
		cmocka_unit_test(test_user_keys),
		cmocka_unit_test(test_jwt_secret),
		cmocka_unit_test(test_deny_bodies),
		cmocka_unit_test(test_error_proxy_protocol),
		cmocka_unit_test(test_error_first_wins),
		cmocka_unit_test(test_error_null_err),
		cmocka_unit_test(test_file),
		cmocka_unit_test(test_stamp),
		cmocka_unit_test(test_reload_ok),
		cmocka_unit_test(test_plans_need_redis),
		cmocka_unit_test(test_cidr_host_bits_warn),
		cmocka_unit_test(test_check_is_reload),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_directory),
		cmocka_unit_test(test_config_path),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_key_of_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
