/* SPDX-License-Identifier: MIT */
/*
 * stress_crash.c - SIGKILL 1,000 processes in the middle of deciding while
 * others keep deciding. A small table (4 buckets) and a large key space keep
 * every decision busy claiming and re-keying slots, so kills land inside the
 * multi-step paths too. Asserts: the steady processes never stop making
 * progress (nobody waits on a dead process), and afterwards, once markers
 * left by the dead are swept, the table satisfies every invariant and still
 * decides for every key.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>

#include "stress.h"

#define KILLS 1000
#define STEADY 2
#define KEYSPACE 5000u

struct shared {
	_Atomic uint64_t progress[STEADY];
	_Atomic int stop;
	_Atomic uint64_t victim_decisions;
};

static void decide_forever(const char *seg, unsigned rule, unsigned seed,
			   struct shared *sh, int steady)
{
	struct rl_table *t;
	unsigned x = seed * 2654435761u + 1;

	if (rl_table_open(seg, 0, 0, &t, NULL))
		_exit(2);
	while (!atomic_load(&sh->stop)) {
		struct rl_result r;
		char key[16];

		x = x * 1103515245u + 12345u;
		snprintf(key, sizeof(key), "c%u", (x >> 8) % KEYSPACE);
		rl_table_take(t, rule, key, strlen(key), 1, rl_time_now_ns(), &r);
		if (steady >= 0)
			atomic_fetch_add(&sh->progress[steady], 1);
		else
			atomic_fetch_add(&sh->victim_decisions, 1);
	}
	rl_table_close(t);
	_exit(0);
}

static void test_sigkill_mid_decision(void **state)
{
	struct rl_rule_def def = { .name = "crash", .algorithm = RL_ALGO_GCRA,
				   .rate = { SEC, 50, 5 } };
	struct shared *sh = shared_alloc(sizeof(*sh));
	uint64_t seen[STEADY] = { 0 }, start;
	struct rl_table_check chk;
	struct rl_table_stats ts;
	struct rl_table *t;
	pid_t steady[STEADY];
	unsigned rule, swept;
	char seg[64];

	(void)state;
	segment_name(seg, sizeof(seg), "crash");
	assert_non_null(sh);
	assert_int_equal(rl_table_open(seg, 64, RL_TABLE_CREATE, &t, NULL), 0);
	assert_int_equal(rl_table_rule(t, &def, &rule), 0);
	for (int i = 0; i < STEADY; i++) {
		steady[i] = fork();
		assert_true(steady[i] >= 0);
		if (steady[i] == 0)
			decide_forever(seg, rule, (unsigned)i + 1, sh, i);
	}
	srand((unsigned)getpid());
	start = rl_time_now_ns();
	for (int k = 0; k < KILLS; k++) {
		pid_t v = fork();
		int status;

		assert_true(v >= 0);
		if (v == 0)
			decide_forever(seg, rule, (unsigned)k + 100, sh, -1);
		/* 0-1 ms in: mostly mid-loop, sometimes still starting. */
		sleep_ns((uint64_t)(rand() % 1000) * 1000);
		kill(v, SIGKILL);
		assert_int_equal(waitpid(v, &status, 0), v);
		assert_true(WIFSIGNALED(status));
		if (k % 100 == 99) {
			/* Nobody is stuck behind a dead process. */
			for (int i = 0; i < STEADY; i++) {
				uint64_t p = atomic_load(&sh->progress[i]);

				assert_true(p > seen[i]);
				seen[i] = p;
			}
		}
	}
	atomic_store(&sh->stop, 1);
	for (int i = 0; i < STEADY; i++)
		assert_true(reap_ok(steady[i]));

	/* Whatever markers the dead left expire and are swept. */
	sleep_ns(RL_MARK_TIMEOUT_NS + 10 * MS);
	swept = rl_table_sweep(t, rl_time_now_ns());
	assert_int_equal(rl_table_check(t, rl_time_now_ns(), &chk), 0);
	assert_int_equal(chk.markers, 0);
	/* And every key can still be decided. */
	for (unsigned i = 0; i < KEYSPACE; i++) {
		struct rl_result r;
		char key[16];

		snprintf(key, sizeof(key), "c%u", i);
		assert_int_equal(rl_table_take(t, rule, key, strlen(key), 1,
					       rl_time_now_ns(), &r), 0);
	}
	assert_int_equal(rl_table_check(t, rl_time_now_ns(), &chk), 0);
	rl_table_stats(t, rl_time_now_ns(), &ts);
	printf("  %d kills in %.1f s; steady decisions %llu + %llu, victims "
	       "%llu; markers cleared %llu (swept %u), evictions %llu, "
	       "duplicates %u, unnamed %u\n", KILLS,
	       (double)(rl_time_now_ns() - start) / 1e9,
	       (unsigned long long)seen[0], (unsigned long long)seen[1],
	       (unsigned long long)atomic_load(&sh->victim_decisions),
	       (unsigned long long)rl_table_counted(t, RL_COUNT_MARKS_CLEARED), swept,
	       (unsigned long long)ts.evictions, chk.duplicates, chk.unnamed);
	rl_table_close(t);
	rl_table_unlink(seg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sigkill_mid_decision),
	};

	return cmocka_run_group_tests_name("crash", tests, NULL, NULL);
}
