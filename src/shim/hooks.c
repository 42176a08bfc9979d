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

/* The connection an fd's reads and writes go through, or NULL to pass:
 * shim not active, the guard set, or an fd that is not framed. Adopts an
 * fd it has never seen. */
static struct rl_conn *tracked(int fd)
{
	struct rl_fd *e;

	if (busy || rl_shim_phase() != RL_SHIM_ACTIVE)
		return NULL;
	e = rl_fd_get(fd);
	if (!e)
		return NULL;
	if (e->kind == RL_FD_UNKNOWN) {
		int saved = errno;

		busy = 1;
		rl_io_adopt(fd, e);
		busy = 0;
		errno = saved;
	}
	return e->kind == RL_FD_CONN ? rl_conn_of(e) : NULL;
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

static ssize_t framed_read(struct rl_conn *conn, struct call *c)
{
	struct iovec one = { c->buf, c->len };
	struct rl_read r = { c->fd, &one, 1, c->flags, real_call, c, NULL };
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
static ssize_t do_read(int fd, void *buf, size_t len)
{
	struct rl_conn *conn;
	struct call c = { .fd = fd, .kind = CALL_READ, .buf = buf, .len = len };

	resolve();
	conn = tracked(fd);
	return conn ? framed_read(conn, &c) : rl_sys.read(fd, buf, len);
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
	struct call c = { .fd = fd, .kind = CALL_RECV, .buf = buf, .len = len,
			  .flags = flags };

	resolve();
	conn = tracked(fd);
	return conn ? framed_read(conn, &c) : rl_sys.recv(fd, buf, len, flags);
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

HOOK int close(int fd)
{
	struct rl_fd *e;

	resolve();
	/* Never classified (a file nginx served, say): nothing to forget. */
	if (watching() && (e = rl_fd_get(fd)) && e->kind != RL_FD_UNKNOWN) {
		int saved = errno;

		busy = 1;
		rl_io_close(fd);
		busy = 0;
		errno = saved;
	}
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
	if (r == 0 && req == FIONREAD && arg && (conn = tracked(fd))) {
		int saved = errno;

		*(int *)arg += (int)rl_io_held(conn);
		errno = saved;
	}
	return r;
}

/* ---- the write family: the answers ---------------------------------------------- */

/* The connection a write goes to (rl_io_written), or NULL to pass. */
static struct rl_conn *written(int fd)
{
	if (busy || rl_shim_phase() != RL_SHIM_ACTIVE)
		return NULL;
	return rl_io_written(fd);
}

/* After the real write: `r` bytes of `iov` went out. */
static ssize_t wrote(int fd, struct rl_conn *conn, const struct iovec *iov,
		     int iovcnt, ssize_t r)
{
	if (conn && r > 0) {
		int saved = errno;

		busy = 1;
		rl_io_wrote(conn, fd, iov, iovcnt, (size_t)r);
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
static struct rl_conn *answering(int fd, const struct iovec *iov, int iovcnt,
				 int *swallow)
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

HOOK ssize_t write(int fd, const void *buf, size_t len)
{
	struct iovec v = { (void *)buf, len };
	int swallow;
	struct rl_conn *conn = answering(fd, &v, 1, &swallow);

	if (swallow)
		return (ssize_t)len;
	if (INSERTING(conn, &v, 1))
		return sending(fd, conn, &v, 1, 0, NULL);
	return wrote(fd, conn, &v, 1, rl_sys.write(fd, buf, len));
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
	r = real_sendfile(out, in, off, count);
	if (conn && r > 0) {
		int saved = errno;

		busy = 1;
		rl_io_wrote_file(conn, out, (size_t)r);
		busy = 0;
		errno = saved;
	}
	return r;
}

HOOK ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	return do_sendfile(out, in, off, count);
}

HOOK ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return do_sendfile(out, in, off, count);
}
