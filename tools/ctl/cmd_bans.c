/* SPDX-License-Identifier: MIT */
/*
 * cmd_bans.c - rlshimctl ban, unban, bans: bans in the segment, which every
 * process of the host checks at accept (and the agent spreads to the
 * other hosts and into XDP).
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"

#include "ban.h"
#include "time.h"

#define DEFAULT_BANTIME_NS (3600 * RL_NS_PER_SEC)

static int parse_target(const char *s, struct rl_cidr *out)
{
	return rl_cidr_parse(s, strlen(s), out);
}

int ctl_cmd_ban(struct ctl *c, int argc, char **argv)
{
	uint64_t dur = DEFAULT_BANTIME_NS, now;
	struct rl_cidr cidr;
	char text[RL_CIDR_STRLEN], d[32];
	int rc;

	if (argc == 4 && strcmp(argv[2], "--for") == 0) {
		if (rl_time_parse_duration(argv[3], &dur) || dur == 0)
			return ctl_fail("bad duration '%s'", argv[3]);
	} else if (argc != 2) {
		return ctl_usage("ban: expected an address or prefix, and "
				 "--for DUR");
	}
	if (parse_target(argv[1], &cidr))
		return ctl_fail("not an address or prefix: '%s'", argv[1]);
	if ((rc = ctl_open(c, 0)))
		return rc;
	now = rl_time_wall_ms();
	rc = rl_ban_add(c->table, &cidr, now + dur / RL_NS_PER_MS, RL_BAN_MANUAL,
			RL_BAN_NO_RULE, now);
	if (rc)
		return ctl_fail("the ban table is full around %s", argv[1]);
	rl_cidr_format(&cidr, text, sizeof(text));
	rl_time_format_duration(d, sizeof(d), dur);
	printf("banned %s for %s\n", text, d);
	return 0;
}

int ctl_cmd_unban(struct ctl *c, int argc, char **argv)
{
	struct rl_cidr cidr;
	char text[RL_CIDR_STRLEN];
	int rc;

	if (argc != 2)
		return ctl_usage("unban: expected one address or prefix");
	if (parse_target(argv[1], &cidr))
		return ctl_fail("not an address or prefix: '%s'", argv[1]);
	if ((rc = ctl_open(c, 0)))
		return rc;
	rl_cidr_format(&cidr, text, sizeof(text));
	if (rl_ban_unban(c->table, &cidr))
		return ctl_fail("%s is not banned", text);
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
	int rule_len = 1;

	rl_cidr_format(&v->cidr, text, sizeof(text));
	rl_time_format_duration(left, sizeof(left),
				(v->expires_ms - l->now) / 1000 * RL_NS_PER_SEC);
	if (v->rule != RL_BAN_NO_RULE && v->rule < RL_MAX_RULES &&
	    l->c->table->rules[v->rule].name[0])
		rule = l->c->table->rules[v->rule].name;
	if (rule[0] != '-') /* the segment's: bounded, whatever it holds */
		rule_len = (int)strnlen(rule, RL_RULE_NAME_MAX);
	if (v->offences)
		snprintf(offences, sizeof(offences), "%u", v->offences);
	if (!l->n++)
		printf("%-43s %-9s %-16s %-8s %-10s %s\n", "ADDRESS", "REASON",
		       "RULE", "OFFENCE", "REFUSED", "EXPIRES IN");
	printf("%-43s %-9s %-16.*s %-8s %-10u %s\n", text,
	       origin_name(v->origin), rule_len, rule, offences, v->hits, left);
	return 0;
}

int ctl_cmd_bans(struct ctl *c, int argc, char **argv)
{
	struct list l = { c, 0, 0 };
	int rc;

	if (argc != 1)
		return ctl_usage("bans: unknown argument '%s'", argv[1]);
	if ((rc = ctl_open(c, 0)))
		return rc;
	l.now = rl_time_wall_ms();
	rl_ban_foreach(c->table, l.now, print_ban, &l);
	if (!l.n)
		printf("no bans\n");
	return 0;
}
