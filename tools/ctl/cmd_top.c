/* SPDX-License-Identifier: MIT */
/*
 * cmd_top.c - rlshimctl top [-n N] [-d SECS] [--json] [--show-secrets]: the keys nearest (or
 * over) their limit, once or every SECS seconds until interrupted.
 *
 * One pass over the table (rl_table_foreach: every slot with live state)
 * keeps the N most urgent keys in a heap whose root is the least urgent
 * kept, so a table of millions of keys costs N views of memory and
 * O(keys * log N) comparisons. Urgency: over the limit (nothing remaining)
 * first, longest wait first; then fewest remaining, then most debt.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"

#include "clock.h"

#define TOP_DEFAULT 10

struct entry {
	struct rl_slot_view v;
	uint64_t retry_ns;  /* the wait for the key's next request; 0: none */
	int retry_bound;    /* retry_ns is an upper bound (sliding window) */
};

struct top {
	struct ctl *c;
	struct entry *e;    /* a heap of n, the least urgent at the root */
	unsigned n, max;
	unsigned long seen;
};

/* < 0 when `a` is more urgent than `b`. */
static int urgency(const struct entry *a, const struct entry *b)
{
	int over_a = a->v.peek.remaining == 0, over_b = b->v.peek.remaining == 0;

	if (over_a != over_b)
		return over_a ? -1 : 1;
	if (over_a && a->retry_ns != b->retry_ns)
		return a->retry_ns > b->retry_ns ? -1 : 1;
	if (a->v.peek.remaining != b->v.peek.remaining)
		return a->v.peek.remaining < b->v.peek.remaining ? -1 : 1;
	if (a->v.debt_ns != b->v.debt_ns)
		return a->v.debt_ns > b->v.debt_ns ? -1 : 1;
	return a->v.index < b->v.index ? -1 : a->v.index > b->v.index;
}

static int by_urgency(const void *a, const void *b)
{
	return urgency(a, b);
}

static void swap(struct entry *a, struct entry *b)
{
	struct entry x = *a;

	*a = *b;
	*b = x;
}

static void sift_down(struct top *t, unsigned i)
{
	for (;;) {
		unsigned l = 2 * i + 1, r = l + 1, m = i;

		/* the root is the least urgent: larger urgency() rises */
		if (l < t->n && urgency(&t->e[l], &t->e[m]) > 0)
			m = l;
		if (r < t->n && urgency(&t->e[r], &t->e[m]) > 0)
			m = r;
		if (m == i)
			return;
		swap(&t->e[i], &t->e[m]);
		i = m;
	}
}

static void sift_up(struct top *t, unsigned i)
{
	while (i > 0 && urgency(&t->e[i], &t->e[(i - 1) / 2]) > 0) {
		swap(&t->e[i], &t->e[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
}

static int consider(const struct rl_slot_view *v, void *arg)
{
	struct top *t = arg;
	struct entry e;

	t->seen++;
	e.v = *v;
	e.retry_ns = ctl_key_retry(t->c, v, &e.retry_bound);
	if (t->n < t->max) {
		t->e[t->n++] = e;
		sift_up(t, t->n - 1);
	} else if (urgency(&e, &t->e[0]) < 0) {
		t->e[0] = e;
		sift_down(t, 0);
	}
	return 0;
}

/* ---- the command --------------------------------------------------------- */

struct top_opts {
	unsigned n;
	const char *delay;  /* -d SECS: refresh every SECS seconds */
	int json;
	int show_secrets;
};

static const struct ctl_option top_options[] = {
	CTL_OPTION(CTL_OPT_COUNT, struct top_opts, n, .short_opt = 'n',
		   .metavar = "N", .help = "how many keys (default 10)"),
	CTL_OPTION(CTL_OPT_STRING, struct top_opts, delay, .short_opt = 'd',
		   .metavar = "SECS",
		   .help = "refresh every SECS seconds (0.2, 2) until Ctrl-C"),
	CTL_OPTION(CTL_OPT_BOOL, struct top_opts, json, .name = "json",
		   .help = "the keys as a JSON array of objects"),
	CTL_OPTION(CTL_OPT_BOOL, struct top_opts, show_secrets,
		   .name = "show-secrets",
		   .help = "cookie values as they are (else sha256:DIGEST)"),
	CTL_END_OPTIONS,
};

static const struct top_opts top_defaults = { .n = TOP_DEFAULT };

static void print_json(struct ctl *c, const struct top *t)
{
	struct ctl_json j = { 0, { 1 } };

	ctl_jopen(&j, NULL, '[');
	for (unsigned i = 0; i < t->n; i++) {
		const struct entry *e = &t->e[i];
		char key[RL_KEY_MAX * 4 + 8], rule[RL_RULE_NAME_MAX];
		int global = ctl_fmt_view_key(c, &e->v, key, sizeof(key));

		snprintf(rule, sizeof(rule), "%.*s", RL_RULE_NAME_MAX - 1,
			 rl_table_rule_name(c->table, e->v.rule));
		ctl_jopen(&j, NULL, '{');
		ctl_jtext(&j, "rule", rule);
		ctl_jtext(&j, "key", global ? "-" : key);
		ctl_jnum(&j, "remaining", e->v.peek.remaining);
		ctl_jnum(&j, "limit", e->v.peek.limit);
		ctl_jnum(&j, "retry_after_ms",
			 (e->retry_ns + RL_NS_PER_MS - 1) / RL_NS_PER_MS);
		ctl_jbool(&j, "retry_is_bound", e->retry_bound);
		ctl_jnum(&j, "reset_after_ms",
			 (e->v.peek.reset_after_ns + RL_NS_PER_MS - 1) /
				 RL_NS_PER_MS);
		ctl_jclose(&j, '}');
	}
	ctl_jclose(&j, ']');
	putchar('\n');
}

static void print_grid(struct ctl *c, const struct top *t, struct ctl_grid *g)
{
	g->right[2] = g->right[3] = g->right[4] = g->right[5] = 1;
	ctl_grid_add(g, "RULE");
	ctl_grid_add(g, "KEY");
	ctl_grid_add(g, "REMAINING");
	ctl_grid_add(g, "LIMIT");
	ctl_grid_add(g, "RETRY");
	ctl_grid_add(g, "RESET");
	for (unsigned i = 0; i < t->n; i++) {
		const struct entry *e = &t->e[i];
		char key[RL_KEY_MAX * 4 + 8], retry[40] = "-", reset[32];

		ctl_fmt_view_key(c, &e->v, key, sizeof(key));
		if (e->retry_ns) {
			ctl_fmt_dur(retry + 3, sizeof(retry) - 3, e->retry_ns);
			/* "≤" is three bytes of UTF-8 */
			memcpy(retry, "\xe2\x89\xa4", 3);
		}
		ctl_fmt_dur(reset, sizeof(reset), e->v.peek.reset_after_ns);
		ctl_grid_add(g, "%.*s", RL_RULE_NAME_MAX - 1,
			     rl_table_rule_name(c->table, e->v.rule));
		ctl_grid_add(g, "%s", key);
		ctl_grid_add(g, "%u", e->v.peek.remaining);
		ctl_grid_add(g, "%u", e->v.peek.limit);
		ctl_grid_add(g, "%s", e->retry_ns && !e->retry_bound
					      ? retry + 3 : retry);
		ctl_grid_add(g, "%s", reset);
	}
	if (t->n)
		ctl_grid_print(g, stdout, "");
	else
		printf("no key holds any state: nothing is near its limit\n");
}

/* ---- -d's header: the rules' rates and their last minute ------------------ */

#define SPARK_MAX 60  /* columns: a minute at one a second, at most */

/* What -d keeps from frame to frame: each rule's counts at the last
 * frame, and a ring of its requests/s over the last minute. */
struct live {
	struct ctl_snapshot snap[2];  /* this frame's and the last one's */
	unsigned cur;                 /* snap[cur] is this frame's */
	int have_last;
	unsigned cols;                /* samples in a minute, 1-SPARK_MAX */
	unsigned nsamples, head;      /* the ring: how many, the next slot */
	char names[2 * RL_MAX_RULES][RL_RULE_NAME_MAX];
	double rate[2 * RL_MAX_RULES][SPARK_MAX];
};

/* The bar of `v` out of `max`: one of eight heights, a space for none. */
static const char *bar(double v, double max)
{
	static const char *const bars[] = {
		"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
		"\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88",
	};
	unsigned i;

	if (v <= 0 || max <= 0)
		return " ";
	i = (unsigned)(v / max * 8.0);
	return bars[i > 7 ? 7 : i];
}

/*
 * The header of a -d frame: the time, the table's fill and the store's
 * state, then a row per rule of the file with its requests/s and
 * denied/s since the last frame ("-" at the first) and a sparkline of its
 * requests/s over the last minute, each bar scaled to the minute's most.
 */
static void print_header(struct live *l, double secs)
{
	struct ctl_snapshot *now = &l->snap[l->cur];
	const struct ctl_snapshot *was = &l->snap[l->cur ^ 1];
	char when[32], store[160], fill[32];
	struct ctl_grid g;
	time_t t = (time_t)(now->wall_ms / 1000);
	struct tm tm;
	double dt = l->have_last && now->now_ns > was->now_ns
			    ? (double)(now->now_ns - was->now_ns) / 1e9 : 0;
	unsigned slot = l->head;

	localtime_r(&t, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	ctl_fmt_store_state(store, sizeof(store), now);
	snprintf(fill, sizeof(fill), "%.1f%%",
		 now->table.capacity ? 100.0 * (double)now->table.keys /
					       (double)now->table.capacity
				     : 0.0);
	printf("rlshimctl top %s, every %gs: table %llu of %llu keys (%s), "
	       "store %s\n", when, secs, (unsigned long long)now->table.keys,
	       (unsigned long long)now->table.capacity, fill, store);
	if (dt > 0) {
		l->head = (l->head + 1) % l->cols;
		if (l->nsamples < l->cols)
			l->nsamples++;
	}
	if (ctl_grid_init(&g, 4, 2 * RL_MAX_RULES + 1))
		return;
	g.right[1] = g.right[2] = 1;
	ctl_grid_add(&g, "RULE");
	ctl_grid_add(&g, "REQ/S");
	ctl_grid_add(&g, "DENIED/S");
	ctl_grid_add(&g, "LAST MINUTE");
	for (unsigned i = 0; i < now->nrules; i++) {
		const struct ctl_rule *r = &now->rules[i], *p;
		char spark[SPARK_MAX * 3 + 1];
		double req = 0, den = 0, max = 0;
		size_t at = 0;

		if (!r->cfg || i >= 2 * RL_MAX_RULES)
			continue;
		/* a rule's ring follows its name (a reload reorders) */
		if (strcmp(l->names[i], r->name) != 0) {
			snprintf(l->names[i], sizeof(l->names[i]), "%s", r->name);
			memset(l->rate[i], 0, sizeof(l->rate[i]));
		}
		p = dt > 0 ? ctl_snapshot_rule(was, r->name) : NULL;
		if (p && r->allowed + r->denied >= p->allowed + p->denied) {
			req = (double)(r->allowed + r->denied - p->allowed -
				       p->denied) / dt;
			den = r->denied >= p->denied
				      ? (double)(r->denied - p->denied) / dt
				      : 0;
		}
		if (dt > 0)
			l->rate[i][slot] = req;
		for (unsigned k = 0; k < l->nsamples; k++)
			if (l->rate[i][k] > max)
				max = l->rate[i][k];
		/* oldest first: the ring from its next slot on */
		for (unsigned k = l->cols - l->nsamples; k < l->cols; k++) {
			const char *b = bar(l->rate[i][(l->head + k) % l->cols],
					    max);

			memcpy(spark + at, b, strlen(b));
			at += strlen(b);
		}
		spark[at] = '\0';
		ctl_grid_add(&g, "%s", r->name);
		if (dt > 0) {
			ctl_grid_add(&g, "%.1f", req);
			ctl_grid_add(&g, "%.1f", den);
		} else {
			ctl_grid_add(&g, "-");
			ctl_grid_add(&g, "-");
		}
		ctl_grid_add(&g, "%s", spark);
	}
	ctl_grid_print(&g, stdout, "");
	ctl_grid_free(&g);
}

/* One reading of the table, printed. */
static int show_once(struct ctl *c, const struct top_opts *o, unsigned n,
		     struct live *l, double secs)
{
	struct top t;
	struct ctl_grid g;

	memset(&t, 0, sizeof(t));
	t.c = c;
	t.max = n;
	t.e = calloc(n, sizeof(*t.e));
	if (!t.e || ctl_grid_init(&g, 6, n + 1)) {
		free(t.e);
		return ctl_fail("out of memory");
	}
	rl_table_foreach(c->table, rl_time_now_ns(), consider, &t);
	qsort(t.e, t.n, sizeof(*t.e), by_urgency);
	if (l && !o->json) {
		l->cur ^= 1;
		ctl_snapshot(c, &l->snap[l->cur]);
		print_header(l, secs);
		l->have_last = 1;
	}
	if (o->json)
		print_json(c, &t);
	else
		print_grid(c, &t, &g);
	ctl_grid_free(&g);
	free(t.e);
	return ctl_flush();
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* -d SECS: a positive number of seconds, at most a day. */
static int parse_delay(const char *s, struct timespec *out)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(d) || d <= 0 || d > 86400)
		return -1;
	out->tv_sec = (time_t)d;
	out->tv_nsec = (long)((d - (double)out->tv_sec) * 1e9);
	if (out->tv_sec == 0 && out->tv_nsec == 0)
		return -1;
	return 0;
}

static int run_top(struct ctl *c, const void *opts)
{
	const struct top_opts *o = opts;
	struct timespec delay;
	struct sigaction sa;
	struct live *l = NULL;
	double secs;
	unsigned n = o->n;
	int rc, tty = isatty(STDOUT_FILENO);

	if (o->delay && parse_delay(o->delay, &delay))
		return ctl_usage("top: -d wants seconds, more than 0 and at "
				 "most 86400, not '%s'", o->delay);
	if ((rc = ctl_open(c, CTL_BAD_CONFIG_OK)))
		return rc;
	c->show_secrets = o->show_secrets;
	/* No more rows than the table has slots. */
	if (n > rl_table_capacity(c->table))
		n = rl_table_capacity(c->table);
	if (!o->delay)
		return show_once(c, o, n, NULL, 0);

	/* Until Ctrl-C (or a TERM): exit 0, as top and watch do. No
	 * SA_RESTART, so the sleep ends at the signal. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	secs = (double)delay.tv_sec + (double)delay.tv_nsec / 1e9;
	if (!o->json) {
		l = calloc(1, sizeof(*l));
		if (!l)
			return ctl_fail("out of memory");
		l->cols = secs >= 1 ? (unsigned)ceil(60 / secs) : SPARK_MAX;
		if (l->cols > SPARK_MAX)
			l->cols = SPARK_MAX;
		if (!l->cols)
			l->cols = 1;
	}
	for (unsigned frame = 0; !interrupted; frame++) {
		struct timespec left = delay;

		/* A terminal is redrawn in place; a pipe gets one frame after
		 * another, a blank line apart (JSON: one array per line). */
		if (tty)
			fputs("\033[H\033[2J", stdout);
		else if (frame && !o->json)
			putchar('\n');
		if ((rc = show_once(c, o, n, l, secs))) {
			free(l);
			return rc;
		}
		while (!interrupted && nanosleep(&left, &left) && errno == EINTR)
			;
	}
	free(l);
	return 0;
}

const struct ctl_command ctl_cmd_top = {
	.name = "top",
	.help = "the keys nearest (or over) their limit",
	.more = "  Over the limit first (longest RETRY first), then fewest "
		"REMAINING. RETRY is\n"
		"  the wait for the key's next request; for sliding-window "
		"rules an upper\n"
		"  bound (marked ≤). RESET is the time until the key's "
		"budget is full again.\n"
		"  -d redraws a terminal in place; to a pipe, frames a blank "
		"line apart.\n"
		"  Each -d frame starts with the time, the table's fill, the "
		"store's state,\n"
		"  and per rule its requests/s and denied/s since the last "
		"frame, with a\n"
		"  sparkline of its requests/s over the last minute.\n",
	.options = top_options,
	.opts_size = sizeof(struct top_opts),
	.defaults = &top_defaults,
	.run = run_top,
};
