/* SPDX-License-Identifier: MIT */
/*
 * rlshimctl - the operator's command line over a live segment.
 *
 *   rlshimctl [-c FILE] check [FILE]              validate a configuration
 *   rlshimctl [-c FILE] ban ADDR[/LEN] [--for DUR] ban on every process of
 *                                                 the host (and, with an
 *                                                 agent and [redis], every
 *                                                 host)
 *   rlshimctl [-c FILE] unban ADDR[/LEN]
 *   rlshimctl [-c FILE] bans                      address, reason, rule,
 *                                                 expires in
 *
 * Exit status: 0 ok, 1 failure with a one-line reason, 2 usage. The
 * segment is found through the configuration (its `shm`), never created.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ban.h"
#include "config.h"
#include "time.h"

#define DEFAULT_BANTIME_NS (3600 * RL_NS_PER_SEC)

struct ctl {
	const char *config_path;
	struct rl_config *cfg;
	struct rl_table *table;
};

struct command {
	const char *name;
	const char *args;
	const char *help;
	int (*run)(struct ctl *c, int argc, char **argv);
	int needs_segment;
};

__attribute__((format(printf, 1, 2)))
static int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rlshimctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* ---- check ------------------------------------------------------------------ */

static int cmd_check(struct ctl *c, int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : c->config_path;
	struct rl_config *cfg;
	char err[RL_ERR_MAX];

	if (argc > 2)
		return 2;
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

/* ---- bans ------------------------------------------------------------------- */

static int parse_target(const char *s, struct rl_cidr *out)
{
	return rl_cidr_parse(s, strlen(s), out);
}

static int cmd_ban(struct ctl *c, int argc, char **argv)
{
	uint64_t dur = DEFAULT_BANTIME_NS, now = rl_time_wall_ms();
	struct rl_cidr cidr;
	char text[RL_CIDR_STRLEN], d[32];
	int rc;

	if (argc == 4 && strcmp(argv[2], "--for") == 0) {
		if (rl_time_parse_duration(argv[3], &dur) || dur == 0)
			return fail("bad duration '%s'", argv[3]);
	} else if (argc != 2) {
		return 2;
	}
	if (parse_target(argv[1], &cidr))
		return fail("not an address or prefix: '%s'", argv[1]);
	rc = rl_ban_add(c->table, &cidr, now + dur / RL_NS_PER_MS, RL_BAN_MANUAL,
			RL_BAN_NO_RULE, now);
	if (rc)
		return fail("the ban table is full around %s", argv[1]);
	rl_cidr_format(&cidr, text, sizeof(text));
	rl_time_format_duration(d, sizeof(d), dur);
	printf("banned %s for %s\n", text, d);
	return 0;
}

static int cmd_unban(struct ctl *c, int argc, char **argv)
{
	struct rl_cidr cidr;
	char text[RL_CIDR_STRLEN];

	if (argc != 2)
		return 2;
	if (parse_target(argv[1], &cidr))
		return fail("not an address or prefix: '%s'", argv[1]);
	rl_cidr_format(&cidr, text, sizeof(text));
	if (rl_ban_remove(c->table, &cidr))
		return fail("%s is not banned", text);
	printf("unbanned %s\n", text);
	return 0;
}

struct list {
	struct ctl *c;
	uint64_t now;
	unsigned n;
};

static const char *origin_name(uint8_t o)
{
	switch (o) {
	case RL_BAN_LOCAL: return "maxretry";
	case RL_BAN_MANUAL: return "manual";
	case RL_BAN_REMOTE: return "remote";
	}
	return "?";
}

static int print_ban(const struct rl_ban_view *v, void *arg)
{
	struct list *l = arg;
	char text[RL_CIDR_STRLEN], left[32], offences[16] = "-";
	const char *rule = "-";

	rl_cidr_format(&v->cidr, text, sizeof(text));
	rl_time_format_duration(left, sizeof(left),
				(v->expires_ms - l->now) / 1000 * RL_NS_PER_SEC);
	if (v->rule != RL_BAN_NO_RULE && v->rule < RL_MAX_RULES &&
	    l->c->table->rules[v->rule].name[0])
		rule = l->c->table->rules[v->rule].name;
	if (v->offences)
		snprintf(offences, sizeof(offences), "%u", v->offences);
	if (!l->n++)
		printf("%-43s %-9s %-16s %-8s %-10s %s\n", "ADDRESS", "REASON",
		       "RULE", "OFFENCE", "REFUSED", "EXPIRES IN");
	printf("%-43s %-9s %-16s %-8s %-10u %s\n", text, origin_name(v->origin),
	       rule, offences, v->hits, left);
	return 0;
}

static int cmd_bans(struct ctl *c, int argc, char **argv)
{
	struct list l = { c, rl_time_wall_ms(), 0 };

	(void)argv;
	if (argc != 1)
		return 2;
	rl_ban_foreach(c->table, l.now, print_ban, &l);
	if (!l.n)
		printf("no bans\n");
	return 0;
}

/* ---- the table of commands -------------------------------------------------- */

static const struct command commands[] = {
	{ "check", "[FILE]", "validate a configuration: file:line: message, "
	  "exit 1", cmd_check, 0 },
	{ "ban", "ADDR[/LEN] [--for DUR]", "ban an address or prefix (default "
	  "for 1h)", cmd_ban, 1 },
	{ "unban", "ADDR[/LEN]", "lift a ban", cmd_unban, 1 },
	{ "bans", "", "list the bans: address, reason, rule, offence, "
	  "connections refused, expires in",
	  cmd_bans, 1 },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: rlshimctl [-c FILE] COMMAND [ARGS]\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-6s %-24s %s\n", commands[i].name, commands[i].args,
			commands[i].help);
	fprintf(f, "\n  -c FILE   the configuration (default: $RLSHIM_CONFIG, "
		   "else /etc/rlshim.conf)\n"
		   "exit status: 0 ok, 1 failure, 2 usage\n");
}

static int open_segment(struct ctl *c)
{
	const char *path = c->config_path ? c->config_path : rl_config_path();
	char err[RL_ERR_MAX];
	int rc = path ? rl_config_load(path, &c->cfg, err, sizeof(err))
		      : rl_config_default(&c->cfg);

	if (rc) {
		fprintf(stderr, "rlshimctl: %s\n", err);
		return 1;
	}
	rc = rl_table_open(c->cfg->shm, 0, 0, &c->table);
	if (rc) {
		fprintf(stderr, "rlshimctl: %s%s\n", rl_table_error(),
			rc == -ENOENT ? " (no server under the shim has "
					"accepted a connection yet)" : "");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ctl c = { NULL, NULL, NULL };
	const struct command *cmd = NULL;
	int opt, rc;

	while ((opt = getopt(argc, argv, "+c:h")) != -1) {
		switch (opt) {
		case 'c': c.config_path = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[optind], "help") == 0 || strcmp(argv[optind], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			cmd = &commands[i];
	if (!cmd) {
		fprintf(stderr, "rlshimctl: unknown command '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	argc -= optind;
	argv += optind;
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("usage: rlshimctl [-c FILE] %s %s\n  %s\n", cmd->name,
		       cmd->args, cmd->help);
		return 0;
	}
	if (cmd->needs_segment && (rc = open_segment(&c)))
		return rc;
	rc = cmd->run(&c, argc, argv);
	if (rc == 2)
		fprintf(stderr, "usage: rlshimctl [-c FILE] %s %s\n", cmd->name,
			cmd->args);
	rl_table_close(c.table);
	rl_config_free(c.cfg);
	return rc;
}
