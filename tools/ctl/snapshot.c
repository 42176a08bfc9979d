/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - what status and metrics show, read once: the configuration
 * file against the one in force, the rules' counters summed by name, bans,
 * table fill, the agent's corner of the header, the XDP totals. Plus the
 * formatters and the column printer the commands share.
 *
 * Counters are read one by one, without a lock (there is none to take):
 * each is exact, the set is as consistent as the traffic lets it be.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

#include "ban.h"
#include "spawn.h"
#include "clock.h"
#include "url.h"

/* ---- the configuration in force ------------------------------------------ */

/*
 * The servers record the stamp (rl_config_stamp) of the file they apply and
 * of the last one they refused; the file as it is now has its own. Equal to
 * the first: in force; to the second: refused (the servers keep the previous
 * rules); to neither: edited since, and a server applies it (or refuses it)
 * within a second of its next request.
 */
static void config_state(struct ctl *c, struct ctl_snapshot *s)
{
	struct rl_table_config h;
	uint64_t file = rl_config_stamp(c->path);
	uint64_t in_force;

	rl_table_config_read(c->table, &h);
	in_force = h.stamp;
	s->config_reloads = rl_table_counted(c->table, RL_COUNT_CONFIG_RELOADS);
	s->config_since_ms = h.since_ms;
	s->config_err = c->cfg && !c->kept ? NULL : c->cfg_err.msg;
	s->config_kept = c->kept;
	if (!in_force)
		s->config = CTL_CONFIG_UNKNOWN;
	else if (file == in_force)
		s->config = CTL_CONFIG_IN_FORCE;
	else if (file == h.bad_stamp)
		s->config = CTL_CONFIG_REFUSED;
	else
		s->config = CTL_CONFIG_CHANGED;
}

/* ---- rules --------------------------------------------------------------- */

const struct ctl_rule *ctl_snapshot_rule(const struct ctl_snapshot *s,
					 const char *name)
{
	for (unsigned i = 0; i < s->nrules; i++)
		if (strcmp(s->rules[i].name, name) == 0)
			return &s->rules[i];
	return NULL;
}

static struct ctl_rule *rule_named(struct ctl_snapshot *s, const char *name)
{
	return (struct ctl_rule *)ctl_snapshot_rule(s, name);
}

/*
 * The file's rules in its order, then the segment's other names. A name
 * may have several ids (its algorithm changed by a reload): its
 * counters are the sum, so that they never go backwards. A retired name is
 * kept only when it counted something.
 */
static void rules(struct ctl *c, struct ctl_snapshot *s)
{
	unsigned file_rules = c->cfg ? c->cfg->nrules : 0;

	s->nrules = 0;
	for (unsigned i = 0; i < file_rules; i++) {
		struct ctl_rule *r = &s->rules[s->nrules++];

		memset(r, 0, sizeof(*r));
		snprintf(r->name, sizeof(r->name), "%s", c->cfg->rules[i].name);
		r->cfg = &c->cfg->rules[i];
		r->algorithm = r->cfg->algorithm;
		r->rate = r->cfg->rate;
	}
	for (unsigned id = 0; id < RL_MAX_RULES; id++) {
		struct rl_rule_stats st;
		struct ctl_rule *r;

		if (rl_table_rule_stats(c->table, id, &st) || !st.name[0])
			continue;
		r = rule_named(s, st.name);
		if (!r) {
			if (s->nrules == sizeof(s->rules) / sizeof(s->rules[0]))
				continue;
			r = &s->rules[s->nrules++];
			memset(r, 0, sizeof(*r));
			snprintf(r->name, sizeof(r->name), "%s", st.name);
		}
		if (!r->cfg) {
			r->algorithm = st.algorithm;
			r->rate = st.rate;
		}
		r->allowed += st.allowed;
		r->denied += st.denied;
		r->bans += st.bans;
		r->store_down += st.store_down;
		for (unsigned k = 0; k < 5; k++)
			r->answers[k] += st.answers[k];
		for (unsigned b = 0; b < RL_SERVICE_BUCKETS; b++)
			r->service[b] += st.service[b];
		r->service_sum_us += st.service_sum_us;
	}
	/* A file that does not parse has no rules of its own: then every name
	 * of the segment is shown as it is, none as retired. */
	if (!c->cfg)
		return;
	for (unsigned i = file_rules; i < s->nrules;) {
		struct ctl_rule *r = &s->rules[i];

		if (r->allowed || r->denied || r->bans) {
			i++;
			continue;
		}
		memmove(r, r + 1, (s->nrules - i - 1) * sizeof(*r));
		s->nrules--;
	}
}

/* ---- bans, agent, XDP ---------------------------------------------------- */

static int count_ban(const struct rl_ban_view *v, void *arg)
{
	(void)v;
	(*(uint64_t *)arg)++;
	return 0;
}

static void agent(struct ctl *c, struct ctl_snapshot *s)
{
	struct rl_table_agent h;
	uint64_t beat, sync;

	rl_table_agent_read(c->table, &h);
	beat = h.heartbeat_ns;
	sync = h.last_sync_ns;

	s->agent_expected = c->cfg && (c->cfg->redis || c->cfg->xdp);
	s->agent_seen = beat != 0;
	s->agent_alive = rl_agent_alive(c->table, s->now_ns);
	s->agent_pid = h.pid;
	s->agent_beat_age_ns = beat && s->now_ns > beat ? s->now_ns - beat : 0;
	s->agent_flags = h.flags;
	s->synced = sync != 0;
	s->sync_age_ns = sync && s->now_ns > sync ? s->now_ns - sync : 0;
	s->syncs = h.syncs;
	s->hosts_alive = h.hosts_alive;
	s->masters = h.masters;
	s->masters_down = h.masters_down;
	s->sync_interval_ms = h.sync_interval_ms;
	rl_table_agent_log(c->table, s->agent_log, sizeof(s->agent_log));
	s->restart_needed = rl_table_restart_read(c->table, &s->restart_since_ms);

	/* Without the file, the agent's own flag says whether it syncs. */
	if (c->cfg ? !c->cfg->redis : !(s->agent_flags & RL_AGENT_SYNC)) {
		s->store = CTL_STORE_LOCAL;
	} else if (!s->agent_seen) {
		s->store = CTL_STORE_UNKNOWN;
	} else if (!s->agent_alive) {
		/* As the shim sees it (rl_agent_dead): no agent, no store. */
		s->store = CTL_STORE_NO_AGENT;
	} else if (s->agent_flags & RL_AGENT_STORE_DOWN) {
		uint64_t since = h.store_down_since_ms;

		s->store = CTL_STORE_DOWN;
		s->store_down_ms = since && s->wall_ms > since
					   ? s->wall_ms - since : 0;
	} else {
		s->store = CTL_STORE_UP;
	}
}

static void xdp(struct ctl *c, struct ctl_snapshot *s)
{
	struct ctl_xdp m;

	/* The flag outlives an agent that was killed; the kernel detached
	 * its program with it. */
	s->xdp_attached = (s->agent_flags & RL_AGENT_XDP) && s->agent_alive;
	s->xdp_configured = c->cfg ? c->cfg->xdp
				   : !!(s->agent_flags & RL_AGENT_XDP);
	if (!s->xdp_configured)
		return;
	rl_table_xdp_read(c->table, &s->xdp_rec);
	if (ctl_xdp_open(c->table, c->shm, &m) == 0) {
		ctl_xdp_totals(&m, &s->xdp);
		s->xdp_maps = 1;
	}
	ctl_xdp_close(&m);
}

void ctl_snapshot(struct ctl *c, struct ctl_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	s->now_ns = rl_time_now_ns();
	s->wall_ms = rl_time_wall_ms();
	config_state(c, s);
	rules(c, s);
	rl_ban_foreach(c->table, s->wall_ms, count_ban, &s->bans_active);
	s->ban_refusals = rl_table_counted(c->table, RL_COUNT_BAN_REFUSALS);
	s->bans_issued = rl_table_counted(c->table, RL_COUNT_BANS_ISSUED);
	rl_table_stats(c->table, s->now_ns, &s->table);
	agent(c, s);
	xdp(c, s);
}

/* ---- formatting ---------------------------------------------------------- */

void ctl_fmt_rate(char *buf, size_t len, const struct rl_rate *r)
{
	static const struct { uint64_t ns; const char *unit; } units[] = {
		{ RL_NS_PER_SEC, "s" }, { 60 * RL_NS_PER_SEC, "m" },
		{ 3600 * RL_NS_PER_SEC, "h" }, { 86400 * RL_NS_PER_SEC, "d" },
	};
	char d[32];

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (r->period_ns == units[i].ns) {
			snprintf(buf, len, "%u/%s", r->count, units[i].unit);
			return;
		}
	}
	rl_time_format_duration(d, sizeof(d), r->period_ns);
	snprintf(buf, len, "%u/%s", r->count, d);
}

void ctl_fmt_match(char *buf, size_t len, const struct rl_rule_cfg *r)
{
	const char *m = r->method[0] ? r->method : "*";

	if (r->match == RL_MATCH_ACCEPT)
		snprintf(buf, len, "accept");
	else if (!r->method[0] && !r->path[0])
		snprintf(buf, len, "*");
	else
		snprintf(buf, len, "%s %s%s", m, r->path[0] ? r->path : "*",
			 r->path[0] && r->path_prefix ? "*" : "");
}

void ctl_fmt_key(char *buf, size_t len, const struct rl_rule_cfg *r)
{
	/* header:NAME, cookie:NAME, jwt:CLAIM; ip, global */
	int named = rl_config_key_header(r) != NULL;

	snprintf(buf, len, "%s%s%s", rl_config_key_kind(r), named ? ":" : "",
		 named ? r->header : "");
}

void ctl_fmt_dur(char *buf, size_t len, uint64_t ns)
{
	uint64_t ms = ns / RL_NS_PER_MS, s = ns / RL_NS_PER_SEC;

	if (ns < RL_NS_PER_SEC)
		snprintf(buf, len, "%llums", (unsigned long long)ms);
	else if (s < 60)
		snprintf(buf, len, "%llu.%llus", (unsigned long long)s,
			 (unsigned long long)(ms % 1000 / 100));
	else if (s < 3600)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else if (s < 86400)
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	else
		snprintf(buf, len, "%llud%02lluh", (unsigned long long)(s / 86400),
			 (unsigned long long)(s % 86400 / 3600));
}

void ctl_fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	uint64_t v = bytes * 10;
	unsigned u = 0;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
		return;
	}
	v /= 1024;
	while (v >= 10240 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%llu.%llu %s", (unsigned long long)(v / 10),
		 (unsigned long long)(v % 10), units[u]);
}

void ctl_fmt_time(char *buf, size_t len, uint64_t unix_ms)
{
	time_t t = (time_t)(unix_ms / 1000);
	struct tm tm;

	if (!localtime_r(&t, &tm) ||
	    !strftime(buf, len, "%Y-%m-%d %H:%M:%S %Z", &tm))
		snprintf(buf, len, "@%llu", (unsigned long long)t);
}

void ctl_fmt_url(char *buf, size_t len, const char *url)
{
	/* the password never reaches a terminal, a log or a metrics file */
	rl_url_mask(url, buf, len);
}

/* ---- columns ------------------------------------------------------------- */

int ctl_grid_init(struct ctl_grid *g, unsigned ncols, unsigned maxrows)
{
	memset(g, 0, sizeof(*g));
	g->ncols = ncols;
	g->maxrows = maxrows;
	g->cells = calloc((size_t)ncols * maxrows, sizeof(*g->cells));
	g->right = calloc(ncols, sizeof(*g->right));
	if (!g->cells || !g->right) {
		ctl_grid_free(g);
		return -1;
	}
	return 0;
}

void ctl_grid_add(struct ctl_grid *g, const char *fmt, ...)
{
	va_list ap;
	char *cell = NULL;
	int n;

	if (g->nrows >= g->maxrows)
		return;
	va_start(ap, fmt);
	n = vasprintf(&cell, fmt, ap);
	va_end(ap);
	g->cells[(size_t)g->nrows * g->ncols + g->col] = n < 0 ? NULL : cell;
	if (++g->col == g->ncols) {
		g->col = 0;
		g->nrows++;
	}
}

/* Characters, not bytes: UTF-8 continuation bytes take no column. */
static unsigned width(const char *s)
{
	unsigned w = 0;

	for (; s && *s; s++)
		w += ((unsigned char)*s & 0xC0) != 0x80;
	return w;
}

void ctl_grid_print(struct ctl_grid *g, FILE *f, const char *indent)
{
	unsigned w[16] = { 0 };

	for (unsigned r = 0; r < g->nrows; r++)
		for (unsigned k = 0; k < g->ncols && k < 16; k++) {
			unsigned x = width(g->cells[(size_t)r * g->ncols + k]);

			if (x > w[k])
				w[k] = x;
		}
	for (unsigned r = 0; r < g->nrows; r++) {
		fputs(indent, f);
		for (unsigned k = 0; k < g->ncols; k++) {
			const char *s = g->cells[(size_t)r * g->ncols + k];
			unsigned pad = k < 16 ? w[k] - width(s) : 0;
			int last = k + 1 == g->ncols;

			if (!s)
				s = "";
			if (g->right[k])
				fprintf(f, "%*s%s", (int)pad, "", s);
			else
				fprintf(f, "%s%*s", s, last ? 0 : (int)pad, "");
			if (!last)
				fputs("  ", f);
		}
		fputc('\n', f);
	}
}

void ctl_grid_free(struct ctl_grid *g)
{
	if (g->cells)
		for (size_t i = 0; i < (size_t)g->ncols * g->maxrows; i++)
			free(g->cells[i]);
	free(g->cells);
	free(g->right);
	g->cells = NULL;
	g->right = NULL;
}
