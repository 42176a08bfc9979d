/* SPDX-License-Identifier: MIT */
/*
 * rlshimctl.c - the operator's command line over a live segment.
 *
 *   rlshimctl [-c FILE] status [--json]           rules and their counts,
 *                                                 bans, table, agent, Redis,
 *                                                 XDP
 *   rlshimctl [-c FILE] top [-n N]                keys nearest their limit
 *   rlshimctl [-c FILE] metrics                   Prometheus text format
 *   rlshimctl [-c FILE] check [FILE]              validate a configuration
 *   rlshimctl [-c FILE] ban ADDR[/LEN] [--for DUR] ban on every process of
 *                                                 the host (and, with an
 *                                                 agent and [redis], every
 *                                                 host)
 *   rlshimctl [-c FILE] unban ADDR[/LEN]
 *   rlshimctl [-c FILE] bans                      address, reason, rule,
 *                                                 expires in
 *   rlshimctl [-c FILE] xdp stats                 the XDP dropper's counters
 *                                                 and drops per address
 *
 * Exit status: 0 ok, 1 failure with a one-line reason, 2 usage. The
 * segment is found through the configuration (its `shm`), never created.
 * Each command parses its arguments before it opens anything, so a usage
 * error is a usage error whatever the state of the host.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "ctl.h"

struct command {
	const char *name;
	const char *args;
	const char *help;     /* one line, for the command list */
	const char *more;     /* the rest of `COMMAND --help`, or NULL */
	int (*run)(struct ctl *c, int argc, char **argv);
};

/*
 * The textfile collector's way (see cmd_metrics.c): write a temporary file in
 * the collector's directory and rename it over the old one, so that
 * node_exporter never reads half a file.
 */
static const char metrics_more[] =
	"  Families: rlshim_requests_total{rule,decision}, "
	"rlshim_bans_issued_total{rule},\n"
	"  rlshim_bans_active, rlshim_ban_refusals_total, "
	"rlshim_table_capacity,\n"
	"  rlshim_table_keys, rlshim_table_evictions_total, "
	"rlshim_table_overflows_total,\n"
	"  rlshim_agent_up, rlshim_store_up, rlshim_sync_lag_seconds,\n"
	"  rlshim_config_reloads_total, rlshim_config_in_force,\n"
	"  rlshim_xdp_packets_total, rlshim_xdp_drops_total;\n"
	"  a family whose source is absent (no agent, no [redis], no [xdp]) "
	"is left out.\n\n"
	"  For node_exporter's textfile collector, from cron every minute or "
	"a systemd timer:\n"
	"    rlshimctl metrics > /var/lib/node_exporter/textfile_collector/"
	"rlshim.prom.$$ &&\n"
	"      mv /var/lib/node_exporter/textfile_collector/rlshim.prom.$$ "
	"/var/lib/node_exporter/textfile_collector/rlshim.prom\n";

static const struct command commands[] = {
	{ "status", "[--json]", "rules, counts, bans, table, agent, Redis, XDP",
	  "  --json   the same as one JSON object\n\n"
	  "  The configuration is in force when the servers apply the file as "
	  "it is now;\n"
	  "  a change is picked up within a second of a server's next "
	  "request.\n", ctl_cmd_status },
	{ "top", "[-n N]", "the keys nearest (or over) their limit",
	  "  -n N     how many keys (default 10)\n\n"
	  "  Over the limit first (longest RETRY first), then fewest "
	  "REMAINING. RETRY is\n"
	  "  the wait for the key's next request; for sliding-window rules "
	  "an upper\n"
	  "  bound (marked ≤). RESET is the time until the key's budget is "
	  "full again.\n", ctl_cmd_top },
	{ "metrics", "", "Prometheus text format, for node_exporter",
	  metrics_more, ctl_cmd_metrics },
	{ "check", "[FILE]", "validate a configuration",
	  "  Prints FILE: ok, or file:line: message and exits 1. FILE "
	  "defaults to -c's,\n  $RLSHIM_CONFIG's, /etc/rlshim.conf.\n",
	  ctl_cmd_check },
	{ "ban", "ADDR[/LEN] [--for DUR]", "ban an address or prefix",
	  "  --for DUR   how long: 30s, 10m, 1h (default), 1d\n\n"
	  "  Every process of the host refuses it at accept; with an agent, "
	  "[redis] spreads\n  it to the other hosts and [xdp] drops its "
	  "packets.\n", ctl_cmd_ban },
	{ "unban", "ADDR[/LEN]", "lift a ban", NULL, ctl_cmd_unban },
	{ "bans", "", "list the bans",
	  "  Address, reason (maxretry, manual, remote), rule, offence, "
	  "connections\n  refused, expires in.\n", ctl_cmd_bans },
	{ "xdp", "stats", "the XDP dropper's packets and drops",
	  "  Packets seen, dropped, passed (expired ban, not IP, truncated), "
	  "and the\n  drops of each ban in the maps.\n", ctl_cmd_xdp },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* One line on stderr: "rlshimctl: " and the message. */
static void say(const char *fmt, va_list ap)
{
	fprintf(stderr, "rlshimctl: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

int ctl_fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
	return 1;
}

int ctl_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
	return 2;
}

int ctl_flush(void)
{
	if (fflush(stdout) || ferror(stdout))
		return ctl_fail("cannot write the output: %s", strerror(errno));
	return 0;
}

/* ---- check --------------------------------------------------------------- */

int ctl_cmd_check(struct ctl *c, int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : c->config_path;
	struct rl_config *cfg;
	char err[RL_ERR_MAX];

	if (argc > 2)
		return ctl_usage("check: one FILE at most");
	if (!path)
		path = rl_config_path();
	if (!path) {
		printf("no configuration file: the built-in default applies "
		       "(60 requests a minute per client IP)\n");
		return 0;
	}
	if (rl_config_load(path, &cfg, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	printf("%s: ok, %u rule%s, segment %s\n", path, cfg->nrules,
	       cfg->nrules == 1 ? "" : "s", cfg->shm);
	rl_config_free(cfg);
	return 0;
}

/* ---- opening the segment ------------------------------------------------- */

/* inih handler: [global] shm, the one key needed from a file that does not
 * parse as a whole. */
static int peek_shm(void *arg, const char *section, const char *name,
		    const char *value)
{
	char *shm = arg;

	if (strcmp(section, "global") == 0 && strcmp(name, "shm") == 0 &&
	    strlen(value) < RL_SHM_NAME_MAX && value[0] && value[0] != '.' &&
	    !strchr(value, '/'))
		snprintf(shm, RL_SHM_NAME_MAX, "%s", value);
	return 1;
}

int ctl_open(struct ctl *c, unsigned flags)
{
	int rc;

	c->path = c->config_path ? c->config_path : rl_config_path();
	rc = c->path ? rl_config_load(c->path, &c->cfg, c->cfg_err,
				      sizeof(c->cfg_err))
		     : rl_config_default(&c->cfg);
	if (rc == 0) {
		snprintf(c->shm, sizeof(c->shm), "%s", c->cfg->shm);
	} else if ((flags & CTL_BAD_CONFIG_OK) && c->path && rc == -EINVAL) {
		/*
		 * The servers refuse a broken file and keep their rules (or
		 * will, at their next request): what they apply is still
		 * worth showing. The segment is the one the file names, or
		 * the default's.
		 */
		struct rl_config *def;

		if (rl_config_default(&def))
			return ctl_fail("out of memory");
		snprintf(c->shm, sizeof(c->shm), "%s", def->shm);
		rl_config_free(def);
		ini_parse(c->path, peek_shm, c->shm);
	} else {
		return ctl_fail("%s", c->cfg_err[0] ? c->cfg_err
						    : "cannot load the configuration");
	}
	rc = rl_table_open(c->shm, 0, 0, &c->table);
	if (rc)
		return ctl_fail("%s%s", rl_table_error(),
				rc == -ENOENT ? " (no server under the shim has "
						"accepted a connection yet)" : "");
	return 0;
}

/* ---- main ---------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: rlshimctl [-c FILE] COMMAND [ARGS]\n\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-7s %-24s %s\n", commands[i].name,
			commands[i].args, commands[i].help);
	fprintf(f, "\n  -c FILE   the configuration (default: $RLSHIM_CONFIG, "
		   "else /etc/rlshim.conf,\n"
		   "            else the built-in default)\n"
		   "  rlshimctl COMMAND --help   more about one command\n"
		   "exit status: 0 ok, 1 failure, 2 usage\n");
}

/* A usage error: the one line, and where the rest is. */
static int short_usage(void)
{
	fprintf(stderr, "usage: rlshimctl [-c FILE] COMMAND [ARGS] "
		"(rlshimctl --help lists the commands)\n");
	return 2;
}

static void command_usage(FILE *f, const struct command *cmd)
{
	fprintf(f, "usage: rlshimctl [-c FILE] %s%s%s\n", cmd->name,
		cmd->args[0] ? " " : "", cmd->args);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl c;
	const struct command *cmd = NULL;
	int opt, rc;

	memset(&c, 0, sizeof(c));
	opterr = 0; /* getopt's messages name argv[0]; ours say rlshimctl */
	while ((opt = getopt_long(argc, argv, "+:c:h", options, NULL)) != -1) {
		switch (opt) {
		case 'c': c.config_path = optarg; break;
		case 'h': usage(stdout); return 0;
		case ':':
			ctl_usage("%s wants an argument", argv[optind - 1]);
			return short_usage();
		default:
			ctl_usage("unknown option '%s'", argv[optind - 1]);
			return short_usage();
		}
	}
	if (optind >= argc) {
		ctl_usage("no command");
		return short_usage();
	}
	if (strcmp(argv[optind], "help") == 0) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			cmd = &commands[i];
	if (!cmd) {
		ctl_usage("unknown command '%s'", argv[optind]);
		return short_usage();
	}
	argc -= optind;
	argv += optind;
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		command_usage(stdout, cmd);
		printf("  %s\n", cmd->help);
		if (cmd->more)
			printf("\n%s", cmd->more);
		return 0;
	}
	rc = cmd->run(&c, argc, argv);
	if (rc == 2)
		command_usage(stderr, cmd);
	rl_table_close(c.table);
	rl_config_free(c.cfg);
	return rc;
}
