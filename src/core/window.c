/* SPDX-License-Identifier: MIT */
/*
 * window.c - fixed-window and sliding-window counters.
 *
 * Windows are aligned to multiples of the period on Unix time, so that they
 * start and end at the same instant on every host (a per-minute window at
 * :00) and the store can count a window's requests from all of them under
 * one index. The clock the functions here are given is CLOCK_MONOTONIC
 * shifted by an offset fixed when the segment was made (algo.c, rules.c):
 * a step of the wall clock never moves a window mid-way. A period is at
 * least one second (rl_algo_check), so a window index fits easily in the
 * packed state:
 *
 *   fixed:    [0][index: 31][count: 32]
 *   sliding:  [0][index: 23][cur: 20][prev: 20]
 *
 * Indexes are kept modulo 2^31 / 2^23 and compared by difference. A state
 * written by a process whose clock read a little later may carry the next
 * window's index; it is treated as the current window rather than as an old
 * one, so a late clock never wipes a count.
 *
 * The sliding window is Cloudflare's: the estimate is
 *   prev * (period - elapsed) / period + cur
 * compared exactly, in 128-bit integers, with no rounding.
 */
#include "algo.h"

#define FX_IDX_MASK 0x7FFFFFFFull
#define SW_IDX_MASK 0x7FFFFFull
#define SW_CNT_MASK 0xFFFFFull

typedef unsigned __int128 u128;

static inline uint32_t clamp32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* ---- fixed window -------------------------------------------------------- */

/*
 * The window that applies at `now_idx` given `state`: normally now's, but
 * the stored one when it is one ahead (written from a later clock). Returns
 * its count (0 when the stored window is over) and sets *idx.
 */
static uint64_t fx_load(uint64_t state, uint64_t now_idx, uint64_t *idx)
{
	uint64_t d = (now_idx - (state >> 32)) & FX_IDX_MASK;

	*idx = now_idx;
	if (d == FX_IDX_MASK)
		*idx = now_idx + 1;
	return (d == 0 || d == FX_IDX_MASK) ? (state & 0xFFFFFFFFull) : 0;
}

void rl_window_fixed_step(uint64_t *state, const struct rl_rate *rate,
			  uint32_t cost, uint64_t now_ns, struct rl_result *out)
{
	uint64_t idx, limit = rate->count;
	uint64_t count = fx_load(*state, now_ns / rate->period_ns, &idx);
	uint64_t end = (idx + 1) * rate->period_ns;

	out->limit = rate->count;
	if (count + cost > limit) {
		out->allowed = 0;
		out->remaining = clamp32(count < limit ? limit - count : 0);
		out->retry_after_ns = cost > limit ? UINT64_MAX : end - now_ns;
		out->reset_after_ns = count ? end - now_ns : 0;
		return;
	}
	count += cost;
	out->allowed = 1;
	out->remaining = clamp32(limit - count);
	out->retry_after_ns = 0;
	out->reset_after_ns = count ? end - now_ns : 0;
	if (cost > 0)
		*state = ((idx & FX_IDX_MASK) << 32) | count;
}

uint64_t rl_window_fixed_free_at(uint64_t state, const struct rl_rate *rate,
				 uint64_t now_ns)
{
	uint64_t idx;

	if (!fx_load(state, now_ns / rate->period_ns, &idx))
		return 0;
	return (idx + 1) * rate->period_ns;
}

void rl_window_fixed_refund(uint64_t *state, const struct rl_rate *rate,
			    uint32_t cost, uint64_t now_ns)
{
	uint64_t idx;
	uint64_t count = fx_load(*state, now_ns / rate->period_ns, &idx);

	if (count == 0)
		return;
	count = count > cost ? count - cost : 0;
	*state = ((idx & FX_IDX_MASK) << 32) | count;
}

/* ---- sliding window ------------------------------------------------------ */

struct sw {
	uint64_t idx;     /* the window the counts are relative to */
	uint64_t elapsed; /* ns into it */
	uint64_t cur;
	uint64_t prev;
};

/* Unpack `state` as seen from `now`. */
static void sw_load(uint64_t state, const struct rl_rate *rate,
		    uint64_t now_ns, struct sw *w)
{
	uint64_t idx = now_ns / rate->period_ns;
	uint64_t d = (idx - (state >> 40)) & SW_IDX_MASK;
	uint64_t cur = (state >> 20) & SW_CNT_MASK;
	uint64_t prev = state & SW_CNT_MASK;

	w->idx = idx;
	w->elapsed = now_ns - idx * rate->period_ns;
	if (d == 0) {
		w->cur = cur;
		w->prev = prev;
	} else if (d == 1) {
		w->cur = 0;
		w->prev = cur;
	} else if (d == SW_IDX_MASK) {
		/* Written from a clock already in the next window. */
		w->idx = idx + 1;
		w->elapsed = 0;
		w->cur = cur;
		w->prev = prev;
	} else {
		w->cur = 0;
		w->prev = 0;
	}
}

static uint64_t sw_pack(const struct sw *w)
{
	return ((w->idx & SW_IDX_MASK) << 40) | (w->cur << 20) | w->prev;
}

/* Scaled estimate: estimate * period, exact. */
static u128 sw_scaled(const struct sw *w, uint64_t period)
{
	return (u128)w->prev * (period - w->elapsed) + (u128)w->cur * period;
}

/* cost-1 requests that would pass now */
static uint32_t sw_remaining(const struct sw *w, uint64_t limit,
			     uint64_t period)
{
	u128 cap = (u128)limit * period;
	u128 used = sw_scaled(w, period);

	return used >= cap ? 0 : clamp32((uint64_t)((cap - used) / period));
}

/* Time until neither count weighs any more. */
static uint64_t sw_reset(const struct sw *w, uint64_t period)
{
	if (w->cur)
		return 2 * period - w->elapsed;
	if (w->prev)
		return period - w->elapsed;
	return 0;
}

/*
 * The earliest wait after which `cost` more fits, given it does not fit
 * now. In this window: prev * (period - e) <= (limit - cur - cost) * period.
 * In the next one prev becomes cur and cur 0. cost <= limit always fits
 * by the window after next.
 */
static uint64_t sw_retry(const struct sw *w, uint64_t cost, uint64_t limit,
			 uint64_t period)
{
	uint64_t e;

	if (cost > limit)
		return UINT64_MAX;
	if (w->cur + cost <= limit && w->prev) {
		u128 room = (u128)(limit - w->cur - cost) * period;
		uint64_t keep = (uint64_t)(room / w->prev); /* <= period */

		e = period - keep;
		if (e < period)
			return e - w->elapsed;
	}
	/* Next window: the weight of cur must fall to (limit - cost). */
	e = 0;
	if (w->cur) {
		u128 room = (u128)(limit - cost) * period;
		uint64_t keep = (uint64_t)(room / w->cur);

		e = keep >= period ? 0 : period - keep;
	}
	return period - w->elapsed + e;
}

void rl_window_sliding_step(uint64_t *state, const struct rl_rate *rate,
			    uint32_t cost, uint64_t now_ns,
			    struct rl_result *out)
{
	uint64_t period = rate->period_ns;
	uint64_t limit = rate->count;
	struct sw w;

	sw_load(*state, rate, now_ns, &w);
	out->limit = rate->count;
	if (sw_scaled(&w, period) + (u128)cost * period > (u128)limit * period) {
		out->allowed = 0;
		out->remaining = sw_remaining(&w, limit, period);
		out->retry_after_ns = sw_retry(&w, cost, limit, period);
		out->reset_after_ns = sw_reset(&w, period);
		return;
	}
	w.cur += cost;
	out->allowed = 1;
	out->remaining = sw_remaining(&w, limit, period);
	out->retry_after_ns = 0;
	out->reset_after_ns = sw_reset(&w, period);
	if (cost > 0)
		*state = sw_pack(&w);
}

uint64_t rl_window_sliding_free_at(uint64_t state, const struct rl_rate *rate,
			   uint64_t now_ns)
{
	struct sw w;
	uint64_t reset;

	sw_load(state, rate, now_ns, &w);
	reset = sw_reset(&w, rate->period_ns);
	/* w.idx may be one ahead of now (a later clock): then the reset counts
	 * from that window's start, which is after now. */
	return reset ? w.idx * rate->period_ns + w.elapsed + reset : 0;
}

void rl_window_sliding_refund(uint64_t *state, const struct rl_rate *rate,
		      uint32_t cost, uint64_t now_ns)
{
	struct sw w;

	sw_load(*state, rate, now_ns, &w);
	if (w.cur == 0)
		return;
	w.cur = w.cur > cost ? w.cur - cost : 0;
	*state = sw_pack(&w);
}

/* ---- windows across hosts (decide.c, slot_agent.c) ----------------------- */

uint64_t rl_window_load(const struct rl_algo *a, uint64_t state,
			uint64_t now_ns, uint64_t *cur, uint64_t *prev)
{
	uint64_t now = now_ns + a->unix_off_ns, idx;
	struct sw w;

	if (a->kind == RL_ALGO_FIXED_WINDOW) {
		*cur = fx_load(state, now / a->rate.period_ns, &idx);
		*prev = 0;
		return idx;
	}
	sw_load(state, &a->rate, now, &w);
	*cur = w.cur;
	*prev = w.prev;
	return w.idx;
}

uint64_t rl_window_pack(const struct rl_algo *a, uint64_t idx, uint64_t cur,
			uint64_t prev)
{
	struct sw w = { .idx = idx };

	if (a->kind == RL_ALGO_FIXED_WINDOW)
		return ((idx & FX_IDX_MASK) << 32) | clamp32(cur);
	/* Counts from many hosts may pass what one could admit: at the
	 * maximum the estimate is over any limit all the same. */
	w.cur = cur < SW_CNT_MASK ? cur : SW_CNT_MASK;
	w.prev = prev < SW_CNT_MASK ? prev : SW_CNT_MASK;
	return sw_pack(&w);
}

uint64_t rl_window_share(const struct rl_algo *a, uint64_t idx, uint64_t cur,
			 uint64_t prev, uint64_t give, uint32_t hosts,
			 uint64_t now_ns)
{
	uint64_t now = now_ns + a->unix_off_ns, period = a->rate.period_ns;
	uint64_t start = idx * period, left, weight, count;
	uint64_t elapsed = now > start ? now - start : 0;
	uint64_t mine = (prev + hosts - 1) / (hosts ? hosts : 1);

	if (a->kind == RL_ALGO_FIXED_WINDOW || hosts <= 1 || prev == 0 ||
	    elapsed >= period) {
		left = rl_window_left(a, cur, prev, now_ns);
		return rl_window_pack(a, idx, cur + (left > give ? left - give : 0),
				      prev);
	}
	/* The previous count this host carries is its share of it, so that
	 * its weight falls by that share only; the current count, weight of
	 * the rest included, makes `give` what is left now: remaining is
	 * floor(limit - mine * (period - elapsed) / period - cur'), so cur' =
	 * limit - give - the weight rounded up. At least the count plus the
	 * weight of the rest, though: a window counted past its limit stays
	 * so here (and is a previous window that weighs as much). */
	weight = (uint64_t)(((u128)mine * (period - elapsed) + period - 1) / period);
	count = a->rate.count > give + weight ? a->rate.count - give - weight : 0;
	weight = (uint64_t)(((u128)(prev - mine) * (period - elapsed) + period - 1) /
			    period);
	if (count < cur + weight)
		count = cur + weight;
	return rl_window_pack(a, idx, count, mine);
}

uint64_t rl_window_left(const struct rl_algo *a, uint64_t cur, uint64_t prev,
			uint64_t now_ns)
{
	uint64_t now = now_ns + a->unix_off_ns, period = a->rate.period_ns;
	struct sw w;

	if (a->kind == RL_ALGO_FIXED_WINDOW)
		return cur < a->rate.count ? a->rate.count - cur : 0;
	w.idx = now / period;
	w.elapsed = now - w.idx * period;
	w.cur = cur;
	w.prev = prev;
	return sw_remaining(&w, a->rate.count, period);
}
