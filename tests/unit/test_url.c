/* SPDX-License-Identifier: MIT */
/* test_url.c - the store URL (src/core/url.c): every scheme's forms, the
 * defaults, the percent escapes, the limits, the text the log shows, and
 * the forms refused (with the scheme still named, for the error). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "url.h"

static struct rl_url u;

static void test_forms(void **state)
{
	(void)state;
	assert_int_equal(rl_url_parse("redis://cache", &u), 0);
	assert_int_equal(u.kind, RL_URL_REDIS);
	assert_int_equal(u.naddrs, 1);
	assert_string_equal(u.addr[0].host, "cache");
	assert_int_equal(u.addr[0].port, RL_URL_PORT);
	assert_int_equal(u.db, 0);

	assert_int_equal(rl_url_parse("redis://al%69ce:p%40ss@[fe80::1]:6380/65535", &u), 0);
	assert_string_equal(u.user, "alice");
	assert_string_equal(u.pass, "p@ss");
	assert_string_equal(u.addr[0].host, "fe80::1");
	assert_int_equal(u.addr[0].port, 6380);
	assert_int_equal(u.db, 65535);

	assert_int_equal(rl_url_parse("unix:///run/redis/redis.sock", &u), 0);
	assert_int_equal(u.kind, RL_URL_UNIX);
	assert_string_equal(u.path, "/run/redis/redis.sock");

	assert_int_equal(rl_url_parse("redis-sentinel://s1,s2:5000,[::1]/mymaster/3", &u), 0);
	assert_int_equal(u.kind, RL_URL_SENTINEL);
	assert_int_equal(u.naddrs, 3);
	assert_int_equal(u.addr[0].port, RL_URL_SENTINEL_PORT);
	assert_int_equal(u.addr[1].port, 5000);
	assert_string_equal(u.addr[2].host, "::1");
	assert_string_equal(u.master, "mymaster");
	assert_int_equal(u.db, 3);

	assert_int_equal(rl_url_parse("redis-cluster://pw@a:7000,b/", &u), 0);
	assert_int_equal(u.kind, RL_URL_CLUSTER);
	assert_string_equal(u.user, "");
	assert_string_equal(u.pass, "pw");
	assert_int_equal(u.naddrs, 2);
	assert_int_equal(u.addr[1].port, RL_URL_PORT);
}

/* The last '@' before the path ends the userinfo; the first ':' in it
 * ends the user. */
static void test_userinfo(void **state)
{
	(void)state;
	assert_int_equal(rl_url_parse("redis://u:p@ss:w@h", &u), 0);
	assert_string_equal(u.user, "u");
	assert_string_equal(u.pass, "p@ss:w");
	assert_string_equal(u.addr[0].host, "h");
	assert_int_equal(rl_url_parse("redis://:pw@h", &u), 0);
	assert_string_equal(u.user, "");
	assert_string_equal(u.pass, "pw");
	/* a '/' in a password must be escaped: the path starts at the first */
	assert_int_equal(rl_url_parse("redis://u:a%2Fb@h/2", &u), 0);
	assert_string_equal(u.pass, "a/b");
	assert_int_equal(u.db, 2);
	assert_int_equal(rl_url_parse("redis://u:a/b@h", &u), -EINVAL);
}

static void test_limits(void **state)
{
	char url[1024];
	size_t o;

	(void)state;
	/* 16 seeds, not 17; 8 sentinels, not 9 */
	o = (size_t)snprintf(url, sizeof(url), "redis-cluster://");
	for (int i = 1; i <= 16; i++)
		o += (size_t)snprintf(url + o, sizeof(url) - o, "%sh%d:%d", i > 1 ? "," : "", i, i);
	assert_int_equal(rl_url_parse(url, &u), 0);
	assert_int_equal(u.naddrs, 16);
	snprintf(url + o, sizeof(url) - o, ",h17:17");
	assert_int_equal(rl_url_parse(url, &u), -EINVAL);
	assert_int_equal(u.kind, RL_URL_CLUSTER);
	assert_int_equal(u.naddrs, 0);
	assert_int_equal(rl_url_parse("redis-sentinel://a,b,c,d,e,f,g,h/m", &u), 0);
	assert_int_equal(rl_url_parse("redis-sentinel://a,b,c,d,e,f,g,h,i/m", &u), -EINVAL);
	/* a host of 255 bytes fits, 256 does not */
	memset(url, 0, sizeof(url));
	memcpy(url, "redis://", 8);
	memset(url + 8, 'h', 255);
	assert_int_equal(rl_url_parse(url, &u), 0);
	url[8 + 255] = 'h';
	assert_int_equal(rl_url_parse(url, &u), -EINVAL);
	/* a password of 255 bytes fits, 256 does not */
	memset(url, 0, sizeof(url));
	memcpy(url, "redis://", 8);
	memset(url + 8, 'p', 255);
	memcpy(url + 8 + 255, "@h", 2);
	assert_int_equal(rl_url_parse(url, &u), 0);
	assert_int_equal(strlen(u.pass), 255);
	memmove(url + 9, url + 8, strlen(url + 8) + 1);
	assert_int_equal(rl_url_parse(url, &u), -EINVAL);
	/* ports and databases */
	assert_int_equal(rl_url_parse("redis://h:65535/0", &u), 0);
	assert_int_equal(rl_url_parse("redis://h:1", &u), 0);
	assert_int_equal(u.addr[0].port, 1);
}

static void test_refused(void **state)
{
	static const struct {
		const char *url;
		enum rl_url_kind kind;
	} bad[] = {
		{ "", RL_URL_UNKNOWN },
		{ "http://h", RL_URL_UNKNOWN },
		{ "REDIS://h", RL_URL_UNKNOWN },
		{ "redis:/h", RL_URL_UNKNOWN },
		{ "redis://", RL_URL_REDIS },
		{ "redis://h:", RL_URL_REDIS },
		{ "redis://h:0", RL_URL_REDIS },
		{ "redis://h:65536", RL_URL_REDIS },
		{ "redis://h:007000", RL_URL_REDIS },
		{ "redis://h:+1", RL_URL_REDIS },
		{ "redis://h:-1", RL_URL_REDIS },
		{ "redis://h:1x", RL_URL_REDIS },
		{ "redis://::1", RL_URL_REDIS },
		{ "redis://[::1", RL_URL_REDIS },
		{ "redis://[]", RL_URL_REDIS },
		{ "redis://[::1]6379", RL_URL_REDIS },
		{ "redis://h h", RL_URL_REDIS },
		{ "redis://h\t", RL_URL_REDIS },
		{ "redis://h\x7f", RL_URL_REDIS },
		{ "redis://a,b", RL_URL_REDIS },
		{ "redis://h/65536", RL_URL_REDIS },
		{ "redis://h/1/2", RL_URL_REDIS },
		{ "redis://h/x", RL_URL_REDIS },
		{ "redis://h/ 1", RL_URL_REDIS },
		{ "redis://h?db=1", RL_URL_REDIS },
		{ "redis://%@h", RL_URL_REDIS },
		{ "redis://%4@h", RL_URL_REDIS },
		{ "redis://%00@h", RL_URL_REDIS },
		{ "redis://%g0@h", RL_URL_REDIS },
		{ "redis://@", RL_URL_REDIS },
		{ "unix://", RL_URL_UNIX },
		{ "unix:///", RL_URL_UNIX },
		{ "unix://run/r.sock", RL_URL_UNIX },
		{ "unix:///a b", RL_URL_UNIX },
		{ "redis-sentinel://h", RL_URL_SENTINEL },
		{ "redis-sentinel://h/", RL_URL_SENTINEL },
		{ "redis-sentinel:///m", RL_URL_SENTINEL },
		{ "redis-sentinel://h,/m", RL_URL_SENTINEL },
		{ "redis-sentinel://h//1", RL_URL_SENTINEL },
		{ "redis-sentinel://h/m/1/", RL_URL_SENTINEL },
		{ "redis-cluster://", RL_URL_CLUSTER },
		{ "redis-cluster://h/1", RL_URL_CLUSTER },
		{ "redis-cluster://,h", RL_URL_CLUSTER },
		{ "redis-cluster://h:1:2", RL_URL_CLUSTER },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&u, 0x55, sizeof(u));
		if (rl_url_parse(bad[i].url, &u) != -EINVAL)
			fail_msg("accepted: %s", bad[i].url);
		if (u.kind != bad[i].kind)
			fail_msg("%s: kind %d, not %d", bad[i].url, u.kind, bad[i].kind);
		/* nothing of it kept */
		assert_int_equal(u.naddrs, 0);
		assert_string_equal(u.pass, "");
	}
}

/* What the log and `status` show: as configured, the defaults filled in,
 * never the password. */
static void test_format(void **state)
{
	static const char *const cases[][2] = {
		{ "redis://cache", "redis://cache:6379/0" },
		{ "redis://bob:s3cret@[::1]:7/2", "redis://bob@[::1]:7/2" },
		{ "redis://s3cret@h", "redis://h:6379/0" },
		{ "unix:///run/r.sock", "unix:///run/r.sock" },
		{ "redis-sentinel://u:pw@a,[::2]:5/m", "redis-sentinel://u@a:26379,[::2]:5/m/0" },
		{ "redis-cluster://pw@a:1,b/0", "redis-cluster://a:1,b:6379" },
	};
	char out[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(rl_url_parse(cases[i][0], &u), 0);
		rl_url_format(&u, out, sizeof(out));
		assert_string_equal(out, cases[i][1]);
		/* what it shows parses to the same place */
		assert_int_equal(rl_url_parse(out, &u), 0);
	}
	/* cut short, still terminated */
	assert_int_equal(rl_url_parse("redis://cache", &u), 0);
	rl_url_format(&u, out, 10);
	assert_string_equal(out, "redis://c");
}

/* The password masked, the rest verbatim; an '@' in the password hides
 * all of it (the last '@' ends it, as the agent reads it). */
static void test_mask(void **state)
{
	static const char *const cases[][2] = {
		{ "redis://h:1/0", "redis://h:1/0" },
		{ "redis://pw@h", "redis://***@h" },
		{ "redis://bob:pw@h:1/2", "redis://bob:***@h:1/2" },
		{ "redis://bob:p@ss@h", "redis://bob:***@h" },
		{ "redis://p@ss@h/0", "redis://***@h/0" },
		{ "redis://h/x@y", "redis://h/x@y" },
		{ "redis-sentinel://u:p@w@a,b/m", "redis-sentinel://u:***@a,b/m" },
		{ "redis-cluster://:pw@a:1,b:2", "redis-cluster://:***@a:1,b:2" },
		{ "unix:///run/a@b.sock", "unix:///run/a@b.sock" },
	};
	char out[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rl_url_mask(cases[i][0], out, sizeof(out));
		assert_string_equal(out, cases[i][1]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_userinfo),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_mask),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
