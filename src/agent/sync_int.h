/* SPDX-License-Identifier: MIT */
/*
 * sync_int.h - what sync.c (the round: collect, pipeline, replies) and
 * sync_jobs.c (each job's command and the handling of its reply) share.
 */
#ifndef RL_SYNC_INT_H
#define RL_SYNC_INT_H

#include <hiredis/hiredis.h>

#include "agent.h"

#define BATCH 400             /* keys per script call */
#define PLANS_SCAN "1000"     /* planned keys mirrored per rule per round */

/* What each queued reply is for. */
enum job { JOB_EPOCH, JOB_EPOCH_SET, JOB_HOSTS, JOB_HOSTS_COUNT, JOB_SYNC, JOB_PLANS, JOB_CLEAN,
	   JOB_FLOOR, JOB_PLANS_SCAN, JOB_PULL, JOB_WINDOW, JOB_RESETS,
	   JOB_FORGET, JOB_BANS_EXPIRE, JOB_BANS, JOB_RESETS_START, JOB_TIME,
	   JOB_PULL_KEYS, JOB_PULL_STATES, JOB_BEAT };

struct reply_plan {
	enum job job;
	unsigned rule;       /* config index */
	uint32_t first, n;   /* items */
};

#define PLAN_MAX 1024

struct round {
	struct rl_agent *a;
	uint64_t now_ns;
	uint64_t since_ns;   /* since the last round's collect */
	unsigned nplan;
	struct reply_plan plan[PLAN_MAX];
	int failed;
	int closed_failed;   /* cluster: a call of a closed rule's keys failed */
	uint64_t store_us;   /* the store's clock, at the round's TIME */
	int have_time;
	int beat;            /* this host's entry among the hosts renewed */
	/* the scores (store us) of this round's own changes, by sync call:
	 * the pulls skip those keys (their states came with the sync) */
	unsigned nown;
	struct own_range { unsigned rule, shard; double lo, hi; } own[256];
};

/* sync.c */
int sync_plan_add(struct round *r, enum job job, unsigned rule, uint32_t first,
		  uint32_t n);
void sync_arg(const char **argv, size_t *lens, int *c, const char *s,
	      size_t len);
void sync_arg_text(const char **argv, size_t *lens, int *c, const char *s);
void sync_ttl(const struct rl_agent *a, unsigned ci, char *out, size_t len);

/* sync_jobs.c: queue a job for items [first, first + n) of rule `ci` (or
 * the whole rule), and apply its reply */
int queue_sync(struct round *r, unsigned ci, uint32_t first, uint32_t n);
int queue_window(struct round *r, unsigned ci, uint32_t first, uint32_t n);
int on_window(struct rl_agent *a, const struct reply_plan *p,
	      const redisReply *rep);
int queue_pull(struct round *r, unsigned ci);
int on_pull(struct rl_agent *a, const struct reply_plan *p,
	    const redisReply *rep, uint64_t now_ns);
/* standalone: the store's clock (TIME), the keys a pull found (plain
 * ZRANGEBYSCORE), then their states read (HMGET) after the round's
 * replies: queue_pulled, if npulled */
int queue_time(struct round *r);
int on_time(struct round *r, const redisReply *rep);
int on_pull_keys(struct round *r, const struct reply_plan *p,
		 const redisReply *rep);
int queue_pulled(struct round *r);
int on_pull_states(struct rl_agent *a, const struct reply_plan *p,
		   const redisReply *rep, uint64_t now_us, uint64_t now_ns);
int queue_floor(struct round *r, unsigned ci, uint32_t first, uint32_t n);
int queue_plans(struct round *r, unsigned ci, uint32_t first, uint32_t n);
int queue_plans_scan(struct round *r, unsigned ci);
void plans_scanned(struct rl_agent *a, unsigned ci, redisReply *rep);
/* the resets since the last round (reset.c): read last in the round; the
 * keys reset deleted from the store once more after it */
int queue_resets(struct round *r);
int on_resets(struct rl_agent *a, const redisReply *rep, uint64_t now_ns);
int on_resets_start(struct rl_agent *a, const redisReply *rep);
int queue_forgets(struct round *r);

#endif /* RL_SYNC_INT_H */
