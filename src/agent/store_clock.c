/* SPDX-License-Identifier: MIT */
/*
 * store_clock.c - the store's clock (Redis TIME, microseconds of the wall
 * clock on its master) against this host's (CLOCK_MONOTONIC): the offset
 * between them, so that a state the store counts from its own `now` is put
 * back here at the moment it was counted, not at the moment its answer
 * arrived, and what this host says a key owes is counted in the store from
 * the moment it was collected, not from when the script ran.
 *
 * Both would otherwise add the exchange's time to a key each round: the
 * script reads its clock some time after the collect (`own` counted from
 * then owes that much more), and the answer arrives some time after the
 * script (a debt counted from the arrival owes that much more again), so
 * that a client within its limit is refused at its bucket's edge. With the
 * offset, what a key owes goes to the store and comes back the same, the
 * offset's error cancelling out.
 *
 * An exchange tells the offset within its round trip: the store read its
 * clock between the sending and the answer, so the offset lies between
 * the store's time less the answer's arrival and less the sending. Those
 * bounds are kept, each exchange narrowing them, and widened by 1 ms a
 * second, as two clocks kept by NTP drift apart at most (500 ppm each).
 * The offset used moves only when a bound passes it, and then to that
 * bound: a state sent to the store and read back later is put back where
 * it was, not where the jitter of two exchanges would put it (a state is
 * only ever raised by the store's figure: every jitter would add to it).
 * Bounds that cross (a clock stepped) start again from the exchange's.
 */
#include "agent.h"

#define DRIFT_PPM 1000

void rl_store_clock_sample(struct rl_store_clock *c, uint64_t store_us,
			   uint64_t sent_ns, uint64_t got_ns)
{
	int64_t lo, hi, off;

	if (got_ns < sent_ns || !store_us)
		return;
	lo = (int64_t)store_us - (int64_t)(got_ns / 1000) - 1;
	hi = (int64_t)store_us - (int64_t)(sent_ns / 1000) + 1;
	if (atomic_load_explicit(&c->known, memory_order_relaxed)) {
		int64_t drift = got_ns > c->at_ns
					? (int64_t)((got_ns - c->at_ns) / 1000 *
						    DRIFT_PPM / 1000000)
					: 0;
		int64_t old_lo = c->lo_us - drift, old_hi = c->hi_us + drift;

		if (old_lo <= hi && lo <= old_hi) {
			lo = lo > old_lo ? lo : old_lo;
			hi = hi < old_hi ? hi : old_hi;
		}
	}
	c->lo_us = lo;
	c->hi_us = hi;
	c->at_ns = got_ns;
	off = atomic_load_explicit(&c->off_us, memory_order_relaxed);
	if (!atomic_load_explicit(&c->known, memory_order_relaxed))
		off = lo + (hi - lo) / 2;
	else if (off < lo)
		off = lo;
	else if (off > hi)
		off = hi;
	atomic_store_explicit(&c->off_us, off, memory_order_relaxed);
	atomic_store_explicit(&c->known, 1, memory_order_release);
}

int rl_store_clock_host_ns(const struct rl_store_clock *c, uint64_t store_us,
			   uint64_t *host_ns)
{
	int64_t h;

	if (!atomic_load_explicit(&c->known, memory_order_acquire))
		return -1;
	h = (int64_t)store_us - atomic_load_explicit(&c->off_us, memory_order_relaxed);
	if (h <= 0)
		return -1;
	*host_ns = (uint64_t)h * 1000;
	return 0;
}

uint64_t rl_store_clock_at(const struct rl_store_clock *c, uint64_t store_us,
			   uint64_t not_before_ns)
{
	uint64_t at;

	if (rl_store_clock_host_ns(c, store_us, &at) || at < not_before_ns)
		return not_before_ns;
	return at;
}

uint64_t rl_store_clock_store_us(const struct rl_store_clock *c,
				 uint64_t host_ns)
{
	int64_t s;

	if (!atomic_load_explicit(&c->known, memory_order_acquire))
		return 0;
	s = (int64_t)(host_ns / 1000) + atomic_load_explicit(&c->off_us,
							     memory_order_relaxed);
	return s > 0 ? (uint64_t)s : 0;
}
