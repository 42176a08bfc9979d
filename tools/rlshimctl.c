/* SPDX-License-Identifier: MIT */
/*
 * rlshimctl - the operator's command line over a live segment.
 *
 *   rlshimctl [-c FILE] check [FILE]              validate a configuration
 *   rlshimctl [-c FILE] ban ADDR[/LEN] [--for DUR] ban on every process of
 *                                                 the host (and, with an
 *                                                 agent and [redis], every
 *                                                 host)
 *   rlshimctl [-c FILE] unban ADDR[/LEN]
 *   rlshimctl [-c FILE] bans                      address, reason, rule,
 *                                                 expires in
 *   rlshimctl [-c FILE] xdp stats                 the XDP dropper's counters
 *                                                 and drops per address
 *
 * Exit status: 0 ok, 1 failure with a one-line reason, 2 usage. The
 * segment is found through the configuration (its `shm`), never created.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/types.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ban.h"
#include "bpf/rlshim.h"
#include "config.h"
#include "time.h"

#define DEFAULT_BANTIME_NS (3600 * RL_NS_PER_SEC)

struct ctl {
	const char *config_path;
	struct rl_config *cfg;
	struct rl_table *table;
};

struct command {
	const char *name;
	const char *args;
	const char *help;
	int (*run)(struct ctl *c, int argc, char **argv);
	int needs_segment;
};

__attribute__((format(printf, 1, 2)))
static int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rlshimctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* ---- check ------------------------------------------------------------------ */

static int cmd_check(struct ctl *c, int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : c->config_path;
	struct rl_config *cfg;
	char err[RL_ERR_MAX];

	if (argc > 2)
		return 2;
	if (!path)
		path = rl_config_path();
	if (!path) {
		printf("no configuration file: the built-in default applies "
		       "(60 requests a minute per client IP)\n");
		return 0;
	}
	if (rl_config_load(path, &cfg, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	printf("%s: ok, %u rule%s, segment %s\n", path, cfg->nrules,
	       cfg->nrules == 1 ? "" : "s", cfg->shm);
	rl_config_free(cfg);
	return 0;
}

/* ---- bans ------------------------------------------------------------------- */

static int parse_target(const char *s, struct rl_cidr *out)
{
	return rl_cidr_parse(s, strlen(s), out);
}

static int cmd_ban(struct ctl *c, int argc, char **argv)
{
	uint64_t dur = DEFAULT_BANTIME_NS, now = rl_time_wall_ms();
	struct rl_cidr cidr;
	char text[RL_CIDR_STRLEN], d[32];
	int rc;

	if (argc == 4 && strcmp(argv[2], "--for") == 0) {
		if (rl_time_parse_duration(argv[3], &dur) || dur == 0)
			return fail("bad duration '%s'", argv[3]);
	} else if (argc != 2) {
		return 2;
	}
	if (parse_target(argv[1], &cidr))
		return fail("not an address or prefix: '%s'", argv[1]);
	rc = rl_ban_add(c->table, &cidr, now + dur / RL_NS_PER_MS, RL_BAN_MANUAL,
			RL_BAN_NO_RULE, now);
	if (rc)
		return fail("the ban table is full around %s", argv[1]);
	rl_cidr_format(&cidr, text, sizeof(text));
	rl_time_format_duration(d, sizeof(d), dur);
	printf("banned %s for %s\n", text, d);
	return 0;
}

static int cmd_unban(struct ctl *c, int argc, char **argv)
{
	struct rl_cidr cidr;
	char text[RL_CIDR_STRLEN];

	if (argc != 2)
		return 2;
	if (parse_target(argv[1], &cidr))
		return fail("not an address or prefix: '%s'", argv[1]);
	rl_cidr_format(&cidr, text, sizeof(text));
	if (rl_ban_remove(c->table, &cidr))
		return fail("%s is not banned", text);
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

	rl_cidr_format(&v->cidr, text, sizeof(text));
	rl_time_format_duration(left, sizeof(left),
				(v->expires_ms - l->now) / 1000 * RL_NS_PER_SEC);
	if (v->rule != RL_BAN_NO_RULE && v->rule < RL_MAX_RULES &&
	    l->c->table->rules[v->rule].name[0])
		rule = l->c->table->rules[v->rule].name;
	if (v->offences)
		snprintf(offences, sizeof(offences), "%u", v->offences);
	if (!l->n++)
		printf("%-43s %-9s %-16s %-8s %-10s %s\n", "ADDRESS", "REASON",
		       "RULE", "OFFENCE", "REFUSED", "EXPIRES IN");
	printf("%-43s %-9s %-16s %-8s %-10u %s\n", text, origin_name(v->origin),
	       rule, offences, v->hits, left);
	return 0;
}

static int cmd_bans(struct ctl *c, int argc, char **argv)
{
	struct list l = { c, rl_time_wall_ms(), 0 };

	(void)argv;
	if (argc != 1)
		return 2;
	rl_ban_foreach(c->table, l.now, print_ban, &l);
	if (!l.n)
		printf("no bans\n");
	return 0;
}

/* ---- xdp stats ---------------------------------------------------------------- */

struct xdp_maps {
	int v4, v6, h4, h6, drops, stats;
	int ncpu;
	__u64 *percpu;
};

static int pinned(const char *dir, const char *name)
{
	char path[RL_PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return bpf_obj_get(path);
}

/* Sum of a per-CPU __u64 at `key` of `fd`. */
static __u64 percpu_sum(struct xdp_maps *m, int fd, __u32 key, unsigned word,
			unsigned words)
{
	__u64 sum = 0;

	if (bpf_map_lookup_elem(fd, &key, m->percpu))
		return 0;
	for (int c = 0; c < m->ncpu; c++)
		sum += m->percpu[(size_t)c * words + word];
	return sum;
}

/* One ban of a trie: its address, what it dropped, its time left. */
static void print_xdp_ban(struct xdp_maps *m, uint8_t family, __u32 prefixlen,
			  const __u8 *addr, const struct rl_xdp_ban *v,
			  uint64_t mono_now)
{
	struct rl_cidr c;
	char text[RL_CIDR_STRLEN], left[32] = "expired";

	memset(&c, 0, sizeof(c));
	c.addr.family = family;
	memcpy(c.addr.bytes, addr, family == RL_AF_INET ? 4 : 16);
	c.prefix = (uint8_t)prefixlen;
	rl_cidr_format(&c, text, sizeof(text));
	if (v->expires_ns > mono_now)
		rl_time_format_duration(left, sizeof(left),
					(v->expires_ns - mono_now) /
						RL_NS_PER_SEC * RL_NS_PER_SEC);
	printf("%-43s %-12llu %s\n", text,
	       (unsigned long long)percpu_sum(m, m->drops, v->id, 0, 1), left);
}

/*
 * The bans of one map. A trie's key starts with its prefix length; a hash
 * map's key is the address alone, at the configured host prefix `host`.
 */
static unsigned list_map(struct xdp_maps *m, int fd, uint8_t family,
			 size_t keylen, int host, uint64_t mono_now)
{
	__u8 key[sizeof(struct rl_xdp_key6)], next[sizeof(struct rl_xdp_key6)];
	void *prev = NULL;
	unsigned n = 0;

	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		struct rl_xdp_ban v;
		__u32 prefixlen = (__u32)host;

		memcpy(key, next, keylen);
		prev = key;
		if (bpf_map_lookup_elem(fd, key, &v))
			continue;
		if (host < 0)
			memcpy(&prefixlen, key, sizeof(prefixlen));
		n++;
		print_xdp_ban(m, family, prefixlen,
			      host < 0 ? key + sizeof(__u32) : key, &v, mono_now);
	}
	return n;
}

static int cmd_xdp(struct ctl *c, int argc, char **argv)
{
	static const char *const names[] = { "packets", "dropped", "expired",
					     "not_ip", "truncated" };
	const unsigned words = sizeof(struct rl_xdp_stats) / sizeof(__u64);
	struct xdp_maps m;
	char dir[RL_PATH_MAX];
	unsigned n;

	if (argc != 2 || strcmp(argv[1], "stats") != 0)
		return 2;
	snprintf(dir, sizeof(dir), "%s/%s", RL_XDP_PIN_DIR, c->cfg->shm);
	if (!c->cfg->xdp)
		return fail("no [xdp] in %s: the dropper is not used",
			    c->cfg->source[0] ? c->cfg->source : "the configuration");
	m.v4 = pinned(dir, RL_XDP_MAP_BANS_V4);
	m.v6 = pinned(dir, RL_XDP_MAP_BANS_V6);
	m.h4 = pinned(dir, RL_XDP_MAP_HOSTS_V4);
	m.h6 = pinned(dir, RL_XDP_MAP_HOSTS_V6);
	m.drops = pinned(dir, RL_XDP_MAP_DROPS);
	m.stats = pinned(dir, RL_XDP_MAP_STATS);
	if (m.v4 < 0 || m.v6 < 0 || m.h4 < 0 || m.h6 < 0 || m.drops < 0 ||
	    m.stats < 0)
		return fail("the XDP dropper is not running: no maps in %s "
			    "(is rlshimd running, as root or with CAP_BPF and "
			    "CAP_NET_ADMIN? see its log)", dir);
	m.ncpu = libbpf_num_possible_cpus();
	m.percpu = calloc((size_t)(m.ncpu > 0 ? m.ncpu : 1),
			  sizeof(struct rl_xdp_stats));
	if (m.ncpu <= 0 || !m.percpu)
		return fail("out of memory");
	printf("xdp: %s, mode %s, maps %s\n",
	       atomic_load(&c->table->hdr->agent_flags) & RL_AGENT_XDP
		       ? "attached" : "not attached",
	       c->cfg->xdp_mode == RL_XDP_NATIVE ? "native"
	       : c->cfg->xdp_mode == RL_XDP_GENERIC ? "generic" : "auto", dir);
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		printf("%-10s %llu\n", names[i],
		       (unsigned long long)percpu_sum(&m, m.stats, 0, i, words));
	printf("\n%-43s %-12s %s\n", "ADDRESS", "DROPPED", "EXPIRES IN");
	n = list_map(&m, m.h4, RL_AF_INET, sizeof(struct rl_xdp_host4),
		     c->cfg->ipv4_prefix, rl_time_now_ns());
	n += list_map(&m, m.v4, RL_AF_INET, sizeof(struct rl_xdp_key4), -1,
		      rl_time_now_ns());
	n += list_map(&m, m.h6, RL_AF_INET6, sizeof(struct rl_xdp_host6),
		      c->cfg->ipv6_prefix, rl_time_now_ns());
	n += list_map(&m, m.v6, RL_AF_INET6, sizeof(struct rl_xdp_key6), -1,
		      rl_time_now_ns());
	if (!n)
		printf("(no bans in the maps)\n");
	free(m.percpu);
	return 0;
}

/* ---- the table of commands -------------------------------------------------- */

static const struct command commands[] = {
	{ "check", "[FILE]", "validate a configuration: file:line: message, "
	  "exit 1", cmd_check, 0 },
	{ "ban", "ADDR[/LEN] [--for DUR]", "ban an address or prefix (default "
	  "for 1h)", cmd_ban, 1 },
	{ "unban", "ADDR[/LEN]", "lift a ban", cmd_unban, 1 },
	{ "bans", "", "list the bans: address, reason, rule, offence, "
	  "connections refused, expires in",
	  cmd_bans, 1 },
	{ "xdp", "stats", "the XDP dropper: packets seen and dropped, drops "
	  "per address", cmd_xdp, 1 },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: rlshimctl [-c FILE] COMMAND [ARGS]\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-6s %-24s %s\n", commands[i].name, commands[i].args,
			commands[i].help);
	fprintf(f, "\n  -c FILE   the configuration (default: $RLSHIM_CONFIG, "
		   "else /etc/rlshim.conf)\n"
		   "exit status: 0 ok, 1 failure, 2 usage\n");
}

static int open_segment(struct ctl *c)
{
	const char *path = c->config_path ? c->config_path : rl_config_path();
	char err[RL_ERR_MAX];
	int rc = path ? rl_config_load(path, &c->cfg, err, sizeof(err))
		      : rl_config_default(&c->cfg);

	if (rc) {
		fprintf(stderr, "rlshimctl: %s\n", err);
		return 1;
	}
	rc = rl_table_open(c->cfg->shm, 0, 0, &c->table);
	if (rc) {
		fprintf(stderr, "rlshimctl: %s%s\n", rl_table_error(),
			rc == -ENOENT ? " (no server under the shim has "
					"accepted a connection yet)" : "");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ctl c = { NULL, NULL, NULL };
	const struct command *cmd = NULL;
	int opt, rc;

	while ((opt = getopt(argc, argv, "+c:h")) != -1) {
		switch (opt) {
		case 'c': c.config_path = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[optind], "help") == 0 || strcmp(argv[optind], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			cmd = &commands[i];
	if (!cmd) {
		fprintf(stderr, "rlshimctl: unknown command '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	argc -= optind;
	argv += optind;
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("usage: rlshimctl [-c FILE] %s %s\n  %s\n", cmd->name,
		       cmd->args, cmd->help);
		return 0;
	}
	if (cmd->needs_segment && (rc = open_segment(&c)))
		return rc;
	rc = cmd->run(&c, argc, argv);
	if (rc == 2)
		fprintf(stderr, "usage: rlshimctl [-c FILE] %s %s\n", cmd->name,
			cmd->args);
	rl_table_close(c.table);
	rl_config_free(c.cfg);
	return rc;
}
