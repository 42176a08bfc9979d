/* SPDX-License-Identifier: MIT */
/*
 * rlshimd.c - rlshimd, the host agent: one per segment, whatever the number
 * of server processes. It keeps the segment's heartbeat, syncs it with Redis
 * (sync.c), spreads bans (ban_sync.c) and drops banned clients' packets in
 * XDP (xdp_loader.c).
 *
 *   rlshimd [-c FILE] [--foreground] [--log FILE] [--syslog] [--idle-exit]
 *   rlshimd --version
 *
 * Started by the service manager (with --foreground), or by the shim at the
 * first accept when the configuration has [redis] or [xdp] and no agent
 * holds the segment. Exactly one agent serves a segment: it holds an flock
 * on the segment's file, which the kernel releases when it dies, so the
 * next one can take over at once.
 *
 * The shim starts it with --idle-exit: it stops, as on SIGTERM, once no
 * server has held the segment (rl_table_hold) for IDLE_EXIT_NS, so that it
 * does not outlive its servers; the next server to start starts another.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "kept.h"
#include "log.h"
#include "logfile.h"
#include "clock.h"

#define SWEEP_NS (1000 * RL_NS_PER_MS)
/* --idle-exit: this long without a server. $RLSHIM_TEST_IDLE_MS sets it
 * in milliseconds, for the tests. */
#define IDLE_EXIT_NS (300 * RL_NS_PER_SEC)

static volatile sig_atomic_t stopping;
static int to_syslog; /* --syslog, or the --log file was refused */

/*
 * The configuration file changed: 1 if this agent should restart itself on
 * the new one (it parses, and names the same segment), else 0; what is
 * wrong with it is logged once per version of the file.
 */
static int config_changed(const char *path, const struct rl_config *cur,
			  struct rl_table *table, uint64_t *stamp)
{
	unsigned ids[RL_MAX_RULES];
	uint64_t now = rl_config_stamp(path);
	struct rl_config *next = NULL;
	struct rl_err err;
	char q[RL_ERR_MAX];
	int ok = 0;

	if (!path || now == *stamp)
		return 0;
	*stamp = now;
	if (rl_config_check(path, &next, &err)) {
		rl_log(RL_LOG_ERROR, "msg=\"configuration refused, keeping the "
		       "one in force\" err=\"%s\"",
		       rl_log_quote(err.msg, q, sizeof(q)));
	} else if (rl_config_stamp(path) != now) {
		*stamp = 0; /* changed while read: again next time */
	} else if (strcmp(next->shm, cur->shm) != 0) {
		rl_log(RL_LOG_WARN, "msg=\"configuration names another segment; "
		       "the servers keep this one until they restart\" shm=%s",
		       next->shm);
	} else if (rl_config_register(next, table, ids, &err)) {
		/* The new image could not start on it: stay. */
		rl_log(RL_LOG_ERROR, "msg=\"configuration refused, keeping the "
		       "one in force\" err=\"%s\"",
		       rl_log_quote(err.msg, q, sizeof(q)));
	} else {
		ok = 1;
	}
	rl_config_free(next);
	return ok;
}

/* A round begins: the shims see the agent alive. */
static void heartbeat(struct rl_agent *a, uint64_t now_ns)
{
	rl_table_agent_beat(a->table, now_ns);
	a->rounds++;
}

/* Sleep until the round after the one due at `due_ns`, one interval later
 * (a slow round is not caught up: the next starts at once). Returns when
 * it is due. */
static uint64_t wait_round(uint64_t due_ns, uint64_t interval_ns)
{
	uint64_t next = due_ns + interval_ns, now = rl_time_now_ns();
	struct timespec ts;

	if (next < now)
		next = now; /* a slow round: do not try to catch up */
	ts.tv_sec = (time_t)(next / RL_NS_PER_SEC);
	ts.tv_nsec = (long)(next % RL_NS_PER_SEC);
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	return next;
}

static void on_signal(int sig)
{
	stopping = sig;
}

/* How long --idle-exit waits for a server. */
static uint64_t idle_exit_ns(void)
{
	const char *e = getenv("RLSHIM_TEST_IDLE_MS");
	char *end;
	unsigned long long ms;

	if (!e || !*e)
		return IDLE_EXIT_NS;
	ms = strtoull(e, &end, 10);
	return *end || !ms ? IDLE_EXIT_NS : ms * RL_NS_PER_MS;
}

/*
 * --idle-exit, at each sweep: 1 once every sweep for `idle_ns` has found
 * no server holding the segment (`*since_ns`: the first of them, 0 while
 * one holds it). While that cannot be known (the lock cannot be tested) a
 * server is taken to be there.
 */
static int idle(int lock, uint64_t now_ns, uint64_t *since_ns, uint64_t idle_ns)
{
	if (rl_table_held(lock) != 0) {
		*since_ns = 0;
		return 0;
	}
	if (!*since_ns)
		*since_ns = now_ns;
	return now_ns - *since_ns >= idle_ns;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: rlshimd [-c FILE] [--foreground] [--log FILE] "
		   "[--syslog] [--idle-exit]\n"
		   "  -c FILE         configuration (default: $RLSHIM_CONFIG, "
		   "else /etc/rlshim.conf)\n"
		   "  --foreground    do not detach (for a service manager)\n"
		   "  --log FILE      append the log there when detached (a file "
		   "in a directory\n"
		   "                  only this user can write; never through a "
		   "link)\n"
		   "  --syslog        log to syslog, whatever `log =` says\n"
		   "  --idle-exit     stop once no server has used the segment "
		   "for 5 minutes\n"
		   "                  (the shim starts its agent so)\n"
		   "  --version       print the release and exit\n");
}

/* Hold the segment: one agent per segment. Returns the locked fd, -1 if
 * another agent holds it, -2 on error. */
static int lock_segment(const char *shm)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/%s", shm);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -2;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return errno == EWOULDBLOCK ? -1 : -2;
	}
	return fd;
}

/*
 * The log file, opened before detaching so that a refusal is said on the
 * stderr the agent was started with (the server's log, when the shim
 * started it) and then once in syslog, where the log goes instead: never
 * through a link, nor in a directory another user can write.
 */
static int open_log(const char *logfile, enum rl_log_target target,
		    enum rl_log_level level)
{
	const char *why = "";
	char q[RL_ERR_MAX];
	int fd;

	if (!logfile)
		return -1;
	fd = rl_logfile_open(logfile, &why);
	if (fd >= 0)
		return fd;
	rl_log_quote(logfile, q, sizeof(q));
	rl_log(RL_LOG_WARN, "msg=\"log file refused, logging to syslog\" "
	       "file=\"%s\" err=\"%s\"", q, why);
	if (target != RL_LOG_SYSLOG) {
		rl_log_setup(RL_LOG_SYSLOG, level, "rlshimd");
		to_syslog = 1;
		rl_log(RL_LOG_WARN, "msg=\"log file refused, logging to "
		       "syslog\" file=\"%s\" err=\"%s\"", q, why);
	}
	return -1;
}

/* Detach: a child in its own session, the parent returns at once (its
 * caller, the shim, reaps it), stdio on /dev/null or the log file. */
static int detach(const char *logfile, enum rl_log_target target,
		  enum rl_log_level level)
{
	int log = open_log(logfile, target, level);
	pid_t pid = fork();
	int null;

	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	setsid();
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(log >= 0 ? log : null, 2);
	}
	return 0;
}

/* Where the log goes, for status (rl_table_agent_set_log): syslog, the
 * --log file when stderr is that file (detached onto it, or started again
 * in the foreground with it), else stderr (the journal's, under systemd). */
static void say_where(struct rl_table *table, const struct rl_config *cfg,
		      const char *logfile)
{
	struct stat a, b;

	if (to_syslog || cfg->log == RL_LOG_SYSLOG)
		rl_table_agent_set_log(table, "syslog");
	else if (logfile && fstat(2, &a) == 0 && stat(logfile, &b) == 0 &&
		 a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		rl_table_agent_set_log(table, logfile);
	else if (getenv("JOURNAL_STREAM"))
		rl_table_agent_set_log(table, "the journal (its stderr)");
	else
		rl_table_agent_set_log(table, "stderr");
}

/*
 * Start again on the changed configuration: the same program, in the
 * foreground now (it is detached already: same session, same log), with
 * the file named. The segment lock went with close(); the heartbeat is
 * only milliseconds old when the new image takes it over, so no shim
 * starts another agent meanwhile.
 */
static void reexec(char **argv, const char *path, const char *logfile,
		   int idle_exit)
{
	char *args[9] = { argv[0], (char *)"--foreground", (char *)"-c",
			  (char *)path };
	size_t n = 4;

	if (to_syslog)
		args[n++] = (char *)"--syslog";
	else if (logfile) { /* stderr is that file still: for status */
		args[n++] = (char *)"--log";
		args[n++] = (char *)logfile;
	}
	if (idle_exit)
		args[n++] = (char *)"--idle-exit";
	args[n] = NULL;

	execv("/proc/self/exe", args);
	rl_log(RL_LOG_ERROR, "msg=\"cannot restart\" err=\"%s\"",
	       strerror(errno));
	_exit(1);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "log", required_argument, NULL, 'l' },
		{ "syslog", no_argument, NULL, 's' },
		{ "idle-exit", no_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL, *logfile = NULL;
	struct rl_config *cfg;
	struct rl_table *table;
	struct rl_agent agent;
	struct rl_err err;
	char q[RL_ERR_MAX];
	int foreground = 0, opt, lock, rc, kept = 0, idle_exit = 0;
	char *text = NULL, why[96];
	size_t text_len = 0;
	uint64_t next, last_sweep = 0, stamp, idle_since = 0, idle_ns = 0;
	int restart = 0, idled = 0;
	struct sigaction sa;

	while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'f': foreground = 1; break;
		case 'l': logfile = optarg; break;
		case 's': to_syslog = 1; break;
		case 'i': idle_exit = 1; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("rlshimd %s\n", RLSHIM_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	/* The shim passes its own environment minus LD_PRELOAD; an agent
	 * started by hand finds the configuration as the shim does. */
	if (!path)
		path = rl_config_path();
	stamp = rl_config_stamp(path); /* before: an edit meanwhile is seen */
	rc = path ? rl_kept_config(path, &cfg, &text, &text_len, &kept, &err)
		  : rl_config_default(&cfg);
	if (rc) {
		fprintf(stderr, "rlshimd: %s\n", err.msg);
		return 1;
	}
	rl_config_text_free(text); /* the shims keep the text in force */
	if (to_syslog)
		cfg->log = RL_LOG_SYSLOG;
	rl_log_setup(cfg->log, cfg->log_level, "rlshimd");
	if (kept)
		rl_log(RL_LOG_ERROR, "msg=\"configuration refused, using the one "
		       "in force on this host\" err=\"%s\"",
		       rl_log_quote(err.msg, q, sizeof(q)));
	rc = rl_table_open(cfg->shm, cfg->capacity, RL_TABLE_CREATE, &table,
			   &err);
	if (rc) {
		fprintf(stderr, "rlshimd: %s\n", err.msg);
		return 1;
	}
	lock = lock_segment(cfg->shm);
	if (lock == -1) {
		fprintf(stderr, "rlshimd: another agent (pid %llu) already "
			"serves segment /dev/shm/%s\n",
			(unsigned long long)rl_table_agent_pid(table),
			cfg->shm);
		return 1;
	}
	if (lock < 0) {
		fprintf(stderr, "rlshimd: cannot lock /dev/shm/%s: %s\n", cfg->shm,
			strerror(errno));
		return 1;
	}
	if (!foreground && detach(logfile, cfg->log, cfg->log_level)) {
		fprintf(stderr, "rlshimd: cannot detach: %s\n", strerror(errno));
		return 1;
	}
	/* A beat now: connecting to the store and loading XDP take time, and
	 * the shims must not take the agent for dead meanwhile (nor start
	 * another, after a restart on a new configuration). */
	rl_table_agent_beat(table, rl_time_now_ns());
	if (rl_agent_init(&agent, cfg, table, &err)) {
		rl_log(RL_LOG_ERROR, "msg=\"cannot start\" err=\"%s\"",
		       rl_log_quote(err.msg, q, sizeof(q)));
		return 1;
	}
	rl_agent_xdp_init(&agent);
	agent.strict = rl_agent_strict_start(&agent);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	say_where(table, cfg, logfile);
	rl_table_agent_set_pid(table, (uint64_t)getpid());
	rl_log(RL_LOG_INFO, "msg=\"agent started\" config=\"%s\" shm=%s redis=%s "
	       "xdp=%s sync_interval=%llums",
	       rl_log_quote(path ? path : "built-in default", q, sizeof(q)),
	       cfg->shm, cfg->redis ? "on" : "off", agent.xdp ? "on" : "off",
	       (unsigned long long)(cfg->sync_interval_ns / RL_NS_PER_MS));
	rl_log_config_warnings(cfg);

	/* A round each sync_interval: the heartbeat, the store's sync and,
	 * when the store answered, the refusals counted across hosts and the
	 * bans through it, then XDP; each second the table's sweep and the
	 * configuration file. */
	next = rl_time_now_ns();
	if (idle_exit)
		idle_ns = idle_exit_ns();
	while (!stopping) {
		uint64_t now = rl_time_now_ns();
		int up;

		heartbeat(&agent, now);
		up = rl_agent_sync(&agent, now);
		rl_agent_fails_sync(&agent, up, now);
		if (up)
			rl_agent_bans_sync(&agent, now);
		rl_agent_xdp_round(&agent, now);
		if (now - last_sweep >= SWEEP_NS) {
			rl_table_sweep(table, now);
			last_sweep = now;
			if (config_changed(path, cfg, table, &stamp)) {
				restart = 1;
				break;
			}
			if (idle_exit && idle(lock, now, &idle_since, idle_ns)) {
				idled = 1;
				break;
			}
		}
		next = wait_round(next, agent.interval_ns);
	}
	/* Decisions stop counting for a sync that will not come (a restart
	 * syncs again within milliseconds: they go on counting). */
	if (!restart)
		rl_table_agent_flags_change(table, 0, RL_AGENT_SYNC);
	rl_agent_strict_stop(agent.strict);
	rl_agent_xdp_free(&agent);
	rl_table_agent_set_pid(table, 0);
	if (idled) {
		char d[32];

		/* No server to tell that the agent is gone: a heartbeat of 0
		 * (none started) has the next server start one at its first
		 * accept, not only once this beat is stale. */
		rl_table_agent_beat(table, 0);
		rl_time_format_duration(d, sizeof(d), idle_ns);
		snprintf(why, sizeof(why), " reason=\"no server has used the "
			 "segment for %s\"", d);
	} else if (stopping) {
		snprintf(why, sizeof(why), " reason=%s",
			 stopping == SIGINT ? "SIGINT" : "SIGTERM");
	} else {
		why[0] = '\0';
	}
	rl_log(RL_LOG_INFO, "msg=\"agent %s\"%s rounds=%llu",
	       restart ? "restarting on the changed configuration" : "stopped",
	       why, (unsigned long long)agent.rounds);
	rl_agent_free(&agent);
	rl_table_close(table);
	rl_config_free(cfg);
	close(lock);
	if (restart && !stopping)
		reexec(argv, path, logfile, idle_exit);
	return 0;
}
