/* SPDX-License-Identifier: MIT */
/* shim.c - starting the shim: the configuration, the segment, on_error. */
#include "shim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kept.h"
#include "log.h"
#include "spawn.h"
#include "clock.h"

/* A reload is looked for, and the denial summary written, at most this
 * often per process, at a request or an accept. */
#define TICK_NS RL_NS_PER_SEC
#define SUMMARY_MS 10000u

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static enum rl_shim_phase phase;
static struct rl_sys io_sys;
static struct rl_config *config;      /* in force; earlier ones are never
					 freed (a thread may be using one) */
static uint64_t config_stamp;        /* rl_config_stamp() of its file */
static char *config_text;            /* its text, until kept (kept.c) */
static size_t config_len;
static int config_kept;              /* the file was broken at the start:
					the host's kept text is in force */
static struct rl_err config_err;
static struct rl_table *table_;
/* The hold on the segment that tells an agent the shim started that this
 * server still uses it (rl_table_hold); checked again each tick. */
static struct rl_table_hold hold = { .fd = -1 };

uint64_t rl_shim_tick_at;

static int in_force(uint64_t stamp, char **text, size_t len);
static void refused(uint64_t stamp, const char *err, const char *instead);
static void keep_hold(void);

/* One reload at a time in a process, however long one takes; a child
 * forked in the middle of one starts with none (and the stamp of what its
 * policy is, so that it looks again). */
static int reloading;

static void reload_forked(void)
{
	reloading = 0;
}

enum rl_shim_phase rl_shim_phase(void)
{
	return __atomic_load_n(&phase, __ATOMIC_ACQUIRE);
}

static void set_phase(enum rl_shim_phase p)
{
	__atomic_store_n(&phase, p, __ATOMIC_RELEASE);
}

/*
 * A file that does not parse cannot be trusted for its on_error either;
 * but an operator who wrote `on_error = passthrough` meant it, so look for
 * exactly that line. Anything else is the default: refuse.
 */
static int wants_passthrough(const char *path)
{
	char line[512];
	int found = 0;
	FILE *f = path ? fopen(path, "re") : NULL;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char key[32], val[32];

		if (sscanf(line, " %31[a-z_] = %31[a-z]", key, val) == 2 &&
		    strcmp(key, "on_error") == 0)
			found = strcmp(val, "passthrough") == 0;
	}
	fclose(f);
	return found;
}

static void fail(const char *what, const char *err, int passthrough)
{
	char q[RL_ERR_MAX];

	rl_log(RL_LOG_ERROR, "msg=\"%s, %s\" err=\"%s\"", what,
	       passthrough ? "passing connections through unlimited"
			   : "refusing guarded connections",
	       rl_log_quote(err, q, sizeof(q)));
	if (passthrough) {
		set_phase(RL_SHIM_OFF);
	} else {
		rl_io_refuse(&io_sys);
		set_phase(RL_SHIM_REFUSE);
	}
}

/* Take the start lock if the shim is in phase `from`, checked again under
 * it (another thread may have moved it on meanwhile). Returns 1 with the
 * lock held, 0 without it. */
static int start_from(enum rl_shim_phase from)
{
	if (rl_shim_phase() != from)
		return 0;
	pthread_mutex_lock(&start_lock);
	if (phase == from)
		return 1;
	pthread_mutex_unlock(&start_lock);
	return 0;
}

enum rl_shim_phase rl_shim_configure(const struct rl_sys *sys)
{
	const char *path;
	int rc;

	if (!start_from(RL_SHIM_COLD))
		return rl_shim_phase();
	io_sys = *sys;
	if (rl_conn_setup()) {
		set_phase(RL_SHIM_OFF); /* no address space: do nothing */
		goto out;
	}
	path = rl_config_path();
	/* Before the load: an edit made meanwhile shows at the first tick. */
	config_stamp = rl_config_stamp(path);
	rc = path ? rl_kept_config(path, &config, &config_text, &config_len,
				   &config_kept, &config_err)
		  : rl_config_default(&config);
	if (rc) {
		fail("bad configuration", config_err.msg, wants_passthrough(path));
		goto out;
	}
	rl_log_setup(config->log, config->log_level, "rlshim");
	/* The ports are known from here on; nothing is opened yet. */
	rl_io.cfg = config;
	set_phase(RL_SHIM_CONFIGURED);
out:
	pthread_mutex_unlock(&start_lock);
	return rl_shim_phase();
}

enum rl_shim_phase rl_shim_activate(void)
{
	struct rl_table *table = NULL;
	struct rl_err err;
	char ports[256], q[RL_PATH_MAX * 2];
	size_t n = 0;
	int rc;

	if (!start_from(RL_SHIM_CONFIGURED))
		return rl_shim_phase();
	/* A root server never takes a segment another user made (root's
	 * tools may read any). */
	rc = rl_table_open(config->shm, config->capacity,
			   RL_TABLE_CREATE | RL_TABLE_OWNED, &table,
			   &err);
	if (rc) {
		fail("unusable shared memory", err.msg,
		     config->on_error == RL_ON_ERROR_PASSTHROUGH);
		goto out;
	}
	rc = rl_io_start(&io_sys, config, table, &err);
	if (rc) {
		rl_table_close(table);
		fail("cannot start", err.msg,
		     config->on_error == RL_ON_ERROR_PASSTHROUGH);
		goto out;
	}
	ports[0] = '\0';
	for (unsigned i = 0; i < config->nports && n < sizeof(ports) - 8; i++)
		n += (size_t)snprintf(ports + n, sizeof(ports) - n, "%s%u",
				      i ? "," : "", config->ports[i]);
	rl_log(RL_LOG_INFO, "msg=\"limiting\" config=\"%s\" rules=%u shm=%s "
	       "ports=%s mode=%s",
	       rl_log_quote(config->source[0] ? config->source
					      : "built-in default",
			    q, sizeof(q)),
	       config->nrules, config->shm, n ? ports : "all",
	       config->mode == RL_MODE_DRY_RUN ? "dry-run" : "enforce");
	table_ = table;
	/* a server (re)started with the file: a restart a reload asked for
	 * is done */
	if (!config_kept)
		rl_table_restart_done(table);
	keep_hold();
	pthread_atfork(NULL, NULL, reload_forked);
	if (config_kept) {
		/* Said by every process that starts so: each is news. */
		rl_table_config_refuse(table, config_stamp);
		rl_log(RL_LOG_ERROR, "msg=\"configuration refused, using the one "
		       "in force on this host\" err=\"%s\"",
		       rl_log_quote(config_err.msg, q, sizeof(q)));
	} else if (in_force(config_stamp, &config_text, config_len))
		rl_log_config_warnings(config); /* by the host's first process */
	set_phase(RL_SHIM_ACTIVE);
	rl_spawn_agent(config, table, rl_time_now_ns());
out:
	pthread_mutex_unlock(&start_lock);
	return rl_shim_phase();
}

void rl_shim_watch(void)
{
	const struct rl_config *cfg;
	uint64_t now = rl_time_now_ns();

	rl_shim_tick(now);
	/* At every accept, a few loads: is the agent we want alive? */
	cfg = __atomic_load_n(&config, __ATOMIC_ACQUIRE);
	if (table_ && (cfg->redis || cfg->xdp) && !rl_agent_alive(table_, now))
		rl_spawn_agent(cfg, table_, now);
}

/* ---- reload --------------------------------------------------------------- */

/*
 * What a reload cannot change in a running process: the segment (its name
 * and size are the shared state itself) and the guarded ports (listeners
 * are classified once). `next` keeps the values in force; `note` names
 * what changed, for the log; returned as RL_RESTART_* bits, for status.
 */
static uint64_t keep_fixed(struct rl_config *next, const struct rl_config *cur,
			   char *note, size_t len)
{
	size_t n = 0;
	uint64_t what = 0;

	note[0] = '\0';
	if (strcmp(next->shm, cur->shm) != 0) {
		n += (size_t)snprintf(note + n, len - n, "%sshm", n ? "," : "");
		what |= RL_RESTART_SHM;
	}
	if (next->capacity != cur->capacity && n < len) {
		n += (size_t)snprintf(note + n, len - n, "%scapacity",
				      n ? "," : "");
		what |= RL_RESTART_CAPACITY;
	}
	if ((next->nports != cur->nports ||
	     memcmp(next->ports, cur->ports, sizeof(cur->ports[0]) *
		    cur->nports) != 0) && n < len) {
		snprintf(note + n, len - n, "%sports", n ? "," : "");
		what |= RL_RESTART_PORTS;
	}
	memcpy(next->shm, cur->shm, sizeof(next->shm));
	next->capacity = cur->capacity;
	next->nports = cur->nports;
	memcpy(next->ports, cur->ports, sizeof(next->ports));
	return what;
}

/*
 * The file at `stamp`, whose text is *text, is in force here: the host's
 * record says so, and keeps the text for processes that start while the
 * file is broken (the text is freed). Returns 1 if this process is the
 * first of the host to apply it.
 */
static int in_force(uint64_t stamp, char **text, size_t len)
{
	int first = rl_table_config_apply(table_, stamp);

	/* Kept unless it is kept already, or the file has moved on since
	 * (a slow process must not put an older version back). */
	if (*text && rl_kept_stamp(table_) != stamp &&
	    rl_config_stamp(config->source) == stamp &&
	    rl_kept_store(table_, config->source, *text, len, stamp))
		rl_log(RL_LOG_WARN, "msg=\"configuration too long to keep in "
		       "the segment\" bytes=%zu", len);
	rl_config_text_free(*text);
	*text = NULL;
	return first;
}

/* The file at `stamp` is in force here; the first process of the host to
 * say so logs it. */
static void applied(struct rl_config *next, uint64_t stamp, char **text,
		    size_t len, const char *fixed)
{
	char q[RL_PATH_MAX * 2];

	__atomic_store_n(&config, next, __ATOMIC_RELEASE);
	config_kept = 0;
	rl_log_setup(next->log, next->log_level, "rlshim");
	if (!in_force(stamp, text, len))
		return;
	rl_log_config_warnings(next);
	rl_table_count(table_, RL_COUNT_CONFIG_RELOADS);
	rl_log(RL_LOG_INFO, "msg=\"configuration reloaded\" config=\"%s\" "
	       "rules=%u mode=%s%s%s%s",
	       rl_log_quote(next->source, q, sizeof(q)), next->nrules,
	       next->mode == RL_MODE_DRY_RUN ? "dry-run" : "enforce",
	       fixed[0] ? " restart_needed=\"" : "", fixed,
	       fixed[0] ? "\"" : "");
}

/* The file at `stamp` cannot be used: said once per host, with what
 * stays in force. */
static void refused(uint64_t stamp, const char *err, const char *instead)
{
	char q[RL_ERR_MAX];

	if (!rl_table_config_refuse(table_, stamp))
		return;
	rl_log(RL_LOG_ERROR, "msg=\"configuration refused, %s\" err=\"%s\"",
	       instead, rl_log_quote(err, q, sizeof(q)));
}

/* The new version of the file at `stamp`: put it in force, or say why
 * not. Returns the stamp dealt with: `stamp`, or 0 to read it again. */
static uint64_t reload(const char *path, uint64_t stamp)
{
	struct rl_config *next = NULL;
	struct rl_err err;
	char fixed[32], *text = NULL;
	size_t len = 0;
	uint64_t restart;

	if (rl_config_read(path, &text, &len, &err) == 0 &&
	    rl_config_parse(text, path, &next, &err) == 0) {
		if (rl_config_stamp(path) != stamp) {
			/* Changed while we read it: half-written, maybe. */
			rl_config_free(next);
			rl_config_text_free(text);
			return 0;
		}
		restart = keep_fixed(next, config, fixed, sizeof(fixed));
		if (memcmp(next, config, sizeof(*next)) == 0) {
			/* Touched, or rewritten the same (zeroed pages, so
			 * equal down to the padding): nothing to apply,
			 * nothing to keep. */
			rl_config_free(next);
			config_kept = 0;
			/* (or what changed only a restart applies) */
			if (in_force(stamp, &text, len) && restart)
				rl_log(RL_LOG_WARN, "msg=\"configuration "
				       "changed, only a restart applies it\" "
				       "restart_needed=\"%s\"", fixed);
			rl_table_restart_needed(table_, restart);
			return stamp;
		}
		if (rl_config_reload_ok(next, &err) == 0 &&
		    rl_io_reload(next, &err) == 0) {
			applied(next, stamp, &text, len, fixed);
			rl_table_restart_needed(table_, restart);
			return stamp;
		}
		rl_config_free(next);
	}
	rl_config_text_free(text);
	refused(stamp, err.msg, config_kept ? "using the one in force on this host"
					: "the rules in force stay");
	return stamp;
}

static void reload_check(void)
{
	const char *path = config->source;
	uint64_t stamp;

	if (!path[0])
		return; /* the built-in default: no file to watch */
	stamp = rl_config_stamp(path);
	if (stamp == config_stamp ||
	    __atomic_exchange_n(&reloading, 1, __ATOMIC_ACQUIRE))
		return;
	config_stamp = reload(path, stamp);
	__atomic_store_n(&reloading, 0, __ATOMIC_RELEASE);
}

static void log_denials(const char *rule, uint64_t denied, uint64_t over_ms,
			void *arg)
{
	char over[32];

	(void)arg;
	rl_time_format_duration(over, sizeof(over),
				(over_ms + 500) / 1000 * RL_NS_PER_SEC);
	rl_log(RL_LOG_INFO, "msg=\"%s\" rule=%s count=%llu%s%s",
	       config->mode == RL_MODE_DRY_RUN ? "dry-run: requests that would "
						 "have been denied"
					       : "requests denied",
	       rule, (unsigned long long)denied, over_ms ? " over=" : "",
	       over_ms ? over : "");
}

/* Take the hold, or take it again after the application closed its fd;
 * a failure is said once per process (the agent may stop meanwhile: the
 * shim starts another at an accept). */
static void keep_hold(void)
{
	static int said;
	char q[RL_ERR_MAX];
	int rc = rl_table_hold(config->shm, &hold);

	if (rc && !said++)
		rl_log(RL_LOG_WARN, "msg=\"cannot hold the segment: an agent "
		       "started with --idle-exit may stop while this server "
		       "runs\" shm=%s err=\"%s\"", config->shm,
		       rl_log_quote(strerror(-rc), q, sizeof(q)));
}

/* The agent says the store went down, or is back: the servers' logs say
 * so once each (one process of the host), with what it does to the rules
 * (the agent's own log has the cause). */
static void store_news(void)
{
	char impact[2 * RL_MAX_RULES * (RL_RULE_NAME_MAX + 1) + 64], when[40];
	uint64_t since, wall;

	if (!rl_table_store_news(table_, &since))
		return;
	if (!since) {
		rl_log(RL_LOG_INFO, "msg=\"store reachable again (rlshimd "
		       "says): rules decide from the global state\"");
		return;
	}
	rl_config_store_impact(config, impact, sizeof(impact));
	wall = rl_time_wall_ms();
	rl_time_format_duration(when, sizeof(when),
				(wall > since ? wall - since : 0) * RL_NS_PER_MS);
	rl_log(RL_LOG_WARN, "msg=\"store unreachable (rlshimd says; its log "
	       "has why)\" down_for=%s%s", when, impact);
}

void rl_shim_tick_slow(uint64_t now_ns)
{
	uint64_t at = __atomic_load_n(&rl_shim_tick_at, __ATOMIC_RELAXED);

	/* One thread of the process takes the tick. */
	if (now_ns < at ||
	    !__atomic_compare_exchange_n(&rl_shim_tick_at, &at, now_ns + TICK_NS,
					 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	if (rl_shim_phase() != RL_SHIM_ACTIVE)
		return;
	reload_check();
	keep_hold();
	if (config->redis)
		store_news();
	rl_table_summarise(table_, now_ns / RL_NS_PER_MS, SUMMARY_MS,
			   log_denials, NULL);
}
