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
#include "clock.h"

#define DEFAULT_BANTIME_NS (3600 * RL_NS_PER_SEC)

/* The widest ban made without --force: a /8 of IPv4, a /32 of IPv6 (one
 * provider's allocation). */
#define WIDEST_V4 8
#define WIDEST_V6 32

/* What ban and unban take. */
struct ban_opts {
	const char *target;  /* ADDR[/LEN] */
	uint64_t for_ns;
	int force;
};

static const struct ctl_option ban_options[] = {
	CTL_OPTION(CTL_OPT_STRING, struct ban_opts, target, .positional = 1,
		   .required = 1, .metavar = "ADDR[/LEN]"),
	CTL_OPTION(CTL_OPT_DURATION, struct ban_opts, for_ns, .name = "for",
		   .metavar = "DUR",
		   .help = "how long: 30s, 10m, 1h (default), 1d"),
	CTL_OPTION(CTL_OPT_BOOL, struct ban_opts, force, .name = "force",
		   .help = "ban even what is refused without it (below)"),
	CTL_END_OPTIONS,
};

static const struct ban_opts ban_defaults = { .for_ns = DEFAULT_BANTIME_NS };

static const struct ctl_option unban_options[] = {
	CTL_OPTION(CTL_OPT_STRING, struct ban_opts, target, .positional = 1,
		   .required = 1, .metavar = "ADDR[/LEN]"),
	CTL_END_OPTIONS,
};

static int parse_target(const char *s, struct rl_cidr *out)
{
	return rl_cidr_parse(s, strlen(s), out);
}

/* A prefix as the operator would write it: a host without its /32. */
static void format_entry(const struct rl_cidr *c, char *buf, size_t len)
{
	rl_cidr_format(c, buf, len);
	if (c->prefix == rl_addr_bits(&c->addr))
		*strchr(buf, '/') = '\0';
}

/*
 * What a ban of `ban` would cut off that an operator rarely means to: more
 * than a /8 or /32 (0.0.0.0/0 is every client, XDP included), or an
 * address of the allow list. Returns 1 after saying which, else 0.
 */
static int too_much(const struct ctl *c, const struct rl_cidr *ban,
		    const char *text)
{
	int v4 = ban->addr.family == RL_AF_INET;
	unsigned widest = v4 ? WIDEST_V4 : WIDEST_V6;
	char what[RL_CIDR_STRLEN + 32];
	const struct rl_cidr *a;

	if (ban->prefix < widest) {
		if (ban->prefix == 0)
			snprintf(what, sizeof(what), "every IPv%d address",
				 v4 ? 4 : 6);
		else
			snprintf(what, sizeof(what), "2^%u addresses",
				 rl_addr_bits(&ban->addr) - ban->prefix);
		ctl_fail("refusing to ban %s: it covers %s, more than a /%u "
			 "(--force overrides)", text, what, widest);
		return 1;
	}
	a = rl_cidr_set_overlap(&c->cfg->allow, ban);
	if (!a)
		return 0;
	format_entry(a, what, sizeof(what));
	ctl_fail("refusing to ban %s: it covers %s of the allow list "
		 "(--force overrides)", text, what);
	return 1;
}

static int run_ban(struct ctl *c, const void *opts)
{
	const struct ban_opts *o = opts;
	uint64_t dur = o->for_ns, now;
	struct rl_cidr cidr;
	char text[RL_CIDR_STRLEN], d[32];
	int rc;

	if (parse_target(o->target, &cidr))
		return ctl_fail("not an address or prefix: '%s'", o->target);
	if ((rc = ctl_open(c, 0)))
		return rc;
	rl_cidr_format(&cidr, text, sizeof(text));
	if (!o->force && too_much(c, &cidr, text))
		return 1;
	now = rl_time_wall_ms();
	rc = rl_ban_add(c->table, &cidr, now + dur / RL_NS_PER_MS, RL_BAN_MANUAL,
			RL_BAN_NO_RULE, now);
	if (rc)
		return ctl_fail("the ban table is full around %s", o->target);
	rl_time_format_duration(d, sizeof(d), dur);
	printf("banned %s for %s\n", text, d);
	return 0;
}

const struct ctl_command ctl_cmd_ban = {
	.name = "ban",
	.help = "ban an address or prefix",
	.more = "  Every process of the host refuses it at accept; with an "
		"agent, [redis] spreads\n  it to the other hosts and [xdp] "
		"drops its packets.\n  Without --force, a ban wider than a "
		"/8 (IPv4) or /32 (IPv6), or over an\n  address of the "
		"allow list, is refused.\n",
	.options = ban_options,
	.opts_size = sizeof(struct ban_opts),
	.defaults = &ban_defaults,
	.run = run_ban,
};

static int run_unban(struct ctl *c, const void *opts)
{
	const struct ban_opts *o = opts;
	struct rl_cidr cidr;
	char text[RL_CIDR_STRLEN];
	int rc;

	if (parse_target(o->target, &cidr))
		return ctl_fail("not an address or prefix: '%s'", o->target);
	if ((rc = ctl_open(c, 0)))
		return rc;
	rl_cidr_format(&cidr, text, sizeof(text));
	if (rl_ban_unban(c->table, &cidr))
		return ctl_fail("%s is not banned", text);
	printf("unbanned %s\n", text);
	return 0;
}

const struct ctl_command ctl_cmd_unban = {
	.name = "unban",
	.help = "lift a ban",
	.options = unban_options,
	.opts_size = sizeof(struct ban_opts),
	.run = run_unban,
};

struct list {
	struct ctl *c;
	uint64_t now;
	unsigned n;
	struct ctl_json *j;  /* --json: the array the bans go in */
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
	    rl_table_rule_name(l->c->table, v->rule)[0])
		rule = rl_table_rule_name(l->c->table, v->rule);
	if (rule[0] != '-') /* the segment's: bounded, whatever it holds */
		rule_len = (int)strnlen(rule, RL_RULE_NAME_MAX);
	if (v->offences)
		snprintf(offences, sizeof(offences), "%u", v->offences);
	if (l->j) {
		l->n++;
		ctl_jopen(l->j, NULL, '{');
		ctl_jtext(l->j, "address", text);
		ctl_jnum(l->j, "prefix", v->cidr.prefix);
		ctl_jtext(l->j, "reason", origin_name(v->origin));
		if (rule[0] == '-') {
			ctl_jnull(l->j, "rule");
		} else {
			char name[RL_RULE_NAME_MAX + 1];

			snprintf(name, sizeof(name), "%.*s", rule_len, rule);
			ctl_jtext(l->j, "rule", name);
		}
		ctl_jnum(l->j, "offences", v->offences);
		ctl_jnum(l->j, "refused", v->hits);
		ctl_jnum(l->j, "expires_ms", v->expires_ms);
		ctl_jnum(l->j, "expires_in_ms", v->expires_ms - l->now);
		ctl_jclose(l->j, '}');
		return 0;
	}
	if (!l->n++)
		printf("%-43s %-9s %-16s %-8s %-10s %s\n", "ADDRESS", "REASON",
		       "RULE", "OFFENCE", "REFUSED", "EXPIRES IN");
	printf("%-43s %-9s %-16.*s %-8s %-10u %s\n", text,
	       origin_name(v->origin), rule_len, rule, offences, v->hits, left);
	return 0;
}

struct bans_opts {
	int json;
};

static int run_bans(struct ctl *c, const void *opts)
{
	const struct bans_opts *o = opts;
	struct ctl_json j = { 0, { 1 } };
	struct list l = { c, 0, 0, o->json ? &j : NULL };
	int rc;

	if ((rc = ctl_open(c, 0)))
		return rc;
	l.now = rl_time_wall_ms();
	if (l.j)
		ctl_jopen(l.j, NULL, '[');
	rl_ban_foreach(c->table, l.now, print_ban, &l);
	if (l.j) {
		ctl_jclose(l.j, ']');
		putchar('\n');
	} else if (!l.n) {
		printf("no bans\n");
	}
	return ctl_flush();
}

static const struct ctl_option bans_options[] = {
	CTL_OPTION(CTL_OPT_BOOL, struct bans_opts, json, .name = "json",
		   .help = "the same as a JSON array of objects"),
	CTL_END_OPTIONS,
};

const struct ctl_command ctl_cmd_bans = {
	.name = "bans",
	.help = "list the bans",
	.more = "  Address, reason (maxretry, manual, remote), rule, offence, "
		"connections\n  refused, expires in.\n",
	.options = bans_options,
	.opts_size = sizeof(struct bans_opts),
	.run = run_bans,
};
