/* SPDX-License-Identifier: MIT */
/* spawn.h - starting the host agent from the shim, and its heartbeat. */
#ifndef RL_SPAWN_H
#define RL_SPAWN_H

#include <stdint.h>

#include "config.h"
#include "table.h"

/* Note $RLSHIM_AGENT (a path to rlshimd) when the library loads. */
void rl_spawn_remember_env(void);

/* 1 if an agent's heartbeat is fresh (within 5 rounds, at least 1 s). */
int rl_agent_alive(struct rl_table *t, uint64_t now_ns);

/* 1 if an agent ran and stopped beating: its sync is gone. */
int rl_agent_dead(struct rl_table *t, uint64_t now_ns);

/* Start rlshimd if the configuration wants one and none is alive; among
 * the server's processes one does, at most every 5 s. Never blocks for
 * more than the agent's start. */
void rl_spawn_agent(const struct rl_config *cfg, struct rl_table *t,
		    uint64_t now_ns);

#endif /* RL_SPAWN_H */
