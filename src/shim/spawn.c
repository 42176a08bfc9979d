/* SPDX-License-Identifier: MIT */
/*
 * spawn.c - starting rlshimd from inside the server, when the configuration
 * wants one ([redis] or [xdp]) and no agent keeps the segment's heartbeat.
 *
 * posix_spawn (glibc's runs no atfork handlers of the server's) with a new
 * session, every fd past stderr closed (the agent must not hold the
 * server's listening sockets), and LD_PRELOAD taken out of its environment.
 * The agent detaches at once, so the short wait for its first process does
 * not hold the accept that triggered it. Among the server's processes one
 * claims the spawn in the segment, and a failed start is retried at most
 * every few seconds. Its log (with `log = stderr`) goes to a file in a
 * directory only the server's user can write (logfile.c), else to syslog.
 * It runs with --idle-exit: once no server holds the segment
 * (rl_table_hold, taken in shim.c) for a while, it stops.
 */
#include "spawn.h"

#include <dlfcn.h>
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "logfile.h"
#include "clock.h"
#include "mem.h"

#define RETRY_NS (5000 * RL_NS_PER_MS)

extern char **environ;

static char agent_env[256]; /* $RLSHIM_AGENT when the library loaded */

void rl_spawn_remember_env(void)
{
	const char *e = getenv("RLSHIM_AGENT");

	if (e && *e && strlen(e) < sizeof(agent_env))
		memcpy(agent_env, e, strlen(e) + 1);
}

static int executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       access(path, X_OK) == 0;
}

/* rlshimd: $RLSHIM_AGENT, else beside this library (the build tree), else
 * in ../sbin or ../bin from it (an install), else the usual places. */
static int find_agent(char *out, size_t len)
{
	static const char *const rel[] = { "rlshimd", "../sbin/rlshimd",
					   "../bin/rlshimd" };
	static const char *const abs[] = { "/usr/local/sbin/rlshimd",
					   "/usr/sbin/rlshimd" };
	Dl_info info;

	if (agent_env[0]) {
		snprintf(out, len, "%s", agent_env);
		return executable(out) ? 0 : -ENOENT;
	}
	if (dladdr((void *)find_agent, &info) && info.dli_fname) {
		const char *slash = strrchr(info.dli_fname, '/');
		int dir = slash ? (int)(slash - info.dli_fname) : 1;

		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(out, len, "%.*s/%s", dir,
				 slash ? info.dli_fname : ".", rel[i]);
			if (executable(out))
				return 0;
		}
	}
	for (size_t i = 0; i < sizeof(abs) / sizeof(abs[0]); i++) {
		snprintf(out, len, "%s", abs[i]);
		if (executable(out))
			return 0;
	}
	return -ENOENT;
}

int rl_agent_alive(struct rl_table *t, uint64_t now_ns)
{
	uint64_t beat = rl_table_agent_heartbeat(t);
	uint64_t ms = rl_table_agent_interval_ms(t);
	uint64_t stale = 5 * ms * RL_NS_PER_MS;

	if (stale < RL_NS_PER_SEC)
		stale = RL_NS_PER_SEC;
	/* A beat after `now_ns` (written since the caller read its clock)
	 * is as alive as it gets. */
	return beat && (beat > now_ns || now_ns - beat < stale);
}

int rl_agent_dead(struct rl_table *t, uint64_t now_ns)
{
	/* Never started is not dead: it is being started. */
	return rl_table_agent_heartbeat(t) && !rl_agent_alive(t, now_ns);
}

void rl_spawn_agent(const struct rl_config *cfg, struct rl_table *t,
		    uint64_t now_ns)
{
	static int said; /* the refused log file, once per process */
	char agent[512], logfile[352], q[RL_ERR_MAX];
	const char *why = "";
	char *argv[7];
	char **env;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_t fa;
	size_t n = 0, k = 0;
	pid_t pid;
	int rc, to_file = 0;

	if (!(cfg->redis || cfg->xdp) || !cfg->source[0] ||
	    rl_agent_alive(t, now_ns))
		return;
	/* One process of the server claims it, once every few seconds. */
	if (!rl_table_agent_spawn_claim(t, now_ns, RETRY_NS))
		return;
	if (find_agent(agent, sizeof(agent))) {
		rl_log(RL_LOG_ERROR, "msg=\"no rlshimd to start\" hint=\"install "
		       "it beside librlshim.so or set RLSHIM_AGENT\"");
		return;
	}
	argv[n++] = agent;
	argv[n++] = (char *)"-c";
	argv[n++] = (char *)cfg->source;
	/* It stops once no server has held the segment for a while
	 * (rl_table_hold); one the operator runs does not. */
	argv[n++] = (char *)"--idle-exit";
	if (cfg->log == RL_LOG_STDERR &&
	    rl_logfile_path(cfg->shm, logfile, sizeof(logfile), &why)) {
		if (!said++)
			rl_log(RL_LOG_WARN, "msg=\"no private place for the "
			       "agent's log, it logs to syslog\" file=\"%s\" "
			       "err=\"%s\"",
			       rl_log_quote(logfile, q, sizeof(q)), why);
		argv[n++] = (char *)"--syslog";
	} else if (cfg->log == RL_LOG_STDERR) {
		argv[n++] = (char *)"--log";
		argv[n++] = logfile;
		to_file = 1;
	}
	argv[n] = NULL;
	for (char **e = environ; e && *e; e++)
		n++;
	env = rl_mem_alloc((n + 1) * sizeof(*env));
	if (!env)
		return;
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) != 0)
			env[k++] = *e;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	rc = posix_spawn(&pid, agent, &fa, &attr, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	rl_mem_free(env);
	if (rc) {
		rl_log(RL_LOG_ERROR, "msg=\"cannot start rlshimd\" path=%s err=\"%s\"",
		       agent, strerror(rc));
		return;
	}
	/* It detaches at once; reap that first process (unless the server's
	 * own SIGCHLD handler got to it first). */
	waitpid(pid, NULL, 0);
	rl_log(RL_LOG_INFO, "msg=\"started rlshimd\" path=%s log=%s", agent,
	       to_file ? logfile : "syslog");
}
