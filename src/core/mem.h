/* SPDX-License-Identifier: MIT */
/*
 * mem.h - the core's and the shim's long-lived memory: mapped pages of
 * their own, never the application's heap.
 *
 * Inside a server the shim's one-time objects (the configuration, the
 * segment's handle, the policy, a rule's rates, the configuration's text
 * while it is read) would otherwise sit in the heap the server and its
 * libraries malloc from on every request: allocated at the first accept,
 * on top of what the server had, they keep its freed per-request buffers
 * (libssl's record buffers) from going back to the top, so every malloc
 * after them costs more. Here each is a private anonymous mapping: zeroed,
 * page-rounded, the size kept in front of it; a system call to take and
 * one to give back, made only at start and at a reload.
 */
#ifndef RL_MEM_H
#define RL_MEM_H

#include <stddef.h>

/* `n` zeroed bytes (16-byte aligned), or NULL with errno. */
void *rl_mem_alloc(size_t n);

/* `p` (from rl_mem_alloc, or NULL) made `n` bytes long, its bytes kept (as
 * realloc); NULL with errno and `p` untouched if it cannot be. */
void *rl_mem_realloc(void *p, size_t n);

/* Give back what rl_mem_alloc gave (NULL: nothing). errno kept. */
void rl_mem_free(void *p);

#endif /* RL_MEM_H */
