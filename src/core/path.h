/* SPDX-License-Identifier: MIT */
/* path.h - the normal form of a request path, for matching rules. */
#ifndef RL_PATH_H
#define RL_PATH_H

#include <stddef.h>
#include <stdint.h>

/*
 * Normalise a request target's path: the path of origin- or absolute-form,
 * percent-decoded, dot segments removed, slashes merged, the query dropped.
 * "*" stays "*"; authority-form (host:port) gives "". Writes at most
 * outlen - 1 bytes and a NUL; a longer path is cut and *truncated set.
 * Returns 0 or -EINVAL (bad percent-encoding, a decoded NUL, not a target).
 */
int rl_path_normalize(const char *target, size_t len, char *out,
		      size_t outlen, uint32_t *out_len, uint8_t *truncated);

#endif /* RL_PATH_H */
