/* SPDX-License-Identifier: MIT */
/*
 * test_xdp.c - the XDP program (bpf/rlshim.bpf.c), loaded from its skeleton
 * into the running kernel and run on hand-built frames with
 * BPF_PROG_TEST_RUN: host bans in the hash maps and prefix bans in the
 * tries, both families, host lengths set through rodata, the tries' counts,
 * VLAN tags, expiry, fragments, what is not IP, and every truncation of a
 * frame. Each test loads fresh copies, so their counters start at zero, and
 * checks them exactly, summed over the CPUs (a test run stays on one CPU,
 * but which).
 *
 * Bans are put where the agent (src/agent/xdp_loader.c) puts them: a ban of
 * exactly the instance's host length in its hash, keyed by the masked
 * address; any other in the prefix hash and the trie, with rl_tries
 * counting it and the directory (bpf/xdp_dir.h, the agent's builder)
 * listing its length. Some tests break that rule on purpose, to pin what
 * happens when the agent does.
 *
 * Loading needs root (CAP_BPF and CAP_NET_ADMIN). Without it each test
 * skips and says why, unless CI is set: CI runs as root, so there a test
 * that cannot load fails.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "xdp_mask.h"
#include "xdp_maps.h"
#include "xdp_dir.h"
#include "rlshim.skel.h"
#include "skip.h"

#define ETH_HLEN 14
#define TPID_Q 0x8100  /* 802.1Q */
#define TPID_AD 0x88a8 /* 802.1ad (QinQ outer tag) */
#define XDP_DROP_RC 1
#define XDP_PASS_RC 2
#define HOUR_NS 3600000000000ull

/* The host lengths the program has when the agent sets nothing. */
#define DEFAULT_LEN4 32
#define DEFAULT_LEN6 64

/*
 * skel has the default host lengths; skel2, when a test loads it, others.
 * Every helper below works on cur, the one the test last chose.
 */
static struct rlshim *skel, *skel2, *cur;

/*
 * The prefix bans put in each instance, as the agent keeps them, to build
 * its directories from; and the directories as written.
 */
#define MAX_PREFIXES 512

struct prefix {
	uint8_t addr[16];
	unsigned len;
	int v6;
};

struct inst {
	struct rlshim *s;
	struct prefix p[MAX_PREFIXES];
	unsigned n;
	struct rl_xdp_dir dir[RL_XDP_NDIRS][RL_XDP_DIR_ENTRIES];
};

static struct inst insts[2];
static struct rl_xdp_lenset sets[RL_XDP_DIR_ENTRIES];

static struct inst *inst_of(struct rlshim *s)
{
	for (int i = 0; i < 2; i++)
		if (insts[i].s == s)
			return &insts[i];
	for (int i = 0; i < 2; i++)
		if (!insts[i].s) {
			memset(&insts[i], 0, sizeof(insts[i]));
			insts[i].s = s;
			return &insts[i];
		}
	fail_msg("more than two instances");
	return NULL;
}

static void inst_drop(struct rlshim *s)
{
	for (int i = 0; i < 2; i++)
		if (s && insts[i].s == s)
			insts[i].s = NULL;
}

/* ---- loading ------------------------------------------------------------- */

/*
 * Open, set the host lengths, load: as the agent does. Skips (fails under
 * CI) saying why if it cannot.
 */
static struct rlshim *open_load(uint32_t len4, uint32_t len6)
{
	struct rlshim *s;
	char why[160];
	int err;

	if (geteuid() != 0)
		skip_or_fail("needs root (CAP_BPF and CAP_NET_ADMIN) to load "
			     "an XDP program and run it with BPF_PROG_TEST_RUN");
	s = rlshim__open();
	if (!s) {
		snprintf(why, sizeof(why), "cannot open rl_xdp: %s",
			 strerror(errno));
		skip_or_fail(why);
	}
	/* What the program does when the agent sets nothing. */
	assert_int_equal(s->rodata->rl_host_len4, DEFAULT_LEN4);
	assert_int_equal(s->rodata->rl_host_len6, DEFAULT_LEN6);
	s->rodata->rl_host_len4 = len4;
	s->rodata->rl_host_len6 = len6;
	err = rlshim__load(s);
	if (err) {
		rlshim__destroy(s);
		snprintf(why, sizeof(why), "cannot load rl_xdp: %s",
			 strerror(-err));
		skip_or_fail(why);
	}
	return s;
}

/* A fresh program and maps with the default host lengths, as cur. */
static void load(void)
{
	skel = open_load(DEFAULT_LEN4, DEFAULT_LEN6);
	cur = skel;
}

/* A second instance with other host lengths, as cur. */
static void load2(uint32_t len4, uint32_t len6)
{
	skel2 = open_load(len4, len6);
	cur = skel2;
}

static void use(struct rlshim *s)
{
	cur = s;
}

static int teardown(void **state)
{
	(void)state;
	inst_drop(skel);
	inst_drop(skel2);
	rlshim__destroy(skel);
	rlshim__destroy(skel2);
	skel = skel2 = cur = NULL;
	return 0;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* An expiry an hour away: a live ban. */
static uint64_t live(void)
{
	return now_ns() + HOUR_NS;
}

/*
 * The program's clock (bpf_ktime_get_coarse_ns()) as user space reads it:
 * an expiry of this value has passed for every frame run after.
 * CLOCK_MONOTONIC itself would not do: the coarse clock can be up to a
 * tick behind it, and a ban that expired 1 ns ago would still drop.
 */
static uint64_t coarse_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC_COARSE);
}

/* ---- bans ---------------------------------------------------------------- */

enum where {
	IN_HASH,        /* rl_hosts_v4/v6 */
	IN_PREFIX,      /* rl_pfx_v4/v6 and rl_bans_v4/v6, counted in rl_tries,
			   listed in rl_dir_v4/v6 */
	IN_PREFIX_UNCOUNTED, /* the same, rl_tries left as it is */
};

static struct rl_xdp_tries tries(void)
{
	struct rl_xdp_tries t;
	__u32 zero = 0;

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(cur->maps.rl_tries),
					     &zero, &t), 0);
	return t;
}

static void set_tries(uint32_t v4, uint32_t v6)
{
	struct rl_xdp_tries t = { .v4 = v4, .v6 = v6 };
	__u32 zero = 0;

	assert_int_equal(bpf_map_update_elem(bpf_map__fd(cur->maps.rl_tries),
					     &zero, &t, BPF_ANY), 0);
}

/* Write cur's directories from its prefix bans, as the agent does. */
static void write_dirs(void)
{
	struct inst *in = inst_of(cur);
	int fds[RL_XDP_NDIRS] = {
		[RL_XDP_DIR4] = bpf_map__fd(cur->maps.rl_dir_v4),
		[RL_XDP_DIR6] = bpf_map__fd(cur->maps.rl_dir_v6),
		[RL_XDP_DIR6S] = bpf_map__fd(cur->maps.rl_dir_v6s),
	};

	for (int d = 0; d < RL_XDP_NDIRS; d++) {
		memset(sets, 0, sizeof(sets));
		for (unsigned i = 0; i < in->n; i++)
			if (rl_xdp_dir_of(in->p[i].v6, in->p[i].len) == d)
				rl_xdp_dir_add(sets, in->p[i].addr, d,
					       in->p[i].len);
		assert_true(rl_xdp_dir_write(fds[d], sets, in->dir[d]) >= 0);
	}
}

/* The entry of a source in directory dir, as cur's map has it. */
static struct rl_xdp_dir dir_at(const char *src, int dir)
{
	int v6 = strchr(src, ':') != NULL;
	struct bpf_map *m = dir == RL_XDP_DIR4 ? cur->maps.rl_dir_v4 :
			    dir == RL_XDP_DIR6 ? cur->maps.rl_dir_v6 :
						 cur->maps.rl_dir_v6s;
	struct rl_xdp_dir d;
	uint8_t a[16];
	__u32 idx;

	assert_int_equal(v6, rl_xdp_dir_v6(dir));
	assert_int_equal(inet_pton(v6 ? AF_INET6 : AF_INET, src, a), 1);
	idx = rl_xdp_dir_index(a, dir);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(m), &idx, &d), 0);
	return d;
}

/* Its entry in the directory of the family's long prefixes. */
static struct rl_xdp_dir dir_of(const char *src)
{
	return dir_at(src, strchr(src, ':') ? RL_XDP_DIR6 : RL_XDP_DIR4);
}

/* A parsed "192.0.2.0/24" (no length: the whole address), masked. */
struct cidr {
	uint8_t addr[16];
	unsigned len, bits;
	int v6;
};

static struct cidr parse(const char *cidr)
{
	const char *slash = strchr(cidr, '/');
	size_t n = slash ? (size_t)(slash - cidr) : strlen(cidr);
	struct cidr c = { .v6 = strchr(cidr, ':') != NULL };
	char a[64];

	c.bits = c.v6 ? 128 : 32;
	c.len = slash ? (unsigned)atoi(slash + 1) : c.bits;
	assert_true(n < sizeof(a));
	assert_true(c.len <= c.bits);
	memcpy(a, cidr, n);
	a[n] = '\0';
	assert_int_equal(inet_pton(c.v6 ? AF_INET6 : AF_INET, a, c.addr), 1);
	/* As the agent must: the bits past the length are zero in a key. */
	rl_xdp_mask(c.addr, c.bits / 8, c.len);
	return c;
}

/* The prefix maps' key of c. */
static union rl_xdp_key prefix_key(const struct cidr *c)
{
	union rl_xdp_key k;

	memset(&k, 0, sizeof(k));
	if (c->v6) {
		k.k6.prefixlen = c->len;
		memcpy(k.k6.addr, c->addr, 16);
	} else {
		k.k4.prefixlen = c->len;
		memcpy(k.k4.addr, c->addr, 4);
	}
	return k;
}

static int is_host_ban(const struct cidr *c)
{
	return c->len == (c->v6 ? cur->rodata->rl_host_len6 :
				  cur->rodata->rl_host_len4);
}

/* Add, or renew in place: 1 if added. */
static int upsert(int fd, const void *k, const struct rl_xdp_ban *v)
{
	if (bpf_map_update_elem(fd, k, v, BPF_NOEXIST) == 0)
		return 1;
	assert_int_equal(errno, EEXIST);
	assert_int_equal(bpf_map_update_elem(fd, k, v, BPF_EXIST), 0);
	return 0;
}

/*
 * "192.0.2.0/24" or "2001:db8::/64" (no length: the whole address) into
 * cur's maps: where == IN_HASH asks for the agent's rule (the host hash if
 * the length is the instance's host length, else the prefix maps, counted
 * and listed); any other value forces the prefix maps. Returns where the
 * ban went. A ban already in its maps is renewed in place and counted once.
 */
static enum where put_ban(const char *cidr, uint64_t expires_ns, uint32_t id,
			  enum where where)
{
	struct rl_xdp_ban v = { .expires_ns = expires_ns, .id = id };
	struct cidr c = parse(cidr);
	struct inst *in = inst_of(cur);
	struct rl_xdp_tries t;
	union rl_xdp_key k;
	int added;

	if (where == IN_HASH && !is_host_ban(&c))
		where = IN_PREFIX;
	if (where == IN_HASH) {
		memset(&k, 0, sizeof(k));
		memcpy(c.v6 ? k.h6.addr : k.h4.addr, c.addr, c.bits / 8);
		upsert(bpf_map__fd(c.v6 ? cur->maps.rl_hosts_v6 :
				   cur->maps.rl_hosts_v4), &k, &v);
		return where;
	}
	k = prefix_key(&c);
	/* Not a lookup: a trie's answers the longest prefix that covers. */
	added = upsert(bpf_map__fd(c.v6 ? cur->maps.rl_pfx_v6 :
				   cur->maps.rl_pfx_v4), &k, &v);
	assert_int_equal(upsert(bpf_map__fd(c.v6 ? cur->maps.rl_bans_v6 :
					    cur->maps.rl_bans_v4), &k, &v),
			 added);
	if (added) {
		assert_true(in->n < MAX_PREFIXES);
		memcpy(in->p[in->n].addr, c.addr, 16);
		in->p[in->n].len = c.len;
		in->p[in->n].v6 = c.v6;
		in->n++;
		write_dirs();
	}
	if (where == IN_PREFIX && added) {
		t = tries();
		set_tries(t.v4 + !c.v6, t.v6 + c.v6);
	}
	return where;
}

/*
 * Take a ban out as the agent does: a prefix leaves the directory first,
 * then its maps and the count.
 */
static void unban(const char *cidr)
{
	struct cidr c = parse(cidr);
	struct inst *in = inst_of(cur);
	struct rl_xdp_tries t;
	union rl_xdp_key k;
	unsigned i;

	if (is_host_ban(&c)) {
		memset(&k, 0, sizeof(k));
		memcpy(c.v6 ? k.h6.addr : k.h4.addr, c.addr, c.bits / 8);
		assert_int_equal(bpf_map_delete_elem(bpf_map__fd(c.v6 ?
				 cur->maps.rl_hosts_v6 : cur->maps.rl_hosts_v4),
				 &k), 0);
		return;
	}
	for (i = 0; i < in->n; i++)
		if (in->p[i].v6 == c.v6 && in->p[i].len == c.len &&
		    !memcmp(in->p[i].addr, c.addr, 16))
			break;
	assert_true(i < in->n);
	in->p[i] = in->p[--in->n];
	write_dirs();
	k = prefix_key(&c);
	assert_int_equal(bpf_map_delete_elem(bpf_map__fd(c.v6 ?
			 cur->maps.rl_pfx_v6 : cur->maps.rl_pfx_v4), &k), 0);
	assert_int_equal(bpf_map_delete_elem(bpf_map__fd(c.v6 ?
			 cur->maps.rl_bans_v6 : cur->maps.rl_bans_v4), &k), 0);
	t = tries();
	set_tries(t.v4 - !c.v6, t.v6 - c.v6);
}

static enum where ban(const char *cidr, uint64_t expires_ns, uint32_t id)
{
	return put_ban(cidr, expires_ns, id, IN_HASH);
}

/* ---- frames -------------------------------------------------------------- */

struct frame {
	uint8_t b[128];
	uint32_t len;
};

/* Tag lists, outermost first, ended by 0. */
static const uint16_t untagged[] = { 0 };
static const uint16_t tag_q[] = { TPID_Q, 0 };
static const uint16_t tag_ad_q[] = { TPID_AD, TPID_Q, 0 };
static const uint16_t tag_q_ad[] = { TPID_Q, TPID_AD, 0 };
static const uint16_t tag_q_q[] = { TPID_Q, TPID_Q, 0 };
static const uint16_t tag_ad_ad[] = { TPID_AD, TPID_AD, 0 };
static const uint16_t tag_three[] = { TPID_AD, TPID_Q, TPID_Q, 0 };

static void put16(struct frame *f, uint16_t v)
{
	f->b[f->len++] = v >> 8;
	f->b[f->len++] = v & 0xff;
}

static void put(struct frame *f, const void *p, size_t n)
{
	memcpy(f->b + f->len, p, n);
	f->len += n;
}

static void eth(struct frame *f, const uint16_t *tags, uint16_t type)
{
	static const uint8_t dst[6] = { 0x02, 0, 0, 0, 0, 1 };
	static const uint8_t src[6] = { 0x02, 0, 0, 0, 0, 2 };
	uint16_t vid = 100;

	memset(f, 0, sizeof(*f));
	put(f, dst, 6);
	put(f, src, 6);
	for (; *tags; tags++) {
		put16(f, *tags);
		put16(f, vid++); /* TCI: PCP 0, DEI 0, a VLAN id */
	}
	put16(f, type);
}

/* An IPv4 header and nothing after it: one byte less is truncated. */
static struct frame v4(const char *src, const uint16_t *tags, uint16_t frag)
{
	struct frame f;
	uint8_t ip[20] = {
		0x45, 0, 0, 20, 0x12, 0x34, frag >> 8, frag & 0xff,
		64, 6, 0, 0,
	};

	eth(&f, tags, 0x0800);
	assert_int_equal(inet_pton(AF_INET, src, ip + 12), 1);
	assert_int_equal(inet_pton(AF_INET, "203.0.113.1", ip + 16), 1);
	put(&f, ip, sizeof(ip));
	return f;
}

static struct frame v6(const char *src, const uint16_t *tags)
{
	struct frame f;
	uint8_t ip[40] = { 0x60, 0, 0, 0, 0, 0, 6, 64 };

	eth(&f, tags, 0x86dd);
	assert_int_equal(inet_pton(AF_INET6, src, ip + 8), 1);
	assert_int_equal(inet_pton(AF_INET6, "2001:db8:ffff::1", ip + 24), 1);
	put(&f, ip, sizeof(ip));
	return f;
}

/* An untagged frame from src, either family. */
static struct frame from(const char *src)
{
	return strchr(src, ':') ? v6(src, untagged) : v4(src, untagged, 0);
}

/* An ARP request whose sender is a banned address: still not IP. */
static struct frame arp(const char *sender)
{
	struct frame f;
	uint8_t a[28] = { 0, 1, 0x08, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0, 2 };

	eth(&f, untagged, 0x0806);
	assert_int_equal(inet_pton(AF_INET, sender, a + 14), 1);
	assert_int_equal(inet_pton(AF_INET, "203.0.113.1", a + 24), 1);
	put(&f, a, sizeof(a));
	return f;
}

/* ---- running and counting ------------------------------------------------ */

/* cur's verdict on the first len bytes of f, or -errno. */
static int run_len(const struct frame *f, uint32_t len)
{
	LIBBPF_OPTS(bpf_test_run_opts, o,
		.data_in = f->b,
		.data_size_in = len,
		.repeat = 1,
	);
	int err;

	err = bpf_prog_test_run_opts(bpf_program__fd(cur->progs.rl_xdp), &o);
	if (err)
		return err < 0 ? err : -errno;
	return (int)o.retval;
}

static int run(struct frame f)
{
	return run_len(&f, f.len);
}

static struct rl_xdp_stats stats(void)
{
	int ncpu = libbpf_num_possible_cpus();
	struct rl_xdp_stats *v, sum = { 0 };
	__u32 zero = 0;

	assert_true(ncpu > 0);
	v = calloc(ncpu, sizeof(*v));
	assert_non_null(v);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(cur->maps.rl_stats),
					     &zero, v), 0);
	for (int i = 0; i < ncpu; i++) {
		sum.packets += v[i].packets;
		sum.dropped += v[i].dropped;
		sum.expired += v[i].expired;
		sum.not_ip += v[i].not_ip;
		sum.truncated += v[i].truncated;
	}
	free(v);
	return sum;
}

static uint64_t drops(uint32_t id)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v, sum = 0;

	assert_true(ncpu > 0);
	v = calloc(ncpu, sizeof(*v));
	assert_non_null(v);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(cur->maps.rl_drops),
					     &id, v), 0);
	for (int i = 0; i < ncpu; i++)
		sum += v[i];
	free(v);
	return sum;
}

static void expect(uint64_t packets, uint64_t dropped, uint64_t expired,
		   uint64_t not_ip, uint64_t truncated)
{
	struct rl_xdp_stats s = stats();

	assert_int_equal(s.packets, packets);
	assert_int_equal(s.dropped, dropped);
	assert_int_equal(s.expired, expired);
	assert_int_equal(s.not_ip, not_ip);
	assert_int_equal(s.truncated, truncated);
}

/* ---- tests: where bans go ------------------------------------------------ */

static void test_v4_host(void **state)
{
	(void)state;
	load();
	assert_int_equal(ban("192.0.2.7", live(), 3), IN_HASH);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("192.0.2.6", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v4("192.0.2.8", untagged, 0)), XDP_PASS_RC);
	expect(4, 2, 0, 0, 0);
	assert_int_equal(drops(3), 2);
	assert_int_equal(drops(0), 0);
}

/* One IPv6 address: longer than the default host length of /64, so a
 * prefix ban, in the trie. */
static void test_v6_host(void **state)
{
	(void)state;
	load();
	assert_int_equal(ban("2001:db8::7", live(), 5), IN_PREFIX);
	assert_int_equal(run(v6("2001:db8::7", untagged)), XDP_DROP_RC);
	assert_int_equal(run(v6("2001:db8::6", untagged)), XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8::8", untagged)), XDP_PASS_RC);
	/* The IPv4 maps are not consulted for IPv6, nor the other way. */
	assert_int_equal(run(v6("::ffff:192.0.2.7", untagged)), XDP_PASS_RC);
	expect(4, 1, 0, 0, 0);
	assert_int_equal(drops(5), 1);
}

static void test_v4_prefix(void **state)
{
	(void)state;
	load();
	assert_int_equal(ban("198.51.100.0/24", live(), 1), IN_PREFIX);
	assert_int_equal(run(v4("198.51.100.0", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("198.51.100.200", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("198.51.100.255", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("198.51.99.255", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v4("198.51.101.0", untagged, 0)), XDP_PASS_RC);
	expect(5, 3, 0, 0, 0);
	assert_int_equal(drops(1), 3);
}

/* A /64 is the default IPv6 host length: in the hash. */
static void test_v6_prefix(void **state)
{
	(void)state;
	load();
	assert_int_equal(ban("2001:db8:1:2::/64", live(), 2), IN_HASH);
	assert_int_equal(run(v6("2001:db8:1:2::", untagged)), XDP_DROP_RC);
	assert_int_equal(run(v6("2001:db8:1:2:ffff:ffff:ffff:ffff", untagged)),
			 XDP_DROP_RC);
	assert_int_equal(run(v6("2001:db8:1:1:ffff:ffff:ffff:ffff", untagged)),
			 XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8:1:3::", untagged)), XDP_PASS_RC);
	expect(4, 2, 0, 0, 0);
	assert_int_equal(drops(2), 2);
}

/*
 * The default host lengths: /32 and /64 bans are in the hashes, nothing
 * in the tries. A /64 drops every address in it, whatever its last 64
 * bits, and nothing outside; the key is the masked address.
 */
static void test_hash_default_lengths(void **state)
{
	static const char *const in6[] = {
		"2001:db8:a:b::", "2001:db8:a:b::1", "2001:db8:a:b:8000::",
		"2001:db8:a:b:1234:5678:9abc:def0",
		"2001:db8:a:b:ffff:ffff:ffff:ffff",
	};
	static const char *const out6[] = {
		"2001:db8:a:a:ffff:ffff:ffff:ffff", "2001:db8:a:c::",
		"2001:db8:a:8000::", "2001:db8:a:b000::", "2001:db8:b:b::",
		"2001:db9:a:b::",
	};
	struct rl_xdp_host6 h6 = { 0 };
	struct rl_xdp_host4 h4 = { { 192, 0, 2, 7 } };
	struct rl_xdp_ban v;
	uint64_t n = 0, dropped = 0;

	(void)state;
	load();
	assert_int_equal(ban("192.0.2.7", live(), 4), IN_HASH);
	assert_int_equal(ban("2001:db8:a:b::/64", live(), 6), IN_HASH);
	assert_int_equal(ban("203.0.113.0/24", live(), 24), IN_PREFIX);
	set_tries(0, 0); /* the /24 stays out of the way */
	/* The hash keys are the addresses masked to the host length. */
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(cur->maps.rl_hosts_v4),
					     &h4, &v), 0);
	assert_int_equal(v.id, 4);
	assert_int_equal(inet_pton(AF_INET6, "2001:db8:a:b::", h6.addr), 1);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(cur->maps.rl_hosts_v6),
					     &h6, &v), 0);
	assert_int_equal(v.id, 6);

	for (size_t i = 0; i < sizeof(in6) / sizeof(in6[0]); i++) {
		assert_int_equal(run(v6(in6[i], untagged)), XDP_DROP_RC);
		n++, dropped++;
	}
	for (size_t i = 0; i < sizeof(out6) / sizeof(out6[0]); i++, n++)
		assert_int_equal(run(v6(out6[i], untagged)), XDP_PASS_RC);
	assert_int_equal(run(v4("192.0.2.7", tag_q, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("192.0.2.6", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v4("193.0.2.7", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v4("192.0.2.71", untagged, 0)), XDP_PASS_RC);
	n += 4, dropped++;
	expect(n, dropped, 0, 0, 0);
	assert_int_equal(drops(6), 5);
	assert_int_equal(drops(4), 1);
	assert_int_equal(drops(24), 0);

	/* A key with bits set past the length matches no source: the agent
	 * must mask (the program does not look for it). */
	assert_int_equal(inet_pton(AF_INET6, "2001:db8:c:d::1", h6.addr), 1);
	v = (struct rl_xdp_ban){ .expires_ns = live(), .id = 7 };
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(cur->maps.rl_hosts_v6),
					     &h6, &v, BPF_ANY), 0);
	assert_int_equal(run(v6("2001:db8:c:d::1", untagged)), XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8:c:d::", untagged)), XDP_PASS_RC);
	expect(n + 2, dropped, 0, 0, 0);
	assert_int_equal(drops(7), 0);
}

/*
 * Other host lengths, set through rodata, on a second instance next to one
 * with the defaults: the same ban goes in the second's hash and in the
 * first's trie, and both answer alike, frame for frame. Lengths that are
 * not multiples of 8, on either side of IPv6's 64-bit halves, and the ends
 * of the ranges.
 */
struct lens_case {
	uint32_t len4, len6;
	const char *ban4, *in4[3], *out4[3];
	const char *ban6, *in6[3], *out6[3];
};

static const struct lens_case lens_cases[] = {
	{ 24, 56,
	  "198.51.100.0/24",
	  { "198.51.100.0", "198.51.100.77", "198.51.100.255" },
	  { "198.51.99.255", "198.51.101.0", "199.51.100.1" },
	  "2001:db8:1:200::/56",
	  { "2001:db8:1:200::", "2001:db8:1:2ab:1::1",
	    "2001:db8:1:2ff:ffff:ffff:ffff:ffff" },
	  { "2001:db8:1:1ff:ffff:ffff:ffff:ffff", "2001:db8:1:300::",
	    "2001:db8:1:2200::" } },
	{ 28, 127,
	  "192.0.2.16/28", { "192.0.2.16", "192.0.2.20", "192.0.2.31" },
	  { "192.0.2.15", "192.0.2.32", "192.0.2.48" },
	  "2001:db8::2/127", { "2001:db8::2", "2001:db8::3", NULL },
	  { "2001:db8::1", "2001:db8::4", "2001:db8:0:1::2" } },
	{ 1, 128,
	  "128.0.0.0/1", { "128.0.0.0", "192.0.2.1", "255.255.255.255" },
	  { "127.255.255.255", "10.0.0.1", "0.0.0.0" },
	  "2001:db8::7/128", { "2001:db8::7", NULL, NULL },
	  { "2001:db8::6", "2001:db8::8", "2001:db8:0:1::7" } },
	{ 31, 65,
	  "192.0.2.6/31", { "192.0.2.6", "192.0.2.7", NULL },
	  { "192.0.2.5", "192.0.2.8", "192.0.2.134" },
	  "2001:db8:0:1::/65",
	  { "2001:db8:0:1::", "2001:db8:0:1:7fff:ffff:ffff:ffff", NULL },
	  { "2001:db8:0:1:8000::", "2001:db8::ffff:ffff:ffff:ffff",
	    "2001:db8:0:3::" } },
	{ 32, 1,
	  "192.0.2.9", { "192.0.2.9", NULL, NULL },
	  { "192.0.2.8", "192.0.2.10", "64.0.2.9" },
	  "8000::/1",
	  { "8000::", "fe80::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff" },
	  { "7fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db8::1", "::" } },
};

/* Run the frames of one family on cur; adds to *n and *dropped. */
static void run_lens(const char *const *in, const char *const *out,
		     uint64_t *n, uint64_t *dropped)
{
	for (int i = 0; i < 3; i++) {
		if (in[i]) {
			assert_int_equal(run(from(in[i])), XDP_DROP_RC);
			++*n, ++*dropped;
		}
		assert_int_equal(run(from(out[i])), XDP_PASS_RC);
		++*n;
	}
}

static void check_lens(const struct lens_case *c)
{
	struct rlshim *inst[2];
	uint64_t n, dropped, d4, d6;
	enum where w4, w6;

	load();
	load2(c->len4, c->len6);
	print_message("host lengths /%u and /%u\n", c->len4, c->len6);
	inst[0] = skel;
	inst[1] = skel2;
	assert_int_equal(skel2->rodata->rl_host_len4, c->len4);
	assert_int_equal(skel2->rodata->rl_host_len6, c->len6);
	for (int i = 0; i < 2; i++) {
		use(inst[i]);
		w4 = ban(c->ban4, live(), 40);
		w6 = ban(c->ban6, live(), 60);
		if (i == 1 || c->len4 == DEFAULT_LEN4)
			assert_int_equal(w4, IN_HASH);
		else
			assert_int_equal(w4, IN_PREFIX);
		if (i == 1 || c->len6 == DEFAULT_LEN6)
			assert_int_equal(w6, IN_HASH);
		else
			assert_int_equal(w6, IN_PREFIX);
		assert_int_equal(tries().v4, w4 == IN_PREFIX);
		assert_int_equal(tries().v6, w6 == IN_PREFIX);
		n = dropped = 0;
		run_lens(c->in4, c->out4, &n, &dropped);
		d4 = dropped;
		run_lens(c->in6, c->out6, &n, &dropped);
		d6 = dropped - d4;
		expect(n, dropped, 0, 0, 0);
		assert_int_equal(drops(40), d4);
		assert_int_equal(drops(60), d6);
	}
}

static void test_hash_lengths(void **state)
{
	const size_t ncases = sizeof(lens_cases) / sizeof(lens_cases[0]);

	(void)state;
	for (size_t i = 0; i < ncases; i++) {
		check_lens(&lens_cases[i]);
		if (i + 1 < ncases)
			teardown(NULL);
	}
}

/* An address, unmasked, straight into cur's hash of its family. */
static void hash_raw(const char *addr, uint64_t expires_ns, uint32_t id)
{
	struct rl_xdp_ban v = { .expires_ns = expires_ns, .id = id };
	int v6 = strchr(addr, ':') != NULL;
	uint8_t k[16];
	int fd = bpf_map__fd(v6 ? cur->maps.rl_hosts_v6 :
			     cur->maps.rl_hosts_v4);

	assert_int_equal(inet_pton(v6 ? AF_INET6 : AF_INET, addr, k), 1);
	assert_int_equal(bpf_map_update_elem(fd, k, &v, BPF_ANY), 0);
}

/*
 * The agent keeps the lengths in 1..32 and 1..128; a length out of range
 * is taken as the full one, so that an instance loaded with 0 never bans
 * everybody on a key of zeros.
 */
static void test_hash_lengths_out_of_range(void **state)
{
	static const uint32_t lens[][2] = { { 0, 0 }, { 33, 129 },
					    { UINT32_MAX, UINT32_MAX } };

	(void)state;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		load2(lens[i][0], lens[i][1]);
		hash_raw("192.0.2.7", live(), 1);
		hash_raw("0.0.0.0", live(), 2);
		hash_raw("2001:db8::7", live(), 3);
		hash_raw("::", live(), 4);
		assert_int_equal(run(from("192.0.2.7")), XDP_DROP_RC);
		assert_int_equal(run(from("192.0.2.6")), XDP_PASS_RC);
		assert_int_equal(run(from("10.0.0.1")), XDP_PASS_RC);
		assert_int_equal(run(from("2001:db8::7")), XDP_DROP_RC);
		assert_int_equal(run(from("2001:db8::6")), XDP_PASS_RC);
		assert_int_equal(run(from("2001:db8:1::")), XDP_PASS_RC);
		expect(6, 2, 0, 0, 0);
		assert_int_equal(drops(1), 1);
		assert_int_equal(drops(2), 0);
		assert_int_equal(drops(3), 1);
		assert_int_equal(drops(4), 0);
		rlshim__destroy(skel2);
		skel2 = NULL;
	}
}

/*
 * When the host length is /24 a /32 is a prefix ban, longer than the
 * host's: it goes in the trie and drops. The hash answers first: a host in
 * a banned /24 counts on the /24 even if the trie has it too.
 */
static void test_trie_longer_than_host(void **state)
{
	(void)state;
	load2(24, 56);
	assert_int_equal(ban("192.0.2.7", live(), 32), IN_PREFIX);
	assert_int_equal(ban("2001:db8:1:2::/64", live(), 64), IN_PREFIX);
	assert_int_equal(ban("198.51.100.0/24", live(), 24), IN_HASH);
	assert_int_equal(ban("198.51.100.9", live(), 33), IN_PREFIX);
	assert_int_equal(tries().v4, 2);
	assert_int_equal(tries().v6, 1);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("192.0.2.8", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(from("2001:db8:1:2:ffff::1")), XDP_DROP_RC);
	assert_int_equal(run(v6("2001:db8:1:3::1", untagged)), XDP_PASS_RC);
	assert_int_equal(run(v4("198.51.100.9", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("198.51.100.10", untagged, 0)), XDP_DROP_RC);
	expect(6, 4, 0, 0, 0);
	assert_int_equal(drops(32), 1);
	assert_int_equal(drops(64), 1);
	assert_int_equal(drops(24), 2);
	assert_int_equal(drops(33), 0);
}

/*
 * A trie the agent counts as empty is not looked in: a live /16 in it with
 * rl_tries.v4 at 0 passes its sources. This is why the agent must keep the
 * counts. Each family has its own.
 */
static void test_trie_count_zero(void **state)
{
	(void)state;
	load();
	assert_int_equal(put_ban("10.1.0.0/16", live(), 16,
				 IN_PREFIX_UNCOUNTED), IN_PREFIX_UNCOUNTED);
	assert_int_equal(put_ban("2001:db8::/32", live(), 32,
				 IN_PREFIX_UNCOUNTED), IN_PREFIX_UNCOUNTED);
	assert_int_equal(tries().v4, 0);
	assert_int_equal(tries().v6, 0);
	assert_int_equal(run(v4("10.1.2.3", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8::1", untagged)), XDP_PASS_RC);
	expect(2, 0, 0, 0, 0);
	set_tries(1, 0);
	assert_int_equal(run(v4("10.1.2.3", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v6("2001:db8::1", untagged)), XDP_PASS_RC);
	expect(4, 1, 0, 0, 0);
	set_tries(1, 1);
	assert_int_equal(run(v6("2001:db8::1", untagged)), XDP_DROP_RC);
	/* Any non-zero count will do: it is a count, not an index. */
	set_tries(1000, 7);
	assert_int_equal(run(v4("10.1.255.255", untagged, 0)), XDP_DROP_RC);
	expect(6, 3, 0, 0, 0);
	assert_int_equal(drops(16), 2);
	assert_int_equal(drops(32), 1);
}

/* The longest covering prefix answers: its counter counts. */
static void test_longest_prefix(void **state)
{
	(void)state;
	load();
	ban("10.0.0.0/8", live(), 10);
	ban("10.1.0.0/16", live(), 16);
	assert_int_equal(ban("10.1.2.3", live(), 32), IN_HASH);
	ban("2001:db8::/32", live(), 40);
	ban("2001:db8:5::/48", live(), 48);
	assert_int_equal(tries().v4, 2);
	assert_int_equal(tries().v6, 2);
	assert_int_equal(run(v4("10.1.2.3", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("10.1.2.4", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("10.2.0.1", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v6("2001:db8:5::1", untagged)), XDP_DROP_RC);
	assert_int_equal(run(v6("2001:db8:6::1", untagged)), XDP_DROP_RC);
	expect(5, 5, 0, 0, 0);
	assert_int_equal(drops(32), 1);
	assert_int_equal(drops(16), 1);
	assert_int_equal(drops(10), 1);
	assert_int_equal(drops(48), 1);
	assert_int_equal(drops(40), 1);
}

/* ---- tests: frames ------------------------------------------------------- */

static void test_vlan(void **state)
{
	const uint16_t *tags[] = {
		tag_q, tag_ad_q, tag_q_ad, tag_q_q, tag_ad_ad,
	};

	(void)state;
	load();
	ban("192.0.2.7", live(), 7);
	ban("2001:db8::7", live(), 8);
	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
		assert_int_equal(run(v4("192.0.2.7", tags[i], 0)), XDP_DROP_RC);
		assert_int_equal(run(v6("2001:db8::7", tags[i])), XDP_DROP_RC);
		assert_int_equal(run(v4("192.0.2.8", tags[i], 0)), XDP_PASS_RC);
		assert_int_equal(run(v6("2001:db8::8", tags[i])), XDP_PASS_RC);
	}
	expect(20, 10, 0, 0, 0);
	assert_int_equal(drops(7), 5);
	assert_int_equal(drops(8), 5);
}

/* A third tag is more than the program reads: passed, as not IP. */
static void test_three_tags(void **state)
{
	(void)state;
	load();
	ban("192.0.2.7", live(), 7);
	ban("2001:db8::7", live(), 8);
	assert_int_equal(run(v4("192.0.2.7", tag_three, 0)), XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8::7", tag_three)), XDP_PASS_RC);
	expect(2, 0, 0, 2, 0);
	assert_int_equal(drops(7), 0);
	assert_int_equal(drops(8), 0);
}

/* ---- tests: expiry ------------------------------------------------------- */

/* Bans at or past their expiry pass, from the hash and from the trie. */
static void test_expired(void **state)
{
	uint64_t now = now_ns();

	(void)state;
	load();
	assert_int_equal(ban("192.0.2.7", now - 1000000000ull, 4), IN_HASH);
	/* Expiring now on the program's clock: "at" is past. */
	assert_int_equal(ban("2001:db8::/64", coarse_ns(), 6), IN_HASH);
	assert_int_equal(ban("198.51.100.1", 0, 9), IN_HASH);
	assert_int_equal(ban("203.0.113.0/24", coarse_ns(), 11), IN_PREFIX);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8::1", tag_ad_q)), XDP_PASS_RC);
	assert_int_equal(run(v4("198.51.100.1", tag_q, 0)), XDP_PASS_RC);
	assert_int_equal(run(v4("203.0.113.99", untagged, 0)), XDP_PASS_RC);
	expect(4, 0, 4, 0, 0);
	assert_int_equal(drops(4), 0);
	assert_int_equal(drops(6), 0);
	assert_int_equal(drops(9), 0);
	assert_int_equal(drops(11), 0);
	/* Renewed in place, the same bans drop again. */
	assert_int_equal(ban("192.0.2.7", live(), 4), IN_HASH);
	assert_int_equal(ban("203.0.113.0/24", live(), 11), IN_PREFIX);
	assert_int_equal(tries().v4, 1);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v4("203.0.113.99", untagged, 0)), XDP_DROP_RC);
	expect(6, 2, 4, 0, 0);
	assert_int_equal(drops(4), 1);
	assert_int_equal(drops(11), 1);
}

/* An expired host ban does not hide a live prefix that covers it: the
 * frame drops on the prefix, and nothing counts as expired. */
static void test_expired_hash_live_trie(void **state)
{
	(void)state;
	load();
	assert_int_equal(ban("192.0.2.7", coarse_ns(), 7), IN_HASH);
	assert_int_equal(ban("192.0.2.0/24", live(), 24), IN_PREFIX);
	assert_int_equal(ban("2001:db8:1:2::/64", 0, 64), IN_HASH);
	assert_int_equal(ban("2001:db8::/32", live(), 32), IN_PREFIX);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v6("2001:db8:1:2::1", tag_q)), XDP_DROP_RC);
	expect(2, 2, 0, 0, 0);
	assert_int_equal(drops(24), 1);
	assert_int_equal(drops(32), 1);
	assert_int_equal(drops(7), 0);
	assert_int_equal(drops(64), 0);
}

/*
 * An expired host ban with no live prefix passes and counts as expired
 * once per frame: with the trie empty, with a trie that does not cover
 * the source, and with an expired prefix that does.
 */
static void test_expired_hash_alone(void **state)
{
	(void)state;
	load();
	assert_int_equal(ban("192.0.2.7", coarse_ns(), 7), IN_HASH);
	assert_int_equal(ban("2001:db8:1:2::/64", coarse_ns(), 64), IN_HASH);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8:1:2::1", untagged)), XDP_PASS_RC);
	expect(2, 0, 2, 0, 0);
	assert_int_equal(ban("10.0.0.0/8", live(), 8), IN_PREFIX);
	assert_int_equal(ban("2001:db8:ff::/48", live(), 48), IN_PREFIX);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8:1:2::1", untagged)), XDP_PASS_RC);
	expect(4, 0, 4, 0, 0);
	assert_int_equal(ban("192.0.0.0/16", coarse_ns(), 16), IN_PREFIX);
	assert_int_equal(ban("2001:db8::/32", coarse_ns(), 32), IN_PREFIX);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8:1:2::1", untagged)), XDP_PASS_RC);
	expect(6, 0, 6, 0, 0);
	/* A live host ban is the hash's answer: the trie is not needed. */
	assert_int_equal(ban("192.0.2.7", live(), 7), IN_HASH);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_DROP_RC);
	expect(7, 1, 6, 0, 0);
	assert_int_equal(drops(7), 1);
	for (uint32_t id = 8; id <= 64; id++)
		if (id != 7)
			assert_int_equal(drops(id), 0);
}

/* ---- tests: what is not banned, not IP, or not whole --------------------- */

static void test_not_banned(void **state)
{
	(void)state;
	load();
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8::7", untagged)), XDP_PASS_RC);
	assert_int_equal(run(v4("192.0.2.7", tag_ad_q, 0)), XDP_PASS_RC);
	ban("192.0.2.7", live(), 1);
	assert_int_equal(run(v4("192.0.2.77", untagged, 0)), XDP_PASS_RC);
	assert_int_equal(run(v6("2001:db8::7", untagged)), XDP_PASS_RC);
	expect(5, 0, 0, 0, 0);
	assert_int_equal(drops(1), 0);
}

static void test_arp(void **state)
{
	struct frame f;

	(void)state;
	load();
	ban("192.0.2.7", live(), 1);
	assert_int_equal(run(arp("192.0.2.7")), XDP_PASS_RC);
	/* An ethertype of nothing known, after two tags. */
	eth(&f, tag_ad_q, 0x88cc);
	memset(f.b + f.len, 0xab, 40);
	f.len += 40;
	assert_int_equal(run(f), XDP_PASS_RC);
	expect(2, 0, 0, 2, 0);
	assert_int_equal(drops(1), 0);
}

/* Fragments are judged by their source: first, middle and last drop. */
static void test_v4_fragments(void **state)
{
	(void)state;
	load();
	ban("192.0.2.0/24", live(), 12);
	/* First fragment: MF set, offset 0. */
	assert_int_equal(run(v4("192.0.2.7", untagged, 0x2000)), XDP_DROP_RC);
	/* Middle: MF and an offset of 185 x 8 bytes. */
	assert_int_equal(run(v4("192.0.2.7", untagged, 0x2000 | 185)),
			 XDP_DROP_RC);
	/* Last: an offset, no MF; behind two tags. */
	assert_int_equal(run(v4("192.0.2.7", tag_ad_q, 370)), XDP_DROP_RC);
	/* DF set is no fragment at all. */
	assert_int_equal(run(v4("192.0.2.7", untagged, 0x4000)), XDP_DROP_RC);
	/* Another source's fragments pass. */
	assert_int_equal(run(v4("192.0.3.7", untagged, 0x2000 | 185)),
			 XDP_PASS_RC);
	expect(5, 4, 0, 0, 0);
	assert_int_equal(drops(12), 4);
}

/* A ban whose id is out of range still drops; no counter is touched. One
 * in the hash, one in the trie. */
static void test_id_out_of_range(void **state)
{
	(void)state;
	load();
	assert_int_equal(ban("192.0.2.7", live(), RL_XDP_MAX_BANS),
			 IN_HASH);
	assert_int_equal(ban("2001:db8::7", live(), UINT32_MAX),
			 IN_PREFIX);
	assert_int_equal(run(v4("192.0.2.7", untagged, 0)), XDP_DROP_RC);
	assert_int_equal(run(v6("2001:db8::7", untagged)), XDP_DROP_RC);
	expect(2, 2, 0, 0, 0);
	assert_int_equal(drops(RL_XDP_MAX_BANS - 1), 0);
	assert_int_equal(drops(0), 0);
}

/*
 * Every cut of a banned frame short of its last header byte passes and
 * counts as truncated. BPF_PROG_TEST_RUN refuses XDP input shorter than an
 * Ethernet header (EINVAL), so those lengths cannot be sent: if a kernel
 * takes them, they must pass as truncated like the rest.
 */
static void truncations(struct frame f, uint32_t id)
{
	uint64_t sent = 0;
	int rc;

	for (uint32_t len = 0; len < f.len; len++) {
		rc = run_len(&f, len);
		if (len < ETH_HLEN && rc == -EINVAL)
			continue;
		assert_int_equal(rc, XDP_PASS_RC);
		sent++;
	}
	assert_true(sent >= f.len - ETH_HLEN);
	expect(sent, 0, 0, 0, sent);
	assert_int_equal(drops(id), 0);
	/* Whole, it drops. */
	assert_int_equal(run(f), XDP_DROP_RC);
	expect(sent + 1, 1, 0, 0, sent);
	assert_int_equal(drops(id), 1);
}

static void test_truncated_v4_qinq(void **state)
{
	struct frame f;

	(void)state;
	load();
	ban("192.0.2.7", live(), 21);
	f = v4("192.0.2.7", tag_ad_q, 0);
	assert_int_equal(f.len, ETH_HLEN + 8 + 20);
	truncations(f, 21);
}

/* Both IPv6 maps: a /64 in the hash, a /128 in the trie. */
static void test_truncated_v6(void **state)
{
	struct frame f;

	(void)state;
	load();
	ban("2001:db8::7", live(), 22);
	f = v6("2001:db8::7", untagged);
	assert_int_equal(f.len, ETH_HLEN + 40);
	truncations(f, 22);
	teardown(NULL);
	load();
	ban("2001:db8::/64", live(), 23);
	truncations(f, 23);
}

/* ---- tests: the prefix directory ----------------------------------------- */

/* An address of n bytes as text. */
static const char *text(const uint8_t *a, int v6, char *buf)
{
	assert_non_null(inet_ntop(v6 ? AF_INET6 : AF_INET, a, buf, 64));
	return buf;
}

/* a += d (d = 1 or -1), big-endian, wrapping. */
static void step(uint8_t *a, size_t n, int d)
{
	for (size_t i = n; i-- > 0;) {
		a[i] = (uint8_t)(a[i] + d);
		if ((d > 0 && a[i] != 0) || (d < 0 && a[i] != 0xff))
			break;
	}
}

/*
 * One prefix ban of length len over `base` drops its first and last
 * address and one between, and neither the address before nor the one
 * after, nor the sibling prefix (the last prefix bit flipped); taken out,
 * it drops nothing and its directory entries are empty again.
 */
static void one_length(const uint8_t *base, int v6, unsigned len)
{
	size_t n = v6 ? 16 : 4;
	uint8_t first[16], last[16], mid[16], out[16];
	char cidr[80], buf[64];
	uint64_t before = stats().dropped, sent = 0, dropped = 0;
	uint32_t id = 1000 + 200 * v6 + len;
	struct rl_xdp_dir d;

	memcpy(first, base, n);
	rl_xdp_mask(first, n, len);
	memcpy(last, first, n);
	for (unsigned b = len; b < 8 * n; b++)
		last[b / 8] |= 0x80 >> (b % 8);
	memcpy(mid, base, n);
	snprintf(cidr, sizeof(cidr), "%s/%u", text(first, v6, buf), len);
	print_message("%s\n", cidr);
	assert_int_equal(ban(cidr, live(), id), IN_PREFIX);
	d = dir_at(text(first, v6, buf), rl_xdp_dir_of(v6, len));
	assert_true(d.n >= 1 && d.n <= RL_XDP_DIR_LENS);
	assert_int_equal(d.len[0], len);
	assert_int_equal(run(from(text(first, v6, buf))), XDP_DROP_RC);
	assert_int_equal(run(from(text(last, v6, buf))), XDP_DROP_RC);
	assert_int_equal(run(from(text(mid, v6, buf))), XDP_DROP_RC);
	sent += 3, dropped += 3;
	if (len > 0) {
		memcpy(out, first, n);
		step(out, n, -1);
		if (memcmp(out, last, n) && memcmp(first, (uint8_t[16]){ 0 }, n)) {
			assert_int_equal(run(from(text(out, v6, buf))), XDP_PASS_RC);
			sent++;
		}
		memcpy(out, last, n);
		step(out, n, 1);
		if (memcmp(out, first, n) && memcmp(out, (uint8_t[16]){ 0 }, n)) {
			assert_int_equal(run(from(text(out, v6, buf))), XDP_PASS_RC);
			sent++;
		}
		memcpy(out, mid, n);
		out[(len - 1) / 8] ^= 0x80 >> ((len - 1) % 8);
		assert_int_equal(run(from(text(out, v6, buf))), XDP_PASS_RC);
		sent++;
	}
	assert_int_equal(drops(id), dropped);
	assert_int_equal(stats().dropped - before, dropped);
	unban(cidr);
	for (int dir = v6 ? RL_XDP_DIR6 : RL_XDP_DIR4;
	     dir < (v6 ? RL_XDP_NDIRS : RL_XDP_DIR6); dir++) {
		assert_int_equal(dir_at(text(first, v6, buf), dir).n, 0);
		assert_int_equal(dir_at(text(last, v6, buf), dir).n, 0);
	}
	assert_int_equal(run(from(text(first, v6, buf))), XDP_PASS_RC);
	assert_int_equal(run(from(text(mid, v6, buf))), XDP_PASS_RC);
	assert_int_equal(stats().dropped - before, dropped);
	(void)sent;
}

/*
 * Every class of length: shorter than the directory's bits (every entry
 * lists it), within them (2^k entries), past them (one entry); on either
 * side of IPv6's 64-bit halves; the ends, /0 and the full address (in an
 * instance whose host lengths are others).
 */
static void test_prefix_each_length(void **state)
{
	static const unsigned l4[] = { 0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 25,
				       31 };
	static const unsigned l6[] = { 0, 1, 8, 15, 16, 17, 24, 31, 32, 33,
				       47, 48, 56, 63, 65, 96, 127, 128 };
	static const uint8_t b4[4] = { 0xc6, 0x33, 0x64, 0xb5 };
	static const uint8_t b6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0xa5, 0x3c,
		0x96, 0xe1, 0x5a, 0xc3, 0x69, 0x1e, 0xf0, 0x0f, 0x77, 0x88 };

	(void)state;
	load();
	for (size_t i = 0; i < sizeof(l4) / sizeof(l4[0]); i++)
		one_length(b4, 0, l4[i]);
	for (size_t i = 0; i < sizeof(l6) / sizeof(l6[0]); i++)
		one_length(b6, 1, l6[i]);
	assert_int_equal(tries().v4, 0);
	assert_int_equal(tries().v6, 0);
	/* /32 and /64 are prefixes where the host lengths are others. */
	load2(24, 56);
	one_length(b4, 0, 32);
	one_length(b6, 1, 64);
}

/*
 * Prefixes of many lengths over one source: the longest answers, and
 * taking them out longest first hands the source to the next each time.
 * With more lengths over the entry than it lists, the entry sends the
 * source to the trie, which answers the same; with few enough again, the
 * entry lists them exactly, longest first. A neighbouring entry lists only
 * the lengths whose prefixes reach it.
 */
static void many_lengths(const char *src, const char *other, int dir,
			 const unsigned *lens, size_t nl, unsigned near)
{
	int v6 = rl_xdp_dir_v6(dir);
	char cidr[80];
	uint64_t dropped = 0, n = 0;
	struct rl_xdp_dir d;
	uint8_t a[16];

	assert_int_equal(inet_pton(v6 ? AF_INET6 : AF_INET, src, a), 1);
	for (size_t i = 0; i < nl; i++) {
		snprintf(cidr, sizeof(cidr), "%s/%u", src, lens[i]);
		assert_int_equal(ban(cidr, live(), lens[i]), IN_PREFIX);
	}
	assert_int_equal(v6 ? tries().v6 : tries().v4, nl);
	d = dir_at(other, dir);
	assert_int_equal(d.n, near);
	for (size_t i = nl; i-- > 0;) {
		d = dir_at(src, dir);
		if (i + 1 > RL_XDP_DIR_LENS) {
			assert_int_equal(d.n, RL_XDP_DIR_TRIE);
		} else {
			assert_int_equal(d.n, i + 1);
			for (size_t j = 0; j <= i; j++)
				assert_int_equal(d.len[j], lens[i - j]);
		}
		assert_int_equal(run(from(src)), XDP_DROP_RC);
		n++, dropped++;
		assert_int_equal(drops(lens[i]), 1);
		snprintf(cidr, sizeof(cidr), "%s/%u", src, lens[i]);
		unban(cidr);
	}
	assert_int_equal(dir_at(src, dir).n, 0);
	assert_int_equal(dir_at(other, dir).n, 0);
	assert_int_equal(run(from(src)), XDP_PASS_RC);
	assert_int_equal(v6 ? tries().v6 : tries().v4, 0);
	expect(n + 1, dropped, 0, 0, 0);
}

static void test_many_lengths_v4(void **state)
{
	unsigned lens[24];

	(void)state;
	for (unsigned i = 0; i < 24; i++)
		lens[i] = 8 + i; /* 8..31, ascending */
	load();
	/* 10.1.2.3 and 10.2.0.0 share 14 bits: /8 to /14 reach both. */
	many_lengths("10.1.2.3", "10.2.0.0", RL_XDP_DIR4, lens, 24, 7);
}

static void test_many_lengths_v6(void **state)
{
	static const unsigned lens[] = { 32, 36, 40, 44, 48, 52, 56, 60, 63,
					 65, 80, 96, 112, 127, 128 };
	static const unsigned short_lens[] = { 8, 10, 12, 14, 16, 18, 20, 22,
					       24, 26, 28, 30, 31 };

	(void)state;
	load();
	/* /32 and longer, listed by bits 16-31: the other's differ from the
	 * first, so none reaches it. */
	many_lengths("2001:db8:0:1:2:3:4:5", "2001:8db8::1", RL_XDP_DIR6, lens,
		     sizeof(lens) / sizeof(lens[0]), 0);
	teardown(NULL);
	load();
	/* Shorter, listed by bits 0-15: 2000:: shares 15 of them, so /8 to
	 * /14 reach it. */
	many_lengths("2001:db8:0:1:2:3:4:5", "2000::1", RL_XDP_DIR6S,
		     short_lens, sizeof(short_lens) / sizeof(short_lens[0]), 4);
}

/*
 * An IPv6 source under prefixes of both directories: the long one (/40,
 * rl_dir_v6) answers before the short (/20, rl_dir_v6s); lifted, the
 * short one does. Either entry saying "the trie" sends the source there,
 * which answers the same.
 */
static void test_v6_both_directories(void **state)
{
	char cidr[80];

	(void)state;
	for (int to_trie = 0; to_trie < 3; to_trie++) {
		load();
		ban("2001:d00::/20", live(), 20);
		ban("2001:db8:ab00::/40", live(), 40);
		for (unsigned i = 0; to_trie && i < RL_XDP_DIR_LENS; i++) {
			/* Filling the long entry, or the short one. */
			snprintf(cidr, sizeof(cidr), to_trie == 1 ?
				 "2001:db8:cd00::/%u" : "2001:400::/%u",
				 to_trie == 1 ? 41 + i : 22 + i);
			ban(cidr, live(), 100 + i);
		}
		assert_int_equal(dir_of("2001:db8:ab00::1").n,
				 to_trie == 1 ? RL_XDP_DIR_TRIE : 1);
		assert_int_equal(dir_at("2001:db8:ab00::1", RL_XDP_DIR6S).n,
				 to_trie == 2 ? RL_XDP_DIR_TRIE : 1);
		assert_int_equal(run(from("2001:db8:ab00::1")), XDP_DROP_RC);
		assert_int_equal(run(from("2001:db8:ef00::1")), XDP_DROP_RC);
		assert_int_equal(run(from("2001:1e00::1")), XDP_PASS_RC);
		assert_int_equal(drops(40), 1);
		assert_int_equal(drops(20), 1);
		unban("2001:db8:ab00::/40");
		assert_int_equal(run(from("2001:db8:ab00::1")), XDP_DROP_RC);
		assert_int_equal(drops(20), 2);
		expect(4, 3, 0, 0, 0);
		teardown(NULL);
	}
}

/*
 * The longest covering prefix decides, live or expired, as in a trie:
 * an expired /24 in a live /16 passes its own sources (counted expired)
 * while the rest of the /16 drops; a live /24 in an expired /16 drops.
 * The same when the entry sends its sources to the trie.
 */
static void longest_decides(int v6, int to_trie)
{
	const char *wide = v6 ? "2001:db8::/32" : "10.1.0.0/16";
	const char *narrow = v6 ? "2001:db8:5::/48" : "10.1.2.0/24";
	const char *in_narrow = v6 ? "2001:db8:5::9" : "10.1.2.9";
	const char *in_wide = v6 ? "2001:db8:6::9" : "10.1.3.9";
	char cidr[80];

	load();
	if (to_trie) {
		/* Longer prefixes elsewhere in the entry, enough to fill it. */
		for (unsigned i = 0; i < RL_XDP_DIR_LENS; i++) {
			snprintf(cidr, sizeof(cidr), v6 ? "2001:db8:7::/%u" :
				 "10.1.200.0/%u", (v6 ? 49 : 25) + i);
			ban(cidr, live(), 200 + i);
		}
	}
	ban(wide, live(), 16);
	ban(narrow, coarse_ns(), 24);
	assert_int_equal(dir_of(in_narrow).n,
			 to_trie ? RL_XDP_DIR_TRIE : 2);
	assert_int_equal(run(from(in_narrow)), XDP_PASS_RC);
	assert_int_equal(run(from(in_wide)), XDP_DROP_RC);
	expect(2, 1, 1, 0, 0);
	ban(wide, coarse_ns(), 16);
	ban(narrow, live(), 24);
	assert_int_equal(run(from(in_narrow)), XDP_DROP_RC);
	assert_int_equal(run(from(in_wide)), XDP_PASS_RC);
	expect(4, 2, 2, 0, 0);
	assert_int_equal(drops(16), 1);
	assert_int_equal(drops(24), 1);
	teardown(NULL);
}

static void test_longest_decides_expiry(void **state)
{
	(void)state;
	for (int v6 = 0; v6 < 2; v6++)
		for (int to_trie = 0; to_trie < 2; to_trie++)
			longest_decides(v6, to_trie);
}

/*
 * The directory is what the program trusts: a prefix ban whose length the
 * entry does not list is not looked for (so the agent must keep it exact),
 * and an entry that lists a length with no ban costs a probe, no more.
 */
static void test_dir_is_trusted(void **state)
{
	struct rl_xdp_dir d = { .n = 2, .len = { 28, 20 } };
	__u32 idx = 10 << 8 | 1;

	(void)state;
	load();
	ban("10.1.2.0/24", live(), 24);
	assert_int_equal(run(from("10.1.2.3")), XDP_DROP_RC);
	/* Listing /28 and /20 instead: no /24 probed, no ban found. */
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(cur->maps.rl_dir_v4),
					     &idx, &d, BPF_ANY), 0);
	assert_int_equal(run(from("10.1.2.3")), XDP_PASS_RC);
	/* /28, /24 (the ban), /20: the second probe finds it. */
	d = (struct rl_xdp_dir){ .n = 3, .len = { 28, 24, 20 } };
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(cur->maps.rl_dir_v4),
					     &idx, &d, BPF_ANY), 0);
	assert_int_equal(run(from("10.1.2.3")), XDP_DROP_RC);
	/* A length past 32 ends the probes: nothing after it is read. */
	d = (struct rl_xdp_dir){ .n = 2, .len = { 200, 24 } };
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(cur->maps.rl_dir_v4),
					     &idx, &d, BPF_ANY), 0);
	assert_int_equal(run(from("10.1.2.3")), XDP_PASS_RC);
	expect(4, 2, 0, 0, 0);
	assert_int_equal(drops(24), 2);
}

/* Below an Ethernet header BPF_PROG_TEST_RUN says EINVAL: pinned here so
 * that a kernel that changes it is noticed (truncations() copes either way). */
static void test_run_minimum(void **state)
{
	struct frame f;

	(void)state;
	load();
	f = v4("192.0.2.7", untagged, 0);
	assert_int_equal(run_len(&f, ETH_HLEN - 1), -EINVAL);
	assert_int_equal(run_len(&f, 0), -EINVAL);
	assert_int_equal(run_len(&f, ETH_HLEN), XDP_PASS_RC);
	expect(1, 0, 0, 0, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_v4_host, teardown),
		cmocka_unit_test_teardown(test_v6_host, teardown),
		cmocka_unit_test_teardown(test_v4_prefix, teardown),
		cmocka_unit_test_teardown(test_v6_prefix, teardown),
		cmocka_unit_test_teardown(test_hash_default_lengths, teardown),
		cmocka_unit_test_teardown(test_hash_lengths, teardown),
		cmocka_unit_test_teardown(test_hash_lengths_out_of_range,
					  teardown),
		cmocka_unit_test_teardown(test_trie_longer_than_host, teardown),
		cmocka_unit_test_teardown(test_trie_count_zero, teardown),
		cmocka_unit_test_teardown(test_longest_prefix, teardown),
		cmocka_unit_test_teardown(test_vlan, teardown),
		cmocka_unit_test_teardown(test_three_tags, teardown),
		cmocka_unit_test_teardown(test_expired, teardown),
		cmocka_unit_test_teardown(test_expired_hash_live_trie,
					  teardown),
		cmocka_unit_test_teardown(test_expired_hash_alone, teardown),
		cmocka_unit_test_teardown(test_not_banned, teardown),
		cmocka_unit_test_teardown(test_arp, teardown),
		cmocka_unit_test_teardown(test_v4_fragments, teardown),
		cmocka_unit_test_teardown(test_id_out_of_range, teardown),
		cmocka_unit_test_teardown(test_truncated_v4_qinq, teardown),
		cmocka_unit_test_teardown(test_truncated_v6, teardown),
		cmocka_unit_test_teardown(test_run_minimum, teardown),
		cmocka_unit_test_teardown(test_prefix_each_length, teardown),
		cmocka_unit_test_teardown(test_many_lengths_v4, teardown),
		cmocka_unit_test_teardown(test_many_lengths_v6, teardown),
		cmocka_unit_test_teardown(test_v6_both_directories, teardown),
		cmocka_unit_test_teardown(test_longest_decides_expiry,
					  teardown),
		cmocka_unit_test_teardown(test_dir_is_trusted, teardown),
	};

	return cmocka_run_group_tests_name("xdp", tests, NULL, NULL);
}
