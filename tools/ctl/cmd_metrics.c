/* SPDX-License-Identifier: MIT */
/*
 * cmd_metrics.c - rlshimctl metrics: the snapshot (snapshot.c) in Prometheus'
 * text exposition format 0.0.4. Every family has one HELP and one TYPE
 * line before its samples; counters end in _total; labels are per rule and
 * decision only, never per key, so the series are bounded by the rules. A
 * family whose source is absent (no agent, no [redis], no readable XDP
 * maps) is left out rather than sent without samples.
 *
 * There is no listener: node_exporter's textfile collector reads the
 * output. Written to a temporary file and renamed, so that it never reads
 * half of one, from cron every minute or a systemd timer:
 *
 *   rlshimctl metrics > /var/lib/node_exporter/textfile_collector/rlshim.prom.$$ &&
 *     mv /var/lib/node_exporter/textfile_collector/rlshim.prom.$$ \
 *        /var/lib/node_exporter/textfile_collector/rlshim.prom
 */
#include <stdio.h>

#include "ctl.h"

#include "clock.h"

static void family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: backslash, double quote and newline escaped. */
static void label(const char *name, const char *v, int last)
{
	printf("%s=\"", name);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			printf("\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", stdout);
		else
			putchar(*v);
	}
	fputs(last ? "\"" : "\",", stdout);
}

static void sample(const char *name, uint64_t v)
{
	printf("%s %llu\n", name, (unsigned long long)v);
}

/* A sample of rule `rule` with a second label. */
static void rule_sample(const char *name, const char *rule, const char *lname,
			const char *lvalue, uint64_t v)
{
	printf("%s{", name);
	label("rule", rule, 0);
	label(lname, lvalue, 1);
	printf("} %llu\n", (unsigned long long)v);
}

/* A number of seconds from microseconds, as Prometheus writes them. */
static void seconds(uint64_t us)
{
	printf("%llu.%06llu", (unsigned long long)(us / 1000000),
	       (unsigned long long)(us % 1000000));
}

/* The application's answers to the requests each rule counted: by status
 * class, and their service times as a histogram (cumulative buckets). */
static void answers(const struct ctl_snapshot *s)
{
	static const uint64_t le_us[RL_SERVICE_BUCKETS] = RL_SERVICE_LE_US;
	static const char *const classes[5] = { "1xx", "2xx", "3xx", "4xx", "5xx" };

	family("rlshim_responses_total", "counter",
	       "Final answers the application wrote to requests a rule "
	       "counted, by status class.");
	for (unsigned i = 0; i < s->nrules; i++) {
		for (unsigned k = 0; k < 5; k++)
			rule_sample("rlshim_responses_total", s->rules[i].name,
				    "class", classes[k], s->rules[i].answers[k]);
	}
	family("rlshim_response_seconds", "histogram",
	       "The application's service time (request head read to "
	       "answer head written) of requests a rule counted.");
	for (unsigned i = 0; i < s->nrules; i++) {
		const struct ctl_rule *r = &s->rules[i];
		uint64_t cum = 0;

		for (unsigned b = 0; b < RL_SERVICE_BUCKETS; b++) {
			cum += r->service[b];
			fputs("rlshim_response_seconds_bucket{", stdout);
			label("rule", r->name, 0);
			if (le_us[b] == UINT64_MAX) {
				fputs("le=\"+Inf\"", stdout);
			} else {
				fputs("le=\"", stdout);
				printf("%g", (double)le_us[b] / 1e6);
				fputs("\"", stdout);
			}
			printf("} %llu\n", (unsigned long long)cum);
		}
		fputs("rlshim_response_seconds_sum{", stdout);
		label("rule", r->name, 1);
		fputs("} ", stdout);
		seconds(r->service_sum_us);
		fputs("\nrlshim_response_seconds_count{", stdout);
		label("rule", r->name, 1);
		printf("} %llu\n", (unsigned long long)cum);
	}
}

static void rules(const struct ctl_snapshot *s)
{
	if (!s->nrules)
		return;
	family("rlshim_requests_total", "counter",
	       "Requests (and connections, for match = accept rules) decided "
	       "by a rule: allowed once every rule allowed it, denied by the "
	       "rule that denied it.");
	for (unsigned i = 0; i < s->nrules; i++) {
		for (int d = 0; d < 2; d++)
			rule_sample("rlshim_requests_total", s->rules[i].name,
				    "decision", d ? "denied" : "allowed",
				    d ? s->rules[i].denied : s->rules[i].allowed);
	}
	answers(s);
	family("rlshim_bans_issued_total", "counter",
	       "Bans issued by a rule's maxretry on this host.");
	for (unsigned i = 0; i < s->nrules; i++) {
		fputs("rlshim_bans_issued_total{", stdout);
		label("rule", s->rules[i].name, 1);
		printf("} %llu\n", (unsigned long long)s->rules[i].bans);
	}
	if (s->store == CTL_STORE_LOCAL)
		return; /* no [redis]: nothing to be down */
	family("rlshim_store_down_denials_total", "counter",
	       "Of the denied requests, those a rule with on_store_down = "
	       "closed refused because the store was down.");
	for (unsigned i = 0; i < s->nrules; i++) {
		fputs("rlshim_store_down_denials_total{", stdout);
		label("rule", s->rules[i].name, 1);
		printf("} %llu\n", (unsigned long long)s->rules[i].store_down);
	}
}

static void agent(const struct ctl_snapshot *s)
{
	if (s->agent_expected || s->agent_seen) {
		family("rlshim_agent_up", "gauge",
		       "1 if the host agent (rlshimd) has a fresh heartbeat.");
		sample("rlshim_agent_up", (uint64_t)s->agent_alive);
	}
	if (s->store == CTL_STORE_LOCAL)
		return;
	family("rlshim_store_up", "gauge",
	       "1 if the agent reaches Redis, 0 if it does not or there is "
	       "no agent.");
	sample("rlshim_store_up", s->store == CTL_STORE_UP);
	if (s->store == CTL_STORE_UP && s->masters) {
		family("rlshim_store_masters_unreachable", "gauge",
		       "redis-cluster://: masters of the slot map the agent "
		       "cannot reach (their keys as with Redis down).");
		sample("rlshim_store_masters_unreachable", s->masters_down);
	}
	if (!s->synced)
		return;
	family("rlshim_sync_lag_seconds", "gauge",
	       "Seconds since the agent's last completed sync with Redis.");
	printf("rlshim_sync_lag_seconds %llu.%03llu\n",
	       (unsigned long long)(s->sync_age_ns / RL_NS_PER_SEC),
	       (unsigned long long)(s->sync_age_ns % RL_NS_PER_SEC / RL_NS_PER_MS));
}

static int run_metrics(struct ctl *c, const void *opts)
{
	struct ctl_snapshot s;
	int rc;

	(void)opts; /* it takes none */
	if ((rc = ctl_open(c, CTL_BAD_CONFIG_OK)))
		return rc;
	ctl_snapshot(c, &s);

	rules(&s);
	family("rlshim_bans_active", "gauge",
	       "Live bans (addresses and prefixes) in the segment.");
	sample("rlshim_bans_active", s.bans_active);
	family("rlshim_ban_refusals_total", "counter",
	       "Connections and requests refused because of a ban.");
	sample("rlshim_ban_refusals_total", s.ban_refusals);

	family("rlshim_table_capacity", "gauge", "Key slots in the segment.");
	sample("rlshim_table_capacity", s.table.capacity);
	family("rlshim_table_keys", "gauge", "Keys whose state is live.");
	sample("rlshim_table_keys", s.table.keys);
	family("rlshim_table_evictions_total", "counter",
	       "Live keys displaced to make room for new ones.");
	sample("rlshim_table_evictions_total", s.table.evictions);
	family("rlshim_table_overflows_total", "counter",
	       "Decisions made without a slot: every candidate was a key "
	       "being limited.");
	sample("rlshim_table_overflows_total", s.table.overflows);

	agent(&s);

	family("rlshim_config_reloads_total", "counter",
	       "Configurations applied after the first, on this host.");
	sample("rlshim_config_reloads_total", s.config_reloads);
	if (s.config != CTL_CONFIG_UNKNOWN) {
		family("rlshim_config_in_force", "gauge",
		       "1 if the configuration file as it is now is the one "
		       "the servers apply.");
		sample("rlshim_config_in_force", s.config == CTL_CONFIG_IN_FORCE);
	}

	if (s.xdp_configured) {
		/* For the alert on a dropper that is gone (the snapshot
		 * holds a dead agent's flag for nothing). */
		family("rlshim_xdp_attached", "gauge",
		       "1 if the agent is alive and its XDP dropper attached; "
		       "present with [xdp].");
		sample("rlshim_xdp_attached", (uint64_t)s.xdp_attached);
	}
	if (s.xdp_configured && s.xdp_maps) {
		family("rlshim_xdp_packets_total", "counter",
		       "Frames the XDP program saw.");
		sample("rlshim_xdp_packets_total", s.xdp.packets);
		family("rlshim_xdp_drops_total", "counter",
		       "Frames the XDP program dropped for a live ban.");
		sample("rlshim_xdp_drops_total", s.xdp.dropped);
	}
	return ctl_flush();
}

static const struct ctl_option metrics_options[] = {
	CTL_END_OPTIONS,
};

/*
 * The textfile collector's way (above): write a temporary file in the
 * collector's directory and rename it over the old one, so that
 * node_exporter never reads half a file.
 */
const struct ctl_command ctl_cmd_metrics = {
	.name = "metrics",
	.help = "Prometheus text format, for node_exporter",
	.more = "  Families: rlshim_requests_total{rule,decision}, "
		"rlshim_bans_issued_total{rule},\n"
		"  rlshim_store_down_denials_total{rule} (with [redis]), "
		"  rlshim_responses_total{rule,class}, "
		"rlshim_response_seconds{rule} (a histogram),\n"
		"  rlshim_bans_active, rlshim_ban_refusals_total, "
		"rlshim_table_capacity,\n"
		"  rlshim_table_keys, rlshim_table_evictions_total, "
		"rlshim_table_overflows_total,\n"
		"  rlshim_agent_up, rlshim_store_up, "
		"rlshim_store_masters_unreachable,\n"
		"  rlshim_sync_lag_seconds, rlshim_config_reloads_total, "
		"rlshim_config_in_force,\n"
		"  rlshim_xdp_attached, rlshim_xdp_packets_total, "
		"rlshim_xdp_drops_total;\n"
		"  a family whose source is absent (no agent, no [redis], no "
		"[xdp]) is left out.\n\n"
		"  For node_exporter's textfile collector, from cron every "
		"minute or a systemd timer:\n"
		"    rlshimctl metrics > /var/lib/node_exporter/"
		"textfile_collector/rlshim.prom.$$ &&\n"
		"      mv /var/lib/node_exporter/textfile_collector/"
		"rlshim.prom.$$ /var/lib/node_exporter/textfile_collector/"
		"rlshim.prom\n",
	.options = metrics_options,
	.run = run_metrics,
};
