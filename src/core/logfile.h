/* SPDX-License-Identifier: MIT */
/*
 * logfile.h - the agent's log file, never written through a path another
 * user can plant: a file in a directory only this user can write, opened
 * without following links, checked to be this user's own regular file.
 */
#ifndef RL_LOGFILE_H
#define RL_LOGFILE_H

#include <stddef.h>

/*
 * 0 when `dir` is a directory, not a symbolic link, owned by the effective
 * user, that neither its group nor others can write. Else a negative errno
 * and the reason in *why (static text).
 */
int rl_logfile_dir_check(const char *dir, const char **why);

/*
 * The log of the agent the shim starts for segment `shm`:
 * DIR/rlshimd-<shm>.log, DIR the first of /run/rlshim (root only),
 * $XDG_RUNTIME_DIR/rlshim and /tmp/rlshim-<euid> that passes
 * rl_logfile_dir_check (created mode 0700 when missing). Returns 0 and the
 * path in `out` when nothing but this user's regular file stands at that
 * name; else a negative errno with the path in `out` (the last candidate's
 * when no directory passed) and the reason in *why.
 */
int rl_logfile_path(const char *shm, char *out, size_t len, const char **why);

/*
 * Open `path` to append to: its directory passes rl_logfile_dir_check, the
 * file is created mode 0600 or is this user's regular file with one link,
 * and a symbolic link is never followed (O_NOFOLLOW). Returns the fd
 * (close-on-exec) or a negative errno with the reason in *why; nothing is
 * written on failure.
 */
int rl_logfile_open(const char *path, const char **why);

#endif /* RL_LOGFILE_H */
