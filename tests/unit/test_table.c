/* SPDX-License-Identifier: MIT */
/* test_table.c - the shared segment: layout, open/attach and refusals,
 * rules, decisions, eviction, inspection. Single-process; the concurrent
 * and crash tests are in tests/stress/. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algo.h"
#include "shm.h"
#include "each.h"
#include "skip.h"
#include "table.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define T0 (2057 * 3600 * SEC)

static char seg[64];

static int setup(void **state)
{
	static int n;

	(void)state;
	snprintf(seg, sizeof(seg), "rlshim-test-%d-%d", (int)getpid(), n++);
	rl_table_unlink(seg);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rl_table_unlink(seg);
	return 0;
}

static struct rl_table *open_new(uint32_t capacity)
{
	struct rl_table *t = NULL;

	assert_int_equal(rl_table_open(seg, capacity, RL_TABLE_CREATE, &t, NULL), 0);
	assert_non_null(t);
	return t;
}

static unsigned add_rule(struct rl_table *t, const char *name, uint64_t period,
			 uint32_t count, uint32_t burst)
{
	struct rl_rule_def def = { .name = name, .algorithm = RL_ALGO_GCRA,
				   .rate = { period, count, burst } };
	unsigned id = 99;

	assert_int_equal(rl_table_rule(t, &def, &id), 0);
	return id;
}

/* The segment's file: /dev/shm/<seg>. */
static void seg_path(char path[128])
{
	snprintf(path, 128, "/dev/shm/%s", seg);
}

/* Opening `seg` with `flags` is refused with `rc`, no table and a reason
 * that says `why`. */
static void expect_open_refused(unsigned flags, int rc, const char *why)
{
	struct rl_err e;
	struct rl_table *t = NULL;

	assert_int_equal(rl_table_open(seg, 16, flags, &t, &e), rc);
	assert_null(t);
	if (!strstr(e.msg, why))
		fail_msg("refused (%d) saying \"%s\", not \"%s\"", rc, e.msg, why);
}

/* ---- layout ----------------------------------------------------------------- */

static void test_layout(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct rl_shm_header), 4096);
	assert_int_equal(offsetof(struct rl_shm_header, magic), 0);
	assert_int_equal(offsetof(struct rl_shm_header, version), 8);
	assert_int_equal(offsetof(struct rl_shm_header, header_size), 12);
	assert_int_equal(offsetof(struct rl_shm_header, size), 16);
	assert_int_equal(offsetof(struct rl_shm_header, capacity), 24);
	assert_int_equal(offsetof(struct rl_shm_header, bucket_bits), 28);
	assert_int_equal(offsetof(struct rl_shm_header, init), 32);
	assert_int_equal(offsetof(struct rl_shm_header, creator_pid), 36);
	assert_int_equal(offsetof(struct rl_shm_header, seed), 40);
	assert_int_equal(offsetof(struct rl_shm_header, created_mono_ns), 56);
	assert_int_equal(offsetof(struct rl_shm_header, created_unix_ms), 64);
	assert_int_equal(offsetof(struct rl_shm_header, rules_off), 72);
	assert_int_equal(offsetof(struct rl_shm_header, shards_off), 80);
	assert_int_equal(offsetof(struct rl_shm_header, slots_off), 88);
	assert_int_equal(offsetof(struct rl_shm_header, meta_off), 96);
	assert_int_equal(offsetof(struct rl_shm_header, bans_off), 104);
	assert_int_equal(offsetof(struct rl_shm_header, max_rules), 112);
	assert_int_equal(offsetof(struct rl_shm_header, shards), 116);
	assert_int_equal(offsetof(struct rl_shm_header, bans_cap), 120);
	assert_int_equal(offsetof(struct rl_shm_header, evictions), 128);
	assert_int_equal(offsetof(struct rl_shm_header, overflows), 136);
	assert_int_equal(offsetof(struct rl_shm_header, marks_cleared), 144);
	assert_int_equal(offsetof(struct rl_shm_header, ban_refusals), 152);
	assert_int_equal(offsetof(struct rl_shm_header, ban_gen), 160);
	assert_int_equal(offsetof(struct rl_shm_header, bans_issued), 168);
	assert_int_equal(offsetof(struct rl_shm_header, summary_ms), 176);
	assert_int_equal(offsetof(struct rl_shm_header, config_reloads), 184);
	assert_int_equal(offsetof(struct rl_shm_header, agent_pid), 192);
	assert_int_equal(offsetof(struct rl_shm_header, agent_heartbeat_ns), 200);
	assert_int_equal(offsetof(struct rl_shm_header, agent_last_sync_ns), 208);
	assert_int_equal(offsetof(struct rl_shm_header, agent_flags), 216);
	assert_int_equal(offsetof(struct rl_shm_header, store_down_since_ms), 224);
	assert_int_equal(offsetof(struct rl_shm_header, agent_spawn_ns), 232);
	assert_int_equal(offsetof(struct rl_shm_header, agent_syncs), 240);
	assert_int_equal(offsetof(struct rl_shm_header, hosts_alive), 248);
	assert_int_equal(offsetof(struct rl_shm_header, sync_interval_ms), 252);
	assert_int_equal(offsetof(struct rl_shm_header, ban_lens), 256);
	assert_int_equal(offsetof(struct rl_shm_header, config_stamp), 304);
	assert_int_equal(offsetof(struct rl_shm_header, config_since_ms), 312);
	assert_int_equal(offsetof(struct rl_shm_header, config_bad_stamp), 320);
	assert_int_equal(offsetof(struct rl_shm_header, config_bad_since_ms), 328);
	assert_int_equal(offsetof(struct rl_shm_header, kept_off), 336);
	assert_int_equal(offsetof(struct rl_shm_header, kept_cap), 344);
	assert_int_equal(offsetof(struct rl_shm_header, kept_len), 348);
	assert_int_equal(offsetof(struct rl_shm_header, kept_stamp), 352);
	assert_int_equal(offsetof(struct rl_shm_header, kept_hash), 360);
	assert_int_equal(offsetof(struct rl_shm_header, asks_off), 368);
	assert_int_equal(offsetof(struct rl_shm_header, asks_cap), 376);
	assert_int_equal(offsetof(struct rl_shm_header, asks_bell), 380);
	assert_int_equal(offsetof(struct rl_shm_header, xdp_prog_id), 384);
	assert_int_equal(offsetof(struct rl_shm_header, xdp_nifaces), 388);
	assert_int_equal(offsetof(struct rl_shm_header, xdp_map_ids), 392);
	assert_int_equal(offsetof(struct rl_shm_header, xdp_ifindex), 424);
	assert_int_equal(offsetof(struct rl_shm_header, xdp_attached), 456);
	assert_int_equal(offsetof(struct rl_shm_header, store_masters), 488);
	assert_int_equal(offsetof(struct rl_shm_header, store_masters_down), 492);
	assert_int_equal(offsetof(struct rl_shm_header, reserved2), 776);

	assert_int_equal(sizeof(struct rl_shm_rule), 256);
	assert_int_equal(offsetof(struct rl_shm_rule, ident), 0);
	assert_int_equal(offsetof(struct rl_shm_rule, ready), 8);
	assert_int_equal(offsetof(struct rl_shm_rule, algorithm), 12);
	assert_int_equal(offsetof(struct rl_shm_rule, period_ns), 16);
	assert_int_equal(offsetof(struct rl_shm_rule, count), 24);
	assert_int_equal(offsetof(struct rl_shm_rule, burst), 28);
	assert_int_equal(offsetof(struct rl_shm_rule, name), 32);
	assert_int_equal(offsetof(struct rl_shm_rule, nplans), 64);
	assert_int_equal(offsetof(struct rl_shm_rule, plans), 72);
	assert_int_equal(offsetof(struct rl_shm_rule, bans), 200);
	assert_int_equal(offsetof(struct rl_shm_rule, summarised), 208);
	assert_int_equal(offsetof(struct rl_shm_rule, seq), 216);
	assert_int_equal(offsetof(struct rl_shm_rule, seq_ns), 224);
	assert_int_equal(sizeof(struct rl_shm_plan), 16);

	assert_int_equal(sizeof(struct rl_shm_answers), 160);
	assert_int_equal(offsetof(struct rl_shm_answers, service), 40);
	assert_int_equal(offsetof(struct rl_shm_answers, service_sum_us), 152);
	assert_int_equal(sizeof(struct rl_shm_shard), RL_MAX_RULES * (16 + 160));

	assert_int_equal(sizeof(struct rl_slot), 32);
	assert_int_equal(offsetof(struct rl_slot, key), 0);
	assert_int_equal(offsetof(struct rl_slot, state), 8);
	assert_int_equal(offsetof(struct rl_slot, sync_admitted), 16);
	assert_int_equal(offsetof(struct rl_slot, plan), 20);
	assert_int_equal(offsetof(struct rl_slot, provisional), 21);
	assert_int_equal(offsetof(struct rl_slot, sync_fails), 22);
	assert_int_equal(offsetof(struct rl_slot, fails), 24);
	assert_int_equal(RL_SHM_VERSION, 5);

	assert_int_equal(sizeof(struct rl_slot_meta), 64);
	assert_int_equal(offsetof(struct rl_slot_meta, tag), 0);
	assert_int_equal(offsetof(struct rl_slot_meta, len), 8);
	assert_int_equal(offsetof(struct rl_slot_meta, truncated), 9);
	assert_int_equal(offsetof(struct rl_slot_meta, key), 16);

	assert_int_equal(sizeof(struct rl_shm_ban), 64);
	assert_int_equal(offsetof(struct rl_shm_ban, tag), 0);
	assert_int_equal(offsetof(struct rl_shm_ban, expires_ms), 8);
	assert_int_equal(offsetof(struct rl_shm_ban, family), 16);
	assert_int_equal(offsetof(struct rl_shm_ban, prefix), 17);
	assert_int_equal(offsetof(struct rl_shm_ban, origin), 18);
	assert_int_equal(offsetof(struct rl_shm_ban, rule), 19);
	assert_int_equal(offsetof(struct rl_shm_ban, hits), 20);
	assert_int_equal(offsetof(struct rl_shm_ban, addr), 24);
	assert_int_equal(offsetof(struct rl_shm_ban, created_ms), 40);
	assert_int_equal(offsetof(struct rl_shm_ban, offences), 48);
	assert_int_equal(offsetof(struct rl_shm_ban, lifted_exp), 56);

	assert_int_equal(sizeof(struct rl_shm_ask), 64);
	assert_int_equal(offsetof(struct rl_shm_ask, word), 0);
	assert_int_equal(offsetof(struct rl_shm_ask, rule), 4);
	assert_int_equal(offsetof(struct rl_shm_ask, index), 8);
	assert_int_equal(offsetof(struct rl_shm_ask, cost), 12);
	assert_int_equal(offsetof(struct rl_shm_ask, tag), 16);
	assert_int_equal(offsetof(struct rl_shm_ask, allowed), 24);
	assert_int_equal(offsetof(struct rl_shm_ask, state), 32);

	/* 1,024 slots: header, rules, shards, slots, meta, bans, asks, the
	 * kept configuration, page-aligned. */
	assert_int_equal(rl_table_layout_size(1024),
			 1200128 + RL_SHARDS * RL_MAX_RULES * 160 +
				 RL_ASKS * 64 + RL_KEPT_MAX);
	assert_int_equal(rl_table_capacity_round(1), 16);
	assert_int_equal(rl_table_capacity_round(1000), 1024);
	assert_int_equal(rl_table_capacity_round(1025), 2048);
	assert_int_equal(rl_table_capacity_round(65536), 65536);
}

/* ---- open, attach, refuse ------------------------------------------------- */

static void test_create_then_attach(void **state)
{
	struct rl_table *a = open_new(1000), *b = NULL;
	struct stat st;
	char path[128];

	(void)state;
	assert_int_equal(a->hdr->capacity, 1024);
	assert_int_equal(a->hdr->magic, RL_SHM_MAGIC);
	assert_int_equal(a->hdr->init, RL_SHM_INIT_READY);
	assert_true(a->hdr->seed[0] || a->hdr->seed[1]);
	seg_path(path);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal((uint64_t)st.st_size, rl_table_layout_size(1024));
	/* The second opener attaches; its capacity request is ignored. */
	assert_int_equal(rl_table_open(seg, 99999, RL_TABLE_CREATE, &b, NULL), 0);
	assert_int_equal(b->hdr->capacity, 1024);
	assert_memory_equal(a->seed, b->seed, sizeof(a->seed));
	rl_table_close(a);
	rl_table_close(b);
	rl_table_close(NULL);
}

/* The agent's XDP record: read back by another opener as written, all 0
 * in a fresh segment (none recorded) and once cleared. */
static void test_xdp_record(void **state)
{
	struct rl_table *a = open_new(64), *b = NULL;
	struct rl_table_xdp w, r;

	(void)state;
	assert_int_equal(rl_table_open(seg, 0, 0, &b, NULL), 0);
	rl_table_xdp_read(b, &r);
	assert_int_equal(r.prog_id, 0);
	assert_int_equal(r.nifaces, 0);
	memset(&w, 0, sizeof(w));
	w.prog_id = 41;
	for (unsigned i = 0; i < RL_XDP_NIDS; i++)
		w.map_ids[i] = 100 + i;
	w.nifaces = 2;
	w.ifindex[0] = 7;
	w.attached[0] = RL_XDP_ATTACHED_NATIVE;
	w.ifindex[1] = 9;
	w.attached[1] = RL_XDP_ATTACHED_GENERIC;
	rl_table_xdp_record(a, &w);
	rl_table_xdp_read(b, &r);
	assert_memory_equal(&r, &w, sizeof(r));
	rl_table_xdp_record(a, NULL);
	rl_table_xdp_read(b, &r);
	memset(&w, 0, sizeof(w));
	assert_memory_equal(&r, &w, sizeof(r));
	rl_table_close(a);
	rl_table_close(b);
}

/* What status shows of the host: a restart a reload asked for (bits
 * added, the first one's time kept, cleared by a start), where the agent
 * logs (cut to fit, NUL-terminated), and the store's changes said once. */
static void test_host_notes(void **state)
{
	struct rl_table *a = open_new(64), *b = NULL;
	char buf[300], longer[400];
	uint64_t since, first;

	(void)state;
	assert_int_equal(rl_table_open(seg, 0, 0, &b, NULL), 0);
	assert_int_equal(rl_table_restart_read(b, &since), 0);
	assert_int_equal(since, 0);
	rl_table_restart_needed(a, 0);
	assert_int_equal(rl_table_restart_read(b, &since), 0);
	rl_table_restart_needed(a, RL_RESTART_PORTS);
	assert_int_equal(rl_table_restart_read(b, &first), RL_RESTART_PORTS);
	assert_true(first > 0);
	rl_table_restart_needed(a, RL_RESTART_SHM);
	assert_int_equal(rl_table_restart_read(b, &since),
			 RL_RESTART_PORTS | RL_RESTART_SHM);
	assert_int_equal(since, first);
	rl_table_restart_done(b);
	assert_int_equal(rl_table_restart_read(a, &since), 0);

	rl_table_agent_log(b, buf, sizeof(buf));
	assert_string_equal(buf, "");
	rl_table_agent_set_log(a, "/run/rlshim/rlshimd-x.log");
	rl_table_agent_log(b, buf, sizeof(buf));
	assert_string_equal(buf, "/run/rlshim/rlshimd-x.log");
	rl_table_agent_log(b, buf, 5);
	assert_string_equal(buf, "/run");
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	rl_table_agent_set_log(a, longer);
	rl_table_agent_log(b, buf, sizeof(buf));
	assert_int_equal(strlen(buf), 255);
	rl_table_agent_set_log(a, "syslog");
	rl_table_agent_log(b, buf, sizeof(buf));
	assert_string_equal(buf, "syslog");

	/* up from the start: nothing to say */
	assert_int_equal(rl_table_store_news(a, &since), 0);
	rl_table_agent_store_down(a, 1234);
	assert_int_equal(rl_table_store_news(b, &since), 1);
	assert_int_equal(since, 1234);
	assert_int_equal(rl_table_store_news(a, &since), 0);
	rl_table_agent_synced(a, 1);
	assert_int_equal(rl_table_store_news(a, &since), 1);
	assert_int_equal(since, 0);
	assert_int_equal(rl_table_store_news(b, &since), 0);
	rl_table_close(a);
	rl_table_close(b);
}

static void test_attach_missing(void **state)
{
	(void)state;
	expect_open_refused(0, -ENOENT, seg);
}

static void test_bad_names(void **state)
{
	static const char *const bad[] = { "", "../etc", ".hidden", "a/b" };
	struct rl_err e;
	struct rl_table *t = NULL;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (rl_table_open(bad[i], 16, RL_TABLE_CREATE, &t, &e) != -EINVAL)
			fail_msg("opened the segment \"%s\"", bad[i]);
	assert_non_null(strstr(e.msg, "bad segment name"));
}

static void write_file(const char *name, const void *data, size_t len,
		       mode_t mode)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, mode), 0);
	if (len)
		assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void test_truncated(void **state)
{
	char junk[100] = { 0 };

	(void)state;
	write_file(seg, junk, sizeof(junk), 0600);
	expect_open_refused(0, -EBADF, "truncated");
}

static void test_wrong_magic(void **state)
{
	static char junk[200000];

	(void)state;
	memset(junk, 'A', sizeof(junk));
	write_file(seg, junk, sizeof(junk), 0600);
	expect_open_refused(RL_TABLE_CREATE, -EPROTO, "not an rlshim segment");
}

static void test_wrong_version(void **state)
{
	uint32_t v = RL_SHM_VERSION + 1;
	char path[128];
	int fd;

	(void)state;
	rl_table_close(open_new(16));
	seg_path(path);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &v, 4, offsetof(struct rl_shm_header,
						    version)), 4);
	close(fd);
	expect_open_refused(RL_TABLE_CREATE, -EPROTO, "layout version 6");
}

static void test_wrong_size(void **state)
{
	char path[128];

	(void)state;
	rl_table_close(open_new(16));
	seg_path(path);
	assert_int_equal(truncate(path, (off_t)rl_table_layout_size(16) - 4096), 0);
	expect_open_refused(0, -EBADF, "size mismatch");
	assert_int_equal(truncate(path, (off_t)rl_table_layout_size(16) + 4096), 0);
	expect_open_refused(0, -EBADF, "size mismatch");
}

static void test_writable_by_others(void **state)
{
	char path[128];

	(void)state;
	rl_table_close(open_new(16));
	seg_path(path);
	assert_int_equal(chmod(path, 0666), 0);
	expect_open_refused(RL_TABLE_CREATE, -EPERM, "mode 0666");
}

/* Another user's segment: needs root to make a second user. */
static void test_other_user(void **state)
{
	struct rl_err e;
	struct rl_table *t = open_new(16);
	pid_t pid;
	int status;

	(void)state;
	rl_table_close(t);
	if (geteuid() != 0)
		skip_or_fail("needs root to act as a second user");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rl_table *c = NULL;
		int rc;

		if (setgid(65534) || setuid(65534))
			_exit(3);
		rc = rl_table_open(seg, 16, RL_TABLE_CREATE, &c, &e);
		if (rc != -EACCES || c)
			_exit(1);
		if (!strstr(e.msg, "owned by uid 0"))
			_exit(2);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * A segment another user made first (nobody, here) is never taken by a
 * root server (RL_TABLE_OWNED, as the shim opens it), whatever it holds;
 * root's tools (no flag) still read it.
 */
static void test_root_server_other_user(void **state)
{
	char path[128];
	struct rl_table *t;

	(void)state;
	if (geteuid() != 0)
		skip_or_fail("needs root to act as a second user");
	rl_table_close(open_new(16));
	seg_path(path);
	assert_int_equal(chown(path, 65534, 65534), 0);
	expect_open_refused(RL_TABLE_CREATE | RL_TABLE_OWNED, -EPERM,
			    "owned by uid 65534, not by this user (uid 0)");
	expect_open_refused(RL_TABLE_OWNED, -EPERM, "owned by uid 65534");
	assert_int_equal(rl_table_open(seg, 0, 0, &t, NULL), 0);
	rl_table_close(t);
}

/* A creator that died half-way through initialisation is replaced. */
static void test_dead_creator(void **state)
{
	struct rl_err e;
	struct rl_shm_header h;
	struct rl_table *t = NULL;
	static char zero[8192];
	pid_t pid = fork();

	(void)state;
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	memset(&h, 0, sizeof(h));
	h.creator_pid = (uint32_t)pid; /* dead now */
	h.version = RL_SHM_VERSION;
	write_file(seg, &h, sizeof(h), 0600);
	{
		char path[128];
		int fd;

		seg_path(path);
		fd = open(path, O_WRONLY | O_APPEND);
		assert_int_equal(write(fd, zero, sizeof(zero)), (ssize_t)sizeof(zero));
		close(fd);
	}
	assert_int_equal(rl_table_open(seg, 16, 0, &t, &e), -ESTALE);
	assert_non_null(strstr(e.msg, "died"));
	assert_int_equal(rl_table_open(seg, 16, RL_TABLE_CREATE, &t, &e), 0);
	assert_int_equal(t->hdr->init, RL_SHM_INIT_READY);
	rl_table_close(t);
}

/* ---- rules -------------------------------------------------------------------- */

/* A child that takes the servers' hold, forks a worker that keeps it, and
 * waits for a byte on `go` before exiting (the worker on `go2`). */
static pid_t holder(int go, int go2, int worker)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct rl_table_hold h = { .fd = -1 };
		char c;

		if (rl_table_hold(seg, &h))
			_exit(1);
		if (worker && fork() == 0) {
			(void)!read(go2, &c, 1);
			_exit(0);
		}
		(void)!read(go, &c, 1);
		_exit(0);
	}
	return pid;
}

static int held_within(int fd, int want)
{
	for (int i = 0; i < 200; i++) {
		if (rl_table_held(fd) == want)
			return 1;
		usleep(10000);
	}
	return 0;
}

/* The hold goes with the last process that has it, forked workers
 * included, and the agent's own open of the file is not one. */
static void test_hold(void **state)
{
	struct rl_table *t = open_new(16);
	struct rl_table_hold h = { .fd = -1 };
	int p1[2], p2[2], fd, st;
	char path[128];
	pid_t pid;

	(void)state;
	seg_path(path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(rl_table_held(fd), 0);
	assert_int_equal(pipe(p1), 0);
	assert_int_equal(pipe(p2), 0);
	pid = holder(p1[0], p2[0], 1);
	assert_true(held_within(fd, 1));
	assert_int_equal(write(p1[1], "x", 1), 1); /* the first one exits */
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(WEXITSTATUS(st), 0);
	usleep(50000);
	assert_int_equal(rl_table_held(fd), 1);    /* its worker holds it */
	assert_int_equal(write(p2[1], "x", 1), 1);
	assert_true(held_within(fd, 0));
	/* Taken again after the application closed it; a check while it is
	 * intact keeps the same fd. */
	assert_int_equal(rl_table_hold(seg, &h), 0);
	{
		int was = h.fd;

		assert_int_equal(rl_table_hold(seg, &h), 0);
		assert_int_equal(h.fd, was);
		close(was);
		assert_int_equal(rl_table_hold(seg, &h), 0);
		assert_true(h.fd >= 0);
	}
	close(h.fd);
	close(fd);
	close(p1[0]);
	close(p1[1]);
	close(p2[0]);
	close(p2[1]);
	rl_table_close(t);
}

static void test_rules(void **state)
{
	struct rl_table *a = open_new(64), *b = NULL;
	struct rl_rule_def def = { .name = "api", .algorithm = RL_ALGO_GCRA,
				   .rate = { 60 * SEC, 60, 60 } };
	struct rl_rule_stats rs;
	unsigned id1, id2, id3, id4;
	char name[40];

	(void)state;
	assert_int_equal(rl_table_rule(a, &def, &id1), 0);
	assert_int_equal(rl_table_open(seg, 0, 0, &b, NULL), 0);
	assert_int_equal(rl_table_rule(b, &def, &id2), 0);
	assert_int_equal(id1, id2); /* same definition, same id */
	/* A changed rate (a reload in b): the same rule, b's own rate; a
	 * process that did not register it reads the latest from the
	 * segment; a keeps its own until it registers the change too. */
	def.rate.count = 30;
	assert_int_equal(rl_table_rule(b, &def, &id3), 0);
	assert_int_equal(id3, id1);
	assert_int_equal(rl_table_rule_get(b, id1)->algo.rate.count, 30);
	assert_int_equal(rl_table_rule_get(a, id1)->algo.rate.count, 60);
	{
		struct rl_table *c = NULL;

		assert_int_equal(rl_table_open(seg, 0, 0, &c, NULL), 0);
		assert_int_equal(rl_table_rule_get(c, id1)->algo.rate.count, 30);
		rl_table_close(c);
	}
	assert_int_equal(rl_table_rule(a, &def, &id3), 0);
	assert_int_equal(rl_table_rule_get(a, id1)->algo.rate.count, 30);
	/* A changed algorithm is another rule. */
	def.algorithm = RL_ALGO_FIXED_WINDOW;
	def.rate.burst = 30;
	assert_int_equal(rl_table_rule(a, &def, &id4), 0);
	assert_int_not_equal(id4, id3);
	assert_int_equal(rl_table_rule_stats(a, id4, &rs), 0);
	assert_string_equal(rs.name, "api");
	assert_int_equal(rs.algorithm, RL_ALGO_FIXED_WINDOW);
	assert_int_equal(rs.rate.count, 30);
	/* Bad definitions. */
	def.rate.count = 0;
	assert_int_equal(rl_table_rule(a, &def, &id4), -EINVAL);
	def.rate.count = 1;
	def.name = "a-name-that-is-far-too-long-for-a-rule";
	assert_int_equal(rl_table_rule(a, &def, &id4), -EINVAL);
	def.name = "";
	assert_int_equal(rl_table_rule(a, &def, &id4), -EINVAL);
	/* 64 entries, then no room. */
	for (unsigned i = 2; i < RL_MAX_RULES; i++) {
		snprintf(name, sizeof(name), "r%u", i);
		def.name = name;
		assert_int_equal(rl_table_rule(a, &def, &id4), 0);
	}
	def.name = "one-too-many";
	assert_int_equal(rl_table_rule(a, &def, &id4), -ENOSPC);
	/* An unknown rule id cannot be taken from. */
	{
		struct rl_result r;

		assert_int_equal(rl_table_take(a, RL_MAX_RULES, "k", 1, 1, T0, &r),
				 -EINVAL);
	}
	rl_table_close(a);
	rl_table_close(b);
}

/* Claiming a changed rate changes nothing here until it is used; keys
 * keep their state across the change (a changed rate applies to what a
 * key has used). */
static void test_rule_claim_use(void **state)
{
	struct rl_table *t = open_new(64);
	struct rl_rule_def def = { .name = "sms", .algorithm = RL_ALGO_GCRA,
				   .rate = { 60 * SEC, 3, 3 } };
	struct rl_result r;
	unsigned id, id2;

	(void)state;
	assert_int_equal(rl_table_rule(t, &def, &id), 0);
	for (int i = 0; i < 3; i++)
		rl_table_take(t, id, "k", 1, 1, T0, &r);
	assert_false(rl_table_take(t, id, "k", 1, 1, T0, &r) == 0 && r.allowed);
	def.rate.count = 4;
	def.rate.burst = 4;
	assert_int_equal(rl_table_rule_claim(t, &def, &id2), 0);
	assert_int_equal(id2, id);
	assert_int_equal(rl_table_rule_get(t, id)->algo.rate.count, 3);
	assert_int_equal(rl_table_rule_use(t, id, &def), 0);
	assert_int_equal(rl_table_rule_get(t, id)->algo.rate.count, 4);
	/* 3 used of 3/m is a minute owed; under 4/m (15 s each, a bucket of
	 * 60 s) the next one is due in 15 s, not now. */
	assert_int_equal(rl_table_take(t, id, "k", 1, 1, T0, &r), 0);
	assert_false(r.allowed);
	assert_int_equal(r.limit, 4);
	assert_int_equal(r.retry_after_ns, 15 * SEC);
	assert_int_equal(rl_table_take(t, id, "k", 1, 1, T0 + 15 * SEC, &r), 0);
	assert_true(r.allowed);
	/* A writer killed half-way through the record of the rates (seq
	 * left odd): readers still read it; after RL_MARK_TIMEOUT_NS the
	 * next writer takes over. */
	{
		struct rl_shm_rule *sr = &t->rules[id];
		struct rl_table *o = NULL;
		uint32_t odd = atomic_load(&sr->seq) + 1;

		atomic_store(&sr->seq, odd);
		atomic_store(&sr->seq_ns, rl_time_now_ns());
		assert_int_equal(rl_table_open(seg, 0, 0, &o, NULL), 0);
		assert_non_null(rl_table_rule_get(o, id));
		assert_int_equal(rl_table_rule_get(o, id)->algo.rate.count, 4);
		rl_table_close(o);
		def.rate.count = 5;
		assert_int_equal(rl_table_rule_use(t, id, &def), 0);
		assert_int_equal(atomic_load(&sr->seq), odd); /* left to it */
		assert_int_equal(sr->count, 4);
		atomic_store(&sr->seq_ns, rl_time_now_ns() - 2 * RL_MARK_TIMEOUT_NS);
		def.rate.count = 6;
		assert_int_equal(rl_table_rule_use(t, id, &def), 0);
		assert_int_equal(atomic_load(&sr->seq) & 1, 0);
		assert_int_equal(sr->count, 6);
		def.rate.count = 4;
		assert_int_equal(rl_table_rule_use(t, id, &def), 0);
	}
	/* Using the same rates again is nothing new. */
	assert_int_equal(rl_table_rule_use(t, id, &def), 0);
	assert_int_equal(rl_table_rule_use(t, RL_MAX_RULES, &def), -EINVAL);
	rl_table_close(t);
}

/* ---- decisions ---------------------------------------------------------------- */

/* The table decides exactly as the pure step over the same clock. */
static void test_take_matches_step(void **state)
{
	struct rl_table *t = open_new(1024);
	const struct rl_rate rate = { SEC, 10, 5 };
	unsigned id = add_rule(t, "r", SEC, 10, 5);
	struct rl_result a, b;
	uint64_t tat = 0;

	(void)state;
	for (uint64_t i = 0; i < 2000; i++) {
		uint64_t now = T0 + i * 37 * MS / 10 + (i % 7) * MS;
		uint32_t cost = (uint32_t)(i % 3);

		assert_int_equal(rl_table_take(t, id, "client", 6, cost, now, &a), 0);
		rl_gcra_step(&tat, &rate, cost, now, &b);
		assert_int_equal(a.allowed, b.allowed);
		assert_int_equal(a.remaining, b.remaining);
		assert_int_equal(a.retry_after_ns, b.retry_after_ns);
		assert_int_equal(a.reset_after_ns, b.reset_after_ns);
	}
	rl_table_close(t);
}

/* Keys, rules and attachments are independent or shared as they should. */
static void test_keys_rules_processes(void **state)
{
	struct rl_table *t = open_new(1024), *u = NULL;
	unsigned api = add_rule(t, "api", 60 * SEC, 3, 3);
	unsigned sms = add_rule(t, "sms", 60 * SEC, 3, 3);
	struct rl_rule_stats rs;
	struct rl_result r;
	int allowed = 0;

	(void)state;
	assert_int_equal(rl_table_open(seg, 0, 0, &u, NULL), 0);
	for (int i = 0; i < 5; i++) {
		/* Alternate the two handles: one budget. */
		rl_table_take(i % 2 ? t : u, api, "1.2.3.4", 7, 1, T0, &r);
		allowed += r.allowed;
	}
	assert_int_equal(allowed, 3);
	/* Another key, another rule: untouched budgets. */
	rl_table_take(t, api, "1.2.3.5", 7, 1, T0, &r);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 2);
	rl_table_take(t, sms, "1.2.3.4", 7, 1, T0, &r);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 2);
	/* A key that is a prefix of another is another key. */
	rl_table_take(t, api, "1.2.3.", 6, 1, T0, &r);
	assert_int_equal(r.remaining, 2);
	/* Counters across both handles. */
	assert_int_equal(rl_table_rule_stats(u, api, &rs), 0);
	assert_int_equal(rs.allowed, 5);
	assert_int_equal(rs.denied, 2);
	assert_string_equal(rs.name, "api");
	rl_table_close(t);
	rl_table_close(u);
}

static void test_long_keys(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned id = add_rule(t, "k", SEC, 1, 1);
	char k1[200], k2[200];
	struct rl_result r;

	(void)state;
	memset(k1, 'x', sizeof(k1));
	memcpy(k2, k1, sizeof(k2));
	k2[199] = 'y'; /* same 40-byte prefix, different key */
	rl_table_take(t, id, k1, sizeof(k1), 1, T0, &r);
	assert_true(r.allowed);
	rl_table_take(t, id, k2, sizeof(k2), 1, T0, &r);
	assert_true(r.allowed);
	rl_table_take(t, id, k1, sizeof(k1), 1, T0, &r);
	assert_false(r.allowed);
	rl_table_close(t);
}

static void test_refund(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned id = add_rule(t, "r", 60 * SEC, 3, 3);
	struct rl_rule_stats rs;
	struct rl_result r;

	(void)state;
	rl_table_take(t, id, "k", 1, 1, T0, &r);
	rl_table_take(t, id, "k", 1, 1, T0, &r);
	assert_int_equal(r.remaining, 1);
	assert_int_equal(rl_table_refund(t, id, "k", 1, 1, T0), 0);
	rl_table_take(t, id, "k", 1, 0, T0, &r);
	assert_int_equal(r.remaining, 2);
	assert_int_equal(rl_table_rule_stats(t, id, &rs), 0);
	assert_int_equal(rs.allowed, 2); /* 2 takes + 1 peek - 1 refund */
	assert_int_equal(rl_table_refund(t, id, "none", 4, 1, T0), -ENOENT);
	rl_table_close(t);
}

/* The agent's rl_table_set_plan for the key just collected. */
static int slot_of(const struct rl_sync_item *it, void *arg)
{
	*(struct rl_sync_item *)arg = *it;
	return 1;
}

static int take_n(struct rl_table *t, unsigned id, const char *key, int n,
		  uint64_t now)
{
	struct rl_result r;
	int allowed = 0;

	for (int i = 0; i < n; i++) {
		rl_table_take(t, id, key, strlen(key), 1, now, &r);
		allowed += r.allowed;
	}
	return allowed;
}

/* count_status gives back by reference, long after the key's bytes are
 * gone: before the agent's collect, off what it will send; after it, as
 * given back (a negative admission in the next round), up to 127 a round;
 * a key that lost its slot has nothing to give back to. */
static void test_give_back_ref(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned id = add_rule(t, "login", 600 * SEC, 5, 5);
	struct rl_sync_item it;
	struct rl_key_ref ref, none;
	struct rl_result r;

	(void)state;
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	rl_table_key_ref(t, id, "1.2.3.4", 7, &ref);
	rl_table_key_ref(t, id, "absent", 6, &none);
	assert_int_equal(take_n(t, id, "1.2.3.4", 2, T0), 2);
	/* before the collect: the next round sends 1, not 2 */
	assert_int_equal(rl_table_give_back_ref(t, id, &ref, 1, T0), 0);
	rl_table_take(t, id, "1.2.3.4", 7, 0, T0, &r);
	assert_int_equal(r.remaining, 4);
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	assert_int_equal(it.admitted, 1);
	assert_int_equal(it.returned, 0);
	/* after it: sent as given back */
	assert_int_equal(rl_table_give_back_ref(t, id, &ref, 1, T0), 0);
	rl_table_take(t, id, "1.2.3.4", 7, 0, T0, &r);
	assert_int_equal(r.remaining, 5);
	assert_int_equal(take_n(t, id, "1.2.3.4", 1, T0), 1);
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	assert_int_equal(it.admitted, 1);
	assert_int_equal(it.returned, 1);
	/* 127 at most a round: the rest stay charged there */
	for (int i = 0; i < 130; i++)
		rl_table_give_back_ref(t, id, &ref, 1, T0);
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	assert_int_equal(it.admitted, 0);
	assert_int_equal(it.returned, 127);
	assert_int_equal(rl_table_give_back_ref(t, id, &none, 1, T0), -ENOENT);
	assert_int_equal(rl_table_give_back_ref(t, id + 1, &ref, 1, T0), -EINVAL);
	rl_table_close(t);
}

/* A plan set after a key's first request carries what it used over in
 * requests, a request partly repaid included: 1 request, the plan 0.5 s
 * later, then 7: a paid key (6/h) gets 5 more and a free one (3/h) 2, the
 * bucket of each tariff and not one request more. */
static void test_plan_keeps_what_was_used(void **state)
{
	static const struct rl_rate plans[] = { { 3600 * SEC, 6, 6 },
						{ 3600 * SEC, 3, 3 } };
	const struct rl_rule_def def = { "login", RL_ALGO_GCRA,
					 { 3600 * SEC, 3, 3 }, 2, plans };

	(void)state;
	for (unsigned plan = 1; plan <= 2; plan++) {
		struct rl_table *t = open_new(64);
		struct rl_sync_item it;
		unsigned id;

		assert_int_equal(rl_table_rule(t, &def, &id), 0);
		/* an agent is syncing: decisions count what it collects */
		rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
		assert_int_equal(take_n(t, id, "k", 1, T0), 1);
		assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
		assert_int_equal(rl_table_set_plan(t, it.index, it.tag, plan,
						   T0 + 500 * MS), 0);
		assert_int_equal(take_n(t, id, "k", 7, T0 + 500 * MS),
				 plan == 1 ? 5 : 2);
		rl_table_close(t);
		rl_table_unlink(seg);
	}
}

/* A key new to a host, with an agent syncing N hosts: the host starts
 * from its share of the bucket, ceil(burst / N), until the agent's first
 * sync of the key puts the store's state in its place (lower or higher);
 * after that the store's figure only raises it. Alone (N = 1), or with no
 * agent syncing, the whole bucket. */
static void test_fresh_key_share(void **state)
{
	const struct rl_rule_def def = { "r", RL_ALGO_GCRA,
					 { 60 * SEC, 10, 10 }, 0, NULL };
	const uint64_t ei = 6 * SEC;

	(void)state;
	for (unsigned hosts = 1; hosts <= 4; hosts++) {
		struct rl_table *t = open_new(64);
		struct rl_sync_item it;
		unsigned id;
		int share = (10 + (int)hosts - 1) / (int)hosts, left, grant;
		struct rl_result r;

		assert_int_equal(rl_table_rule(t, &def, &id), 0);
		rl_table_agent_set_hosts(t, hosts);
		rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
		assert_int_equal(take_n(t, id, "k", 12, T0), share);
		assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
		assert_int_equal((int)it.admitted, share);
		/* The store: the other hosts used 2 more than this one, and
		 * of what is left grants this host `grant` until its next
		 * round (sync.c: the others' grants and, while the key is
		 * young, their fresh shares count as spent); refused past
		 * it, a client is told to come back then (the round: 50 ms),
		 * not when the grant alone would refill. */
		left = share + 2 < 10 ? 10 - share - 2 : 0;
		grant = (left + (int)hosts - 1) / (int)hosts;
		assert_int_equal(rl_table_sync_grant(t, it.index, it.tag,
						     (uint64_t)(share + 2) * ei,
						     (uint64_t)grant, T0), 0);
		rl_table_agent_set_interval(t, 50);
		assert_int_equal(take_n(t, id, "k", 12, T0), grant);
		rl_table_take(t, id, "k", 1, 1, T0, &r);
		assert_false(r.allowed);
		if (hosts > 1 && left > grant)
			assert_true(r.retry_after_ns <= 50 * MS);
		/* The store: the whole bucket used, all hosts together. */
		assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
		assert_int_equal(rl_table_sync_grant(t, it.index, it.tag,
						     10 * ei, 0, T0), 0);
		assert_int_equal(take_n(t, id, "k", 1, T0), 0);
		rl_table_close(t);
		rl_table_unlink(seg);
	}
	/* No agent syncing: a full bucket, whatever the hosts. */
	{
		struct rl_table *t = open_new(64);
		unsigned id;

		assert_int_equal(rl_table_rule(t, &def, &id), 0);
		rl_table_agent_set_hosts(t, 4);
		assert_int_equal(take_n(t, id, "k", 12, T0), 10);
		rl_table_close(t);
	}
}

/* The share's edges: a request costing more than the share but not more
 * than the bucket passes; a share given back is replaced by the store's
 * "owes nothing"; a share charged for a store outage is only raised by the
 * store's figure afterwards, never lowered. */
static void test_fresh_share_edges(void **state)
{
	const struct rl_rule_def def = { "r", RL_ALGO_GCRA,
					 { 60 * SEC, 10, 10 }, 0, NULL };
	const uint64_t ei = 6 * SEC;
	struct rl_sync_item it;
	struct rl_result r;
	struct rl_table *t;
	unsigned id;

	(void)state;
	for (int c = 0; c < 3; c++) {
		t = open_new(64);
		assert_int_equal(rl_table_rule(t, &def, &id), 0);
		rl_table_agent_set_hosts(t, 2);
		rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
		if (c == 0) {
			/* cost 6 > share 5: passes, and 11 never would */
			rl_table_take(t, id, "k", 1, 6, T0, &r);
			assert_true(r.allowed);
			rl_table_take(t, id, "j", 1, 11, T0, &r);
			assert_false(r.allowed);
		} else if (c == 1) {
			assert_int_equal(take_n(t, id, "k", 1, T0), 1);
			assert_int_equal(rl_table_refund(t, id, "k", 1, 1, T0), 0);
			assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
			assert_int_equal((int)it.admitted, 0);
			/* a full bucket in the store, and a grant of 3: the
			 * share's hold gives way to it */
			assert_int_equal(rl_table_sync_grant(t, it.index, it.tag,
							     0, 3, T0), 0);
			assert_int_equal(take_n(t, id, "k", 12, T0), 3);
		} else {
			assert_int_equal(take_n(t, id, "k", 2, T0), 2);
			assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
			/* the store is down: charged for the other host */
			assert_int_equal(rl_table_sync_charge(t, it.index, it.tag,
							      2 * ei, T0), 0);
			/* back, knowing only 2, granting 4 of the 8 left: the
			 * charged state (the share's 5, 2 admitted, 2 charged:
			 * 9 owed) is only raised, never lowered: 1 more */
			assert_int_equal(rl_table_sync_grant(t, it.index, it.tag,
							     2 * ei, 4, T0), 0);
			assert_int_equal(take_n(t, id, "k", 12, T0), 1);
		}
		rl_table_close(t);
		rl_table_unlink(seg);
	}
}

/* ---- windows across hosts ---------------------------------------------------- */

/* Unix time 1800000000 s is a minute's start: the segment below was made
 * 30 s into that minute, at T0 on the monotonic clock. */
#define UNIX_MIN_MS 1800000000000ull

static struct rl_table *open_unix(uint64_t unix_ms_at_t0)
{
	struct rl_table *t = open_new(64);

	t->hdr->created_mono_ns = T0;
	t->hdr->created_unix_ms = unix_ms_at_t0;
	return t;
}

static int view_of(const struct rl_slot_view *v, void *arg)
{
	*(struct rl_slot_view *)arg = *v;
	return 1;
}

/* Windows start at multiples of the period on Unix time, not on the
 * monotonic clock (whose zero differs between hosts): a per-minute window
 * resets at :00, and what a client is told (Retry-After, RateLimit-Reset),
 * what rlshimctl shows and the store's window index all agree. T0 is a
 * multiple of a minute on the monotonic clock, 30 s past one on Unix time. */
static void test_window_unix_aligned(void **state)
{
	const struct rl_rule_def fx = { "fx", RL_ALGO_FIXED_WINDOW,
					{ 60 * SEC, 2, 2 }, 0, NULL };
	const struct rl_rule_def sw = { "sw", RL_ALGO_SLIDING_WINDOW,
					{ 60 * SEC, 2, 2 }, 0, NULL };
	struct rl_table *t = open_unix(UNIX_MIN_MS + 30000);
	struct rl_slot_view v;
	struct rl_sync_item it;
	struct rl_result r;
	unsigned f, w;

	(void)state;
	assert_int_equal(rl_table_rule(t, &fx, &f), 0);
	assert_int_equal(rl_table_rule(t, &sw, &w), 0);
	assert_int_equal(take_n(t, f, "k", 2, T0), 2);
	rl_table_take(t, f, "k", 1, 1, T0, &r);
	assert_false(r.allowed);
	assert_int_equal(r.retry_after_ns, 30 * SEC);
	assert_int_equal(r.reset_after_ns, 30 * SEC);
	assert_int_equal(rl_table_foreach(t, T0, view_of, &v), 1);
	assert_int_equal(v.debt_ns, 30 * SEC);
	assert_int_equal(take_n(t, f, "k", 1, T0 + 30 * SEC - 1), 0);
	assert_int_equal(take_n(t, f, "k", 3, T0 + 30 * SEC), 2);
	/* Sliding: the window that held 2 ends at T0 + 30 s and weighs half
	 * as much 30 s later. */
	assert_int_equal(take_n(t, w, "k", 2, T0), 2);
	assert_int_equal(take_n(t, w, "k", 1, T0 + 30 * SEC), 0);
	assert_int_equal(take_n(t, w, "k", 2, T0 + 60 * SEC), 1);
	/* The agent names the window by its Unix index. */
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(take_n(t, f, "j", 1, T0 + 31 * SEC), 1);
	assert_int_equal(rl_table_sync_collect(t, T0 + 31 * SEC, slot_of, &it), 1);
	assert_int_equal(it.window, UNIX_MIN_MS / 60000 + 1);
	rl_table_close(t);
}

/* A window's key new to a host, with an agent syncing N hosts: the host
 * starts from its share of the window, ceil(count / N), until the store's
 * counts arrive; at that first sync it counts the other hosts' shares as
 * spent, after it takes its share of what the store says is left, and a
 * client refused from a share is told to come back in a round. Fixed and
 * sliding alike, outside the previous window's weight. */
static void test_window_share(void **state)
{
	(void)state;
	for (int kind = 0; kind < 2; kind++) {
		const struct rl_rule_def def = {
			"r", kind ? RL_ALGO_SLIDING_WINDOW : RL_ALGO_FIXED_WINDOW,
			{ 60 * SEC, 10, 10 }, 0, NULL };

		for (unsigned hosts = 1; hosts <= 4; hosts++) {
			struct rl_table *t = open_unix(UNIX_MIN_MS);
			uint64_t idx = UNIX_MIN_MS / 60000;
			int share = (10 + (int)hosts - 1) / (int)hosts, left;
			struct rl_sync_item it;
			struct rl_result r;
			unsigned id;

			assert_int_equal(rl_table_rule(t, &def, &id), 0);
			rl_table_agent_set_hosts(t, hosts);
			rl_table_agent_set_interval(t, 50);
			rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
			assert_int_equal(take_n(t, id, "k", 12, T0), share);
			rl_table_take(t, id, "k", 1, 1, T0, &r);
			if (hosts > 1)
				assert_true(r.retry_after_ns <= 50 * MS);
			assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
			assert_int_equal((int)it.admitted, share);
			assert_int_equal(it.window, idx);
			/* The store: the other hosts used 2 more than this one.
			 * At this first sync of the key in the window (and in
			 * the window's first two rounds) the others may still
			 * be spending shares of their own: counted as spent,
			 * nothing is left for this host. */
			assert_int_equal(rl_table_sync_window(t, it.index, it.tag,
							      idx, share + 2, 0,
							      T0), 0);
			assert_int_equal(take_n(t, id, "k", 1, T0), 0);
			/* Rounds later (past the window's first two), the same:
			 * of what is left, its share. */
			assert_int_equal(rl_table_sync_collect(t, T0 + SEC, slot_of, &it), 1);
			assert_int_equal(rl_table_sync_window(t, it.index, it.tag,
							      idx, share + 2, 0,
							      T0 + SEC), 0);
			left = share + 2 < 10 ? 10 - share - 2 : 0;
			assert_int_equal(take_n(t, id, "k", 12, T0 + SEC),
					 (left + (int)hosts - 1) / (int)hosts);
			rl_table_take(t, id, "k", 1, 1, T0 + SEC, &r);
			assert_false(r.allowed);
			if (hosts > 1 && left > 1)
				assert_true(r.retry_after_ns <= 50 * MS);
			/* The store: the window used up, all hosts together. */
			assert_int_equal(rl_table_sync_collect(t, T0 + SEC, slot_of, &it), 1);
			assert_int_equal(rl_table_sync_window(t, it.index, it.tag,
							      idx, 10, 0, T0 + SEC), 0);
			assert_int_equal(take_n(t, id, "k", 1, T0 + SEC), 0);
			rl_table_close(t);
			rl_table_unlink(seg);
		}
	}
	/* No agent syncing: the whole window, whatever the hosts. */
	{
		const struct rl_rule_def def = { "r", RL_ALGO_FIXED_WINDOW,
						 { 60 * SEC, 10, 10 }, 0, NULL };
		struct rl_table *t = open_unix(UNIX_MIN_MS);
		unsigned id;

		assert_int_equal(rl_table_rule(t, &def, &id), 0);
		rl_table_agent_set_hosts(t, 4);
		assert_int_equal(take_n(t, id, "k", 12, T0), 10);
		rl_table_close(t);
	}
}

/* The store's counts on a key this host uses alone (one host alive): what
 * was admitted here since the collect comes on top; a lower count than the
 * state's never lowers it; counts for the window just over are the
 * previous window's (sliding), nothing for a fixed one; a key with a count
 * in the current window is collected every round, quiet or not, and no
 * longer once its window is over. */
static void test_window_apply(void **state)
{
	(void)state;
	for (int kind = 0; kind < 2; kind++) {
		const struct rl_rule_def def = {
			"r", kind ? RL_ALGO_SLIDING_WINDOW : RL_ALGO_FIXED_WINDOW,
			{ 60 * SEC, 10, 10 }, 0, NULL };
		struct rl_table *t = open_unix(UNIX_MIN_MS);
		uint64_t idx = UNIX_MIN_MS / 60000;
		struct rl_sync_item it;
		unsigned id;

		assert_int_equal(rl_table_rule(t, &def, &id), 0);
		rl_table_agent_set_hosts(t, 1);
		rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
		assert_int_equal(take_n(t, id, "k", 3, T0), 3);
		assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
		/* one more admitted before the store answers */
		assert_int_equal(take_n(t, id, "k", 1, T0), 1);
		/* the store has 3 of this host's and 3 of another's */
		assert_int_equal(rl_table_sync_window(t, it.index, it.tag, idx,
						      6, 0, T0), 0);
		assert_int_equal(take_n(t, id, "k", 12, T0), 3);
		/* a lower count is old news */
		assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
		assert_int_equal(rl_table_sync_window(t, it.index, it.tag, idx,
						      2, 0, T0), 0);
		assert_int_equal(take_n(t, id, "k", 1, T0), 0);
		rl_table_close(t);
		rl_table_unlink(seg);

		/* Quiet here, still collected while its window lasts. */
		t = open_unix(UNIX_MIN_MS);
		assert_int_equal(rl_table_rule(t, &def, &id), 0);
		rl_table_agent_set_hosts(t, 1);
		rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
		assert_int_equal(take_n(t, id, "k", 1, T0), 1);
		assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
		assert_int_equal(rl_table_sync_collect(t, T0 + SEC, slot_of, &it), 1);
		assert_int_equal(it.admitted, 0);
		assert_int_equal(rl_table_sync_collect(t, T0 + 60 * SEC, slot_of,
						       &it), 0);
		/* The store answers for the window that has just ended: 8 in
		 * it. Sliding, 30 s on they weigh 4 and 6 are left; fixed,
		 * the new window is whole. */
		assert_int_equal(rl_table_sync_window(t, it.index, it.tag, idx,
						      8, 0, T0 + 60 * SEC), 0);
		assert_int_equal(take_n(t, id, "k", 12, T0 + 90 * SEC),
				 kind ? 6 : 10);
		rl_table_close(t);
		rl_table_unlink(seg);
	}
}

/* In a window's first two rounds a host's syncs count the other hosts'
 * shares as spent whether or not it is its first sync of the key: theirs
 * may come a round late, and rounds drift. 10/m on 2 hosts, 1 used: what
 * this host may take after each sync. */
static void test_window_early(void **state)
{
	const struct rl_rule_def def = { "r", RL_ALGO_FIXED_WINDOW,
					 { 60 * SEC, 10, 10 }, 0, NULL };
	struct rl_table *t = open_unix(UNIX_MIN_MS);
	uint64_t idx = UNIX_MIN_MS / 60000;
	uint64_t at[3] = { T0, T0 + 60 * MS, T0 + 100 * MS };
	/* of the 9 left, less the other host's share (5): ceil(4 / 2); then
	 * ceil(9 / 2) */
	uint32_t gets[3] = { 2, 2, 5 };
	struct rl_sync_item it;
	struct rl_result r;
	unsigned id;

	(void)state;
	assert_int_equal(rl_table_rule(t, &def, &id), 0);
	rl_table_agent_set_hosts(t, 2);
	rl_table_agent_set_interval(t, 50);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(take_n(t, id, "k", 1, T0), 1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(rl_table_sync_collect(t, at[i], slot_of, &it), 1);
		assert_int_equal(rl_table_sync_window(t, it.index, it.tag, idx,
						      1, 0, at[i]), 0);
		rl_table_take(t, id, "k", 1, 0, at[i], &r);
		assert_int_equal(r.remaining, gets[i]);
	}
	rl_table_close(t);
}

/* Sliding, with other hosts: as the previous window's weight falls it
 * frees requests, and each host takes only its share of them. 10/m on 2
 * hosts, the store's previous window full (10), 1 in this one: half way
 * through, 4 are free in all; this host takes 1 of them (it carries 5 of
 * the previous 10, and the weight of the rest in its count), not 4. */
static void test_window_sliding_decay(void **state)
{
	const struct rl_rule_def def = { "r", RL_ALGO_SLIDING_WINDOW,
					 { 60 * SEC, 10, 10 }, 0, NULL };
	struct rl_table *t = open_unix(UNIX_MIN_MS);
	uint64_t idx = UNIX_MIN_MS / 60000;
	struct rl_sync_item it;
	unsigned id;

	(void)state;
	assert_int_equal(rl_table_rule(t, &def, &id), 0);
	rl_table_agent_set_hosts(t, 2);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(take_n(t, id, "k", 1, T0), 1);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
		assert_int_equal(rl_table_sync_window(t, it.index, it.tag, idx,
						      1, 10, T0), 0);
	}
	assert_int_equal(take_n(t, id, "k", 1, T0), 0);
	assert_int_equal(take_n(t, id, "k", 4, T0 + 30 * SEC), 1);
	rl_table_close(t);
}

/* The store down: a window is charged for the other hosts alive as if
 * each admitted what this one did, in its current window, and the store's
 * counts afterwards only raise that. 10/m on 2 hosts: 2 admitted here,
 * charged 2 for the other, the store knowing only this host's 2: 1 left
 * (the share alone would leave 4). */
static void test_window_store_down(void **state)
{
	const struct rl_rule_def def = { "r", RL_ALGO_FIXED_WINDOW,
					 { 60 * SEC, 10, 10 }, 0, NULL };
	struct rl_table *t = open_unix(UNIX_MIN_MS);
	struct rl_sync_item it;
	unsigned id;

	(void)state;
	assert_int_equal(rl_table_rule(t, &def, &id), 0);
	rl_table_agent_set_hosts(t, 2);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(take_n(t, id, "k", 2, T0), 2);
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	assert_int_equal(rl_table_sync_charge(t, it.index, it.tag, 2 * 6 * SEC,
					      T0), 0);
	assert_int_equal(rl_table_sync_window(t, it.index, it.tag,
					      UNIX_MIN_MS / 60000, 2, 0, T0), 0);
	assert_int_equal(take_n(t, id, "k", 12, T0), 1);
	rl_table_close(t);
}

/* The shim's way: an allowance is counted once the whole request is
 * allowed, a give-back touches no counter, so `allowed` never goes back
 * (a Prometheus counter must not). A denial is counted at once. */
static void test_uncounted(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned id = add_rule(t, "r", 60 * SEC, 2, 2);
	struct rl_rule_stats rs;
	struct rl_result r;

	(void)state;
	assert_int_equal(rl_table_take_uncounted(t, id, "k", 1, 1, T0, &r, NULL), 0);
	assert_true(r.allowed);
	assert_int_equal(rl_table_rule_stats(t, id, &rs), 0);
	assert_int_equal(rs.allowed, 0);
	assert_int_equal(rl_table_give_back(t, id, "k", 1, 1, T0), 0);
	assert_int_equal(rl_table_rule_stats(t, id, &rs), 0);
	assert_int_equal(rs.allowed, 0);
	/* Given back: both units are there again. */
	rl_table_take_uncounted(t, id, "k", 1, 1, T0, &r, NULL);
	rl_table_count_allowed(t, id);
	rl_table_take_uncounted(t, id, "k", 1, 1, T0, &r, NULL);
	assert_true(r.allowed);
	rl_table_count_allowed(t, id);
	rl_table_take_uncounted(t, id, "k", 1, 1, T0, &r, NULL);
	assert_false(r.allowed);
	assert_int_equal(rl_table_rule_stats(t, id, &rs), 0);
	assert_int_equal(rs.allowed, 2);
	assert_int_equal(rs.denied, 1);
	rl_table_count_allowed(t, RL_MAX_RULES); /* ignored */
	rl_table_close(t);
}

/* maxretry: denials within findtime of the first, per key and rule. */
static void test_fail_count(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned a = add_rule(t, "a", 60 * SEC, 3, 3);
	unsigned b = add_rule(t, "b", 60 * SEC, 3, 3);
	struct rl_slot_hint h = { 0, 0 };
	struct rl_result r;
	uint64_t find = 10 * SEC;

	(void)state;
	/* 3 within 10 s: the third bans, and counting starts over. */
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0, NULL), 0);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0 + 4 * SEC, NULL), 0);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0 + 9 * SEC, NULL), 1);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0 + 9 * SEC, NULL), 0);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0 + 9 * SEC, NULL), 0);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0 + 9 * SEC, NULL), 1);
	/* Other keys and other rules count apart. */
	assert_int_equal(rl_table_fail(t, a, "j", 1, 2, find, T0, NULL), 0);
	assert_int_equal(rl_table_fail(t, b, "k", 1, 2, find, T0, NULL), 0);
	assert_int_equal(rl_table_fail(t, b, "j", 1, 2, find, T0, NULL), 0);
	/* Two more than findtime after the first: a new count. */
	assert_int_equal(rl_table_fail(t, a, "j", 1, 2, find, T0 + find + 1 * SEC, NULL), 0);
	assert_int_equal(rl_table_fail(t, a, "j", 1, 2, find, T0 + find + 2 * SEC, NULL), 1);
	/* findtime itself is still within. */
	assert_int_equal(rl_table_fail(t, b, "j", 1, 2, find, T0 + find, NULL), 1);
	/* maxretry 1: every denial bans; 0: never. */
	assert_int_equal(rl_table_fail(t, b, "x", 1, 1, find, T0, NULL), 1);
	assert_int_equal(rl_table_fail(t, b, "y", 1, 0, find, T0, NULL), 0);
	assert_int_equal(rl_table_fail(t, 63, "k", 1, 1, find, T0, NULL), -EINVAL);
	/* Through the hint of a decision on the same (rule, key). */
	rl_table_take_hint(t, a, "h", 1, 1, T0, &r, &h);
	assert_int_not_equal(h.tag, 0);
	assert_int_equal(rl_table_fail(t, a, "h", 1, 2, find, T0, &h), 0);
	assert_int_equal(rl_table_fail(t, a, "h", 1, 2, find, T0, NULL), 1);
	/* Counting needs no decision's state: the bucket is untouched. */
	rl_table_take(t, a, "k", 1, 0, T0, &r);
	assert_int_equal(r.remaining, 3);
	rl_table_close(t);
}

/* What rl_table_fails_collect gave, by key ("k" or "j"). */
struct fails_seen {
	uint32_t k, j, calls;
};

static int fails_of(const struct rl_fail_item *it, void *arg)
{
	struct fails_seen *f = arg;

	f->calls++;
	if (it->key_len == 1 && it->key[0] == 'k')
		f->k += it->fails;
	if (it->key_len == 1 && it->key[0] == 'j')
		f->j += it->fails;
	return 0;
}

static struct fails_seen fails_collect(struct rl_table *t)
{
	struct fails_seen f = { 0, 0, 0 };

	assert_int_equal(rl_table_fails_collect(t, fails_of, &f), 0);
	return f;
}

/* maxretry across hosts: with an agent syncing, every denial counted is
 * also owed to the store's count, once, the local maxretry-th included;
 * without one, nothing is. */
static void test_fail_owed(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned a = add_rule(t, "a", 60 * SEC, 3, 3);
	uint64_t find = 10 * SEC;
	struct fails_seen f;

	(void)state;
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0, NULL), 0);
	f = fails_collect(t);
	assert_int_equal(f.calls, 0);

	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0, NULL), 0);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0, NULL), 1);
	assert_int_equal(rl_table_fail(t, a, "j", 1, 3, find, T0, NULL), 0);
	f = fails_collect(t);
	assert_int_equal(f.calls, 2);
	assert_int_equal(f.k, 2);
	assert_int_equal(f.j, 1);
	/* Taken: the next collect has nothing. */
	f = fails_collect(t);
	assert_int_equal(f.calls, 0);
	/* A key's count that high between two rounds stops at 65535. */
	for (unsigned i = 0; i < 70000; i++)
		rl_table_fail(t, a, "k", 1, 1000000, find, T0, NULL);
	f = fails_collect(t);
	assert_int_equal(f.k, 65535);
	rl_table_close(t);
}

/* A ban took the key's denials into account: forgotten, here and in what
 * is owed to the store, so that they do not ban it a second time. */
static void test_fail_forget(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned a = add_rule(t, "a", 60 * SEC, 3, 3);
	uint64_t find = 10 * SEC;
	struct fails_seen f;

	(void)state;
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0, NULL), 0);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0, NULL), 0);
	assert_int_equal(rl_table_fail(t, a, "j", 1, 3, find, T0, NULL), 0);
	assert_int_equal(rl_table_fail_forget(t, a, "k", 1, T0), 0);
	f = fails_collect(t);
	assert_int_equal(f.k, 0);
	assert_int_equal(f.j, 1);
	/* Two more to go, not one. */
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0, NULL), 0);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0, NULL), 0);
	assert_int_equal(rl_table_fail(t, a, "k", 1, 3, find, T0, NULL), 1);
	assert_int_equal(rl_table_fail_forget(t, a, "x", 1, T0), -ENOENT);
	assert_int_equal(rl_table_fail_forget(t, 63, "k", 1, T0), -EINVAL);
	rl_table_close(t);
}

/* ---- eviction ------------------------------------------------------------------- */

static void key_of(unsigned i, char *buf)
{
	snprintf(buf, 16, "k%08u", i);
}

/* Takes `cost` for each of the `n` keys from key_of(first) on, at `now`:
 * how many were allowed. */
static unsigned take_keys(struct rl_table *t, unsigned id, unsigned first,
			  unsigned n, uint32_t cost, uint64_t now)
{
	struct rl_result r;
	unsigned allowed = 0;
	char k[16];

	for (unsigned i = first; i < first + n; i++) {
		key_of(i, k);
		rl_table_take(t, id, k, 9, cost, now, &r);
		allowed += r.allowed;
	}
	return allowed;
}

/* One bucket of 16: idle keys are reused without counting an eviction. */
static void test_idle_reuse(void **state)
{
	struct rl_table *t = open_new(16);
	unsigned id = add_rule(t, "r", SEC, 10, 10);
	struct rl_table_stats ts;

	(void)state;
	take_keys(t, id, 0, 16, 1, T0);
	assert_int_equal(rl_table_stats(t, T0, &ts), 0);
	assert_int_equal(ts.keys, 16);
	assert_int_equal(ts.occupied, 16);
	/* 100 ms later every bucket is full again: all 16 idle. */
	assert_int_equal(take_keys(t, id, 16, 16, 1, T0 + 100 * MS), 16);
	assert_int_equal(rl_table_stats(t, T0 + 100 * MS, &ts), 0);
	assert_int_equal(ts.evictions, 0);
	assert_int_equal(ts.overflows, 0);
	assert_int_equal(ts.capacity, 16);
	rl_table_close(t);
}

/* A key being limited is never evicted by a flood of new keys. */
static void test_limited_key_survives(void **state)
{
	struct rl_table *t = open_new(16);
	unsigned id = add_rule(t, "r", SEC, 10, 10);
	struct rl_table_check chk;
	struct rl_table_stats ts;
	struct rl_result r;
	char k[16];

	(void)state;
	for (int i = 0; i < 10; i++)
		rl_table_take(t, id, "victim", 6, 1, T0, &r);
	for (unsigned i = 0; i < 10000; i++) {
		uint64_t now = T0 + i * 10000; /* 10 us apart */

		key_of(i, k);
		rl_table_take(t, id, k, 9, 1, now, &r);
		assert_true(r.allowed);
		if (i % 1000 == 0) {
			/* Keep it over its limit: retries never pass. */
			rl_table_take(t, id, "victim", 6, 1, now, &r);
			assert_false(r.allowed);
		}
	}
	assert_int_equal(rl_table_stats(t, T0 + SEC / 10, &ts), 0);
	assert_true(ts.evictions > 9000);
	assert_int_equal(rl_table_check(t, T0 + SEC / 10, &chk), 0);
	assert_int_equal(chk.duplicates, 0);
	rl_table_close(t);
}

/* Least debt goes first among live keys. */
static void test_least_debt_evicted(void **state)
{
	struct rl_table *t = open_new(16);
	unsigned id = add_rule(t, "r", SEC, 10, 10);
	struct rl_result r;
	char k[16];

	(void)state;
	/* 15 keys with debt 5 (half the bucket), one with debt 1. */
	take_keys(t, id, 0, 15, 5, T0);
	rl_table_take(t, id, "light", 5, 1, T0, &r);
	rl_table_take(t, id, "newcomer", 8, 1, T0, &r);
	/* "light" went: a peek sees a new key (and claims nothing). */
	rl_table_take(t, id, "light", 5, 0, T0, &r);
	assert_int_equal(r.remaining, 10);
	rl_table_take(t, id, "newcomer", 8, 0, T0, &r);
	assert_int_equal(r.remaining, 9);
	/* The heavy ones all kept their state. */
	for (unsigned i = 0; i < 15; i++) {
		key_of(i, k);
		rl_table_take(t, id, k, 9, 0, T0, &r);
		assert_int_equal(r.remaining, 5);
	}
	rl_table_close(t);
}

/* Every candidate limited: decide without a slot, allow the newcomer. */
static void test_overflow(void **state)
{
	struct rl_table *t = open_new(16);
	unsigned id = add_rule(t, "r", 60 * SEC, 2, 2);
	struct rl_table_stats ts;
	struct rl_result r;

	(void)state;
	assert_int_equal(take_keys(t, id, 0, 16, 2, T0), 16);
	rl_table_take(t, id, "new", 3, 1, T0, &r);
	assert_true(r.allowed);
	assert_int_equal(r.remaining, 1);
	assert_int_equal(rl_table_stats(t, T0, &ts), 0);
	assert_int_equal(ts.overflows, 1);
	assert_int_equal(ts.evictions, 0);
	/* The limited ones are all still limited. */
	assert_int_equal(take_keys(t, id, 0, 16, 1, T0), 0);
	rl_table_close(t);
}

/* ---- plans mirrored ahead of a key's first request ----------------------------- */

/* The rule of test_plan_keeps_what_was_used: 3/h, plans paid 6/h, free 3/h. */
static unsigned plan_rule(struct rl_table *t)
{
	static const struct rl_rate plans[] = { { 3600 * SEC, 6, 6 },
						{ 3600 * SEC, 3, 3 } };
	const struct rl_rule_def def = { "api", RL_ALGO_GCRA,
					 { 3600 * SEC, 3, 3 }, 2, plans };
	unsigned id;

	assert_int_equal(rl_table_rule(t, &def, &id), 0);
	return id;
}

/* A key planned before this host has seen it is judged by its plan from
 * its first request: 6 of 7 on paid, where the rule's rate gives 3. A key
 * on `rate` needs no slot, and gets none. */
static void test_plan_ahead(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned id = plan_rule(t);
	struct rl_table_stats ts;

	(void)state;
	assert_int_equal(rl_table_plan_ahead(t, id, "paid", 4, 1, T0), 0);
	assert_int_equal(rl_table_plan_ahead(t, id, "none", 4, 0, T0), 0);
	assert_int_equal(rl_table_stats(t, T0, &ts), 0);
	assert_int_equal(ts.occupied, 1);
	/* said again each scan: nothing changes */
	assert_int_equal(rl_table_plan_ahead(t, id, "paid", 4, 1, T0 + MS), 0);
	assert_int_equal(take_n(t, id, "paid", 7, T0 + 2 * MS), 6);
	assert_int_equal(take_n(t, id, "none", 7, T0 + 2 * MS), 3);
	/* Back to `rate` (HDEL) for a key it knows: what was used stays
	 * used, in requests (6 of paid is the whole of 3/h). */
	assert_int_equal(rl_table_plan_ahead(t, id, "paid", 4, 0, T0 + 3 * MS), 0);
	assert_int_equal(take_n(t, id, "paid", 1, T0 + 3 * MS), 0);
	assert_int_equal(rl_table_plan_ahead(t, id, "x", 1, 3, T0), -ESTALE);
	assert_int_equal(rl_table_plan_ahead(t, 63, "x", 1, 1, T0), -EINVAL);
	rl_table_close(t);
}

/* A plan for a key already in use carries its use over, as the sync's
 * rl_table_set_plan does: 1 request on `rate`, then paid: 5 more. */
static void test_plan_ahead_key_in_use(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned id = plan_rule(t);

	(void)state;
	assert_int_equal(take_n(t, id, "k", 1, T0), 1);
	assert_int_equal(rl_table_plan_ahead(t, id, "k", 1, 1, T0 + 500 * MS), 0);
	assert_int_equal(take_n(t, id, "k", 7, T0 + 500 * MS), 5);
	rl_table_close(t);
}

/* A key another host used, mirrored before this host meets it: it
 * starts from the store's state, converted to this host's tariff, and
 * with several hosts alive keeps only its share of what is left. */
static void test_sync_mirror(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned id = plan_rule(t); /* rate 3/h: 20 min an interval */
	const uint64_t ei = 1200 * SEC;

	(void)state;
	/* 2 of 3 used elsewhere: one left */
	assert_int_equal(rl_table_sync_mirror(t, id, "k", 1, 2 * ei, ei, T0), 0);
	assert_int_equal(take_n(t, id, "k", 3, T0 + MS), 1);
	/* 1 request counted at paid's 10 min interval (a host that knew the
	 * key's plan): 1 request here too, two left */
	assert_int_equal(rl_table_sync_mirror(t, id, "p", 1, ei / 2, ei / 2,
					      T0), 0);
	assert_int_equal(take_n(t, id, "p", 3, T0 + MS), 2);
	/* repaid: nothing to mirror, no slot taken */
	assert_int_equal(rl_table_sync_mirror(t, id, "z", 1, 0, ei, T0), 0);
	assert_int_equal(take_n(t, id, "z", 4, T0 + MS), 3);
	/* two hosts alive, 1 used of 3, the key new here: the others hold
	 * grants this host does not know, so it has none until its own sync
	 * of the key (in debt here now) brings one: then of the 2 left, the
	 * grant's 1 */
	rl_table_close(t);
	rl_table_unlink(seg);
	t = open_new(64);
	id = plan_rule(t);
	rl_table_agent_set_hosts(t, 2);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(rl_table_sync_mirror(t, id, "h", 1, ei, ei, T0), 0);
	assert_int_equal(take_n(t, id, "h", 3, T0 + MS), 0);
	/* (a mirror of it now, the pull bringing this host's own keys back,
	 * changes nothing) */
	assert_int_equal(rl_table_sync_mirror(t, id, "h", 1, 3 * ei, ei, T0 + MS), 0);
	{
		struct rl_sync_item it;

		assert_int_equal(rl_table_sync_collect(t, T0 + MS, slot_of, &it), 1);
		assert_int_equal(rl_table_sync_grant(t, it.index, it.tag, ei, 1,
						     T0 + MS), 0);
	}
	assert_int_equal(take_n(t, id, "h", 3, T0 + 2 * MS), 1);
	assert_int_equal(rl_table_sync_mirror(t, 63, "x", 1, ei, ei, T0), -EINVAL);
	rl_table_close(t);
}

/* The store's grant: of what is left, this host may use `grant` until
 * its next sync, less what it admitted since the collect; a grant that
 * covers all that is left holds nothing back. */
static void test_sync_grant(void **state)
{
	const struct rl_rule_def def = { "r", RL_ALGO_GCRA,
					 { 60 * SEC, 10, 10 }, 0, NULL };
	const uint64_t ei = 6 * SEC;
	struct rl_table *t = open_new(64);
	struct rl_sync_item it;
	unsigned id;

	(void)state;
	assert_int_equal(rl_table_rule(t, &def, &id), 0);
	rl_table_agent_set_hosts(t, 4);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(take_n(t, id, "k", 2, T0), 2); /* its fresh share: 3 */
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	/* 2 used in all, a grant of 3 of the 8 left */
	assert_int_equal(rl_table_sync_grant(t, it.index, it.tag, 2 * ei, 3, T0), 0);
	assert_int_equal(take_n(t, id, "k", 9, T0), 3);
	/* one admitted since the collect comes out of the next grant */
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	assert_int_equal(take_n(t, id, "k", 1, T0), 0);
	assert_int_equal(rl_table_sync_grant(t, it.index, it.tag, 5 * ei, 8, T0), 0);
	/* 5 used, 5 left, a grant of 8: all 5 left, nothing held back */
	assert_int_equal(take_n(t, id, "k", 9, T0), 5);
	/* a grant of 0: nothing until the next sync */
	rl_table_close(t);
	rl_table_unlink(seg);
	t = open_new(64);
	assert_int_equal(rl_table_rule(t, &def, &id), 0);
	rl_table_agent_set_hosts(t, 4);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(take_n(t, id, "j", 1, T0), 1);
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	assert_int_equal(rl_table_sync_grant(t, it.index, it.tag, ei, 0, T0), 0);
	assert_int_equal(take_n(t, id, "j", 9, T0), 0);
	rl_table_close(t);
}

/* What a grant or a lend holds back is known to the agent (its collect
 * tells the store the key's debt less it), what was lent since a collect
 * is added to the grant that answers it (the store's sync knew nothing of
 * it), and a lend of nothing leaves a state a sync gave this host as it
 * was. */
static void test_held_and_lent(void **state)
{
	const struct rl_rule_def def = { "r", RL_ALGO_GCRA,
					 { 60 * SEC, 10, 10 }, 0, NULL };
	const uint64_t ei = 6 * SEC;
	struct rl_table *t = open_new(64);
	struct rl_sync_item it;
	struct rl_ask_item lend;
	unsigned id;

	(void)state;
	assert_int_equal(rl_table_rule(t, &def, &id), 0);
	rl_table_agent_set_hosts(t, 4);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	/* not tracked: a held state's debt is not known to be a debt */
	assert_int_equal(take_n(t, id, "u", 1, T0), 1);
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	assert_int_equal(rl_table_sync_grant(t, it.index, it.tag, ei, 1, T0), 0);
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	assert_true(it.provisional);
	assert_false(it.held_known);
	rl_table_close(t);
	rl_table_unlink(seg);

	t = open_new(64);
	assert_int_equal(rl_table_track_held(t), 0);
	assert_int_equal(rl_table_rule(t, &def, &id), 0);
	rl_table_agent_set_hosts(t, 4);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(take_n(t, id, "k", 2, T0), 2);
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	/* 2 owed, a grant of 3: the state leaves 3 (T0 + 42 s), 30 s of it
	 * held back beyond the debt */
	assert_int_equal(rl_table_sync_grant(t, it.index, it.tag, 2 * ei, 3, T0), 0);
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	assert_true(it.provisional);
	assert_true(it.held_known);
	assert_int_equal(it.debt_ns, 42 * SEC);
	assert_int_equal(it.held_ns, 30 * SEC);
	/* a lend of 2 after that collect: from what was held back */
	lend = (struct rl_ask_item){ .id = 0, .word = 0xdead, .kind = RL_ASK_LEND,
				     .rule = id, .index = it.index, .tag = it.tag,
				     .cost = 1 };
	rl_table_ask_lent(t, &lend, 2, T0, T0);
	assert_int_equal(take_n(t, id, "k", 3, T0), 3);
	/* the sync's answer to that collect: a grant of 3 knows nothing of
	 * the 2 lent; of the 5, 3 spent since, 2 left */
	assert_int_equal(rl_table_sync_grant(t, it.index, it.tag, 2 * ei, 3, T0), 0);
	assert_int_equal(rl_table_sync_collect(t, T0, slot_of, &it), 1);
	/* what the key owes: 5 requests, the 2 before and the 3 since */
	assert_true(it.held_known);
	assert_int_equal(it.debt_ns - it.held_ns, 5 * ei);
	/* lent nothing now: the state the sync gave stands */
	lend.index = it.index;
	lend.tag = it.tag;
	rl_table_ask_lent(t, &lend, 0, T0, T0);
	assert_int_equal(take_n(t, id, "k", 9, T0), 2);
	rl_table_close(t);
}

/* The planned keys may outnumber the slots: one not seen yet takes an
 * empty or idle slot, never a key's in use. One bucket of 16 in use:
 * refused, and every key keeps its state; once they are idle, taken. */
static void test_plan_ahead_evicts_no_key_in_use(void **state)
{
	struct rl_table *t = open_new(16);
	unsigned id = plan_rule(t);
	struct rl_table_stats ts;

	(void)state;
	assert_int_equal(take_keys(t, id, 0, 16, 1, T0), 16);
	assert_int_equal(rl_table_plan_ahead(t, id, "paid", 4, 1, T0), -ENOSPC);
	assert_int_equal(take_keys(t, id, 0, 16, 2, T0), 16);
	assert_int_equal(take_keys(t, id, 0, 16, 1, T0), 0);
	assert_int_equal(rl_table_stats(t, T0, &ts), 0);
	assert_int_equal(ts.evictions, 0);
	/* two hours on, all full again: idle */
	assert_int_equal(rl_table_plan_ahead(t, id, "paid", 4, 1,
					     T0 + 7200 * SEC), 0);
	assert_int_equal(take_n(t, id, "paid", 7, T0 + 7200 * SEC), 6);
	assert_int_equal(rl_table_stats(t, T0 + 7200 * SEC, &ts), 0);
	assert_int_equal(ts.evictions, 0);
	rl_table_close(t);
}

/* ---- markers ------------------------------------------------------------------ */

/* A marker left by a process that died while re-keying is cleared after
 * the timeout; meanwhile the key is decided without waiting. */
static void test_stale_marker(void **state)
{
	struct rl_table *t = open_new(16);
	unsigned id = add_rule(t, "r", 60 * SEC, 2, 2);
	struct rl_table_check chk;
	struct rl_result r;

	(void)state;
	rl_table_take(t, id, "k", 1, 1, T0, &r);
	atomic_store(&t->slots[0].state, RL_STATE_MARK | T0);
	rl_table_take(t, id, "k", 1, 1, T0 + 1 * MS, &r);
	assert_true(r.allowed); /* decided without its slot */
	assert_int_equal(r.remaining, 1);
	assert_int_equal(rl_table_check(t, T0 + 1 * MS, &chk), 0);
	assert_int_equal(chk.markers, 1);
	assert_true(rl_table_check(t, T0 + SEC, &chk) > 0);
	assert_non_null(strstr(chk.why.msg, "stale marker"));
	/* Past the timeout the next decision clears it and uses the slot. */
	rl_table_take(t, id, "k", 1, 1, T0 + SEC, &r);
	assert_int_equal(atomic_load(&t->hdr->marks_cleared), 1);
	rl_table_take(t, id, "k", 1, 1, T0 + SEC, &r);
	assert_int_equal(rl_table_check(t, T0 + SEC, &chk), 0);
	assert_int_equal(chk.markers, 0);
	rl_table_close(t);
}

/* ---- inspection ------------------------------------------------------------------ */

struct seen {
	int n;
	int found;
};

static int visit(const struct rl_slot_view *v, void *arg)
{
	struct seen *s = arg;

	s->n++;
	if (v->key_len == 7 && memcmp(v->key, "1.2.3.4", 7) == 0) {
		s->found = 1;
		assert_int_equal(v->peek.remaining, 1);
		assert_int_equal(v->debt_ns, 40 * SEC);
	}
	return 0;
}

/* ---- the denial summary ----------------------------------------------------- */

struct lines {
	unsigned n;
	char rule[4][32];
	uint64_t denied[4], over[4];
};

static void note_line(const char *rule, uint64_t denied, uint64_t over_ms,
		      void *arg)
{
	struct lines *l = arg;

	assert_true(l->n < 4);
	snprintf(l->rule[l->n], sizeof(l->rule[0]), "%s", rule);
	l->denied[l->n] = denied;
	l->over[l->n++] = over_ms;
}

static void deny(struct rl_table *t, unsigned rule, const char *key, int n)
{
	struct rl_result r;

	for (int i = 0; i < n; i++) {
		assert_int_equal(rl_table_take(t, rule, key, strlen(key), 1, T0, &r), 0);
		assert_false(r.allowed);
	}
}

/* One line per rule name and interval, with the denials since the last
 * line; one process (table handle) takes each interval. */
static void test_summarise(void **state)
{
	struct rl_table *a = open_new(64), *b = NULL;
	unsigned sms = add_rule(a, "sms", 60 * SEC, 1, 1);
	unsigned api = add_rule(a, "api", 60 * SEC, 1, 1);
	struct rl_rule_def fixed = { .name = "sms",
				     .algorithm = RL_ALGO_FIXED_WINDOW,
				     .rate = { 60 * SEC, 2, 2 } };
	unsigned sms2 = 99; /* reloaded with another algorithm: another rule */
	struct rl_result r;
	struct lines l = { 0 };
	const uint64_t B = T0 / MS; /* monotonic ms, as the shim passes */

	(void)state;
	assert_int_equal(rl_table_rule(a, &fixed, &sms2), 0);
	assert_int_not_equal(sms2, sms);
	assert_int_equal(rl_table_open(seg, 0, 0, &b, NULL), 0);
	assert_int_equal(rl_table_take(a, sms, "k", 1, 1, T0, &r), 0);
	/* Nothing denied yet: the first interval says nothing. */
	assert_int_equal(rl_table_summarise(a, B + 1000, 10000, note_line, &l), 0);
	deny(a, sms, "k", 3);
	deny(b, api, "j", 0);
	assert_int_equal(rl_table_take(b, api, "j", 1, 1, T0, &r), 0);
	deny(b, api, "j", 2);
	/* Within the interval: nothing, from either process. */
	assert_int_equal(rl_table_summarise(a, B + 10999, 10000, note_line, &l), 0);
	assert_int_equal(rl_table_summarise(b, B + 10999, 10000, note_line, &l), 0);
	assert_int_equal(rl_table_summarise(b, B + 11000, 10000, note_line, &l), 2);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.rule[0], "sms");
	assert_int_equal(l.denied[0], 3);
	assert_int_equal(l.over[0], 10000);
	assert_string_equal(l.rule[1], "api");
	assert_int_equal(l.denied[1], 2);
	/* The interval was taken: the other process says nothing. */
	assert_int_equal(rl_table_summarise(a, B + 11000, 10000, note_line, &l), 0);
	/* Both entries named sms: one line, their sum; only what is new. */
	assert_int_equal(rl_table_take(a, sms2, "k", 1, 2, T0, &r), 0);
	deny(a, sms2, "k", 4);
	deny(a, sms, "k", 1);
	l.n = 0;
	assert_int_equal(rl_table_summarise(a, B + 30000, 10000, note_line, &l), 1);
	assert_string_equal(l.rule[0], "sms");
	assert_int_equal(l.denied[0], 5);
	assert_int_equal(l.over[0], 19000);
	rl_table_close(a);
	rl_table_close(b);
}

static void test_foreach(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned id = add_rule(t, "sms", 60 * SEC, 3, 3);
	struct seen s = { 0, 0 };
	struct rl_result r;

	(void)state;
	rl_table_take(t, id, "1.2.3.4", 7, 2, T0, &r);
	rl_table_take(t, id, "5.6.7.8", 7, 1, T0, &r);
	assert_int_equal(rl_table_foreach(t, T0, visit, &s), 0);
	assert_int_equal(s.n, 2);
	assert_true(s.found);
	/* Once repaid, keys are no longer listed. */
	s.n = 0;
	assert_int_equal(rl_table_foreach(t, T0 + 60 * SEC, visit, &s), 0);
	assert_int_equal(s.n, 0);
	rl_table_close(t);
}

/* One key's view: its live state, as a peek sees it, and its retry and
 * reset; a key never seen, or repaid, is new with a full bucket; a long
 * key is found by its whole bytes; an unknown rule is refused. */
static void test_key_view(void **state)
{
	struct rl_table *t = open_new(64);
	unsigned id = add_rule(t, "sms", 60 * SEC, 3, 3);
	unsigned other = add_rule(t, "api", 60 * SEC, 10, 10);
	char longkey[80];
	struct rl_slot_view v;
	struct rl_result r;

	(void)state;
	assert_int_equal(take_n(t, id, "1.2.3.4", 2, T0), 2);
	assert_int_equal(rl_table_key_view(t, id, "1.2.3.4", 7, T0, &v), 1);
	assert_int_equal(v.rule, id);
	assert_int_equal(v.peek.limit, 3);
	assert_int_equal(v.peek.remaining, 1);
	assert_int_equal(v.peek.reset_after_ns, 40 * SEC);
	assert_int_equal(v.key_len, 7);
	assert_memory_equal(v.key, "1.2.3.4", 7);
	/* the same bytes under another rule are another key */
	assert_int_equal(rl_table_key_view(t, other, "1.2.3.4", 7, T0, &v), 0);
	assert_int_equal(v.peek.remaining, 10);
	assert_int_equal(rl_table_key_view(t, id, "9.9.9.9", 7, T0, &v), 0);
	assert_int_equal(v.index, UINT32_MAX);
	assert_int_equal(v.peek.limit, 3);
	assert_int_equal(v.peek.remaining, 3);
	assert_int_equal(v.peek.reset_after_ns, 0);
	/* repaid: new again */
	assert_int_equal(rl_table_key_view(t, id, "1.2.3.4", 7, T0 + 40 * SEC, &v), 0);
	assert_int_equal(v.peek.remaining, 3);
	memset(longkey, 'k', sizeof(longkey));
	for (int i = 0; i < 3; i++) {
		rl_table_take(t, id, longkey, sizeof(longkey), 1, T0, &r);
		assert_true(r.allowed);
	}
	assert_int_equal(rl_table_key_view(t, id, longkey, sizeof(longkey), T0, &v), 1);
	assert_int_equal(v.peek.remaining, 0);
	assert_true(v.truncated);
	longkey[79] = 'x';
	assert_int_equal(rl_table_key_view(t, id, longkey, sizeof(longkey), T0, &v), 0);
	assert_int_equal(rl_table_key_view(t, 63, "1.2.3.4", 7, T0, &v), -EINVAL);
	assert_int_equal(rl_table_key_view(t, 64, "1.2.3.4", 7, T0, &v), -EINVAL);
	rl_table_close(t);
}

struct want_key {
	const char *key;
	int admitted;   /* the key's, -1 when not collected */
	unsigned items;
};

static int admitted_of(const struct rl_sync_item *it, void *arg)
{
	struct want_key *w = arg;

	w->items++;
	if (it->key_len == strlen(w->key) &&
	    memcmp(it->key, w->key, it->key_len) == 0)
		w->admitted = (int)it->admitted;
	return 0;
}

/* What the agent's collect at `now` takes of `key`, -1 if nothing. */
static int collected(struct rl_table *t, const char *key, uint64_t now)
{
	struct want_key w = { key, -1, 0 };

	assert_int_equal(rl_table_sync_collect(t, now, admitted_of, &w), 0);
	return w.admitted;
}

/* A reset gives the key a full bucket, as seen from every handle, and
 * leaves nothing for the agent to push: what the key admitted before it
 * is forgiven, what it admits after is counted as usual; other keys keep
 * theirs; a key with nothing to reset is 0; an unknown rule -EINVAL. */
static void test_key_reset(void **state)
{
	struct rl_table *t = open_new(64), *b = NULL;
	unsigned id = add_rule(t, "sms", 60 * SEC, 3, 3);
	struct rl_slot_view v;
	struct rl_result r;

	(void)state;
	assert_int_equal(rl_table_open(seg, 0, 0, &b, NULL), 0);
	rl_table_agent_flags_change(t, RL_AGENT_SYNC, 0);
	assert_int_equal(take_n(t, id, "1.2.3.4", 4, T0), 3);
	assert_int_equal(take_n(t, id, "5.6.7.8", 1, T0), 1);
	assert_int_equal(rl_table_key_reset(b, id, "1.2.3.4", 7, T0 + SEC), 1);
	assert_int_equal(rl_table_key_view(t, id, "1.2.3.4", 7, T0 + SEC, &v), 0);
	assert_int_equal(v.peek.remaining, 3);
	rl_table_take(t, id, "5.6.7.8", 7, 0, T0 + SEC, &r);
	assert_int_equal(r.remaining, 2);
	/* nothing of it for the agent to push; the other key's as usual */
	assert_int_equal(collected(t, "1.2.3.4", T0 + SEC), -1);
	assert_int_equal(take_n(t, id, "5.6.7.8", 1, T0 + SEC), 1);
	assert_int_equal(collected(t, "5.6.7.8", T0 + SEC), 1);
	/* and the reset key's next ones, as any */
	assert_int_equal(take_n(t, id, "1.2.3.4", 4, T0 + SEC), 3);
	assert_int_equal(collected(t, "1.2.3.4", T0 + SEC), 3);
	assert_int_equal(rl_table_key_reset(t, id, "9.9.9.9", 7, T0), 0);
	assert_int_equal(rl_table_key_reset(t, id, "1.2.3.4", 7, T0 + 61 * SEC), 0);
	assert_int_equal(rl_table_key_reset(t, 63, "1.2.3.4", 7, T0), -EINVAL);
	rl_table_close(b);
	rl_table_close(t);
}

int main(void)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_create_then_attach),
		cmocka_unit_test(test_attach_missing),
		cmocka_unit_test(test_xdp_record),
		cmocka_unit_test(test_host_notes),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_wrong_magic),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_wrong_size),
		cmocka_unit_test(test_writable_by_others),
		cmocka_unit_test(test_root_server_other_user),
		cmocka_unit_test(test_other_user),
		cmocka_unit_test(test_dead_creator),
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_take_matches_step),
		cmocka_unit_test(test_keys_rules_processes),
		cmocka_unit_test(test_long_keys),
		cmocka_unit_test(test_refund),
		cmocka_unit_test(test_give_back_ref),
		cmocka_unit_test(test_plan_keeps_what_was_used),
		cmocka_unit_test(test_plan_ahead),
		cmocka_unit_test(test_plan_ahead_key_in_use),
		cmocka_unit_test(test_plan_ahead_evicts_no_key_in_use),
		cmocka_unit_test(test_sync_mirror),
		cmocka_unit_test(test_sync_grant),
		cmocka_unit_test(test_held_and_lent),
		cmocka_unit_test(test_fresh_key_share),
		cmocka_unit_test(test_fresh_share_edges),
		cmocka_unit_test(test_idle_reuse),
		cmocka_unit_test(test_limited_key_survives),
		cmocka_unit_test(test_least_debt_evicted),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_stale_marker),
		cmocka_unit_test(test_foreach),
		cmocka_unit_test(test_key_view),
		cmocka_unit_test(test_key_reset),
		cmocka_unit_test(test_summarise),
		cmocka_unit_test(test_rule_claim_use),
		cmocka_unit_test(test_uncounted),
		cmocka_unit_test(test_fail_count),
		cmocka_unit_test(test_fail_owed),
		cmocka_unit_test(test_fail_forget),
		cmocka_unit_test(test_window_unix_aligned),
		cmocka_unit_test(test_window_share),
		cmocka_unit_test(test_window_apply),
		cmocka_unit_test(test_window_store_down),
		cmocka_unit_test(test_window_sliding_decay),
		cmocka_unit_test(test_window_early),
		cmocka_unit_test(test_hold),
	};

	return run_each("table", tests, sizeof(tests) / sizeof(tests[0]),
			setup, teardown);
}
