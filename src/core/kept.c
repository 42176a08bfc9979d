/* SPDX-License-Identifier: MIT */
/* kept.c - the configuration in force on a host, kept in its segment. */
#include "kept.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "mem.h"
#include "shm.h"

/* The region holds the path, a NUL, then the text: kept_len counts both. */
int rl_kept_store(struct rl_table *t, const char *path, const char *text,
		  size_t len, uint64_t stamp)
{
	struct rl_shm_header *h = t->hdr;
	size_t plen = strlen(path) + 1;
	uint64_t hash[2];

	/* The constant, not the header's kept_cap: what the segment says
	 * may have changed since it was checked at open. */
	if (plen + len >= RL_KEPT_MAX)
		return -E2BIG;
	/* Hashed from our own bytes, not from the region: a copy spliced
	 * with another writer's then matches no hash, and is seen as none. */
	hash[0] = rl_hash_sip13(rl_hash_public_key, path, plen);
	hash[1] = rl_hash_sip13(rl_hash_public_key, text, len);
	/* Stamp 0 while the bytes move: a reader meanwhile finds none. */
	atomic_store_explicit(&h->kept_stamp, 0, memory_order_release);
	atomic_thread_fence(memory_order_release);
	memcpy(t->kept, path, plen);
	memcpy(t->kept + plen, text, len);
	atomic_store_explicit(&h->kept_len, (uint32_t)(plen + len),
			      memory_order_relaxed);
	atomic_store_explicit(&h->kept_hash,
			      rl_hash_sip13(rl_hash_public_key, hash,
					    sizeof(hash)),
			      memory_order_relaxed);
	atomic_store_explicit(&h->kept_stamp, stamp, memory_order_release);
	return 0;
}

uint64_t rl_kept_stamp(const struct rl_table *t)
{
	return atomic_load(&t->hdr->kept_stamp);
}

int rl_kept_load(struct rl_table *t, const char *path, char *buf, size_t cap,
		 uint64_t *stamp)
{
	struct rl_shm_header *h = t->hdr;
	uint64_t s1 = atomic_load_explicit(&h->kept_stamp, memory_order_acquire);
	uint32_t len = atomic_load_explicit(&h->kept_len, memory_order_relaxed);
	uint64_t hash = atomic_load_explicit(&h->kept_hash, memory_order_relaxed);
	size_t plen = strlen(path) + 1;
	uint64_t mine[2];

	if (!s1 || len >= RL_KEPT_MAX || len >= cap || len < plen)
		return -ENOENT;
	memcpy(buf, t->kept, len);
	buf[len] = '\0';
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&h->kept_stamp, memory_order_relaxed) != s1 ||
	    memcmp(buf, path, plen) != 0)
		return -ENOENT; /* a writer at work, or another server's file */
	mine[0] = rl_hash_sip13(rl_hash_public_key, buf, plen);
	mine[1] = rl_hash_sip13(rl_hash_public_key, buf + plen, len - plen);
	if (rl_hash_sip13(rl_hash_public_key, mine, sizeof(mine)) != hash)
		return -ENOENT; /* torn */
	memmove(buf, buf + plen, len - plen + 1);
	*stamp = s1;
	return (int)(len - plen);
}

/* A ready rlshim segment, by its first bytes: a file that is not one (or
 * is being created) is never mapped, and never waited for. */
static int looks_ready(int dir, const char *name)
{
	struct rl_shm_header h;
	struct stat st;
	int fd, ok = 0;

	fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size >= sizeof(h) &&
	    pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h))
		ok = h.magic == RL_SHM_MAGIC && h.init == RL_SHM_INIT_READY;
	close(fd);
	return ok;
}

int rl_kept_find(const char *path, char *shm, size_t cap)
{
	uint64_t best = 0;
	struct dirent *d;
	char *buf;
	DIR *dir;
	int found = -ENOENT;

	dir = opendir("/dev/shm");
	if (!dir)
		return -ENOENT;
	buf = rl_mem_alloc(RL_KEPT_MAX);
	while (buf && (d = readdir(dir))) {
		struct rl_table_config c;
		struct rl_table *t;
		uint64_t stamp;

		if (d->d_name[0] == '.' || strlen(d->d_name) >= cap ||
		    !looks_ready(dirfd(dir), d->d_name) ||
		    rl_table_open(d->d_name, 0, 0, &t, NULL))
			continue;
		if (rl_kept_load(t, path, buf, RL_KEPT_MAX, &stamp) >= 0) {
			rl_table_config_read(t, &c);
			if (found || c.since_ms > best) {
				snprintf(shm, cap, "%s", d->d_name);
				best = c.since_ms;
				found = 0;
			}
		}
		rl_table_close(t);
	}
	rl_mem_free(buf);
	closedir(dir);
	return found;
}

/*
 * The value of `key` in [global] of a file that may not parse, as the
 * parser would read the simple case; `def` if absent.
 */
static void global_value(const char *text, const char *key, const char *def,
			 char *out, size_t cap)
{
	const char *p = text;
	int global = 1; /* keys before any section count as global too */
	size_t klen = strlen(key);

	snprintf(out, cap, "%s", def);
	while (*p) {
		const char *e = strchr(p, '\n'), *q = p;
		size_t n = e ? (size_t)(e - p) : strlen(p);

		while (q < p + n && (*q == ' ' || *q == '\t'))
			q++;
		if (*q == '[') {
			global = strncmp(q, "[global]", 8) == 0;
		} else if (global && (size_t)(p + n - q) > klen &&
			   strncmp(q, key, klen) == 0) {
			const char *v = q + klen, *end = p + n;

			while (v < end && (*v == ' ' || *v == '\t'))
				v++;
			if (v < end && *v == '=') {
				size_t m;

				v++;
				while (v < end && (*v == ' ' || *v == '\t'))
					v++;
				for (m = 0; v + m < end && v[m] != ' ' &&
				     v[m] != '\t' && v[m] != ';' &&
				     v[m] != '#' && v[m] != '\r'; m++)
					;
				if (m && m < cap)
					snprintf(out, cap, "%.*s", (int)m, v);
			}
		}
		p += n + (e != NULL);
	}
}

int rl_kept_config(const char *path, struct rl_config **out, char **text,
		   size_t *len, int *kept, struct rl_err *err)
{
	char shm[RL_SHM_NAME_MAX];
	struct rl_config *mine = NULL;
	struct rl_table *t = NULL;
	uint64_t stamp;
	char *buf;
	int rc, n;

	*kept = 0;
	*text = NULL;

	rc = rl_config_read(path, text, len, err);
	if (rc == 0) {
		rc = rl_config_parse(*text, path, &mine, err);
		if (rc == 0 && rl_config_reload_ok(mine, err) == 0) {
			*out = mine;
			return 0;
		}
	}
	/* The file cannot be used: the host's kept text, if any. */
	global_value(*text ? *text : "", "shm", RL_SHM_DEFAULT, shm, sizeof(shm));
	rl_config_text_free(*text);
	*text = NULL;
	/* Only our own user's segment may say what the rules are: a segment
	 * another user made first (a root server's name in /dev/shm) is no
	 * source of configuration. */
	if (rl_table_open(shm, 0, RL_TABLE_OWNED, &t, NULL))
		goto none;
	buf = rl_mem_alloc(RL_KEPT_MAX);
	n = buf ? rl_kept_load(t, path, buf, RL_KEPT_MAX, &stamp) : -ENOMEM;
	rl_table_close(t);
	if (n >= 0) {
		if (rl_config_parse(buf, path, out, NULL) == 0) {
			rl_mem_free(buf);
			rl_config_free(mine);
			*kept = 1;
			return 0;
		}
	}
	rl_mem_free(buf);
none:
	/* A file with no rule is taken as it is when nothing is kept. */
	if (mine) {
		*out = mine;
		return 0;
	}
	return rc;
}
