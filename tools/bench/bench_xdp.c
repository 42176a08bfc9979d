/* SPDX-License-Identifier: MIT */
/*
 * bench_xdp.c - nanoseconds per packet of the XDP program (bpf/rlshim.bpf.c),
 * next to an XDP program that only passes (tools/bench/xdp_pass.bpf.c), in
 * one run.
 *
 *   bench_xdp [-r REPEAT] [-n REPS] [-k SOURCES] [-b BANS] [-p PREFIXES]
 *             [-s SEED] [-t SETS]
 *
 * SETS, e.g. "1,4": only those ban sets (0-based, in the order below).
 *
 * Both programs are loaded from the skeletons built into this binary (rl_xdp
 * as the agent loads it: open, host lengths /32 and /64 in rodata, load)
 * and run with BPF_PROG_TEST_RUN, REPEAT (1,000,000) runs per case and
 * round; the kernel times each call and reports the average per run, in
 * whole nanoseconds. That time includes the test loop and the program's
 * entry and exit, which the pass-only program measures: the net cost of
 * rl_xdp is the difference.
 *
 * Ban sets, per family, each in a freshly loaded rl_xdp, none expiring;
 * prefixes go where the agent puts them (the prefix hash and the trie,
 * counted, listed in the directory by the agent's builder, bpf/xdp_dir.h):
 *
 *   10 hosts             IPv4 /32s, IPv6 /64s in the host hash; no prefix
 *   10 prefixes          IPv4 /24s, IPv6 /48s
 *   BANS hosts           as above, BANS (100,000): what maxretry makes
 *   BANS prefixes        as above
 *   BANS hosts + PREFIXES prefixes   PREFIXES (1,000) of IPv4 /16-/28,
 *                        IPv6 /32-/60: a realistic mix
 *   BANS prefixes, many lengths      IPv4 /8-/31, IPv6 /16-/63, each
 *                        length at most 1/16 of the space
 *   PREFIXES in one entry, 7 lengths IPv4 /25-/31 in 10.1.0.0/16, IPv6
 *                        /57-/63 under 2001:db8::/32: the most probes
 *   PREFIXES in one entry, 11 and 27 lengths  IPv4 /21-/31, IPv6 /37-/63
 *                        there: more than an entry lists, so the trie
 *
 * all distinct and random. Each is timed with sources no ban covers
 * ("pass"; for the one-entry sets, in that entry), sources in host bans
 * ("drop (host)") and sources in prefixes that no host ban covers ("drop
 * (prefix)": the host hash misses first).
 *
 * How far a trie lookup walks depends on the source, by +-10 ns among
 * 100,000 prefixes, and the probes on the lengths listed, so each case
 * has SOURCES (16) of them, each sent
 * REPEAT / SOURCES times in a row: a case's time in a round is the mean
 * over its sources. Each case is timed REPS (7) times, the baseline and
 * then rl_xdp back to back, rounds outermost; the medians are printed,
 * with the range of the sources' own medians.
 *
 * Needs root (CAP_BPF and CAP_NET_ADMIN to load and run XDP programs):
 * without it, it says why and exits 0, so `make bench` goes on.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "xdp_mask.h"
#include "xdp_maps.h"
#include "xdp_dir.h"
#include "rlshim.skel.h"
#include "xdp_pass.skel.h"

#define XDP_DROP_RC 1
#define XDP_PASS_RC 2
#define MAX_REPS 101
#define MAX_SOURCES 64
#define HOST_LEN4 32
#define HOST_LEN6 64
#define GOAL_NS 60

static uint64_t rng_state;

/* xorshift64*: reproducible from the seed, good enough for addresses. */
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void rnd_bytes(uint8_t *p, size_t n)
{
	uint64_t r;

	for (size_t i = 0; i < n; i += 8) {
		r = rnd();
		memcpy(p + i, &r, n - i < 8 ? n - i : 8);
	}
}

/* The first len bits of pre, the rest random: an address in the prefix. */
static void rnd_in(uint8_t *out, const uint8_t *pre, size_t n, unsigned len)
{
	rnd_bytes(out, n);
	for (unsigned b = 0; b < len; b++) {
		uint8_t bit = 0x80 >> (b % 8);

		out[b / 8] = (out[b / 8] & ~bit) | (pre[b / 8] & bit);
	}
}

/* ---- ban sets ------------------------------------------------------------ */

enum pfx { NONE, FIXED, MIXED, SPREAD, ENTRY7, ENTRY_TRIE };

struct banset {
	int big;                /* BANS rather than 10 */
	int hosts;              /* host bans in the hash */
	enum pfx prefixes;      /* FIXED: /24s and /48s; MIXED: PREFIXES of
				   /16-/28 and /32-/60; SPREAD: BANS, every
				   length; ENTRY*: PREFIXES in one entry */
};

static const struct banset sets[] = {
	{ 0, 1, NONE },
	{ 0, 0, FIXED },
	{ 1, 1, NONE },
	{ 1, 0, FIXED },
	{ 1, 1, MIXED },
	{ 1, 0, SPREAD },
	{ 0, 0, ENTRY7 },
	{ 0, 0, ENTRY_TRIE },
};

#define NSETS (sizeof(sets) / sizeof(sets[0]))

struct family {
	const char *name;
	int v6;
	int fd_hash, fd_trie, fd_pfx;
	int fd_dir[RL_XDP_NDIRS];   /* of the family's directories, else -1 */
	unsigned hosts, prefixes;   /* in the maps */
	unsigned per_len[129];      /* prefixes of each length */
	const uint8_t *entry;       /* all prefixes and passes under this */
	unsigned entry_len;
	uint32_t next_id;
	/* The first MAX_SOURCES bans of each kind, to make sources from. */
	uint8_t host_key[MAX_SOURCES][16];
	uint8_t prefix_key[MAX_SOURCES][16];
	unsigned prefix_len[MAX_SOURCES];
};

static size_t alen(const struct family *f)
{
	return f->v6 ? 16 : 4;
}

static unsigned host_len(const struct family *f)
{
	return f->v6 ? HOST_LEN6 : HOST_LEN4;
}

/* Would the program find a ban for src? As its two lookups, from user
 * space: 1 in the hash, 2 in the trie, 0 neither. */
static int covered(const struct family *f, const uint8_t *src)
{
	struct rl_xdp_key6 k6 = { .prefixlen = 128 };
	struct rl_xdp_key4 k4 = { .prefixlen = 32 };
	struct rl_xdp_ban v;
	uint8_t h[16];

	memcpy(h, src, alen(f));
	rl_xdp_mask(h, alen(f), host_len(f));
	if (bpf_map_lookup_elem(f->fd_hash, h, &v) == 0)
		return 1;
	memcpy(f->v6 ? k6.addr : k4.addr, src, alen(f));
	if (bpf_map_lookup_elem(f->fd_trie, f->v6 ? (void *)&k6 : (void *)&k4,
				&v) == 0)
		return 2;
	return 0;
}

/*
 * Add n new random host bans to the hash. On error, -errno from the kernel
 * is returned and the map keeps what was added.
 */
static int add_hosts(struct family *f, unsigned n)
{
	struct rl_xdp_ban v = { .expires_ns = UINT64_MAX };
	uint8_t key[16];

	for (unsigned i = 0; i < n;) {
		rnd_bytes(key, alen(f));
		rl_xdp_mask(key, alen(f), host_len(f));
		v.id = f->next_id;
		if (bpf_map_update_elem(f->fd_hash, key, &v, BPF_NOEXIST)) {
			if (errno == EEXIST)
				continue;
			return -errno;
		}
		if (f->hosts < MAX_SOURCES)
			memcpy(f->host_key[f->hosts], key, alen(f));
		f->hosts++;
		f->next_id++;
		i++;
	}
	return 0;
}

/* Add n new random prefixes, of min..max bits, to the trie. As add_hosts. */
static struct rl_xdp_lenset lensets[RL_XDP_NDIRS][RL_XDP_DIR_ENTRIES];
static struct rl_xdp_dir dir_have[RL_XDP_DIR_ENTRIES];

/* At most 1/16 of the space (or of the entry) in prefixes of one length,
 * so that sources no ban covers are left to pass. */
static unsigned len_cap(const struct family *f, unsigned len)
{
	unsigned d = len - (f->entry ? f->entry_len : 0);

	return d < 24 ? 1u << (d > 4 ? d - 4 : 0) : UINT32_MAX;
}

static int add_prefixes(struct family *f, unsigned n, unsigned min,
			unsigned max)
{
	struct rl_xdp_key6 k6;
	struct rl_xdp_key4 k4;
	struct rl_xdp_ban v = { .expires_ns = UINT64_MAX };
	uint8_t *addr = f->v6 ? k6.addr : k4.addr;
	void *key = f->v6 ? (void *)&k6 : (void *)&k4;
	__u32 *plen = f->v6 ? &k6.prefixlen : &k4.prefixlen;

	for (unsigned i = 0; i < n;) {
		if (f->entry)
			rnd_in(addr, f->entry, alen(f), f->entry_len);
		else
			rnd_bytes(addr, alen(f));
		*plen = min + rnd() % (max - min + 1);
		if (f->per_len[*plen] >= len_cap(f, *plen))
			continue;
		rl_xdp_mask(addr, alen(f), *plen);
		v.id = f->next_id;
		/* Where the agent puts a prefix: its hash and the trie. */
		if (bpf_map_update_elem(f->fd_pfx, key, &v, BPF_NOEXIST)) {
			if (errno == EEXIST)
				continue;
			return -errno;
		}
		if (bpf_map_update_elem(f->fd_trie, key, &v, BPF_NOEXIST))
			return -errno;
		rl_xdp_dir_add(lensets[rl_xdp_dir_of(f->v6, *plen)], addr,
			       rl_xdp_dir_of(f->v6, *plen), *plen);
		f->per_len[*plen]++;
		if (f->prefixes < MAX_SOURCES) {
			memcpy(f->prefix_key[f->prefixes], addr, alen(f));
			f->prefix_len[f->prefixes] = *plen;
		}
		f->prefixes++;
		f->next_id++;
		i++;
	}
	return 0;
}

enum kind { PASS, DROP_HASH, DROP_TRIE };

/* The directories from the sets, and zeroed sets for the next family. */
static int write_dir(struct family *f)
{
	int rc;

	for (int d = 0; d < RL_XDP_NDIRS; d++) {
		if (f->fd_dir[d] < 0)
			continue;
		memset(dir_have, 0, sizeof(dir_have));
		rc = rl_xdp_dir_write(f->fd_dir[d], lensets[d], dir_have);
		memset(lensets[d], 0, sizeof(lensets[d]));
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * A source of the kind, the j-th: random and covered by nothing; in the
 * j-th host ban (cycling when there are fewer), host bits random; in the
 * j-th prefix, with no host ban over it. 0, or -1 if none was found.
 */
static int pick_source(const struct family *f, enum kind k, unsigned j,
		       uint8_t *src)
{
	unsigned n;

	switch (k) {
	case PASS:
		do
			if (f->entry)
				rnd_in(src, f->entry, alen(f), f->entry_len);
			else
				rnd_bytes(src, alen(f));
		while (covered(f, src));
		return 0;
	case DROP_HASH:
		n = f->hosts < MAX_SOURCES ? f->hosts : MAX_SOURCES;
		rnd_in(src, f->host_key[j % n], alen(f), host_len(f));
		return covered(f, src) == 1 ? 0 : -1;
	case DROP_TRIE:
		n = f->prefixes < MAX_SOURCES ? f->prefixes : MAX_SOURCES;
		for (unsigned t = 0; t < n; t++) {
			unsigned p = (j + t) % n;

			/* A host ban inside the prefix is a 1-in-10^4
			 * chance at most: try again, then the next. */
			for (int tries = 0; tries < 8; tries++) {
				rnd_in(src, f->prefix_key[p], alen(f),
				       f->prefix_len[p]);
				if (covered(f, src) == 2)
					return 0;
			}
		}
		return -1;
	}
	return -1;
}

/* ---- timing -------------------------------------------------------------- */

struct frame {
	uint8_t b[128];
	uint32_t len;
};

/* A TCP SYN's headers (the program reads only up to the source address),
 * padded to Ethernet's 60 bytes. */
static struct frame frame(const struct family *f, const uint8_t *src)
{
	struct frame fr = { .b = { 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2 } };
	uint8_t *ip = fr.b + 14;

	if (f->v6) {
		fr.b[12] = 0x86, fr.b[13] = 0xdd;
		ip[0] = 0x60, ip[5] = 20, ip[6] = 6, ip[7] = 64;
		memcpy(ip + 8, src, 16);
		ip[24] = 0x20, ip[25] = 0x01, ip[26] = 0x0d, ip[27] = 0xb8;
		fr.len = 14 + 40 + 20;
	} else {
		fr.b[12] = 0x08, fr.b[13] = 0x00;
		ip[0] = 0x45, ip[3] = 40, ip[6] = 0x40, ip[8] = 64, ip[9] = 6;
		memcpy(ip + 12, src, 4);
		ip[16] = 203, ip[17] = 0, ip[18] = 113, ip[19] = 1;
		fr.len = 60;
	}
	return fr;
}

/*
 * One BPF_PROG_TEST_RUN of repeat runs: the kernel's average per run, in
 * ns. Exits if the program's verdict is not the one expected.
 */
static unsigned time_run(int prog_fd, const struct frame *fr, int repeat,
			 unsigned want)
{
	LIBBPF_OPTS(bpf_test_run_opts, o,
		.data_in = fr->b,
		.data_size_in = fr->len,
		.repeat = repeat,
	);

	if (bpf_prog_test_run_opts(prog_fd, &o)) {
		fprintf(stderr, "bench_xdp: BPF_PROG_TEST_RUN: %s\n",
			strerror(errno));
		exit(1);
	}
	if (o.retval != want) {
		fprintf(stderr, "bench_xdp: verdict %u, expected %u\n",
			o.retval, want);
		exit(1);
	}
	return o.duration;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return (x > y) - (x < y);
}

static unsigned median(const unsigned *v, int n)
{
	unsigned s[MAX_REPS];

	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_uint);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* ---- output -------------------------------------------------------------- */

/* n with thousands separators, into buf. */
static const char *thousands(unsigned n, char *buf, size_t len)
{
	if (n >= 1000000)
		snprintf(buf, len, "%u,%03u,%03u", n / 1000000,
			 n / 1000 % 1000, n % 1000);
	else if (n >= 1000)
		snprintf(buf, len, "%u,%03u", n / 1000, n % 1000);
	else
		snprintf(buf, len, "%u", n);
	return buf;
}

/* The row's "bans per family". */
static void label(char *buf, size_t len, const struct banset *set,
		  unsigned bans, unsigned mix, int v6)
{
	char nb[16], nm[16];

	thousands(set->big ? bans : 10, nb, sizeof(nb));
	thousands(mix, nm, sizeof(nm));
	if (set->hosts && set->prefixes)
		snprintf(buf, len, "%s hosts + %s prefixes", nb, nm);
	else if (set->prefixes == SPREAD)
		snprintf(buf, len, "%s prefixes, /%s", nb,
			 v6 ? "16-/63" : "8-/31");
	else if (set->prefixes == ENTRY7)
		snprintf(buf, len, "%s prefixes in one entry, 7 lengths", nm);
	else if (set->prefixes == ENTRY_TRIE)
		snprintf(buf, len, "%s prefixes in one entry, %s lengths (trie)",
			 nm, v6 ? "27" : "11");
	else
		snprintf(buf, len, "%s %s", nb,
			 set->hosts ? "hosts" : "prefixes");
}

struct result {
	const char *family;
	char bans[64];
	const char *verdict;
	unsigned want;                          /* the verdict expected */
	struct frame src[MAX_SOURCES];
	unsigned base[MAX_REPS];                /* per round, mean of sources */
	unsigned ours[MAX_REPS];
	unsigned by_src[MAX_SOURCES][MAX_REPS]; /* rl_xdp, per source */
};

/* Round i of one case: each source through the baseline, then rl_xdp. */
static void time_case(struct result *r, int i, int nsrc, int per,
		      int pass_fd, int prog_fd)
{
	unsigned long sb = 0, so = 0;

	for (int j = 0; j < nsrc; j++) {
		sb += time_run(pass_fd, &r->src[j], per, XDP_PASS_RC);
		r->by_src[j][i] = time_run(prog_fd, &r->src[j], per, r->want);
		so += r->by_src[j][i];
	}
	r->base[i] = (sb + nsrc / 2) / nsrc;
	r->ours[i] = (so + nsrc / 2) / nsrc;
}

static void print_row(const struct result *r, int reps, int nsrc)
{
	unsigned b = median(r->base, reps), o = median(r->ours, reps);
	unsigned lo = UINT32_MAX, hi = 0, m;
	char runs[MAX_REPS * 12], *p = runs;

	for (int i = 0; i < reps; i++)
		p += sprintf(p, "%s%u", i ? ", " : "", r->ours[i]);
	for (int j = 0; j < nsrc; j++) {
		m = median(r->by_src[j], reps);
		lo = m < lo ? m : lo;
		hi = m > hi ? m : hi;
	}
	printf("| %s | %s | %s | %u | %s | %u-%u | %u | %.2fx | %d | %s |\n",
	       r->family, r->bans, r->verdict, o, runs, lo, hi, b,
	       b ? (double)o / b : 0.0, (int)o - (int)b,
	       o <= GOAL_NS ? "yes" : "**no**");
}

/* One line of a file, for what the first line says about the machine. */
static void read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	snprintf(buf, len, "?");
	if (!f)
		return;
	if (fgets(buf, len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_xdp [-r REPEAT] [-n REPS] [-k SOURCES] "
		"[-b BANS] [-p PREFIXES] [-s SEED] [-t SETS]\n");
	exit(2);
}

/* ---- main ---------------------------------------------------------------- */

/* A fresh rl_xdp, as the agent loads it, or NULL with errno set. */
static struct rlshim *load(void)
{
	struct rlshim *s = rlshim__open();
	int err;

	if (!s)
		return NULL;
	s->rodata->rl_host_len4 = HOST_LEN4;
	s->rodata->rl_host_len6 = HOST_LEN6;
	err = rlshim__load(s);
	if (err) {
		rlshim__destroy(s);
		errno = -err;
		return NULL;
	}
	return s;
}

/* Fill fresh maps with one ban set, both families. 0 or -errno. */
static int fill(struct rlshim *s, struct family fam[2],
		const struct banset *set, unsigned bans, unsigned mix)
{
	struct rl_xdp_tries t;
	unsigned n = set->big ? bans : 10;
	__u32 zero = 0;
	int err = 0;

	for (int i = 0; i < 2 && !err; i++) {
		struct family *f = &fam[i];
		int v6 = i;

		memset(f, 0, sizeof(*f));
		f->name = v6 ? "IPv6" : "IPv4";
		f->v6 = v6;
		f->fd_hash = bpf_map__fd(v6 ? s->maps.rl_hosts_v6 :
					 s->maps.rl_hosts_v4);
		f->fd_trie = bpf_map__fd(v6 ? s->maps.rl_bans_v6 :
					 s->maps.rl_bans_v4);
		f->fd_pfx = bpf_map__fd(v6 ? s->maps.rl_pfx_v6 :
					s->maps.rl_pfx_v4);
		f->fd_dir[RL_XDP_DIR4] = v6 ? -1 :
					 bpf_map__fd(s->maps.rl_dir_v4);
		f->fd_dir[RL_XDP_DIR6] = v6 ? bpf_map__fd(s->maps.rl_dir_v6) :
					      -1;
		f->fd_dir[RL_XDP_DIR6S] = v6 ? bpf_map__fd(s->maps.rl_dir_v6s) :
					       -1;
		if (set->prefixes == ENTRY7 || set->prefixes == ENTRY_TRIE) {
			/* 10.1.0.0/16; 2001:db8::/32 (the entry's bits) */
			static const uint8_t e4[4] = { 10, 1 };
			static const uint8_t e6[16] = { 0x20, 0x01, 0x0d, 0xb8 };

			f->entry = v6 ? e6 : e4;
			f->entry_len = v6 ? 32 : 16;
		}
		if (set->hosts)
			err = add_hosts(f, n);
		if (!err && set->prefixes == FIXED)
			err = v6 ? add_prefixes(f, n, 48, 48) :
				   add_prefixes(f, n, 24, 24);
		if (!err && set->prefixes == MIXED)
			err = v6 ? add_prefixes(f, mix, 32, 60) :
				   add_prefixes(f, mix, 16, 28);
		if (!err && set->prefixes == SPREAD)
			err = v6 ? add_prefixes(f, n, 16, 63) :
				   add_prefixes(f, n, 8, 31);
		if (!err && set->prefixes == ENTRY7)
			err = v6 ? add_prefixes(f, mix, 57, 63) :
				   add_prefixes(f, mix, 25, 31);
		if (!err && set->prefixes == ENTRY_TRIE)
			err = v6 ? add_prefixes(f, mix, 37, 63) :
				   add_prefixes(f, mix, 21, 31);
		if (!err)
			err = write_dir(f);
	}
	if (err)
		return err;
	/* As the agent: the program looks at prefixes only if this counts
	 * some. */
	t.v4 = fam[0].prefixes;
	t.v6 = fam[1].prefixes;
	if (bpf_map_update_elem(bpf_map__fd(s->maps.rl_tries), &zero, &t,
				BPF_ANY))
		return -errno;
	return 0;
}

int main(int argc, char **argv)
{
	static struct family fam[2];
	struct result *res = NULL;
	struct rlshim *skel = NULL;
	struct xdp_pass *base = NULL;
	unsigned bans = 100000, mix = 1000;
	const char *only = NULL;
	int repeat = 1000000, reps = 7, nsrc = 16, nres = 0, err = 1, c;
	int pass_fd;
	char day[32], clk[64], jit[16];
	struct utsname u;
	time_t t0;

	rng_state = 0x9e3779b97f4a7c15ull;
	while ((c = getopt(argc, argv, "r:n:k:b:p:s:t:")) != -1) {
		switch (c) {
		case 'r':
			repeat = atoi(optarg);
			break;
		case 'n':
			reps = atoi(optarg);
			break;
		case 'k':
			nsrc = atoi(optarg);
			break;
		case 'b':
			bans = strtoul(optarg, NULL, 0);
			break;
		case 'p':
			mix = strtoul(optarg, NULL, 0);
			break;
		case 's':
			rng_state = strtoull(optarg, NULL, 0) | 1;
			break;
		case 't':
			only = optarg;
			break;
		default:
			usage();
		}
	}
	if (reps < 1 || reps > MAX_REPS || nsrc < 1 || nsrc > MAX_SOURCES ||
	    repeat < nsrc || bans < 10 || bans > RL_XDP_MAX_BANS || mix < 1 ||
	    bans + mix > RL_XDP_MAX_BANS)
		usage();

	if (geteuid() != 0) {
		printf("bench_xdp: skipped: needs root (CAP_BPF and "
		       "CAP_NET_ADMIN to load XDP programs and run them with "
		       "BPF_PROG_TEST_RUN)\n");
		return 0;
	}
	base = xdp_pass__open_and_load();
	if (!base) {
		fprintf(stderr, "bench_xdp: cannot load xdp_pass: %s\n",
			strerror(errno));
		goto cleanup;
	}
	pass_fd = bpf_program__fd(base->progs.xdp_pass);
	res = calloc(NSETS * 2 * 3, sizeof(*res));
	if (!res)
		goto cleanup;

	uname(&u);
	t0 = time(NULL);
	strftime(day, sizeof(day), "%Y-%m-%d %H:%M UTC", gmtime(&t0));
	read_line("/sys/devices/system/clocksource/clocksource0/"
		  "current_clocksource", clk, sizeof(clk));
	read_line("/proc/sys/net/core/bpf_jit_enable", jit, sizeof(jit));
	printf("Run of %s, Linux %s, %ld CPUs, clock source %s, "
	       "bpf_jit_enable %s; BPF_PROG_TEST_RUN, %d runs per case and "
	       "round over %d sources, %d rounds, medians.\n\n", day, u.release,
	       sysconf(_SC_NPROCESSORS_ONLN), clk, jit, repeat, nsrc, reps);

	for (size_t si = 0; si < NSETS; si++) {
		const struct banset *set = &sets[si];
		struct result *first = &res[nres];
		int ncase = 0, per = repeat / nsrc;
		uint8_t src[16];
		char idx[8];

		snprintf(idx, sizeof(idx), "%zu", si);
		if (only && !strstr(only, idx))
			continue;
		skel = load();
		if (!skel) {
			fprintf(stderr, "bench_xdp: cannot load rl_xdp: %s\n",
				strerror(errno));
			goto cleanup;
		}
		err = fill(skel, fam, set, bans, mix);
		if (err) {
			fprintf(stderr, "bench_xdp: adding bans: %s\n",
				strerror(-err));
			err = 1;
			goto cleanup;
		}
		err = 1;
		for (int f = 0; f < 2; f++) {
			for (int k = PASS; k <= DROP_TRIE; k++) {
				struct result *r;

				if ((k == DROP_HASH && !fam[f].hosts) ||
				    (k == DROP_TRIE && !fam[f].prefixes))
					continue;
				r = &res[nres++];
				ncase++;
				r->family = fam[f].name;
				label(r->bans, sizeof(r->bans), set, bans, mix,
				      f);
				r->verdict = k == PASS ? "pass" :
					     k == DROP_HASH ? "drop (host)" :
							      "drop (prefix)";
				r->want = k == PASS ? XDP_PASS_RC : XDP_DROP_RC;
				for (int j = 0; j < nsrc; j++) {
					if (pick_source(&fam[f], k, j, src)) {
						fprintf(stderr, "bench_xdp: no "
							"source for %s %s\n",
							r->family, r->verdict);
						goto cleanup;
					}
					r->src[j] = frame(&fam[f], src);
				}
			}
		}
		/* Rounds outermost: drift on a shared machine hits all cases
		 * alike, and each time its baseline with it. */
		for (int i = 0; i < reps; i++) {
			for (int k = 0; k < ncase; k++)
				time_case(&first[k], i, nsrc, per, pass_fd,
					  bpf_program__fd(skel->progs.rl_xdp));
		}
		rlshim__destroy(skel);
		skel = NULL;
	}

	printf("| family | bans per family | verdict | rl_xdp ns/packet | "
	       "rounds (ns) | by source (ns) | pass-only ns/packet | ratio | "
	       "net ns | <= %u ns |\n", GOAL_NS);
	printf("|---|---|---|---:|---|---:|---:|---:|---:|---|\n");
	for (int i = 0; i < nres; i++)
		print_row(&res[i], reps, nsrc);
	err = 0;
cleanup:
	free(res);
	xdp_pass__destroy(base);
	rlshim__destroy(skel);
	return err;
}
