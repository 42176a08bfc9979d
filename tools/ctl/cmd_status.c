/* SPDX-License-Identifier: MIT */
/*
 * cmd_status.c - rlshimctl status [--json]: one snapshot (snapshot.c), for
 * people as aligned `label: value` lines and a table of rules, or as one
 * JSON object whose key names are part of the interface.
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"

#include "clock.h"

static const char *mode_name(const struct rl_config *cfg)
{
	return cfg->mode == RL_MODE_DRY_RUN ? "dry-run" : "enforce";
}

static const char *const config_states[] = {
	[CTL_CONFIG_UNKNOWN] = "unknown",
	[CTL_CONFIG_IN_FORCE] = "in_force",
	[CTL_CONFIG_REFUSED] = "refused",
	[CTL_CONFIG_CHANGED] = "changed",
};

static const char *const store_states[] = {
	[CTL_STORE_LOCAL] = "local",
	[CTL_STORE_UP] = "up",
	[CTL_STORE_DOWN] = "down",
	[CTL_STORE_NO_AGENT] = "no_agent",
	[CTL_STORE_UNKNOWN] = "unknown",
};

/* ---- for people ---------------------------------------------------------- */

#define LABEL "%-9s"

/* "path:17: bad rate" as "line 17: bad rate", "path: No such file" as
 * "No such file": the path is already on the line. */
static void fmt_reason(char *buf, size_t len, const char *path,
		       const char *err)
{
	size_t n = strlen(path), digits = 0;

	if (strncmp(err, path, n) == 0 && err[n] == ':') {
		err += n + 1;
		while (err[digits] >= '0' && err[digits] <= '9')
			digits++;
		if (digits && err[digits] == ':') {
			snprintf(buf, len, "line %.*s:%s", (int)digits, err,
				 err + digits + 1);
			return;
		}
		err += *err == ' ';
	}
	snprintf(buf, len, "%s", err);
}

static void human_config(struct ctl *c, const struct ctl_snapshot *s)
{
	char when[64], why[RL_ERR_MAX];

	if (s->config_kept) {
		/* What the servers apply, and why not the file: one line. */
		fmt_reason(why, sizeof(why), c->path, s->config_err);
		printf(LABEL "%s refused (%s), ", "config:", c->path, why);
		if (s->config_since_ms) {
			ctl_fmt_time(when, sizeof(when), s->config_since_ms);
			printf("applying the text loaded at %s\n", when);
		} else {
			printf("applying the text in force on this host\n");
		}
		return;
	}
	printf(LABEL "%s\n", "config:", c->path ? c->path
					       : "built-in default (no file)");
	printf(LABEL, "");
	switch (s->config) {
	case CTL_CONFIG_IN_FORCE:
		ctl_fmt_time(when, sizeof(when), s->config_since_ms);
		printf("in force since %s, %llu reload%s\n", when,
		       (unsigned long long)s->config_reloads,
		       s->config_reloads == 1 ? "" : "s");
		break;
	case CTL_CONFIG_REFUSED:
		if (s->config_err)
			printf("refused: %s\n", s->config_err);
		else
			printf("refused by the servers (see their log)\n");
		printf(LABEL "the servers keep the previous rules\n", "");
		break;
	case CTL_CONFIG_CHANGED:
		printf("changed on disk, not yet applied (servers apply it "
		       "within 1 s of their next request)\n");
		if (s->config_err)
			printf(LABEL "and will refuse it: %s\n", "",
			       s->config_err);
		break;
	case CTL_CONFIG_UNKNOWN:
		printf("in force: unknown (no server has recorded the "
		       "configuration it applies)\n");
		if (s->config_err)
			printf(LABEL "it does not parse: %s\n", "", s->config_err);
		break;
	}
}

static void human_rules(const struct ctl_snapshot *s)
{
	struct ctl_grid g;
	static const unsigned numeric[] = { 3, 7, 8, 9, 10 };
	/* STORE-DOWN: with [redis], the denials that were the store's being
	 * down (on_store_down = closed), not the clients'. */
	int store = s->store != CTL_STORE_LOCAL;

	if (s->config == CTL_CONFIG_IN_FORCE || s->config_kept)
		printf("rules:\n");
	else
		printf("rules:   as the file has them, which is not what the "
		       "servers apply (see config); counts are the servers'\n");
	if (!s->nrules) {
		printf("  (none)\n");
		return;
	}
	if (ctl_grid_init(&g, store ? 11 : 10, s->nrules + 1)) {
		printf("  (out of memory)\n");
		return;
	}
	for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++)
		if (numeric[i] < g.ncols)
			g.right[numeric[i]] = 1;
	ctl_grid_add(&g, "NAME");
	ctl_grid_add(&g, "MATCH");
	ctl_grid_add(&g, "RATE");
	ctl_grid_add(&g, "BURST");
	ctl_grid_add(&g, "KEY");
	ctl_grid_add(&g, "ALGORITHM");
	ctl_grid_add(&g, "BAN");
	ctl_grid_add(&g, "ALLOWED");
	ctl_grid_add(&g, "DENIED");
	if (store)
		ctl_grid_add(&g, "STORE-DOWN");
	ctl_grid_add(&g, "BANS");
	for (unsigned i = 0; i < s->nrules; i++) {
		const struct ctl_rule *r = &s->rules[i];
		char rate[48], text[RL_PATH_MAX + 32], f[32], b[32];

		ctl_fmt_rate(rate, sizeof(rate), &r->rate);
		ctl_grid_add(&g, "%s", r->name);
		/* A name the file no longer has, or changed: counted before
		 * a reload (or, file unreadable, unknown). */
		if (r->cfg) {
			ctl_fmt_match(text, sizeof(text), r->cfg);
			ctl_grid_add(&g, "%s", text);
		} else {
			ctl_grid_add(&g, "%s", s->config_err && !s->config_kept ? "?"
					 : s->config == CTL_CONFIG_IN_FORCE ||
					   s->config_kept ? "(retired)"
							  : "(not in file)");
		}
		ctl_grid_add(&g, "%s", rate);
		ctl_grid_add(&g, "%u", r->rate.burst);
		if (r->cfg) {
			ctl_fmt_key(text, sizeof(text), r->cfg);
			ctl_grid_add(&g, "%s", text);
		} else {
			ctl_grid_add(&g, "-");
		}
		ctl_grid_add(&g, "%s", rl_config_algorithm_name(r->algorithm));
		if (r->cfg && r->cfg->maxretry) {
			rl_time_format_duration(f, sizeof(f), r->cfg->findtime_ns);
			rl_time_format_duration(b, sizeof(b), r->cfg->bantime_ns);
			ctl_grid_add(&g, "%u in %s for %s%s", r->cfg->maxretry, f,
				     b, r->cfg->bantime_increment ? "+" : "");
		} else {
			ctl_grid_add(&g, "-");
		}
		ctl_grid_add(&g, "%llu", (unsigned long long)r->allowed);
		ctl_grid_add(&g, "%llu", (unsigned long long)r->denied);
		if (store)
			ctl_grid_add(&g, "%llu",
				     (unsigned long long)r->store_down);
		ctl_grid_add(&g, "%llu", (unsigned long long)r->bans);
	}
	ctl_grid_print(&g, stdout, "  ");
	ctl_grid_free(&g);
}

/* The hosts alive are what the store said at the last round that reached
 * it: while it is unreachable (or no agent asks it), nobody knows. */
static int hosts_stale(const struct ctl_snapshot *s)
{
	return s->store == CTL_STORE_DOWN || s->store == CTL_STORE_NO_AGENT;
}

void ctl_fmt_store_state(char *buf, size_t len, const struct ctl_snapshot *s)
{
	char a[32];

	switch (s->store) {
	case CTL_STORE_LOCAL:
		snprintf(buf, len, "local only");
		break;
	case CTL_STORE_UP:
		if (s->masters_down)
			snprintf(buf, len, "degraded, %u of %u masters "
				 "unreachable", s->masters_down, s->masters);
		else
			snprintf(buf, len, "up");
		break;
	case CTL_STORE_DOWN:
		ctl_fmt_dur(a, sizeof(a), s->store_down_ms * RL_NS_PER_MS);
		snprintf(buf, len, "down for %s", a);
		break;
	case CTL_STORE_NO_AGENT:
		snprintf(buf, len, "not synced: no agent (rules with "
			 "on_store_down = closed deny)");
		break;
	default:
		snprintf(buf, len, "not synced yet: no agent has run");
		break;
	}
}

static void human_agent(struct ctl *c, const struct ctl_snapshot *s)
{
	char a[32], b[32], url[RL_URL_MAX], state[160];

	printf(LABEL, "agent:");
	if (s->agent_alive) {
		ctl_fmt_dur(a, sizeof(a), s->agent_beat_age_ns);
		printf("rlshimd pid %llu, alive (heartbeat %s ago)%s%s\n",
		       (unsigned long long)s->agent_pid, a,
		       s->agent_log[0] ? ", logs to " : "", s->agent_log);
	} else if (s->agent_seen) {
		ctl_fmt_dur(a, sizeof(a), s->agent_beat_age_ns);
		printf("not running (last heartbeat %s ago)%s%s\n", a,
		       s->agent_log[0] ? ", its log: " : "", s->agent_log);
	} else if (s->agent_expected) {
		printf("not started yet (a server starts it at its next "
		       "accept)\n");
	} else {
		printf("none (not needed without [redis] or [xdp])\n");
	}

	printf(LABEL, "redis:");
	url[0] = '\0';
	if (c->cfg && c->cfg->redis)
		ctl_fmt_url(url, sizeof(url), c->cfg->redis_url);
	ctl_fmt_store_state(state, sizeof(state), s);
	if (s->store == CTL_STORE_LOCAL) {
		printf("%s\n", state);
		return;
	}
	printf("%s, %s\n", state, url);
	if (!s->synced)
		return;
	ctl_fmt_dur(a, sizeof(a), s->sync_age_ns);
	ctl_fmt_dur(b, sizeof(b), (uint64_t)s->sync_interval_ms * RL_NS_PER_MS);
	printf(LABEL "last sync %s ago, %llu rounds every %s, %u host%s alive%s\n",
	       "sync:", a, (unsigned long long)s->syncs, b, s->hosts_alive,
	       s->hosts_alive == 1 ? "" : "s",
	       hosts_stale(s) ? " (stale: as of the last round before the "
				"store became unreachable)" : "");
}

static void human_xdp(struct ctl *c, const struct ctl_snapshot *s)
{
	printf(LABEL, "xdp:");
	if (!s->xdp_configured) {
		printf("not configured\n");
		return;
	}
	if (c->cfg) {
		char mode[256];

		/* The mode attached, as the agent recorded it. */
		ctl_xdp_fmt_mode(mode, sizeof(mode), c->cfg, &s->xdp_rec, 1);
		for (unsigned i = 0; i < c->cfg->nifaces; i++)
			printf("%s ", c->cfg->ifaces[i]);
		printf("(%s), ", mode);
	}
	printf("%s, ", s->xdp_attached ? "attached" : "not attached");
	if (s->xdp_maps)
		printf("%llu packets, %llu dropped\n",
		       (unsigned long long)s->xdp.packets,
		       (unsigned long long)s->xdp.dropped);
	else
		printf("maps not readable (no agent, or not root)\n");
}

/* RL_RESTART_* bits, by bit: RL_RESTART_PORTS is 1 << 0 */
static const char *const restart_names[] = { "ports", "shm", "capacity" };
#define NRESTART (sizeof(restart_names) / sizeof(restart_names[0]))

/* RL_RESTART_* bits as "ports, capacity". */
static void fmt_restart(char *buf, size_t len, uint64_t what)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < NRESTART; i++)
		if (what & (1u << i) && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
					      n ? ", " : "", restart_names[i]);
}

static void human(struct ctl *c, const struct ctl_snapshot *s)
{
	char size[32];

	human_config(c, s);
	if (s->restart_needed) {
		char what[64], since[32];

		fmt_restart(what, sizeof(what), s->restart_needed);
		ctl_fmt_dur(since, sizeof(since),
			    s->wall_ms > s->restart_since_ms
				    ? (s->wall_ms - s->restart_since_ms) *
					      RL_NS_PER_MS
				    : 0);
		printf(LABEL "a reload %s ago changed %s: the servers keep the "
		       "old value until they are restarted\n", "restart:",
		       since, what);
	}
	printf(LABEL "%s\n", "mode:", c->cfg ? mode_name(c->cfg) : "unknown");
	ctl_fmt_bytes(size, sizeof(size), s->table.size);
	printf(LABEL "/dev/shm/%s, %s\n", "segment:", c->shm, size);
	human_rules(s);
	printf(LABEL "%llu active, %llu refused connections and requests, "
	       "%llu issued by maxretry\n", "bans:",
	       (unsigned long long)s->bans_active,
	       (unsigned long long)s->ban_refusals,
	       (unsigned long long)s->bans_issued);
	printf(LABEL "%u slots, %u keys live, %u occupied, %llu evictions, "
	       "%llu overflows\n", "table:", s->table.capacity, s->table.keys,
	       s->table.occupied, (unsigned long long)s->table.evictions,
	       (unsigned long long)s->table.overflows);
	human_agent(c, s);
	human_xdp(c, s);
}

/* ---- JSON ---------------------------------------------------------------- */

void ctl_json_rule_def(struct ctl_json *j, const struct ctl_rule *r)
{
	char text[RL_PATH_MAX + 32];

	if (r->cfg) {
		ctl_fmt_match(text, sizeof(text), r->cfg);
		ctl_jtext(j, "match", text);
	} else {
		ctl_jnull(j, "match");
	}
	ctl_fmt_rate(text, sizeof(text), &r->rate);
	ctl_jtext(j, "rate", text);
	ctl_jnum(j, "burst", r->rate.burst);
	if (r->cfg) {
		ctl_fmt_key(text, sizeof(text), r->cfg);
		ctl_jtext(j, "key", text);
	} else {
		ctl_jnull(j, "key");
	}
	ctl_jtext(j, "algorithm", rl_config_algorithm_name(r->algorithm));
	if (r->cfg && r->cfg->maxretry) {
		ctl_jnum(j, "maxretry", r->cfg->maxretry);
		ctl_jnum(j, "findtime_ms", r->cfg->findtime_ns / RL_NS_PER_MS);
		ctl_jnum(j, "bantime_ms", r->cfg->bantime_ns / RL_NS_PER_MS);
	}
	ctl_jnum(j, "allowed", r->allowed);
	ctl_jnum(j, "denied", r->denied);
}

static void json_rule(struct ctl_json *j, const struct ctl_snapshot *s,
		      const struct ctl_rule *r)
{
	ctl_jopen(j, NULL, '{');
	ctl_jtext(j, "name", r->name);
	ctl_jbool(j, "retired", !r->cfg && (!s->config_err || s->config_kept));
	ctl_json_rule_def(j, r);
	ctl_jnum(j, "bans", r->bans);
	ctl_jnum(j, "store_down", r->store_down);
	ctl_jclose(j, '}');
}

static void json(struct ctl *c, const struct ctl_snapshot *s)
{
	struct ctl_json j = { 0, { 1 } };
	char url[RL_URL_MAX];
	const char *want, *got;

	ctl_jopen(&j, NULL, '{');
	ctl_jopen(&j, "config", '{');
	ctl_jtext(&j, "path", c->path);
	ctl_jtext(&j, "state", config_states[s->config]);
	ctl_jbool(&j, "in_force", s->config == CTL_CONFIG_IN_FORCE);
	if (s->config_since_ms)
		ctl_jnum(&j, "since_ms", s->config_since_ms);
	else
		ctl_jnull(&j, "since_ms");
	ctl_jnum(&j, "reloads", s->config_reloads);
	ctl_jtext(&j, "error", s->config_err);
	ctl_jbool(&j, "kept", s->config_kept);
	ctl_jclose(&j, '}');
	/* The file on disk, refused; the rules and mode below are then the
	 * text in force (config.kept), when the segment keeps it. */
	ctl_jtext(&j, "config_refused", s->config_err);
	ctl_jtext(&j, "mode", c->cfg ? mode_name(c->cfg) : NULL);
	ctl_jtext(&j, "shm", c->shm);
	ctl_jnum(&j, "segment_bytes", s->table.size);

	ctl_jopen(&j, "rules", '[');
	for (unsigned i = 0; i < s->nrules; i++)
		json_rule(&j, s, &s->rules[i]);
	ctl_jclose(&j, ']');

	ctl_jopen(&j, "bans", '{');
	ctl_jnum(&j, "active", s->bans_active);
	ctl_jnum(&j, "refusals", s->ban_refusals);
	ctl_jnum(&j, "issued", s->bans_issued);
	ctl_jclose(&j, '}');

	ctl_jopen(&j, "table", '{');
	ctl_jnum(&j, "capacity", s->table.capacity);
	ctl_jnum(&j, "keys", s->table.keys);
	ctl_jnum(&j, "occupied", s->table.occupied);
	ctl_jnum(&j, "evictions", s->table.evictions);
	ctl_jnum(&j, "overflows", s->table.overflows);
	ctl_jclose(&j, '}');

	ctl_jopen(&j, "agent", '{');
	ctl_jbool(&j, "expected", s->agent_expected);
	ctl_jbool(&j, "alive", s->agent_alive);
	if (s->agent_pid)
		ctl_jnum(&j, "pid", s->agent_pid);
	else
		ctl_jnull(&j, "pid");
	if (s->agent_seen)
		ctl_jnum(&j, "heartbeat_age_ms", s->agent_beat_age_ns / RL_NS_PER_MS);
	else
		ctl_jnull(&j, "heartbeat_age_ms");
	if (s->synced)
		ctl_jnum(&j, "last_sync_age_ms", s->sync_age_ns / RL_NS_PER_MS);
	else
		ctl_jnull(&j, "last_sync_age_ms");
	ctl_jnum(&j, "syncs", s->syncs);
	ctl_jnum(&j, "hosts_alive", s->hosts_alive);
	ctl_jbool(&j, "hosts_alive_stale", hosts_stale(s));
	ctl_jnum(&j, "sync_interval_ms", s->sync_interval_ms);
	if (s->agent_log[0])
		ctl_jtext(&j, "log", s->agent_log);
	else
		ctl_jnull(&j, "log");
	ctl_jclose(&j, '}');

	/* what a reload changed that only a restart applies */
	ctl_jopen(&j, "restart_needed", '[');
	for (unsigned i = 0; i < NRESTART; i++)
		if (s->restart_needed & (1u << i))
			ctl_jtext(&j, NULL, restart_names[i]);
	ctl_jclose(&j, ']');
	if (s->restart_needed)
		ctl_jnum(&j, "restart_needed_since_ms", s->restart_since_ms);
	else
		ctl_jnull(&j, "restart_needed_since_ms");

	ctl_jopen(&j, "store", '{');
	ctl_jtext(&j, "state", store_states[s->store]);
	if (c->cfg && c->cfg->redis) {
		ctl_fmt_url(url, sizeof(url), c->cfg->redis_url);
		ctl_jtext(&j, "url", url);
	} else {
		ctl_jnull(&j, "url");
	}
	if (s->store == CTL_STORE_DOWN)
		ctl_jnum(&j, "down_for_ms", s->store_down_ms);
	else
		ctl_jnull(&j, "down_for_ms");
	/* redis-cluster://, while up (only then): the map's masters, and how
	 * many the agent cannot reach */
	if (s->store == CTL_STORE_UP && s->masters) {
		ctl_jnum(&j, "masters", s->masters);
		ctl_jnum(&j, "masters_unreachable", s->masters_down);
	}
	ctl_jclose(&j, '}');

	ctl_jopen(&j, "xdp", '{');
	ctl_jbool(&j, "configured", s->xdp_configured);
	ctl_jopen(&j, "interfaces", '[');
	for (unsigned i = 0; c->cfg && c->cfg->xdp && i < c->cfg->nifaces; i++)
		ctl_jtext(&j, NULL, c->cfg->ifaces[i]);
	ctl_jclose(&j, ']');
	want = c->cfg && c->cfg->xdp ? ctl_xdp_mode_name(c->cfg->xdp_mode) : NULL;
	got = ctl_xdp_got(&s->xdp_rec);
	ctl_jtext(&j, "mode", got ? got : want);
	ctl_jtext(&j, "configured_mode", want);
	ctl_xdp_json_ifaces(&j, c->cfg, &s->xdp_rec);
	ctl_jbool(&j, "attached", s->xdp_attached);
	if (s->xdp_maps) {
		ctl_jnum(&j, "packets", s->xdp.packets);
		ctl_jnum(&j, "dropped", s->xdp.dropped);
	} else {
		ctl_jnull(&j, "packets");
		ctl_jnull(&j, "dropped");
	}
	ctl_jclose(&j, '}');
	ctl_jclose(&j, '}');
	putchar('\n');
}

struct status_opts {
	const char *rule;
	int json;
};

static const struct ctl_option status_options[] = {
	CTL_OPTION(CTL_OPT_STRING, struct status_opts, rule, .positional = 1,
		   .metavar = "RULE"),
	CTL_OPTION(CTL_OPT_BOOL, struct status_opts, json, .name = "json",
		   .help = "the same as one JSON object"),
	CTL_END_OPTIONS,
};

static int run_status(struct ctl *c, const void *opts)
{
	const struct status_opts *o = opts;
	struct ctl_snapshot s;
	int rc;

	if ((rc = ctl_open(c, o->rule ? 0 : CTL_BAD_CONFIG_OK)))
		return rc;
	if (o->rule)
		return ctl_status_rule(c, o->rule, o->json);
	ctl_snapshot(c, &s);
	if (o->json)
		json(c, &s);
	else
		human(c, &s);
	return ctl_flush();
}

const struct ctl_command ctl_cmd_status = {
	.name = "status",
	.help = "rules, counts, bans, table, agent, Redis, XDP",
	.more = "  The configuration is in force when the servers apply the "
		"file as it is now;\n"
		"  a change is picked up within a second of a server's next "
		"request.\n"
		"  With RULE, that rule alone, as fail2ban's status JAIL: its "
		"counts, the keys\n"
		"  at their limit now and the bans its maxretry made.\n",
	.options = status_options,
	.opts_size = sizeof(struct status_opts),
	.run = run_status,
};
