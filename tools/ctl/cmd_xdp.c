/* SPDX-License-Identifier: MIT */
/*
 * cmd_xdp.c - the XDP dropper's maps, as the agent pinned them under
 * RL_XDP_PIN_DIR/<shm>/RL_XDP_LAYOUT: the totals that status and metrics
 * show, and `rlshimctl xdp stats` (the totals and the drops per ban: the
 * host hashes' and the tries', which hold every prefix ban).
 *
 * Opening a pinned map needs the rights the agent had (root, or CAP_BPF
 * and the bpffs's permissions): without them the maps are "not readable",
 * which status says and metrics leaves out.
 */
#include <errno.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ctl.h"

#include "clock.h"
#include "spawn.h"
#include "xdp_maps.h"
#include "clock.h"

static int pinned(const char *dir, const char *name)
{
	char path[RL_PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = bpf_obj_get(path);
	return fd < 0 ? -errno : fd;
}

/* Map `id`, if it is still the map called `name` (an id of a map freed
 * since may name another). The fd, or -errno. */
static int by_id(__u32 id, const char *name)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);
	int fd;

	if (!id)
		return -ENOENT;
	fd = bpf_map_get_fd_by_id(id);
	if (fd < 0)
		return -errno;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) ||
	    strncmp(info.name, name, sizeof(info.name) - 1) != 0) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

/* The maps by the ids the agent recorded: 0 or -errno. */
static int open_ids(struct ctl_xdp *m, const struct rl_table_xdp *rec)
{
	const __u32 *id = rec->map_ids;

	if ((m->v4 = by_id(id[RL_XDP_ID_BANS_V4], RL_XDP_MAP_BANS_V4)) < 0)
		return m->v4;
	if ((m->v6 = by_id(id[RL_XDP_ID_BANS_V6], RL_XDP_MAP_BANS_V6)) < 0)
		return m->v6;
	if ((m->h4 = by_id(id[RL_XDP_ID_HOSTS_V4], RL_XDP_MAP_HOSTS_V4)) < 0)
		return m->h4;
	if ((m->h6 = by_id(id[RL_XDP_ID_HOSTS_V6], RL_XDP_MAP_HOSTS_V6)) < 0)
		return m->h6;
	if ((m->drops = by_id(id[RL_XDP_ID_DROPS], RL_XDP_MAP_DROPS)) < 0)
		return m->drops;
	if ((m->stats = by_id(id[RL_XDP_ID_STATS], RL_XDP_MAP_STATS)) < 0)
		return m->stats;
	snprintf(m->maps, sizeof(m->maps), "by id %u,%u,%u,%u,%u,%u",
		 id[RL_XDP_ID_BANS_V4], id[RL_XDP_ID_BANS_V6],
		 id[RL_XDP_ID_HOSTS_V4], id[RL_XDP_ID_HOSTS_V6],
		 id[RL_XDP_ID_DROPS], id[RL_XDP_ID_STATS]);
	return 0;
}

/* Close what is open, and mark all as not. */
static void close_maps(struct ctl_xdp *m)
{
	int *fds[] = { &m->v4, &m->v6, &m->h4, &m->h6, &m->drops, &m->stats };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

static int open_pinned(const char *shm, struct ctl_xdp *m);

int ctl_xdp_open(struct rl_table *t, const char *shm, struct ctl_xdp *m)
{
	const size_t value = sizeof(struct rl_xdp_stats);
	struct rl_table_xdp rec;
	int rc;

	memset(m, 0, sizeof(*m));
	m->v4 = m->v6 = m->h4 = m->h6 = m->drops = m->stats = -1;
	rc = open_pinned(shm, m);
	if (rc && rc != -EPROTO && rc != -ENOMEM) {
		/* Not visible here (a mount namespace of its own) or not
		 * readable: the maps by the ids the agent attached with. */
		rl_table_xdp_read(t, &rec);
		close_maps(m);
		if (rec.prog_id &&
		    (rl_table_agent_flags(t) & RL_AGENT_XDP) &&
		    open_ids(m, &rec) == 0)
			rc = 0;
	}
	if (rc)
		return rc;
	m->ncpu = libbpf_num_possible_cpus();
	if (m->ncpu <= 0)
		return m->ncpu < 0 ? m->ncpu : -EINVAL;
	/* The largest per-CPU value read: the stats entry. */
	m->percpu = calloc((size_t)m->ncpu, value);
	return m->percpu ? 0 : -ENOMEM;
}

/* The pinned maps: 0, -EPROTO for an older agent's, or -errno. */
static int open_pinned(const char *shm, struct ctl_xdp *m)
{
	snprintf(m->dir, sizeof(m->dir), "%s/%s/%s", RL_XDP_PIN_DIR, shm,
		 RL_XDP_LAYOUT);
	snprintf(m->maps, sizeof(m->maps), "%s", m->dir);
	if ((m->v4 = pinned(m->dir, RL_XDP_MAP_BANS_V4)) < 0) {
		char old[RL_PATH_MAX];
		int fd;

		/* Layout 1 pinned in <shm>/ itself: an older agent's maps,
		 * whose keys and counts are not read as these. */
		snprintf(old, sizeof(old), "%s/%s", RL_XDP_PIN_DIR, shm);
		fd = pinned(old, RL_XDP_MAP_STATS);
		if (fd >= 0) {
			close(fd);
			return -EPROTO;
		}
		return m->v4;
	}
	if ((m->v6 = pinned(m->dir, RL_XDP_MAP_BANS_V6)) < 0)
		return m->v6;
	if ((m->h4 = pinned(m->dir, RL_XDP_MAP_HOSTS_V4)) < 0)
		return m->h4;
	if ((m->h6 = pinned(m->dir, RL_XDP_MAP_HOSTS_V6)) < 0)
		return m->h6;
	if ((m->drops = pinned(m->dir, RL_XDP_MAP_DROPS)) < 0)
		return m->drops;
	if ((m->stats = pinned(m->dir, RL_XDP_MAP_STATS)) < 0)
		return m->stats;
	return 0;
}

void ctl_xdp_close(struct ctl_xdp *m)
{
	close_maps(m);
	free(m->percpu);
	m->percpu = NULL;
}

/* ---- the mode attached --------------------------------------------------- */

static const char *const attached_names[] = {
	[RL_XDP_ATTACHED_NONE] = NULL,
	[RL_XDP_ATTACHED_NATIVE] = "native",
	[RL_XDP_ATTACHED_GENERIC] = "generic",
	[RL_XDP_ATTACHED_OFFLOAD] = "offload",
};

static const char *attached_name(uint32_t a)
{
	return a < sizeof(attached_names) / sizeof(attached_names[0])
		       ? attached_names[a] : NULL;
}

const char *ctl_xdp_mode_name(enum rl_xdp_mode m)
{
	return m == RL_XDP_NATIVE ? "native" : m == RL_XDP_GENERIC ? "generic"
								 : "auto";
}

const char *ctl_xdp_got(const struct rl_table_xdp *rec)
{
	const char *got = NULL;

	if (!rec->prog_id)
		return NULL;
	for (unsigned i = 0; i < rec->nifaces; i++) {
		const char *n = attached_name(rec->attached[i]);

		if (!n)
			continue;
		if (got && strcmp(got, n) != 0)
			return "mixed";
		got = n;
	}
	return got;
}

void ctl_xdp_fmt_mode(char *buf, size_t len, const struct rl_config *cfg,
		      const struct rl_table_xdp *rec, int inner)
{
	const char *got = ctl_xdp_got(rec);
	const char *want = cfg && cfg->xdp ? ctl_xdp_mode_name(cfg->xdp_mode)
					   : NULL;
	size_t n = 0;

	buf[0] = '\0';
	if (!got) {
		snprintf(buf, len, "%s", want ? want : "unknown");
		return;
	}
	if (strcmp(got, "mixed") != 0 || !cfg) {
		n = (size_t)snprintf(buf, len, "%s", got);
	} else {
		for (unsigned i = 0; i < rec->nifaces && i < cfg->nifaces &&
		     n < len; i++) {
			const char *a = attached_name(rec->attached[i]);

			if (a)
				n += (size_t)snprintf(buf + n, len - n, "%s%s %s",
						      n ? ", " : "",
						      cfg->ifaces[i], a);
		}
	}
	if (want && strcmp(want, got) != 0 && n < len)
		snprintf(buf + n, len - n, inner ? ", configured %s"
						 : " (configured %s)", want);
}

/* Sum over the CPUs of the __u64 `word` of `words` at `key` of `fd`; 0 when
 * the entry cannot be read. */
static __u64 percpu_sum(struct ctl_xdp *m, int fd, __u32 key, unsigned word,
			unsigned words)
{
	const __u64 *v = m->percpu;
	__u64 sum = 0;

	if (bpf_map_lookup_elem(fd, &key, m->percpu))
		return 0;
	for (int c = 0; c < m->ncpu; c++)
		sum += v[(size_t)c * words + word];
	return sum;
}

void ctl_xdp_totals(struct ctl_xdp *m, struct ctl_xdp_totals *out)
{
	const unsigned words = sizeof(struct rl_xdp_stats) / sizeof(__u64);

	out->packets = percpu_sum(m, m->stats, 0, 0, words);
	out->dropped = percpu_sum(m, m->stats, 0, 1, words);
	out->expired = percpu_sum(m, m->stats, 0, 2, words);
	out->not_ip = percpu_sum(m, m->stats, 0, 3, words);
	out->truncated = percpu_sum(m, m->stats, 0, 4, words);
}

/* ---- xdp stats ----------------------------------------------------------- */

/* One ban of a map: its address, what it dropped, its time left. */
static void print_xdp_ban(struct ctl_xdp *m, uint8_t family, __u32 prefixlen,
			  const __u8 *addr, const struct rl_xdp_ban *v,
			  uint64_t mono_now, struct ctl_json *j)
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
	if (j) {
		ctl_jopen(j, NULL, '{');
		ctl_jtext(j, "address", text);
		ctl_jnum(j, "prefix", prefixlen);
		ctl_jnum(j, "dropped", percpu_sum(m, m->drops, v->id, 0, 1));
		if (v->expires_ns > mono_now)
			ctl_jnum(j, "expires_in_ms",
				 (v->expires_ns - mono_now) / RL_NS_PER_MS);
		else
			ctl_jnull(j, "expires_in_ms");
		ctl_jclose(j, '}');
		return;
	}
	printf("%-43s %-12llu %s\n", text,
	       (unsigned long long)percpu_sum(m, m->drops, v->id, 0, 1), left);
}

/*
 * The bans of one map. A trie's key starts with its prefix length; a hash
 * map's key is the address alone, at the configured host prefix `host`.
 */
static unsigned list_map(struct ctl_xdp *m, int fd, uint8_t family,
			 size_t keylen, int host, uint64_t mono_now,
			 struct ctl_json *j)
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
			      host < 0 ? key + sizeof(__u32) : key, &v, mono_now,
			      j);
	}
	return n;
}

void ctl_xdp_json_ifaces(struct ctl_json *j, const struct rl_config *cfg,
			 const struct rl_table_xdp *rec)
{
	ctl_jopen(j, "attached_to", '[');
	for (unsigned i = 0; cfg && cfg->xdp && i < cfg->nifaces; i++) {
		const char *a = i < rec->nifaces && rec->prog_id
					? attached_name(rec->attached[i]) : NULL;

		ctl_jopen(j, NULL, '{');
		ctl_jtext(j, "interface", cfg->ifaces[i]);
		if (a) {
			ctl_jnum(j, "ifindex", rec->ifindex[i]);
			ctl_jtext(j, "mode", a);
		} else {
			ctl_jnull(j, "ifindex");
			ctl_jnull(j, "mode");
		}
		ctl_jclose(j, '}');
	}
	ctl_jclose(j, ']');
}

struct xdp_opts {
	const char *what;    /* the subcommand: "stats" */
	int json;
};

static const struct ctl_option xdp_options[] = {
	CTL_OPTION(CTL_OPT_STRING, struct xdp_opts, what, .positional = 1,
		   .required = 1, .metavar = "stats"),
	CTL_OPTION(CTL_OPT_BOOL, struct xdp_opts, json, .name = "json",
		   .help = "the same as one JSON object"),
	CTL_END_OPTIONS,
};

static int run_xdp(struct ctl *c, const void *opts)
{
	const struct xdp_opts *o = opts;
	static const char *const names[] = { "packets", "dropped", "expired",
					     "not_ip", "truncated" };
	struct ctl_xdp m;
	struct ctl_xdp_totals t;
	const uint64_t *tv[] = { &t.packets, &t.dropped, &t.expired,
				 &t.not_ip, &t.truncated };
	struct ctl_json j = { 0, { 1 } }, *jp = NULL;
	struct rl_table_xdp rec;
	char mode[256];
	unsigned n;
	int rc, attached;

	if (strcmp(o->what, "stats") != 0)
		return ctl_usage("xdp: the one subcommand is 'stats'");
	if ((rc = ctl_open(c, 0)))
		return rc;
	if (!c->cfg->xdp)
		return ctl_fail("no [xdp] in %s: the dropper is not used",
				c->cfg->source[0] ? c->cfg->source
						  : "the configuration");
	rc = ctl_xdp_open(c->table, c->shm, &m);
	if (rc == -ENOMEM) {
		ctl_xdp_close(&m);
		return ctl_fail("out of memory");
	}
	if (rc == -EPROTO) {
		rc = ctl_fail("the XDP maps are of another layout than %s "
			      "(an rlshimd of another version runs): restart "
			      "rlshimd", m.dir);
		ctl_xdp_close(&m);
		return rc;
	}
	if (rc) {
		rc = ctl_fail("the XDP dropper is not running: no maps in %s "
			      "(is rlshimd running, as root or with CAP_BPF and "
			      "CAP_NET_ADMIN? see its log)", m.dir);
		ctl_xdp_close(&m);
		return rc;
	}
	/* The flag outlives an agent that was killed; its links, and so the
	 * program, did not. */
	attached = (rl_table_agent_flags(c->table) & RL_AGENT_XDP) &&
		   rl_agent_alive(c->table, rl_time_now_ns());
	rl_table_xdp_read(c->table, &rec);
	ctl_xdp_fmt_mode(mode, sizeof(mode), c->cfg, &rec, 0);
	ctl_xdp_totals(&m, &t);
	if (o->json) {
		const char *got = ctl_xdp_got(&rec);

		ctl_jopen(&j, NULL, '{');
		ctl_jbool(&j, "attached", attached);
		ctl_jtext(&j, "mode", got ? got
					  : ctl_xdp_mode_name(c->cfg->xdp_mode));
		ctl_jtext(&j, "configured_mode",
			  ctl_xdp_mode_name(c->cfg->xdp_mode));
		ctl_xdp_json_ifaces(&j, c->cfg, &rec);
		ctl_jtext(&j, "maps", m.maps);
		for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			ctl_jnum(&j, names[i], *tv[i]);
		ctl_jopen(&j, "bans", '[');
		jp = &j;
	} else {
		printf("xdp: %s, mode %s, maps %s\n",
		       attached ? "attached" : "not attached", mode, m.maps);
		for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			printf("%-10s %llu\n", names[i],
			       (unsigned long long)*tv[i]);
		printf("\n%-43s %-12s %s\n", "ADDRESS", "DROPPED", "EXPIRES IN");
	}
	n = list_map(&m, m.h4, RL_AF_INET, sizeof(struct rl_xdp_host4),
		     c->cfg->ipv4_prefix, rl_time_now_ns(), jp);
	n += list_map(&m, m.v4, RL_AF_INET, sizeof(struct rl_xdp_key4), -1,
		      rl_time_now_ns(), jp);
	n += list_map(&m, m.h6, RL_AF_INET6, sizeof(struct rl_xdp_host6),
		      c->cfg->ipv6_prefix, rl_time_now_ns(), jp);
	n += list_map(&m, m.v6, RL_AF_INET6, sizeof(struct rl_xdp_key6), -1,
		      rl_time_now_ns(), jp);
	if (jp) {
		ctl_jclose(&j, ']');
		ctl_jclose(&j, '}');
		putchar('\n');
	} else if (!n) {
		printf("(no bans in the maps)\n");
	}
	ctl_xdp_close(&m);
	return ctl_flush();
}

const struct ctl_command ctl_cmd_xdp = {
	.name = "xdp",
	.help = "the XDP dropper's packets and drops",
	.more = "  Packets seen, dropped, passed (expired ban, not IP, "
		"truncated), and the\n  drops of each ban in the maps.\n",
	.options = xdp_options,
	.opts_size = sizeof(struct xdp_opts),
	.run = run_xdp,
};
