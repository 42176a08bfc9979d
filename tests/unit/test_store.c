/* SPDX-License-Identifier: MIT */
/* test_store.c - the agent's store URLs: redis://, unix:// and
 * redis-sentinel:// (several sentinels, [v6], db, password), and the forms
 * refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "store.h"

static void test_plain(void **state)
{
	struct rl_store_url u;

	(void)state;
	assert_int_equal(rl_store_parse_url("redis://alice:s%40cret@[::1]:6380/3", &u), 0);
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 6380);
	assert_int_equal(u.db, 3);
	assert_string_equal(u.user, "alice");
	assert_string_equal(u.pass, "s@cret");
	assert_string_equal(u.master, "");
	assert_int_equal(u.nsentinels, 0);
	assert_int_equal(rl_store_parse_url("redis://cache/", &u), 0);
	assert_string_equal(u.host, "cache");
	assert_int_equal(u.port, 6379);
	assert_int_equal(u.db, 0);
	assert_int_equal(rl_store_parse_url("unix:///run/redis.sock", &u), 0);
	assert_true(u.unix_socket);
	assert_string_equal(u.host, "/run/redis.sock");
}

static void test_sentinel(void **state)
{
	struct rl_store_url u;

	(void)state;
	assert_int_equal(rl_store_parse_url("redis-sentinel://10.0.0.1:26380,"
					    "[::1]:5000,sentinel3/mymaster/2", &u), 0);
	assert_int_equal(u.nsentinels, 3);
	assert_string_equal(u.sentinels[0].host, "10.0.0.1");
	assert_int_equal(u.sentinels[0].port, 26380);
	assert_string_equal(u.sentinels[1].host, "::1");
	assert_int_equal(u.sentinels[1].port, 5000);
	assert_string_equal(u.sentinels[2].host, "sentinel3");
	assert_int_equal(u.sentinels[2].port, RL_STORE_SENTINEL_PORT);
	assert_string_equal(u.master, "mymaster");
	assert_int_equal(u.db, 2);
	assert_string_equal(u.host, "");  /* asked of the sentinels */
	assert_string_equal(u.pass, "");

	/* Escapes decoded; the same helper as the cluster URL's. */
	assert_int_equal(rl_store_parse_url("redis://b%40b:p%3Aw%25@h:1/0", &u), 0);
	assert_string_equal(u.user, "b@b");
	assert_string_equal(u.pass, "p:w%");
	/* The last '@' before the path ends the userinfo, as the config's
	 * check and the cluster URL read it. */
	assert_int_equal(rl_store_parse_url("redis://bob:p@ss@h:1/0", &u), 0);
	assert_string_equal(u.user, "bob");
	assert_string_equal(u.pass, "p@ss");
	assert_string_equal(u.host, "h");
	assert_int_equal(rl_store_parse_url("redis-sentinel://p@ss@h:1/m", &u), 0);
	assert_string_equal(u.pass, "p@ss");
	assert_string_equal(u.sentinels[0].host, "h");

	assert_int_equal(rl_store_parse_url("redis-sentinel://:pw@h:1/m", &u), 0);
	assert_int_equal(u.nsentinels, 1);
	assert_string_equal(u.pass, "pw");
	assert_string_equal(u.user, "");
	assert_string_equal(u.master, "m");
	assert_int_equal(u.db, 0);

	assert_int_equal(rl_store_parse_url("redis-sentinel://bob:pw@h:1,[::2]/m/", &u), 0);
	assert_string_equal(u.user, "bob");
	assert_string_equal(u.pass, "pw");
	assert_int_equal(u.nsentinels, 2);
	assert_string_equal(u.sentinels[1].host, "::2");
	assert_int_equal(u.sentinels[1].port, RL_STORE_SENTINEL_PORT);
	assert_int_equal(u.db, 0);

	assert_int_equal(rl_store_parse_url("redis-sentinel://a,b,c,d,e,f,g,h/m", &u), 0);
	assert_int_equal(u.nsentinels, RL_STORE_SENTINELS);
}

/* The masters whose epochs the agent reads: redis:// and Sentinel have
 * one, tag "" (the agent's `<prefix>epoch`, as before clusters), every key
 * on it; a cluster's come from its map, none before it is read. */
static void test_epoch_tags(void **state)
{
	static const char *const one[] = {
		"redis://127.0.0.1:6379/0", "unix:///run/redis.sock",
		"redis-sentinel://10.0.0.5,10.0.0.6:26380/mymaster/2",
	};
	char tags[RL_STORE_MASTERS_MAX][RL_STORE_TAG_MAX];
	struct rl_store *s;

	(void)state;
	for (unsigned i = 0; i < sizeof(one) / sizeof(one[0]); i++) {
		s = rl_store_new(one[i], 100000000);
		assert_non_null(s);
		memset(tags, 'x', sizeof(tags));
		assert_int_equal(rl_store_epoch_tags(s, tags, RL_STORE_MASTERS_MAX), 1);
		assert_string_equal(tags[0], "");
		assert_int_equal(rl_store_epoch_tags(s, tags, 0), 0);
		assert_int_equal(rl_store_master_of(s, "rlshim:epoch", 12), 0);
		assert_int_equal(rl_store_master_of(s, "rlshim:{sms}", 12), 0);
		rl_store_free(s);
	}
	s = rl_store_new("redis-cluster://127.0.0.1:7000", 100000000);
	assert_non_null(s);
	assert_int_equal(rl_store_epoch_tags(s, tags, RL_STORE_MASTERS_MAX), 0);
	assert_int_equal(rl_store_master_of(s, "rlshim:{sms:12}", 15), -1);
	rl_store_free(s);
}

static void test_bad(void **state)
{
	static const char *const bad[] = {
		"http://cache:6379",
		"redis://",
		"redis://:6379",
		"redis://host:port",
		"redis://host:0",
		"redis://host:+5",
		"redis://a%00b@host",                  /* a NUL in the password */
		"redis://a%zzb@host",                  /* not an escape */
		"redis://a%+fb@host",
		"redis://pw%4@host",                   /* cut short */
		"redis://u%3@x:pw@host",
		"redis://host:6379/db",
		"redis://[::1",
		"redis://[]:1",
		"redis://[::1]x",
		"unix://",
		"unix://relative",
		"redis-sentinel://",
		"redis-sentinel://h:26379",            /* no master name */
		"redis-sentinel://h:26379/",
		"redis-sentinel://h:26379//0",
		"redis-sentinel:///m",                 /* no sentinel */
		"redis-sentinel://h:1,/m",
		"redis-sentinel://,h:1/m",
		"redis-sentinel://h:1,,h:2/m",
		"redis-sentinel://h:0/m",
		"redis-sentinel://h:70000/m",
		"redis-sentinel://h:/m",
		"redis-sentinel://[::1/m",
		"redis-sentinel://[]:1/m",
		"redis-sentinel://h:1/m/db",
		"redis-sentinel://h:1/m/1/2",
		"redis-sentinel://h:1/m/99999",
		"redis-sentinel://a,b,c,d,e,f,g,h,i/m", /* over RL_STORE_SENTINELS */
		"redis-sentinel://u:%zz@h:1/m",
	};
	struct rl_store_url u;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = rl_store_parse_url(bad[i], &u);

		if (rc != -EINVAL)
			fail_msg("%s: %d, not -EINVAL", bad[i], rc);
	}
}

/* A call that got no reply from a cluster node is told from Redis's own
 * errors by its prefix; the store says whether it is a cluster. */
static void test_no_reply(void **state)
{
	char ours[] = RL_STORE_NO_REPLY " no answer", tryagain[] = "TRYAGAIN x",
	     word[] = "RLSHIM-NO-REPLY", ok[] = "rlshim-no-reply:";
	redisReply e = { .type = REDIS_REPLY_ERROR, .str = ours, .len = sizeof(ours) - 1 };
	redisReply t = { .type = REDIS_REPLY_ERROR, .str = tryagain, .len = 10 };
	redisReply u = { .type = REDIS_REPLY_ERROR, .str = word, .len = sizeof(word) - 1 };
	redisReply st = { .type = REDIS_REPLY_STRING, .str = ok, .len = sizeof(ok) - 1 };
	struct rl_store *c = rl_store_new("redis-cluster://127.0.0.1:1", 1000000000ull);
	struct rl_store *p = rl_store_new("redis://127.0.0.1:1", 1000000000ull);
	unsigned m = 7;

	(void)state;
	assert_true(rl_store_no_reply(&e));
	assert_false(rl_store_no_reply(&t));
	assert_false(rl_store_no_reply(&u));  /* a Redis error word: upper case */
	assert_false(rl_store_no_reply(&st)); /* a string, not an error */
	assert_false(rl_store_no_reply(NULL));
	assert_non_null(c);
	assert_non_null(p);
	assert_true(rl_store_cluster(c));
	assert_false(rl_store_cluster(p));
	/* not connected: nothing down, nothing named */
	assert_int_equal(rl_store_masters_down(c, &m), 0);
	assert_int_equal(m, 0);
	rl_store_free(c);
	rl_store_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_sentinel),
		cmocka_unit_test(test_epoch_tags),
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_no_reply),
	};

	return cmocka_run_group_tests(tests, 0, NULL);
}
