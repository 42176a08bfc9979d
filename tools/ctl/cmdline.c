/* SPDX-License-Identifier: MIT */
/*
 * cmdline.c - the one parser of every command's arguments, from the
 * command's table of options and positional arguments (xdp-tools'
 * DEFINE_OPTION and parse_cmdline_args), and the dispatcher that runs a
 * command on them.
 *
 * getopt_long() does the reading, in the order given ("-" in front of the
 * short options: a positional argument comes back as option 1 where it
 * stands, whatever POSIXLY_CORRECT says), so options may come before,
 * between or after the arguments, "--" ends them, and `--for=1h` or `-n5`
 * work as with any GNU tool. What the table does not name is a usage
 * error, and so is an option without its value, a missing required
 * argument, or one argument too many.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

#include "clock.h"

#define CTL_OPTIONS_MAX 16          /* per command, positionals included */
#define CTL_COUNT_MAX 1000000u
#define LONG_ONLY 256               /* getopt values of long-only options */

static const size_t type_size[] = {
	[CTL_OPT_BOOL] = sizeof(int),
	[CTL_OPT_STRING] = sizeof(const char *),
	[CTL_OPT_COUNT] = sizeof(unsigned),
	[CTL_OPT_DURATION] = sizeof(uint64_t),
};

/* The option as it is typed: "--for", "-n". */
static const char *spelling(const struct ctl_option *o, char *buf, size_t len)
{
	if (o->name)
		snprintf(buf, len, "--%s", o->name);
	else
		snprintf(buf, len, "-%c", o->short_opt);
	return buf;
}

/* The option getopt_long() answered `val` for, or NULL. */
static const struct ctl_option *by_val(const struct ctl_command *cmd, int val)
{
	for (const struct ctl_option *o = cmd->options; o->type; o++) {
		int v = o->short_opt ? o->short_opt
				     : LONG_ONLY + (int)(o - cmd->options);

		if (!o->positional && v == val)
			return o;
	}
	return NULL;
}

static int parse_count(const char *s, unsigned *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (!*s || *end || *s == '-' || v == 0 || v > CTL_COUNT_MAX)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* A duration of rlshim.conf(5) (30s, 10m), or bare seconds (90), not 0. */
static int parse_duration(const char *s, uint64_t *out)
{
	size_t digits = strspn(s, "0123456789");

	if (digits && !s[digits]) {
		char *end;
		unsigned long long v = strtoull(s, &end, 10);

		if (v == 0 || v > UINT64_MAX / RL_NS_PER_SEC)
			return -1;
		*out = v * RL_NS_PER_SEC;
		return 0;
	}
	return rl_time_parse_duration(s, out) || *out == 0 ? -1 : 0;
}

/* Store `arg` as option `o` says. 0, else the exit status, said. */
static int set_value(const struct ctl_command *cmd, const struct ctl_option *o,
		     char *arg, void *opts)
{
	void *field = (char *)opts + o->offset;
	char name[32];

	if (o->size != type_size[o->type])
		return ctl_fail("%s: option table: the field of %s is not a "
				"field of its type", cmd->name,
				o->positional ? o->metavar
					      : spelling(o, name, sizeof(name)));
	switch (o->type) {
	case CTL_OPT_BOOL:
		*(int *)field = 1;
		break;
	case CTL_OPT_STRING:
		*(const char **)field = arg;
		break;
	case CTL_OPT_COUNT:
		if (parse_count(arg, field))
			return ctl_usage("%s: %s wants a count from 1 to %u, "
					 "not '%s'", cmd->name,
					 spelling(o, name, sizeof(name)),
					 CTL_COUNT_MAX, arg);
		break;
	case CTL_OPT_DURATION:
		if (parse_duration(arg, field))
			return ctl_fail("%s: bad duration '%s' for %s (accepted: "
					"seconds, 90; or a number and a unit, "
					"500ms, 30s, 10m, 1h, 1d)", cmd->name,
					arg, spelling(o, name, sizeof(name)));
		break;
	case CTL_OPT_END:
		break;
	}
	return 0;
}

/* The next argument: the first positional of the table not yet filled. */
static int set_positional(const struct ctl_command *cmd,
			  const struct ctl_option **next, char *arg, void *opts)
{
	const struct ctl_option *o = *next;

	while (o->type && !o->positional)
		o++;
	if (!o->type)
		return ctl_usage("%s: unexpected argument '%s'", cmd->name, arg);
	*next = o + 1;
	return set_value(cmd, o, arg, opts);
}

int ctl_parse_cmdline(const struct ctl_command *cmd, int argc, char **argv,
		      void *opts)
{
	struct option longs[CTL_OPTIONS_MAX + 2];
	char shorts[3 + 2 * CTL_OPTIONS_MAX + 1] = "-:h";
	const struct ctl_option *o, *next = cmd->options;
	size_t nl = 0, ns = 3;
	char name[32];
	int opt, rc;

	for (o = cmd->options; o->type; o++) {
		int has_arg = o->type == CTL_OPT_BOOL ? no_argument
						      : required_argument;

		if (o - cmd->options == CTL_OPTIONS_MAX)
			return ctl_fail("%s: option table: more than %d "
					"entries", cmd->name, CTL_OPTIONS_MAX);
		if (o->positional)
			continue;
		if (o->short_opt) {
			shorts[ns++] = o->short_opt;
			if (has_arg == required_argument)
				shorts[ns++] = ':';
		}
		if (o->name)
			longs[nl++] = (struct option){ o->name, has_arg, NULL,
				o->short_opt ? o->short_opt
					     : LONG_ONLY + (int)(o - cmd->options) };
	}
	shorts[ns] = '\0';
	longs[nl++] = (struct option){ "help", no_argument, NULL, 'h' };
	longs[nl] = (struct option){ NULL, 0, NULL, 0 };

	optind = 0; /* start afresh: main() read its own options with it */
	opterr = 0; /* getopt's messages name argv[0]; ours say rlshimctl */
	while ((opt = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		switch (opt) {
		case 'h':
			return CTL_HELP;
		case 1:
			rc = set_positional(cmd, &next, optarg, opts);
			break;
		case ':':
			o = by_val(cmd, optopt);
			return ctl_usage("%s: %s wants a value", cmd->name,
					 o ? spelling(o, name, sizeof(name))
					   : argv[optind - 1]);
		case '?':
			if ((o = by_val(cmd, optopt)))
				return ctl_usage("%s: %s takes no value",
						 cmd->name,
						 spelling(o, name, sizeof(name)));
			if (optopt)
				return ctl_usage("%s: unknown option '-%c'",
						 cmd->name, optopt);
			return ctl_usage("%s: unknown option '%s'", cmd->name,
					 argv[optind - 1]);
		default:
			o = by_val(cmd, opt);
			rc = o ? set_value(cmd, o, optarg, opts)
			       : ctl_fail("%s: getopt answered %d", cmd->name, opt);
			break;
		}
		if (rc)
			return rc;
	}
	/* After "--": arguments only. */
	for (; optind < argc; optind++)
		if ((rc = set_positional(cmd, &next, argv[optind], opts)))
			return rc;
	for (o = next; o->type; o++)
		if (o->positional && o->required)
			return ctl_usage("%s: expected %s", cmd->name, o->metavar);
	return 0;
}

/* ---- usage and help ------------------------------------------------------ */

void ctl_args_line(const struct ctl_command *cmd, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	/* What it works on first, then the options. */
	for (int pass = 0; pass < 2; pass++) {
		for (const struct ctl_option *o = cmd->options; o->type; o++) {
			char name[32];

			if (o->positional != !pass || n >= len)
				continue;
			if (o->positional)
				n += (size_t)snprintf(buf + n, len - n,
						      o->required ? "%s%s"
								  : "%s[%s]",
						      n ? " " : "", o->metavar);
			else
				n += (size_t)snprintf(buf + n, len - n,
						      "%s[%s%s%s]", n ? " " : "",
						      spelling(o, name,
							       sizeof(name)),
						      o->metavar ? " " : "",
						      o->metavar ? o->metavar : "");
		}
	}
}

static void command_usage(FILE *f, const struct ctl_command *cmd)
{
	char args[128];

	ctl_args_line(cmd, args, sizeof(args));
	fprintf(f, "usage: rlshimctl [-c FILE] %s%s%s\n", cmd->name,
		args[0] ? " " : "", args);
}

/* COMMAND --help: usage, what it does, its options, the rest. */
static void command_help(const struct ctl_command *cmd)
{
	char label[CTL_OPTIONS_MAX][48];
	const struct ctl_option *o;
	int width = 6, n = 0;

	command_usage(stdout, cmd);
	printf("  %s\n", cmd->help);
	for (o = cmd->options; o->type; o++) {
		char name[32];
		int w;

		if (o->positional)
			continue;
		w = snprintf(label[n++], sizeof(label[0]), "%s%s%s",
			     spelling(o, name, sizeof(name)),
			     o->metavar ? " " : "", o->metavar ? o->metavar : "");
		if (w > width)
			width = w;
	}
	if (n)
		putchar('\n');
	n = 0;
	for (o = cmd->options; o->type; o++)
		if (!o->positional)
			printf("  %-*s   %s\n", width, label[n++], o->help);
	if (cmd->more)
		printf("\n%s", cmd->more);
}

/* ---- the dispatcher ------------------------------------------------------ */

int ctl_dispatch(struct ctl *c, const struct ctl_command *cmd, int argc,
		 char **argv)
{
	void *opts = calloc(1, cmd->opts_size ? cmd->opts_size : 1);
	int rc;

	if (!opts)
		return ctl_fail("out of memory");
	if (cmd->defaults)
		memcpy(opts, cmd->defaults, cmd->opts_size);
	rc = ctl_parse_cmdline(cmd, argc, argv, opts);
	if (rc == CTL_HELP) {
		command_help(cmd);
		rc = 0;
	} else if (rc == 0) {
		rc = cmd->run(c, opts);
	}
	if (rc == 2)
		command_usage(stderr, cmd);
	free(opts);
	return rc;
}
