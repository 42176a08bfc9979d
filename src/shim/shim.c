/* SPDX-License-Identifier: MIT */
/* shim.c - starting the shim: the configuration, the segment, on_error. */
#include "shim.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "spawn.h"
#include "time.h"

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static enum rl_shim_phase phase;
static struct rl_io_sys io_sys;
static struct rl_config *config;
static char config_err[RL_ERR_MAX];
static struct rl_table *table_;

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
	rl_log(RL_LOG_ERROR, "msg=\"%s, %s\" err=\"%s\"", what,
	       passthrough ? "passing connections through unlimited"
			   : "refusing guarded connections", err);
	if (passthrough) {
		set_phase(RL_SHIM_OFF);
	} else {
		rl_io_refuse(&io_sys);
		set_phase(RL_SHIM_REFUSE);
	}
}

enum rl_shim_phase rl_shim_configure(const struct rl_io_sys *sys)
{
	const char *path;
	int rc;

	if (rl_shim_phase() != RL_SHIM_COLD)
		return rl_shim_phase();
	pthread_mutex_lock(&start_lock);
	if (phase != RL_SHIM_COLD)
		goto out;
	io_sys = *sys;
	if (rl_conn_setup()) {
		set_phase(RL_SHIM_OFF); /* no address space: do nothing */
		goto out;
	}
	path = rl_config_path();
	rc = path ? rl_config_load(path, &config, config_err, sizeof(config_err))
		  : rl_config_default(&config);
	if (rc) {
		fail("bad configuration", config_err, wants_passthrough(path));
		goto out;
	}
	rl_log_setup(config->log, config->log_level, "rlshim");
	/* The ports are known from here on; nothing is opened yet. */
	rl_io.cfg = config;
	rl_io.policy.cfg = config;
	set_phase(RL_SHIM_CONFIGURED);
out:
	pthread_mutex_unlock(&start_lock);
	return rl_shim_phase();
}

enum rl_shim_phase rl_shim_activate(void)
{
	struct rl_table *table = NULL;
	char err[RL_ERR_MAX], ports[256];
	size_t n = 0;
	int rc;

	if (rl_shim_phase() != RL_SHIM_CONFIGURED)
		return rl_shim_phase();
	pthread_mutex_lock(&start_lock);
	if (phase != RL_SHIM_CONFIGURED)
		goto out;
	rc = rl_table_open(config->shm, config->capacity, RL_TABLE_CREATE, &table);
	if (rc) {
		fail("unusable shared memory", rl_table_error(),
		     config->on_error == RL_ON_ERROR_PASSTHROUGH);
		goto out;
	}
	rc = rl_io_start(&io_sys, config, table, err, sizeof(err));
	if (rc) {
		rl_table_close(table);
		fail("cannot start", err,
		     config->on_error == RL_ON_ERROR_PASSTHROUGH);
		goto out;
	}
	ports[0] = '\0';
	for (unsigned i = 0; i < config->nports && n < sizeof(ports) - 8; i++)
		n += (size_t)snprintf(ports + n, sizeof(ports) - n, "%s%u",
				      i ? "," : "", config->ports[i]);
	rl_log(RL_LOG_INFO, "msg=\"limiting\" config=\"%s\" rules=%u shm=%s "
	       "ports=%s mode=%s", config->source[0] ? config->source
						       : "built-in default",
	       config->nrules, config->shm, n ? ports : "all",
	       config->mode == RL_MODE_DRY_RUN ? "dry-run" : "enforce");
	table_ = table;
	set_phase(RL_SHIM_ACTIVE);
	rl_spawn_agent(config, table, rl_time_now_ns());
out:
	pthread_mutex_unlock(&start_lock);
	return rl_shim_phase();
}

void rl_shim_watch(void)
{
	/* At every accept, two loads: is the agent we want alive? */
	if (table_ && (config->redis || config->xdp)) {
		uint64_t now = rl_time_now_ns();

		if (!rl_agent_alive(table_, now))
			rl_spawn_agent(config, table_, now);
	}
}
