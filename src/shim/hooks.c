/* SPDX-License-Identifier: MIT */
/*
 * hooks.c - the only symbols librlshim.so exports: the calls it interposes.
 *
 * Each hook resolves the next definition once (dlsym RTLD_NEXT, from the
 * constructor or lazily if called before it; never a definition in this
 * library, see next()), does nothing but the real call until the shim is
 * active and the fd is one it frames, saves and restores errno around its
 * own work, and never calls itself: a thread-local guard sends nested
 * calls straight to the real function. The hooks hold no behaviour:
 * resolve, guard, dispatch. What they do is in accept.c, io*.c and shim.c
 * (build/librlshim-int.a), which the unit tests link.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "accept.h"
#include "shim.h"
#include "spawn.h"

#define HOOK __attribute__((visibility("default")))

/* ---- the real functions -------------------------------------------------------- */

/*
 * read, write, close, recv and send are the ones the core and io_*.c call
 * too: they live in rl_sys (sys.h), which this file defines for the
 * shim, in place of sys.c's libc table.
 */
struct rl_sys rl_sys;

static int (*real_accept)(int, struct sockaddr *, socklen_t *);
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
static ssize_t (*real_recvfrom)(int, void *, size_t, int, struct sockaddr *,
				socklen_t *);
static ssize_t (*real_recvmsg)(int, struct msghdr *, int);
static ssize_t (*real_readv)(int, const struct iovec *, int);
static int (*real_close_range)(unsigned, unsigned, int);
static void (*real_closefrom)(int);
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_fcntl)(int, int, ...);
static int (*real_fcntl64)(int, int, ...);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_sendto)(int, const void *, size_t, int,
			      const struct sockaddr *, socklen_t);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static int (*real_ioctl)(int, unsigned long, ...);

extern void __chk_fail(void) __attribute__((noreturn));

/* glibc's fortified entry points (_FORTIFY_SOURCE); no public prototypes. */
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
		       int flags, struct sockaddr *from, socklen_t *fromlen);

static pthread_once_t resolved = PTHREAD_ONCE_INIT;
static _Atomic int resolved_all;

/*
 * The next definition of `name`, or NULL when there is none or it lies in
 * this very library (proxychains' check that dlsym did not hand back the
 * hook: a copy of the shim loaded twice, a loader that ignores
 * RTLD_NEXT): calling it would loop back into the hooks.
 */
static void *next(const char *name)
{
	Dl_info self, found;
	void *p = dlsym(RTLD_NEXT, name);

	if (p && dladdr((const void *)next, &self) && dladdr(p, &found) &&
	    found.dli_fbase == self.dli_fbase)
		return NULL;
	return p;
}

/* What stands in for a name that does not resolve: the system call
 * itself, which is all libc's wrapper adds to these. */
static ssize_t raw_read(int fd, void *buf, size_t len)
{
	return syscall(SYS_read, fd, buf, len);
}

static ssize_t raw_write(int fd, const void *buf, size_t len)
{
	return syscall(SYS_write, fd, buf, len);
}

static int raw_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

static ssize_t raw_recv(int fd, void *buf, size_t len, int flags)
{
	return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

static ssize_t raw_send(int fd, const void *buf, size_t len, int flags)
{
	return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

static ssize_t raw_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return syscall(SYS_sendmsg, fd, msg, flags);
}

/* fcntl and ioctl: the third argument, whatever it is, as one word. */
#define RAW_VARIADIC(name, cmd_t)                                       \
	static int raw_##name(int fd, cmd_t cmd, ...)                   \
	{                                                               \
		va_list ap;                                             \
		void *arg;                                              \
                                                                        \
		va_start(ap, cmd);                                      \
		arg = va_arg(ap, void *);                               \
		va_end(ap);                                             \
		return (int)syscall(SYS_##name, fd, cmd, arg);          \
	}

RAW_VARIADIC(fcntl, int)
RAW_VARIADIC(ioctl, unsigned long)

static int sys_getfl(int fd)
{
	return real_fcntl(fd, F_GETFL);
}

static int sys_inq(int fd)
{
	int n = 0;

	return real_ioctl(fd, SIOCINQ, &n) < 0 ? -1 : n;
}

/* libssl's side of rl_sys (below, with the SSL hooks). */
static ssize_t sys_tls_read(void *ssl, void *buf, size_t len, int peek);
static ssize_t sys_tls_write(void *ssl, const void *buf, size_t len);
static void sys_tls_close(void *ssl);
static int sys_tls_pending(void *ssl);
static int sys_tls_live(void);

#define RESOLVE(name) (*(void **)&real_##name = next(#name))
#define RESOLVE_OR(name, raw) \
	(RESOLVE(name), real_##name = real_##name ? real_##name : (raw))
#define RESOLVE_SYS(name) \
	(*(void **)&rl_sys.name = next(#name), \
	 rl_sys.name = rl_sys.name ? rl_sys.name : raw_##name)

static void resolve_all(void)
{
	RESOLVE_SYS(read);
	RESOLVE_SYS(write);
	RESOLVE_SYS(close);
	RESOLVE_SYS(recv);
	RESOLVE_SYS(send);
	RESOLVE_SYS(sendmsg);
	RESOLVE_OR(fcntl, raw_fcntl);
	RESOLVE_OR(ioctl, raw_ioctl);
	rl_sys.getfl = sys_getfl;
	rl_sys.inq = sys_inq;
	rl_sys.tls_read = sys_tls_read;
	rl_sys.tls_write = sys_tls_write;
	rl_sys.tls_close = sys_tls_close;
	rl_sys.tls_pending = sys_tls_pending;
	rl_sys.tls_live = sys_tls_live;
	RESOLVE(accept);
	RESOLVE(accept4);
	RESOLVE(recvfrom);
	RESOLVE(recvmsg);
	RESOLVE(readv);
	RESOLVE(close_range);
	RESOLVE(closefrom);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(fcntl64);
	RESOLVE(writev);
	RESOLVE(sendto);
	RESOLVE(sendfile);
	if (!real_fcntl64)
		real_fcntl64 = real_fcntl;
	atomic_store_explicit(&resolved_all, 1, memory_order_release);
}

/* Every hook's first step: the flag once resolved (a load, where
 * pthread_once is a call into libc on every system call). */
static inline void resolve(void)
{
	if (__builtin_expect(!atomic_load_explicit(&resolved_all,
						   memory_order_acquire), 0))
		pthread_once(&resolved, resolve_all);
}

__attribute__((constructor)) static void rl_hooks_init(void)
{
	resolve();
	/* Only getenv: no file is opened, nothing is said. */
	rl_config_remember_env();
	rl_spawn_remember_env();
}

/* ---- the guard --------------------------------------------------------------------- */

static __thread int busy __attribute__((tls_model("initial-exec")));

/* The libssl session whose handshake this thread is in (SSL_accept,
 * SSL_do_handshake), for a session without a socket of its own. */
static __thread void *hs_ssl __attribute__((tls_model("initial-exec")));
static void tls_handshake_read(int fd, struct rl_conn *c);

/* The connection an fd's reads and writes go through, or NULL to pass:
 * shim not active, the guard set, or an fd that is not framed. Adopts an
 * fd it has never seen. */
static __attribute__((noinline)) void adopt(int fd, struct rl_fd *e)
{
	int saved = errno;

	busy = 1;
	rl_io_adopt(fd, e);
	busy = 0;
	errno = saved;
}

static inline struct rl_conn *tracked(int fd)
{
	struct rl_fd *e;
	struct rl_conn *conn;

	if (busy || rl_shim_phase() != RL_SHIM_ACTIVE)
		return NULL;
	e = rl_fd_get(fd);
	if (!e)
		return NULL;
	if (__builtin_expect(e->kind == RL_FD_UNKNOWN, 0))
		adopt(fd, e);
	conn = rl_conn_of(e);
	if (conn && __builtin_expect(hs_ssl != NULL, 0))
		tls_handshake_read(fd, conn);
	return conn;
}

/* ---- accept ------------------------------------------------------------------------ */

/* The real accept into our own storage (the peer is needed even when the
 * application passes NULL); accept.c decides what becomes of it. */
static int do_accept(int lfd, struct sockaddr *addr, socklen_t *alen,
		     int flags, int four)
{
	int refused = 0;

	resolve();
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = four ? real_accept4(lfd, (struct sockaddr *)&ss, &sl, flags)
			      : real_accept(lfd, (struct sockaddr *)&ss, &sl);
		int saved = errno, rc;

		if (fd < 0)
			return fd;
		rl_accept_copy_peer(addr, alen, &ss, sl);
		if (busy)
			return fd;
		busy = 1;
		rc = rl_accept_take(&rl_sys, lfd, fd, (struct sockaddr *)&ss, sl,
				    &refused);
		busy = 0;
		if (rc > 0) {
			errno = rc;
			return -1;
		}
		errno = saved;
		if (rc == RL_ACCEPT_GIVE)
			return fd;
	}
}

HOOK int accept(int fd, struct sockaddr *addr, socklen_t *alen)
{
	return do_accept(fd, addr, alen, 0, 0);
}

HOOK int accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	return do_accept(fd, addr, alen, flags, 1);
}

/* ---- the read family ----------------------------------------------------------------- */

struct call {
	int fd;
	int kind;
	void *buf;
	size_t len;
	int flags;
	struct sockaddr *from;
	socklen_t *fromlen;
	struct msghdr *msg;
	const struct iovec *iov;
	int iovcnt;
};

enum { CALL_READ, CALL_RECV, CALL_RECVFROM, CALL_RECVMSG, CALL_READV };

static ssize_t real_call(void *ctx)
{
	struct call *c = ctx;

	switch (c->kind) {
	case CALL_READ:
		return rl_sys.read(c->fd, c->buf, c->len);
	case CALL_RECV:
		return rl_sys.recv(c->fd, c->buf, c->len, c->flags);
	case CALL_RECVFROM:
		return real_recvfrom(c->fd, c->buf, c->len, c->flags, c->from,
				     c->fromlen);
	case CALL_RECVMSG:
		return real_recvmsg(c->fd, c->msg, c->flags);
	default:
		return real_readv(c->fd, c->iov, c->iovcnt);
	}
}

/* A read into one buffer (read, recv): what the real call needs, and
 * nothing else to set up. */
struct call1 {
	int fd;
	int flags;
	void *buf;
	size_t len;
};

static ssize_t real_read1(void *ctx)
{
	struct call1 *c = ctx;

	return rl_sys.read(c->fd, c->buf, c->len);
}

static ssize_t real_recv1(void *ctx)
{
	struct call1 *c = ctx;

	return rl_sys.recv(c->fd, c->buf, c->len, c->flags);
}

static inline ssize_t framed_read1(struct rl_conn *conn, struct call1 *c,
				   ssize_t (*real)(void *))
{
	struct iovec one = { c->buf, c->len };
	struct rl_read r = { c->fd, &one, 1, c->flags, real, c, NULL, NULL };
	ssize_t n;

	busy = 1;
	n = rl_io_read(conn, &r);
	busy = 0;
	return n;
}

static ssize_t framed_read(struct rl_conn *conn, struct call *c)
{
	struct iovec one = { c->buf, c->len };
	struct rl_read r = { c->fd, &one, 1, c->flags, real_call, c, NULL, NULL };
	ssize_t n;

	if (c->kind == CALL_RECVMSG) {
		r.iov = c->msg->msg_iov;
		r.iovcnt = (int)c->msg->msg_iovlen;
		r.msg = c->msg;
	} else if (c->kind == CALL_READV) {
		r.iov = c->iov;
		r.iovcnt = c->iovcnt;
	}
	busy = 1;
	n = rl_io_read(conn, &r);
	busy = 0;
	return n;
}

/* The fortified entry points share the hooks' bodies, never call them by
 * name: inside this library that would go through the PLT. */
static __attribute__((noinline)) ssize_t read_looked(int fd, void *buf,
						     size_t len)
{
	struct rl_conn *conn;

	resolve();
	conn = tracked(fd);
	if (!conn)
		return rl_sys.read(fd, buf, len);
	{
		struct call1 c = { fd, 0, buf, len };

		return framed_read1(conn, &c, real_read1);
	}
}

/* The shim's own reads, and libssl's of its records inside an SSL call
 * the shim frames (two a keep-alive HTTPS request: the record, then
 * EAGAIN): straight through, a jump with no frame of its own (busy is set
 * only once resolved). */
static inline ssize_t do_read(int fd, void *buf, size_t len)
{
	if (busy)
		return rl_sys.read(fd, buf, len);
	return read_looked(fd, buf, len);
}

HOOK ssize_t read(int fd, void *buf, size_t len)
{
	return do_read(fd, buf, len);
}

HOOK ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		__chk_fail();
	return do_read(fd, buf, len);
}

static ssize_t do_recv(int fd, void *buf, size_t len, int flags)
{
	struct rl_conn *conn;

	resolve();
	conn = tracked(fd);
	if (!conn)
		return rl_sys.recv(fd, buf, len, flags);
	{
		struct call1 c = { fd, flags, buf, len };

		return framed_read1(conn, &c, real_recv1);
	}
}

HOOK ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return do_recv(fd, buf, len, flags);
}

HOOK ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			int flags)
{
	if (len > buflen)
		__chk_fail();
	return do_recv(fd, buf, len, flags);
}

static ssize_t do_recvfrom(int fd, void *buf, size_t len, int flags,
			   struct sockaddr *from, socklen_t *fromlen)
{
	struct rl_conn *conn;
	struct call c = { .fd = fd, .kind = CALL_RECVFROM, .buf = buf,
			  .len = len, .flags = flags, .from = from,
			  .fromlen = fromlen };

	resolve();
	conn = tracked(fd);
	return conn ? framed_read(conn, &c)
		    : real_recvfrom(fd, buf, len, flags, from, fromlen);
}

HOOK ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
		      struct sockaddr *from, socklen_t *fromlen)
{
	return do_recvfrom(fd, buf, len, flags, from, fromlen);
}

HOOK ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
			    int flags, struct sockaddr *from,
			    socklen_t *fromlen)
{
	if (len > buflen)
		__chk_fail();
	return do_recvfrom(fd, buf, len, flags, from, fromlen);
}

HOOK ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct rl_conn *conn;
	struct call c = { .fd = fd, .kind = CALL_RECVMSG, .msg = msg,
			  .flags = flags };
	ssize_t n;

	resolve();
	conn = tracked(fd);
	n = conn ? framed_read(conn, &c) : real_recvmsg(fd, msg, flags);
	if (n >= 0 && msg && msg->msg_controllen &&
	    rl_shim_phase() == RL_SHIM_ACTIVE) {
		int saved = errno;

		rl_io_passed(msg);
		errno = saved;
	}
	return n;
}

HOOK ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct rl_conn *conn;
	struct call c = { .fd = fd, .kind = CALL_READV, .iov = iov,
			  .iovcnt = iovcnt };

	resolve();
	conn = tracked(fd);
	return conn ? framed_read(conn, &c) : real_readv(fd, iov, iovcnt);
}

/* ---- close and dup ------------------------------------------------------------------- */

static inline int watching(void)
{
	return !busy && rl_shim_phase() == RL_SHIM_ACTIVE;
}

/* close of an fd the table has classified: out of line, so that the
 * common close (a file nginx served, say) saves no registers. */
static __attribute__((noinline)) void close_known(int fd)
{
	int saved = errno;

	busy = 1;
	rl_io_close(fd);
	busy = 0;
	errno = saved;
}

HOOK int close(int fd)
{
	struct rl_fd *e;

	resolve();
	/* Never classified (a file nginx served, say): nothing to forget. */
	if (watching() && (e = rl_fd_peek(fd)) && e->kind != RL_FD_UNKNOWN)
		close_known(fd);
	return rl_sys.close(fd);
}

HOOK int close_range(unsigned first, unsigned last, int flags)
{
	resolve();
	if (watching() && !(flags & CLOSE_RANGE_CLOEXEC)) {
		int saved = errno;

		busy = 1;
		rl_io_close_range(first, last);
		busy = 0;
		errno = saved;
	}
	if (!real_close_range) {
		errno = ENOSYS;
		return -1;
	}
	return real_close_range(first, last, flags);
}

HOOK void closefrom(int lowfd)
{
	resolve();
	if (watching() && lowfd >= 0) {
		int saved = errno;

		busy = 1;
		rl_io_close_range((unsigned)lowfd, UINT_MAX);
		busy = 0;
		errno = saved;
	}
	if (real_closefrom)
		real_closefrom(lowfd);
}

static int dup_done(int oldfd, int newfd)
{
	if (newfd >= 0 && newfd != oldfd && watching()) {
		int saved = errno;

		busy = 1;
		rl_io_dup(oldfd, newfd);
		busy = 0;
		errno = saved;
	}
	return newfd;
}

HOOK int dup(int fd)
{
	resolve();
	return dup_done(fd, real_dup(fd));
}

HOOK int dup2(int oldfd, int newfd)
{
	resolve();
	return dup_done(oldfd, real_dup2(oldfd, newfd));
}

HOOK int dup3(int oldfd, int newfd, int flags)
{
	resolve();
	return dup_done(oldfd, real_dup3(oldfd, newfd, flags));
}

static int fcntl_done(int fd, int cmd, int r)
{
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return dup_done(fd, r);
	return r;
}

/* fcntl and fcntl64 are one hook, each calling its own next definition
 * (they differ on 32-bit systems: struct flock64). */
#define FCNTL_HOOK(name)                                                \
	HOOK int name(int fd, int cmd, ...)                             \
	{                                                               \
		va_list ap;                                             \
		void *arg;                                              \
                                                                        \
		resolve();                                              \
		va_start(ap, cmd);                                      \
		arg = va_arg(ap, void *);                               \
		va_end(ap);                                             \
		return fcntl_done(fd, cmd, real_##name(fd, cmd, arg));  \
	}

FCNTL_HOOK(fcntl)
FCNTL_HOOK(fcntl64)

/* ---- ioctl: FIONREAD counts what the shim holds ------------------------------------ */

/*
 * Servers size their reads by FIONREAD, and nginx takes a read of more
 * than it said for "drained" (and waits for an edge that never comes): the
 * bytes the shim holds for the application are readable too.
 */
HOOK int ioctl(int fd, unsigned long req, ...)
{
	struct rl_conn *conn;
	va_list ap;
	void *arg;
	int r;

	resolve();
	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	r = real_ioctl(fd, req, arg);
	if (r == 0 && req == FIONREAD && arg && (conn = tracked(fd)) &&
	    !conn->ssl) {
		int saved = errno;

		*(int *)arg += (int)rl_io_held(conn);
		errno = saved;
	}
	return r;
}

/* ---- the write family: the answers ---------------------------------------------- */

/* The connection a write goes to (rl_io_written), or NULL to pass. */
static inline struct rl_conn *written(int fd)
{
	if (busy || rl_shim_phase() != RL_SHIM_ACTIVE)
		return NULL;
	return rl_io_written(fd);
}

/* After the real write: `r` bytes of `iov` went out. */
static inline ssize_t wrote(int fd, struct rl_conn *conn,
			    const struct iovec *iov, int iovcnt, ssize_t r)
{
	if (conn && r > 0) {
		int *err = &errno, saved = *err;

		busy = 1;
		rl_io_wrote(conn, fd, iov, iovcnt, (size_t)r);
		busy = 0;
		*err = saved;
	}
	return r;
}

/* After the real sendfile (or SSL_sendfile): `r` bytes of a file went
 * out on `fd`. */
static ssize_t wrote_file(int fd, struct rl_conn *conn, ssize_t r)
{
	if (conn && r > 0) {
		int saved = errno;

		busy = 1;
		rl_io_wrote_file(conn, fd, (size_t)r);
		busy = 0;
		errno = saved;
	}
	return r;
}

static ssize_t iov_len(const struct iovec *iov, int n)
{
	size_t t = 0;

	for (int i = 0; i < n; i++)
		t += iov[i].iov_len;
	return (ssize_t)t;
}

/* Before the real write of `iov`: the connection it answers on (NULL to
 * pass), and *swallow set when the shim takes the bytes itself (the
 * connection is done: the application sees them all written). */
static inline struct rl_conn *answering(int fd, const struct iovec *iov,
					int iovcnt, int *swallow)
{
	struct rl_conn *conn;

	resolve();
	conn = iovcnt >= 0 ? written(fd) : NULL;
	*swallow = conn && rl_io_write(conn, iov, iovcnt);
	return conn;
}

/* A write whose answer heads get fields inserted (or that owes some
 * still): the shim makes the system calls, the application is told how
 * many of its own bytes went. */
static ssize_t sending(int fd, struct rl_conn *conn, const struct iovec *iov,
		       int iovcnt, int flags, const struct msghdr *msg)
{
	ssize_t r;

	busy = 1;
	r = rl_io_send(conn, fd, iov, iovcnt, flags, msg);
	busy = 0;
	return r;
}

/* With fields to insert, and something to write. */
#define INSERTING(conn, iov, n) \
	((conn) && rl_io_inserting(conn) && iov_len(iov, n) > 0)

static __attribute__((noinline)) ssize_t write_looked(int fd, const void *buf,
						      size_t len)
{
	struct iovec v = { (void *)buf, len };
	int swallow;
	struct rl_conn *conn;

	conn = answering(fd, &v, 1, &swallow);

	if (swallow)
		return (ssize_t)len;
	if (INSERTING(conn, &v, 1))
		return sending(fd, conn, &v, 1, 0, NULL);
	return wrote(fd, conn, &v, 1, rl_sys.write(fd, buf, len));
}

HOOK ssize_t write(int fd, const void *buf, size_t len)
{
	if (busy) /* as read's (do_read): a jump, no frame of its own */
		return rl_sys.write(fd, buf, len);
	return write_looked(fd, buf, len);
}

HOOK ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	int swallow;
	struct rl_conn *conn = answering(fd, iov, iovcnt, &swallow);

	if (swallow)
		return iov_len(iov, iovcnt);
	if (INSERTING(conn, iov, iovcnt))
		return sending(fd, conn, iov, iovcnt, 0, NULL);
	return wrote(fd, conn, iov, iovcnt, real_writev(fd, iov, iovcnt));
}

HOOK ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct iovec v = { (void *)buf, len };
	int swallow;
	struct rl_conn *conn = answering(fd, &v, 1, &swallow);

	if (swallow)
		return (ssize_t)len;
	if (INSERTING(conn, &v, 1))
		return sending(fd, conn, &v, 1, flags, NULL);
	return wrote(fd, conn, &v, 1, rl_sys.send(fd, buf, len, flags));
}

HOOK ssize_t sendto(int fd, const void *buf, size_t len, int flags,
		    const struct sockaddr *to, socklen_t tolen)
{
	struct iovec v = { (void *)buf, len };
	int swallow;
	struct rl_conn *conn = answering(fd, &v, 1, &swallow);

	if (swallow)
		return (ssize_t)len;
	/* A connected TCP socket ignores the address. */
	if (INSERTING(conn, &v, 1))
		return sending(fd, conn, &v, 1, flags, NULL);
	return wrote(fd, conn, &v, 1, real_sendto(fd, buf, len, flags, to, tolen));
}

HOOK ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	const struct iovec *iov = msg ? msg->msg_iov : NULL;
	int n = msg ? (int)msg->msg_iovlen : -1, swallow;
	struct rl_conn *conn = answering(fd, iov, n, &swallow);

	if (swallow)
		return iov_len(iov, n);
	if (INSERTING(conn, iov, n))
		return sending(fd, conn, iov, n, flags, msg);
	return wrote(fd, conn, iov, n < 0 ? 0 : n, rl_sys.sendmsg(fd, msg, flags));
}

static ssize_t do_sendfile(int out, int in, off_t *off, size_t count)
{
	int swallow;
	struct rl_conn *conn = answering(out, NULL, 0, &swallow);
	ssize_t r;

	if (swallow) {
		if (off)
			*off += (off_t)count;
		return (ssize_t)count;
	}
	if (conn && conn->pend_off < conn->pend_len) {
		/* Fields owed before a file's bytes (a head ended by a
		 * sendfile): they go first. */
		busy = 1;
		r = rl_io_send(conn, out, NULL, 0, 0, NULL);
		busy = 0;
		if (r < 0)
			return r;
		if (conn->pend_off < conn->pend_len) {
			errno = EAGAIN;
			return -1;
		}
	}
	return wrote_file(out, conn, real_sendfile(out, in, off, count));
}

HOOK ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	return do_sendfile(out, in, off, count);
}

HOOK ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return do_sendfile(out, in, off, count);
}

/* ---- libssl: HTTPS framed on its plaintext ------------------------------------------ */

/*
 * A server that terminates TLS itself reads requests with SSL_read and
 * writes answers with SSL_write, through its PLT like any libc call: these
 * hooks frame the plaintext as the read and write hooks frame a socket's
 * bytes (io_tls.c binds the session to its socket's connection). libssl
 * is never linked: its functions are looked up at the first SSL call,
 * after the shim (RTLD_NEXT), or in an OpenSSL already loaded (Python
 * dlopens it with _ssl, RTLD_LOCAL, where RTLD_NEXT does not look). A
 * process without libssl never calls these. Declared here without
 * OpenSSL's headers: the SSL* is opaque, and the few constants are
 * OpenSSL's ABI since 1.1.1.
 */
#define TLS_ERROR_SSL 1
#define TLS_ERROR_WANT_READ 2
#define TLS_ERROR_WANT_WRITE 3
#define TLS_ERROR_SYSCALL 5
#define TLS_ERROR_ZERO_RETURN 6
#define TLS_EXT_ERR_OK 0
#define TLS_EXT_ERR_NOACK 3
#define TLS_READ_EARLY_DATA_FINISH 2

typedef int (*tls_alpn_cb)(void *ssl, const unsigned char **out,
			   unsigned char *outlen, const unsigned char *in,
			   unsigned int inlen, void *arg);

/* The hooks' prototypes (libssl's, with an opaque SSL*). */
int SSL_read(void *ssl, void *buf, int num);
int SSL_read_ex(void *ssl, void *buf, size_t num, size_t *readbytes);
int SSL_peek(void *ssl, void *buf, int num);
int SSL_peek_ex(void *ssl, void *buf, size_t num, size_t *readbytes);
int SSL_write(void *ssl, const void *buf, int num);
int SSL_write_ex(void *ssl, const void *buf, size_t num, size_t *written);
ssize_t SSL_sendfile(void *ssl, int in, off_t offset, size_t size, int flags);
int SSL_get_error(const void *ssl, int ret);
int SSL_pending(const void *ssl);
int SSL_has_pending(const void *ssl);
int SSL_shutdown(void *ssl);
int SSL_get_shutdown(const void *ssl);
void SSL_free(void *ssl);
int SSL_read_early_data(void *ssl, void *buf, size_t num, size_t *readbytes);
int SSL_accept(void *ssl);
int SSL_do_handshake(void *ssl);
void SSL_CTX_set_alpn_select_cb(void *ctx, tls_alpn_cb cb, void *arg);

static struct {
	int (*read)(void *, void *, int);
	int (*read_ex)(void *, void *, size_t, size_t *);
	int (*peek)(void *, void *, int);
	int (*peek_ex)(void *, void *, size_t, size_t *);
	int (*write)(void *, const void *, int);
	int (*write_ex)(void *, const void *, size_t, size_t *);
	ssize_t (*sendfile)(void *, int, off_t, size_t, int);
	int (*shutdown)(void *);
	int (*get_shutdown)(const void *);
	void (*free)(void *);
	int (*get_error)(const void *, int);
	int (*get_fd)(const void *);
	int (*pending)(const void *);
	int (*has_pending)(const void *);
	int (*read_early_data)(void *, void *, size_t, size_t *);
	void (*ctx_set_alpn_select_cb)(void *, tls_alpn_cb, void *);
	int (*accept)(void *);
	int (*do_handshake)(void *);
	int (*set_ex_data)(void *, int, void *);
	void *(*get_ex_data)(const void *, int);
	int (*new_ex_index)(int, long, void *, void *, void *, void *);
	int ex_fd; /* the ex_data index of a session's socket, or -1 */
	int live; /* SSL_read is libssl's and the application's is ours */
} tls;

static pthread_once_t tls_resolved = PTHREAD_ONCE_INIT;
static _Atomic int tls_resolved_all;

/* libssl's `name`: after the shim, else in a libssl already loaded. */
static void *tls_sym(void *lib, const char *name)
{
	Dl_info self, found;
	void *p = next(name);

	if (!p && lib && (p = dlsym(lib, name)) && dladdr((const void *)next, &self) &&
	    dladdr(p, &found) && found.dli_fbase == self.dli_fbase)
		p = NULL;
	return p;
}

static void tls_resolve_all(void)
{
	void *lib = NULL;
	Dl_info self, found;
	void *def;

	if (!next("SSL_read")) {
		lib = dlopen("libssl.so.3", RTLD_LAZY | RTLD_NOLOAD);
		if (!lib)
			lib = dlopen("libssl.so.1.1", RTLD_LAZY | RTLD_NOLOAD);
	}
#define TLS_SYM(field, name) (*(void **)&tls.field = tls_sym(lib, name))
	TLS_SYM(read, "SSL_read");
	TLS_SYM(read_ex, "SSL_read_ex");
	TLS_SYM(peek, "SSL_peek");
	TLS_SYM(peek_ex, "SSL_peek_ex");
	TLS_SYM(write, "SSL_write");
	TLS_SYM(write_ex, "SSL_write_ex");
	TLS_SYM(sendfile, "SSL_sendfile");
	TLS_SYM(shutdown, "SSL_shutdown");
	TLS_SYM(get_shutdown, "SSL_get_shutdown");
	TLS_SYM(free, "SSL_free");
	TLS_SYM(get_error, "SSL_get_error");
	TLS_SYM(get_fd, "SSL_get_fd");
	TLS_SYM(pending, "SSL_pending");
	TLS_SYM(has_pending, "SSL_has_pending");
	TLS_SYM(read_early_data, "SSL_read_early_data");
	TLS_SYM(ctx_set_alpn_select_cb, "SSL_CTX_set_alpn_select_cb");
	TLS_SYM(accept, "SSL_accept");
	TLS_SYM(do_handshake, "SSL_do_handshake");
	TLS_SYM(set_ex_data, "SSL_set_ex_data");
	TLS_SYM(get_ex_data, "SSL_get_ex_data");
	TLS_SYM(new_ex_index, "CRYPTO_get_ex_new_index");
#undef TLS_SYM
	/* CRYPTO_EX_INDEX_SSL is 0. */
	tls.ex_fd = tls.set_ex_data && tls.get_ex_data && tls.new_ex_index
			    ? tls.new_ex_index(0, 0, NULL, NULL, NULL, NULL)
			    : -1;
	/* The application's SSL_read is the shim's (not one linked into the
	 * program itself), and libssl's is behind it. */
	def = dlsym(RTLD_DEFAULT, "SSL_read");
	tls.live = tls.read && tls.peek && tls.write && tls.get_error &&
		   tls.get_fd && tls.shutdown && def &&
		   dladdr((const void *)next, &self) && dladdr(def, &found) &&
		   found.dli_fbase == self.dli_fbase;
	atomic_store_explicit(&tls_resolved_all, 1, memory_order_release);
}

/* Out of line: the SSL hooks that pass keep no frame for it. */
static __attribute__((noinline, cold)) void tls_resolve_once(void)
{
	resolve();
	pthread_once(&tls_resolved, tls_resolve_all);
}

static inline void tls_resolve(void)
{
	if (__builtin_expect(!atomic_load_explicit(&tls_resolved_all,
						   memory_order_acquire), 0))
		tls_resolve_once();
}

static int sys_tls_live(void)
{
	tls_resolve();
	return tls.live;
}

/*
 * What SSL_get_error says of a call the shim answered: the last SSL call
 * of this thread, on `fake_ssl`, returned `fake_err` (what libssl said of
 * its own last call, or what the shim's answer means: the end, would
 * block). Cleared by every SSL hook.
 */
static __thread const void *fake_ssl __attribute__((tls_model("initial-exec")));
static __thread int fake_err __attribute__((tls_model("initial-exec")));
/* What libssl said of the shim's last real call that failed, this call. */
static __thread int tls_err __attribute__((tls_model("initial-exec")));

/* libssl's failure as a socket's: 0 the end, -1 with errno (EAGAIN would
 * block). tls_err keeps libssl's word for SSL_get_error. */
static ssize_t tls_failed(void *ssl, int ret)
{
	int saved = errno, e = tls.get_error(ssl, ret);

	tls_err = e;
	errno = saved;
	switch (e) {
	case TLS_ERROR_ZERO_RETURN:
		return 0;
	case TLS_ERROR_WANT_READ:
	case TLS_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case TLS_ERROR_SYSCALL:
		if (errno == 0)
			return 0; /* the end without close_notify */
		return -1;
	default:
		errno = EPROTO;
		return -1;
	}
}

static ssize_t sys_tls_read(void *ssl, void *buf, size_t len, int peek)
{
	int n, want = len > INT_MAX ? INT_MAX : (int)len;

	n = peek ? tls.peek(ssl, buf, want) : tls.read(ssl, buf, want);
	return n > 0 ? n : tls_failed(ssl, n);
}

static ssize_t sys_tls_write(void *ssl, const void *buf, size_t len)
{
	int n, want = len > INT_MAX ? INT_MAX : (int)len;

	n = tls.write(ssl, buf, want);
	return n > 0 ? n : tls_failed(ssl, n);
}

static void sys_tls_close(void *ssl)
{
	int saved = errno;

	tls.shutdown(ssl);
	errno = saved;
}

static int sys_tls_pending(void *ssl)
{
	return tls.has_pending ? tls.has_pending(ssl) : tls.pending(ssl) > 0;
}

/*
 * The session this thread last found framed, and its socket: a server
 * makes three SSL calls a request on one session (SSL_read twice, the
 * record then WANT_READ; SSL_write), and SSL_get_fd walks the BIO chain
 * (~130 instructions). The socket's connection still holding that very
 * session proves the pair: sessions are bound only to the connection of
 * their socket, a connection's session is cleared when it is freed
 * (rl_io_tls_free) and a new connection starts with none. A server that
 * moved a live session to another socket (SSL_set_fd again) would keep
 * the first; none does.
 */
static __thread const void *last_ssl __attribute__((tls_model("initial-exec")));
static __thread int last_fd __attribute__((tls_model("initial-exec")));

static inline struct rl_conn *tls_last(const void *ssl, int *fd)
{
	struct rl_fd *e;
	struct rl_conn *c;

	if (ssl != last_ssl || !(e = rl_fd_get(last_fd)) ||
	    !(c = rl_conn_of(e)) || c->ssl != ssl)
		return NULL;
	*fd = last_fd;
	return c;
}

/* The socket of session `ssl`: its own (SSL_get_fd), or the one its
 * handshake was seen to read (a BIO of the application's, apache's). */
static int tls_fd(const void *ssl)
{
	int fd = tls.get_fd(ssl);

	if (fd < 0 && tls.ex_fd >= 0)
		fd = (int)(intptr_t)tls.get_ex_data(ssl, tls.ex_fd) - 1;
	return fd;
}

/* A socket read inside session hs_ssl's handshake: that session's
 * socket, if it has none of its own. */
static void tls_handshake_read(int fd, struct rl_conn *c)
{
	void *ssl = hs_ssl;
	int saved = errno;

	if (!c || c->ssl || !tls.live || tls.ex_fd < 0 || tls.get_fd(ssl) >= 0)
		return;
	busy = 1;
	if ((c = rl_io_tls_conn(fd, ssl)) && c->ssl == ssl) {
		c->tls_app_bio = 1; /* it buffers what the shim cannot see */
		tls.set_ex_data(ssl, tls.ex_fd, (void *)(intptr_t)(fd + 1));
	}
	busy = 0;
	errno = saved;
}

/* tls_tracked() of a session not the thread's last. */
static __attribute__((noinline)) struct rl_conn *tls_find(void *ssl, int *fd)
{
	struct rl_conn *c;

	*fd = tls_fd(ssl);
	if (*fd < 0) {
		/* No socket behind the session: the application moves the
		 * records itself (memory BIOs: Node.js). Said once. */
		int saved = errno;

		busy = 1;
		rl_io_tls_no_socket();
		busy = 0;
		errno = saved;
		return NULL;
	}
	{
		int saved = errno;

		busy = 1;
		c = rl_io_tls_conn(*fd, ssl);
		busy = 0;
		errno = saved;
	}
	if (c && c->ssl == ssl) {
		last_ssl = ssl;
		last_fd = *fd;
	}
	return c;
}

/* The connection of session `ssl` and its socket, or NULL to pass: the
 * shim not active, the guard set, no socket (a BIO of the application's
 * own), or a connection that is not framed through TLS. */
static inline struct rl_conn *tls_tracked(void *ssl, int *fd)
{
	struct rl_conn *c;

	fake_ssl = NULL;
	tls_err = 0;
	if (busy)
		return NULL;
	/* The thread's last session was found past the checks below, and
	 * neither changes once passed (ACTIVE is the shim's last phase,
	 * libssl is resolved once). */
	if ((c = tls_last(ssl, fd)))
		return c;
	if (rl_shim_phase() != RL_SHIM_ACTIVE || !tls.live)
		return NULL;
	return tls_find(ssl, fd);
}

/* The hook's return for `n` (what the framed call gave, as read's), and
 * what SSL_get_error will say of it. *ex: the _ex form (1 or 0). */
static int tls_result(const void *ssl, ssize_t n, size_t *count)
{
	if (count)
		*count = n > 0 ? (size_t)n : 0;
	if (n > 0)
		return count ? 1 : (int)n;
	fake_ssl = ssl;
	if (tls_err)
		fake_err = tls_err;
	else if (n == 0)
		fake_err = TLS_ERROR_ZERO_RETURN;
	else
		fake_err = errno == EAGAIN ? TLS_ERROR_WANT_READ : TLS_ERROR_SYSCALL;
	return (n == 0 || count) ? 0 : -1;
}

struct tls_call {
	void *ssl;
	void *buf;
	size_t len;
	size_t got; /* bytes libssl gave before the framer was called, or 0 */
};

static ssize_t tls_real_read(void *ctx)
{
	struct tls_call *t = ctx;

	if (t->got) {
		ssize_t n = (ssize_t)t->got;

		t->got = 0;
		return n;
	}
	return sys_tls_read(t->ssl, t->buf, t->len, 0);
}

/* SSL_read's bytes framed: rl_io_read over the session, whose first real
 * read gives `got` bytes libssl has put in `buf` already, if not 0. */
static ssize_t tls_framed_read(struct rl_conn *c, int fd, void *ssl, void *buf,
			       size_t len, size_t got)
{
	struct tls_call t = { ssl, buf, len, got };
	struct iovec one = { buf, len };
	struct rl_read r = { fd, &one, 1, 0, tls_real_read, &t, NULL, ssl };
	ssize_t n;

	busy = 1;
	n = rl_io_read(c, &r);
	busy = 0;
	return n;
}

/* The hook's return for SSL_read's bytes framed (count: the _ex form's).
 * Out of line: the hooks' frames stay small for the read that finds
 * nothing. */
static __attribute__((noinline)) int tls_read_framed(struct rl_conn *c, int fd,
						     void *ssl, void *buf,
						     size_t len, size_t got,
						     size_t *count)
{
	return tls_result(ssl, tls_framed_read(c, fd, ssl, buf, len, got),
			  count);
}

/*
 * The common SSL_read of a framed connection between requests, and the
 * one after a request that finds no more (libssl's WANT_READ, half of a
 * keep-alive server's SSL_reads): when the framer's first step would be
 * libssl's read itself (rl_io_read_first), that read is made first, the
 * records passing the socket hooks as they are. With nothing read, what
 * libssl returned is the application's as it is (errno, the error queue,
 * and SSL_get_error is libssl's: tls_tracked cleared the shim's word);
 * the framer's state was not looked at. With bytes, the framer is given
 * them as its first read, and errno is what libssl left (rl_io_read keeps
 * it), as without the shim.
 */
HOOK int SSL_read(void *ssl, void *buf, int num)
{
	struct rl_conn *c;
	int fd, n;

	tls_resolve();
	if (!tls.read) {
		errno = ENOSYS;
		return -1;
	}
	if (!(c = tls_tracked(ssl, &fd)) || num <= 0)
		return tls.read(ssl, buf, num);
	if (!rl_io_read_first(c))
		return tls_read_framed(c, fd, ssl, buf, (size_t)num, 0, NULL);
	busy = 1;
	n = tls.read(ssl, buf, num);
	busy = 0;
	if (n <= 0)
		return n;
	return tls_read_framed(c, fd, ssl, buf, (size_t)num, (size_t)n, NULL);
}

HOOK int SSL_read_ex(void *ssl, void *buf, size_t num, size_t *readbytes)
{
	struct rl_conn *c;
	size_t got = 0, *into;
	int fd, r;

	tls_resolve();
	if (!tls.read_ex) {
		errno = ENOSYS;
		return 0;
	}
	if (!(c = tls_tracked(ssl, &fd)) || num == 0)
		return tls.read_ex(ssl, buf, num, readbytes);
	if (rl_io_read_first(c)) {
		/* As SSL_read: the application's readbytes is libssl's to
		 * write when nothing is read. */
		into = readbytes ? readbytes : &got;
		busy = 1;
		r = tls.read_ex(ssl, buf, num, into);
		busy = 0;
		if (r <= 0 || *into == 0)
			return r;
		got = *into;
	}
	r = tls_read_framed(c, fd, ssl, buf, num, got, &got);
	if (readbytes)
		*readbytes = got;
	return r;
}

/* A peek: the application's own, untouched, except while the shim
 * answers (as a socket's peek) or holds bytes its next read gets. */
static int tls_peeked(void *ssl, void *buf, size_t len, int *pass,
		      size_t *count)
{
	struct rl_conn *c;
	ssize_t ret;
	int fd;

	*pass = 1;
	if (!(c = tls_tracked(ssl, &fd)) || rl_io_tls_peek(c, buf, len, &ret))
		return 0;
	*pass = 0;
	return tls_result(ssl, ret, count);
}

HOOK int SSL_peek(void *ssl, void *buf, int num)
{
	int pass, r;

	tls_resolve();
	if (!tls.peek) {
		errno = ENOSYS;
		return -1;
	}
	r = tls_peeked(ssl, buf, num > 0 ? (size_t)num : 0, &pass, NULL);
	return pass ? tls.peek(ssl, buf, num) : r;
}

HOOK int SSL_peek_ex(void *ssl, void *buf, size_t num, size_t *readbytes)
{
	size_t got;
	int pass, r;

	tls_resolve();
	if (!tls.peek_ex) {
		errno = ENOSYS;
		return 0;
	}
	r = tls_peeked(ssl, buf, num, &pass, &got);
	if (pass)
		return tls.peek_ex(ssl, buf, num, readbytes);
	if (readbytes)
		*readbytes = got;
	return r;
}

/* After libssl wrote `n` of the application's bytes: frame the answer.
 * Returns -1 if the shim swallows the write (it answered the
 * connection). */
static int tls_writing(void *ssl, struct rl_conn **c, int *fd)
{
	int swallow;

	*c = tls_tracked(ssl, fd);
	if (!*c)
		return 0;
	swallow = rl_io_write(*c, NULL, 0);
	return swallow ? -1 : 0;
}

/* headers_on = all: the application's `len` bytes go out with the fields
 * inserted (rl_io_tls_send), as one SSL_write to the application: what
 * the hook returns, as tls_result() makes it. */
static int tls_inserting(void *ssl, struct rl_conn *c, int fd, const void *buf,
			 size_t len, size_t *count)
{
	int saved = errno;
	ssize_t n;

	busy = 1;
	n = rl_io_tls_send(c, fd, buf, len);
	busy = 0;
	if (n > 0)
		errno = saved;
	return tls_result(ssl, n, count);
}

static void tls_wrote(struct rl_conn *c, int fd, const void *buf, size_t n)
{
	struct iovec v = { (void *)buf, n };
	int saved = errno;

	busy = 1;
	rl_io_wrote(c, fd, &v, 1, n);
	busy = 0;
	errno = saved;
}

HOOK int SSL_write(void *ssl, const void *buf, int num)
{
	struct rl_conn *c;
	int fd, r;

	tls_resolve();
	if (!tls.write) {
		errno = ENOSYS;
		return -1;
	}
	if (tls_writing(ssl, &c, &fd) < 0)
		return num;
	if (c && num > 0 && rl_io_inserting(c))
		return tls_inserting(ssl, c, fd, buf, (size_t)num, NULL);
	busy += c != NULL; /* its records pass the socket's hooks as they are */
	r = tls.write(ssl, buf, num);
	busy -= c != NULL;
	if (c && r > 0)
		tls_wrote(c, fd, buf, (size_t)r);
	return r;
}

HOOK int SSL_write_ex(void *ssl, const void *buf, size_t num, size_t *written)
{
	struct rl_conn *c;
	int fd, r;

	tls_resolve();
	if (!tls.write_ex) {
		errno = ENOSYS;
		return 0;
	}
	if (tls_writing(ssl, &c, &fd) < 0) {
		if (written)
			*written = num;
		return 1;
	}
	if (c && num > 0 && rl_io_inserting(c)) {
		size_t got;

		r = tls_inserting(ssl, c, fd, buf, num, &got);
		if (written)
			*written = got;
		return r;
	}
	busy += c != NULL;
	r = tls.write_ex(ssl, buf, num, written);
	busy -= c != NULL;
	if (c && r > 0 && written && *written)
		tls_wrote(c, fd, buf, *written);
	return r;
}

HOOK ssize_t SSL_sendfile(void *ssl, int in, off_t offset, size_t size,
			  int flags)
{
	struct rl_conn *c;
	int fd;

	tls_resolve();
	if (!tls.sendfile) {
		errno = ENOSYS;
		return -1;
	}
	if (tls_writing(ssl, &c, &fd) < 0)
		return (ssize_t)size;
	return wrote_file(fd, c, tls.sendfile(ssl, in, offset, size, flags));
}

HOOK int SSL_get_error(const void *ssl, int ret)
{
	int (*get_error)(const void *, int);

	tls_resolve();
	if (ssl && ssl == fake_ssl && ret <= 0)
		return fake_err;
	get_error = tls.get_error;
	if (!get_error)
		return TLS_ERROR_SSL;
	return get_error(ssl, ret); /* a jump */
}

/* The connection session `ssl` is bound to, or NULL (never binds). */
static struct rl_conn *tls_bound(const void *ssl)
{
	struct rl_fd *e;
	struct rl_conn *c;
	int fd;

	if (busy || rl_shim_phase() != RL_SHIM_ACTIVE || !tls.live)
		return NULL;
	if ((c = tls_last(ssl, &fd)))
		return c;
	if ((fd = tls_fd(ssl)) < 0 || !(e = rl_fd_get(fd)))
		return NULL;
	c = rl_conn_of(e);
	return c && c->ssl == ssl ? c : NULL;
}

/* Bytes the shim holds for the application are pending too (as FIONREAD
 * counts them on a socket): a server that reads while SSL_pending says
 * so gets them. */
static size_t tls_held(const void *ssl)
{
	struct rl_conn *c = tls_bound(ssl);

	return c ? rl_io_held(c) : 0;
}

HOOK int SSL_pending(const void *ssl)
{
	tls_resolve();
	if (!tls.pending)
		return 0;
	return tls.pending(ssl) + (int)tls_held(ssl);
}

HOOK int SSL_has_pending(const void *ssl)
{
	tls_resolve();
	if (!tls.has_pending)
		return 0;
	return tls.has_pending(ssl) || tls_held(ssl);
}

/*
 * A connection the shim answered ended as if the client had closed it: its
 * reads said SSL_ERROR_ZERO_RETURN, and the session says it received the
 * client's close_notify (Python's ssl takes ZERO_RETURN for a clean end only
 * then), whatever the shim's own close_notify did to it.
 */
#define TLS_RECEIVED_SHUTDOWN 2

HOOK int SSL_get_shutdown(const void *ssl)
{
	struct rl_conn *c;

	tls_resolve();
	if (!tls.get_shutdown)
		return 0;
	c = tls_bound(ssl);
	if (c && c->state == RL_CONN_DONE)
		return TLS_RECEIVED_SHUTDOWN;
	return tls.get_shutdown(ssl);
}

HOOK int SSL_shutdown(void *ssl)
{
	tls_resolve();
	fake_ssl = NULL;
	if (!tls.shutdown) {
		errno = ENOSYS;
		return -1;
	}
	return tls.shutdown(ssl);
}

HOOK void SSL_free(void *ssl)
{
	tls_resolve();
	fake_ssl = NULL;
	if (ssl == last_ssl)
		last_ssl = NULL;
	if (ssl && !busy && rl_shim_phase() == RL_SHIM_ACTIVE && tls.live) {
		int saved = errno, fd = tls_fd(ssl);

		if (fd >= 0) {
			busy = 1;
			rl_io_tls_free(fd, ssl);
			busy = 0;
		}
		errno = saved;
	}
	if (tls.free)
		tls.free(ssl);
}

/* A handshake: the socket it reads is its session's (tls_handshake_read),
 * for a session over a BIO of the application's own. */
static int tls_handshake(void *ssl, int (*real)(void *))
{
	void *was = hs_ssl;
	int r;

	fake_ssl = NULL;
	hs_ssl = tls.live && tls.ex_fd >= 0 ? ssl : NULL;
	r = real(ssl);
	hs_ssl = was;
	return r;
}

HOOK int SSL_accept(void *ssl)
{
	tls_resolve();
	if (!tls.accept) {
		errno = ENOSYS;
		return -1;
	}
	return tls_handshake(ssl, tls.accept);
}

HOOK int SSL_do_handshake(void *ssl)
{
	tls_resolve();
	if (!tls.do_handshake) {
		errno = ENOSYS;
		return -1;
	}
	return tls_handshake(ssl, tls.do_handshake);
}

/*
 * Early data (TLS 1.3 0-RTT) is read with SSL_read_early_data before the
 * handshake ends: on a framed connection the shim says there is none, so
 * libssl rejects it and the client sends its request again after the
 * handshake, through SSL_read.
 */
HOOK int SSL_read_early_data(void *ssl, void *buf, size_t num, size_t *readbytes)
{
	int fd;

	tls_resolve();
	if (!tls.read_early_data) {
		errno = ENOSYS;
		return 0;
	}
	if (!tls_tracked(ssl, &fd))
		return tls.read_early_data(ssl, buf, num, readbytes);
	if (readbytes)
		*readbytes = 0;
	return TLS_READ_EARLY_DATA_FINISH;
}

/*
 * HTTP/2 over TLS is chosen in the handshake (ALPN). Until the shim
 * frames HTTP/2, a framed connection is kept on HTTP/1.1: the server's own
 * selection callback is wrapped and shown the client's list without "h2"
 * (the server keeps its own notion of what it chose: lighttpd speaks
 * HTTP/2 on an h2 its callback picked, whatever the handshake then said).
 * A client that offered only h2 gets no protocol, which is HTTP/1.1; one
 * that speaks HTTP/2 anyway sends the preface, which the framer refuses as
 * in cleartext.
 */
#define ALPN_SLOTS 64
#define ALPN_LIST_MAX 512 /* bytes of a client's list the shim rewrites */

static struct alpn_slot {
	void *_Atomic ctx;
	tls_alpn_cb cb;
	void *arg;
} alpn_slots[ALPN_SLOTS];

/* 1 if the length-prefixed list `in` names "h2". */
static int alpn_has_h2(const unsigned char *in, unsigned int inlen)
{
	for (unsigned i = 0; i < inlen; i += 1u + in[i])
		if (in[i] == 2 && i + 3 <= inlen && !memcmp(in + i + 1, "h2", 2))
			return 1;
	return 0;
}

static int alpn_select(void *ssl, const unsigned char **out,
		       unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	struct alpn_slot *s = arg;
	unsigned char list[ALPN_LIST_MAX];
	unsigned int n = 0;
	int r, fd, keep, was;

	/* The handshake may run inside a framed SSL_read (lighttpd drives
	 * it so): the guard is then already set, and stays so. */
	if (inlen > sizeof(list) || !alpn_has_h2(in, inlen) ||
	    rl_shim_phase() != RL_SHIM_ACTIVE || (fd = tls_fd(ssl)) < 0)
		return s->cb(ssl, out, outlen, in, inlen, s->arg);
	was = busy;
	busy = 1;
	keep = rl_io_tls_no_h2(fd);
	busy = was;
	if (!keep)
		return s->cb(ssl, out, outlen, in, inlen, s->arg);
	for (unsigned i = 0; i < inlen && i + 1u + in[i] <= inlen; i += 1u + in[i])
		if (!(in[i] == 2 && !memcmp(in + i + 1, "h2", 2))) {
			memcpy(list + n, in + i, 1u + in[i]);
			n += 1u + in[i];
		}
	if (n == 0)
		return TLS_EXT_ERR_NOACK;
	r = s->cb(ssl, out, outlen, list, n, s->arg);
	if (r != TLS_EXT_ERR_OK)
		return r;
	if (*outlen == 2 && !memcmp(*out, "h2", 2))
		return TLS_EXT_ERR_NOACK; /* chosen from its own list */
	if (*out >= list && *out < list + n) {
		/* libssl copies the choice after this returns: point into
		 * the client's list, not this frame. */
		for (unsigned i = 0; i < inlen; i += 1u + in[i])
			if (in[i] == *outlen && i + 1u + in[i] <= inlen &&
			    !memcmp(in + i + 1, *out, *outlen)) {
				*out = in + i + 1;
				return r;
			}
		return TLS_EXT_ERR_NOACK;
	}
	return r;
}

HOOK void SSL_CTX_set_alpn_select_cb(void *ctx, tls_alpn_cb cb, void *arg)
{
	struct alpn_slot *s = NULL;

	tls_resolve();
	if (!tls.ctx_set_alpn_select_cb)
		return;
	if (cb) {
		/* The context's slot, or a free one (never given back: a
		 * context lives as long as the server's configuration). */
		for (unsigned i = 0; i < ALPN_SLOTS && !s; i++) {
			void *cur = atomic_load_explicit(&alpn_slots[i].ctx,
							 memory_order_acquire);
			void *none = NULL;

			if (cur == ctx ||
			    (!cur && atomic_compare_exchange_strong(&alpn_slots[i].ctx,
								    &none, ctx)))
				s = &alpn_slots[i];
		}
	}
	if (!s) {
		tls.ctx_set_alpn_select_cb(ctx, cb, arg);
		return;
	}
	s->cb = cb;
	s->arg = arg;
	tls.ctx_set_alpn_select_cb(ctx, alpn_select, s);
}
