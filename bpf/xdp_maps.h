/* SPDX-License-Identifier: MIT */
/*
 * bpf/xdp_maps.h - what the XDP program (bpf/rlshim.bpf.c), the agent's
 * loader (src/agent/xdp_loader.c) and rlshimctl (tools/ctl/cmd_xdp.c)
 * share: map names, key and value
 * layouts. Includes nothing: the includer provides __u8/__u32/__u64
 * (<linux/types.h> in user space, vmlinux.h or <linux/types.h> in BPF).
 *
 * Bans live in three kinds of maps per family. The bans that maxretry
 * makes, of exactly the configured prefix (ipv4_prefix, ipv6_prefix: the
 * program's rl_host_len4/rl_host_len6 rodata), are in hash maps keyed by
 * the source masked to that length: one lookup, whatever their number.
 * Every other ban (a /24, a /48 from rlshimctl or Redis) is a prefix ban,
 * and is in two maps at once, with the same value:
 *
 *  - a hash map keyed by (prefix length, address masked to it), the same
 *    key as the trie's: one lookup per length, probed longest first, the
 *    first hit answering (so the longest covering prefix decides);
 *  - an LPM trie, for the sources that would need too many probes.
 *
 * Which lengths a source probes, the directories say: arrays indexed by 16
 * bits of the source, each entry listing, longest first, the lengths of the
 * prefix bans that cover any address with those bits; or, when they are
 * more than RL_XDP_DIR_LENS, saying "ask the trie". IPv4 has one, on its
 * first 16 bits (rl_dir_v4). IPv6 has two: prefixes of /32 and longer in
 * rl_dir_v6, on bits 16-31 (where providers' /32s differ, under the
 * registries' blocks), and the shorter ones in rl_dir_v6s, on bits 0-15,
 * which such prefixes fix, where bits 16-31 would list them in thousands of
 * entries. The agent keeps them exact: a length listed with no ban is a
 * wasted probe, a ban whose length is not listed would not drop. The
 * directories and both prefix maps are looked at only when the agent
 * counts prefix bans of the family (rl_tries). A frame from a live ban
 * drops; the host hash answers first, a live host ban dropping whatever
 * prefix covers it too.
 *
 * The pins live in RL_XDP_PIN_DIR/<shm>/RL_XDP_LAYOUT: maps of another
 * layout (an older agent's, killed) are in another directory, never opened
 * as these.
 *
 * A ban's value holds its expiry on the clock the program reads
 * (bpf_ktime_get_coarse_ns(), CLOCK_MONOTONIC_COARSE: the same clock as
 * CLOCK_MONOTONIC, one tick coarser) and the index of its drop counter; an
 * entry whose expiry has passed is let through (and the agent deletes it).
 * Counters are per-CPU arrays: no two CPUs ever write the same cache line.
 */
#ifndef RL_XDP_MAPS_H
#define RL_XDP_MAPS_H

/* Map names, as the skeleton and the pins under RL_XDP_PIN_DIR call them. */
#define RL_XDP_MAP_BANS_V4 "rl_bans_v4"
#define RL_XDP_MAP_BANS_V6 "rl_bans_v6"
#define RL_XDP_MAP_HOSTS_V4 "rl_hosts_v4"
#define RL_XDP_MAP_HOSTS_V6 "rl_hosts_v6"
#define RL_XDP_MAP_PFX_V4 "rl_pfx_v4"
#define RL_XDP_MAP_PFX_V6 "rl_pfx_v6"
#define RL_XDP_MAP_DIR_V4 "rl_dir_v4"
#define RL_XDP_MAP_DIR_V6 "rl_dir_v6"
#define RL_XDP_MAP_DIR_V6S "rl_dir_v6s"
#define RL_XDP_MAP_TRIES "rl_tries"
#define RL_XDP_MAP_DROPS "rl_drops"
#define RL_XDP_MAP_STATS "rl_stats"
#define RL_XDP_PROG "rl_xdp"

#define RL_XDP_PIN_DIR "/sys/fs/bpf/rlshim"
/* The layout of the maps below, the last part of their pin directory.
 * Layout 1 (no directory, no prefix hashes, pins in RL_XDP_PIN_DIR/<shm>
 * itself) had the trie alone for prefixes. */
#define RL_XDP_LAYOUT "2"

/* Entries of each ban map, and of the drop counters (shared by all: a ban
 * is in its host hash, or in its prefix hash and trie, with one id). */
#define RL_XDP_MAX_BANS 131072

struct rl_xdp_key4 {
	__u32 prefixlen;    /* 0..32 */
	__u8 addr[4];       /* network order */
};

struct rl_xdp_key6 {
	__u32 prefixlen;    /* 0..128 */
	__u8 addr[16];      /* network order */
};

/* The hash maps' keys: the source masked to rl_host_len4 / rl_host_len6. */
struct rl_xdp_host4 {
	__u8 addr[4];
};

struct rl_xdp_host6 {
	__u8 addr[16];
};

/* Any ban map's key, for code that writes to all of them: a prefix hash
 * and a trie have the same (k4, k6). */
union rl_xdp_key {
	struct rl_xdp_key4 k4;
	struct rl_xdp_key6 k6;
	struct rl_xdp_host4 h4;
	struct rl_xdp_host6 h6;
};

/* RL_XDP_MAP_TRIES: one entry (index 0), the prefix bans of each family
 * (each in its prefix hash and in its trie): 0, and the program looks in
 * neither, nor in the directory. */
struct rl_xdp_tries {
	__u32 v4;
	__u32 v6;
};

/*
 * The directories' entries: RL_XDP_DIR_ENTRIES in each, indexed by bits
 * SHIFT .. SHIFT+15 of the source (0 the first bit, in network order):
 * RL_XDP_DIR_SHIFT4 for rl_dir_v4, RL_XDP_DIR_SHIFT6 for rl_dir_v6 (IPv6
 * prefixes of RL_XDP_DIR_SPLIT6 bits or more), RL_XDP_DIR_SHIFT6S for
 * rl_dir_v6s (the shorter). n lengths in len[0..n), longest first,
 * strictly decreasing, each 0..32 or 0..128; or n == RL_XDP_DIR_TRIE: more
 * than RL_XDP_DIR_LENS lengths cover these sources, look in the trie.
 */
#define RL_XDP_DIR_BITS 16
#define RL_XDP_DIR_ENTRIES (1u << RL_XDP_DIR_BITS)
#define RL_XDP_DIR_SHIFT4 0
#define RL_XDP_DIR_SHIFT6 16
#define RL_XDP_DIR_SHIFT6S 0
#define RL_XDP_DIR_SPLIT6 32
#define RL_XDP_DIR_LENS 7
#define RL_XDP_DIR_TRIE 0xff

struct rl_xdp_dir {
	__u8 n;
	__u8 len[RL_XDP_DIR_LENS];
};

struct rl_xdp_ban {
	__u64 expires_ns;   /* CLOCK_MONOTONIC(_COARSE); a ban at or past it
			       passes */
	__u32 id;           /* index into RL_XDP_MAP_DROPS, < RL_XDP_MAX_BANS */
	__u32 pad;
};

/* RL_XDP_MAP_STATS has one entry (index 0) of this, per CPU. */
struct rl_xdp_stats {
	__u64 packets;      /* every frame the program saw */
	__u64 dropped;      /* dropped by a live ban */
	__u64 expired;      /* matched a ban past its expiry: passed */
	__u64 not_ip;       /* ARP, other ethertypes, too many tags: passed */
	__u64 truncated;    /* shorter than its headers: passed */
	__u64 reserved[3];
};

/* RL_XDP_MAP_DROPS: a __u64 per ban id, per CPU: frames that ban dropped. */

_Static_assert(sizeof(struct rl_xdp_key4) == 8, "rl_xdp_key4 layout");
_Static_assert(sizeof(struct rl_xdp_key6) == 20, "rl_xdp_key6 layout");
_Static_assert(sizeof(struct rl_xdp_host4) == 4, "rl_xdp_host4 layout");
_Static_assert(sizeof(struct rl_xdp_host6) == 16, "rl_xdp_host6 layout");
_Static_assert(sizeof(struct rl_xdp_tries) == 8, "rl_xdp_tries layout");
_Static_assert(sizeof(struct rl_xdp_dir) == 8, "rl_xdp_dir layout");
_Static_assert(sizeof(struct rl_xdp_ban) == 16, "rl_xdp_ban layout");
_Static_assert(sizeof(struct rl_xdp_stats) == 64, "rl_xdp_stats layout");

#endif /* RL_XDP_MAPS_H */
