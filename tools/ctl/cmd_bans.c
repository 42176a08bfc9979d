/* SPDX-License-Identifier: MIT */
/*
 * cmd_bans.c - rlshimctl ban, unban, bans: bans in the segment, which every
 * process of the host checks at accept (and the agent spreads to the
 * other hosts and into XDP).
 */
#include <stdio.h>
#include <stdlib.h>
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
	int all;             /* unban --all */
};

static const struct ctl_option ban_options[] = {
	CTL_OPTION(CTL_OPT_STRING, struct ban_opts, target, .positional = 1,
		   .required = 1, .metavar = "ADDR[/LEN]"),
	CTL_OPTION(CTL_OPT_DURATION, struct ban_opts, for_ns, .name = "for",
		   .metavar = "DUR",
		   .help = "how long: 90 (seconds), 30s, 10m, 1h (default), 1d"),
	CTL_OPTION(CTL_OPT_BOOL, struct ban_opts, force, .name = "force",
		   .help = "ban even what is refused without it (below)"),
	CTL_END_OPTIONS,
};

static const struct ban_opts ban_defaults = { .for_ns = DEFAULT_BANTIME_NS };

static const struct ctl_option unban_options[] = {
	CTL_OPTION(CTL_OPT_STRING, struct ban_opts, target, .positional = 1,
		   .metavar = "ADDR[/LEN]"),
	CTL_OPTION(CTL_OPT_BOOL, struct ban_opts, all, .name = "all",
		   .help = "lift every ban of the host"),
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

/* unban --all: the bans, collected first (a lift changes the table the
 * walk reads). */
struct all_bans {
	struct rl_cidr *c;
	unsigned n, max;
};

static int collect_ban(const struct rl_ban_view *v, void *arg)
{
	struct all_bans *a = arg;

	if (a->n == a->max) {
		unsigned max = a->max ? 2 * a->max : 64;
		struct rl_cidr *c = realloc(a->c, max * sizeof(*c));

		if (!c)
			return 1;
		a->c = c;
		a->max = max;
	}
	a->c[a->n++] = v->cidr;
	return 0;
}

static int unban_all(struct ctl *c)
{
	struct all_bans a = { NULL, 0, 0 };
	unsigned lifted = 0;

	if (rl_ban_foreach(c->table, rl_time_wall_ms(), collect_ban, &a)) {
		free(a.c);
		return ctl_fail("out of memory");
	}
	for (unsigned i = 0; i < a.n; i++)
		lifted += rl_ban_unban(c->table, &a.c[i]) == 0;
	free(a.c);
	printf("unbanned %u ban%s\n", lifted, lifted == 1 ? "" : "s");
	return ctl_flush();
}

static int run_unban(struct ctl *c, const void *opts)
{
	const struct ban_opts *o = opts;
	struct rl_cidr cidr;
	char text[RL_CIDR_STRLEN];
	int rc;

	if (o->all && o->target)
		return ctl_usage("unban: ADDR[/LEN] or --all, not both");
	if (!o->all && !o->target)
		return ctl_usage("unban: expected ADDR[/LEN] or --all");
	if (o->target && parse_target(o->target, &cidr))
		return ctl_fail("not an address or prefix: '%s'", o->target);
	if ((rc = ctl_open(c, 0)))
		return rc;
	if (o->all)
		return unban_all(c);
	rl_cidr_format(&cidr, text, sizeof(text));
	if (rl_ban_unban(c->table, &cidr))
		return ctl_fail("%s is not banned", text);
	printf("unbanned %s\n", text);
	return 0;
}

const struct ctl_command ctl_cmd_unban = {
	.name = "unban",
	.help = "lift a ban, or every ban (--all)",
	.more = "  With an agent and [redis], the lift spreads to the other "
		"hosts as a ban does.\n",
	.options = unban_options,
	.opts_size = sizeof(struct ban_opts),
	.run = run_unban,
};

/* A ban's time left as top gives a wait: "54s", "1m54s", "2h05m". */
void ctl_fmt_left(char *buf, size_t len, uint64_t ms)
{
	uint64_t sec = (ms + 999) / 1000;

	if (sec < 60)
		snprintf(buf, len, "%llus", (unsigned long long)sec);
	else
		ctl_fmt_dur(buf, len, sec * RL_NS_PER_SEC);
}

static const char *origin_name(uint8_t o)
{
	switch (o) {
	case RL_BAN_LOCAL: return "maxretry";
	case RL_BAN_MANUAL: return "manual";
	case RL_BAN_REMOTE: return "remote";
	}
	return "?";
}

struct list {
	struct ctl *c;
	const struct ctl_ban_filter *f;
	uint64_t now;
	unsigned n;
	struct ctl_json *j;  /* --json: the array the bans go in */
	struct ctl_grid g;   /* else the rows, sized to their content */
};

/* The name of the rule a ban came from, bounded (the segment's), or
 * NULL. */
static const char *ban_rule(struct ctl *c, const struct rl_ban_view *v,
			    char *buf, size_t len)
{
	const char *rule;

	if (v->rule == RL_BAN_NO_RULE || v->rule >= RL_MAX_RULES)
		return NULL;
	rule = rl_table_rule_name(c->table, v->rule);
	if (!rule[0])
		return NULL;
	snprintf(buf, len, "%.*s", (int)strnlen(rule, RL_RULE_NAME_MAX), rule);
	return buf;
}

static int list_ban(const struct rl_ban_view *v, void *arg)
{
	struct list *l = arg;
	char text[RL_CIDR_STRLEN], left[32], offences[16] = "-",
		name[RL_RULE_NAME_MAX + 1];
	const char *rule = ban_rule(l->c, v, name, sizeof(name));

	if (l->f && l->f->rule && (!rule || strcmp(rule, l->f->rule) != 0))
		return 0;
	if (l->f && l->f->addr && !rl_cidr_contains(&v->cidr, l->f->addr))
		return 0;
	rl_cidr_format(&v->cidr, text, sizeof(text));
	ctl_fmt_left(left, sizeof(left), v->expires_ms - l->now);
	if (v->offences)
		snprintf(offences, sizeof(offences), "%u", v->offences);
	l->n++;
	if (l->j) {
		ctl_jopen(l->j, NULL, '{');
		ctl_jtext(l->j, "address", text);
		ctl_jnum(l->j, "prefix", v->cidr.prefix);
		ctl_jtext(l->j, "reason", origin_name(v->origin));
		ctl_jtext(l->j, "rule", rule);
		ctl_jnum(l->j, "offences", v->offences);
		ctl_jnum(l->j, "refused", v->hits);
		ctl_jnum(l->j, "expires_ms", v->expires_ms);
		ctl_jnum(l->j, "expires_in_ms", v->expires_ms - l->now);
		ctl_jclose(l->j, '}');
		return 0;
	}
	ctl_grid_add(&l->g, "%s", text);
	ctl_grid_add(&l->g, "%s", origin_name(v->origin));
	ctl_grid_add(&l->g, "%s", rule ? rule : "-");
	ctl_grid_add(&l->g, "%s", offences);
	ctl_grid_add(&l->g, "%u", v->hits);
	ctl_grid_add(&l->g, "%s", left);
	return 0;
}

static int count_live(const struct rl_ban_view *v, void *arg)
{
	(void)v;
	++*(unsigned *)arg;
	return 0;
}

int ctl_bans_list(struct ctl *c, const struct ctl_ban_filter *f,
		  struct ctl_json *j, const char *indent, unsigned *n)
{
	struct list l = { c, f, rl_time_wall_ms(), 0, j, { 0 } };
	unsigned live = 0;

	*n = 0;
	if (!j) {
		rl_ban_foreach(c->table, l.now, count_live, &live);
		if (ctl_grid_init(&l.g, 6, live + 1))
			return ctl_fail("out of memory");
		ctl_grid_add(&l.g, "ADDRESS");
		ctl_grid_add(&l.g, "REASON");
		ctl_grid_add(&l.g, "RULE");
		ctl_grid_add(&l.g, "OFFENCE");
		ctl_grid_add(&l.g, "REFUSED");
		ctl_grid_add(&l.g, "EXPIRES IN");
		l.g.right[3] = l.g.right[4] = l.g.right[5] = 1;
	}
	rl_ban_foreach(c->table, l.now, list_ban, &l);
	if (!j) {
		if (l.n)
			ctl_grid_print(&l.g, stdout, indent);
		ctl_grid_free(&l.g);
	}
	*n = l.n;
	return 0;
}

struct bans_opts {
	int json;
	const char *rule;
};

/* A name the file or the segment knows: 0, else 1 after saying so. */
int ctl_rule_known(struct ctl *c, const char *name)
{
	if (ctl_rule_cfg(c, name))
		return 0;
	for (unsigned id = 0; id < RL_MAX_RULES; id++)
		if (strncmp(rl_table_rule_name(c->table, id), name,
			    RL_RULE_NAME_MAX) == 0 && name[0])
			return 0;
	return ctl_fail("no rule '%s' in %s", name,
			c->path ? c->path : "the built-in default");
}

static int run_bans(struct ctl *c, const void *opts)
{
	const struct bans_opts *o = opts;
	struct ctl_json j = { 0, { 1 } };
	struct ctl_ban_filter f = { o->rule, NULL };
	unsigned n;
	int rc;

	if ((rc = ctl_open(c, 0)))
		return rc;
	if (o->rule && (rc = ctl_rule_known(c, o->rule)))
		return rc;
	if (o->json)
		ctl_jopen(&j, NULL, '[');
	if ((rc = ctl_bans_list(c, &f, o->json ? &j : NULL, "", &n)))
		return rc;
	if (o->json) {
		ctl_jclose(&j, ']');
		putchar('\n');
	} else if (!n) {
		if (o->rule)
			printf("no bans from rule %s\n", o->rule);
		else
			printf("no bans\n");
	}
	return ctl_flush();
}

static const struct ctl_option bans_options[] = {
	CTL_OPTION(CTL_OPT_BOOL, struct bans_opts, json, .name = "json",
		   .help = "the same as a JSON array of objects"),
	CTL_OPTION(CTL_OPT_STRING, struct bans_opts, rule, .name = "rule",
		   .metavar = "RULE",
		   .help = "only the bans RULE's maxretry made"),
	CTL_END_OPTIONS,
};

const struct ctl_command ctl_cmd_bans = {
	.name = "bans",
	.help = "list the bans",
	.more = "  Address, reason (maxretry, manual, remote), rule, offence, "
		"connections\n  refused, expires in (as top gives a wait: 54s, "
		"1m54s, 2h05m).\n",
	.options = bans_options,
	.opts_size = sizeof(struct bans_opts),
	.run = run_bans,
};
