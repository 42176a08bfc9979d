/* SPDX-License-Identifier: MIT */
/*
 * xdp_loader.c - the XDP dropper: load bpf/rlshim.bpf.c from its skeleton,
 * attach it to the [xdp] interfaces, and mirror the segment's live bans into
 * its maps.
 *
 * Open, set the host prefix lengths (rodata), load (maps pinned under
 * RL_XDP_PIN_DIR/<shm>/RL_XDP_LAYOUT/ for rlshimctl), attach, then once a
 * round: when the segment's ban generation moved (a ban came, changed or
 * went) or the earliest mirrored ban expired, walk the live bans and bring
 * the maps in line: add what is new, rewrite what changed, then the
 * prefix directories (bpf/xdp_dir.h) when the prefixes changed, then
 * delete what is gone. In that order a frame never meets a directory that
 * lists no length for a ban in the maps, only (for a moment) lengths that
 * have none left, which cost a probe. A ban of exactly ipv4_prefix /
 * ipv6_prefix (what maxretry makes) goes in its family's host hash, any
 * other in its prefix hash and its trie (bpf/xdp_maps.h). Each ban has a
 * drop counter of its own (an id into rl_drops), zeroed before reuse.
 * In mode = dry-run the maps hold no ban: the program drops nothing.
 *
 * Programs are attached through BPF links, which the kernel detaches when
 * the last descriptor closes: on SIGTERM, and also when the agent is
 * killed, nothing stays attached. The pins are removed on the way out.
 *
 * Without the privileges (CAP_BPF and CAP_NET_ADMIN, or root) the agent
 * says so once and goes on without XDP: the shim still refuses banned
 * clients at accept.
 */
#include <errno.h>
#include <linux/types.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent.h"
#include "ban.h"
#include "xdp_maps.h"
#include "xdp_dir.h"
#include "log.h"
#include "rlshim.skel.h"
#include "clock.h"

_Static_assert(RL_MAX_IFACES <= RL_TABLE_XDP_IFACES,
	       "the segment records every [xdp] interface");

#define RESCAN_NS (10 * RL_NS_PER_SEC) /* and at least this often */

/* A ban as mirrored into the maps. */
struct mirrored {
	uint8_t family;
	uint8_t prefix;
	uint8_t addr[16];
	uint8_t in_map;               /* written into its map */
	uint32_t id;
	uint64_t expires_ms;
};

struct rl_xdp {
	struct rlshim *skel;
	int links[RL_MAX_IFACES];
	unsigned nlinks;
	char pins[RL_PATH_MAX];
	int fd_v4, fd_v6, fd_h4, fd_h6, fd_drops, fd_tries;
	int fd_p[2];                  /* v4, v6: prefix hashes */
	int fd_dir[RL_XDP_NDIRS];     /* bpf/xdp_dir.h's order */
	struct rl_table_xdp rec;      /* ids and modes, for the segment */
	uint8_t host_len[2];          /* v4, v6: what goes in the host hashes */
	struct rl_xdp_tries tries;    /* prefix bans of each family */
	void *zeros;                  /* one per-CPU value of rl_drops */

	/* the directories as written, and the sets they are built from */
	struct rl_xdp_dir *dir[RL_XDP_NDIRS];
	struct rl_xdp_lenset *sets;
	int prefixes_moved;           /* a prefix ban came or went this round */

	/* what the maps hold, sorted by (family, prefix, addr); gone[] what
	 * is to be deleted once the directories no longer list it */
	struct mirrored *have, *want, *gone;
	uint32_t nhave, nwant, ngone, cap;
	uint32_t *free_ids, nfree;
	uint64_t gen, last_scan_ns;
	uint64_t next_expiry_ms;      /* the earliest mirrored expiry */
	unsigned failures;            /* map updates refused (logged once) */
	/* bans sharing an address with `allow` stay out of the maps: XDP
	 * would drop the allowed addresses too (the shim, which checks the
	 * allow list first, refuses the rest at accept) */
	const struct rl_cidr_set *allow;
	uint32_t kept_out, kept_out_said;
};

static int libbpf_log(enum libbpf_print_level level, const char *fmt,
		      va_list ap)
{
	char line[512];
	size_t n;

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	for (char *p = line; *p; p++)
		if (*p == '"')
			*p = '\'';
	rl_log(level == LIBBPF_WARN ? RL_LOG_WARN : RL_LOG_INFO,
	       "msg=\"libbpf\" detail=\"%s\"", line);
	return 0;
}

/* bpffs at /sys/fs/bpf, mounted if it is not; then our directory, into
 * out: RL_XDP_PIN_DIR/<shm>/RL_XDP_LAYOUT. */
static int pin_dir(const char *shm, char *out, size_t len)
{
	struct statfs st;
	char parent[RL_PATH_MAX];

	if (statfs("/sys/fs/bpf", &st) || st.f_type != BPF_FS_MAGIC) {
		mkdir("/sys/fs/bpf", 0700);
		if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"))
			return -errno;
	}
	/* out is the whole path even on failure, for unpin() to take away
	 * what was made of it. */
	snprintf(out, len, "%s/%s/%s", RL_XDP_PIN_DIR, shm, RL_XDP_LAYOUT);
	snprintf(parent, sizeof(parent), "%s/%s", RL_XDP_PIN_DIR, shm);
	if (mkdir(RL_XDP_PIN_DIR, 0700) && errno != EEXIST)
		return -errno;
	if (mkdir(parent, 0700) && errno != EEXIST)
		return -errno;
	if (mkdir(out, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* The maps' names, of this layout and of layout 1 (in <shm>/ itself). */
static const char *const map_names[] = { RL_XDP_MAP_BANS_V4,
	RL_XDP_MAP_BANS_V6, RL_XDP_MAP_HOSTS_V4, RL_XDP_MAP_HOSTS_V6,
	RL_XDP_MAP_PFX_V4, RL_XDP_MAP_PFX_V6, RL_XDP_MAP_DIR_V4,
	RL_XDP_MAP_DIR_V6, RL_XDP_MAP_DIR_V6S, RL_XDP_MAP_TRIES, RL_XDP_MAP_DROPS,
	RL_XDP_MAP_STATS };
static const char *const layout1_names[] = { "rl_bans_v4", "rl_bans_v6",
	"rl_hosts_v4", "rl_hosts_v6", "rl_tries", "rl_drops", "rl_stats" };

static void unpin_names(const char *dir, const char *const *names, size_t n)
{
	char path[RL_PATH_MAX + 32];

	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

/*
 * Remove the pins (ours, or a killed agent's, of this layout or the
 * first): `dir` is RL_XDP_PIN_DIR/<shm>/RL_XDP_LAYOUT, and <shm>/ goes
 * too once empty.
 */
static void unpin(const char *dir)
{
	char shm_dir[RL_PATH_MAX];
	char *slash;

	if (!dir[0])
		return;
	unpin_names(dir, map_names, sizeof(map_names) / sizeof(map_names[0]));
	snprintf(shm_dir, sizeof(shm_dir), "%s", dir);
	slash = strrchr(shm_dir, '/');
	if (!slash)
		return;
	*slash = '\0';
	unpin_names(shm_dir, layout1_names,
		    sizeof(layout1_names) / sizeof(layout1_names[0]));
}

static void pin_at(struct bpf_map *m, const char *dir)
{
	char path[RL_PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%s", dir, bpf_map__name(m));
	bpf_map__set_pin_path(m, path);
}

static const char *const attached_names[] = {
	[RL_XDP_ATTACHED_NONE] = "none",
	[RL_XDP_ATTACHED_NATIVE] = "native",
	[RL_XDP_ATTACHED_GENERIC] = "generic",
	[RL_XDP_ATTACHED_OFFLOAD] = "offload",
};

/* A BPF object's kernel id, 0 if it cannot be told. */
static __u32 map_id(int fd)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

static __u32 prog_id(int fd)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

/* The mode our program `prog` got on `ifindex`, as the kernel reports it;
 * else what the flags that succeeded asked for. */
static uint32_t attached_mode(unsigned ifindex, __u32 prog, __u32 flags)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);

	if (prog && bpf_xdp_query((int)ifindex, 0, &q) == 0) {
		if (q.hw_prog_id == prog)
			return RL_XDP_ATTACHED_OFFLOAD;
		if (q.drv_prog_id == prog)
			return RL_XDP_ATTACHED_NATIVE;
		if (q.skb_prog_id == prog)
			return RL_XDP_ATTACHED_GENERIC;
	}
	return flags & XDP_FLAGS_DRV_MODE ? RL_XDP_ATTACHED_NATIVE
					  : RL_XDP_ATTACHED_GENERIC;
}

/* Attach to interface `i` of [xdp] as configured, recording its index and
 * the mode it got in x->rec. The link fd, or -errno. */
static int attach_one(struct rl_xdp *x, unsigned i, const char *ifname,
		      enum rl_xdp_mode mode)
{
	LIBBPF_OPTS(bpf_link_create_opts, o);
	int prog = bpf_program__fd(x->skel->progs.rl_xdp);
	unsigned ifindex = if_nametoindex(ifname);
	__u32 tries[2];
	int ntries = 0, fd = -EINVAL;

	if (!ifindex) {
		rl_log(RL_LOG_ERROR, "msg=\"xdp: no such interface\" "
		       "interface=%s", ifname);
		return -ENODEV;
	}
	if (mode != RL_XDP_GENERIC)
		tries[ntries++] = XDP_FLAGS_DRV_MODE;
	if (mode != RL_XDP_NATIVE)
		tries[ntries++] = XDP_FLAGS_SKB_MODE;
	for (int t = 0; t < ntries; t++) {
		o.flags = tries[t];
		fd = bpf_link_create(prog, (int)ifindex, BPF_XDP, &o);
		if (fd >= 0) {
			uint32_t got = attached_mode(ifindex, x->rec.prog_id,
						     tries[t]);

			x->rec.ifindex[i] = ifindex;
			x->rec.attached[i] = got;
			rl_log(RL_LOG_INFO, "msg=\"xdp attached\" interface=%s "
			       "mode=%s%s", ifname, attached_names[got],
			       mode == RL_XDP_AUTO && t > 0
				       ? " (native refused by the driver)" : "");
			return fd;
		}
		fd = -errno;
		if (fd == -EBUSY || fd == -EEXIST)
			break; /* another program is there: not ours to replace */
	}
	rl_log(RL_LOG_ERROR, "msg=\"xdp: cannot attach\" interface=%s mode=%s "
	       "err=\"%s\"%s", ifname,
	       mode == RL_XDP_AUTO ? "auto" : mode == RL_XDP_NATIVE ? "native"
								: "generic",
	       strerror(-fd),
	       fd == -EBUSY || fd == -EEXIST
		       ? " hint=\"another XDP program is attached\"" : "");
	return fd;
}

static void xdp_free(struct rl_xdp *x)
{
	if (!x)
		return;
	for (unsigned i = 0; i < x->nlinks; i++)
		close(x->links[i]);
	rlshim__destroy(x->skel);
	unpin(x->pins);
	free(x->have);
	free(x->want);
	free(x->gone);
	for (int d = 0; d < RL_XDP_NDIRS; d++)
		free(x->dir[d]);
	free(x->sets);
	free(x->free_ids);
	free(x->zeros);
	free(x);
}

#define CAP_SYS_ADMIN_BIT 21
#define CAP_BPF_BIT 39

/* 1 if the process has capability `bit` in its effective set. */
static int has_cap(unsigned bit)
{
	char line[256];
	unsigned long long eff = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (eff >> bit) & 1;
}

int rl_agent_xdp_init(struct rl_agent *a)
{
	const struct rl_config *cfg = a->cfg;
	struct rl_xdp *x;
	int rc, ncpu;

	/* A killed agent's record names maps that died with it. */
	rl_table_xdp_record(a->table, NULL);
	if (!cfg->xdp)
		return 0;
	libbpf_set_print(libbpf_log);
	x = calloc(1, sizeof(*x));
	ncpu = libbpf_num_possible_cpus();
	if (!x || ncpu <= 0)
		goto fail;
	x->cap = RL_BANS;
	x->have = calloc(x->cap, sizeof(*x->have));
	x->want = calloc(x->cap, sizeof(*x->want));
	x->gone = calloc(x->cap, sizeof(*x->gone));
	x->free_ids = calloc(RL_XDP_MAX_BANS, sizeof(*x->free_ids));
	x->zeros = calloc((size_t)ncpu, sizeof(__u64));
	/* Fresh maps: directories of zeros, as these. */
	for (int d = 0; d < RL_XDP_NDIRS; d++)
		x->dir[d] = calloc(RL_XDP_DIR_ENTRIES, sizeof(*x->dir[d]));
	x->sets = calloc(RL_XDP_DIR_ENTRIES, sizeof(*x->sets));
	if (!x->have || !x->want || !x->gone || !x->free_ids || !x->zeros ||
	    !x->dir[RL_XDP_DIR4] || !x->dir[RL_XDP_DIR6] ||
	    !x->dir[RL_XDP_DIR6S] || !x->sets)
		goto fail;
	for (uint32_t i = 0; i < RL_XDP_MAX_BANS; i++)
		x->free_ids[i] = RL_XDP_MAX_BANS - 1 - i;
	x->nfree = RL_XDP_MAX_BANS;

	rc = pin_dir(cfg->shm, x->pins, sizeof(x->pins));
	if (rc == -EACCES && (has_cap(CAP_BPF_BIT) || has_cap(CAP_SYS_ADMIN_BIT))) {
		/* systemd mounts /sys/fs/bpf 0700 root: CAP_BPF is not
		 * enough to pin there. */
		rl_log(RL_LOG_WARN, "msg=\"xdp: cannot pin the maps: %s is not "
		       "writable by this user (add CAP_DAC_OVERRIDE, or mount a "
		       "bpffs it can write); banned clients are refused at "
		       "accept only\"", RL_XDP_PIN_DIR);
		xdp_free(x);
		return -1;
	}
	if (rc) {
		if (rc == -EPERM || rc == -EACCES)
			goto unprivileged;
		rl_log(RL_LOG_ERROR, "msg=\"xdp: no bpffs for the maps\" "
		       "err=\"%s\"", strerror(-rc));
		x->pins[0] = '\0';
		goto fail;
	}
	unpin(x->pins); /* a killed agent's */
	pin_dir(cfg->shm, x->pins, sizeof(x->pins));
	x->skel = rlshim__open();
	if (!x->skel)
		goto fail;
	x->host_len[0] = cfg->ipv4_prefix;
	x->host_len[1] = cfg->ipv6_prefix;
	x->skel->rodata->rl_host_len4 = cfg->ipv4_prefix;
	x->skel->rodata->rl_host_len6 = cfg->ipv6_prefix;
	pin_at(x->skel->maps.rl_bans_v4, x->pins);
	pin_at(x->skel->maps.rl_bans_v6, x->pins);
	pin_at(x->skel->maps.rl_hosts_v4, x->pins);
	pin_at(x->skel->maps.rl_hosts_v6, x->pins);
	pin_at(x->skel->maps.rl_pfx_v4, x->pins);
	pin_at(x->skel->maps.rl_pfx_v6, x->pins);
	pin_at(x->skel->maps.rl_dir_v4, x->pins);
	pin_at(x->skel->maps.rl_dir_v6, x->pins);
	pin_at(x->skel->maps.rl_dir_v6s, x->pins);
	pin_at(x->skel->maps.rl_tries, x->pins);
	pin_at(x->skel->maps.rl_drops, x->pins);
	pin_at(x->skel->maps.rl_stats, x->pins);
	rc = rlshim__load(x->skel);
	if (rc) {
		if (rc == -EPERM || rc == -EACCES)
			goto unprivileged;
		rl_log(RL_LOG_ERROR, "msg=\"xdp: cannot load the program\" "
		       "err=\"%s\"", strerror(-rc));
		goto fail;
	}
	x->fd_v4 = bpf_map__fd(x->skel->maps.rl_bans_v4);
	x->fd_v6 = bpf_map__fd(x->skel->maps.rl_bans_v6);
	x->fd_h4 = bpf_map__fd(x->skel->maps.rl_hosts_v4);
	x->fd_h6 = bpf_map__fd(x->skel->maps.rl_hosts_v6);
	x->fd_p[0] = bpf_map__fd(x->skel->maps.rl_pfx_v4);
	x->fd_p[1] = bpf_map__fd(x->skel->maps.rl_pfx_v6);
	x->fd_dir[RL_XDP_DIR4] = bpf_map__fd(x->skel->maps.rl_dir_v4);
	x->fd_dir[RL_XDP_DIR6] = bpf_map__fd(x->skel->maps.rl_dir_v6);
	x->fd_dir[RL_XDP_DIR6S] = bpf_map__fd(x->skel->maps.rl_dir_v6s);
	x->fd_tries = bpf_map__fd(x->skel->maps.rl_tries);
	x->fd_drops = bpf_map__fd(x->skel->maps.rl_drops);
	x->rec.prog_id = prog_id(bpf_program__fd(x->skel->progs.rl_xdp));
	x->rec.map_ids[RL_XDP_ID_BANS_V4] = map_id(x->fd_v4);
	x->rec.map_ids[RL_XDP_ID_BANS_V6] = map_id(x->fd_v6);
	x->rec.map_ids[RL_XDP_ID_HOSTS_V4] = map_id(x->fd_h4);
	x->rec.map_ids[RL_XDP_ID_HOSTS_V6] = map_id(x->fd_h6);
	x->rec.map_ids[RL_XDP_ID_DROPS] = map_id(x->fd_drops);
	x->rec.map_ids[RL_XDP_ID_STATS] =
		map_id(bpf_map__fd(x->skel->maps.rl_stats));
	x->rec.nifaces = cfg->nifaces;
	for (unsigned i = 0; i < cfg->nifaces; i++) {
		int fd = attach_one(x, i, cfg->ifaces[i], cfg->xdp_mode);

		if (fd == -EPERM && x->nlinks == 0)
			goto unprivileged;
		if (fd >= 0)
			x->links[x->nlinks++] = fd;
	}
	if (x->nlinks == 0)
		goto fail;
	x->gen = rl_table_ban_gen(a->table) - 1; /* scan at once */
	a->xdp = x;
	if (cfg->mode == RL_MODE_DRY_RUN)
		rl_log(RL_LOG_INFO, "msg=\"xdp: dry-run: no ban is loaded, "
		       "no packet dropped\"");
	/* The ids before the flag: whoever sees it attached can open the
	 * maps by id where the pins are not visible. */
	rl_table_xdp_record(a->table, &x->rec);
	rl_table_agent_flags_change(a->table, RL_AGENT_XDP, 0);
	return 0;

unprivileged:
	rl_log(RL_LOG_WARN, "msg=\"xdp: rlshimd lacks CAP_BPF and "
	       "CAP_NET_ADMIN; banned clients are refused at accept only\"");
	xdp_free(x);
	return -1;
fail:
	rl_log(RL_LOG_WARN, "msg=\"xdp: not attached; banned clients are "
	       "refused at accept only\"");
	xdp_free(x);
	return -1;
}

void rl_agent_xdp_free(struct rl_agent *a)
{
	if (!a->xdp)
		return;
	rl_table_agent_flags_change(a->table, 0, RL_AGENT_XDP);
	rl_table_xdp_record(a->table, NULL);
	xdp_free(a->xdp);
	a->xdp = NULL;
	rl_log(RL_LOG_INFO, "msg=\"xdp detached\"");
}

/* ---- mirroring ---------------------------------------------------------------- */

static int cmp_mirrored(const void *pa, const void *pb)
{
	const struct mirrored *a = pa, *b = pb;

	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	if (a->prefix != b->prefix)
		return a->prefix < b->prefix ? -1 : 1;
	return memcmp(a->addr, b->addr, 16);
}

static int collect(const struct rl_ban_view *v, void *arg)
{
	struct rl_xdp *x = arg;
	struct mirrored *m;

	if (rl_cidr_set_overlap(x->allow, &v->cidr)) {
		x->kept_out++;
		return 0;
	}
	if (x->nwant == x->cap)
		return 1;
	m = &x->want[x->nwant++];
	memset(m, 0, sizeof(*m));
	m->family = v->cidr.addr.family;
	m->prefix = v->cidr.prefix;
	memcpy(m->addr, v->cidr.addr.bytes, 16);
	m->expires_ms = v->expires_ms;
	return 0;
}

/* 1 if `m` goes in its family's host hash, 0 if in its prefix maps. */
static int is_host(const struct rl_xdp *x, const struct mirrored *m)
{
	return m->prefix == x->host_len[m->family == RL_AF_INET6];
}

static void put_failed(struct rl_xdp *x, const char *what, int err)
{
	if (x->failures++ == 0)
		rl_log(RL_LOG_ERROR, "msg=\"xdp: cannot %s a ban in the map\" "
		       "err=\"%s\"", what, strerror(-err));
}

/* Write or delete `k` in `fd`. 0 or -errno. */
static int put_key(int fd, const void *k, const struct rl_xdp_ban *val,
		   int del)
{
	int rc = del ? bpf_map_delete_elem(fd, k)
		     : bpf_map_update_elem(fd, k, val, BPF_ANY);

	return rc ? -errno : 0;
}

/*
 * Write or delete one ban in its maps: the host hash, or the prefix hash
 * and the trie (both, or as far as the first refusal goes: a delete goes
 * on to the trie, and an add that the trie refuses is taken back from the
 * hash). 0 or -errno.
 */
static int map_put(struct rl_xdp *x, const struct mirrored *m,
		   uint64_t offset_ns, int del)
{
	struct rl_xdp_ban val = { 0, m->id, 0 };
	uint64_t exp_ns = m->expires_ms * RL_NS_PER_MS;
	int v6 = m->family == RL_AF_INET6, rc, rc2;
	union rl_xdp_key k;

	/* Unix time to the program's clock (CLOCK_MONOTONIC). */
	val.expires_ns = exp_ns > offset_ns ? exp_ns - offset_ns : 0;
	memset(&k, 0, sizeof(k));
	if (is_host(x, m)) {
		memcpy(v6 ? k.h6.addr : k.h4.addr, m->addr, v6 ? 16 : 4);
		return put_key(v6 ? x->fd_h6 : x->fd_h4, &k, &val, del);
	}
	if (v6) {
		k.k6.prefixlen = m->prefix;
		memcpy(k.k6.addr, m->addr, 16);
	} else {
		k.k4.prefixlen = m->prefix;
		memcpy(k.k4.addr, m->addr, 4);
	}
	rc = put_key(x->fd_p[v6], &k, &val, del);
	if (rc && !del)
		return rc;
	rc2 = put_key(v6 ? x->fd_v6 : x->fd_v4, &k, &val, del);
	if (rc2 && !del) {
		if (!m->in_map)
			bpf_map_delete_elem(x->fd_p[v6], &k);
		return rc2;
	}
	if (del && rc)
		return rc;
	if (del || !m->in_map) {
		/* The program looks at the prefixes only when there are some. */
		__u32 *n = v6 ? &x->tries.v6 : &x->tries.v4;
		__u32 zero = 0;

		*n = del ? *n - 1 : *n + 1;
		bpf_map_update_elem(x->fd_tries, &zero, &x->tries, BPF_ANY);
		x->prefixes_moved = 1;
	}
	return 0;
}

/*
 * The directories from the prefix bans in have[0..n): rebuilt whole
 * (65,536 sets each: a few milliseconds with 100,000 prefixes), written
 * where they changed.
 */
static void write_dirs(struct rl_xdp *x, const struct mirrored *have,
		       uint32_t n)
{
	for (int d = 0; d < RL_XDP_NDIRS; d++) {
		int rc;

		memset(x->sets, 0, RL_XDP_DIR_ENTRIES * sizeof(*x->sets));
		for (uint32_t i = 0; i < n; i++)
			if (!is_host(x, &have[i]) &&
			    rl_xdp_dir_of(have[i].family == RL_AF_INET6,
					  have[i].prefix) == d)
				rl_xdp_dir_add(x->sets, have[i].addr, d,
					       have[i].prefix);
		rc = rl_xdp_dir_write(x->fd_dir[d], x->sets, x->dir[d]);
		if (rc < 0)
			put_failed(x, "list", rc);
	}
}

void rl_agent_xdp_round(struct rl_agent *a, uint64_t now_ns)
{
	struct rl_xdp *x = a->xdp;
	uint64_t gen, wall_ms, offset_ns;
	uint32_t i = 0, j = 0, n = 0;
	struct mirrored *next;

	if (!x)
		return;
	gen = rl_table_ban_gen(a->table);
	wall_ms = rl_time_wall_ms();
	/* The longest matching prefix answers, live or not: an expired /28
	 * inside a live /24 would let the address through, so expired entries
	 * go as soon as they expire. */
	if (gen == x->gen && wall_ms < x->next_expiry_ms &&
	    now_ns - x->last_scan_ns < RESCAN_NS)
		return;
	x->gen = gen;
	x->last_scan_ns = now_ns;
	x->next_expiry_ms = UINT64_MAX;
	offset_ns = wall_ms * RL_NS_PER_MS - rl_time_now_ns();
	x->nwant = 0;
	x->ngone = 0;
	x->prefixes_moved = 0;
	/* Dry-run never refuses a banned client: no ban in the maps (the
	 * shim logs the refusals it would make). */
	x->allow = &a->cfg->allow;
	x->kept_out = 0;
	if (a->cfg->mode != RL_MODE_DRY_RUN)
		rl_ban_foreach(a->table, wall_ms, collect, x);
	if (x->kept_out != x->kept_out_said) {
		x->kept_out_said = x->kept_out;
		if (x->kept_out)
			rl_log(RL_LOG_INFO, "msg=\"xdp: bans covering the allow "
			       "list are left to the shim\" bans=%u",
			       x->kept_out);
	}
	qsort(x->want, x->nwant, sizeof(*x->want), cmp_mirrored);

	/* Merge what the maps have with what the segment wants; what ends
	 * up in the maps is compacted into want[0..n). */
	while (i < x->nhave || j < x->nwant) {
		int c = i == x->nhave ? 1 : j == x->nwant ? -1
				      : cmp_mirrored(&x->have[i], &x->want[j]);
		int rc;

		if (c < 0) {
			/* gone from the segment: out of the maps, after the
			 * directories */
			x->gone[x->ngone++] = x->have[i++];
			if (!is_host(x, &x->gone[x->ngone - 1]))
				x->prefixes_moved = 1;
			continue;
		}
		next = &x->want[j++];
		if (c == 0) {
			next->id = x->have[i].id;
			next->in_map = 1;
			if (next->expires_ms != x->have[i].expires_ms &&
			    (rc = map_put(x, next, offset_ns, 0)))
				put_failed(x, "update", rc);
			i++;
		} else {
			if (!x->nfree)
				continue; /* cannot be: RL_BANS < RL_XDP_MAX_BANS */
			next->id = x->free_ids[--x->nfree];
			bpf_map_update_elem(x->fd_drops, &next->id, x->zeros,
					    BPF_ANY);
			rc = map_put(x, next, offset_ns, 0);
			if (rc) {
				put_failed(x, "add", rc);
				x->free_ids[x->nfree++] = next->id;
				continue;
			}
			next->in_map = 1;
		}
		if (next->expires_ms < x->next_expiry_ms)
			x->next_expiry_ms = next->expires_ms;
		x->want[n++] = *next;
	}
	if (x->prefixes_moved)
		write_dirs(x, x->want, n);
	for (uint32_t g = 0; g < x->ngone; g++) {
		int rc = map_put(x, &x->gone[g], offset_ns, 1);

		if (rc && rc != -ENOENT)
			put_failed(x, "delete", rc);
		x->free_ids[x->nfree++] = x->gone[g].id;
	}
	/* What the maps hold now is what was wanted. */
	next = x->have;
	x->have = x->want;
	x->want = next;
	x->nhave = n;
}
