/* SPDX-License-Identifier: MIT */
/*
 * cmd_jail.c - rlshimctl status RULE [--json]: one rule as fail2ban's
 * `status JAIL` shows a jail: what it is, its counts (allowed, denied, of
 * them the store's being down, bans issued), its keys with a state and
 * those at their limit now (the longest wait first), and the live bans its
 * maxretry made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

#include "clock.h"

#define LIMITED_SHOWN 20

struct limited {
	struct rl_slot_view v;
	uint64_t retry_ns;
	int bound;
};

struct jail {
	struct ctl *c;
	int ids[RL_MAX_RULES];        /* 1: an id of the rule's name */
	unsigned keys;                /* with a state */
	struct limited *l;
	unsigned n, max;
	int oom;
};

static int consider(const struct rl_slot_view *v, void *arg)
{
	struct jail *j = arg;
	struct limited e;

	if (v->rule >= RL_MAX_RULES || !j->ids[v->rule])
		return 0;
	j->keys++;
	e.v = *v;
	e.retry_ns = ctl_key_retry(j->c, v, &e.bound);
	if (!e.retry_ns)
		return 0;
	if (j->n == j->max) {
		unsigned max = j->max ? 2 * j->max : 64;
		struct limited *nl = realloc(j->l, max * sizeof(*nl));

		if (!nl) {
			j->oom = 1;
			return 1;
		}
		j->l = nl;
		j->max = max;
	}
	j->l[j->n++] = e;
	return 0;
}

static int longest_wait(const void *a, const void *b)
{
	const struct limited *x = a, *y = b;

	if (x->retry_ns != y->retry_ns)
		return x->retry_ns > y->retry_ns ? -1 : 1;
	return x->v.index < y->v.index ? -1 : x->v.index > y->v.index;
}

static uint64_t ms_up(uint64_t ns)
{
	return (ns + RL_NS_PER_MS - 1) / RL_NS_PER_MS;
}

static void json_view(struct ctl *c, struct ctl_json *j,
		      const struct ctl_rule *r, const struct jail *jl)
{
	struct ctl_ban_filter f = { r->name, NULL };
	unsigned nbans;

	ctl_jopen(j, NULL, '{');
	ctl_jtext(j, "rule", r->name);
	ctl_json_rule_def(j, r);
	ctl_jnum(j, "store_down", r->store_down);
	ctl_jnum(j, "bans_issued", r->bans);
	ctl_jnum(j, "keys", jl->keys);
	ctl_jopen(j, "limited", '[');
	for (unsigned i = 0; i < jl->n; i++) {
		char key[RL_KEY_MAX * 4 + 8];
		const struct limited *e = &jl->l[i];

		if (ctl_fmt_view_key(c, &e->v, key, sizeof(key)))
			snprintf(key, sizeof(key), "-");
		ctl_jopen(j, NULL, '{');
		ctl_jtext(j, "key", key);
		ctl_jnum(j, "remaining", e->v.peek.remaining);
		ctl_jnum(j, "limit", e->v.peek.limit);
		ctl_jnum(j, "retry_after_ms", ms_up(e->retry_ns));
		ctl_jbool(j, "retry_is_bound", e->bound);
		ctl_jnum(j, "reset_after_ms", ms_up(e->v.peek.reset_after_ns));
		ctl_jclose(j, '}');
	}
	ctl_jclose(j, ']');
	ctl_jopen(j, "bans", '[');
	ctl_bans_list(c, &f, j, "", &nbans);
	ctl_jclose(j, ']');
	ctl_jclose(j, '}');
	putchar('\n');
}

static int human_view(struct ctl *c, const struct ctl_rule *r,
		      const struct jail *jl)
{
	struct ctl_ban_filter f = { r->name, NULL };
	char rate[48], text[RL_PATH_MAX + 32], a[32], b[32];
	unsigned nbans, shown = jl->n < LIMITED_SHOWN ? jl->n : LIMITED_SHOWN;
	int rc;

	ctl_fmt_rate(rate, sizeof(rate), &r->rate);
	printf("rule:     %s\n", r->name);
	if (r->cfg) {
		ctl_fmt_match(text, sizeof(text), r->cfg);
		printf("match:    %s\n", text);
		ctl_fmt_key(text, sizeof(text), r->cfg);
	} else {
		printf("match:    (not in the file: counted before a reload)\n");
		snprintf(text, sizeof(text), "-");
	}
	printf("limit:    %s, burst %u, key %s, %s\n", rate, r->rate.burst, text,
	       rl_config_algorithm_name(r->algorithm));
	if (r->cfg && r->cfg->maxretry) {
		rl_time_format_duration(a, sizeof(a), r->cfg->findtime_ns);
		rl_time_format_duration(b, sizeof(b), r->cfg->bantime_ns);
		printf("ban:      %u refusals within %s: banned for %s%s\n",
		       r->cfg->maxretry, a, b,
		       r->cfg->bantime_increment ? ", longer each time" : "");
	} else {
		printf("ban:      none (no maxretry)\n");
	}
	printf("requests: %llu allowed, %llu denied",
	       (unsigned long long)r->allowed, (unsigned long long)r->denied);
	if (c->cfg->redis)
		printf(" (%llu of them for the store down)",
		       (unsigned long long)r->store_down);
	printf("\n");
	printf("keys:     %u with a state, %u at their limit now\n", jl->keys,
	       jl->n);
	if (shown) {
		struct ctl_grid g;

		if (ctl_grid_init(&g, 5, shown + 1))
			return ctl_fail("out of memory");
		ctl_grid_add(&g, "KEY");
		ctl_grid_add(&g, "REMAINING");
		ctl_grid_add(&g, "LIMIT");
		ctl_grid_add(&g, "RETRY");
		ctl_grid_add(&g, "RESET");
		g.right[1] = g.right[2] = g.right[3] = g.right[4] = 1;
		for (unsigned i = 0; i < shown; i++) {
			const struct limited *e = &jl->l[i];
			char key[RL_KEY_MAX * 4 + 8];

			if (ctl_fmt_view_key(c, &e->v, key, sizeof(key)))
				snprintf(key, sizeof(key), "-");
			ctl_fmt_dur(a, sizeof(a), e->retry_ns);
			ctl_fmt_dur(b, sizeof(b), e->v.peek.reset_after_ns);
			ctl_grid_add(&g, "%s", key);
			ctl_grid_add(&g, "%u", e->v.peek.remaining);
			ctl_grid_add(&g, "%u", e->v.peek.limit);
			ctl_grid_add(&g, "%s%s", e->bound ? "<=" : "", a);
			ctl_grid_add(&g, "%s", b);
		}
		ctl_grid_print(&g, stdout, "  ");
		ctl_grid_free(&g);
		if (jl->n > shown)
			printf("  ... and %u more (rlshimctl top -n N)\n",
			       jl->n - shown);
	}
	printf("bans:     %llu issued by its maxretry on this host; active:\n",
	       (unsigned long long)r->bans);
	if ((rc = ctl_bans_list(c, &f, NULL, "  ", &nbans)))
		return rc;
	if (!nbans)
		printf("  none\n");
	return 0;
}

int ctl_status_rule(struct ctl *c, const char *rule, int json)
{
	struct ctl_snapshot *s = malloc(sizeof(*s));
	struct jail jl;
	const struct ctl_rule *r = NULL;
	int rc = 0;

	if (!s)
		return ctl_fail("out of memory");
	if ((rc = ctl_rule_known(c, rule))) {
		free(s);
		return rc;
	}
	ctl_snapshot(c, s);
	r = ctl_snapshot_rule(s, rule);
	if (!r) {
		free(s);
		return ctl_fail("rule '%s' has counted nothing yet", rule);
	}
	memset(&jl, 0, sizeof(jl));
	jl.c = c;
	for (unsigned id = 0; id < RL_MAX_RULES; id++)
		jl.ids[id] = strncmp(rl_table_rule_name(c->table, id), rule,
				     RL_RULE_NAME_MAX) == 0;
	rl_table_foreach(c->table, rl_time_now_ns(), consider, &jl);
	if (jl.oom) {
		rc = ctl_fail("out of memory");
		goto out;
	}
	qsort(jl.l, jl.n, sizeof(*jl.l), longest_wait);
	if (json) {
		struct ctl_json j = { 0, { 1 } };

		json_view(c, &j, r, &jl);
	} else {
		rc = human_view(c, r, &jl);
	}
	if (!rc)
		rc = ctl_flush();
out:
	free(jl.l);
	free(s);
	return rc;
}
