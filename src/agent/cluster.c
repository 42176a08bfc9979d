/* SPDX-License-Identifier: MIT */
/* cluster.c - Redis Cluster's slots, slot map, redirections and seed URL
 * (cluster.h). Pure functions over text and redisReply trees. */
#include "cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "hash.h"

/* ---- the slot of a key ---------------------------------------------------------- */

/* The cluster specification's table: CRC16/XMODEM, polynomial 0x1021. */
static const uint16_t crc16_tab[256] = {
	0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7,
	0x8108, 0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad, 0xe1ce, 0xf1ef,
	0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
	0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de,
	0x2462, 0x3443, 0x0420, 0x1401, 0x64e6, 0x74c7, 0x44a4, 0x5485,
	0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
	0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4,
	0xb75b, 0xa77a, 0x9719, 0x8738, 0xf7df, 0xe7fe, 0xd79d, 0xc7bc,
	0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
	0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b,
	0x5af5, 0x4ad4, 0x7ab7, 0x6a96, 0x1a71, 0x0a50, 0x3a33, 0x2a12,
	0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
	0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41,
	0xedae, 0xfd8f, 0xcdec, 0xddcd, 0xad2a, 0xbd0b, 0x8d68, 0x9d49,
	0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
	0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78,
	0x9188, 0x81a9, 0xb1ca, 0xa1eb, 0xd10c, 0xc12d, 0xf14e, 0xe16f,
	0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
	0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e,
	0x02b1, 0x1290, 0x22f3, 0x32d2, 0x4235, 0x5214, 0x6277, 0x7256,
	0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
	0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405,
	0xa7db, 0xb7fa, 0x8799, 0x97b8, 0xe75f, 0xf77e, 0xc71d, 0xd73c,
	0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
	0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab,
	0x5844, 0x4865, 0x7806, 0x6827, 0x18c0, 0x08e1, 0x3882, 0x28a3,
	0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
	0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92,
	0xfd2e, 0xed0f, 0xdd6c, 0xcd4d, 0xbdaa, 0xad8b, 0x9de8, 0x8dc9,
	0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
	0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8,
	0x6e17, 0x7e36, 0x4e55, 0x5e74, 0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

uint16_t rl_cluster_crc16(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint16_t crc = 0;

	while (len--)
		crc = (uint16_t)((crc << 8) ^
				 crc16_tab[((crc >> 8) ^ *p++) & 0xff]);
	return crc;
}

unsigned rl_cluster_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len), *close;

	if (open) {
		size_t rest = len - (size_t)(open + 1 - key);

		close = memchr(open + 1, '}', rest);
		if (close && close > open + 1)
			return rl_cluster_crc16(open + 1,
						(size_t)(close - open - 1)) &
			       (RL_CLUSTER_SLOTS - 1);
	}
	return rl_cluster_crc16(key, len) & (RL_CLUSTER_SLOTS - 1);
}

/* ---- the slot map ---------------------------------------------------------------- */

static int is_str(const redisReply *r)
{
	return r && (r->type == REDIS_REPLY_STRING ||
		     r->type == REDIS_REPLY_STATUS);
}

static int str_is(const redisReply *r, const char *s)
{
	return is_str(r) && r->len == strlen(s) &&
	       memcmp(r->str, s, r->len) == 0;
}

/* Copy a string reply into out[cap]; a NIL is "". -EPROTO if too long or
 * not a string. */
static int copy_str(const redisReply *r, char *out, size_t cap)
{
	if (r && r->type == REDIS_REPLY_NIL) {
		out[0] = '\0';
		return 0;
	}
	if (!is_str(r) || r->len >= cap || memchr(r->str, '\0', r->len))
		return -EPROTO;
	memcpy(out, r->str, r->len);
	out[r->len] = '\0';
	return 0;
}

static int get_port(const redisReply *r, int *port)
{
	if (!r || r->type != REDIS_REPLY_INTEGER || r->integer < 1 ||
	    r->integer > 65535)
		return -EPROTO;
	*port = (int)r->integer;
	return 0;
}

/* The value of field `name` in a RESP2 map (name, value, ...), or NULL. */
static const redisReply *field(const redisReply *r, const char *name)
{
	size_t i;

	for (i = 0; i + 1 < r->elements; i += 2)
		if (str_is(r->element[i], name))
			return r->element[i + 1];
	return NULL;
}

/*
 * A node of CLUSTER SLOTS: [host, port, id?, metadata?]. A NULL or empty
 * host (cluster-preferred-endpoint-type unknown-endpoint) is the metadata's
 * "ip" if it has one (Redis 7 sends it then), else "": the node asked.
 */
static int slots_node(const redisReply *r, struct rl_cluster_node *n)
{
	const redisReply *meta, *ip;
	int err;

	memset(n, 0, sizeof(*n));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2)
		return -EPROTO;
	err = copy_str(r->element[0], n->host, sizeof(n->host));
	if (!err)
		err = get_port(r->element[1], &n->port);
	if (!err && r->elements > 2)
		err = copy_str(r->element[2], n->id, sizeof(n->id));
	meta = r->elements > 3 ? r->element[3] : NULL;
	if (!err && !n->host[0] && meta && meta->type == REDIS_REPLY_ARRAY &&
	    meta->elements % 2 == 0 && (ip = field(meta, "ip")) &&
	    ip->type != REDIS_REPLY_NIL)
		err = copy_str(ip, n->host, sizeof(n->host));
	return err;
}

static int same_node(const struct rl_cluster_node *a,
		     const struct rl_cluster_node *b)
{
	if (a->id[0] || b->id[0])
		return strcmp(a->id, b->id) == 0;
	return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* The shard of master `n` (a new one if not seen yet), or -E2BIG. */
static int shard_of(struct rl_cluster_map *m, const struct rl_cluster_node *n,
		    int *is_new)
{
	unsigned i;

	*is_new = 0;
	for (i = 0; i < m->nshards; i++)
		if (same_node(&m->shard[i].master, n))
			return (int)i;
	if (m->nshards == RL_CLUSTER_MASTERS_MAX)
		return -E2BIG;
	memset(&m->shard[m->nshards], 0, sizeof(m->shard[0]));
	m->shard[m->nshards].master = *n;
	*is_new = 1;
	return (int)m->nshards++;
}

static int get_slot(const redisReply *r, unsigned *slot)
{
	if (!r || r->type != REDIS_REPLY_INTEGER || r->integer < 0 ||
	    r->integer >= RL_CLUSTER_SLOTS)
		return -EPROTO;
	*slot = (unsigned)r->integer;
	return 0;
}

/* In owner[]: a slot whose master's endpoint is unknown ("?"). Above any
 * shard index, so rl_cluster_lookup() gives NULL for it. */
#define UNREACHABLE 0xffff

/* Give slots start..end (checked) to shard `idx` (-1: unknown endpoint);
 * a slot given already is a contradiction in the reply. */
static int own(struct rl_cluster_map *m, const redisReply *rs,
	       const redisReply *re, int idx)
{
	unsigned start, end, s;

	if (get_slot(rs, &start) || get_slot(re, &end) || start > end)
		return -EPROTO;
	for (s = start; s <= end; s++)
		if (m->owner[s])
			return -EPROTO;
	for (s = start; s <= end; s++)
		m->owner[s] = idx < 0 ? UNREACHABLE : (uint16_t)(idx + 1);
	if (idx >= 0)
		m->nslots += end - start + 1;
	return 0;
}

static void map_clear(struct rl_cluster_map *m)
{
	m->nshards = 0;
	m->nslots = 0;
	memset(m->owner, 0, sizeof(m->owner));
}

int rl_cluster_map_slots(const redisReply *r, struct rl_cluster_map *out)
{
	struct rl_cluster_node n;
	size_t i, j;
	int err = -EPROTO, idx, is_new;

	map_clear(out);
	if (!r || r->type != REDIS_REPLY_ARRAY)
		goto out_clear;
	for (i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];

		if (!e || e->type != REDIS_REPLY_ARRAY || e->elements < 3) {
			err = -EPROTO;
			goto out_clear;
		}
		err = slots_node(e->element[2], &n);
		if (err)
			goto out_clear;
		idx = -1;
		is_new = 0;
		if (strcmp(n.host, "?") != 0) {
			idx = shard_of(out, &n, &is_new);
			if (idx < 0) {
				err = idx;
				goto out_clear;
			}
		}
		err = own(out, e->element[0], e->element[1], idx);
		if (err)
			goto out_clear;
		for (j = 3; j < e->elements; j++) {
			struct rl_cluster_shard *sh;

			err = slots_node(e->element[j], &n);
			if (err)
				goto out_clear;
			if (!is_new || !strcmp(n.host, "?"))
				continue;
			sh = &out->shard[idx];
			if (sh->nreplicas < RL_CLUSTER_REPLICAS_MAX)
				sh->replica[sh->nreplicas++] = n;
		}
	}
	return 0;
out_clear:
	map_clear(out);
	return err;
}

/* ---- CLUSTER SHARDS ------------------------------------------------------------- */

/* A node of CLUSTER SHARDS. 1 if a usable master (role "master", health
 * not "failed", a known endpoint), 2 if a usable replica (health "online"),
 * 0 if neither; <0 for a node of the wrong shape. */
static int shards_node(const redisReply *r, struct rl_cluster_node *n)
{
	const redisReply *host, *role, *health, *id;
	int err;

	memset(n, 0, sizeof(*n));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements % 2)
		return -EPROTO;
	host = field(r, "endpoint");
	if (!host || host->type == REDIS_REPLY_NIL ||
	    (is_str(host) && host->len == 0))
		host = field(r, "ip");
	role = field(r, "role");
	health = field(r, "health");
	id = field(r, "id");
	err = get_port(field(r, "port"), &n->port);
	if (!err && host)
		err = copy_str(host, n->host, sizeof(n->host));
	if (!err && id)
		err = copy_str(id, n->id, sizeof(n->id));
	if (err)
		return err;
	if (!strcmp(n->host, "?"))
		return 0;
	if (str_is(role, "master"))
		return str_is(health, "failed") ? 0 : 1;
	return health && !str_is(health, "online") ? 0 : 2;
}

int rl_cluster_map_shards(const redisReply *r, struct rl_cluster_map *out)
{
	struct rl_cluster_node n, master, replica[RL_CLUSTER_REPLICAS_MAX];
	size_t i, j;
	int err = -EPROTO, idx, is_new;

	map_clear(out);
	if (!r || r->type != REDIS_REPLY_ARRAY)
		goto out_clear;
	for (i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i], *slots, *nodes;
		unsigned nrep = 0, have_master = 0;

		err = -EPROTO;
		if (!e || e->type != REDIS_REPLY_ARRAY || e->elements % 2)
			goto out_clear;
		slots = field(e, "slots");
		nodes = field(e, "nodes");
		if (!slots || slots->type != REDIS_REPLY_ARRAY ||
		    slots->elements % 2 || !nodes ||
		    nodes->type != REDIS_REPLY_ARRAY)
			goto out_clear;
		for (j = 0; j < nodes->elements; j++) {
			int kind = shards_node(nodes->element[j], &n);

			if (kind < 0) {
				err = kind;
				goto out_clear;
			}
			if (kind == 1 && !have_master) {
				master = n;
				have_master = 1;
			} else if (kind == 2 && nrep < RL_CLUSTER_REPLICAS_MAX) {
				replica[nrep++] = n;
			}
		}
		idx = -1;
		is_new = 0;
		if (have_master && slots->elements) {
			idx = shard_of(out, &master, &is_new);
			if (idx < 0) {
				err = idx;
				goto out_clear;
			}
		}
		for (j = 0; j < slots->elements; j += 2) {
			err = own(out, slots->element[j],
				  slots->element[j + 1], idx);
			if (err)
				goto out_clear;
		}
		if (is_new) {
			memcpy(out->shard[idx].replica, replica,
			       nrep * sizeof(replica[0]));
			out->shard[idx].nreplicas = nrep;
		}
	}
	return 0;
out_clear:
	map_clear(out);
	return err;
}

const struct rl_cluster_shard *rl_cluster_lookup(const struct rl_cluster_map *m,
						 unsigned slot)
{
	if (slot >= RL_CLUSTER_SLOTS || !m->owner[slot] ||
	    m->owner[slot] > m->nshards)
		return NULL;
	return &m->shard[m->owner[slot] - 1];
}

/* ---- the layout ------------------------------------------------------------------ */

unsigned rl_cluster_key_shard(const char *text, size_t len, unsigned nshards)
{
	if (nshards <= 1)
		return 0;
	return (unsigned)(rl_hash_sip13(rl_hash_public_key, text, len) % nshards);
}

int rl_cluster_shard_tag(const char *rule, unsigned shard, unsigned nshards,
			 char *out, size_t len)
{
	unsigned lo, hi, share;
	int n;


	if (nshards < 1)
		nshards = 1;
	/* the rule's shards take the shares in turn from one of its own:
	 * shard S of every rule is not on one master */
	share = (shard + rl_cluster_crc16(rule, strlen(rule)) % nshards) % nshards;
	lo = share * RL_CLUSTER_SLOTS / nshards;
	hi = (share + 1) * RL_CLUSTER_SLOTS / nshards;
	n = snprintf(out, len, "%s:%u", rule, shard);
	/* each try lands in the share with odds 1/nshards: a few dozen tries
	 * for 16 shards, and every share has a tag within 2^20 */
	for (unsigned k = 1; n >= 0 && (size_t)n < len; k++) {
		unsigned slot = rl_cluster_slot(out, (size_t)n);

		if ((slot >= lo && slot < hi) || k > (1u << 20))
			return n;
		n = snprintf(out, len, "%s:%u.%u", rule, shard, k);
	}
	return -ENOSPC;
}

#define NODE_TAG_TRIES (1u << 20)

int rl_cluster_node_tag(const struct rl_cluster_map *m, unsigned shard,
			char *out, size_t len)
{
	char tag[16];

	if (shard >= m->nshards)
		return -ENOENT;
	for (unsigned n = 0; n < NODE_TAG_TRIES; n++) {
		int tl = snprintf(tag, sizeof(tag), "e%u", n);

		if (m->owner[rl_cluster_slot(tag, (size_t)tl)] != shard + 1)
			continue;
		if ((size_t)tl >= len)
			return -ENOSPC;
		memcpy(out, tag, (size_t)tl + 1);
		return tl;
	}
	return -ENOENT;
}

/* ---- redirections --------------------------------------------------------------- */

/* "host:port", "[v6]:port", "v6:port" (split at the last ':') or ":port"
 * in p[0..len). The host may be empty only if `empty_ok`. */
static int parse_hostport(const char *p, size_t len, char *host, size_t cap,
			  int *port, int empty_ok)
{
	const char *colon = NULL, *h = p;
	size_t i, hlen;

	for (i = len; i > 0; i--)
		if (p[i - 1] == ':') {
			colon = p + i - 1;
			break;
		}
	if (!colon || rl_url_port(colon + 1, len - (size_t)(colon + 1 - p), port))
		return -EINVAL;
	hlen = (size_t)(colon - p);
	if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
		h++;
		hlen -= 2;
		if (hlen == 0)
			return -EINVAL;
	}
	if (hlen == 0 && !empty_ok)
		return -EINVAL;
	if (hlen == 1 && *h == '?' && cap > 1) { /* an unknown endpoint */
		memcpy(host, "?", 2);
		return 0;
	}
	return rl_url_host(h, hlen, host, cap);
}

int rl_cluster_parse_redirect(const char *err, size_t len,
			      struct rl_cluster_redirect *out)
{
	const char *p = err, *end = err + len, *sp;
	unsigned long slot = 0;
	size_t word;

	memset(out, 0, sizeof(*out));
	if (len && *p == '-')
		p++;
	if ((size_t)(end - p) >= 6 && memcmp(p, "MOVED ", 6) == 0) {
		word = 6;
	} else if ((size_t)(end - p) >= 4 && memcmp(p, "ASK ", 4) == 0) {
		word = 4;
		out->ask = 1;
	} else {
		return -ENOENT;
	}
	p += word;
	sp = memchr(p, ' ', (size_t)(end - p));
	if (!sp || sp == p || sp - p > 5)
		return -EINVAL;
	for (; p < sp; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		slot = slot * 10 + (unsigned long)(*p - '0');
	}
	if (slot >= RL_CLUSTER_SLOTS)
		return -EINVAL;
	out->slot = (unsigned)slot;
	p = sp + 1;
	while (end > p && (end[-1] == '\r' || end[-1] == '\n'))
		end--;
	if (parse_hostport(p, (size_t)(end - p), out->host, sizeof(out->host),
			   &out->port, 1))
		return -EINVAL;
	if (!strcmp(out->host, "?"))
		return -EHOSTUNREACH;
	return 0;
}

/* ---- the seed URL --------------------------------------------------------------- */

int rl_cluster_parse_url(const char *url, struct rl_cluster_url *out)
{
	struct rl_url u;

	memset(out, 0, sizeof(*out));
	if (rl_url_parse(url, &u) || u.kind != RL_URL_CLUSTER)
		return -EINVAL;
	memcpy(out->user, u.user, sizeof(out->user));
	memcpy(out->pass, u.pass, sizeof(out->pass));
	for (unsigned i = 0; i < u.naddrs; i++) {
		memcpy(out->seed[i].host, u.addr[i].host, sizeof(out->seed[i].host));
		out->seed[i].port = u.addr[i].port;
	}
	out->nseeds = u.naddrs;
	return 0;
}
