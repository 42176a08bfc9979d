/* SPDX-License-Identifier: MIT */
/*
 * io.h - what the hooks do once the shim is active: classify accepted and
 * adopted sockets, frame what the application reads, answer denials, keep
 * the fd table right across close and dup, swallow writes to connections
 * the shim has answered.
 *
 * The real system calls come through a copy of a `struct rl_sys` (sys.h),
 * the shim's or a test's fakes, so every path here runs in unit tests too.
 */
#ifndef RL_IO_H
#define RL_IO_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "conn.h"
#include "config.h"
#include "policy.h"
#include "sys.h"

/*
 * The active shim. Set up once by rl_io_start; afterwards only `pol`
 * changes, when a reload publishes a new policy (and configuration). A
 * policy is never freed: a thread may still be deciding with the one
 * before, and a connection's verdict points into it.
 */
struct rl_io {
	struct rl_sys sys; /* the calls io_*.c make (rl_sys, or a test's) */
	const struct rl_config *cfg; /* the one started with: which ports are
					guarded (a reload keeps them) */
	const struct rl_policy *pol; /* rl_io_policy() to read it */
	int refuse;       /* start failed with on_error = refuse */
	unsigned forks;   /* fork()s this process has made (its own count) */
	unsigned nlisten; /* ports seen listening (adoption with no ports) */
	uint16_t listen_ports[RL_MAX_PORTS];
};

extern struct rl_io rl_io;

/*
 * Make the shim active with `cfg` over `table` (both kept). On failure
 * (the policy cannot be built) returns a negative errno with `err` set.
 */
int rl_io_start(const struct rl_sys *sys, const struct rl_config *cfg,
		struct rl_table *table, struct rl_err *err);

/* The policy in force now (NULL before rl_io_start). */
static inline const struct rl_policy *rl_io_policy(void)
{
	return __atomic_load_n(&rl_io.pol, __ATOMIC_ACQUIRE);
}

/*
 * Put `cfg` (kept, never freed) in force in place of the current one, over
 * the same table: rules whose definition is unchanged keep their ids and so
 * their keys' state. Connections pick the new policy up at their next
 * request. Returns 0, or a negative errno with `err` set (the old policy
 * stays).
 */
int rl_io_reload(const struct rl_config *cfg, struct rl_err *err);

/* Refuse every guarded connection from now on (on_error = refuse). */
void rl_io_refuse(const struct rl_sys *sys);

/*
 * A read the application made on a tracked connection: the real call into
 * the application's own buffers (`iov`) is `real(ctx)`; `flags` are recv
 * flags (0 for read/readv). Returns what the application gets, with errno
 * set when -1.
 */
struct rl_read {
	int fd;
	const struct iovec *iov;
	int iovcnt;
	int flags;
	ssize_t (*real)(void *ctx);
	void *ctx;
	/* recvmsg: cleared when bytes come from the hold buffer instead */
	struct msghdr *msg;
	/* SSL_read: the session `real` reads from (c->ssl), else NULL */
	void *ssl;
};
ssize_t rl_io_read(struct rl_conn *c, struct rl_read *r);

/*
 * 1 if rl_io_read's first step on `c`, a connection bound to a session
 * (c->ssl: a socket's check for a fork does not apply), is the real read
 * into the application's buffer with nothing before it (nothing held, no
 * answer due, no PROXY header expected, not ended), and a failure of that
 * read is returned as it came, nothing changed. SSL_read then reads first
 * and calls the framer only with bytes, which its real() gives at its
 * first call.
 */
static inline int rl_io_read_first(const struct rl_conn *c)
{
	if (c->state == RL_CONN_HTTP)
		return !c->hold && !c->ended && !c->proxy;
	return c->state == RL_CONN_PASS && !c->hold;
}

/* Bytes the shim holds that the application's reads will get first (for
 * FIONREAD). */
static inline size_t rl_io_held(const struct rl_conn *c)
{
	return c->hold ? c->hold->len : 0;
}

/*
 * Classify the listening socket `lfd` (cached in its entry). Returns 1 if
 * connections accepted on it are guarded, else 0.
 */
int rl_io_listener(int lfd);

/*
 * After the real accept returned `fd` on guarded listener `lfd` with the
 * client `peer`: track it, or refuse it (accept-level rules) by closing it.
 * Returns 1 if the application gets `fd`, 0 if it was refused and closed.
 */
int rl_io_accepted(int lfd, int fd, const struct sockaddr *peer,
		   socklen_t peerlen);

/* First read of an fd the table knows nothing of: a TCP socket on a
 * guarded port is adopted, anything else ignored from now on. */
void rl_io_adopt(int fd, struct rl_fd *e);

/* The application closes `fd` (before the real close). */
void rl_io_close(int fd);

/* `newfd` now refers to what `oldfd` does (after a real dup*). */
void rl_io_dup(int oldfd, int newfd);

/* The application closes every fd in [first, last] (close_range,
 * closefrom with last = UINT_MAX): rl_io_close for each the table has
 * seen. */
void rl_io_close_range(unsigned first, unsigned last);

/* The application received `msg`: sockets handed over with SCM_RIGHTS
 * are new to us, whatever the table said about those fd numbers, so they
 * are classified afresh. */
void rl_io_passed(struct msghdr *msg);

/*
 * The connection a write to `fd` goes to, if the shim follows its answers
 * (or has answered it: then rl_io_write() swallows the write); NULL to
 * pass it untouched. Writes never adopt an fd: only what is read is
 * framed.
 */
struct rl_conn *rl_io_written(int fd);

/*
 * The application writes to a tracked connection. Returns 1 if the write
 * is to be swallowed (the shim answered and shut the connection down:
 * report success, write nothing), else 0.
 */
int rl_io_write(struct rl_conn *c, const struct iovec *iov, int iovcnt);

/*
 * TLS (io_tls.c). The connection behind the application's session `ssl`
 * on socket `fd` (SSL_get_fd; -1 if it has none), bound to it at its first
 * SSL call if no request was framed on the socket itself; NULL to pass
 * the call untouched.
 */
struct rl_conn *rl_io_tls_conn(int fd, void *ssl);

/* A connection opened with a TLS record: the first time in a process,
 * say if its TLS cannot be framed (no libssl after the shim). */
void rl_io_tls_seen(void);

/* The application called libssl on a session with no socket the shim
 * knows (its own BIOs): said once, those connections are not framed. */
void rl_io_tls_no_socket(void);

/* The server selected HTTP/2 for a session on socket `fd` (ALPN): 1 if
 * it is a framed connection, to be kept on HTTP/1.1 (said once). */
int rl_io_tls_no_h2(int fd);

/* The application frees `ssl` (SSL_free). */
void rl_io_tls_free(int fd, void *ssl);

/* A peek through TLS (SSL_peek) of up to `len` bytes into `buf`: 1 if it
 * passes to libssl, else 0 with what it returns in *ret (0: the end, -1:
 * EAGAIN, an answer is due; bytes the shim holds for the application's
 * next read, copied). */
int rl_io_tls_peek(struct rl_conn *c, void *buf, size_t len, ssize_t *ret);

#define RL_ANSWER_HEAD_MAX 16384 /* an answer head longer is not framed */

/* 1 if writes to `c` go through rl_io_send: fields to insert, or owed. */
int rl_io_inserting(const struct rl_conn *c);

/*
 * The application writes `iov` to `c` (`flags` as send's; `msg`, if any,
 * gives the control data): the bytes go out with the fields inserted
 * where answer heads end, through rl_io.sys.sendmsg, and rl_io_wrote()
 * frames them. Returns the count of the application's bytes written, or
 * -1 with errno; a blocking socket blocks as the application's call
 * would. With no bytes (iovcnt 0), flushes owed fields only.
 */
ssize_t rl_io_send(struct rl_conn *c, int fd, const struct iovec *iov,
		   int iovcnt, int flags, const struct msghdr *msg);

/*
 * As rl_io_send, through c's TLS session (rl_io.sys.tls_write), `len`
 * bytes of `buf` with the fields in place: `len` once all of it went, or
 * what the failing SSL_write gave (-1 with errno, EAGAIN: would block; 0)
 * and the application's retry of the same call goes on where it stopped.
 */
ssize_t rl_io_tls_send(struct rl_conn *c, int fd, const void *buf, size_t len);

/*
 * The application wrote the first `n` bytes of `iov` to `fd` (or, with
 * rl_io_wrote_file, `n` bytes of a file): frame its answers, so that the
 * reply to a pipelined denial goes after the answers to the requests
 * before it, and a 101 or 2xx hands the connection over only when it
 * answers that Upgrade or CONNECT. Answers that cannot be framed (a head
 * written in pieces, a body to the end of the connection) stop it, and the
 * shim falls back to answering a denial at the next read.
 */
void rl_io_wrote(struct rl_conn *c, int fd, const struct iovec *iov, int iovcnt,
		 size_t n);
void rl_io_wrote_file(struct rl_conn *c, int fd, size_t n);

#endif /* RL_IO_H */
