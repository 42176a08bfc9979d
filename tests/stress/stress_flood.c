/* SPDX-License-Identifier: MIT */
/*
 * stress_flood.c - capacity 1,024, one key kept over its limit, and
 * 1,000,000 distinct new keys: the limited key stays limited the whole
 * time, and neither the segment nor the process grows.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "stress.h"

#define NEW_KEYS 1000000u

/* A field of /proc/self/status in kB. */
static long status_kb(const char *field)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0)
			v = strtol(line + strlen(field) + 1, NULL, 10);
	fclose(f);
	return v;
}

static void test_flood(void **state)
{
	/* 10 per hour, burst 10: a new key owes 6 minutes, the limited one
	 * an hour. */
	struct rl_rule_def def = { .name = "login", .algorithm = RL_ALGO_GCRA,
				   .rate = { 3600 * SEC, 10, 10 } };
	long rss0, rss1, vm0, vm1;
	struct rl_table_check chk;
	struct rl_table_stats ts;
	struct rl_table *t;
	struct stat st0, st1;
	char seg[64], path[128];
	struct rl_result r;
	unsigned rule, checks = 0;

	(void)state;
	segment_name(seg, sizeof(seg), "flood");
	snprintf(path, sizeof(path), "/dev/shm/%s", seg);
	assert_int_equal(rl_table_open(seg, 1024, RL_TABLE_CREATE, &t, NULL), 0);
	assert_int_equal(rl_table_rule(t, &def, &rule), 0);
	assert_int_equal(stat(path, &st0), 0);
	for (int i = 0; i < 10; i++)
		rl_table_take(t, rule, "attacker", 8, 1, rl_time_now_ns(), &r);
	assert_true(r.allowed);
	rl_table_take(t, rule, "attacker", 8, 1, rl_time_now_ns(), &r);
	assert_false(r.allowed);

	rss0 = vm0 = 0;
	for (unsigned i = 0; i < NEW_KEYS; i++) {
		char key[16];

		snprintf(key, sizeof(key), "n%u", i);
		rl_table_take(t, rule, key, strlen(key), 1, rl_time_now_ns(), &r);
		assert_true(r.allowed); /* each newcomer's first request */
		if (i % 1000 == 0) {
			/* The limited key keeps asking and stays limited. */
			rl_table_take(t, rule, "attacker", 8, 1,
				      rl_time_now_ns(), &r);
			assert_false(r.allowed);
			checks++;
		}
		if (i == 100000) {
			/* The table is long full by now. */
			rss0 = status_kb("RssAnon:");
			vm0 = status_kb("VmSize:");
		}
	}
	rss1 = status_kb("RssAnon:");
	vm1 = status_kb("VmSize:");
	assert_int_equal(stat(path, &st1), 0);
	assert_int_equal(st0.st_size, st1.st_size);
	assert_int_equal(vm0, vm1);
	/* Private memory: not a page more. (Shared pages of the fixed-size
	 * segment may be touched for the first time later, e.g. the counter
	 * shard of a CPU the process migrates to; they were always there.) */
	assert_int_equal(rss1, rss0);
	rl_table_stats(t, rl_time_now_ns(), &ts);
	assert_int_equal(ts.capacity, 1024);
	assert_true(ts.evictions > NEW_KEYS - 2 * 1024);
	assert_int_equal(rl_table_check(t, rl_time_now_ns(), &chk), 0);
	printf("  %u new keys, attacker denied %u/%u times; evictions %llu, "
	       "overflows %llu; RssAnon %ld -> %ld kB, VmSize %ld -> %ld kB, "
	       "segment %lld bytes\n", NEW_KEYS, checks, checks,
	       (unsigned long long)ts.evictions,
	       (unsigned long long)ts.overflows, rss0, rss1, vm0, vm1,
	       (long long)st1.st_size);
	rl_table_close(t);
	rl_table_unlink(seg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flood),
	};

	return cmocka_run_group_tests_name("flood", tests, NULL, NULL);
}
