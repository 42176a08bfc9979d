/* SPDX-License-Identifier: MIT */
/*
 * stress_concurrency.c - 2 and 4 processes hammering one key and many keys
 * through one segment, on the real clock.
 *
 * The exact check: GCRA advances a key's TAT by one emission interval per
 * admitted request, as long as the bucket never refills in between. The
 * parent empties each bucket at t_ref (TAT = t_ref + burst * T), so the
 * children, who overload it from then on, keep TAT ahead of the clock. Then
 *
 *     admitted * T == TAT_final - t_ref        exactly,
 *
 * and a lost update (two processes admitted on the same TAT) would break
 * it. On top, the total is what GCRA allows for the elapsed time: at most
 * burst + (last clock reading - t_ref) / T, and short of it only by the
 * requests whose time came while the processes were reading the clock.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "stress.h"

#define RUN_NS (1500 * MS)
#define MAX_PROCS 4
#define MAX_KEYS 64

struct result {
	uint64_t admitted[MAX_KEYS];
	uint64_t decisions;
	uint64_t last_now;
	uint64_t stalled_ns; /* time between two of its decisions, in gaps
				over STALL_NS: off the CPU */
};

/* Longer than any gap between two decisions of a process on a CPU. */
#define STALL_NS (1 * MS)

static void hammer(const char *seg, unsigned rule, unsigned nkeys,
		   unsigned offset, struct result *res)
{
	struct rl_table *t;
	uint64_t end = rl_time_now_ns() + RUN_NS, now;
	unsigned k = offset;

	if (rl_table_open(seg, 0, 0, &t, NULL))
		_exit(2);
	uint64_t prev = rl_time_now_ns();

	do {
		struct rl_result r;
		char key[8];
		unsigned i = k++ % nkeys;

		snprintf(key, sizeof(key), "k%02u", i);
		now = rl_time_now_ns();
		if (now - prev > STALL_NS)
			res->stalled_ns += now - prev;
		prev = now;
		rl_table_take(t, rule, key, 3, 1, now, &r);
		res->admitted[i] += (uint64_t)r.allowed;
		res->decisions++;
	} while (now < end);
	res->last_now = now;
	rl_table_close(t);
	_exit(0);
}

static void run(unsigned procs, unsigned nkeys, uint64_t period_ns,
		uint32_t count)
{
	struct rl_rule_def def = { .name = "hammer", .algorithm = RL_ALGO_GCRA,
				   .rate = { period_ns, count, count } };
	struct result *res = shared_alloc(sizeof(*res) * MAX_PROCS);
	uint64_t t_ref[MAX_KEYS], interval = period_ns / count;
	uint64_t total = 0, decisions = 0, last = 0, stalled = 0;
	struct rl_table_check chk;
	struct rl_table *t;
	pid_t pids[MAX_PROCS];
	unsigned rule;
	char seg[64];

	segment_name(seg, sizeof(seg), "conc");
	assert_non_null(res);
	assert_int_equal(rl_table_open(seg, 4096, RL_TABLE_CREATE, &t, NULL), 0);
	assert_int_equal(rl_table_rule(t, &def, &rule), 0);
	for (unsigned i = 0; i < nkeys; i++) {
		struct rl_result r;
		char key[8];

		snprintf(key, sizeof(key), "k%02u", i);
		t_ref[i] = rl_time_now_ns();
		rl_table_take(t, rule, key, 3, count, t_ref[i], &r);
		assert_true(r.allowed);
		assert_int_equal(r.remaining, 0);
	}
	for (unsigned p = 0; p < procs; p++) {
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0)
			hammer(seg, rule, nkeys, p * 7, &res[p]);
	}
	for (unsigned p = 0; p < procs; p++)
		assert_true(reap_ok(pids[p]));

	for (unsigned i = 0; i < nkeys; i++) {
		uint64_t admitted = count, now = rl_time_now_ns(), tat;
		struct rl_result r;
		char key[8];

		for (unsigned p = 0; p < procs; p++)
			admitted += res[p].admitted[i];
		snprintf(key, sizeof(key), "k%02u", i);
		rl_table_take(t, rule, key, 3, 0, now, &r);
		assert_true(r.reset_after_ns > 0);
		tat = now + r.reset_after_ns;
		/* Exactly one interval per admitted request. */
		assert_int_equal(admitted * interval, tat - t_ref[i]);
		total += admitted;
	}
	for (unsigned p = 0; p < procs; p++) {
		decisions += res[p].decisions;
		if (res[p].last_now > last)
			last = res[p].last_now;
	}
	/* What GCRA allows for the elapsed time, per key: all of it but for
	 * the requests in flight, and what went unasked while every process
	 * was off the CPU at once (a full bucket keeps no more: capacity
	 * unasked for is lost, as it should be). That time is at most the
	 * least any process spent off the CPU. */
	for (unsigned p = 0; p < procs; p++)
		if (!p || res[p].stalled_ns < stalled)
			stalled = res[p].stalled_ns;
	for (unsigned i = 0; i < nkeys; i++) {
		uint64_t admitted = count;
		uint64_t allowed_max = count + (last - t_ref[i]) / interval;

		for (unsigned p = 0; p < procs; p++)
			admitted += res[p].admitted[i];
		assert_true(admitted <= allowed_max);
		assert_true(admitted + procs + 1 + stalled / interval >= allowed_max);
	}
	assert_int_equal(rl_table_check(t, rl_time_now_ns(), &chk), 0);
	assert_int_equal(chk.duplicates, 0);
	printf("  %u procs, %u keys: %llu decisions, %llu admitted, "
	       "exact to the interval\n", procs, nkeys,
	       (unsigned long long)decisions, (unsigned long long)total);
	rl_table_close(t);
	rl_table_unlink(seg);
	munmap(res, sizeof(*res) * MAX_PROCS);
}

/* One key: 1000/s, burst 1000. */
static void test_2_procs_one_key(void **state)
{
	(void)state;
	run(2, 1, SEC, 1000);
}

static void test_4_procs_one_key(void **state)
{
	(void)state;
	run(4, 1, SEC, 1000);
}

/* 64 keys at 100/s each: the processes meet on every key. */
static void test_2_procs_many_keys(void **state)
{
	(void)state;
	run(2, MAX_KEYS, SEC, 100);
}

static void test_4_procs_many_keys(void **state)
{
	(void)state;
	run(4, MAX_KEYS, SEC, 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_2_procs_one_key),
		cmocka_unit_test(test_4_procs_one_key),
		cmocka_unit_test(test_2_procs_many_keys),
		cmocka_unit_test(test_4_procs_many_keys),
	};

	return cmocka_run_group_tests_name("concurrency", tests, NULL, NULL);
}
