/* SPDX-License-Identifier: MIT */
/*
 * segment.c - the shared segment: its layout, creating and attaching it,
 * refusing foreign or broken ones. The rules registered in it are rules.c's,
 * the keys and decisions slot.c's and decide.c's.
 *
 * Every process on the host that limits with the same segment name maps the
 * same file in /dev/shm and decides from it. There are no locks: a key's
 * state is one 64-bit word changed by compare-and-swap, so a process killed
 * at any instruction leaves either the old word or the new one, and nobody
 * ever waits for it.
 */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "mem.h"
#include "slot.h"
#include "sys.h"

#define INIT_WAIT_NS (1000 * 1000000ull) /* attachers wait up to 1 s */

/* ---- layout ---------------------------------------------------------------- */

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

uint32_t rl_table_capacity_round(uint32_t capacity)
{
	uint32_t buckets = 1;

	if (capacity > (1u << 30))
		capacity = 1u << 30;
	while ((uint64_t)buckets * RL_BUCKET_SLOTS < capacity)
		buckets <<= 1;
	return buckets * RL_BUCKET_SLOTS;
}

struct layout {
	uint64_t rules_off, shards_off, slots_off, meta_off, bans_off, asks_off,
		 kept_off;
	uint64_t size;
};

static void layout_of(uint32_t capacity, struct layout *l)
{
	l->rules_off = RL_SHM_HEADER_SIZE;
	l->shards_off = align_up(l->rules_off +
				 RL_MAX_RULES * sizeof(struct rl_shm_rule),
				 RL_SHM_ALIGN);
	l->slots_off = align_up(l->shards_off +
				RL_SHARDS * sizeof(struct rl_shm_shard),
				RL_SHM_ALIGN);
	l->meta_off = align_up(l->slots_off +
			       (uint64_t)capacity * sizeof(struct rl_slot),
			       RL_SHM_ALIGN);
	l->bans_off = align_up(l->meta_off +
			       (uint64_t)capacity * sizeof(struct rl_slot_meta),
			       RL_SHM_ALIGN);
	l->asks_off = align_up(l->bans_off + RL_BANS * sizeof(struct rl_shm_ban),
			       RL_SHM_ALIGN);
	l->kept_off = align_up(l->asks_off + RL_ASKS * sizeof(struct rl_shm_ask),
			       RL_SHM_ALIGN);
	l->size = align_up(l->kept_off + RL_KEPT_MAX, RL_SHM_ALIGN);
}

uint64_t rl_table_layout_size(uint32_t capacity)
{
	struct layout l;

	layout_of(capacity, &l);
	return l.size;
}

/* ---- open, create, attach ------------------------------------------------ */

static int name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 63 || name[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
			return 0;
	}
	return 1;
}

static void shm_path(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "/dev/shm/%s", name);
}

static void pause_ms(unsigned ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

static void fill_seed(uint64_t seed[2])
{
	size_t got = 0;

	while (got < 16) {
		ssize_t n = getrandom((char *)seed + got, 16 - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	if (got < 16) {
		/* No getrandom: not secret, but still unique per segment. */
		seed[0] ^= rl_time_now_ns() * 0x9E3779B97F4A7C15ull;
		seed[1] ^= ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)seed;
	}
}

static void table_bind(struct rl_table *t, void *base, uint64_t size)
{
	struct rl_shm_header *h = base;

	memset(t, 0, sizeof(*t));
	t->hdr = h;
	t->size = size;
	t->rules = (struct rl_shm_rule *)((char *)base + h->rules_off);
	t->shards = (struct rl_shm_shard *)((char *)base + h->shards_off);
	t->slots = (struct rl_slot *)((char *)base + h->slots_off);
	t->meta = (struct rl_slot_meta *)((char *)base + h->meta_off);
	t->bans = (struct rl_shm_ban *)((char *)base + h->bans_off);
	t->asks = (struct rl_shm_ask *)((char *)base + h->asks_off);
	t->kept = (char *)base + h->kept_off;
	t->bucket_mask = (1ull << h->bucket_bits) - 1;
	t->seed[0] = h->seed[0];
	t->seed[1] = h->seed[1];
	rl_slot_keys_init(t);
	t->count[RL_COUNT_EVICTIONS] = &h->evictions;
	t->count[RL_COUNT_OVERFLOWS] = &h->overflows;
	t->count[RL_COUNT_MARKS_CLEARED] = &h->marks_cleared;
	t->count[RL_COUNT_BAN_REFUSALS] = &h->ban_refusals;
	t->count[RL_COUNT_BANS_ISSUED] = &h->bans_issued;
	t->count[RL_COUNT_CONFIG_RELOADS] = &h->config_reloads;
	t->count[RL_COUNT_AGENT_SYNCS] = &h->agent_syncs;
	t->ban_gen = &h->ban_gen;
	t->agent_flags = &h->agent_flags;
}

/* Create and initialise a new segment on `fd` (just made with O_EXCL). */
static int table_create(int fd, const char *path, uint32_t capacity,
			struct rl_table *t, struct rl_err *e)
{
	struct rl_shm_header *h;
	struct layout l;
	uint32_t bits = 0;
	void *base;

	capacity = rl_table_capacity_round(capacity ? capacity : 65536);
	while ((RL_BUCKET_SLOTS << bits) < capacity)
		bits++;
	layout_of(capacity, &l);
	if (ftruncate(fd, (off_t)l.size) < 0) {
		int err = -errno;

		rl_err_set(e, "%s: cannot size the segment to %llu bytes: %s", path,
			  (unsigned long long)l.size, strerror(-err));
		return err;
	}
	base = mmap(NULL, l.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		int err = -errno;

		rl_err_set(e, "%s: mmap: %s", path, strerror(-err));
		return err;
	}
	h = base;
	/* ftruncate gave zeroes: every slot is empty, every rule free. */
	h->version = RL_SHM_VERSION;
	h->header_size = RL_SHM_HEADER_SIZE;
	h->size = l.size;
	h->capacity = capacity;
	h->bucket_bits = bits;
	h->creator_pid = (uint32_t)getpid();
	fill_seed(h->seed);
	h->created_mono_ns = rl_time_now_ns();
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		h->created_unix_ms = (uint64_t)ts.tv_sec * 1000 +
				     (uint64_t)ts.tv_nsec / 1000000;
	}
	h->rules_off = l.rules_off;
	h->shards_off = l.shards_off;
	h->slots_off = l.slots_off;
	h->meta_off = l.meta_off;
	h->bans_off = l.bans_off;
	h->asks_off = l.asks_off;
	h->asks_cap = RL_ASKS;
	h->kept_off = l.kept_off;
	h->kept_cap = RL_KEPT_MAX;
	h->max_rules = RL_MAX_RULES;
	h->shards = RL_SHARDS;
	h->bans_cap = RL_BANS;
	__atomic_store_n(&h->magic, RL_SHM_MAGIC, __ATOMIC_RELEASE);
	atomic_store_explicit(&h->init, RL_SHM_INIT_READY, memory_order_release);
	table_bind(t, base, l.size);
	return 0;
}

/* Every check of an existing segment's header against its file. */
static int header_valid(const char *path, const struct rl_shm_header *h,
			uint64_t file_size, struct rl_err *e)
{
	struct layout l;

	if (h->version != RL_SHM_VERSION) {
		rl_err_set(e, "%s: segment layout version %u, this build uses %u "
			  "(remove it when no process uses it)", path,
			  h->version, RL_SHM_VERSION);
		return -EPROTO;
	}
	if (h->header_size != RL_SHM_HEADER_SIZE ||
	    h->max_rules != RL_MAX_RULES || h->shards != RL_SHARDS ||
	    h->bans_cap != RL_BANS || h->kept_cap != RL_KEPT_MAX ||
	    h->bucket_bits > 26 ||
	    h->capacity != (RL_BUCKET_SLOTS << h->bucket_bits)) {
		rl_err_set(e, "%s: corrupt segment header", path);
		return -EPROTO;
	}
	layout_of(h->capacity, &l);
	if (h->size != file_size || l.size != file_size ||
	    h->rules_off != l.rules_off || h->shards_off != l.shards_off ||
	    h->slots_off != l.slots_off || h->meta_off != l.meta_off ||
	    h->bans_off != l.bans_off || h->asks_off != l.asks_off ||
	    h->asks_cap != RL_ASKS || h->kept_off != l.kept_off) {
		rl_err_set(e, "%s: segment size mismatch: header says %llu bytes for "
			  "%u slots, file has %llu", path,
			  (unsigned long long)h->size, h->capacity,
			  (unsigned long long)file_size);
		return -EBADF;
	}
	return 0;
}

static int pid_dead(uint32_t pid)
{
	return pid != 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/*
 * Attach to an existing segment. Waits (bounded) while its creator is still
 * sizing and initialising it. Returns 0, a negative errno, or -ESTALE when
 * the creator died before finishing (the caller may replace it).
 */
static int table_attach(int fd, const char *path, unsigned flags,
			struct rl_table *t, struct rl_err *e)
{
	uint64_t deadline = rl_time_now_ns() + INIT_WAIT_NS;
	struct rl_shm_header h;
	struct stat st;
	void *base;
	int err;

	for (;;) {
		ssize_t n;

		if (fstat(fd, &st) < 0) {
			err = -errno;
			rl_err_set(e, "%s: fstat: %s", path, strerror(-err));
			return err;
		}
		if (!S_ISREG(st.st_mode)) {
			rl_err_set(e, "%s: not a regular file", path);
			return -EPROTO;
		}
		if (st.st_uid != geteuid() &&
		    (geteuid() != 0 || (flags & RL_TABLE_OWNED))) {
			rl_err_set(e, "%s: owned by uid %u, not by this user (uid %u);"
				  " refusing another user's segment", path,
				  (unsigned)st.st_uid, (unsigned)geteuid());
			return -EPERM;
		}
		if (st.st_mode & 022) {
			rl_err_set(e, "%s: mode %04o lets other users write it; "
				  "refusing (rlshim creates segments 0600)",
				  path, (unsigned)(st.st_mode & 07777));
			return -EPERM;
		}
		memset(&h, 0, sizeof(h));
		if ((uint64_t)st.st_size >= sizeof(h)) {
			n = pread(fd, &h, sizeof(h), 0);
			if (n != (ssize_t)sizeof(h))
				memset(&h, 0, sizeof(h));
		}
		if (h.magic != 0 && h.magic != RL_SHM_MAGIC) {
			rl_err_set(e, "%s: not an rlshim segment (bad magic "
				  "0x%llx)", path, (unsigned long long)h.magic);
			return -EPROTO;
		}
		if (h.magic == RL_SHM_MAGIC && h.init == RL_SHM_INIT_READY)
			break;
		if (rl_time_now_ns() > deadline) {
			if ((uint64_t)st.st_size < sizeof(h)) {
				rl_err_set(e, "%s: truncated segment (%llu bytes, "
					  "a header alone is %zu)", path,
					  (unsigned long long)st.st_size,
					  sizeof(h));
				return -EBADF;
			}
			if (h.magic == 0 && h.creator_pid == 0) {
				rl_err_set(e, "%s: not an rlshim segment (no "
					  "magic)", path);
				return -EPROTO;
			}
			if (pid_dead(h.creator_pid)) {
				rl_err_set(e, "%s: its creator (pid %u) died before "
					  "initialising it", path,
					  h.creator_pid);
				return -ESTALE;
			}
			rl_err_set(e, "%s: segment never finished initialising",
				  path);
			return -ETIMEDOUT;
		}
		/* A creator died between open and ftruncate: give up early. */
		if (st.st_size == 0 && rl_time_now_ns() + INIT_WAIT_NS / 2 >
		    deadline && st.st_mtime + 2 < time(NULL)) {
			rl_err_set(e, "%s: empty segment left by a dead creator",
				  path);
			return -ESTALE;
		}
		pause_ms(1);
	}
	err = header_valid(path, &h, (uint64_t)st.st_size, e);
	if (err)
		return err;
	base = mmap(NULL, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = -errno;
		rl_err_set(e, "%s: mmap: %s", path, strerror(-err));
		return err;
	}
	/* Check the mapped header too: the file might have changed since. */
	err = header_valid(path, base, (uint64_t)st.st_size, e);
	if (err) {
		munmap(base, h.size);
		return err;
	}
	table_bind(t, base, h.size);
	return 0;
}

int rl_table_open(const char *name, uint32_t capacity, unsigned flags,
		  struct rl_table **out, struct rl_err *e)
{
	char path[96];
	struct rl_table *t;
	int fd = -1, err, tries = 0;

	if (!name_ok(name)) {
		rl_err_set(e, "bad segment name '%s' (1-63 of [A-Za-z0-9_.-], not "
			  "starting with '.')", name ? name : "(null)");
		return -EINVAL;
	}
	shm_path(name, path, sizeof(path));
	t = rl_mem_alloc(sizeof(*t));
	if (!t) {
		rl_err_set(e, "out of memory");
		return -ENOMEM;
	}
again:
	if (flags & RL_TABLE_CREATE) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			  0600);
		if (fd >= 0) {
			err = table_create(fd, path, capacity, t, e);
			if (err)
				unlink(path);
			goto out_close;
		}
		if (errno != EEXIST) {
			err = -errno;
			rl_err_set(e, "%s: cannot create: %s", path, strerror(-err));
			goto out_free;
		}
	}
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		err = -errno;
		if (err == -ENOENT && (flags & RL_TABLE_CREATE) && tries++ < 3)
			goto again; /* removed between our two opens */
		if (err == -EACCES) {
			struct stat st;

			if (stat(path, &st) == 0) {
				rl_err_set(e, "%s: permission denied (owned by uid %u, "
					  "mode %04o)", path, (unsigned)st.st_uid,
					  (unsigned)(st.st_mode & 07777));
				goto out_free;
			}
		}
		rl_err_set(e, "%s: %s", path, strerror(-err));
		goto out_free;
	}
	err = table_attach(fd, path, flags, t, e);
	if (err == -ESTALE && (flags & RL_TABLE_CREATE) && tries++ < 3) {
		/* Replace what a dead creator left; O_EXCL decides who. */
		rl_sys.close(fd);
		unlink(path);
		goto again;
	}
out_close:
	rl_sys.close(fd);
	if (err == 0) {
		*out = t;
		return 0;
	}
out_free:
	rl_mem_free(t);
	return err;
}

void rl_table_close(struct rl_table *t)
{
	if (!t)
		return;
	if (t->hdr)
		munmap(t->hdr, t->size);
	free(t->held);
	for (unsigned i = 0; i < RL_MAX_RULES; i++) {
		struct rl_rule_cache *c = t->cache[i];

		while (c && c != &t->from_segment[i]) {
			struct rl_rule_cache *next = c->retired;

			rl_mem_free(c);
			c = next;
		}
	}
	rl_mem_free(t);
}

int rl_table_unlink(const char *name)
{
	char path[96];

	if (!name_ok(name))
		return -EINVAL;
	shm_path(name, path, sizeof(path));
	return unlink(path) < 0 ? -errno : 0;
}

/* ---- the servers' hold ------------------------------------------------------- */

/* fcntl() is one of the shim's hooks (sys.h): the system call itself, the
 * 64-bit one where there are two (OFD locks take a struct flock64). */
static int ofd_fcntl(int fd, int cmd, struct flock *fl)
{
#ifdef SYS_fcntl64
	return (int)syscall(SYS_fcntl64, fd, cmd, fl);
#else
	return (int)syscall(SYS_fcntl, fd, cmd, fl);
#endif
}

int rl_table_hold(const char *name, struct rl_table_hold *h)
{
	struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET,
			    .l_start = 0, .l_len = 1 };
	struct stat st;
	char path[96];
	int fd, err;

	if (h->fd >= 0 && fstat(h->fd, &st) == 0 &&
	    (uint64_t)st.st_dev == h->dev && (uint64_t)st.st_ino == h->ino)
		return 0;
	h->fd = -1; /* closed by the application: not ours to close now */
	shm_path(name, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || ofd_fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		err = -errno;
		rl_sys.close(fd);
		return err;
	}
	h->fd = fd;
	h->dev = (uint64_t)st.st_dev;
	h->ino = (uint64_t)st.st_ino;
	return 0;
}

int rl_table_held(int fd)
{
	/* l_pid must be 0 for an OFD lock; the lock the servers' read lock
	 * would conflict with is a write lock. */
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
			    .l_start = 0, .l_len = 1 };

	if (ofd_fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}
