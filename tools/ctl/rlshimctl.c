/* SPDX-License-Identifier: MIT */
/*
 * rlshimctl.c - the operator's command line over a live segment.
 *
 *   rlshimctl [-c FILE] status [RULE] [--json]    rules and their counts,
 *                                                 bans, table, agent, Redis,
 *                                                 XDP; or one rule's jail
 *                                                 view
 *   rlshimctl [-c FILE] top [-n N]                keys nearest their limit
 *   rlshimctl [-c FILE] show RULE KEY [--json]    one key's state
 *   rlshimctl [-c FILE] reset RULE KEY|--all      a full bucket for it again
 *                                                 (with [redis], on every
 *                                                 host)
 *   rlshimctl [-c FILE] metrics                   Prometheus text format
 *   rlshimctl [-c FILE] check [FILE]              validate a configuration
 *   rlshimctl [-c FILE] ban ADDR[/LEN] [--for DUR] [--force]
 *                                                 ban on every process of
 *                                                 the host (and, with an
 *                                                 agent and [redis], every
 *                                                 host)
 *   rlshimctl [-c FILE] unban ADDR[/LEN]|--all
 *   rlshimctl [-c FILE] bans [--rule RULE]        address, reason, rule,
 *                                                 expires in
 *   rlshimctl [-c FILE] who ADDR                  allow list, bans and every
 *                                                 rule's state for one
 *                                                 address
 *   rlshimctl [-c FILE] xdp stats                 the XDP dropper's counters
 *                                                 and drops per address
 *   rlshimctl --version                           the release
 *   rlshimctl [-c FILE] __complete rules          (hidden) the rule names,
 *                                                 for the bash completion
 *
 * Exit status: 0 ok, 1 failure with a one-line reason, 2 usage. The
 * segment is found through the configuration (its `shm`), never created.
 * Each command's arguments are parsed from its table (cmdline.c) before
 * it opens anything, so a usage error is a usage error whatever the state
 * of the host; a command's options may come anywhere among its arguments,
 * and "--" ends them.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "ctl.h"

#include "kept.h"

/* The command list's order. */
static const struct ctl_command *const commands[] = {
	&ctl_cmd_status, &ctl_cmd_top, &ctl_cmd_show, &ctl_cmd_reset,
	&ctl_cmd_metrics, &ctl_cmd_check,
	&ctl_cmd_ban, &ctl_cmd_unban, &ctl_cmd_bans, &ctl_cmd_who, &ctl_cmd_xdp,
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

struct check_opts {
	const char *file;
};

static const struct ctl_option check_options[] = {
	CTL_OPTION(CTL_OPT_STRING, struct check_opts, file, .positional = 1,
		   .metavar = "FILE"),
	CTL_END_OPTIONS,
};

static int run_check(struct ctl *c, const void *opts)
{
	const struct check_opts *o = opts;
	const char *path = o->file ? o->file : c->config_path;
	struct rl_config *cfg;
	struct rl_err err;

	if (!path)
		path = rl_config_path();
	if (!path) {
		printf("no configuration file: the built-in default applies "
		       "(60 requests a minute per client IP)\n");
		return 0;
	}
	/* What a reload reads and refuses, by the same calls. */
	if (rl_config_check(path, &cfg, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	for (unsigned i = 0; i < cfg->nwarnings && i < RL_CONFIG_WARN_MAX; i++)
		fprintf(stderr, "%s\n", cfg->warnings[i]);
	if (cfg->nwarnings > RL_CONFIG_WARN_MAX)
		fprintf(stderr, "%s: %u more warnings\n", path,
			cfg->nwarnings - RL_CONFIG_WARN_MAX);
	printf("%s: ok, %u rule%s, segment %s\n", path, cfg->nrules,
	       cfg->nrules == 1 ? "" : "s", cfg->shm);
	rl_config_free(cfg);
	return 0;
}

const struct ctl_command ctl_cmd_check = {
	.name = "check",
	.help = "validate a configuration",
	.more = "  Prints FILE: ok (after any file:line: warning: on stderr), or "
		"file:line: message\n  and exits 1, refusing exactly what a "
		"reload refuses. FILE "
		"defaults to -c's,\n  $RLSHIM_CONFIG's, /etc/rlshim.conf.\n",
	.options = check_options,
	.opts_size = sizeof(struct check_opts),
	.run = run_check,
};

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

/* The segment `shm`, if it keeps the text of the file c->path as it was
 * before (the same version is in force as it is, a file with no rule
 * taken at start): that text, parsed, in c->cfg. Returns 0, or -ENOENT. */
static int kept_in(struct ctl *c, const char *shm)
{
	struct rl_table *t;
	uint64_t stamp;
	char *buf;
	int n;

	if (rl_table_open(shm, 0, 0, &t, NULL))
		return -ENOENT;
	buf = malloc(RL_KEPT_MAX);
	n = buf ? rl_kept_load(t, c->path, buf, RL_KEPT_MAX, &stamp) : -ENOMEM;
	if (n >= 0 && stamp != rl_config_stamp(c->path) &&
	    rl_config_parse(buf, c->path, &c->cfg, NULL) == 0) {
		free(buf);
		snprintf(c->shm, sizeof(c->shm), "%s", shm);
		c->table = t;
		c->kept = 1;
		return 0;
	}
	free(buf);
	rl_table_close(t);
	return -ENOENT;
}

/*
 * The file as it is now is one a reload refuses (c->cfg_err says why):
 * the servers keep applying the text in force, which the segment keeps.
 * The segment is the one the file names (or the default's), else, when
 * the file no longer names one (emptied, deleted), any that keeps this
 * path's text. Returns 0 with c->cfg, c->shm and c->table set, or -ENOENT.
 */
static int kept_config(struct ctl *c)
{
	char shm[RL_SHM_NAME_MAX];
	struct rl_config *def;

	if (rl_config_default(&def))
		return -ENOENT;
	snprintf(shm, sizeof(shm), "%s", def->shm);
	rl_config_free(def);
	ini_parse(c->path, peek_shm, shm);
	if (kept_in(c, shm) == 0)
		return 0;
	if (rl_kept_find(c->path, shm, sizeof(shm)) == 0)
		return kept_in(c, shm);
	return -ENOENT;
}

int ctl_open(struct ctl *c, unsigned flags)
{
	struct rl_err e;
	int rc;

	c->path = c->config_path ? c->config_path : rl_config_path();
	/* What a reload reads and refuses, by the same calls; refused, the
	 * text in force if a segment keeps it, else the file as it is (one
	 * with no rule still names its segment). */
	if (!c->path) {
		rc = rl_config_default(&c->cfg);
	} else if ((rc = rl_config_check(c->path, &c->cfg, &c->cfg_err))) {
		if (kept_config(c) == 0)
			return 0;
		rc = rl_config_load(c->path, &c->cfg, &c->cfg_err);
	}
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
		return ctl_fail("%s", c->cfg_err.msg[0] ? c->cfg_err.msg
							: "cannot load the configuration");
	}
	rc = rl_table_open(c->shm, 0, 0, &c->table, &e);
	if (rc == -ENOENT)
		return ctl_no_segment(c, e.msg);
	if (rc)
		return ctl_fail("%s", e.msg);
	return 0;
}

/* ---- __complete: for the bash completion --------------------------------- */

/* inih handler: each [limit:NAME] of a file that does not parse as a
 * whole, once (inih calls per key, in file order), if NAME is a rule's
 * name. */
static int peek_rule(void *arg, const char *section, const char *name,
		     const char *value)
{
	char *last = arg;

	(void)name;
	(void)value;
	if (strncmp(section, "limit:", 6) || !section[6] ||
	    strlen(section + 6) >= RL_RULE_NAME_MAX ||
	    section[6 + strspn(section + 6, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			       "abcdefghijklmnopqrstuvwxyz0123456789_.-")] ||
	    strcmp(last, section) == 0)
		return 1;
	snprintf(last, RL_RULE_NAME_MAX + 8, "%s", section);
	printf("%s\n", section + 6);
	return 1;
}

/*
 * rlshimctl [-c FILE] __complete rules: the rule names of the
 * configuration, one a line, for tools/ctl/rlshimctl.bash-completion (it
 * asks the tool, so that the names are the ones the tool reads). Left out
 * of the usage: it is not a command for people. A file that does not
 * parse (being edited) still gives the names of its [limit:NAME]
 * sections. Exit status 0; 1, said, when the file cannot be read; 2 usage.
 */
static int complete(struct ctl *c, int argc, char **argv)
{
	const char *path = c->config_path ? c->config_path : rl_config_path();
	struct rl_config *cfg;
	struct rl_err err;
	char last[RL_RULE_NAME_MAX + 8] = "";
	int rc;

	if (argc != 2 || strcmp(argv[1], "rules"))
		return ctl_usage("__complete takes one word: rules");
	rc = path ? rl_config_load(path, &cfg, &err) : rl_config_default(&cfg);
	if (rc == 0) {
		for (unsigned i = 0; i < cfg->nrules; i++)
			printf("%s\n", cfg->rules[i].name);
		rl_config_free(cfg);
		return ctl_flush();
	}
	if (rc == -EINVAL && ini_parse(path, peek_rule, last) >= 0)
		return ctl_flush();
	return ctl_fail("%s", err.msg);
}

/* ---- main ---------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: rlshimctl [-c FILE] COMMAND [ARGS]\n\n");
	for (size_t i = 0; i < NCOMMANDS; i++) {
		char args[128];

		ctl_args_line(commands[i], args, sizeof(args));
		/* Arguments too long for their column: the help below. */
		if (strlen(args) > 24)
			fprintf(f, "  %-7s %s\n  %-7s %-24s %s\n",
				commands[i]->name, args, "", "",
				commands[i]->help);
		else
			fprintf(f, "  %-7s %-24s %s\n", commands[i]->name,
				args, commands[i]->help);
	}
	fprintf(f, "\n  -c FILE   the configuration (default: $RLSHIM_CONFIG, "
		   "else /etc/rlshim.conf,\n"
		   "            else the built-in default)\n"
		   "  rlshimctl COMMAND --help   more about one command\n"
		   "  rlshimctl --version        the release\n"
		   "exit status: 0 ok, 1 failure, 2 usage\n");
}

/* A usage error: the one line, and where the rest is. */
static int short_usage(void)
{
	fprintf(stderr, "usage: rlshimctl [-c FILE] COMMAND [ARGS] "
		"(rlshimctl --help lists the commands)\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl c;
	const struct ctl_command *cmd = NULL;
	int opt, rc;

	memset(&c, 0, sizeof(c));
	opterr = 0; /* getopt's messages name argv[0]; ours say rlshimctl */
	while ((opt = getopt_long(argc, argv, "+:c:h", options, NULL)) != -1) {
		switch (opt) {
		case 'c': c.config_path = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("rlshimctl %s\n", RLSHIM_VERSION); return 0;
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
	if (strcmp(argv[optind], "__complete") == 0)
		return complete(&c, argc - optind, argv + optind);
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(argv[optind], commands[i]->name) == 0)
			cmd = commands[i];
	if (!cmd) {
		ctl_usage("unknown command '%s'", argv[optind]);
		return short_usage();
	}
	rc = ctl_dispatch(&c, cmd, argc - optind, argv + optind);
	rl_table_close(c.table);
	rl_config_free(c.cfg);
	return rc;
}
