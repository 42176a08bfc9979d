/* SPDX-License-Identifier: MIT */
/*
 * err.h - setting a `struct rl_err` (include/rlshim.h), the one way the
 * core, the shim and the agent say why something failed.
 *
 * A function that can fail returns 0 or a negative errno and, where the
 * errno says too little, takes a `struct rl_err *err` (NULL when the caller
 * does not want the text) and writes one line there with rl_err_set().
 * Nothing keeps an error in a global or a thread-local.
 *
 * rl_table_check's first finding is one too (`why`). Not of this kind: the
 * framers' verdicts on a request (rl_http.error and the `why` the read path
 * hands to the 400), which are constant strings chosen on the request path,
 * where nothing is formatted or copied.
 */
#ifndef RL_ERR_H
#define RL_ERR_H

#include "rlshim.h"

/* printf into `e` (nothing when e is NULL). */
__attribute__((format(printf, 2, 3)))
void rl_err_set(struct rl_err *e, const char *fmt, ...);

/* "name: strerror(errnum)" into `e`. */
void rl_err_errno(struct rl_err *e, const char *name, int errnum);

#endif
