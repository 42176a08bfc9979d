/* SPDX-License-Identifier: MIT */
/*
 * bpf/xdp_mask.h - an address masked to a prefix length, as the keys of
 * bpf/xdp_maps.h hold it: the bits past the length are zero (the agent's
 * bans come so from the core; the program looks up the source masked to
 * the host length). For what writes keys itself, without the core: the
 * program's test (tests/unit/test_xdp.c) and benchmark
 * (tools/bench/bench_xdp.c).
 */
#ifndef RL_XDP_MASK_H
#define RL_XDP_MASK_H

#include <stddef.h>
#include <stdint.h>

/* Clear the bits of the n-byte address `a` (network order) past `len`. */
static inline void rl_xdp_mask(uint8_t *a, size_t n, unsigned len)
{
	for (size_t i = 0; i < n; i++) {
		if (len >= 8 * (i + 1))
			continue;
		a[i] &= len <= 8 * i ? 0 :
			(uint8_t)(0xff << (8 - (len - 8 * i)));
	}
}

#endif /* RL_XDP_MASK_H */
