/* SPDX-License-Identifier: MIT */
/* test_ban.c - bans in the shared segment: prefixes, expiry, lifting,
 * reuse, reservations left by dead writers, sharing between handles. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ban.h"
#include "each.h"
#include "shm.h"

#define NOW 1800000000000ull /* a Unix time in ms */

static char seg[64];
static struct rl_table *t;

static int setup(void **state)
{
	static int n;

	(void)state;
	snprintf(seg, sizeof(seg), "rlshim-test-ban-%d-%d", (int)getpid(), n++);
	rl_table_unlink(seg);
	return rl_table_open(seg, 64, RL_TABLE_CREATE, &t, NULL);
}

static int teardown(void **state)
{
	(void)state;
	rl_table_close(t);
	rl_table_unlink(seg);
	return 0;
}

static struct rl_cidr cidr(const char *s)
{
	struct rl_cidr c;

	assert_int_equal(rl_cidr_parse(s, strlen(s), &c), 0);
	return c;
}

static struct rl_addr addr(const char *s)
{
	struct rl_addr a;

	assert_int_equal(rl_addr_parse(s, strlen(s), &a), 0);
	return a;
}

static int banned(const char *s, uint64_t now)
{
	struct rl_addr a = addr(s);

	return rl_ban_check(t, &a, now);
}

static void test_none(void **state)
{
	(void)state;
	assert_false(rl_ban_any(t, RL_AF_INET));
	assert_false(rl_ban_any(t, RL_AF_INET6));
	assert_false(banned("192.0.2.1", NOW));
}

static void test_prefixes(void **state)
{
	struct rl_cidr c;

	(void)state;
	c = cidr("192.0.2.7");
	assert_int_equal(rl_ban_add(t, &c, NOW + 60000, RL_BAN_MANUAL, 3, NOW), 0);
	c = cidr("198.51.100.0/24");
	assert_int_equal(rl_ban_add(t, &c, NOW + 60000, RL_BAN_LOCAL, 1, NOW), 0);
	c = cidr("2001:db8:1:2::/64");
	assert_int_equal(rl_ban_add(t, &c, NOW + 60000, RL_BAN_REMOTE,
				    RL_BAN_NO_RULE, NOW), 0);
	assert_true(rl_ban_any(t, RL_AF_INET));
	assert_true(banned("192.0.2.7", NOW));
	assert_false(banned("192.0.2.8", NOW));
	assert_true(banned("198.51.100.0", NOW));
	assert_true(banned("198.51.100.255", NOW));
	assert_false(banned("198.51.101.1", NOW));
	assert_true(banned("2001:db8:1:2:ffff::1", NOW));
	assert_false(banned("2001:db8:1:3::1", NOW));
	/* An IPv4-mapped client is the IPv4 client. */
	assert_true(banned("::ffff:198.51.100.9", NOW));
	/* Expiry is exclusive: at the instant, free again. */
	assert_false(banned("192.0.2.7", NOW + 60000));
}

struct seen {
	int n;
	uint32_t hits;
	uint8_t origin;
};

static int visit(const struct rl_ban_view *v, void *arg)
{
	struct seen *s = arg;
	char buf[RL_CIDR_STRLEN];

	rl_cidr_format(&v->cidr, buf, sizeof(buf));
	if (strcmp(buf, "192.0.2.7/32") == 0) {
		s->hits = v->hits;
		s->origin = v->origin;
		assert_int_equal(v->rule, 3);
		assert_int_equal(v->expires_ms, NOW + 60000);
		assert_int_equal(v->created_ms, NOW);
	}
	s->n++;
	return 0;
}

static void test_foreach_hits_origin(void **state)
{
	struct rl_cidr c = cidr("192.0.2.7");
	struct seen s = { 0, 0, 0 };

	(void)state;
	rl_ban_add(t, &c, NOW + 60000, RL_BAN_MANUAL, 3, NOW);
	assert_true(banned("192.0.2.7", NOW));
	assert_true(banned("192.0.2.7", NOW + 1));
	/* The store echoing it back: still ours (manual), new expiry kept. */
	rl_ban_add(t, &c, NOW + 60000, RL_BAN_REMOTE, 3, NOW + 2);
	rl_ban_foreach(t, NOW, visit, &s);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.hits, 2);
	assert_int_equal(s.origin, RL_BAN_MANUAL);
	/* Expired bans are not listed. */
	s.n = 0;
	rl_ban_foreach(t, NOW + 60000, visit, &s);
	assert_int_equal(s.n, 0);
}

static void test_remove_and_renew(void **state)
{
	struct rl_cidr c = cidr("203.0.113.0/28");

	(void)state;
	assert_int_equal(rl_ban_remove(t, &c), -ENOENT);
	assert_int_equal(rl_ban_lifted(t, &c), 0);
	rl_ban_add(t, &c, NOW + 1000, RL_BAN_LOCAL, 0, NOW);
	assert_true(banned("203.0.113.5", NOW));
	/* Renewing moves the expiry, either way. */
	rl_ban_add(t, &c, NOW + 5000, RL_BAN_LOCAL, 0, NOW);
	assert_true(banned("203.0.113.5", NOW + 4000));
	assert_int_equal(rl_ban_lifted(t, &c), 0); /* live: not lifted */
	assert_int_equal(rl_ban_unban(t, &c), 0);
	assert_false(banned("203.0.113.5", NOW));
	/* What it was when lifted, for the agent to lift it in the store. */
	assert_int_equal(rl_ban_lifted(t, &c), NOW + 5000);
	assert_int_equal(rl_ban_remove(t, &c), -ENOENT);
	assert_int_equal(rl_ban_lifted(t, &c), NOW + 5000);
	/* Lifted by the agent's bookkeeping, not by hand: not remembered. */
	rl_ban_add(t, &c, NOW + 7000, RL_BAN_REMOTE, 0, NOW);
	assert_int_equal(rl_ban_remove(t, &c), 0);
	assert_int_equal(rl_ban_lifted(t, &c), 0);
	/* The lifted entry is reused, not leaked; banned again, not lifted. */
	rl_ban_add(t, &c, NOW + 1000, RL_BAN_LOCAL, 0, NOW);
	assert_true(banned("203.0.113.5", NOW));
	assert_int_equal(rl_ban_lifted(t, &c), 0);
}

/* Thousands of distinct bans all found; the table holds RL_BANS. */
static void test_many(void **state)
{
	char s[32];

	(void)state;
	for (unsigned i = 0; i < 3000; i++) {
		struct rl_cidr c;

		snprintf(s, sizeof(s), "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
		c = cidr(s);
		assert_int_equal(rl_ban_add(t, &c, NOW + 1000, RL_BAN_LOCAL, 0, NOW), 0);
	}
	for (unsigned i = 0; i < 3000; i++) {
		snprintf(s, sizeof(s), "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
		assert_true(banned(s, NOW));
	}
	assert_false(banned("10.200.0.1", NOW));
	/* Once they expire, as many new ones fit again. */
	for (unsigned i = 0; i < 3000; i++) {
		struct rl_cidr c;

		snprintf(s, sizeof(s), "172.16.%u.%u", i >> 8, i & 255);
		c = cidr(s);
		assert_int_equal(rl_ban_add(t, &c, NOW + 9000, RL_BAN_LOCAL, 0,
					    NOW + 2000), 0);
	}
	assert_true(banned("172.16.11.183", NOW + 2000));
}

/* A writer that died while filling an entry leaves a reservation; after a
 * second it is taken over. */
static void test_stale_reservation(void **state)
{
	struct rl_cidr c = cidr("192.0.2.99");

	(void)state;
	for (unsigned i = 0; i < RL_BANS; i++)
		atomic_store(&t->bans[i].tag, (NOW - 5000) << 1);
	assert_int_equal(rl_ban_add(t, &c, NOW + 1000, RL_BAN_MANUAL, 0, NOW), 0);
	assert_true(banned("192.0.2.99", NOW));
	/* A fresh reservation everywhere: nothing to take, refused. */
	for (unsigned i = 0; i < RL_BANS; i++)
		atomic_store(&t->bans[i].tag, NOW << 1);
	c = cidr("192.0.2.100");
	assert_int_equal(rl_ban_add(t, &c, NOW + 1000, RL_BAN_MANUAL, 0, NOW), -ENOSPC);
}

/* Another process's handle sees the same bans. */
static void test_shared(void **state)
{
	struct rl_table *u = NULL;
	struct rl_cidr c = cidr("192.0.2.0/30");
	struct rl_addr a = addr("192.0.2.3");

	(void)state;
	assert_int_equal(rl_table_open(seg, 0, 0, &u, NULL), 0);
	rl_ban_add(u, &c, NOW + 1000, RL_BAN_MANUAL, 0, NOW);
	assert_true(rl_ban_check(t, &a, NOW));
	rl_ban_remove(t, &c);
	assert_false(rl_ban_check(u, &a, NOW));
	rl_table_close(u);
}

static int view_offences(const struct rl_ban_view *v, void *arg)
{
	char buf[RL_CIDR_STRLEN];

	(void)arg;
	rl_cidr_format(&v->cidr, buf, sizeof(buf));
	if (strcmp(buf, "198.51.100.0/24") == 0) {
		assert_int_equal(v->offences, 3);
		assert_int_equal(v->rule, 5);
		assert_int_equal(v->origin, RL_BAN_LOCAL);
		return 1;
	}
	return 0;
}

/* fail2ban's bantime.increment: each offence of a prefix doubles its ban,
 * up to the cap; a prefix still banned is left alone. */
static void test_offences(void **state)
{
	struct rl_ban_rule r = { 2000, 7000, 1, 5 };
	struct rl_cidr c = cidr("192.0.2.9");
	uint64_t until = 0, gen;
	uint32_t n = 0;
	struct rl_addr a = addr("192.0.2.9");

	(void)state;
	gen = rl_table_ban_gen(t);
	assert_int_equal(rl_ban_offence(t, &c, &r, NOW, &until, &n), 0);
	assert_int_equal(until, NOW + 2000);
	assert_int_equal(n, 1);
	assert_int_equal(rl_table_ban_gen(t), gen + 1);
	assert_int_equal(rl_ban_lookup(t, &a, NOW + 1999), NOW + 2000);
	assert_int_equal(rl_ban_lookup(t, &a, NOW + 2000), 0);
	/* Still banned: nothing changes, not even the generation. */
	assert_int_equal(rl_ban_offence(t, &c, &r, NOW + 1000, &until, &n), 1);
	assert_int_equal(until, NOW + 2000);
	assert_int_equal(rl_table_ban_gen(t), gen + 1);
	/* Released, offends again: 4 s, then 7 s (the cap), then 7 s. */
	assert_int_equal(rl_ban_offence(t, &c, &r, NOW + 3000, &until, &n), 0);
	assert_int_equal(until, NOW + 3000 + 4000);
	assert_int_equal(n, 2);
	assert_int_equal(rl_table_ban_gen(t), gen + 2);
	assert_int_equal(rl_ban_offence(t, &c, &r, NOW + 8000, &until, &n), 0);
	assert_int_equal(until, NOW + 8000 + 7000);
	assert_int_equal(n, 3);
	/* A manual unban does not forget the offences. */
	assert_int_equal(rl_ban_remove(t, &c), 0);
	assert_false(banned("192.0.2.9", NOW + 9000));
	assert_int_equal(rl_ban_offence(t, &c, &r, NOW + 9000, &until, &n), 0);
	assert_int_equal(until, NOW + 9000 + 7000);
	assert_int_equal(n, 4);
	/* Without increment every ban is bantime long. */
	r.increment = 0;
	c = cidr("198.51.100.0/24");
	for (int i = 0; i < 3; i++) {
		uint64_t at = NOW + (uint64_t)i * 5000;

		assert_int_equal(rl_ban_offence(t, &c, &r, at, &until, &n), 0);
		assert_int_equal(until, at + 2000);
		assert_int_equal(n, (uint32_t)i + 1);
		assert_true(banned("198.51.100.77", at + 1999));
	}
	/* The view shows the rule, the origin and the offences. */
	assert_int_equal(rl_ban_foreach(t, NOW + 10000, view_offences, NULL), 1);
}

/* The generation moves when a live ban comes, changes or goes, and only
 * then: the store re-asserting a ban as it is moves nothing. */
static void test_gen(void **state)
{
	struct rl_cidr c = cidr("2001:db8::/64");
	uint64_t gen;

	(void)state;
	gen = rl_table_ban_gen(t);
	assert_int_equal(rl_ban_add(t, &c, NOW + 1000, RL_BAN_REMOTE, 0, NOW), 0);
	assert_int_equal(rl_table_ban_gen(t), gen + 1);
	assert_int_equal(rl_ban_add(t, &c, NOW + 1000, RL_BAN_REMOTE, 0, NOW), 0);
	assert_int_equal(rl_table_ban_gen(t), gen + 1);
	assert_int_equal(rl_ban_add(t, &c, NOW + 2000, RL_BAN_REMOTE, 0, NOW), 0);
	assert_int_equal(rl_table_ban_gen(t), gen + 2);
	assert_int_equal(rl_ban_add(t, &c, NOW + 9000, RL_BAN_REMOTE, 0, NOW + 5000), 0);
	assert_int_equal(rl_table_ban_gen(t), gen + 3);
	assert_int_equal(rl_ban_remove(t, &c), 0);
	assert_int_equal(rl_table_ban_gen(t), gen + 4);
	assert_int_equal(rl_ban_remove(t, &c), -ENOENT);
	assert_int_equal(rl_table_ban_gen(t), gen + 4);
	/* Already expired when added: nobody needs to look. */
	c = cidr("2001:db8:1::/64");
	assert_int_equal(rl_ban_add(t, &c, NOW - 1, RL_BAN_REMOTE, 0, NOW), 0);
	assert_int_equal(rl_table_ban_gen(t), gen + 4);
}

int main(void)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_foreach_hits_origin),
		cmocka_unit_test(test_remove_and_renew),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_stale_reservation),
		cmocka_unit_test(test_shared),
		cmocka_unit_test(test_offences),
		cmocka_unit_test(test_gen),
	};

	return run_each("ban", tests, sizeof(tests) / sizeof(tests[0]),
			setup, teardown);
}
