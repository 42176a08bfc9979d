/* SPDX-License-Identifier: MIT */
/*
 * table.c - the lock-free shared table of buckets.
 *
 * Every process on the host that limits with the same segment name maps the
 * same file in /dev/shm and decides from it. There are no locks: a key's
 * state is one 64-bit word changed by compare-and-swap, so a process killed
 * at any instruction leaves either the old word or the new one, and nobody
 * ever waits for it.
 *
 * Keys live in buckets of RL_BUCKET_SLOTS slots chosen by a keyed hash. A
 * slot is claimed with one CAS on its key word and is never emptied again;
 * when a bucket is full a slot is re-keyed ("evicted"):
 *   1. CAS the victim's state from the value judged to a marker, so that no
 *      update of the old key can land after this point;
 *   2. CAS the key word to the new tag and write the new key's bytes;
 *   3. CAS the marker back to 0, a new key's state.
 * A reader loads the state, then the key word, and only trusts the state if
 * the key is still its own; its CAS on the state fails if a marker came in
 * between. A process that dies inside 1-3 leaves a marker that others clear
 * after RL_MARK_TIMEOUT_NS; until then the slot is skipped, never waited on.
 *
 * Who is evicted: a slot whose state carries no information any more (a
 * full bucket) first; else the key with the least debt (time until its state
 * expires), but never one that is being limited right now, i.e. whose next
 * request would be denied. If every candidate is being limited the request
 * is decided as a new key's without a slot (an "overflow"), so a flood of
 * new keys can neither evict a limited key nor be refused wholesale.
 */
#include "table.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "algo.h"
#include "hash.h"

#define INIT_WAIT_NS (1000 * 1000000ull) /* attachers wait up to 1 s */
#define LOOKUP_RETRIES 8

/* A fixed, public key for names that must agree between hosts (digests of
 * long keys); the per-segment seed keys everything a client could aim at. */
static const uint64_t public_key[2] = { 0x726c7368696d2d31ull,
					0x6b65792d64696721ull };

static __thread char table_error[256];

const char *rl_table_error(void)
{
	return table_error;
}

__attribute__((format(printf, 1, 2)))
static void set_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(table_error, sizeof(table_error), fmt, ap);
	va_end(ap);
}

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
	uint64_t rules_off, shards_off, slots_off, meta_off, size;
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
	l->size = align_up(l->meta_off +
			   (uint64_t)capacity * sizeof(struct rl_slot_meta),
			   RL_SHM_ALIGN);
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
	t->bucket_mask = (1ull << h->bucket_bits) - 1;
	t->seed[0] = h->seed[0];
	t->seed[1] = h->seed[1];
}

/* Create and initialise a new segment on `fd` (just made with O_EXCL). */
static int table_create(int fd, const char *path, uint32_t capacity,
			struct rl_table *t)
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

		set_error("%s: cannot size the segment to %llu bytes: %s", path,
			  (unsigned long long)l.size, strerror(-err));
		return err;
	}
	base = mmap(NULL, l.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		int err = -errno;

		set_error("%s: mmap: %s", path, strerror(-err));
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
	h->max_rules = RL_MAX_RULES;
	h->shards = RL_SHARDS;
	__atomic_store_n(&h->magic, RL_SHM_MAGIC, __ATOMIC_RELEASE);
	atomic_store_explicit(&h->init, RL_SHM_INIT_READY, memory_order_release);
	table_bind(t, base, l.size);
	return 0;
}

/* Every check of an existing segment's header against its file. */
static int header_valid(const char *path, const struct rl_shm_header *h,
			uint64_t file_size)
{
	struct layout l;

	if (h->version != RL_SHM_VERSION) {
		set_error("%s: segment layout version %u, this build uses %u "
			  "(remove it when no process uses it)", path,
			  h->version, RL_SHM_VERSION);
		return -EPROTO;
	}
	if (h->header_size != RL_SHM_HEADER_SIZE ||
	    h->max_rules != RL_MAX_RULES || h->shards != RL_SHARDS ||
	    h->bucket_bits > 26 ||
	    h->capacity != (RL_BUCKET_SLOTS << h->bucket_bits)) {
		set_error("%s: corrupt segment header", path);
		return -EPROTO;
	}
	layout_of(h->capacity, &l);
	if (h->size != file_size || l.size != file_size ||
	    h->rules_off != l.rules_off || h->shards_off != l.shards_off ||
	    h->slots_off != l.slots_off || h->meta_off != l.meta_off) {
		set_error("%s: segment size mismatch: header says %llu bytes for "
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
static int table_attach(int fd, const char *path, struct rl_table *t)
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
			set_error("%s: fstat: %s", path, strerror(-err));
			return err;
		}
		if (!S_ISREG(st.st_mode)) {
			set_error("%s: not a regular file", path);
			return -EPROTO;
		}
		if (st.st_uid != geteuid() && geteuid() != 0) {
			set_error("%s: owned by uid %u, not by this user (uid %u);"
				  " refusing another user's segment", path,
				  (unsigned)st.st_uid, (unsigned)geteuid());
			return -EPERM;
		}
		if (st.st_mode & 022) {
			set_error("%s: mode %04o lets other users write it; "
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
			set_error("%s: not an rlshim segment (bad magic "
				  "0x%llx)", path, (unsigned long long)h.magic);
			return -EPROTO;
		}
		if (h.magic == RL_SHM_MAGIC && h.init == RL_SHM_INIT_READY)
			break;
		if (rl_time_now_ns() > deadline) {
			if ((uint64_t)st.st_size < sizeof(h)) {
				set_error("%s: truncated segment (%llu bytes, "
					  "a header alone is %zu)", path,
					  (unsigned long long)st.st_size,
					  sizeof(h));
				return -EBADF;
			}
			if (h.magic == 0 && h.creator_pid == 0) {
				set_error("%s: not an rlshim segment (no "
					  "magic)", path);
				return -EPROTO;
			}
			if (pid_dead(h.creator_pid)) {
				set_error("%s: its creator (pid %u) died before "
					  "initialising it", path,
					  h.creator_pid);
				return -ESTALE;
			}
			set_error("%s: segment never finished initialising",
				  path);
			return -ETIMEDOUT;
		}
		/* A creator died between open and ftruncate: give up early. */
		if (st.st_size == 0 && rl_time_now_ns() + INIT_WAIT_NS / 2 >
		    deadline && st.st_mtime + 2 < time(NULL)) {
			set_error("%s: empty segment left by a dead creator",
				  path);
			return -ESTALE;
		}
		pause_ms(1);
	}
	err = header_valid(path, &h, (uint64_t)st.st_size);
	if (err)
		return err;
	base = mmap(NULL, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = -errno;
		set_error("%s: mmap: %s", path, strerror(-err));
		return err;
	}
	/* Check the mapped header too: the file might have changed since. */
	err = header_valid(path, base, (uint64_t)st.st_size);
	if (err) {
		munmap(base, h.size);
		return err;
	}
	table_bind(t, base, h.size);
	return 0;
}

int rl_table_open(const char *name, uint32_t capacity, unsigned flags,
		  struct rl_table **out)
{
	char path[96];
	struct rl_table *t;
	int fd = -1, err, tries = 0;

	table_error[0] = '\0';
	if (!name_ok(name)) {
		set_error("bad segment name '%s' (1-63 of [A-Za-z0-9_.-], not "
			  "starting with '.')", name ? name : "(null)");
		return -EINVAL;
	}
	shm_path(name, path, sizeof(path));
	t = calloc(1, sizeof(*t));
	if (!t) {
		set_error("out of memory");
		return -ENOMEM;
	}
again:
	if (flags & RL_TABLE_CREATE) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			  0600);
		if (fd >= 0) {
			err = table_create(fd, path, capacity, t);
			if (err)
				unlink(path);
			goto out_close;
		}
		if (errno != EEXIST) {
			err = -errno;
			set_error("%s: cannot create: %s", path, strerror(-err));
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
				set_error("%s: permission denied (owned by uid %u, "
					  "mode %04o)", path, (unsigned)st.st_uid,
					  (unsigned)(st.st_mode & 07777));
				goto out_free;
			}
		}
		set_error("%s: %s", path, strerror(-err));
		goto out_free;
	}
	err = table_attach(fd, path, t);
	if (err == -ESTALE && (flags & RL_TABLE_CREATE) && tries++ < 3) {
		/* Replace what a dead creator left; O_EXCL decides who. */
		close(fd);
		unlink(path);
		goto again;
	}
out_close:
	close(fd);
	if (err == 0) {
		*out = t;
		return 0;
	}
out_free:
	free(t);
	return err;
}

void rl_table_close(struct rl_table *t)
{
	if (!t)
		return;
	if (t->hdr)
		munmap(t->hdr, t->size);
	free(t);
}

int rl_table_unlink(const char *name)
{
	char path[96];

	if (!name_ok(name))
		return -EINVAL;
	shm_path(name, path, sizeof(path));
	return unlink(path) < 0 ? -errno : 0;
}

/* ---- rules ------------------------------------------------------------------ */

static uint64_t rule_ident(const struct rl_rule_def *def)
{
	struct {
		char name[RL_RULE_NAME_MAX];
		uint64_t period_ns;
		uint32_t count, burst, algorithm, pad;
	} id;

	memset(&id, 0, sizeof(id));
	strncpy(id.name, def->name, sizeof(id.name) - 1);
	id.period_ns = def->rate.period_ns;
	id.count = def->rate.count;
	id.burst = def->rate.burst;
	id.algorithm = (uint32_t)def->algorithm;
	return rl_hash_sip13(public_key, &id, sizeof(id)) | 1;
}

/* Write a rule entry's fields. Any process that knows the definition may
 * do it, concurrently: they all write the same bytes. */
static void rule_publish(struct rl_shm_rule *r, const struct rl_rule_def *def)
{
	r->algorithm = (uint32_t)def->algorithm;
	r->period_ns = def->rate.period_ns;
	r->count = def->rate.count;
	r->burst = def->rate.burst;
	strncpy(r->name, def->name, sizeof(r->name) - 1);
	atomic_store_explicit(&r->ready, 1, memory_order_release);
}

/* Load rule `id` from the segment into this process's cache, validated:
 * the segment is shared, so what it says is checked before it is used. */
static const struct rl_rule_cache *rule_get(struct rl_table *t, unsigned id)
{
	struct rl_rule_cache *c;
	struct rl_shm_rule *r;
	struct rl_rate rate;

	if (id >= RL_MAX_RULES)
		return NULL;
	c = &t->cache[id];
	if (c->valid)
		return c;
	r = &t->rules[id];
	if (!atomic_load_explicit(&r->ident, memory_order_acquire) ||
	    !atomic_load_explicit(&r->ready, memory_order_acquire))
		return NULL;
	rate.period_ns = r->period_ns;
	rate.count = r->count;
	rate.burst = r->burst;
	if (rl_algo_init(&c->algo, (enum rl_algorithm)r->algorithm, &rate))
		return NULL;
	c->valid = 1;
	return c;
}

int rl_table_rule(struct rl_table *t, const struct rl_rule_def *def,
		  unsigned *id)
{
	uint64_t ident;
	size_t nlen;

	if (!t || !def || !def->name)
		return -EINVAL;
	nlen = strlen(def->name);
	if (nlen == 0 || nlen >= RL_RULE_NAME_MAX ||
	    rl_algo_init(NULL, def->algorithm, &def->rate))
		return -EINVAL;
	ident = rule_ident(def);
	for (unsigned i = 0; i < RL_MAX_RULES; i++) {
		struct rl_shm_rule *r = &t->rules[i];
		uint64_t cur = atomic_load_explicit(&r->ident,
						    memory_order_acquire);

		if (cur == 0) {
			uint64_t expect = 0;

			if (!atomic_compare_exchange_strong(&r->ident, &expect,
							    ident)) {
				cur = expect;
				if (cur != ident)
					continue;
			}
		} else if (cur != ident) {
			continue;
		}
		/* Ours, just claimed or registered before (maybe by a
		 * process that died half-way): make sure it is complete. */
		if (!atomic_load_explicit(&r->ready, memory_order_acquire))
			rule_publish(r, def);
		t->cache[i].valid = 0;
		if (!rule_get(t, i))
			return -EPROTO;
		*id = i;
		return 0;
	}
	return -ENOSPC;
}

/* ---- keys and slots --------------------------------------------------------- */

struct keyref {
	uint64_t tag;
	uint64_t bucket;
	const void *key;
	size_t len;
};

static void key_hash(const struct rl_table *t, unsigned rule, const void *key,
		     size_t len, struct keyref *k)
{
	uint64_t h;

	/* The rule id is mixed in by keying: the same bytes under two rules
	 * are two keys. */
	uint64_t seed[2] = { t->seed[0] ^ ((uint64_t)rule * 0x9E3779B97F4A7C15ull),
			     t->seed[1] };

	h = rl_hash_sip13(seed, key, len);
	k->tag = (h & ~0xFFull) | rule;
	if ((h & ~0xFFull) == 0)
		k->tag |= 0x100;
	k->bucket = (h >> 8) & t->bucket_mask;
	k->key = key;
	k->len = len;
}

static inline unsigned tag_rule(uint64_t tag)
{
	return (unsigned)(tag & 0xFF);
}

static inline uint32_t shard_of(void)
{
	int cpu = sched_getcpu();

	return cpu < 0 ? 0 : (uint32_t)cpu & (RL_SHARDS - 1);
}

/* Publish the key bytes of a slot just claimed (seqlock writer). */
static void meta_write(struct rl_table *t, uint64_t idx, const struct keyref *k)
{
	struct rl_slot_meta *m = &t->meta[idx];

	atomic_store_explicit(&m->tag, 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	if (k->len <= RL_KEY_MAX) {
		m->len = (uint8_t)k->len;
		m->truncated = 0;
		memcpy(m->key, k->key, k->len);
	} else {
		/* A prefix and a public digest of the whole key: the same on
		 * every host, so the agent can name it in Redis. */
		uint64_t d = rl_hash_sip13(public_key, k->key, k->len);

		m->len = RL_KEY_MAX;
		m->truncated = 1;
		memcpy(m->key, k->key, RL_KEY_MAX - 8);
		memcpy(m->key + RL_KEY_MAX - 8, &d, 8);
	}
	atomic_store_explicit(&m->tag, k->tag, memory_order_release);
}

static inline int is_marker(uint64_t s)
{
	return (s & RL_STATE_MARK) != 0;
}

static inline uint64_t make_marker(uint64_t now_ns)
{
	return RL_STATE_MARK | (now_ns & ~RL_STATE_MARK);
}

/* Clear a marker left by a process that died while re-keying. Returns 1 if
 * the marker was stale (and is now gone or changed). */
static int marker_expire(struct rl_table *t, struct rl_slot *s, uint64_t mark,
			 uint64_t now_ns)
{
	uint64_t set_at = mark & ~RL_STATE_MARK;

	if (now_ns < set_at || now_ns - set_at < RL_MARK_TIMEOUT_NS)
		return 0;
	if (atomic_compare_exchange_strong(&s->state, &mark, 0))
		atomic_fetch_add_explicit(&t->hdr->marks_cleared, 1,
					  memory_order_relaxed);
	return 1;
}

enum victim_kind { VICTIM_NONE, VICTIM_IDLE, VICTIM_LIVE };

/*
 * Pick the slot of a full bucket to re-key: an idle one, else the least
 * debt that is not being limited. *state gets the state it was judged by.
 */
static enum victim_kind victim_pick(struct rl_table *t, struct rl_slot *b,
				    uint64_t now_ns, unsigned *at,
				    uint64_t *vkey, uint64_t *state)
{
	enum victim_kind kind = VICTIM_NONE;
	uint64_t best = UINT64_MAX;

	for (unsigned i = 0; i < RL_BUCKET_SLOTS; i++) {
		uint64_t key = atomic_load_explicit(&b[i].key, memory_order_acquire);
		uint64_t s = atomic_load_explicit(&b[i].state, memory_order_acquire);
		const struct rl_rule_cache *rc = rule_get(t, tag_rule(key));
		struct rl_result peek;
		uint64_t free_at, probe;

		if (is_marker(s)) {
			marker_expire(t, &b[i], s, now_ns);
			continue;
		}
		if (!rc || (free_at = rl_algo_free_at(&rc->algo, s, now_ns)) <= now_ns) {
			/* Idle, or a rule this segment does not know. */
			*at = i;
			*vkey = key;
			*state = s;
			return VICTIM_IDLE;
		}
		probe = s;
		rl_algo_step(&rc->algo, &probe, 1, now_ns, &peek);
		if (!peek.allowed)
			continue; /* being limited: never evicted */
		if (free_at - now_ns < best) {
			best = free_at - now_ns;
			*at = i;
			*vkey = key;
			*state = s;
			kind = VICTIM_LIVE;
		}
	}
	return kind;
}

/*
 * Find the slot of `k`, claiming or re-keying one if it has none. Returns
 * NULL when the bucket has no slot to give (overflow) or the bucket keeps
 * changing under us.
 */
static struct rl_slot *slot_find(struct rl_table *t, const struct keyref *k,
				 uint64_t now_ns, int create)
{
	uint64_t base = k->bucket * RL_BUCKET_SLOTS;
	struct rl_slot *b = &t->slots[base];

	for (int attempt = 0; attempt < LOOKUP_RETRIES; attempt++) {
		enum victim_kind kind;
		unsigned i, at = 0;
		uint64_t s, vkey, mark, expect;

		for (i = 0; i < RL_BUCKET_SLOTS; i++) {
			uint64_t key = atomic_load_explicit(&b[i].key,
							    memory_order_acquire);

			if (key == k->tag)
				return &b[i];
			if (key == 0)
				break;
		}
		if (!create)
			return NULL;
		if (i < RL_BUCKET_SLOTS) {
			expect = 0;
			if (atomic_compare_exchange_strong(&b[i].key, &expect,
							   k->tag)) {
				meta_write(t, base + i, k);
				return &b[i];
			}
			continue; /* taken meanwhile, maybe by our own key */
		}
		kind = victim_pick(t, b, now_ns, &at, &vkey, &s);
		if (kind == VICTIM_NONE)
			return NULL;
		/* 1: fence off updates of the old key. */
		mark = make_marker(now_ns);
		expect = s;
		if (!atomic_compare_exchange_strong(&b[at].state, &expect, mark))
			continue;
		/* 2: re-key. The key may have changed between our judging and
		 * the marker (another process re-keyed it to a key whose state
		 * happens to equal the judged one): then put the state back. */
		expect = vkey;
		if (!atomic_compare_exchange_strong(&b[at].key, &expect, k->tag)) {
			expect = mark;
			atomic_compare_exchange_strong(&b[at].state, &expect, s);
			continue;
		}
		atomic_store_explicit(&b[at].sync_admitted, 0, memory_order_relaxed);
		atomic_store_explicit(&b[at].sync_share, 0, memory_order_relaxed);
		atomic_store_explicit(&b[at].sync_aux, 0, memory_order_relaxed);
		meta_write(t, base + at, k);
		/* 3: a new key's state. */
		if (!atomic_compare_exchange_strong(&b[at].state, &mark, 0))
			continue;
		if (kind == VICTIM_LIVE)
			atomic_fetch_add_explicit(&t->hdr->evictions, 1,
						  memory_order_relaxed);
		return &b[at];
	}
	return NULL;
}

/* ---- decisions --------------------------------------------------------------- */

static void count(struct rl_table *t, unsigned rule, int allowed)
{
	struct rl_shm_counter *c = &t->shards[shard_of()].rule[rule];

	atomic_fetch_add_explicit(allowed ? &c->allowed : &c->denied, 1,
				  memory_order_relaxed);
}

int rl_table_take(struct rl_table *t, unsigned rule, const void *key,
		  size_t key_len, uint32_t cost, uint64_t now_ns,
		  struct rl_result *out)
{
	const struct rl_rule_cache *rc = rule_get(t, rule);
	struct keyref k;

	if (!rc)
		return -EINVAL;
	key_hash(t, rule, key, key_len, &k);
	for (int attempt = 0; attempt < LOOKUP_RETRIES; attempt++) {
		/* A peek (cost 0) never claims a slot: it stores nothing. */
		struct rl_slot *s = slot_find(t, &k, now_ns, cost > 0);
		uint64_t old, new;

		if (!s) {
			if (cost == 0)
				goto fresh;
			break;
		}
		old = atomic_load_explicit(&s->state, memory_order_acquire);
		for (;;) {
			if (is_marker(old)) {
				/* Being re-keyed (or left so by a dead process):
				 * look again, never wait. */
				marker_expire(t, s, old, now_ns);
				break;
			}
			/* The state is ours only if the key still is. */
			if (atomic_load_explicit(&s->key, memory_order_acquire) !=
			    k.tag)
				break;
			new = old;
			rl_algo_step(&rc->algo, &new, cost, now_ns,
				     out);
			if (!out->allowed || new == old)
				goto decided;
			if (atomic_compare_exchange_weak_explicit(
				    &s->state, &old, new, memory_order_acq_rel,
				    memory_order_acquire)) {
				/* Only an agent that syncs needs the count. */
				if (atomic_load_explicit(&t->hdr->agent_flags,
							 memory_order_relaxed) &
				    RL_AGENT_SYNC)
					atomic_fetch_add_explicit(
						&s->sync_admitted, cost,
						memory_order_relaxed);
				goto decided;
			}
			/* Lost a race with another decision: `old` is fresh. */
		}
	}
	/* No slot to give: decide as a new key, keep nothing. */
	atomic_fetch_add_explicit(&t->hdr->overflows, 1, memory_order_relaxed);
fresh:
	{
		uint64_t st = 0;

		rl_algo_step(&rc->algo, &st, cost, now_ns, out);
	}
decided:
	count(t, rule, out->allowed);
	return 0;
}

int rl_table_refund(struct rl_table *t, unsigned rule, const void *key,
		    size_t key_len, uint32_t cost, uint64_t now_ns)
{
	const struct rl_rule_cache *rc = rule_get(t, rule);
	struct rl_shm_counter *c;
	struct keyref k;
	struct rl_slot *s;
	uint64_t old, new;

	if (!rc)
		return -EINVAL;
	key_hash(t, rule, key, key_len, &k);
	s = slot_find(t, &k, now_ns, 0);
	if (!s)
		return -ENOENT;
	old = atomic_load_explicit(&s->state, memory_order_acquire);
	for (;;) {
		if (is_marker(old) ||
		    atomic_load_explicit(&s->key, memory_order_acquire) != k.tag)
			return -ENOENT;
		new = old;
		rl_algo_refund(&rc->algo, &new, cost, now_ns);
		if (new == old ||
		    atomic_compare_exchange_weak(&s->state, &old, new))
			break;
	}
	/* The decision was counted as allowed; it was not, in the end. */
	c = &t->shards[shard_of()].rule[rule];
	atomic_fetch_sub_explicit(&c->allowed, 1, memory_order_relaxed);
	{
		/* Nor is it owed to the other hosts, unless already synced. */
		uint32_t a = atomic_load_explicit(&s->sync_admitted,
						  memory_order_relaxed);

		while (a >= cost && !atomic_compare_exchange_weak(
					    &s->sync_admitted, &a, a - cost))
			;
	}
	return 0;
}

/* ---- inspection ---------------------------------------------------------- */

int rl_table_rule_stats(struct rl_table *t, unsigned rule,
			struct rl_rule_stats *out)
{
	const struct rl_rule_cache *rc = rule_get(t, rule);

	if (!rc)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	memcpy(out->name, t->rules[rule].name, sizeof(out->name));
	out->name[sizeof(out->name) - 1] = '\0';
	out->algorithm = rc->algo.kind;
	out->rate = rc->algo.rate;
	for (unsigned i = 0; i < RL_SHARDS; i++) {
		out->allowed += atomic_load_explicit(
			&t->shards[i].rule[rule].allowed, memory_order_relaxed);
		out->denied += atomic_load_explicit(
			&t->shards[i].rule[rule].denied, memory_order_relaxed);
	}
	return 0;
}

/* Read a slot's key and state consistently: the key bytes through the
 * meta seqlock, the state bracketed by two reads of the key word. */
static int slot_view(struct rl_table *t, uint32_t idx, uint64_t now_ns,
		     struct rl_slot_view *v)
{
	struct rl_slot *s = &t->slots[idx];
	struct rl_slot_meta *m = &t->meta[idx];
	const struct rl_rule_cache *rc;
	uint64_t key, state, t1, t2;

	key = atomic_load_explicit(&s->key, memory_order_acquire);
	if (!key)
		return 0;
	state = atomic_load_explicit(&s->state, memory_order_acquire);
	if (is_marker(state) ||
	    atomic_load_explicit(&s->key, memory_order_acquire) != key)
		return 0;
	rc = rule_get(t, tag_rule(key));
	if (!rc)
		return 0;
	t1 = atomic_load_explicit(&m->tag, memory_order_acquire);
	v->key_len = m->len > RL_KEY_MAX ? RL_KEY_MAX : m->len;
	v->truncated = m->truncated;
	memcpy(v->key, m->key, RL_KEY_MAX);
	atomic_thread_fence(memory_order_acquire);
	t2 = atomic_load_explicit(&m->tag, memory_order_relaxed);
	if (t1 != key || t2 != key)
		return 0;
	v->index = idx;
	v->rule = tag_rule(key);
	{
		uint64_t probe = state;
		uint64_t free_at = rl_algo_free_at(&rc->algo, state, now_ns);

		rl_algo_step(&rc->algo, &probe, 0, now_ns,
			     &v->peek);
		v->debt_ns = free_at > now_ns ? free_at - now_ns : 0;
	}
	return 1;
}

int rl_table_foreach(struct rl_table *t, uint64_t now_ns,
		     int (*fn)(const struct rl_slot_view *v, void *arg),
		     void *arg)
{
	struct rl_slot_view v;

	for (uint32_t i = 0; i < t->hdr->capacity; i++) {
		int r;

		if (!slot_view(t, i, now_ns, &v) || v.debt_ns == 0)
			continue;
		r = fn(&v, arg);
		if (r)
			return r;
	}
	return 0;
}

int rl_table_stats(struct rl_table *t, uint64_t now_ns,
		   struct rl_table_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->capacity = t->hdr->capacity;
	out->size = t->size;
	out->evictions = atomic_load(&t->hdr->evictions);
	out->overflows = atomic_load(&t->hdr->overflows);
	for (unsigned i = 0; i < RL_MAX_RULES; i++)
		if (atomic_load_explicit(&t->rules[i].ident, memory_order_relaxed))
			out->rules++;
	for (uint32_t i = 0; i < t->hdr->capacity; i++) {
		uint64_t key = atomic_load_explicit(&t->slots[i].key,
						    memory_order_relaxed);
		uint64_t s = atomic_load_explicit(&t->slots[i].state,
						  memory_order_relaxed);
		const struct rl_rule_cache *rc;

		if (!key)
			continue;
		out->occupied++;
		rc = rule_get(t, tag_rule(key));
		if (rc && !is_marker(s) &&
		    rl_algo_free_at(&rc->algo, s, now_ns) > now_ns)
			out->keys++;
	}
	return 0;
}

unsigned rl_table_sweep(struct rl_table *t, uint64_t now_ns)
{
	unsigned cleared = 0;

	for (uint32_t i = 0; i < t->hdr->capacity; i++) {
		uint64_t s = atomic_load_explicit(&t->slots[i].state,
						  memory_order_acquire);

		if (is_marker(s) && marker_expire(t, &t->slots[i], s, now_ns))
			cleared++;
	}
	return cleared;
}

int rl_table_check(struct rl_table *t, uint64_t now_ns,
		   struct rl_table_check *out)
{
	memset(out, 0, sizeof(*out));
#define VIOLATION(...)                                                        \
	do {                                                                  \
		if (!out->violations++)                                       \
			snprintf(out->why, sizeof(out->why), __VA_ARGS__);    \
	} while (0)
	for (uint64_t b = 0; b <= t->bucket_mask; b++) {
		struct rl_slot *s = &t->slots[b * RL_BUCKET_SLOTS];
		int empty_seen = 0;

		for (unsigned i = 0; i < RL_BUCKET_SLOTS; i++) {
			uint64_t idx = b * RL_BUCKET_SLOTS + i;
			uint64_t key = atomic_load(&s[i].key);
			uint64_t st = atomic_load(&s[i].state);
			const struct rl_rule_cache *rc;

			if (!key) {
				empty_seen = 1;
				if (st != 0)
					VIOLATION("slot %llu: empty with state",
						  (unsigned long long)idx);
				continue;
			}
			if (empty_seen)
				VIOLATION("slot %llu: key after an empty slot",
					  (unsigned long long)idx);
			for (unsigned j = 0; j < i; j++)
				if (atomic_load(&s[j].key) == key)
					out->duplicates++;
			if (is_marker(st)) {
				uint64_t at = st & ~RL_STATE_MARK;

				out->markers++;
				if (now_ns > at && now_ns - at >= RL_MARK_TIMEOUT_NS)
					VIOLATION("slot %llu: stale marker",
						  (unsigned long long)idx);
				continue;
			}
			rc = rule_get(t, tag_rule(key));
			if (!rc) {
				VIOLATION("slot %llu: unknown rule %u",
					  (unsigned long long)idx, tag_rule(key));
				continue;
			}
			if (rc->algo.kind == RL_ALGO_GCRA) {
				/* Allow a second of clock difference between
				 * the writer and us. */
				if (st > now_ns + rc->algo.depth_ns + 1000000000ull)
					VIOLATION("slot %llu: TAT beyond the "
						  "bucket", (unsigned long long)idx);
			}
			if (atomic_load(&t->meta[idx].tag) != key)
				out->unnamed++;
		}
	}
#undef VIOLATION
	return (int)out->violations;
}
