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

static const char *xdp_mode_name(enum rl_xdp_mode m)
{
	return m == RL_XDP_NATIVE ? "native" : m == RL_XDP_GENERIC ? "generic"
								 : "auto";
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

static void human_config(struct ctl *c, const struct ctl_snapshot *s)
{
	char when[64];

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
	static const unsigned numeric[] = { 3, 7, 8, 9 };

	if (s->config == CTL_CONFIG_IN_FORCE)
		printf("rules:\n");
	else
		printf("rules:   as the file has them, which is not what the "
		       "servers apply (see config); counts are the servers'\n");
	if (!s->nrules) {
		printf("  (none)\n");
		return;
	}
	if (ctl_grid_init(&g, 10, s->nrules + 1)) {
		printf("  (out of memory)\n");
		return;
	}
	for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++)
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
			ctl_grid_add(&g, "%s", s->config_err ? "?"
					 : s->config == CTL_CONFIG_IN_FORCE
					       ? "(retired)" : "(not in file)");
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
		ctl_grid_add(&g, "%llu", (unsigned long long)r->bans);
	}
	ctl_grid_print(&g, stdout, "  ");
	ctl_grid_free(&g);
}

static void human_agent(struct ctl *c, const struct ctl_snapshot *s)
{
	char a[32], b[32], url[RL_URL_MAX];

	printf(LABEL, "agent:");
	if (s->agent_alive) {
		ctl_fmt_dur(a, sizeof(a), s->agent_beat_age_ns);
		printf("rlshimd pid %llu, alive (heartbeat %s ago)\n",
		       (unsigned long long)s->agent_pid, a);
	} else if (s->agent_seen) {
		ctl_fmt_dur(a, sizeof(a), s->agent_beat_age_ns);
		printf("not running (last heartbeat %s ago)\n", a);
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
	switch (s->store) {
	case CTL_STORE_LOCAL:
		printf("local only\n");
		return;
	case CTL_STORE_UP:
		printf("up, %s\n", url);
		break;
	case CTL_STORE_DOWN:
		ctl_fmt_dur(a, sizeof(a), s->store_down_ms * RL_NS_PER_MS);
		printf("down for %s, %s\n", a, url);
		break;
	case CTL_STORE_NO_AGENT:
		printf("not synced: no agent (rules with on_store_down = "
		       "closed deny), %s\n", url);
		break;
	case CTL_STORE_UNKNOWN:
		printf("not synced yet: no agent has run, %s\n", url);
		break;
	}
	if (!s->synced)
		return;
	ctl_fmt_dur(a, sizeof(a), s->sync_age_ns);
	ctl_fmt_dur(b, sizeof(b), (uint64_t)s->sync_interval_ms * RL_NS_PER_MS);
	printf(LABEL "last sync %s ago, %llu rounds every %s, %u host%s alive\n",
	       "sync:", a, (unsigned long long)s->syncs, b, s->hosts_alive,
	       s->hosts_alive == 1 ? "" : "s");
}

static void human_xdp(struct ctl *c, const struct ctl_snapshot *s)
{
	printf(LABEL, "xdp:");
	if (!s->xdp_configured) {
		printf("not configured\n");
		return;
	}
	if (c->cfg) {
		for (unsigned i = 0; i < c->cfg->nifaces; i++)
			printf("%s ", c->cfg->ifaces[i]);
		printf("(%s), ", xdp_mode_name(c->cfg->xdp_mode));
	}
	printf("%s, ", s->xdp_attached ? "attached" : "not attached");
	if (s->xdp_maps)
		printf("%llu packets, %llu dropped\n",
		       (unsigned long long)s->xdp.packets,
		       (unsigned long long)s->xdp.dropped);
	else
		printf("maps not readable (no agent, or not root)\n");
}

static void human(struct ctl *c, const struct ctl_snapshot *s)
{
	char size[32];

	human_config(c, s);
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

/*
 * A writer just big enough for one object: it places the commas, escapes
 * strings (RFC 8259: quote, backslash and control characters; bytes that
 * are not UTF-8 become U+FFFD, so the output always parses).
 */
struct json {
	int depth;
	int first[8];
};

static void jstr(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putchar('"');
	while (*p) {
		unsigned n = *p < 0x80 ? 0 : (*p & 0xE0) == 0xC0 && *p >= 0xC2 ? 1
			     : (*p & 0xF0) == 0xE0 ? 2
			     : (*p & 0xF8) == 0xF0 && *p <= 0xF4 ? 3 : 4;
		unsigned k;

		/* No overlong forms, no surrogates, nothing past U+10FFFF. */
		if ((*p == 0xE0 && p[1] < 0xA0) || (*p == 0xED && p[1] >= 0xA0) ||
		    (*p == 0xF0 && p[1] < 0x90) || (*p == 0xF4 && p[1] >= 0x90))
			n = 4;

		if (n == 0) {
			if (*p == '"' || *p == '\\')
				printf("\\%c", *p);
			else if (*p < 0x20)
				printf("\\u%04x", *p);
			else
				putchar(*p);
			p++;
			continue;
		}
		for (k = 1; n < 4 && k <= n && (p[k] & 0xC0) == 0x80; k++)
			;
		if (n == 4 || k <= n) {
			fputs("\\ufffd", stdout);
			p++;
			continue;
		}
		fwrite(p, 1, n + 1, stdout);
		p += n + 1;
	}
	putchar('"');
}

static void jkey(struct json *j, const char *key)
{
	if (!j->first[j->depth])
		putchar(',');
	j->first[j->depth] = 0;
	if (key) {
		jstr(key);
		putchar(':');
	}
}

static void jopen(struct json *j, const char *key, char brace)
{
	jkey(j, key);
	putchar(brace);
	j->first[++j->depth] = 1;
}

static void jclose(struct json *j, char brace)
{
	putchar(brace);
	j->depth--;
}

static void jtext(struct json *j, const char *key, const char *v)
{
	jkey(j, key);
	if (v)
		jstr(v);
	else
		fputs("null", stdout);
}

static void jnum(struct json *j, const char *key, uint64_t v)
{
	jkey(j, key);
	printf("%llu", (unsigned long long)v);
}

static void jbool(struct json *j, const char *key, int v)
{
	jkey(j, key);
	fputs(v ? "true" : "false", stdout);
}

static void jnull(struct json *j, const char *key)
{
	jkey(j, key);
	fputs("null", stdout);
}

static void json_rule(struct json *j, const struct ctl_snapshot *s,
		      const struct ctl_rule *r)
{
	char text[RL_PATH_MAX + 32];

	jopen(j, NULL, '{');
	jtext(j, "name", r->name);
	jbool(j, "retired", !r->cfg && !s->config_err);
	if (r->cfg) {
		ctl_fmt_match(text, sizeof(text), r->cfg);
		jtext(j, "match", text);
	} else {
		jnull(j, "match");
	}
	ctl_fmt_rate(text, sizeof(text), &r->rate);
	jtext(j, "rate", text);
	jnum(j, "burst", r->rate.burst);
	if (r->cfg) {
		ctl_fmt_key(text, sizeof(text), r->cfg);
		jtext(j, "key", text);
	} else {
		jnull(j, "key");
	}
	jtext(j, "algorithm", rl_config_algorithm_name(r->algorithm));
	if (r->cfg && r->cfg->maxretry) {
		jnum(j, "maxretry", r->cfg->maxretry);
		jnum(j, "findtime_ms", r->cfg->findtime_ns / RL_NS_PER_MS);
		jnum(j, "bantime_ms", r->cfg->bantime_ns / RL_NS_PER_MS);
	}
	jnum(j, "allowed", r->allowed);
	jnum(j, "denied", r->denied);
	jnum(j, "bans", r->bans);
	jclose(j, '}');
}

static void json(struct ctl *c, const struct ctl_snapshot *s)
{
	struct json j = { 0, { 1 } };
	char url[RL_URL_MAX];

	jopen(&j, NULL, '{');
	jopen(&j, "config", '{');
	jtext(&j, "path", c->path);
	jtext(&j, "state", config_states[s->config]);
	jbool(&j, "in_force", s->config == CTL_CONFIG_IN_FORCE);
	if (s->config_since_ms)
		jnum(&j, "since_ms", s->config_since_ms);
	else
		jnull(&j, "since_ms");
	jnum(&j, "reloads", s->config_reloads);
	jtext(&j, "error", s->config_err);
	jclose(&j, '}');
	jtext(&j, "mode", c->cfg ? mode_name(c->cfg) : NULL);
	jtext(&j, "shm", c->shm);
	jnum(&j, "segment_bytes", s->table.size);

	jopen(&j, "rules", '[');
	for (unsigned i = 0; i < s->nrules; i++)
		json_rule(&j, s, &s->rules[i]);
	jclose(&j, ']');

	jopen(&j, "bans", '{');
	jnum(&j, "active", s->bans_active);
	jnum(&j, "refusals", s->ban_refusals);
	jnum(&j, "issued", s->bans_issued);
	jclose(&j, '}');

	jopen(&j, "table", '{');
	jnum(&j, "capacity", s->table.capacity);
	jnum(&j, "keys", s->table.keys);
	jnum(&j, "occupied", s->table.occupied);
	jnum(&j, "evictions", s->table.evictions);
	jnum(&j, "overflows", s->table.overflows);
	jclose(&j, '}');

	jopen(&j, "agent", '{');
	jbool(&j, "expected", s->agent_expected);
	jbool(&j, "alive", s->agent_alive);
	if (s->agent_pid)
		jnum(&j, "pid", s->agent_pid);
	else
		jnull(&j, "pid");
	if (s->agent_seen)
		jnum(&j, "heartbeat_age_ms", s->agent_beat_age_ns / RL_NS_PER_MS);
	else
		jnull(&j, "heartbeat_age_ms");
	if (s->synced)
		jnum(&j, "last_sync_age_ms", s->sync_age_ns / RL_NS_PER_MS);
	else
		jnull(&j, "last_sync_age_ms");
	jnum(&j, "syncs", s->syncs);
	jnum(&j, "hosts_alive", s->hosts_alive);
	jnum(&j, "sync_interval_ms", s->sync_interval_ms);
	jclose(&j, '}');

	jopen(&j, "store", '{');
	jtext(&j, "state", store_states[s->store]);
	if (c->cfg && c->cfg->redis) {
		ctl_fmt_url(url, sizeof(url), c->cfg->redis_url);
		jtext(&j, "url", url);
	} else {
		jnull(&j, "url");
	}
	if (s->store == CTL_STORE_DOWN)
		jnum(&j, "down_for_ms", s->store_down_ms);
	else
		jnull(&j, "down_for_ms");
	jclose(&j, '}');

	jopen(&j, "xdp", '{');
	jbool(&j, "configured", s->xdp_configured);
	jopen(&j, "interfaces", '[');
	for (unsigned i = 0; c->cfg && c->cfg->xdp && i < c->cfg->nifaces; i++)
		jtext(&j, NULL, c->cfg->ifaces[i]);
	jclose(&j, ']');
	jtext(&j, "mode", c->cfg && c->cfg->xdp ? xdp_mode_name(c->cfg->xdp_mode)
					       : NULL);
	jbool(&j, "attached", s->xdp_attached);
	if (s->xdp_maps) {
		jnum(&j, "packets", s->xdp.packets);
		jnum(&j, "dropped", s->xdp.dropped);
	} else {
		jnull(&j, "packets");
		jnull(&j, "dropped");
	}
	jclose(&j, '}');
	jclose(&j, '}');
	putchar('\n');
}

struct status_opts {
	int json;
};

static const struct ctl_option status_options[] = {
	CTL_OPTION(CTL_OPT_BOOL, struct status_opts, json, .name = "json",
		   .help = "the same as one JSON object"),
	CTL_END_OPTIONS,
};

static int run_status(struct ctl *c, const void *opts)
{
	const struct status_opts *o = opts;
	struct ctl_snapshot s;
	int rc;

	if ((rc = ctl_open(c, CTL_BAD_CONFIG_OK)))
		return rc;
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
		"request.\n",
	.options = status_options,
	.opts_size = sizeof(struct status_opts),
	.run = run_status,
};
