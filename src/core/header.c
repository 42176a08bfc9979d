/* SPDX-License-Identifier: MIT */
/*
 * header.c - the words of the segment's header that the agent, the shim and
 * rlshimctl read and change: the agent's corner, the configuration in force,
 * the rules' names and ban counts. Functions, so that none of them needs the
 * layout (shm.h); the words read per request are table.h's inline ones.
 */
#include "shm.h"

#include <stdatomic.h>
#include <string.h>

#include "clock.h"

void rl_table_agent_flags_change(struct rl_table *t, uint64_t set,
				 uint64_t clear)
{
	uint64_t f = atomic_load(t->agent_flags);

	while (!atomic_compare_exchange_weak(t->agent_flags, &f,
					     (f | set) & ~clear))
		;
}

uint32_t rl_table_capacity(const struct rl_table *t)
{
	return t->hdr->capacity;
}

void rl_table_count_ban(struct rl_table *t, unsigned rule)
{
	rl_table_count(t, RL_COUNT_BANS_ISSUED);
	atomic_fetch_add_explicit(&t->rules[rule].bans, 1, memory_order_relaxed);
}

const char *rl_table_rule_name(const struct rl_table *t, unsigned rule)
{
	return rule < RL_MAX_RULES ? t->rules[rule].name : "";
}

/* ---- the agent's corner ------------------------------------------------------ */

void rl_table_agent_read(const struct rl_table *t, struct rl_table_agent *out)
{
	struct rl_shm_header *h = t->hdr;

	out->pid = atomic_load(&h->agent_pid);
	out->heartbeat_ns = atomic_load(&h->agent_heartbeat_ns);
	out->last_sync_ns = atomic_load(&h->agent_last_sync_ns);
	out->flags = atomic_load(&h->agent_flags);
	out->store_down_since_ms = atomic_load(&h->store_down_since_ms);
	out->syncs = atomic_load(&h->agent_syncs);
	out->hosts_alive = atomic_load(&h->hosts_alive);
	out->sync_interval_ms = atomic_load(&h->sync_interval_ms);
	out->masters = atomic_load(&h->store_masters);
	out->masters_down = atomic_load(&h->store_masters_down);
}

void rl_table_xdp_read(const struct rl_table *t, struct rl_table_xdp *out)
{
	struct rl_shm_header *h = t->hdr;

	out->prog_id = atomic_load(&h->xdp_prog_id);
	out->nifaces = atomic_load(&h->xdp_nifaces);
	if (out->nifaces > RL_TABLE_XDP_IFACES)
		out->nifaces = RL_TABLE_XDP_IFACES;
	for (unsigned i = 0; i < RL_XDP_NIDS; i++)
		out->map_ids[i] = atomic_load(&h->xdp_map_ids[i]);
	for (unsigned i = 0; i < RL_TABLE_XDP_IFACES; i++) {
		out->ifindex[i] = atomic_load(&h->xdp_ifindex[i]);
		out->attached[i] = atomic_load(&h->xdp_attached[i]);
	}
}

void rl_table_xdp_record(struct rl_table *t, const struct rl_table_xdp *x)
{
	static const struct rl_table_xdp none;
	struct rl_shm_header *h = t->hdr;

	if (!x)
		x = &none;
	/* The program id last when recording, first when clearing: a
	 * reader that sees it sees the rest. */
	if (x == &none)
		atomic_store(&h->xdp_prog_id, 0);
	for (unsigned i = 0; i < RL_XDP_NIDS; i++)
		atomic_store(&h->xdp_map_ids[i], x->map_ids[i]);
	for (unsigned i = 0; i < RL_TABLE_XDP_IFACES; i++) {
		atomic_store(&h->xdp_ifindex[i], x->ifindex[i]);
		atomic_store(&h->xdp_attached[i], x->attached[i]);
	}
	atomic_store(&h->xdp_nifaces, x->nifaces);
	if (x != &none)
		atomic_store(&h->xdp_prog_id, x->prog_id);
}

uint64_t rl_table_agent_pid(const struct rl_table *t)
{
	return atomic_load(&t->hdr->agent_pid);
}

uint64_t rl_table_agent_heartbeat(const struct rl_table *t)
{
	return atomic_load_explicit(&t->hdr->agent_heartbeat_ns,
				    memory_order_relaxed);
}

uint32_t rl_table_agent_interval_ms(const struct rl_table *t)
{
	return atomic_load_explicit(&t->hdr->sync_interval_ms,
				    memory_order_relaxed);
}

void rl_table_agent_set_pid(struct rl_table *t, uint64_t pid)
{
	atomic_store(&t->hdr->agent_pid, pid);
}

void rl_table_agent_beat(struct rl_table *t, uint64_t now_ns)
{
	atomic_store(&t->hdr->agent_heartbeat_ns, now_ns);
}

void rl_table_agent_set_interval(struct rl_table *t, uint32_t ms)
{
	atomic_store(&t->hdr->sync_interval_ms, ms);
}

void rl_table_agent_set_hosts(struct rl_table *t, uint32_t hosts)
{
	atomic_store(&t->hdr->hosts_alive, hosts);
}

void rl_table_agent_store_down(struct rl_table *t, uint64_t since_ms)
{
	atomic_store(&t->hdr->store_down_since_ms, since_ms);
}

void rl_table_agent_set_masters(struct rl_table *t, uint32_t masters,
				uint32_t down)
{
	atomic_store(&t->hdr->store_masters, masters);
	atomic_store(&t->hdr->store_masters_down, down);
}

void rl_table_agent_synced(struct rl_table *t, uint64_t now_ns)
{
	struct rl_shm_header *h = t->hdr;

	atomic_store(&h->store_down_since_ms, 0);
	atomic_store(&h->agent_last_sync_ns, now_ns);
	atomic_fetch_add(&h->agent_syncs, 1);
}

int rl_table_agent_spawn_claim(struct rl_table *t, uint64_t now_ns,
			       uint64_t retry_ns)
{
	uint64_t last = atomic_load(&t->hdr->agent_spawn_ns);

	return !(last && now_ns - last < retry_ns) &&
	       atomic_compare_exchange_strong(&t->hdr->agent_spawn_ns, &last,
					      now_ns);
}

/* ---- the configuration in force ---------------------------------------------- */

void rl_table_config_read(const struct rl_table *t,
			  struct rl_table_config *out)
{
	struct rl_shm_header *h = t->hdr;

	out->stamp = atomic_load(&h->config_stamp);
	out->since_ms = atomic_load(&h->config_since_ms);
	out->bad_stamp = atomic_load(&h->config_bad_stamp);
	out->bad_since_ms = atomic_load(&h->config_bad_since_ms);
}

/* Put `stamp` in *word; the first to put it there dates it in *since. */
static int stamp_first(_Atomic uint64_t *word, _Atomic uint64_t *since,
		       uint64_t stamp)
{
	if (atomic_exchange(word, stamp) == stamp)
		return 0;
	atomic_store(since, rl_time_wall_ms());
	return 1;
}

int rl_table_config_apply(struct rl_table *t, uint64_t stamp)
{
	return stamp_first(&t->hdr->config_stamp, &t->hdr->config_since_ms,
			   stamp);
}

int rl_table_config_refuse(struct rl_table *t, uint64_t stamp)
{
	return stamp_first(&t->hdr->config_bad_stamp,
			   &t->hdr->config_bad_since_ms, stamp);
}

/* ---- what status shows of the host: restarts due, the agent's log ---------- */

void rl_table_restart_needed(struct rl_table *t, uint64_t what)
{
	struct rl_shm_header *h = t->hdr;

	if (!what)
		return;
	if (!(atomic_fetch_or(&h->restart_needed, what)))
		atomic_store(&h->restart_since_ms, rl_time_wall_ms());
}

void rl_table_restart_done(struct rl_table *t)
{
	if (atomic_load(&t->hdr->restart_needed))
		atomic_store(&t->hdr->restart_needed, 0);
}

uint64_t rl_table_restart_read(const struct rl_table *t, uint64_t *since_ms)
{
	uint64_t what = atomic_load(&t->hdr->restart_needed);

	*since_ms = what ? atomic_load(&t->hdr->restart_since_ms) : 0;
	return what;
}

void rl_table_agent_set_log(struct rl_table *t, const char *where)
{
	char *d = t->hdr->agent_log;
	size_t n = strlen(where);

	if (n >= sizeof(t->hdr->agent_log))
		n = sizeof(t->hdr->agent_log) - 1;
	memcpy(d, where, n);
	memset(d + n, 0, sizeof(t->hdr->agent_log) - n);
}

void rl_table_agent_log(const struct rl_table *t, char *buf, size_t len)
{
	size_t n = strnlen(t->hdr->agent_log, sizeof(t->hdr->agent_log) - 1);

	if (!len)
		return;
	if (n >= len)
		n = len - 1;
	memcpy(buf, t->hdr->agent_log, n);
	buf[n] = '\0';
}

int rl_table_store_news(struct rl_table *t, uint64_t *since_ms)
{
	struct rl_shm_header *h = t->hdr;
	uint64_t now = atomic_load(&h->store_down_since_ms);
	uint64_t said = atomic_load(&h->store_said);

	*since_ms = now;
	return now != said &&
	       atomic_compare_exchange_strong(&h->store_said, &said, now);
}
