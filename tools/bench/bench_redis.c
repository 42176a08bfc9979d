/* SPDX-License-Identifier: MIT */
/*
 * bench_redis.c - Redis commands per decision and the latency a decision
 * gains, for a global limit kept in Redis, against the per-request design,
 * in one run against one redis-server.
 *
 *   bench_redis [-t SECONDS] [-a RLSHIMD] [-s REDIS_SERVER]
 *
 * It starts its own redis-server (a free loopback port, --save '',
 * --appendonly no, a temporary directory) and, for each offered rate R in
 * 1,000, 10,000 and 50,000 decisions/s and each number of active keys K in
 * 100 and 10,000, runs 1 s of warm-up and SECONDS (8) measured of:
 *
 *   (a) rlshim: a fresh rlshimd (--foreground, [redis] sync_interval 50ms,
 *       one GCRA rule of 1,000,000/s that never refuses) owns the segment;
 *       this process attaches to it, registers the same rule and decides
 *       with rl_table_take(), one thread paced at R/s (every 1 ms, R/1000
 *       decisions), each for a key drawn uniformly from K IPv6 /64 keys.
 *       The added latency is the time of rl_table_take() itself: the hot
 *       path never waits on Redis. Each key is decided once before the
 *       warm-up, as a long-running host knows its keys: a key's first
 *       decision in a fresh segment takes page faults (tmpfs pages are
 *       allocated on first touch), reported apart.
 *   (b) per request: one synchronous EVALSHA of the classic fixed-window
 *       script (INCR fw:{key}:{second}, PEXPIRE 1000 on the first) per
 *       decision, from T = ceil(R / 5000) threads with a connection each,
 *       each paced at R/T the same way (a thread that falls behind catches
 *       up back to back, so an unreachable R shows as a lower achieved
 *       rate). The added latency is the EVALSHA round trip.
 *   (c) sync = strict: a fresh rlshimd with the same rule `sync = strict`
 *       decides each ask in Redis (one EVALSHA per ask, the asks of a
 *       wake pipelined, on its own connection) and syncs as (a); this
 *       process calls rl_table_take_strict() with a deadline of now +
 *       100 ms ([redis] timeout's default) from T threads paced as (b)'s.
 *       The added latency is that call: the ask, the agent's round trip,
 *       the wake. Each key is decided once before the warm-up. Then one
 *       more row, 10,000/s over 100 keys of a rule of 10/m, burst 10: every
 *       key is out of budget after its burst, and its refusals are made
 *       from the state Redis gave back, without asking it.
 *
 * Latencies are sampled (every 10th decision) between two clock_gettime()
 * calls, whose own cost is printed with the results.
 *
 * Counting Redis commands: only those the design sends, not the ones its
 * scripts run inside Redis. INFO's total_commands_processed does not do
 * that: checked at start up, an EVALSHA whose script makes 3 redis.call()s
 * moves it by 4 (it is printed, as "incl. script calls", for reference).
 * Neither does commandstats alone, as the agent sends some commands
 * (ZREMRANGEBYSCORE) both at top level and from a script. So:
 *   (a) the slow log with slowlog-log-slower-than 0 records every command
 *       with the address of its client, and the commands scripts run with
 *       that of the script pseudo-client ("?:0" and the like): the commands
 *       of the agent's connection are counted from it (SLOWLOG RESET at the
 *       start of the window, SLOWLOG GET -1 at its end, slowlog-max-len
 *       1,000,000, checked not to overflow), by name;
 *   (b) the design sends EVALSHA only and a script cannot run EVALSHA, so
 *       commandstats' evalsha calls over the window are its commands.
 *   (c) the slow log would overflow (each strict call also logs its
 *       script's 4 commands), so from commandstats: see account_strict().
 * The agent's EVALSHAs from the slow log are checked against commandstats
 * as well. The agent, Redis and this process share the machine's CPUs.
 *
 * Every exit path (errors, SIGINT, SIGTERM) stops the agent and Redis and
 * removes the segment and the temporary directory; both children also get
 * SIGKILL if this process dies first (PR_SET_PDEATHSIG).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "addr.h"
#include "table.h"

#define WARMUP_S 1
#define MEASURE_S 8
#define SAMPLE_EVERY 10
#define PER_THREAD_RATE 5000     /* (b): decisions/s one connection is given */
#define SLOWLOG_LEN 1000000
#define KEY_LEN 17               /* family + 16 bytes: an IPv6 client, /64 */
#define CTL_TIMEOUT_S 5
#define STRICT_TIMEOUT_NS 100000000ull /* (c): [redis] timeout's default */
#define LOW_RATE 10000           /* (c), denied: offered/s of the flood */
#define LOW_KEYS 100             /*      over these keys */

static const unsigned rates[] = { 1000, 10000, 50000 };
static const unsigned key_counts[] = { 100, 10000 };
static unsigned strict_threads; /* -T: (c)'s threads, else as (b)'s */

/* The classic per-request limiter: a fixed window of 1 s per key. */
static const char fw_lua[] =
	"local c = redis.call('INCR', KEYS[1]) "
	"if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end "
	"return c";

/* ---- the process's children and files, for every exit path ---------------- */

static volatile sig_atomic_t interrupted;
static pid_t redis_pid = -1;
static pid_t agent_pid = -1;
static char tmpdir[64];
static char shm_name[64];

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleep `ns`, or less if interrupted. Returns -EINTR then. */
static int nap(uint64_t ns)
{
	uint64_t end = mono_ns() + ns;

	while (!interrupted) {
		uint64_t now = mono_ns();
		struct timespec ts;

		if (now >= end)
			return 0;
		ns = end - now < 20000000ull ? end - now : 20000000ull;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)ns;
		nanosleep(&ts, NULL);
	}
	return -EINTR;
}

/* Start `argv` with stdout and stderr appended to `out`. */
static pid_t spawn(char *const argv[], const char *out)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0600);
		int null = open("/dev/null", O_RDONLY);
		sigset_t none;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (fd < 0 || null < 0)
			_exit(127);
		dup2(null, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		/* not our Redis connections, nor the segment */
		close_range(3, ~0u, 0);
		execvp(argv[0], argv);
		dprintf(2, "bench_redis: cannot run %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	return pid;
}

/* SIGTERM, then SIGKILL after 5 s. */
static void stop_child(pid_t *pid)
{
	uint64_t deadline;

	if (*pid <= 0)
		return;
	kill(*pid, SIGTERM);
	deadline = mono_ns() + 5000000000ull;
	while (waitpid(*pid, NULL, WNOHANG) == 0) {
		if (mono_ns() > deadline) {
			kill(*pid, SIGKILL);
			waitpid(*pid, NULL, 0);
			break;
		}
		usleep(5000);
	}
	*pid = -1;
}

/* Still running? A child found dead is reaped and forgotten. */
static int child_alive(pid_t *pid)
{
	if (*pid <= 0)
		return 0;
	if (waitpid(*pid, NULL, WNOHANG) == 0)
		return 1;
	*pid = -1;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void cleanup(void)
{
	stop_child(&agent_pid);
	stop_child(&redis_pid);
	if (shm_name[0])
		rl_table_unlink(shm_name);
	if (tmpdir[0])
		nftw(tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Show the end of a child's output file after a failure. */
static void show_log(const char *path)
{
	char line[512];
	FILE *f = fopen(path, "r");
	long size;

	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fseek(f, size > 2048 ? size - 2048 : 0, SEEK_SET);
	fprintf(stderr, "--- %s (end) ---\n", path);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
}

/* ---- Redis ---------------------------------------------------------------- */

static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int port = -1;

	if (fd < 0)
		return -1;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static redisContext *connect_redis(int port)
{
	struct timeval tv = { CTL_TIMEOUT_S, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

	if (!c)
		return NULL;
	if (c->err) {
		redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	return c;
}

/* A command whose reply must not be an error; NULL (said why) if it is. */
static redisReply *ask(redisContext *c, const char *fmt, ...)
{
	redisReply *r;
	va_list ap;

	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	if (!r) {
		fprintf(stderr, "bench_redis: redis: %s\n", c->errstr);
		return NULL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "bench_redis: redis: %s\n", r->str);
		freeReplyObject(r);
		return NULL;
	}
	return r;
}

static int ask_ok(redisContext *c, const char *fmt, const char *arg)
{
	redisReply *r = ask(c, fmt, arg);

	if (!r)
		return -EIO;
	freeReplyObject(r);
	return 0;
}

/* The value of `name:` in an INFO reply, or NULL. */
static const char *info_field(const char *text, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (strncmp(p, name, len) == 0 && p[len] == ':')
			return p + len + 1;
	return NULL;
}

static long long info_number(const char *text, const char *name)
{
	const char *v = info_field(text, name);

	return v ? strtoll(v, NULL, 10) : -1;
}

static double info_double(const char *text, const char *name)
{
	const char *v = info_field(text, name);

	return v ? strtod(v, NULL) : 0;
}

/* The calls of one command in INFO commandstats (0 if never called). */
static long long info_calls(const char *text, const char *cmd)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "cmdstat_%s:calls=", cmd);
	p = strstr(text, key);
	return p ? strtoll(p + strlen(key), NULL, 10) : 0;
}

/* INFO `sections` (space-separated: several in one call) into `out`. */
static int info(redisContext *c, const char *sections, char *out, size_t len)
{
	char buf[64];
	const char *argv[8] = { "INFO" };
	int argc = 1;
	redisReply *r;

	snprintf(buf, sizeof(buf), "%s", sections);
	for (char *save, *w = strtok_r(buf, " ", &save); w && argc < 8;
	     w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	r = redisCommandArgv(c, argc, argv, NULL);
	if (!r || r->type != REDIS_REPLY_STRING) {
		fprintf(stderr, "bench_redis: INFO %s: %s\n", sections,
			!r ? c->errstr :
			r->type == REDIS_REPLY_ERROR ? r->str : "?");
		if (r)
			freeReplyObject(r);
		return -EIO;
	}
	snprintf(out, len, "%s", r->str);
	freeReplyObject(r);
	return 0;
}

static int start_redis(const char *server, int *port, redisContext **ctl)
{
	char portarg[16], dir[96], log[128];
	char *argv[] = { (char *)server, (char *)"--port", portarg,
			 (char *)"--bind", (char *)"127.0.0.1",
			 (char *)"--save", (char *)"",
			 (char *)"--appendonly", (char *)"no",
			 (char *)"--dir", dir, (char *)"--logfile", log,
			 (char *)"--daemonize", (char *)"no", NULL };

	for (int attempt = 0; attempt < 3 && !interrupted; attempt++) {
		*port = free_port();
		if (*port < 0)
			return -EIO;
		snprintf(portarg, sizeof(portarg), "%d", *port);
		snprintf(dir, sizeof(dir), "%s", tmpdir);
		snprintf(log, sizeof(log), "%s/redis.log", tmpdir);
		redis_pid = spawn(argv, log);
		if (redis_pid < 0)
			return -EIO;
		for (int i = 0; i < 200 && child_alive(&redis_pid); i++) {
			redisReply *r;

			*ctl = connect_redis(*port);
			r = *ctl ? redisCommand(*ctl, "PING") : NULL;
			if (r && r->type == REDIS_REPLY_STATUS) {
				freeReplyObject(r);
				return 0;
			}
			if (r)
				freeReplyObject(r);
			if (*ctl)
				redisFree(*ctl);
			*ctl = NULL;
			if (nap(25000000ull))
				break;
		}
		stop_child(&redis_pid); /* the port was taken meanwhile? */
	}
	fprintf(stderr, "bench_redis: redis-server did not start\n");
	snprintf(log, sizeof(log), "%s/redis.log", tmpdir);
	show_log(log);
	return -EIO;
}

/*
 * Does total_commands_processed count what scripts run? Returns by how much
 * one EVALSHA of a script with 3 redis.call()s moves it.
 */
static long long nested_check(redisContext *c)
{
	char text[8192];
	long long before, after;
	redisReply *r = ask(c, "SCRIPT LOAD %s",
			    "redis.call('INCR', KEYS[1]) "
			    "redis.call('INCR', KEYS[1]) "
			    "return redis.call('GET', KEYS[1])");
	char sha[41];

	if (!r)
		return -1;
	snprintf(sha, sizeof(sha), "%s", r->str);
	freeReplyObject(r);
	if (info(c, "stats", text, sizeof(text)))
		return -1;
	before = info_number(text, "total_commands_processed");
	r = ask(c, "EVALSHA %s 1 bench:nested", sha);
	if (!r)
		return -1;
	freeReplyObject(r);
	if (info(c, "stats", text, sizeof(text)))
		return -1;
	after = info_number(text, "total_commands_processed");
	/* minus the first INFO, counted once it was done */
	return after - before - 1;
}

/* ---- the load -------------------------------------------------------------- */

enum design { DESIGN_RLSHIM, DESIGN_EVALSHA, DESIGN_STRICT };
enum phase { PHASE_WARMUP, PHASE_MEASURE, PHASE_STOP };

struct key {
	uint8_t bin[KEY_LEN];
	char text[INET6_ADDRSTRLEN];
};

struct load;

struct worker {
	struct load *load;
	pthread_t thread;
	unsigned rate;          /* decisions/s of this thread */
	uint64_t rng;
	redisContext *c;        /* (b) */
	uint64_t decisions;     /* in the measured window */
	uint64_t denied;
	uint64_t fallbacks;     /* (c): -EAGAIN, decided here */
	uint64_t *samples;      /* latencies (ns) */
	size_t nsamples, cap;
	int failed;
	char err[160];
};

struct load {
	enum design design;
	_Atomic int phase;
	const struct key *keys;
	unsigned nkeys;
	struct rl_table *table;  /* (a), (c) */
	unsigned rule;
	char sha[41];            /* (b) */
	unsigned nworkers;
	struct worker *w;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* One decision; its latency in *ns. Returns -1 when (b)'s call failed. */
static int decide(struct worker *w, const struct key *k, uint64_t *ns)
{
	struct load *l = w->load;
	uint64_t t0, t1;

	if (l->design == DESIGN_RLSHIM) {
		struct rl_result res;

		t0 = mono_ns();
		rl_table_take(l->table, l->rule, k->bin, KEY_LEN, 1,
			      rl_time_now_ns(), &res);
		t1 = mono_ns();
		if (!res.allowed)
			w->denied++;
	} else if (l->design == DESIGN_STRICT) {
		struct rl_result res;
		uint64_t now;
		int rc;

		t0 = mono_ns();
		now = rl_time_now_ns();
		rc = rl_table_take_strict(l->table, l->rule, k->bin, KEY_LEN, 1,
					  now, now + STRICT_TIMEOUT_NS, &res,
					  NULL);
		t1 = mono_ns();
		if (rc == -EAGAIN)
			w->fallbacks++;
		if (!res.allowed)
			w->denied++;
	} else {
		char key[96];
		const char *argv[5] = { "EVALSHA", l->sha, "1", key, "1000" };
		size_t lens[5];
		redisReply *r;

		lens[3] = (size_t)snprintf(key, sizeof(key), "fw:{%s}:%lld",
					   k->text, (long long)time(NULL));
		for (int i = 0; i < 5; i++)
			if (i != 3)
				lens[i] = strlen(argv[i]);
		t0 = mono_ns();
		r = redisCommandArgv(w->c, 5, argv, lens);
		t1 = mono_ns();
		if (!r || r->type != REDIS_REPLY_INTEGER) {
			snprintf(w->err, sizeof(w->err), "EVALSHA: %s",
				 !r ? w->c->errstr :
				 r->type == REDIS_REPLY_ERROR ? r->str :
				 "bad reply");
			if (r)
				freeReplyObject(r);
			return -1;
		}
		freeReplyObject(r);
	}
	*ns = t1 - t0;
	return 0;
}

/* Every 1 ms, the decisions due by then: a thread late on its schedule
 * catches up without sleeping. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct load *l = w->load;
	uint64_t start = mono_ns(), done = 0, seq = 0;
	int measuring = 0;

	for (uint64_t tick = 1;; tick++) {
		int phase = atomic_load(&l->phase);
		uint64_t due = tick * w->rate / 1000, next;
		struct timespec ts;

		if (phase == PHASE_STOP)
			break;
		for (; done < due; done++) {
			uint64_t ns, i = rng_next(&w->rng) % l->nkeys;
			const struct key *k = &l->keys[i];

			if (phase == PHASE_MEASURE && !measuring) {
				/* the window's own, not the warm-up's */
				w->denied = w->fallbacks = 0;
				measuring = 1;
			}
			if (decide(w, k, &ns)) {
				w->failed = 1;
				return NULL;
			}
			if (phase != PHASE_MEASURE)
				continue;
			w->decisions++;
			if (++seq % SAMPLE_EVERY == 0 && w->nsamples < w->cap)
				w->samples[w->nsamples++] = ns;
		}
		next = start + tick * 1000000ull;
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	return NULL;
}

/* What one cell measured. */
struct stats {
	double seconds;
	double decisions_s;
	double commands_s;       /* sent by the design, top level */
	double all_commands_s;   /* incl. what scripts ran */
	double redis_cpu;        /* Redis's CPU time / window */
	uint64_t p50_ns, p99_ns;
	uint64_t denied;
	uint64_t fallbacks;      /* (c): decided here, not in Redis */
	double strict_s;         /* (c): the strict connection's EVALSHAs */
	double rounds_s;         /* (a): the agent's sync rounds */
	uint64_t first_p50_ns;   /* (a): a key's first decision in the */
	uint64_t first_p99_ns;   /*      fresh segment (priming) */
	char by_name[256];       /* (a): commands per round, by name */
};

/* Counters read around the window; see the header comment. */
struct snapshot {
	long long total;    /* total_commands_processed */
	long long evalsha;  /* commandstats */
	double cpu_s;       /* Redis's user + system CPU time */
	uint64_t syncs;     /* (a), (c): agent_syncs */
	/* (c): the commands only the agent sends at top level, and the
	 * ones only its scripts run that tell their calls apart */
	long long get, zrange, zrem, zcard, hget;
};

/* One INFO for all the counters: what this process sends in the window is
 * the INFO of snap_before(), counted once it is done. */
static int snap_info(redisContext *c, struct snapshot *s)
{
	static char text[65536];

	if (info(c, "stats cpu commandstats", text, sizeof(text)))
		return -EIO;
	s->total = info_number(text, "total_commands_processed");
	s->evalsha = info_calls(text, "evalsha");
	s->get = info_calls(text, "get");
	s->zrange = info_calls(text, "zrangebyscore");
	s->zrem = info_calls(text, "zremrangebyscore");
	s->zcard = info_calls(text, "zcard");
	s->hget = info_calls(text, "hget");
	s->cpu_s = info_double(text, "used_cpu_sys") +
		   info_double(text, "used_cpu_user");
	return 0;
}

static int snap_before(redisContext *c, struct load *l, struct snapshot *s)
{
	if (l->design == DESIGN_RLSHIM && ask_ok(c, "SLOWLOG RESET", NULL))
		return -EIO;
	if (l->design != DESIGN_EVALSHA)
		s->syncs = rl_table_counted(l->table, RL_COUNT_AGENT_SYNCS);
	return snap_info(c, s);
}

static int snap_after(redisContext *c, struct load *l, struct snapshot *s)
{
	if (l->design != DESIGN_EVALSHA)
		s->syncs = rl_table_counted(l->table, RL_COUNT_AGENT_SYNCS);
	return snap_info(c, s);
}

struct name_count {
	char name[32];
	uint64_t n;
};

/*
 * The agent's commands in the slow log: every entry whose client is
 * neither this process (`self`) nor a script's pseudo-client, which has
 * no address ("?:0"). Counts them by name into `names`.
 */
static long long agent_commands(redisContext *c, const char *self,
				struct name_count *names, unsigned *nnames,
				unsigned max)
{
	redisReply *r = ask(c, "SLOWLOG GET -1");
	long long n = 0;

	if (!r)
		return -1;
	if (r->type != REDIS_REPLY_ARRAY || r->elements >= SLOWLOG_LEN) {
		fprintf(stderr, "bench_redis: the slow log overflowed\n");
		freeReplyObject(r);
		return -1;
	}
	for (size_t i = 0; i < r->elements; i++) {
		redisReply *e = r->element[i], *argv, *addr;
		char name[32];
		unsigned j;

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 5)
			continue;
		argv = e->element[3];
		addr = e->element[4];
		if (argv->type != REDIS_REPLY_ARRAY || !argv->elements ||
		    addr->type != REDIS_REPLY_STRING || addr->str[0] == '?' ||
		    strcmp(addr->str, self) == 0)
			continue;
		n++;
		snprintf(name, sizeof(name), "%s", argv->element[0]->str);
		for (char *p = name; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		for (j = 0; j < *nnames; j++)
			if (strcmp(names[j].name, name) == 0)
				break;
		if (j == *nnames) {
			if (*nnames == max)
				continue;
			memcpy(names[j].name, name, sizeof(name));
			names[j].n = 0;
			(*nnames)++;
		}
		names[j].n++;
	}
	freeReplyObject(r);
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_count(const void *a, const void *b)
{
	const struct name_count *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : strcmp(x->name, y->name);
}

/* The address Redis sees for connection `c`, as the slow log shows it. */
static void self_addr(redisContext *c, char *out, size_t len)
{
	struct sockaddr_in sa = { 0 };
	socklen_t sl = sizeof(sa);
	char ip[INET_ADDRSTRLEN] = "?";

	if (getsockname(c->fd, (struct sockaddr *)&sa, &sl) == 0)
		inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
	snprintf(out, len, "%s:%d", ip, ntohs(sa.sin_port));
}

/* (a): the agent's commands over the window, from the slow log. */
static int account_agent(redisContext *ctl, const char *self,
			 const struct snapshot *s0, const struct snapshot *s1,
			 struct stats *st)
{
	struct name_count names[16];
	unsigned nnames = 0;
	uint64_t rounds = s1->syncs - s0->syncs;
	long long n = agent_commands(ctl, self, names, &nnames, 16);
	long long evalsha = 0, seen = s1->evalsha - s0->evalsha;
	size_t o = 0;

	if (n < 0)
		return -EIO;
	st->commands_s = (double)n / st->seconds;
	st->rounds_s = (double)rounds / st->seconds;
	qsort(names, nnames, sizeof(names[0]), cmp_count);
	for (unsigned j = 0; j < nnames && o < sizeof(st->by_name); j++) {
		if (strcmp(names[j].name, "evalsha") == 0)
			evalsha = (long long)names[j].n;
		double per = rounds ? (double)names[j].n / (double)rounds : 0;

		o += (size_t)snprintf(st->by_name + o, sizeof(st->by_name) - o,
				      "%s%s %.2f", j ? ", " : "", names[j].name,
				      per);
	}
	/* the two are read a command apart: a round may fall in between */
	if (evalsha < seen * 0.99 - 1 || evalsha > seen * 1.01 + 1)
		fprintf(stderr, "bench_redis: note: %lld agent EVALSHAs in the "
			"slow log, %lld in commandstats\n", evalsha, seen);
	return 0;
}

/* (b): its EVALSHAs over the window, from commandstats. */
static void account_evalsha(const struct snapshot *s0,
			    const struct snapshot *s1, uint64_t decisions,
			    struct stats *st)
{
	double seen = (double)(s1->evalsha - s0->evalsha);
	double made = (double)decisions;

	st->commands_s = seen / st->seconds;
	/* the counters' window is a few ms wider than the workers' */
	if (seen < made * 0.995 || seen > made * 1.005)
		fprintf(stderr, "bench_redis: note: %.0f EVALSHAs in "
			"commandstats for %.0f calls made\n", seen, made);
}

/*
 * (c): the agent's commands over the window, from commandstats (the slow
 * log would overflow: it also records the 4 calls of each strict script).
 * Top level, the agent sends EVALSHA (both connections), GET (the epoch),
 * ZRANGEBYSCORE and ZREMRANGEBYSCORE (the bans), and its scripts run none
 * of them but ZREMRANGEBYSCORE, once per hosts script, which is the one
 * script that runs ZCARD (once). The strict script is the one that runs
 * HGET, once per call: its calls are the strict connection's EVALSHAs.
 */
static void account_strict(const struct snapshot *s0,
			   const struct snapshot *s1, struct stats *st)
{
	long long n = (s1->evalsha - s0->evalsha) + (s1->get - s0->get) +
		      (s1->zrange - s0->zrange) +
		      (s1->zrem - s0->zrem) - (s1->zcard - s0->zcard);

	st->commands_s = (double)n / st->seconds;
	st->strict_s = (double)(s1->hget - s0->hget) / st->seconds;
	st->rounds_s = (double)(s1->syncs - s0->syncs) / st->seconds;
}

/* The workers' latency samples, merged: p50 and p99. */
static int percentiles(const struct load *l, struct stats *st)
{
	size_t n = 0;
	uint64_t *all;

	for (unsigned i = 0; i < l->nworkers; i++)
		n += l->w[i].nsamples;
	if (!n)
		return 0;
	all = malloc(n * sizeof(*all));
	if (!all)
		return -ENOMEM;
	n = 0;
	for (unsigned i = 0; i < l->nworkers; i++) {
		memcpy(all + n, l->w[i].samples,
		       l->w[i].nsamples * sizeof(*all));
		n += l->w[i].nsamples;
	}
	qsort(all, n, sizeof(*all), cmp_u64);
	st->p50_ns = all[n / 2];
	st->p99_ns = all[n * 99 / 100];
	free(all);
	return 0;
}

/*
 * Run the workers of `l` (set up by the caller) for the warm-up and the
 * window, and read the counters around the window.
 */
static int run_load(struct load *l, redisContext *ctl, unsigned measure_s,
		    struct stats *st)
{
	struct snapshot s0 = { 0 }, s1 = { 0 };
	uint64_t t0 = 0, t1 = 0, decisions = 0;
	unsigned started = 0;
	sigset_t block, old;
	char self[64];
	int rc = -EIO;

	self_addr(ctl, self, sizeof(self));
	atomic_store(&l->phase, PHASE_WARMUP);
	/* the signals are this thread's to see */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (; started < l->nworkers; started++)
		if (pthread_create(&l->w[started].thread, NULL, worker_main,
				   &l->w[started]))
			break;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (started < l->nworkers) {
		fprintf(stderr, "bench_redis: cannot start a thread\n");
		goto stop;
	}
	if (nap(WARMUP_S * 1000000000ull) || snap_before(ctl, l, &s0))
		goto stop;
	t0 = mono_ns();
	atomic_store(&l->phase, PHASE_MEASURE);
	if (nap(measure_s * 1000000000ull))
		goto stop;
	atomic_store(&l->phase, PHASE_STOP);
	t1 = mono_ns();
	if (snap_after(ctl, l, &s1))
		goto stop;
	rc = 0;
stop:
	atomic_store(&l->phase, PHASE_STOP);
	for (unsigned i = 0; i < started; i++)
		pthread_join(l->w[i].thread, NULL);
	for (unsigned i = 0; i < l->nworkers; i++) {
		if (l->w[i].failed) {
			fprintf(stderr, "bench_redis: worker %u: %s\n", i,
				l->w[i].err);
			rc = -EIO;
		}
		decisions += l->w[i].decisions;
		st->denied += l->w[i].denied;
		st->fallbacks += l->w[i].fallbacks;
	}
	if (rc)
		return interrupted ? -EINTR : rc;

	st->seconds = (double)(t1 - t0) / 1e9;
	st->decisions_s = (double)decisions / st->seconds;
	/* minus the INFO that closed snap_before() */
	st->all_commands_s = (double)(s1.total - s0.total - 1) / st->seconds;
	st->redis_cpu = (s1.cpu_s - s0.cpu_s) / st->seconds;
	if (l->design == DESIGN_RLSHIM) {
		if (account_agent(ctl, self, &s0, &s1, st))
			return -EIO;
	} else if (l->design == DESIGN_STRICT) {
		account_strict(&s0, &s1, st);
	} else {
		account_evalsha(&s0, &s1, decisions, st);
	}
	return percentiles(l, st);
}

/* Workers for a rate, each its share and a sample buffer. */
static int workers_new(struct load *l, unsigned rate, unsigned n,
		       unsigned measure_s)
{
	l->w = calloc(n, sizeof(*l->w));
	if (!l->w)
		return -ENOMEM;
	l->nworkers = n;
	for (unsigned i = 0; i < n; i++) {
		struct worker *w = &l->w[i];

		w->load = l;
		w->rate = rate / n + (i < rate % n);
		w->rng = 0x9E3779B97F4A7C15ull * (i + 1) ^ (uint64_t)rate;
		w->cap = (size_t)w->rate * measure_s / SAMPLE_EVERY + 1024;
		w->samples = malloc(w->cap * sizeof(*w->samples));
		if (!w->samples)
			return -ENOMEM;
	}
	return 0;
}

static void workers_free(struct load *l)
{
	for (unsigned i = 0; l->w && i < l->nworkers; i++) {
		if (l->w[i].c)
			redisFree(l->w[i].c);
		free(l->w[i].samples);
	}
	free(l->w);
	l->w = NULL;
	l->nworkers = 0;
}

/* ---- the two designs ----------------------------------------------------------- */

/* (a)'s rule, or with `strict` (c)'s: the same rule and the flood's. */
static int write_config(const char *path, int port, int strict)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fprintf(f, "[global]\nshm = %s\ncapacity = 65536\n"
		   "[redis]\nurl = redis://127.0.0.1:%d/0\n"
		   "sync_interval = 50ms\n"
		   "[limit:bench]\nmatch = *\nrate = 1000000/s\n%s",
		shm_name, port, strict ? "sync = strict\n" : "");
	if (strict)
		fprintf(f, "[limit:low]\nmatch = *\nrate = 10/m\n"
			   "burst = 10\nsync = strict\n");
	return fclose(f) ? -EIO : 0;
}

/* The rules as the configurations say; (c) uses both. */
static const struct rl_rule_def rule_defs[] = {
	{ .name = "bench", .algorithm = RL_ALGO_GCRA,
	  .rate = { 1000000000ull, 1000000, 1000000 } },
	{ .name = "low", .algorithm = RL_ALGO_GCRA,
	  .rate = { 60000000000ull, 10, 10 } },
};

/*
 * Start rlshimd and attach to its segment once it syncs with Redis (and,
 * for `nrules` 2, the strict configuration, answers asks): rules[i] is
 * the id of rule_defs[i].
 */
static int start_agent(const char *agent, const char *conf,
		       struct rl_table **t, unsigned *rules, unsigned nrules)
{
	uint64_t want = RL_AGENT_SYNC | (nrules > 1 ? RL_AGENT_STRICT : 0);
	char log[128];
	char *argv[] = { (char *)agent, (char *)"-c", (char *)conf,
			 (char *)"--foreground", NULL };
	struct rl_table_stats ts;
	uint64_t deadline = mono_ns() + 10000000000ull;

	snprintf(log, sizeof(log), "%s/agent.log", tmpdir);
	agent_pid = spawn(argv, log);
	if (agent_pid < 0)
		return -EIO;
	*t = NULL;
	while (!interrupted && mono_ns() < deadline &&
	       child_alive(&agent_pid)) {
		struct rl_table_agent h;

		if (!*t && rl_table_open(shm_name, 0, 0, t, NULL))
			*t = NULL;
		if (*t)
			rl_table_agent_read(*t, &h);
		if (*t && h.heartbeat_ns && (h.flags & want) == want &&
		    !(h.flags & RL_AGENT_STORE_DOWN) && h.syncs > 0)
			break;
		nap(10000000ull);
	}
	if (!*t || !child_alive(&agent_pid) || mono_ns() >= deadline ||
	    interrupted) {
		if (!interrupted) {
			fprintf(stderr, "bench_redis: rlshimd did not sync\n");
			show_log(log);
		}
		return interrupted ? -EINTR : -EIO;
	}
	for (unsigned i = 0; i < nrules; i++)
		if (rl_table_rule(*t, &rule_defs[i], &rules[i]))
			return -EIO;
	if (rl_table_stats(*t, rl_time_now_ns(), &ts) || ts.rules != nrules) {
		fprintf(stderr, "bench_redis: the rules are not the agent's\n");
		return -EIO;
	}
	return 0;
}

/*
 * One decision for each key, back to back, before the warm-up: the window
 * then sees K keys the segment knows, as a long-running host does. A key's
 * first decision in a fresh segment also takes the page faults of the
 * slots it touches first; their cost is kept apart, in st->first_*.
 */
static int prime(struct rl_table *t, unsigned rule, const struct key *keys,
		 unsigned nkeys, int strict, struct stats *st)
{
	uint64_t *ns = malloc(nkeys * sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (unsigned i = 0; i < nkeys; i++) {
		struct rl_result res;
		uint64_t t0 = mono_ns();

		uint64_t now = rl_time_now_ns();

		if (strict)
			rl_table_take_strict(t, rule, keys[i].bin, KEY_LEN, 1,
					     now, now + STRICT_TIMEOUT_NS, &res,
					     NULL);
		else
			rl_table_take(t, rule, keys[i].bin, KEY_LEN, 1, now,
				      &res);
		ns[i] = mono_ns() - t0;
	}
	qsort(ns, nkeys, sizeof(*ns), cmp_u64);
	st->first_p50_ns = ns[nkeys / 2];
	st->first_p99_ns = ns[(size_t)nkeys * 99 / 100];
	free(ns);
	return 0;
}

static int run_rlshim(const char *agent, const char *conf, redisContext *ctl,
		      const struct key *keys, unsigned nkeys, unsigned rate,
		      unsigned measure_s, struct stats *st)
{
	struct load l = { .design = DESIGN_RLSHIM, .keys = keys,
			  .nkeys = nkeys };
	char len[16];
	int rc;

	snprintf(len, sizeof(len), "%d", SLOWLOG_LEN);
	if (ask_ok(ctl, "CONFIG SET slowlog-max-len %s", len) ||
	    ask_ok(ctl, "CONFIG SET slowlog-log-slower-than %s", "0"))
		return -EIO;
	rc = start_agent(agent, conf, &l.table, &l.rule, 1);
	if (!rc)
		rc = prime(l.table, l.rule, keys, nkeys, 0, st);
	if (!rc)
		rc = workers_new(&l, rate, 1, measure_s);
	if (!rc)
		rc = run_load(&l, ctl, measure_s, st);
	workers_free(&l);
	stop_child(&agent_pid);
	rl_table_close(l.table);
	rl_table_unlink(shm_name);
	if (ask_ok(ctl, "CONFIG SET slowlog-log-slower-than %s", "10000") ||
	    ask_ok(ctl, "SLOWLOG RESET", NULL) || ask_ok(ctl, "FLUSHALL", NULL))
		rc = rc ? rc : -EIO;
	return rc;
}

/*
 * (c): rlshimd with the rules strict, this process deciding with
 * rl_table_take_strict() from T threads, as (b)'s, on rule_defs[which]:
 * 0, the rule that never refuses; 1, 10/m burst 10, where every key is
 * out of budget after its burst (the flood of denied requests).
 */
static int run_strict(const char *agent, const char *conf, redisContext *ctl,
		      const struct key *keys, unsigned nkeys, unsigned rate,
		      unsigned which, unsigned measure_s, struct stats *st,
		      unsigned *threads)
{
	struct load l = { .design = DESIGN_STRICT, .keys = keys,
			  .nkeys = nkeys };
	unsigned n = strict_threads ? strict_threads
				  : (rate + PER_THREAD_RATE - 1) / PER_THREAD_RATE;
	unsigned rules[2];
	int rc;

	*threads = n;
	rc = start_agent(agent, conf, &l.table, rules, 2);
	l.rule = rules[which];
	if (!rc)
		rc = prime(l.table, l.rule, keys, nkeys, 1, st);
	if (!rc)
		rc = workers_new(&l, rate, n, measure_s);
	if (!rc)
		rc = run_load(&l, ctl, measure_s, st);
	workers_free(&l);
	stop_child(&agent_pid);
	rl_table_close(l.table);
	rl_table_unlink(shm_name);
	if (ask_ok(ctl, "FLUSHALL", NULL))
		rc = rc ? rc : -EIO;
	return rc;
}

static int run_evalsha(int port, redisContext *ctl, const struct key *keys,
		       unsigned nkeys, unsigned rate, unsigned measure_s,
		       struct stats *st, unsigned *threads)
{
	struct load l = { .design = DESIGN_EVALSHA, .keys = keys,
			  .nkeys = nkeys };
	unsigned n = (rate + PER_THREAD_RATE - 1) / PER_THREAD_RATE;
	redisReply *r = ask(ctl, "SCRIPT LOAD %s", fw_lua);
	int rc;

	if (!r)
		return -EIO;
	snprintf(l.sha, sizeof(l.sha), "%s", r->str);
	freeReplyObject(r);
	*threads = n;
	rc = workers_new(&l, rate, n, measure_s);
	for (unsigned i = 0; !rc && i < n; i++) {
		l.w[i].c = connect_redis(port);
		if (!l.w[i].c)
			rc = -EIO;
	}
	if (!rc)
		rc = run_load(&l, ctl, measure_s, st);
	workers_free(&l);
	if (ask_ok(ctl, "FLUSHALL", NULL))
		rc = rc ? rc : -EIO;
	return rc;
}

/* ---- output ------------------------------------------------------------------ */

/* 12345.6 -> "12,346" */
static void fmt_count(double v, char *out, size_t len)
{
	char digits[32];
	size_t n, o = 0;

	snprintf(digits, sizeof(digits), "%.0f", v);
	n = strlen(digits);
	for (size_t i = 0; i < n && o + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = digits[i];
	}
	out[o] = '\0';
}

static void fmt_ns(uint64_t ns, char *out, size_t len)
{
	if (ns < 10000) {
		fmt_count((double)ns, out, len);
		snprintf(out + strlen(out), len - strlen(out), " ns");
	} else {
		snprintf(out, len, "%.1f µs", (double)ns / 1000.0);
	}
}

/* What a pair of clock reads costs here. */
static uint64_t timer_cost(void)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 100000; i++) {
		uint64_t t0 = mono_ns(), t1 = mono_ns();

		if (t1 - t0 < best)
			best = t1 - t0;
	}
	return best;
}

#define NRATES (sizeof(rates) / sizeof(rates[0]))
#define NKEYS (sizeof(key_counts) / sizeof(key_counts[0]))
#define NCELLS (NRATES * NKEYS)

struct cell {
	unsigned rate, keys;
	struct stats a, b, c;
	unsigned threads, cthreads;
};

/* One row of the main table: design `d` (0: rlshim, 1: EVALSHA, 2: strict). */
static void print_row(const struct cell *c, int d)
{
	const struct stats *s = d == 2 ? &c->c : d ? &c->b : &c->a;
	char design[48], off[32], keys[32], ach[64], cmds[32], all[32];
	char p50[32], p99[32];
	double per = s->decisions_s > 0 ? s->commands_s / s->decisions_s : 0;
	size_t o;

	if (d == 2)
		snprintf(design, sizeof(design), "(c) strict, T = %u",
			 c->cthreads);
	else if (d)
		snprintf(design, sizeof(design), "(b) EVALSHA, T = %u",
			 c->threads);
	else
		snprintf(design, sizeof(design), "(a) rlshim");
	fmt_count(c->rate, off, sizeof(off));
	fmt_count(c->keys, keys, sizeof(keys));
	fmt_count(s->decisions_s, ach, sizeof(ach));
	if (s->decisions_s < 0.98 * c->rate) {
		o = strlen(ach);
		snprintf(ach + o, sizeof(ach) - o, " (**%.0f%%, not reached**)",
			 100.0 * s->decisions_s / c->rate);
	}
	if (s->commands_s < 999.95)
		snprintf(cmds, sizeof(cmds), "%.1f", s->commands_s);
	else
		fmt_count(s->commands_s, cmds, sizeof(cmds));
	fmt_count(s->all_commands_s, all, sizeof(all));
	fmt_ns(s->p50_ns, p50, sizeof(p50));
	fmt_ns(s->p99_ns, p99, sizeof(p99));
	printf("| %s | %s | %s | %s | %s | %.4f | %s | %.1f%% | %s | %s |\n",
	       design, off, keys, ach, cmds, per, all, 100.0 * s->redis_cpu,
	       p50, p99);
}

/* One row of the agent's table. */
static void print_agent_row(const struct cell *c)
{
	char off[32], keys[32], p50[32], p99[32];
	double per_round = c->a.rounds_s > 0 ? c->a.commands_s / c->a.rounds_s
					     : 0;

	fmt_count(c->rate, off, sizeof(off));
	fmt_count(c->keys, keys, sizeof(keys));
	fmt_ns(c->a.first_p50_ns, p50, sizeof(p50));
	fmt_ns(c->a.first_p99_ns, p99, sizeof(p99));
	printf("| %s | %s | %.1f | %.2f | %s | %s | %s |\n", off, keys,
	       c->a.rounds_s, per_round, c->a.by_name, p50, p99);
}

static double ratio(uint64_t x, uint64_t y)
{
	return y ? (double)x / (double)y : 0;
}

/* One row of the strict table: (c) against (b) of the same cell. */
static void print_strict_row(const struct cell *c, const char *rule)
{
	const struct stats *s = &c->c;
	double d = s->decisions_s * s->seconds;
	double denied = d > 0 ? (double)s->denied / d : 0;
	char off[32], keys[32], ach[32], p50[32], p99[32], vs[64] = "-";

	fmt_count(c->rate, off, sizeof(off));
	fmt_count(c->keys, keys, sizeof(keys));
	fmt_count(s->decisions_s, ach, sizeof(ach));
	fmt_ns(s->p50_ns, p50, sizeof(p50));
	fmt_ns(s->p99_ns, p99, sizeof(p99));
	if (c->b.p50_ns)
		snprintf(vs, sizeof(vs), "%.2f, %.2f",
			 ratio(s->p50_ns, c->b.p50_ns),
			 ratio(s->p99_ns, c->b.p99_ns));
	printf("| %s | %s | %s | %u | %s | %.1f%% | %.4f | %.4f | %llu | "
	       "%.1f | %s | %s | %s |\n", rule, off, keys, c->cthreads, ach,
	       100.0 * denied,
	       s->decisions_s > 0 ? s->strict_s / s->decisions_s : 0,
	       s->decisions_s > 0 ? s->commands_s / s->decisions_s : 0,
	       (unsigned long long)s->fallbacks, s->rounds_s, p50, p99, vs);
}

static void print_results(const struct cell *cells, int argc, char **argv,
			  const struct cell *low, const char *version,
			  uint64_t timer, long long nested, unsigned measure_s)
{
	char date[64], cmdline[512];
	time_t now = time(NULL);
	size_t o = 0;

	strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
	for (int i = 0; i < argc && o < sizeof(cmdline); i++)
		o += (size_t)snprintf(cmdline + o, sizeof(cmdline) - o, "%s%s",
				      i ? " " : "", argv[i]);
	printf("Command: `%s`, %s; redis-server %s on loopback, %ld CPUs "
	       "shared by Redis, rlshimd and the load; per cell %d s warm-up, "
	       "%u s measured.\n\n", cmdline, date, version,
	       sysconf(_SC_NPROCESSORS_ONLN), WARMUP_S, measure_s);
	printf("(a) rlshim: rl_table_take() on the segment, rlshimd syncing "
	       "it with Redis every 50 ms. (b) per request: one EVALSHA of a "
	       "fixed-window script (INCR + PEXPIRE) per decision, T "
	       "synchronous connections. (c) sync = strict: "
	       "rl_table_take_strict() (deadline now + 100 ms) from T threads, "
	       "rlshimd deciding each ask in Redis (one EVALSHA, pipelined) "
	       "and syncing every 50 ms.\n\n");
	printf("| design | offered/s | active keys | achieved/s | "
	       "Redis commands/s | commands per decision | "
	       "incl. script calls, /s | Redis CPU | added latency p50 | "
	       "p99 |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (unsigned i = 0; i < NCELLS; i++) {
		print_row(&cells[i], 0);
		print_row(&cells[i], 1);
		print_row(&cells[i], 2);
	}
	printf("\n(c) in detail: the strict connection's EVALSHAs (the "
	       "strict script's HGET calls, one per call) and all the agent's "
	       "top-level commands (commandstats: EVALSHA, GET, ZRANGEBYSCORE, "
	       "ZREMRANGEBYSCORE less the hosts script's), per decision; "
	       "decisions Redis could not make in time (-EAGAIN: on_store_down "
	       "applies); the added latency against (b)'s in the same cell. "
	       "The last row: a rule of 10/m, burst 10, every key out of "
	       "budget after its burst, flooded for the whole window.\n\n");
	printf("| rule | offered/s | active keys | T | achieved/s | denied | "
	       "strict EVALSHAs per decision | agent commands per decision | "
	       "not decided in Redis | sync rounds/s | added latency p50 | "
	       "p99 | p50, p99 / (b)'s |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	       "---:|\n");
	for (unsigned i = 0; i < NCELLS; i++)
		print_strict_row(&cells[i], "1,000,000/s (never refuses)");
	print_strict_row(low, "10/m, burst 10 (denied flood)");
	printf("\n(a) in detail: rlshimd's sync rounds and the commands it "
	       "sent per round, by name (from the slow log); and, apart from "
	       "the window, each key's first decision in the fresh segment "
	       "(made once per key before the warm-up: it takes the page "
	       "faults of the slots it touches first).\n\n");
	printf("| offered/s | active keys | rounds/s | commands per round | "
	       "by command (per round) | first decision per key p50 | "
	       "p99 |\n");
	printf("|---:|---:|---:|---:|---|---:|---:|\n");
	for (unsigned i = 0; i < NCELLS; i++)
		print_agent_row(&cells[i]);
	printf("\nCommands are counted at top level only: an EVALSHA whose "
	       "script makes 3 redis.call()s moved total_commands_processed "
	       "by %lld here, so that counter (\"incl. script calls\") "
	       "includes what scripts run; (a) counts the agent's connection "
	       "in the slow log (slowlog-log-slower-than 0, on during (a) "
	       "only), (b) commandstats' evalsha, (c) commandstats (above). "
	       "Redis CPU: its user + "
	       "system time over the window, in %% of one core. Latency: "
	       "sampled every %d decisions between two clock_gettime() "
	       "calls, which alone take %llu ns here. (b) threads that fall "
	       "behind their schedule catch up back to back, so a rate the "
	       "machine cannot reach shows as less achieved (in bold when "
	       "below 98%%).", nested, SAMPLE_EVERY, (unsigned long long)timer);
	for (unsigned i = 0; i < NCELLS; i++)
		if (cells[i].a.denied || cells[i].b.denied || cells[i].c.denied)
			printf(" Denied decisions at %u/s over %u keys: %llu.",
			       cells[i].rate, cells[i].keys,
			       (unsigned long long)(cells[i].a.denied +
						    cells[i].b.denied +
						    cells[i].c.denied));
	printf("\n");
}

/* ---- main -------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: bench_redis [-t SECONDS] [-T THREADS] [-a RLSHIMD] "
		   "[-s REDIS_SERVER]\n"
		   "  -t SECONDS       measured per cell (default %d)\n"
		   "  -a RLSHIMD       the agent (default: rlshimd in the "
		   "parent of this binary's directory)\n"
		   "  -s REDIS_SERVER  (default: redis-server from PATH)\n"
		   "  -T THREADS       (c)'s caller threads at every rate "
		   "(default: as (b)'s)\n",
		   MEASURE_S);
}

/* ../rlshimd from this binary's directory (build/bench -> build). */
static void default_agent(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0) {
		snprintf(out, len, "build/rlshimd");
		return;
	}
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(out, len, "%s/../rlshimd", self);
}

/* Distinct /64s, as the shim keys IPv6 clients: 2001:db8:i:i::. */
static struct key *make_keys(unsigned n)
{
	static const uint8_t prefix[4] = { 0x20, 0x01, 0x0d, 0xb8 };
	struct key *keys = calloc(n, sizeof(*keys));

	for (unsigned i = 0; keys && i < n; i++) {
		keys[i].bin[0] = RL_AF_INET6;
		memcpy(keys[i].bin + 1, prefix, sizeof(prefix));
		keys[i].bin[5] = (uint8_t)(i >> 24);
		keys[i].bin[6] = (uint8_t)(i >> 16);
		keys[i].bin[7] = (uint8_t)(i >> 8);
		keys[i].bin[8] = (uint8_t)i;
		inet_ntop(AF_INET6, keys[i].bin + 1, keys[i].text,
			  sizeof(keys[i].text));
	}
	return keys;
}

static int run(int argc, char **argv, const char *agent, const char *server,
	       unsigned measure_s)
{
	struct cell cells[NCELLS], low = { .rate = LOW_RATE, .keys = LOW_KEYS };
	struct key *keys = NULL;
	redisContext *ctl = NULL;
	char conf[128], sconf[128], version[32] = "?", text[8192];
	const char *v;
	long long nested;
	uint64_t timer;
	int port, rc = -EIO;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/bench_redis.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		tmpdir[0] = '\0';
		perror("bench_redis: mkdtemp");
		return -EIO;
	}
	keys = make_keys(key_counts[NKEYS - 1]);
	if (!keys)
		return -ENOMEM;
	if (start_redis(server, &port, &ctl) || info(ctl, "server", text,
						       sizeof(text)))
		goto out;
	v = info_field(text, "redis_version");
	if (v)
		sscanf(v, "%31[^\r\n]", version);
	nested = nested_check(ctl);
	if (nested < 0 || ask_ok(ctl, "FLUSHALL", NULL))
		goto out;
	fprintf(stderr, "bench_redis: one EVALSHA with 3 redis.call()s moves "
		"total_commands_processed by %lld\n", nested);
	snprintf(shm_name, sizeof(shm_name), "rlshim-benchredis-%d",
		 (int)getpid());
	snprintf(conf, sizeof(conf), "%s/rlshim.conf", tmpdir);
	snprintf(sconf, sizeof(sconf), "%s/strict.conf", tmpdir);
	if (write_config(conf, port, 0) || write_config(sconf, port, 1))
		goto out;
	timer = timer_cost();

	memset(cells, 0, sizeof(cells));
	for (unsigned i = 0; i < NCELLS; i++) {
		struct cell *c = &cells[i];

		c->rate = rates[i / NKEYS];
		c->keys = key_counts[i % NKEYS];
		fprintf(stderr, "bench_redis: %u/s over %u keys: rlshim\n",
			c->rate, c->keys);
		rc = run_rlshim(agent, conf, ctl, keys, c->keys, c->rate,
				measure_s, &c->a);
		if (rc)
			goto out;
		fprintf(stderr, "bench_redis: %u/s over %u keys: EVALSHA\n",
			c->rate, c->keys);
		rc = run_evalsha(port, ctl, keys, c->keys, c->rate,
				 measure_s, &c->b, &c->threads);
		if (rc)
			goto out;
		fprintf(stderr, "bench_redis: %u/s over %u keys: strict\n",
			c->rate, c->keys);
		rc = run_strict(agent, sconf, ctl, keys, c->keys, c->rate, 0,
				measure_s, &c->c, &c->cthreads);
		if (rc)
			goto out;
	}
	fprintf(stderr, "bench_redis: %u/s over %u keys: strict, denied\n",
		low.rate, low.keys);
	rc = run_strict(agent, sconf, ctl, keys, low.keys, low.rate, 1,
			measure_s, &low.c, &low.cthreads);
	if (rc)
		goto out;
	print_results(cells, argc, argv, &low, version, timer, nested,
		      measure_s);
	rc = 0;
out:
	if (ctl)
		redisFree(ctl);
	free(keys);
	return rc;
}

int main(int argc, char **argv)
{
	char agent[PATH_MAX + 16];
	const char *server = "redis-server";
	unsigned measure_s = MEASURE_S;
	struct sigaction sa;
	int opt, rc;

	default_agent(agent, sizeof(agent));
	while ((opt = getopt(argc, argv, "t:T:a:s:h")) != -1) {
		switch (opt) {
		case 'T':
			strict_threads = (unsigned)strtoul(optarg, NULL, 10);
			if (strict_threads < 1 || strict_threads > 64) {
				usage(stderr);
				return 2;
			}
			break;
		case 't':
			measure_s = (unsigned)strtoul(optarg, NULL, 10);
			if (measure_s < 1 || measure_s > 600) {
				usage(stderr);
				return 2;
			}
			break;
		case 'a':
			snprintf(agent, sizeof(agent), "%s", optarg);
			break;
		case 's':
			server = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (access(agent, X_OK)) {
		fprintf(stderr, "bench_redis: %s: %s\n", agent,
			strerror(errno));
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = run(argc, argv, agent, server, measure_s);
	cleanup();
	if (interrupted) {
		fprintf(stderr, "bench_redis: interrupted\n");
		return 130;
	}
	return rc ? 1 : 0;
}
