/* SPDX-License-Identifier: MIT */
/* test_cluster.c - Redis Cluster's slots (the spec's vectors, hash tags),
 * the slot map from CLUSTER SLOTS / SHARDS replies (built by hand, hostile
 * ones too, and as Redis 7.0 clusters sent them, IPv4 and IPv6), MOVED and ASK, and the
 * redis-cluster:// URL; the shard of a key and a node's own tag. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* ---- replies built by hand, from a pool (nothing to free) ------------------------ */

#define POOL 4096
static redisReply pool[POOL];
static redisReply *elems[POOL];
static unsigned npool, nelems;

static void pool_reset(void)
{
	memset(pool, 0, sizeof(pool));
	npool = 0;
	nelems = 0;
}

static redisReply *node_new(int type)
{
	assert_true(npool < POOL);
	pool[npool].type = type;
	return &pool[npool++];
}

static redisReply *I(long long v)
{
	redisReply *r = node_new(REDIS_REPLY_INTEGER);

	r->integer = v;
	return r;
}

static redisReply *S(const char *s)
{
	redisReply *r = node_new(REDIS_REPLY_STRING);

	r->str = (char *)s;
	r->len = strlen(s);
	return r;
}

static redisReply *NIL(void)
{
	return node_new(REDIS_REPLY_NIL);
}

#define END ((redisReply *)-1)
/* An array of the replies up to END (NULL may be one of them: a hole). */
static redisReply *A(redisReply *first, ...)
{
	redisReply *r = node_new(REDIS_REPLY_ARRAY), *e;
	va_list ap;

	r->element = &elems[nelems];
	va_start(ap, first);
	for (e = first; e != END; e = va_arg(ap, redisReply *)) {
		assert_true(nelems < POOL);
		elems[nelems++] = e;
		r->elements++;
	}
	va_end(ap);
	return r;
}

static struct rl_cluster_map *map(void)
{
	static struct rl_cluster_map *m;

	if (!m)
		m = calloc(1, sizeof(*m));
	assert_non_null(m);
	return m;
}

/* ---- slots --------------------------------------------------------------------- */

static unsigned slot(const char *key)
{
	return rl_cluster_slot(key, strlen(key));
}

static void test_crc16(void **state)
{
	(void)state;
	/* The cluster specification's vector. */
	assert_int_equal(rl_cluster_crc16("123456789", 9), 0x31C3);
	assert_int_equal(rl_cluster_crc16("", 0), 0);
	/* CLUSTER KEYSLOT of Redis 7.0.15. */
	assert_int_equal(slot("123456789"), 12739);
	assert_int_equal(slot("foo"), 12182);
	assert_int_equal(slot("bar"), 5061);
	assert_int_equal(slot("zap"), 6469);
	assert_int_equal(slot("user1000"), 3443);
	assert_int_equal(slot("sms"), 13018);
}

static void test_hash_tags(void **state)
{
	char bin[5] = { 'a', '{', '\0', '}', 'b' };

	(void)state;
	/* The spec's examples, and what Redis 7.0.15's CLUSTER KEYSLOT says. */
	assert_int_equal(slot("{user1000}.following"), slot("user1000"));
	assert_int_equal(slot("{user1000}.followers"), 3443);
	assert_int_equal(slot("foo{}{bar}"), 8363);   /* whole key */
	assert_int_equal(slot("foo{{bar}}zap"), 4015); /* "{bar" */
	assert_int_equal(slot("foo{{bar}}zap"), slot("{bar"));
	assert_int_equal(slot("foo{bar}{zap}"), 5061); /* "bar" */
	assert_int_equal(slot("{}"), 15257);
	assert_int_equal(slot("{"), 4092);
	assert_int_equal(slot("a}b{c"), 13587);
	assert_int_equal(slot("rl{sms}"), slot("sms"));
	/* Binary keys: the length counts, not a NUL. */
	assert_int_equal(rl_cluster_slot(bin, 5), rl_cluster_crc16("\0", 1));
	assert_int_equal(rl_cluster_slot("x{ab", 2), slot("x{"));
	assert_int_equal(rl_cluster_slot("", 0), 0);
}

/* ---- the slot map from CLUSTER SLOTS ------------------------------------------- */

static redisReply *three_masters(void)
{
	return A(A(I(0), I(5460), A(S("10.0.0.1"), I(7000), S("aaa"), END),
		   A(S("10.0.0.4"), I(7003), S("ddd"), END), END),
		 A(I(5461), I(10922), A(S("10.0.0.2"), I(7001), S("bbb"), END), END),
		 A(I(10923), I(16000), A(S("10.0.0.3"), I(7002), S("ccc"), A(END), END),
		   END),
		 /* a second range of the first master */
		 A(I(16001), I(16383), A(S("10.0.0.1"), I(7000), S("aaa"), END),
		   A(S("10.0.0.4"), I(7003), S("ddd"), END), END),
		 END);
}

static void test_map_slots(void **state)
{
	struct rl_cluster_map *m = map();
	const struct rl_cluster_shard *sh;

	(void)state;
	pool_reset();
	assert_int_equal(rl_cluster_map_slots(three_masters(), m), 0);
	assert_int_equal(m->nshards, 3);
	assert_int_equal(m->nslots, RL_CLUSTER_SLOTS);
	sh = rl_cluster_lookup(m, 0);
	assert_non_null(sh);
	assert_string_equal(sh->master.host, "10.0.0.1");
	assert_int_equal(sh->master.port, 7000);
	assert_string_equal(sh->master.id, "aaa");
	assert_int_equal(sh->nreplicas, 1);
	assert_string_equal(sh->replica[0].host, "10.0.0.4");
	assert_int_equal(sh->replica[0].port, 7003);
	assert_ptr_equal(rl_cluster_lookup(m, 5460), sh);
	assert_ptr_equal(rl_cluster_lookup(m, 16383), sh);
	assert_ptr_equal(rl_cluster_lookup(m, 16001), sh);
	sh = rl_cluster_lookup(m, slot("foo")); /* 12182 */
	assert_string_equal(sh->master.host, "10.0.0.3");
	assert_int_equal(sh->nreplicas, 0);
	assert_string_equal(rl_cluster_lookup(m, 5461)->master.id, "bbb");
	assert_null(rl_cluster_lookup(m, RL_CLUSTER_SLOTS));

	/* A NIL host: the one asked; no id (Redis before 4.0); a "?" master
	 * (unknown endpoint): its slots without owner; a gap: none either. */
	pool_reset();
	assert_int_equal(rl_cluster_map_slots(
		A(A(I(0), I(99), A(NIL(), I(7000), END), A(S("?"), I(7001), END),
		    A(S(""), I(7002), END), END),
		  A(I(100), I(199), A(S("?"), I(7005), S("x"), END), END),
		  A(I(300), I(300), A(S("h"), I(7006), END), END), END), m), 0);
	assert_int_equal(m->nshards, 2);
	assert_int_equal(m->nslots, 101);
	sh = rl_cluster_lookup(m, 42);
	assert_string_equal(sh->master.host, "");
	assert_string_equal(sh->master.id, "");
	assert_int_equal(sh->nreplicas, 1); /* "?" left out */
	assert_int_equal(sh->replica[0].port, 7002);
	assert_null(rl_cluster_lookup(m, 150));
	assert_null(rl_cluster_lookup(m, 250));
	assert_int_equal(rl_cluster_lookup(m, 300)->master.port, 7006);

	/* A NIL host with the address in the metadata (unknown-endpoint). */
	pool_reset();
	assert_int_equal(rl_cluster_map_slots(
		A(A(I(0), I(16383), A(NIL(), I(7000), S("n"), A(S("ip"), S("fe80::9"),
							       END), END), END),
		  END), m), 0);
	assert_string_equal(rl_cluster_lookup(m, 1)->master.host, "fe80::9");

	/* No slots at all (a cluster being made): an empty map, no error. */
	pool_reset();
	assert_int_equal(rl_cluster_map_slots(A(END), m), 0);
	assert_int_equal(m->nshards, 0);
	assert_null(rl_cluster_lookup(m, 0));
}

/* Each reply is refused, and leaves the map empty. */
static void expect_refused(redisReply *r, int want)
{
	struct rl_cluster_map *m = map();

	/* full first, so that "left empty" is seen */
	assert_int_equal(rl_cluster_map_slots(three_masters(), m), 0);
	assert_int_equal(rl_cluster_map_slots(r, m), want);
	assert_int_equal(m->nshards, 0);
	assert_int_equal(m->nslots, 0);
	assert_null(rl_cluster_lookup(m, 0));
	assert_null(rl_cluster_lookup(m, 16383));
}

static void test_map_slots_hostile(void **state)
{
	char longhost[RL_CLUSTER_HOST_MAX + 1], longid[RL_CLUSTER_ID_MAX + 1];
	static char hosts[RL_CLUSTER_MASTERS_MAX + 1][16];
	redisReply *many;
	unsigned i;

	(void)state;
	memset(longhost, 'h', sizeof(longhost) - 1);
	longhost[sizeof(longhost) - 1] = '\0';
	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	pool_reset();
	expect_refused(NULL, -EPROTO);
	expect_refused(I(3), -EPROTO);
	expect_refused(S("OK"), -EPROTO);
	expect_refused(A(I(0), END), -EPROTO);
	expect_refused(A(NULL, END), -EPROTO);
	expect_refused(A(A(I(0), I(5), END), END), -EPROTO); /* no master */
	expect_refused(A(A(S("0"), I(5), A(S("h"), I(1), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), A(S("h"), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), S("h:1"), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), NULL, END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), A(S("h"), S("7000"), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), A(S("h"), I(0), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), A(S("h"), I(65536), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), A(S("h"), I(-1), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), A(S("h"), I(1LL << 40), END), END), END),
		       -EPROTO);
	expect_refused(A(A(I(-1), I(5), A(S("h"), I(1), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(16384), A(S("h"), I(1), END), END), END), -EPROTO);
	expect_refused(A(A(I(9), I(5), A(S("h"), I(1), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), A(S(longhost), I(1), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), A(S("h"), I(1), S(longid), END), END), END),
		       -EPROTO);
	expect_refused(A(A(I(0), I(5), A(S("h"), I(1), I(7), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), A(NIL(), I(1), S("n"), A(S("ip"), I(7), END),
				       END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(5), A(S(""), I(1), S("n"),
				       A(S("ip"), S(longhost), END), END), END), END),
		       -EPROTO);
	/* a bad replica refuses the reply too */
	expect_refused(A(A(I(0), I(5), A(S("h"), I(1), END), A(S("r"), I(0), END), END),
			 END), -EPROTO);
	/* overlapping ranges, of one master or two; the same range twice */
	expect_refused(A(A(I(0), I(10), A(S("a"), I(1), END), END),
			 A(I(10), I(20), A(S("b"), I(1), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(10), A(S("a"), I(1), END), END),
			 A(I(5), I(5), A(S("a"), I(1), END), END), END), -EPROTO);
	expect_refused(A(A(I(0), I(10), A(S("?"), I(1), END), END),
			 A(I(0), I(10), A(S("b"), I(1), END), END), END), -EPROTO);
	/* one master too many */
	pool_reset();
	{
		redisReply *ranges[RL_CLUSTER_MASTERS_MAX + 1];

		for (i = 0; i <= RL_CLUSTER_MASTERS_MAX; i++) {
			snprintf(hosts[i], sizeof(hosts[i]), "10.1.0.%u", i);
			ranges[i] = A(I(i), I(i), A(S(hosts[i]), I(7000), END), END);
		}
		many = node_new(REDIS_REPLY_ARRAY);
		many->element = ranges;
		many->elements = RL_CLUSTER_MASTERS_MAX;
		assert_int_equal(rl_cluster_map_slots(many, map()), 0);
		assert_int_equal(map()->nshards, RL_CLUSTER_MASTERS_MAX);
		many->elements = RL_CLUSTER_MASTERS_MAX + 1;
		expect_refused(many, -E2BIG);
	}
}

/* ---- the slot map from CLUSTER SHARDS ------------------------------------------- */

static redisReply *shard_node(const char *id, const char *ep, long long port,
			      const char *role, const char *health)
{
	return A(S("id"), S(id), S("port"), I(port), S("ip"), S("192.168.0.9"),
		 S("endpoint"), ep ? S(ep) : NIL(), S("hostname"), S(""),
		 S("role"), S(role), S("replication-offset"), I(72156),
		 S("health"), S(health), END);
}

static void test_map_shards(void **state)
{
	struct rl_cluster_map *m = map();
	const struct rl_cluster_shard *sh;

	(void)state;
	pool_reset();
	assert_int_equal(rl_cluster_map_shards(
		A(A(S("slots"), A(I(0), I(5460), I(16000), I(16383), END),
		    S("nodes"), A(shard_node("r1", "10.0.0.4", 7003, "replica", "online"),
				  shard_node("m1", "10.0.0.1", 7000, "master", "online"),
				  shard_node("r2", "10.0.0.5", 7004, "replica", "loading"),
				  END), END),
		  A(S("nodes"), A(shard_node("m2", "10.0.0.2", 7001, "master", "online"),
				  END),
		    S("slots"), A(I(5461), I(15999), END), S("future"), I(1), END),
		  /* a master with no slots yet: no shard */
		  A(S("slots"), A(END), S("nodes"),
		    A(shard_node("m3", "10.0.0.3", 7002, "master", "online"), END), END),
		  END), m), 0);
	assert_int_equal(m->nshards, 2);
	assert_int_equal(m->nslots, RL_CLUSTER_SLOTS);
	sh = rl_cluster_lookup(m, 16383);
	assert_string_equal(sh->master.id, "m1");
	assert_string_equal(sh->master.host, "10.0.0.1");
	assert_int_equal(sh->master.port, 7000);
	assert_int_equal(sh->nreplicas, 1); /* the loading one left out */
	assert_string_equal(sh->replica[0].id, "r1");
	assert_string_equal(rl_cluster_lookup(m, 12182)->master.id, "m2");

	/* The master failed, no replica promoted yet: no owner for its
	 * slots; an empty or NIL endpoint: the ip; "?": none. */
	pool_reset();
	assert_int_equal(rl_cluster_map_shards(
		A(A(S("slots"), A(I(0), I(99), END), S("nodes"),
		    A(shard_node("m1", "10.0.0.1", 7000, "master", "failed"),
		      shard_node("r1", "10.0.0.4", 7003, "replica", "online"), END), END),
		  A(S("slots"), A(I(100), I(199), END), S("nodes"),
		    A(shard_node("m2", "", 7001, "master", "online"), END), END),
		  A(S("slots"), A(I(200), I(299), END), S("nodes"),
		    A(shard_node("m3", NULL, 7002, "master", "online"), END), END),
		  A(S("slots"), A(I(300), I(399), END), S("nodes"),
		    A(shard_node("m4", "?", 7003, "master", "online"), END), END),
		  END), m), 0);
	assert_int_equal(m->nslots, 200);
	assert_null(rl_cluster_lookup(m, 50));
	assert_string_equal(rl_cluster_lookup(m, 150)->master.host, "192.168.0.9");
	assert_string_equal(rl_cluster_lookup(m, 250)->master.host, "192.168.0.9");
	assert_null(rl_cluster_lookup(m, 350));

	/* Hostile: wrong shapes, odd maps, bad ports and slots, overlaps. */
	pool_reset();
	assert_int_equal(rl_cluster_map_shards(S("x"), m), -EPROTO);
	assert_int_equal(rl_cluster_map_shards(A(I(1), END), m), -EPROTO);
	assert_int_equal(rl_cluster_map_shards(A(A(S("slots"), END), END), m), -EPROTO);
	assert_int_equal(rl_cluster_map_shards(A(A(S("slots"), A(I(0), I(5), END),
						     END), END), m), -EPROTO);
	assert_int_equal(rl_cluster_map_shards(
		A(A(S("slots"), A(I(0), END), S("nodes"), A(END), END), END), m),
		-EPROTO);
	assert_int_equal(rl_cluster_map_shards(
		A(A(S("slots"), A(I(0), I(5), END), S("nodes"), S("n"), END), END), m),
		-EPROTO);
	assert_int_equal(rl_cluster_map_shards(
		A(A(S("slots"), A(I(0), I(5), END), S("nodes"),
		    A(shard_node("m", "h", 0, "master", "online"), END), END), END), m),
		-EPROTO);
	assert_int_equal(rl_cluster_map_shards(
		A(A(S("slots"), A(I(0), I(5), END), S("nodes"),
		    A(A(S("id"), END), END), END), END), m), -EPROTO);
	assert_int_equal(rl_cluster_map_shards(
		A(A(S("slots"), A(I(7), I(5), END), S("nodes"),
		    A(shard_node("m", "h", 1, "master", "online"), END), END), END), m),
		-EPROTO);
	assert_int_equal(rl_cluster_map_shards(
		A(A(S("slots"), A(I(0), I(5), END), S("nodes"),
		    A(shard_node("m", "h", 1, "master", "online"), END), END),
		  A(S("slots"), A(I(5), I(9), END), S("nodes"),
		    A(shard_node("n", "h", 2, "master", "online"), END), END), END), m),
		-EPROTO);
	assert_int_equal(m->nshards, 0);
	assert_null(rl_cluster_lookup(m, 0));
}

/* ---- replies as a Redis 7.0.15 cluster sent them ------------------------------ */

/* Three masters made by redis-cli --cluster create, a replica of the first. */
static const char real_slots[] =
	"*3\r\n*4\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:27101\r\n$40\r\n"
	"be8d752c9bdbcf55709dd1db84ff420170ac0d52\r\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n"
	":27104\r\n$40\r\n7c17fe15f3fffb731497e5d225909c0d14df636d\r\n*0\r\n*3\r\n"
	":5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:27102\r\n$40\r\n"
	"a0133570a5105db57831f648b93c6f40d103649f\r\n*0\r\n*3\r\n:10923\r\n:16383\r\n"
	"*4\r\n$9\r\n127.0.0.1\r\n:27103\r\n$40\r\n"
	"e8b98a8a743692afec152b93b28502749571a44d\r\n*0\r\n";

static const char real_shards[] =
	"*3\r\n*4\r\n$5\r\nslots\r\n*2\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n"
	"*14\r\n$2\r\nid\r\n$40\r\ne8b98a8a743692afec152b93b28502749571a44d\r\n"
	"$4\r\nport\r\n:27103\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n"
	"$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n"
	":0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*2\r\n:5461\r\n"
	":10922\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n$40\r\n"
	"a0133570a5105db57831f648b93c6f40d103649f\r\n$4\r\nport\r\n:27102\r\n$2\r\n"
	"ip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n"
	"$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\n"
	"online\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*2\r\n"
	"*14\r\n$2\r\nid\r\n$40\r\nbe8d752c9bdbcf55709dd1db84ff420170ac0d52\r\n"
	"$4\r\nport\r\n:27101\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n"
	"$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n"
	":28\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n"
	"7c17fe15f3fffb731497e5d225909c0d14df636d\r\n$4\r\nport\r\n:27104\r\n$2\r\n"
	"ip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n"
	"$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:28\r\n$6\r\nhealth\r\n$6\r\n"
	"online\r\n";

/* Three masters on ::1, cluster-preferred-endpoint-type unknown-endpoint:
 * NULL hosts, the address in the metadata (SLOTS), an empty endpoint
 * (SHARDS). Asked, they redirected "MOVED 12182 :27113", and while slot
 * 12182 migrated "ASK 12182 ::1:27111". */
static const char real_slots_v6[] =
	"*3\r\n*3\r\n:0\r\n:5460\r\n*4\r\n$-1\r\n:27111\r\n$40\r\n"
	"da1ce5300b85890c039c3ace82f04d9a85737074\r\n*2\r\n$2\r\nip\r\n$3\r\n"
	"::1\r\n*3\r\n:5461\r\n:10922\r\n*4\r\n$-1\r\n:27112\r\n$40\r\n"
	"a609a8158c19718e17cdbbfb758cc04568800938\r\n*2\r\n$2\r\nip\r\n$3\r\n"
	"::1\r\n*3\r\n:10923\r\n:16383\r\n*4\r\n$-1\r\n:27113\r\n$40\r\n"
	"cd23c4fb2ee23590cb76ce042c442a7a261b5790\r\n*2\r\n$2\r\nip\r\n$3\r\n"
	"::1\r\n";

static const char real_shards_v6[] =
	"*3\r\n*4\r\n$5\r\nslots\r\n*2\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n"
	"*14\r\n$2\r\nid\r\n$40\r\ncd23c4fb2ee23590cb76ce042c442a7a261b5790\r\n"
	"$4\r\nport\r\n:27113\r\n$2\r\nip\r\n$3\r\n::1\r\n$8\r\nendpoint\r\n"
	"$0\r\n\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n"
	":0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*2\r\n"
	":5461\r\n:10922\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n$40\r\n"
	"a609a8158c19718e17cdbbfb758cc04568800938\r\n$4\r\nport\r\n:27112\r\n"
	"$2\r\nip\r\n$3\r\n::1\r\n$8\r\nendpoint\r\n$0\r\n\r\n$4\r\nrole\r\n"
	"$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n"
	"$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\n"
	"nodes\r\n*1\r\n*14\r\n$2\r\nid\r\n$40\r\n"
	"da1ce5300b85890c039c3ace82f04d9a85737074\r\n$4\r\nport\r\n:27111\r\n"
	"$2\r\nip\r\n$3\r\n::1\r\n$8\r\nendpoint\r\n$0\r\n\r\n$4\r\nrole\r\n"
	"$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n"
	"$6\r\nonline\r\n";

static redisReply *read_reply(const char *wire, size_t len)
{
	redisReader *rd = redisReaderCreate();
	void *r = NULL;

	assert_non_null(rd);
	assert_int_equal(redisReaderFeed(rd, wire, len), REDIS_OK);
	assert_int_equal(redisReaderGetReply(rd, &r), REDIS_OK);
	assert_non_null(r);
	redisReaderFree(rd);
	return r;
}

static void expect_real(const struct rl_cluster_map *m)
{
	const struct rl_cluster_shard *sh;

	assert_int_equal(m->nshards, 3);
	assert_int_equal(m->nslots, RL_CLUSTER_SLOTS);
	sh = rl_cluster_lookup(m, 0);
	assert_string_equal(sh->master.host, "127.0.0.1");
	assert_int_equal(sh->master.port, 27101);
	assert_string_equal(sh->master.id, "be8d752c9bdbcf55709dd1db84ff420170ac0d52");
	assert_int_equal(sh->nreplicas, 1);
	assert_int_equal(sh->replica[0].port, 27104);
	/* "SET foo" there answered MOVED 12182 127.0.0.1:27103 */
	assert_int_equal(rl_cluster_lookup(m, slot("foo"))->master.port, 27103);
	assert_int_equal(rl_cluster_lookup(m, 10922)->master.port, 27102);
}

static void test_real_replies(void **state)
{
	redisReply *r;

	(void)state;
	r = read_reply(real_slots, sizeof(real_slots) - 1);
	assert_int_equal(rl_cluster_map_slots(r, map()), 0);
	expect_real(map());
	/* not a SLOTS reply: refused, not misread */
	assert_int_equal(rl_cluster_map_shards(r, map()), -EPROTO);
	freeReplyObject(r);
	r = read_reply(real_shards, sizeof(real_shards) - 1);
	assert_int_equal(rl_cluster_map_shards(r, map()), 0);
	expect_real(map());
	assert_int_equal(rl_cluster_map_slots(r, map()), -EPROTO);
	freeReplyObject(r);

	for (int shards = 0; shards < 2; shards++) {
		const struct rl_cluster_shard *sh;

		r = shards ? read_reply(real_shards_v6, sizeof(real_shards_v6) - 1)
			   : read_reply(real_slots_v6, sizeof(real_slots_v6) - 1);
		assert_int_equal(shards ? rl_cluster_map_shards(r, map())
					: rl_cluster_map_slots(r, map()), 0);
		assert_int_equal(map()->nshards, 3);
		assert_int_equal(map()->nslots, RL_CLUSTER_SLOTS);
		sh = rl_cluster_lookup(map(), slot("foo"));
		assert_string_equal(sh->master.host, "::1");
		assert_int_equal(sh->master.port, 27113);
		assert_string_equal(sh->master.id,
				    "cd23c4fb2ee23590cb76ce042c442a7a261b5790");
		freeReplyObject(r);
	}
}

/* ---- MOVED and ASK --------------------------------------------------------------- */

static void expect_redirect(const char *err, int ask, unsigned s,
			    const char *host, int port)
{
	struct rl_cluster_redirect rd;
	int rc = rl_cluster_parse_redirect(err, strlen(err), &rd);

	if (rc)
		fail_msg("%s: %d", err, rc);
	assert_int_equal(rd.ask, ask);
	assert_int_equal(rd.slot, s);
	assert_string_equal(rd.host, host);
	assert_int_equal(rd.port, port);
}

static int redirect_rc(const char *err)
{
	struct rl_cluster_redirect rd;

	return rl_cluster_parse_redirect(err, strlen(err), &rd);
}

static void test_redirects(void **state)
{
	struct rl_cluster_redirect rd;
	char longhost[600];

	(void)state;
	expect_redirect("MOVED 12182 127.0.0.1:27103", 0, 12182, "127.0.0.1", 27103);
	expect_redirect("-MOVED 3999 127.0.0.1:6381", 0, 3999, "127.0.0.1", 6381);
	expect_redirect("ASK 3999 10.0.0.2:6381", 1, 3999, "10.0.0.2", 6381);
	expect_redirect("-ASK 0 redis-2.example:7000\r\n", 1, 0, "redis-2.example", 7000);
	expect_redirect("MOVED 16383 ::1:7000", 0, 16383, "::1", 7000);
	expect_redirect("MOVED 1 fe80::1:2:7000", 0, 1, "fe80::1:2", 7000);
	expect_redirect("MOVED 1 [::1]:7000", 0, 1, "::1", 7000);
	expect_redirect("MOVED 1 :7000", 0, 1, "", 7000); /* the same host */
	/* as the IPv6 cluster of test_real_replies sent them */
	expect_redirect("MOVED 12182 :27113", 0, 12182, "", 27113);
	expect_redirect("ASK 12182 ::1:27111", 1, 12182, "::1", 27111);
	expect_redirect("MOVED 12182 ::1:27113", 0, 12182, "::1", 27113);
	expect_redirect("ASK 2 :65535", 1, 2, "", 65535);
	/* not NUL-terminated: the length is what counts */
	assert_int_equal(rl_cluster_parse_redirect("MOVED 5 h:12345", 13, &rd), 0);
	assert_int_equal(rd.port, 123);

	assert_int_equal(redirect_rc("MOVED 1 ?:7000"), -EHOSTUNREACH);
	assert_int_equal(redirect_rc("ERR unknown command"), -ENOENT);
	assert_int_equal(redirect_rc("CLUSTERDOWN Hash slot not served"), -ENOENT);
	assert_int_equal(redirect_rc("TRYAGAIN Multiple keys request"), -ENOENT);
	assert_int_equal(redirect_rc("MOVEDX 1 h:1"), -ENOENT);
	assert_int_equal(redirect_rc("moved 1 h:1"), -ENOENT);
	assert_int_equal(redirect_rc(""), -ENOENT);
	assert_int_equal(redirect_rc("MOVED "), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 "), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 h"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 h:"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED  1 h:1"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED x h:1"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED -1 h:1"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 16384 h:1"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 99999999999999999999 h:1"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 h:0"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 h:65536"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 h:99999999999999999999"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 h:-1"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 h:1x"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 h:1 extra"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 a b:1"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 []:1"), -EINVAL);
	assert_int_equal(redirect_rc("MOVED 1 [::1:1"), -EINVAL);
	memcpy(longhost, "MOVED 1 ", 8);
	memset(longhost + 8, 'h', 500);
	memcpy(longhost + 508, ":1", 3);
	assert_int_equal(redirect_rc(longhost), -EINVAL);
}

/* ---- the layout ----------------------------------------------------------------- */

static void test_key_shard(void **state)
{
	static const unsigned ns[] = { 2, 3, 16, 256, RL_CLUSTER_SHARDS_MAX };
	unsigned count[16] = { 0 }, slots[16], per[3] = { 0 };
	char text[32];

	(void)state;
	assert_int_equal(rl_cluster_key_shard("203.0.113.7", 11, 0), 0);
	assert_int_equal(rl_cluster_key_shard("203.0.113.7", 11, 1), 0);
	/* Pinned: the layout of every fleet's store depends on these. */
	assert_int_equal(rl_cluster_key_shard("203.0.113.7", 11, 256), 230);
	assert_int_equal(rl_cluster_key_shard("customer-key-42", 15, 16), 7);
	assert_int_equal(rl_cluster_key_shard("*", 1, 16), 0);
	for (unsigned i = 0; i < 16384; i++) {
		int n = snprintf(text, sizeof(text), "10.%u.%u.%u", i >> 12,
				 (i >> 6) & 63, i & 63);

		for (unsigned j = 0; j < sizeof(ns) / sizeof(ns[0]); j++)
			assert_true(rl_cluster_key_shard(text, (size_t)n, ns[j]) < ns[j]);
		count[rl_cluster_key_shard(text, (size_t)n, 16)]++;
	}
	/* 1024 each on average: none far off */
	for (unsigned s = 0; s < 16; s++)
		if (count[s] < 900 || count[s] > 1150)
			fail_msg("shard %u has %u of 16384 keys", s, count[s]);
	/* A rule's tags, "{sms:0}".."{sms:15}": sixteen slots, spread over
	 * the three masters of three_masters(). */
	pool_reset();
	assert_int_equal(rl_cluster_map_slots(three_masters(), map()), 0);
	for (unsigned s = 0; s < 16; s++) {
		int n = snprintf(text, sizeof(text), "rlshim:{sms:%u}", s);

		slots[s] = rl_cluster_slot(text, (size_t)n);
		for (unsigned t = 0; t < s; t++)
			assert_int_not_equal(slots[s], slots[t]);
		per[rl_cluster_lookup(map(), slots[s]) - map()->shard]++;
	}
	for (unsigned m = 0; m < 3; m++)
		assert_true(per[m] >= 2);
}

static void test_node_tag(void **state)
{
	struct rl_cluster_map *m = map();
	char tag[16];

	(void)state;
	pool_reset();
	assert_int_equal(rl_cluster_map_slots(three_masters(), m), 0);
	for (unsigned s = 0; s < m->nshards; s++) {
		int n = rl_cluster_node_tag(m, s, tag, sizeof(tag));

		assert_true(n > 1);
		assert_int_equal(tag[0], 'e');
		assert_int_equal((size_t)n, strlen(tag));
		assert_ptr_equal(rl_cluster_lookup(m, rl_cluster_slot(tag, (size_t)n)),
				 &m->shard[s]);
	}
	/* Pinned, by Redis 7.0.15's CLUSTER KEYSLOT: e0 652, e1 4781, e2
	 * 8910, e3 13039; so 0-5460 (and 16001-) is e0's, 5461-10922 e2's
	 * (e1 is the first master's too), 10923-16000 e3's. Every host names
	 * a master's epoch so. */
	assert_int_equal(slot("e0"), 652);
	assert_int_equal(slot("e1"), 4781);
	assert_int_equal(slot("e2"), 8910);
	assert_int_equal(slot("e3"), 13039);
	assert_int_equal(slot("rlshim:epoch:{e3}"), 13039);
	assert_int_equal(rl_cluster_node_tag(m, 0, tag, sizeof(tag)), 2);
	assert_string_equal(tag, "e0");
	assert_int_equal(rl_cluster_node_tag(m, 1, tag, sizeof(tag)), 2);
	assert_string_equal(tag, "e2");
	assert_int_equal(rl_cluster_node_tag(m, 2, tag, sizeof(tag)), 2);
	assert_string_equal(tag, "e3");
	assert_int_equal(rl_cluster_node_tag(m, 3, tag, sizeof(tag)), -ENOENT);
	assert_int_equal(rl_cluster_node_tag(m, 0, tag, 2), -ENOSPC);
	assert_int_equal(rl_cluster_node_tag(m, 0, tag, 3), 2);
	/* a master of one slot still gets its tag */
	pool_reset();
	assert_int_equal(rl_cluster_map_slots(
		A(A(I(0), I(16382), A(S("a"), I(1), END), END),
		  A(I(16383), I(16383), A(S("b"), I(1), END), END), END), m), 0);
	assert_true(rl_cluster_node_tag(m, 1, tag, sizeof(tag)) > 0);
	assert_int_equal(rl_cluster_slot(tag, strlen(tag)), 16383);
	/* none without slots */
	pool_reset();
	assert_int_equal(rl_cluster_map_slots(A(END), m), 0);
	assert_int_equal(rl_cluster_node_tag(m, 0, tag, sizeof(tag)), -ENOENT);
}

/* A rule's shard tags fall in their own share of the slots, so a rule
 * spreads over masters of equal ranges evenly (the CRC16 of "RULE:S" alone
 * put 10, 3 and 3 of fleet's 16 on three masters), the shares taken from
 * one of the rule's own (shard 12 of two rules is not on one master);
 * pinned: the layout. */
static void test_shard_tag(void **state)
{
	static const char *const rules[] = {
		"fleet", "even", "sms", "a", "login", "api", "k.1", "u-2", "x_y",
		"checkout", "search", "r0", "r1", "r2", "r3", "r4", "r5", "r6",
		"r7", "r8",
	};
	static const unsigned ns[] = { 1, 2, 3, 16, 100, 1024 };
	char tag[96];

	(void)state;
	assert_int_equal(rl_cluster_shard_tag("fleet", 0, 16, tag, sizeof(tag)), 10);
	assert_string_equal(tag, "fleet:0.62");
	assert_int_equal(rl_cluster_shard_tag("fleet", 1, 16, tag, sizeof(tag)), 10);
	assert_string_equal(tag, "fleet:1.61");
	rl_cluster_shard_tag("even", 12, 16, tag, sizeof(tag));
	assert_string_equal(tag, "even:12.1");
	rl_cluster_shard_tag("sms", 12, 16, tag, sizeof(tag));
	assert_string_equal(tag, "sms:12.61");
	assert_int_equal(rl_cluster_shard_tag("fleet", 1, 16, tag, 8), -ENOSPC);
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		unsigned per[3] = { 0 };

		for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++)
			for (unsigned sh = 0; sh < ns[j]; sh++) {
				int n = rl_cluster_shard_tag(rules[i], sh, ns[j], tag,
							     sizeof(tag));
				unsigned slot = rl_cluster_slot(tag, (size_t)n);
				unsigned share = (sh + rl_cluster_crc16(rules[i],
						  strlen(rules[i])) % ns[j]) % ns[j];

				assert_true(n > 0);
				assert_true(slot >= share * 16384 / ns[j] &&
					    slot < (share + 1) * 16384 / ns[j]);
			}
		/* redis-cli --cluster create's three ranges */
		for (unsigned sh = 0; sh < 16; sh++) {
			int n = rl_cluster_shard_tag(rules[i], sh, 16, tag, sizeof(tag));
			unsigned slot = rl_cluster_slot(tag, (size_t)n);

			per[slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2]++;
		}
		for (unsigned m = 0; m < 3; m++)
			assert_true(per[m] >= 4 && per[m] <= 6);
	}
}

/* ---- the seed URL --------------------------------------------------------------- */

static void test_url(void **state)
{
	struct rl_cluster_url u;

	(void)state;
	assert_int_equal(rl_cluster_parse_url("redis-cluster://10.0.0.1:7000", &u), 0);
	assert_int_equal(u.nseeds, 1);
	assert_string_equal(u.seed[0].host, "10.0.0.1");
	assert_int_equal(u.seed[0].port, 7000);
	assert_string_equal(u.user, "");
	assert_string_equal(u.pass, "");

	assert_int_equal(rl_cluster_parse_url(
		"redis-cluster://app:s%40cr%2Ct@a:7000,b,[::1]:7002,[fe80::2]/", &u), 0);
	assert_string_equal(u.user, "app");
	assert_string_equal(u.pass, "s@cr,t");
	assert_int_equal(u.nseeds, 4);
	assert_string_equal(u.seed[0].host, "a");
	assert_int_equal(u.seed[0].port, 7000);
	assert_string_equal(u.seed[1].host, "b");
	assert_int_equal(u.seed[1].port, 6379);
	assert_string_equal(u.seed[2].host, "::1");
	assert_int_equal(u.seed[2].port, 7002);
	assert_string_equal(u.seed[3].host, "fe80::2");
	assert_int_equal(u.seed[3].port, 6379);

	/* a password alone; an '@' in it (the last one ends it); "/0" */
	assert_int_equal(rl_cluster_parse_url("redis-cluster://pw@h:1/0", &u), 0);
	assert_string_equal(u.user, "");
	assert_string_equal(u.pass, "pw");
	assert_int_equal(rl_cluster_parse_url("redis-cluster://u:p@w@h:1", &u), 0);
	assert_string_equal(u.pass, "p@w");
	assert_string_equal(u.seed[0].host, "h");

	const char *bad[] = {
		"", "redis://h:1", "redis-cluster://", "redis-cluster:///",
		"redis-cluster://h:1,", "redis-cluster://,h:1", "redis-cluster://a:1,,b:2",
		"redis-cluster://h:0", "redis-cluster://h:65536", "redis-cluster://h:",
		"redis-cluster://h:99999999999", "redis-cluster://h:1x", "redis-cluster://:1",
		"redis-cluster://::1", "redis-cluster://::1:7000", "redis-cluster://[::1",
		"redis-cluster://[]:1", "redis-cluster://[::1]x", "redis-cluster://h:1/1",
		"redis-cluster://h:1/0/x", "redis-cluster://h 1:1", "redis-cluster://u:%zz@h",
		"redis-cluster://u:%0@h", "redis-cluster://u:%00@h", "redis-cluster://@",
		"redis-cluster://h:1?x=1",
		"redis-cluster://1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8,9:9,10:10,11:11,12:12,"
		"13:13,14:14,15:15,16:16,17:17",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (rl_cluster_parse_url(bad[i], &u) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
		assert_int_equal(u.nseeds, 0);
	}
	/* sixteen seeds are allowed */
	assert_int_equal(rl_cluster_parse_url(
		"redis-cluster://1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8,9:9,10:10,11:11,12:12,"
		"13:13,14:14,15:15,16:16", &u), 0);
	assert_int_equal(u.nseeds, RL_CLUSTER_SEEDS_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc16),
		cmocka_unit_test(test_hash_tags),
		cmocka_unit_test(test_map_slots),
		cmocka_unit_test(test_map_slots_hostile),
		cmocka_unit_test(test_map_shards),
		cmocka_unit_test(test_real_replies),
		cmocka_unit_test(test_redirects),
		cmocka_unit_test(test_key_shard),
		cmocka_unit_test(test_shard_tag),
		cmocka_unit_test(test_node_tag),
		cmocka_unit_test(test_url),
	};
	int rc = cmocka_run_group_tests_name("cluster", tests, NULL, NULL);

	free(map());
	return rc;
}
