/* SPDX-License-Identifier: MIT */
/*
 * bpf/xdp_maps.h - what the XDP program (bpf/rlshim.bpf.c), the agent's
 * loader (src/agent/xdp_loader.c) and rlshimctl (tools/ctl/cmd_xdp.c)
 * share: map names, key and value
 * layouts. Includes nothing: the includer provides __u8/__u32/__u64
 * (<linux/types.h> in user space, vmlinux.h or <linux/types.h> in BPF).
 *
 * Bans live in two kinds of maps per family. The bans that maxretry makes,
 * of exactly the configured prefix (ipv4_prefix, ipv6_prefix: the program's
 * rl_host_len4/rl_host_len6 rodata), are in hash maps keyed by the source
 * masked to that length: one lookup, whatever their number. Every other
 * ban (a /24, a /48 from rlshimctl or Redis) is in an LPM trie keyed by
 * (prefix length, address in network order), looked up only when the trie
 * holds something (rl_tries counts the entries). A frame from a live ban
 * in either drops.
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
#define RL_XDP_MAP_TRIES "rl_tries"
#define RL_XDP_MAP_DROPS "rl_drops"
#define RL_XDP_MAP_STATS "rl_stats"
#define RL_XDP_PROG "rl_xdp"

#define RL_XDP_PIN_DIR "/sys/fs/bpf/rlshim"

/* Entries of each ban map, and of the drop counters (shared by all four:
 * a ban is in one map, and has one id). */
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

/* Any ban map's key, for code that writes to all four. */
union rl_xdp_key {
	struct rl_xdp_key4 k4;
	struct rl_xdp_key6 k6;
	struct rl_xdp_host4 h4;
	struct rl_xdp_host6 h6;
};

/* RL_XDP_MAP_TRIES: one entry (index 0), entries in each trie. */
struct rl_xdp_tries {
	__u32 v4;
	__u32 v6;
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
_Static_assert(sizeof(struct rl_xdp_ban) == 16, "rl_xdp_ban layout");
_Static_assert(sizeof(struct rl_xdp_stats) == 64, "rl_xdp_stats layout");

#endif /* RL_XDP_MAPS_H */
