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
enum rl_shim_phase rl_shim_configure(const struct rl_io_sys *sys);

/* At the first accept on a guarded port: open the segment, build the
 * policy, log which configuration is in force. Thread-safe, once. */
enum rl_shim_phase rl_shim_activate(void);

/* At each accept once active: restart the agent if it should run and its
 * heartbeat stopped. */
void rl_shim_watch(void);

#endif /* RL_SHIM_H */
