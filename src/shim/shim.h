/* SPDX-License-Identifier: MIT */
/*
 * shim.h - the shim's life in a process: cold until the first accept, then
 * configured (the file read, nothing else done), then active at the first
 * accept on a guarded port (the segment opened, one line logged). A CGI
 * child or a shell that inherits LD_PRELOAD never accepts, so it never
 * leaves cold: no file, no log line, no change.
 */
#ifndef RL_SHIM_H
#define RL_SHIM_H

#include <stdint.h>

#include "io.h"

enum rl_shim_phase {
	RL_SHIM_COLD = 0,       /* nothing done yet */
	RL_SHIM_CONFIGURED = 1, /* configuration read; not limiting yet */
	RL_SHIM_ACTIVE = 2,     /* limiting */
	RL_SHIM_OFF = 3,        /* failed with on_error = passthrough */
	RL_SHIM_REFUSE = 4,     /* failed with on_error = refuse: every
				   guarded connection is closed at accept */
};

/* The current phase (a relaxed load: the hooks' fast test). */
enum rl_shim_phase rl_shim_phase(void);

/* At any accept: read the configuration once. Thread-safe. */
enum rl_shim_phase rl_shim_configure(const struct rl_sys *sys);

/* At the first accept on a guarded port: open the segment, build the
 * policy, log which configuration is in force. Thread-safe, once. */
enum rl_shim_phase rl_shim_activate(void);

/* At each accept once active: restart the agent if it should run and its
 * heartbeat stopped. */
void rl_shim_watch(void);

/*
 * At a request or an accept, with the time it was taken at: at most once a
 * second per process, look whether the configuration file changed and put
 * a valid new one in force (an invalid one is logged once per host and the
 * rules in force stay), and write the host's denial summary when due (one
 * line per rule with denials, every 10 s at most). Otherwise one load and
 * a compare.
 */
extern uint64_t rl_shim_tick_at;
void rl_shim_tick_slow(uint64_t now_ns);

static inline void rl_shim_tick(uint64_t now_ns)
{
	if (now_ns >= __atomic_load_n(&rl_shim_tick_at, __ATOMIC_RELAXED))
		rl_shim_tick_slow(now_ns);
}

#endif /* RL_SHIM_H */
