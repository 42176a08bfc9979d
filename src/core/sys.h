/* SPDX-License-Identifier: MIT */
/*
 * sys.h - the system calls the core and the shim's modules make, through
 * one table of functions.
 *
 * Inside librlshim.so the names read, write, close, recv, send... are the
 * shim's own hooks: a call to read() from the core would go through the
 * PLT to the hook, not to libc. So nothing in src/core or src/shim calls
 * them by name; they call rl_sys.read() and so on.
 *
 * The table is defined twice, and a program links exactly one of them:
 *   - sys.c in librlcore.a: plain libc, for rlshimd, rlshimctl, the tests,
 *     an embedding application (the archive member is pulled in only by
 *     what has not defined rl_sys itself);
 *   - hooks.c in librlshim.so: the next definitions, from
 *     dlsym(RTLD_NEXT), never one of the shim's own (a raw system call
 *     stands in for a name that does not resolve), filled before any hook
 *     does its work.
 * The build refuses a librlshim.so that calls one of its own exported
 * names (tools/check-selfcalls.sh).
 */
#ifndef RL_SYS_H
#define RL_SYS_H

#include <stddef.h>
#include <sys/types.h>

struct msghdr;

struct rl_sys {
	ssize_t (*read)(int fd, void *buf, size_t len);
	ssize_t (*write)(int fd, const void *buf, size_t len);
	int (*close)(int fd);
	ssize_t (*recv)(int fd, void *buf, size_t len, int flags);
	ssize_t (*send)(int fd, const void *buf, size_t len, int flags);
	ssize_t (*sendmsg)(int fd, const struct msghdr *msg, int flags);
	int (*getfl)(int fd); /* fcntl(fd, F_GETFL) */
	int (*inq)(int fd);   /* ioctl(fd, SIOCINQ): bytes queued, or -1 */
	/*
	 * TLS, in the shim only (NULL elsewhere): libssl's calls on a
	 * connection's SSL*, as recv and send are on its socket: bytes, 0
	 * at the end, -1 with errno (EAGAIN for SSL_ERROR_WANT_READ and
	 * _WRITE). tls_read peeks (SSL_peek) when `peek`; tls_close sends
	 * close_notify (SSL_shutdown).
	 */
	ssize_t (*tls_read)(void *ssl, void *buf, size_t len, int peek);
	ssize_t (*tls_write)(void *ssl, const void *buf, size_t len);
	void (*tls_close)(void *ssl);
	int (*tls_pending)(void *ssl); /* SSL_has_pending: bytes buffered */
	/* 1 if the application's SSL calls come to the shim's hooks and
	 * libssl's are found behind them (NULL: never). */
	int (*tls_live)(void);
};

/* The process's table: filled before main (libc) or by the shim's loader
 * before the first hook does its work. */
extern struct rl_sys rl_sys;

#endif /* RL_SYS_H */
