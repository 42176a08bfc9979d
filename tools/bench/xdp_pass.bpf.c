/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * xdp_pass.bpf.c - the baseline of tools/bench/bench_xdp.c: an XDP program
 * that only passes. BPF_PROG_TEST_RUN's time per run includes its own loop
 * and the program's entry and exit; running this next to rl_xdp measures
 * them, so what rl_xdp adds is the difference.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	(void)ctx;
	return XDP_PASS;
}
