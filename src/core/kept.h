/* SPDX-License-Identifier: MIT */
/*
 * kept.h - the configuration in force on a host, kept in its segment.
 *
 * Every process reads the configuration file itself. The first to put a
 * version of it in force on the host also copies its text into the
 * segment, so that a process started while the file is broken (a worker
 * respawned, a server restarted after a bad edit) can take the rules the
 * others keep instead of refusing every connection: an edit the running
 * processes refuse is refused by new ones too.
 *
 * The text carries its stamp (rl_config_stamp) and a hash: a reader copies
 * it and checks the hash, so a copy torn by a writer (or left half-written
 * by a dead one) is seen as none, never used.
 */
#ifndef RL_KEPT_H
#define RL_KEPT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "table.h"

/* Keep `text` (`len` bytes), the file `path` at `stamp`. Returns 0, or
 * -E2BIG when the two do not fit in RL_KEPT_MAX bytes (nothing is kept). */
int rl_kept_store(struct rl_table *t, const char *path, const char *text,
		  size_t len, uint64_t stamp);

/* A copy of the kept text, NUL-terminated, in `buf` (at least RL_KEPT_MAX
 * bytes), if it is the file `path`'s; its stamp in *stamp. Returns its
 * length, or -ENOENT if none is kept for that path (or the copy was
 * torn). */
int rl_kept_load(struct rl_table *t, const char *path, char *buf, size_t cap,
		 uint64_t *stamp);

/*
 * The segment that keeps the text of the file `path`, for a reader that
 * cannot learn its name from the file (emptied, deleted): every rlshim
 * segment in /dev/shm is looked at, other files are not opened further
 * than their first bytes. Of several, the one whose configuration came
 * into force last. Its name in `shm` (RL_SHM_NAME_MAX bytes); returns 0,
 * or -ENOENT when none keeps it.
 */
int rl_kept_find(const char *path, char *shm, size_t cap);

/* The stamp of the text kept, 0 if none (or one is being written). */
uint64_t rl_kept_stamp(const struct rl_table *t);

/*
 * The configuration to start with: the file at `path`, parsed from its
 * text; when it cannot be used (or has no rule at all: emptied, or caught
 * half-written) and the host's segment (named by its `[global] shm`, found
 * even in a file that does not parse) keeps the text in force, that,
 * parsed under the same name. A file with no rule is taken as it is when
 * nothing is kept. Returns 0 with *out set,
 * *text the file's text to keep once in force (NULL when the kept one is
 * used: rl_config_text_free() it) and *kept 1 when the kept text is used, with `err` then
 * saying what is wrong with the file; or a negative errno with `err` set.
 */
int rl_kept_config(const char *path, struct rl_config **out, char **text,
		   size_t *len, int *kept, struct rl_err *err);

#endif /* RL_KEPT_H */
