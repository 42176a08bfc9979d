/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * bpf/rlshim.bpf.c - the XDP program: drop frames whose source address is
 * banned, before the kernel allocates anything for them.
 *
 * Per frame: Ethernet, at most two VLAN tags (802.1Q or 802.1ad, in any
 * order), then the source address of IPv4 or IPv6, looked up in the maps
 * of its family:
 *
 *  1. the hash of host bans (rl_hosts_v4/v6), keyed by the source masked
 *     to the configured host prefix (rl_host_len4/6, rodata set before
 *     load): one lookup whatever the number of bans. These are the bans
 *     maxretry makes, the common case;
 *  2. only if that found no live ban, and only if the agent counts prefix
 *     bans of the family (rl_tries), the directory entry of the source's
 *     16 bits (rl_dir_v4; IPv6 two, rl_dir_v6 for /32 and longer, then
 *     rl_dir_v6s): the lengths of the prefix bans near it, longest first.
 *     Each is one lookup in the prefix hash (rl_pfx_v4/v6) of the source
 *     masked to that length, and the first that finds a ban answers: the
 *     longest covering prefix, as a trie would say. Most entries list no
 *     length at all, and a source there costs one array load. An entry
 *     with more lengths than it can hold sends the source to the LPM trie
 *     (rl_bans_v4/v6), which holds every prefix ban too: one dependent
 *     load per level, but bounded whatever the lengths.
 *
 * A live ban drops and counts on its id; a ban past its expiry passes and
 * counts as expired (once per frame, whichever map had it).
 * The clock, bpf_ktime_get_coarse_ns() (CLOCK_MONOTONIC as of the last
 * tick: a few ns, where the precise clock costs 20 or more under a
 * hypervisor), is read only when a lookup hits, and at most once per
 * frame. Everything else passes: this program only ever removes traffic
 * it has positively identified, and a frame it cannot read (truncated, a
 * third tag, not IP) is the stack's business. IPv6 extension headers are
 * not walked (the source is in the fixed header) and IPv4 fragments are
 * judged by their source like any packet, so a banned client's fragments
 * drop too, the first or not.
 *
 * The maps are described in bpf/xdp_maps.h, shared with the agent, which
 * fills them, keeps rl_tries and the directories exact and reads the
 * counters. Nothing loops but the two fixed VLAN steps and the probes, at
 * most RL_XDP_DIR_LENS; the keys are built on the stack.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "xdp_maps.h"

/*
 * "Dual MIT/GPL" is GPL-compatible to the kernel, so every helper is
 * available, and says that the file is also the project's MIT.
 */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

/*
 * The host prefix lengths, set by the agent before load (ipv4_prefix,
 * ipv6_prefix of the config): 1..32 and 1..128. The verifier reads them as
 * constants, so the branches on them below cost nothing at run time. A
 * value out of range is taken as the full length: never a /0 that one
 * entry would turn into a ban of everyone.
 */
const volatile __u32 rl_host_len4 = 32;
const volatile __u32 rl_host_len6 = 64;

/* <linux/if_vlan.h> is not uapi: the tag after the outer ethertype. */
struct vlan_hdr {
	__be16 tci;
	__be16 proto;   /* the ethertype of what follows the tag */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RL_XDP_MAX_BANS);
	__type(key, struct rl_xdp_host4);
	__type(value, struct rl_xdp_ban);
} rl_hosts_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RL_XDP_MAX_BANS);
	__type(key, struct rl_xdp_host6);
	__type(value, struct rl_xdp_ban);
} rl_hosts_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RL_XDP_MAX_BANS);
	__type(key, struct rl_xdp_key4);
	__type(value, struct rl_xdp_ban);
} rl_pfx_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RL_XDP_MAX_BANS);
	__type(key, struct rl_xdp_key6);
	__type(value, struct rl_xdp_ban);
} rl_pfx_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RL_XDP_DIR_ENTRIES);
	__type(key, __u32);
	__type(value, struct rl_xdp_dir);
} rl_dir_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RL_XDP_DIR_ENTRIES);
	__type(key, __u32);
	__type(value, struct rl_xdp_dir);
} rl_dir_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RL_XDP_DIR_ENTRIES);
	__type(key, __u32);
	__type(value, struct rl_xdp_dir);
} rl_dir_v6s SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* the kernel requires it */
	__uint(max_entries, RL_XDP_MAX_BANS);
	__type(key, struct rl_xdp_key4);
	__type(value, struct rl_xdp_ban);
} rl_bans_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, RL_XDP_MAX_BANS);
	__type(key, struct rl_xdp_key6);
	__type(value, struct rl_xdp_ban);
} rl_bans_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_xdp_tries);
} rl_tries SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RL_XDP_MAX_BANS);
	__type(key, __u32);
	__type(value, __u64);
} rl_drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rl_xdp_stats);
} rl_stats SEC(".maps");

/* The hash keys, with the words the masks work on. */
union host4 {
	struct rl_xdp_host4 key;
	__be32 w;
};

union host6 {
	struct rl_xdp_host6 key;
	__be64 w[2];
};

/* What one frame has met so far: the clock, if read, and an expired ban. */
struct seen {
	__u64 now_ns;
	int expired;    /* a ban matched past its expiry; now_ns is read */
};

static __always_inline int is_vlan(__be16 proto)
{
	return proto == bpf_htons(ETH_P_8021Q) ||
	       proto == bpf_htons(ETH_P_8021AD);
}

/*
 * Network-order masks of the host lengths. Shifts stay below the width:
 * the cases of 0 and the full length are taken apart.
 */
static __always_inline __be32 host_mask4(void)
{
	__u32 len = rl_host_len4;

	if (len == 0 || len >= 32)
		return ~(__be32)0;
	return bpf_htonl(~(__u32)0 << (32 - len));
}

static __always_inline void host_key6(union host6 *k)
{
	__u32 len = rl_host_len6;

	if (len == 0 || len >= 128)
		return;
	if (len <= 64) {
		k->w[1] = 0;
		if (len < 64)
			k->w[0] &= bpf_cpu_to_be64(~(__u64)0 << (64 - len));
		return;
	}
	k->w[1] &= bpf_cpu_to_be64(~(__u64)0 << (128 - len));
}

/*
 * A ban matched: XDP_DROP if it is live, else -1 (go on) with the expiry
 * noted. The clock is read on the frame's first hit only: a hash hit that
 * has expired has read it for the trie's. The per-CPU counters need no
 * atomics: an XDP program runs to its end on one CPU, and no other CPU
 * writes this CPU's copy.
 */
static __always_inline int hit(struct rl_xdp_stats *st, struct seen *s,
			       const struct rl_xdp_ban *ban)
{
	__u64 *drops;
	__u32 id;

	if (!s->expired)
		s->now_ns = bpf_ktime_get_coarse_ns();
	/* Past its expiry a ban passes, even before the agent deletes it. */
	if (ban->expires_ns <= s->now_ns) {
		s->expired = 1;
		return -1;
	}
	/* The id comes from user space: an id out of range still drops. */
	id = ban->id;
	if (id < RL_XDP_MAX_BANS) {
		drops = bpf_map_lookup_elem(&rl_drops, &id);
		if (drops)
			(*drops)++;
	}
	st->dropped++;
	return XDP_DROP;
}

/*
 * The prefix bans of an IPv4 source: its directory entry's lengths, each
 * a lookup of the source masked to it, longest first; or the trie. NULL
 * if none covers it. The first ban found is the longest, live or not: a
 * trie answers so too, and its expiry decides.
 */
static __always_inline struct rl_xdp_ban *prefix4(__be32 saddr)
{
	struct rl_xdp_key4 k = { 0 };
	struct rl_xdp_ban *ban;
	struct rl_xdp_dir *d;
	__u32 idx, n, len;

	idx = bpf_ntohl(saddr) >> (32 - RL_XDP_DIR_SHIFT4 - RL_XDP_DIR_BITS) &
	      (RL_XDP_DIR_ENTRIES - 1);
	d = bpf_map_lookup_elem(&rl_dir_v4, &idx);
	if (!d)
		return NULL;
	n = d->n;
	if (n > RL_XDP_DIR_LENS) {
		k.prefixlen = 32;
		__builtin_memcpy(k.addr, &saddr, sizeof(k.addr));
		return bpf_map_lookup_elem(&rl_bans_v4, &k);
	}
	for (__u32 i = 0; i < RL_XDP_DIR_LENS; i++) {
		__be32 a;

		if (i >= n)
			break;
		len = d->len[i];
		if (len > 32)
			break; /* not from the agent */
		/* 64 bits, so that a shift by 32 (a /0) is defined. */
		a = saddr & bpf_htonl((__u32)(~0ull << (32 - len)));
		k.prefixlen = len;
		__builtin_memcpy(k.addr, &a, sizeof(k.addr));
		ban = bpf_map_lookup_elem(&rl_pfx_v4, &k);
		if (ban)
			return ban;
	}
	return NULL;
}

/*
 * Probe the lengths of one IPv6 directory entry (n of them, n at most
 * RL_XDP_DIR_LENS), longest first, for the source w.
 */
static __always_inline struct rl_xdp_ban *probe6(const struct rl_xdp_dir *d,
						 __u32 n, const __u64 *w)
{
	struct rl_xdp_key6 k = { 0 };
	struct rl_xdp_ban *ban;
	__u64 m[2];
	__u32 len;

	for (__u32 i = 0; i < RL_XDP_DIR_LENS; i++) {
		if (i >= n)
			break;
		len = d->len[i];
		if (len > 128)
			break;
		/* Each half's mask in 64 bits: shifts of 64 taken apart. */
		if (len >= 64) {
			m[0] = w[0];
			m[1] = len == 64 ? 0 : w[1] &
			       bpf_cpu_to_be64(~0ull << (128 - len));
		} else {
			m[0] = len == 0 ? 0 : w[0] &
			       bpf_cpu_to_be64(~0ull << (64 - len));
			m[1] = 0;
		}
		k.prefixlen = len;
		__builtin_memcpy(k.addr, m, sizeof(k.addr));
		ban = bpf_map_lookup_elem(&rl_pfx_v6, &k);
		if (ban)
			return ban;
	}
	return NULL;
}

/*
 * The same for IPv6, in two 64-bit halves: the entry of bits 16-31 for
 * the prefixes of /32 and longer, then the entry of bits 0-15 for the
 * shorter (longest first across both). Either entry saying "the trie"
 * sends the source there.
 */
static __always_inline struct rl_xdp_ban *prefix6(const struct in6_addr *src)
{
	struct rl_xdp_key6 k = { 0 };
	struct rl_xdp_dir *d, *ds;
	struct rl_xdp_ban *ban;
	__u32 idx, n, ns;
	__u64 w[2], hi;

	__builtin_memcpy(w, src, sizeof(w));
	hi = bpf_be64_to_cpu(w[0]);
	idx = (__u32)(hi >> (64 - RL_XDP_DIR_SHIFT6 - RL_XDP_DIR_BITS)) &
	      (RL_XDP_DIR_ENTRIES - 1);
	d = bpf_map_lookup_elem(&rl_dir_v6, &idx);
	idx = (__u32)(hi >> (64 - RL_XDP_DIR_SHIFT6S - RL_XDP_DIR_BITS)) &
	      (RL_XDP_DIR_ENTRIES - 1);
	ds = bpf_map_lookup_elem(&rl_dir_v6s, &idx);
	if (!d || !ds)
		return NULL;
	n = d->n;
	ns = ds->n;
	if (n > RL_XDP_DIR_LENS || ns > RL_XDP_DIR_LENS) {
		k.prefixlen = 128;
		__builtin_memcpy(k.addr, w, sizeof(k.addr));
		return bpf_map_lookup_elem(&rl_bans_v6, &k);
	}
	ban = probe6(d, n, w);
	if (ban || !ns)
		return ban;
	return probe6(ds, ns, w);
}

SEC("xdp")
int rl_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct seen s = { 0, 0 };
	struct rl_xdp_tries *tries;
	struct rl_xdp_stats *st;
	struct rl_xdp_ban *ban;
	struct vlan_hdr *vh;
	__u32 zero = 0;
	__be16 proto;
	void *l3;
	int rc;

	st = bpf_map_lookup_elem(&rl_stats, &zero);
	if (!st)
		return XDP_PASS; /* cannot happen: index 0 of an array */
	st->packets++;

	if ((void *)(eth + 1) > end)
		goto truncated;
	proto = eth->h_proto;
	l3 = eth + 1;

	/* Two tags, unrolled: QinQ is as deep as real networks go. */
	if (is_vlan(proto)) {
		vh = l3;
		if ((void *)(vh + 1) > end)
			goto truncated;
		proto = vh->proto;
		l3 = vh + 1;
		if (is_vlan(proto)) {
			vh = l3;
			if ((void *)(vh + 1) > end)
				goto truncated;
			proto = vh->proto;
			l3 = vh + 1;
		}
	}

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;
		union host4 h4;

		/* The whole fixed header, not just up to saddr: shorter is
		 * not an IPv4 packet the stack would accept either. */
		if ((void *)(ip + 1) > end)
			goto truncated;
		h4.w = ip->saddr & host_mask4();
		ban = bpf_map_lookup_elem(&rl_hosts_v4, &h4.key);
		if (ban) {
			rc = hit(st, &s, ban);
			if (rc >= 0)
				return rc;
		}
		tries = bpf_map_lookup_elem(&rl_tries, &zero);
		if (!tries || !tries->v4)
			goto pass;
		ban = prefix4(ip->saddr);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;
		union host6 h6;

		if ((void *)(ip6 + 1) > end)
			goto truncated;
		__builtin_memcpy(h6.w, &ip6->saddr, sizeof(h6.w));
		host_key6(&h6);
		ban = bpf_map_lookup_elem(&rl_hosts_v6, &h6.key);
		if (ban) {
			rc = hit(st, &s, ban);
			if (rc >= 0)
				return rc;
		}
		tries = bpf_map_lookup_elem(&rl_tries, &zero);
		if (!tries || !tries->v6)
			goto pass;
		ban = prefix6(&ip6->saddr);
	} else {
		/* ARP, a third tag, anything else. */
		st->not_ip++;
		return XDP_PASS;
	}
	if (ban) {
		rc = hit(st, &s, ban);
		if (rc >= 0)
			return rc;
	}
pass:
	if (s.expired)
		st->expired++;
	return XDP_PASS;

truncated:
	st->truncated++;
	return XDP_PASS;
}
