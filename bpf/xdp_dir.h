/* SPDX-License-Identifier: MIT */
/*
 * bpf/xdp_dir.h - the prefix directories of bpf/xdp_maps.h, as user space
 * builds them from a set of prefix bans: the agent (src/agent/xdp_loader.c)
 * and, for what writes bans without the agent, the program's test
 * (tests/unit/test_xdp.c) and benchmark (tools/bench/bench_xdp.c). One
 * builder, so that the three cannot disagree on what the program reads.
 *
 * There are RL_XDP_NDIRS directories: rl_dir_v4, rl_dir_v6 (IPv6 /32 and
 * longer) and rl_dir_v6s (IPv6 shorter); rl_xdp_dir_of() says which lists
 * a ban. Building one is in two steps: a set of lengths per entry
 * (rl_xdp_dir_add() for each prefix ban it lists, into RL_XDP_DIR_ENTRIES
 * zeroed sets), then the entries (rl_xdp_dir_entry()), written where they
 * changed (rl_xdp_dir_write()). A ban of length len covers the entries of
 * every value the 16 indexed bits can have under its prefix: one entry
 * when the prefix fixes them all, every entry when it fixes none (a /0),
 * 2^k between.
 */
#ifndef RL_XDP_DIR_H
#define RL_XDP_DIR_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <linux/types.h>
#include <bpf/bpf.h>

#include "xdp_maps.h"

_Static_assert(RL_XDP_DIR_BITS == 16 && RL_XDP_DIR_SHIFT4 % 8 == 0 &&
	       RL_XDP_DIR_SHIFT6 % 8 == 0 && RL_XDP_DIR_SHIFT6S % 8 == 0,
	       "the index is two whole bytes");
_Static_assert(RL_XDP_DIR_SHIFT6 + RL_XDP_DIR_BITS <= RL_XDP_DIR_SPLIT6,
	       "rl_dir_v6's prefixes fix its bits: one entry each");

/* The lengths, 0..128, of the prefix bans over one entry: bit len. */
struct rl_xdp_lenset {
	uint64_t w[3];
};

enum { RL_XDP_DIR4, RL_XDP_DIR6, RL_XDP_DIR6S, RL_XDP_NDIRS };

/* The directory that lists a prefix ban of this family and length. */
static inline int rl_xdp_dir_of(int v6, unsigned len)
{
	return !v6 ? RL_XDP_DIR4 : len >= RL_XDP_DIR_SPLIT6 ? RL_XDP_DIR6
							     : RL_XDP_DIR6S;
}

static inline int rl_xdp_dir_v6(int dir)
{
	return dir != RL_XDP_DIR4;
}

static inline unsigned rl_xdp_dir_shift(int dir)
{
	return dir == RL_XDP_DIR4 ? RL_XDP_DIR_SHIFT4 :
	       dir == RL_XDP_DIR6 ? RL_XDP_DIR_SHIFT6 : RL_XDP_DIR_SHIFT6S;
}

/* An address's entry (network order) in a directory, as the program
 * computes it. */
static inline uint32_t rl_xdp_dir_index(const uint8_t *addr, int dir)
{
	unsigned b = rl_xdp_dir_shift(dir) / 8;

	return (uint32_t)addr[b] << 8 | addr[b + 1];
}

/* Note a prefix ban (addr masked to len) in the sets of its entries of
 * directory dir (its rl_xdp_dir_of()). */
static inline void rl_xdp_dir_add(struct rl_xdp_lenset *sets,
				  const uint8_t *addr, int dir, unsigned len)
{
	unsigned s = rl_xdp_dir_shift(dir);
	uint32_t first = 0, count = RL_XDP_DIR_ENTRIES;

	if (len >= s + RL_XDP_DIR_BITS) {
		first = rl_xdp_dir_index(addr, dir);
		count = 1;
	} else if (len > s) {
		count = 1u << (s + RL_XDP_DIR_BITS - len);
		first = rl_xdp_dir_index(addr, dir) & ~(count - 1);
	}
	for (uint32_t i = first; i < first + count; i++)
		sets[i].w[len / 64] |= 1ull << (len % 64);
}

/* One entry from its set: the lengths longest first, or "the trie". */
static inline struct rl_xdp_dir rl_xdp_dir_entry(const struct rl_xdp_lenset *s)
{
	struct rl_xdp_dir d;

	memset(&d, 0, sizeof(d));
	for (int w = 2; w >= 0; w--) {
		for (uint64_t bits = s->w[w]; bits;) {
			int b = 63 - __builtin_clzll(bits);

			bits &= ~(1ull << b);
			if (d.n == RL_XDP_DIR_LENS) {
				memset(&d, 0, sizeof(d));
				d.n = RL_XDP_DIR_TRIE;
				return d;
			}
			d.len[d.n++] = (uint8_t)(w * 64 + b);
		}
	}
	return d;
}

/*
 * Bring the map `fd` in line with `sets`, where `have` (what the map holds
 * now, kept by the caller; zeros for a fresh map) differs; `have` is
 * updated. Returns the entries written, or -errno of the first refused
 * (the rest are still tried, and `have` keeps what the map has).
 */
static inline int rl_xdp_dir_write(int fd, const struct rl_xdp_lenset *sets,
				   struct rl_xdp_dir *have)
{
	int written = 0, err = 0;

	for (uint32_t i = 0; i < RL_XDP_DIR_ENTRIES; i++) {
		struct rl_xdp_dir d = rl_xdp_dir_entry(&sets[i]);

		if (!memcmp(&d, &have[i], sizeof(d)))
			continue;
		if (bpf_map_update_elem(fd, &i, &d, BPF_ANY)) {
			if (!err)
				err = -errno;
			continue;
		}
		have[i] = d;
		written++;
	}
	return err ? err : written;
}

#endif /* RL_XDP_DIR_H */
