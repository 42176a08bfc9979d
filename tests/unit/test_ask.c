/* SPDX-License-Identifier: MIT */
/* test_ask.c - sync = strict's asks (src/core/ask.c): a shim's decision
 * asked of the agent through the segment, the agent here a forked child
 * (the futex wake crosses processes, as between a server and rlshimd). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "shm.h"
#include "table.h"

#define MS 1000000ull
#define SEC 1000000000ull

static char seg[64];
static struct rl_table *t;
static unsigned rule;

/* 10/m, burst 10: an interval of 6 s, a depth of 60 s. */
#define EI (6 * SEC)
#define DEPTH (60 * SEC)

static int setup(void **state)
{
	static int n;
	struct rl_rule_def def = { .name = "sms", .algorithm = RL_ALGO_GCRA,
				   .rate = { 60 * SEC, 10, 10 } };

	(void)state;
	snprintf(seg, sizeof(seg), "rlshim-ask-%d-%d", (int)getpid(), n++);
	rl_table_unlink(seg);
	assert_int_equal(rl_table_open(seg, 1024, RL_TABLE_CREATE, &t, NULL), 0);
	assert_int_equal(rl_table_rule(t, &def, &rule), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rl_table_close(t);
	rl_table_unlink(seg);
	return 0;
}

/* ---- a scripted agent ---------------------------------------------------------- */

struct script {
	int allowed[8];
	uint64_t debt[8];
	unsigned n, done;
	uint64_t delay_ns;           /* before each answer */
};

static int answer_one(const struct rl_ask_item *it, void *arg)
{
	struct script *s = arg;

	if (s->delay_ns)
		usleep((useconds_t)(s->delay_ns / 1000));
	/* a lend: `allowed` is what the store lends, `debt` what it owes */
	if (it->kind == RL_ASK_LEND)
		rl_table_ask_lent(t, it, (uint64_t)s->allowed[s->done],
				  rl_time_now_ns() + s->debt[s->done],
				  rl_time_now_ns());
	else
		rl_table_ask_answer(t, it, s->allowed[s->done],
				    rl_time_now_ns() + s->debt[s->done]);
	s->done++;
	return 0;
}

/* A child that answers `s`'s asks in order, then exits. */
static pid_t agent(struct script *s)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		uint64_t end = rl_time_now_ns() + 5 * SEC;

		while (s->done < s->n && rl_time_now_ns() < end) {
			uint32_t bell = rl_table_asks_bell(t);

			if (!rl_table_asks_take(t, answer_one, s))
				rl_table_asks_wait(t, bell, 50 * MS);
		}
		_exit(s->done == s->n ? 0 : 1);
	}
	return pid;
}

static void reap(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static unsigned asks_free(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < RL_ASKS; i++)
		n += (atomic_load(&t->asks[i].word) & RL_ASK_STATE_MASK) ==
		     RL_ASK_FREE;
	return n;
}

static int take(const char *key, uint64_t wait_ns, struct rl_result *out)
{
	uint64_t now = rl_time_now_ns();

	return rl_table_take_strict(t, rule, key, strlen(key), 1, now,
				    now + wait_ns, out, NULL);
}

static int lend(const char *key, uint64_t wait_ns, struct rl_result *out)
{
	uint64_t now = rl_time_now_ns();

	return rl_table_take_lend(t, rule, key, strlen(key), 1, now,
				  now + wait_ns, out, NULL);
}

/* An agent syncing 4 hosts, lending. */
static void lending(void)
{
	rl_table_agent_set_hosts(t, 4);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC | RL_AGENT_LEND, 0);
}

/* ---- the cases ----------------------------------------------------------------- */

/* No agent answering asks: decided here at once, nothing posted. */
static void test_no_agent(void **state)
{
	struct rl_result r;
	uint32_t bell = rl_table_asks_bell(t);

	(void)state;
	assert_int_equal(take("a", SEC, &r), -EAGAIN);
	assert_true(r.allowed);
	assert_int_equal(rl_table_asks_bell(t), bell);
}

/* The store's answers are the decisions, and its state the key's here:
 * once it refuses, the next request is refused here without an ask. */
static void test_answered_then_refused_locally(void **state)
{
	struct script s = { .allowed = { 1, 0 }, .debt = { 9 * EI, DEPTH }, .n = 2 };
	struct rl_result r;
	pid_t pid;
	uint32_t bell;

	(void)state;
	rl_table_agent_flags_change(t, RL_AGENT_STRICT, 0);
	pid = agent(&s);
	/* allowed: 9 intervals owed now, one request left */
	assert_int_equal(take("k", 2 * SEC, &r), 0);
	assert_true(r.allowed);
	assert_int_equal(r.limit, 10);
	assert_int_equal(r.remaining, 1);
	/* (read a little after the agent's clock: within a second) */
	assert_true(r.reset_after_ns > 9 * EI - SEC && r.reset_after_ns <= 9 * EI);
	/* refused by the store (other hosts used the last one) */
	assert_int_equal(take("k", 2 * SEC, &r), 0);
	assert_false(r.allowed);
	assert_int_equal(r.remaining, 0);
	assert_true(r.retry_after_ns > EI - SEC && r.retry_after_ns <= EI);
	reap(pid);
	/* now the key's state here says so: refused without asking */
	bell = rl_table_asks_bell(t);
	assert_int_equal(take("k", 2 * SEC, &r), 1);
	assert_false(r.allowed);
	assert_true(r.retry_after_ns > EI - SEC && r.retry_after_ns <= EI);
	assert_int_equal(rl_table_asks_bell(t), bell);
	assert_int_equal(asks_free(), RL_ASKS);
}

/* No answer by the deadline: -EAGAIN, decided here, the ask given back;
 * asks are never lost, however many time out. */
static void test_deadline(void **state)
{
	struct rl_result r;
	uint64_t t0;

	(void)state;
	rl_table_agent_flags_change(t, RL_AGENT_STRICT, 0);
	t0 = rl_time_now_ns();
	assert_int_equal(take("d", 20 * MS, &r), -EAGAIN);
	assert_true(rl_time_now_ns() - t0 >= 20 * MS);
	assert_true(r.allowed);
	for (unsigned i = 0; i < 2 * RL_ASKS; i++) {
		char key[16];

		snprintf(key, sizeof(key), "d%u", i);
		assert_int_equal(take(key, 0, &r), -EAGAIN);
	}
	assert_int_equal(asks_free(), RL_ASKS);
}

/* An answer after the shim gave up: the ask is freed by the agent, and
 * the key's state here is still the store's. */
static void test_abandoned(void **state)
{
	struct script s = { .allowed = { 0 }, .debt = { DEPTH }, .n = 1,
			    .delay_ns = 100 * MS };
	struct rl_result r;
	pid_t pid;

	(void)state;
	rl_table_agent_flags_change(t, RL_AGENT_STRICT, 0);
	pid = agent(&s);
	assert_int_equal(take("late", 20 * MS, &r), -EAGAIN);
	assert_true(r.allowed); /* decided here meanwhile */
	reap(pid);
	assert_int_equal(asks_free(), RL_ASKS);
	assert_int_equal(take("late", SEC, &r), 1); /* the store's refusal */
}

/* An ask that does not move between two sweeps was left by a dead
 * process and is freed; one that moved is not. */
static void test_sweep(void **state)
{
	uint32_t seen[RL_ASKS] = { 0 };
	uint32_t w0 = (7u << RL_ASK_STATE_BITS) | RL_ASK_FILLING;

	(void)state;
	atomic_store(&t->asks[3].word, w0);
	atomic_store(&t->asks[4].word, w0);
	rl_table_asks_sweep(t, seen);
	assert_int_equal(asks_free(), RL_ASKS - 2);
	atomic_store(&t->asks[4].word, (8u << RL_ASK_STATE_BITS) | RL_ASK_POSTED);
	rl_table_asks_sweep(t, seen);
	assert_int_equal(atomic_load(&t->asks[3].word) & RL_ASK_STATE_MASK,
			 RL_ASK_FREE);
	assert_int_equal(atomic_load(&t->asks[4].word) & RL_ASK_STATE_MASK,
			 RL_ASK_POSTED);
	rl_table_asks_sweep(t, seen);
	assert_int_equal(asks_free(), RL_ASKS);
}

/* errno is the caller's after a wait, answered or not. */
static void test_errno_kept(void **state)
{
	struct rl_result r;

	(void)state;
	rl_table_agent_flags_change(t, RL_AGENT_STRICT, 0);
	errno = EXDEV;
	take("e", 5 * MS, &r);
	assert_int_equal(errno, EXDEV);
}

/* No agent lending (or the store known down): decided here at once as
 * ever, a key new here from its share (ceil(10 / 4) = 3), nothing posted. */
static void test_lend_none(void **state)
{
	struct rl_result r;
	uint32_t bell = rl_table_asks_bell(t);

	(void)state;
	rl_table_agent_set_hosts(t, 4);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(lend("n", SEC, &r), 0);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 2);
	rl_table_agent_flags_change(t, RL_AGENT_LEND | RL_AGENT_STORE_DOWN, 0);
	assert_int_equal(lend("n2", SEC, &r), 0);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 2);
	assert_int_equal(rl_table_asks_bell(t), bell);
}

/* A key new here, other hosts alive: lent, not a blind share. What was
 * lent is spent here without asking; spent, the host asks again; lent
 * nothing, the key is refused, and the next requests are refused here
 * without asking (the store's last word until the next sync). */
static void test_lend_fresh_then_spent(void **state)
{
	struct script s = { .allowed = { 2, 0 }, .debt = { 0, DEPTH }, .n = 2 };
	struct rl_result r;
	uint32_t bell;
	pid_t pid;

	(void)state;
	lending();
	pid = agent(&s);
	bell = rl_table_asks_bell(t);
	assert_int_equal(lend("f", 2 * SEC, &r), 0);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 1); /* 2 lent, 1 spent */
	assert_int_equal(rl_table_asks_bell(t), bell + 1);
	/* within what was lent: no ask */
	assert_int_equal(lend("f", 2 * SEC, &r), 0);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 0);
	assert_int_equal(rl_table_asks_bell(t), bell + 1);
	/* spent: asked again, the store has nothing left */
	assert_int_equal(lend("f", 2 * SEC, &r), 0);
	assert_false(r.allowed);
	assert_int_equal(rl_table_asks_bell(t), bell + 2);
	reap(pid);
	/* refused here now, its state the store's debt */
	assert_int_equal(lend("f", 2 * SEC, &r), 0);
	assert_false(r.allowed);
	assert_true(r.retry_after_ns > EI - SEC && r.retry_after_ns <= EI);
	assert_int_equal(rl_table_asks_bell(t), bell + 2);
	assert_int_equal(asks_free(), RL_ASKS);
}

/* A lend never gives more than the bucket, and gives on top of what the
 * key holds here (a key in use is not started over). */
static void test_lend_adds(void **state)
{
	struct script s = { .allowed = { 1, 50 }, .debt = { 0, 0 }, .n = 2 };
	struct rl_result r;
	pid_t pid;

	(void)state;
	lending();
	pid = agent(&s);
	assert_int_equal(lend("a", 2 * SEC, &r), 0);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 0);
	assert_int_equal(lend("a", 2 * SEC, &r), 0);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 9); /* a full bucket, less this one */
	reap(pid);
}

/* No answer by the deadline: -EAGAIN and decided as without lends (a
 * blind share of a key new here; a refusal from a share spent). */
static void test_lend_deadline(void **state)
{
	struct rl_result r;
	uint64_t t0;

	(void)state;
	lending();
	t0 = rl_time_now_ns();
	assert_int_equal(lend("d", 20 * MS, &r), -EAGAIN);
	assert_true(rl_time_now_ns() - t0 >= 20 * MS);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 2);
	assert_int_equal(lend("d", 0, &r), 0); /* within the share */
	assert_int_equal(lend("d", 0, &r), 0);
	assert_true(r.allowed);
	assert_int_equal(lend("d", 0, &r), -EAGAIN);
	assert_false(r.allowed);
	assert_int_equal(asks_free(), RL_ASKS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_no_agent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_answered_then_refused_locally,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abandoned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errno_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lend_none, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lend_fresh_then_spent,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_lend_adds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lend_deadline, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
