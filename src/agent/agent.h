/* SPDX-License-Identifier: MIT */
/*
 * agent.h - rlshimd's state and its jobs, one file each: sync.c (one
 * global limit through Redis), ban_sync.c (bans both ways), xdp_loader.c
 * (the XDP dropper), rlshimd.c (the process: lock, loop, signals).
 */
#ifndef RL_AGENT_H
#define RL_AGENT_H

#include <stdint.h>

#include "config.h"
#include "store.h"
#include "table.h"

/* Script ids in the store. */
enum { RL_SCRIPT_SYNC = 0, RL_SCRIPT_HOSTS = 1, RL_SCRIPT_CLEAN = 2,
       RL_SCRIPT_WINDOW = 3, RL_SCRIPT_WINDOW_CLEAN = 4 };

/* One key to sync this round (text as the store names it). */
struct rl_agent_item {
	uint32_t index;
	uint64_t tag;
	unsigned rule;   /* config index */
	uint32_t admitted;
	uint64_t ei_ns;  /* the key's emission interval (its tariff's) */
	uint8_t plan;
	uint8_t klen;
	char key[112];   /* key text: address, header value, or "*" */
	char count[12];  /* admitted, as text */
	char ei[32];     /* emission interval in microseconds, as text */
	char win[24];    /* a window's: its index on Unix time, as text */
	char until[24];  /* and when its counts stop mattering (Unix ms) */
};

struct rl_agent {
	const struct rl_config *cfg;
	struct rl_table *table;
	struct rl_store *store;
	unsigned ids[RL_MAX_RULES];   /* the table's id of each config rule */
	int rule_of[RL_MAX_RULES];    /* the config rule of each table id */
	char host_id[256];
	uint64_t interval_ns;

	/* the store's epoch: a random value it keeps; a different one (or
	 * none) means it restarted or was flushed */
	char epoch[33];
	int restarted;                /* this round saw a new epoch */
	uint32_t hosts_alive;         /* at the last successful sync */

	/* this round's keys, sorted by config rule */
	struct rl_agent_item *items;
	uint32_t nitems, cap;
	uint64_t clean_cursor[RL_MAX_RULES];

	uint64_t rounds;
	void *bans;                   /* ban_sync.c's state */
	struct rl_xdp *xdp;           /* xdp_loader.c's, NULL without XDP */
};

/* Set up the agent's sync state over `cfg` and `table`. 0 or -errno. */
int rl_agent_init(struct rl_agent *a, const struct rl_config *cfg,
		  struct rl_table *table, struct rl_err *err);
void rl_agent_free(struct rl_agent *a);

/*
 * The round's sync with the store (sync.c): collect what each key
 * admitted, push it and pull the keys' global states, their plans and the
 * hosts alive; with the store down, charge this host's share instead.
 * Returns 1 when the store answered the round, 0 without [redis] or with
 * the store down.
 */
int rl_agent_sync(struct rl_agent *a, uint64_t now_ns);

/* ban_sync.c */
int rl_agent_bans_init(struct rl_agent *a);
void rl_agent_bans_free(struct rl_agent *a);
/* Mirror bans between the segment and the store: after a round that
 * rl_agent_sync() had the store answer. */
void rl_agent_bans_sync(struct rl_agent *a, uint64_t now_ns);

/* xdp_loader.c: load and attach the dropper if [xdp] says so. 0 (attached, or
 * no [xdp]) or -1 (said why, once, and goes on without: the shim still
 * refuses banned clients at accept). */
int rl_agent_xdp_init(struct rl_agent *a);
/* Detach, unpin, free. */
void rl_agent_xdp_free(struct rl_agent *a);
/* Bring the dropper's tries in line with the segment's bans. */
void rl_agent_xdp_round(struct rl_agent *a, uint64_t now_ns);

/* The text a key is named by in the store. */
size_t rl_agent_key_text(const struct rl_rule_cfg *r, const uint8_t *key,
			 size_t len, int truncated, char *out, size_t outlen);

#endif /* RL_AGENT_H */
