/* SPDX-License-Identifier: MIT */
/*
 * ctl.h - what the files of rlshimctl share: the invocation, opening the
 * segment, the snapshot that status and metrics render, the XDP maps and
 * a few formatters.
 *
 *   rlshimctl.c   the list of commands, usage, check, opening the segment
 *   noseg.c       why there is no segment: the processes with the shim and
 *                 the ports they listen on
 *   cmdline.c     each command's options, read from its table; dispatch
 *   cmd_bans.c    ban, unban, bans
 *   cmd_xdp.c     the pinned maps: totals for status/metrics, xdp stats
 *   snapshot.c    one consistent-enough reading of the segment and the file
 *   cmd_status.c  status, for people and as JSON
 *   cmd_top.c     the keys nearest their limit
 *   cmd_show.c    one key's state, and its reset; who ADDR
 *   cmd_jail.c    status RULE: one rule's counts, keys limited, bans
 *   keys.c        a key's view as top and show present it
 *   cmd_metrics.c the Prometheus text exposition
 *   json.c        the JSON writer of every --json
 */
#ifndef RL_CTL_H
#define RL_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "table.h"

/* ---- the invocation ------------------------------------------------------ */

struct ctl {
	const char *config_path;     /* -c, or NULL */
	const char *path;            /* resolved: the file, NULL = built-in */
	struct rl_config *cfg;       /* NULL when the file does not parse
					(only with CTL_BAD_CONFIG_OK) */
	struct rl_err cfg_err;       /* why it does not */
	int kept;                    /* the file is refused (cfg_err says
					why): cfg is the text in force that
					its segment keeps, as the servers
					apply it */
	char shm[RL_SHM_NAME_MAX];   /* the segment's name */
	struct rl_table *table;
	int show_secrets;            /* top --show-secrets: cookie values as
					they are, not their digest */
};

/* ctl_open() flags */
#define CTL_BAD_CONFIG_OK 0x1u /* a file that does not parse still names its
				  segment: read what the servers keep using */

/*
 * Resolve and load the configuration and attach to its segment (never
 * creating it). A file a reload would refuse (broken, emptied, deleted)
 * gives way to the text in force that a segment keeps for that path, as
 * the servers apply it (c->kept). Returns 0, or 1 after printing the
 * one-line reason.
 */
int ctl_open(struct ctl *c, unsigned flags);

/* The segment does not exist (`err` says so): the one-line reason, with
 * what the host shows of why (the processes that have the shim loaded and
 * the ports they listen on, against `ports`). Returns 1. */
int ctl_no_segment(const struct ctl *c, const char *err);

/* "rlshimctl: <reason>" on stderr; returns 1, the failure exit status. */
__attribute__((format(printf, 1, 2)))
int ctl_fail(const char *fmt, ...);

/* A usage error: "rlshimctl: <reason>" on stderr; returns 2 (the
 * dispatcher prints the command's usage line). */
__attribute__((format(printf, 1, 2)))
int ctl_usage(const char *fmt, ...);

/* stdout could not be written (a full disk under the textfile collector):
 * 1 after saying so, else 0. */
int ctl_flush(void);

/* ---- commands and their options ------------------------------------------ */

/*
 * Each command has one table of what it takes, options and positional
 * arguments alike, and a struct of its own that the table fills (as
 * xdp-tools' DEFINE_OPTION): the one parser (cmdline.c) reads every
 * command's arguments from its table, and the usage and help lines are
 * printed from it too.
 */
enum ctl_opt_type {
	CTL_OPT_END = 0,
	CTL_OPT_BOOL,      /* int: 1 when given */
	CTL_OPT_STRING,    /* const char *: the argument itself */
	CTL_OPT_COUNT,     /* unsigned, 1 to 1000000; else a usage error */
	CTL_OPT_DURATION,  /* uint64_t ns, a duration of rlshim.conf(5), not
			      0; else a failure ("bad duration") */
};

struct ctl_option {
	enum ctl_opt_type type;
	const char *name;      /* the long option without "--", or NULL */
	char short_opt;        /* its letter, or 0 */
	int positional;        /* an argument: filled in the table's order */
	int required;          /* a positional that must be there */
	const char *metavar;   /* the value's name ("DUR"), a positional's */
	const char *help;      /* an option's line in COMMAND --help */
	size_t offset, size;   /* the field it fills */
};

#define CTL_OPTION(_type, _opts, _field, ...)                                  \
	{ .type = _type, .offset = offsetof(_opts, _field),                    \
	  .size = sizeof(((_opts *)0)->_field), __VA_ARGS__ }
#define CTL_END_OPTIONS { .type = CTL_OPT_END }

struct ctl_command {
	const char *name;
	const char *help;      /* one line, for the command list */
	const char *more;      /* COMMAND --help after the options, or NULL */
	const struct ctl_option *options;
	size_t opts_size;      /* of the struct the table fills */
	const void *defaults;  /* its value before the arguments; NULL: zeros */
	int (*run)(struct ctl *c, const void *opts);
};

/* The commands, one or a few per file. */
extern const struct ctl_command ctl_cmd_status, ctl_cmd_top, ctl_cmd_show,
	ctl_cmd_reset, ctl_cmd_metrics, ctl_cmd_check, ctl_cmd_ban,
	ctl_cmd_unban, ctl_cmd_bans, ctl_cmd_who, ctl_cmd_xdp;

/* status RULE: the jail view (cmd_jail.c). The exit status. */
int ctl_status_rule(struct ctl *c, const char *rule, int json);

/* ctl_parse_cmdline(): -h or --help was among the arguments. */
#define CTL_HELP (-1)

/*
 * Fill `opts` (holding the defaults) from argv[1..argc) as cmd's table
 * says. Options may come anywhere among the arguments; "--" ends them.
 * Returns 0, CTL_HELP, or the exit status after saying why on stderr: 2
 * for an unknown option, a missing value or argument, one argument too
 * many (the caller prints the usage line), 1 for a value that does not
 * parse where the table says so. `opts` points into argv.
 */
int ctl_parse_cmdline(const struct ctl_command *cmd, int argc, char **argv,
		      void *opts);

/* What the command takes, from its table: "ADDR[/LEN] [--for DUR]". */
void ctl_args_line(const struct ctl_command *cmd, char *buf, size_t len);

/*
 * Run `cmd` on argv[1..argc) (argv[0] is its name): parse, then its help,
 * or the command itself, or after a usage error its usage line. Returns
 * the exit status.
 */
int ctl_dispatch(struct ctl *c, const struct ctl_command *cmd, int argc,
		 char **argv);

/* ---- the XDP dropper's pinned maps --------------------------------------- */

struct ctl_xdp {
	char dir[RL_PATH_MAX];            /* the pins, as looked for */
	char maps[RL_PATH_MAX];           /* where they were opened: the
					     pins, or "by id N,N,..." */
	int v4, v6, h4, h6, drops, stats; /* -1 when not open */
	int ncpu;
	void *percpu;                     /* one per-CPU value's buffer */
};

/*
 * Open the maps the agent pinned for segment `t` (named `shm`), or, where
 * the pins are not visible (another mount namespace: `ip netns exec`), by
 * the ids the agent recorded in the segment (root). Returns 0, or a
 * negative errno when any is missing or unreadable (no agent, no XDP, not
 * root); ctl_xdp_close() is needed either way.
 */
int ctl_xdp_open(struct rl_table *t, const char *shm, struct ctl_xdp *m);
void ctl_xdp_close(struct ctl_xdp *m);

/*
 * The mode the dropper got, from the agent's record: "native", "generic"
 * or "offload" when every attached interface got that one, "mixed" when
 * they differ, NULL when nothing is recorded (no agent attached, or one
 * of an older version).
 */
const char *ctl_xdp_got(const struct rl_table_xdp *rec);

/* The configured mode's name: "native", "generic", "auto". */
const char *ctl_xdp_mode_name(enum rl_xdp_mode m);

/*
 * The mode for people: what was attached, with what was configured where
 * they differ ("native (configured auto)", or `inner`, for text already
 * in parentheses, "native, configured auto"), per interface when the
 * interfaces differ ("eth0 native, eth1 generic (configured auto)");
 * what was configured when nothing is recorded. `cfg` may be NULL.
 */
void ctl_xdp_fmt_mode(char *buf, size_t len, const struct rl_config *cfg,
		      const struct rl_table_xdp *rec, int inner);

struct ctl_json;
/* "attached_to": [{"interface", "ifindex", "mode"}], one per [xdp]
 * interface, null where it is not attached (or nothing is recorded). */
void ctl_xdp_json_ifaces(struct ctl_json *j, const struct rl_config *cfg,
			 const struct rl_table_xdp *rec);

/* The program's counters summed over the CPUs. */
struct ctl_xdp_totals {
	uint64_t packets, dropped, expired, not_ip, truncated;
};
void ctl_xdp_totals(struct ctl_xdp *m, struct ctl_xdp_totals *out);

/* ---- the snapshot -------------------------------------------------------- */

enum ctl_config_state {
	CTL_CONFIG_UNKNOWN = 0, /* no process has recorded what it applies */
	CTL_CONFIG_IN_FORCE,    /* the file as it is now is applied */
	CTL_CONFIG_REFUSED,     /* the servers refused it, keep the old rules */
	CTL_CONFIG_CHANGED,     /* changed on disk, not yet applied */
};

enum ctl_store_state {
	CTL_STORE_LOCAL = 0,    /* no [redis] */
	CTL_STORE_UP,
	CTL_STORE_DOWN,         /* the agent says so, since store_down_since */
	CTL_STORE_NO_AGENT,     /* the agent died: the shim treats it as down */
	CTL_STORE_UNKNOWN,      /* no agent has run yet */
};

/* A rule by name: its line of the file and its counters in the segment,
 * summed over every id it had (a reload that changes a rate gives the
 * name a new id). */
struct ctl_rule {
	char name[RL_RULE_NAME_MAX];
	const struct rl_rule_cfg *cfg; /* NULL: not in the file */
	enum rl_algorithm algorithm;   /* of its last entry, for retired */
	struct rl_rate rate;           /* rules */
	uint64_t allowed, denied, bans;
	uint64_t store_down;           /* of denied: the store was down */
	/* the application's answers to requests it counted */
	uint64_t answers[5];                  /* 1xx..5xx */
	uint64_t service[RL_SERVICE_BUCKETS]; /* by service time, per bucket */
	uint64_t service_sum_us;
};

struct ctl_snapshot {
	uint64_t now_ns;              /* CLOCK_MONOTONIC */
	uint64_t wall_ms;             /* Unix ms */

	enum ctl_config_state config;
	uint64_t config_since_ms;
	uint64_t config_reloads;
	const char *config_err;       /* a reload refuses the file: why; or NULL */
	int config_kept;              /* and the rules and mode are the text in
					 force that the segment keeps */

	unsigned nrules;              /* the file's in order, then retired */
	struct ctl_rule rules[2 * RL_MAX_RULES];

	uint64_t bans_active, ban_refusals, bans_issued;
	struct rl_table_stats table;

	int agent_expected;           /* [redis] or [xdp] wants one */
	int agent_seen;               /* one has ever beaten */
	int agent_alive;
	uint64_t agent_pid;           /* 0 when it stopped cleanly */
	uint64_t agent_beat_age_ns;
	uint64_t agent_flags;
	int synced;                   /* it has completed a sync round */
	uint64_t sync_age_ns;
	uint64_t syncs;
	uint32_t hosts_alive;
	uint32_t sync_interval_ms;
	char agent_log[256];          /* where it logs, "" if not known */

	uint64_t restart_needed;      /* RL_RESTART_*: a reload's, pending */
	uint64_t restart_since_ms;    /* Unix ms */

	enum ctl_store_state store;
	uint64_t store_down_ms;       /* for CTL_STORE_DOWN: how long */
	uint32_t masters;             /* cluster: the agent's map's masters */
	uint32_t masters_down;        /* of them, unreachable (CTL_STORE_UP) */

	int xdp_configured;           /* [xdp] (or, file unreadable: maps) */
	int xdp_attached;             /* the agent's flag, while it lives */
	int xdp_maps;                 /* the totals below were read */
	struct ctl_xdp_totals xdp;
	struct rl_table_xdp xdp_rec;  /* the agent's ids and modes */
};

/* The store's state as status says it: "up", "degraded, 1 of 3 masters
 * unreachable", "down for 12s", "local only", ... (cmd_status.c). */
void ctl_fmt_store_state(char *buf, size_t len, const struct ctl_snapshot *s);

/* The rule `name` of the snapshot, or NULL. */
const struct ctl_rule *ctl_snapshot_rule(const struct ctl_snapshot *s,
					 const char *name);

/* Read everything status and metrics show. Allocates nothing. */
void ctl_snapshot(struct ctl *c, struct ctl_snapshot *s);

/* ---- one key's view (keys.c) --------------------------------------------- */

/* The rule of the file named `name`, or NULL. */
const struct rl_rule_cfg *ctl_rule_cfg(struct ctl *c, const char *name);

/*
 * The wait (ns) for the next cost-1 request of the key `v` shows, 0 when
 * one would pass now: from its rule's algorithm, the view's peek being a
 * cost-0 request. *bound is set to 1 when it is an upper bound (a sliding
 * window's), else 0.
 */
uint64_t ctl_key_retry(struct ctl *c, const struct rl_slot_view *v, int *bound);

/* The key `v` shows, as its rule keys by it: the address (with its
 * prefix when not a host's), the header's value (escaped, "…" for a
 * truncated one), or "(global)", for which it returns 1 (else 0). */
int ctl_fmt_view_key(struct ctl *c, const struct rl_slot_view *v, char *buf,
		     size_t len);

/* ---- bans (cmd_bans.c), for bans, status RULE and who ---------------------- */

struct ctl_json;
struct rl_addr;
struct ctl_ban_filter {
	const char *rule;            /* only the bans this rule made, or NULL */
	const struct rl_addr *addr;  /* only those covering it, or NULL */
};

/*
 * The live bans `f` lets through: as a table sized to its content (each
 * line after `indent`, nothing when there are none), or into the JSON
 * array `j` is in. *n: how many. 0, or 1 after the one-line reason.
 */
int ctl_bans_list(struct ctl *c, const struct ctl_ban_filter *f,
		  struct ctl_json *j, const char *indent, unsigned *n);

/* `name` is a rule the file or the segment knows: 0, else 1 after saying
 * so. */
int ctl_rule_known(struct ctl *c, const char *name);

/* ---- formatting ---------------------------------------------------------- */

/* A time left (ms) as top gives a wait, to the second, rounded up: "54s",
 * "1m54s", "2h05m", "3d04h". */
void ctl_fmt_left(char *buf, size_t len, uint64_t ms);


/* A rate as the file spells it: "3/m", "100/s", else "N/<duration>". */
void ctl_fmt_rate(char *buf, size_t len, const struct rl_rate *r);

/* A rule's match: "*", "POST /sms", "* /api/" with a "*" after, "accept". */
void ctl_fmt_match(char *buf, size_t len, const struct rl_rule_cfg *r);

/* A rule's definition and counts in JSON, the fields `status --json` and
 * `status RULE --json` share: match, rate, burst, key, algorithm, the ban
 * settings if any, allowed, denied (cmd_status.c). */
struct ctl_json;
void ctl_json_rule_def(struct ctl_json *j, const struct ctl_rule *r);

/* A rule's key: "ip", "header:X-Api-Key", "global". */
void ctl_fmt_key(char *buf, size_t len, const struct rl_rule_cfg *r);

/* A duration for people, to its two largest units: "450ms", "12.3s",
 * "3m20s", "2h05m", "3d04h". */
void ctl_fmt_dur(char *buf, size_t len, uint64_t ns);

/* "4.0 MiB" */
void ctl_fmt_bytes(char *buf, size_t len, uint64_t bytes);

/* Unix ms as local time, "2025-01-31 14:02:03 CET". */
void ctl_fmt_time(char *buf, size_t len, uint64_t unix_ms);

/* The Redis URL with any password masked. */
void ctl_fmt_url(char *buf, size_t len, const char *url);

/*
 * Columns for people: cells are added row by row and printed aligned,
 * two spaces apart, the last column unpadded. Widths count characters,
 * not bytes (keys may hold "…"). Cells are copied; rows beyond `maxrows`
 * given to ctl_grid_init are dropped.
 */
struct ctl_grid {
	unsigned ncols, nrows, maxrows, col;
	char **cells;
	unsigned *right;              /* per column: right-aligned */
};
int ctl_grid_init(struct ctl_grid *g, unsigned ncols, unsigned maxrows);
__attribute__((format(printf, 2, 3)))
void ctl_grid_add(struct ctl_grid *g, const char *fmt, ...);
void ctl_grid_print(struct ctl_grid *g, FILE *f, const char *indent);
void ctl_grid_free(struct ctl_grid *g);

/*
 * JSON on stdout (json.c): a writer just big enough for one document. It
 * places the commas and escapes strings (RFC 8259: quote, backslash and
 * control characters; bytes that are not UTF-8 become U+FFFD, so the
 * output always parses). `key` is NULL inside arrays.
 */
struct ctl_json {
	int depth;
	int first[8];
};
void ctl_jstr(const char *s);
void ctl_jkey(struct ctl_json *j, const char *key);
void ctl_jopen(struct ctl_json *j, const char *key, char brace);
void ctl_jclose(struct ctl_json *j, char brace);
void ctl_jtext(struct ctl_json *j, const char *key, const char *v);
void ctl_jnum(struct ctl_json *j, const char *key, uint64_t v);
void ctl_jbool(struct ctl_json *j, const char *key, int v);
void ctl_jnull(struct ctl_json *j, const char *key);

#endif /* RL_CTL_H */
