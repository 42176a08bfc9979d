/* SPDX-License-Identifier: MIT */
/*
 * test_accept.c - what the accept hooks do, without LD_PRELOAD: the
 * shim's phases at the first accept and the first guarded one, a
 * connection refused at accept and what the application's accept says
 * then, the peer copied out as accept(2) would; and the fd table across
 * fd passing (SCM_RIGHTS), close_range and the writes the shim follows.
 *
 * The phases only ever move on in a process, so the tests run in order.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accept.h"
#include "io.h"
#include "shim.h"

static char seg[64], conf_path[128];
static int guarded = -1, unguarded = -1;

/* A listener on a free loopback port. */
static int listener(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(fd, 64) || getsockname(fd, (struct sockaddr *)&a, &al))
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static int setup_all(void **state)
{
	uint16_t gport, uport;
	FILE *f;

	(void)state;
	guarded = listener(&gport);
	unguarded = listener(&uport);
	if (guarded < 0 || unguarded < 0)
		return -1;
	snprintf(seg, sizeof(seg), "rlshim-test-accept-%d", (int)getpid());
	snprintf(conf_path, sizeof(conf_path), "/tmp/%s.conf", seg);
	rl_table_unlink(seg);
	f = fopen(conf_path, "w");
	if (!f)
		return -1;
	/* One connection per client an hour: the second is refused. */
	fprintf(f, "[global]\nports = %u\nshm = %s\nlog_level = error\n"
		"[limit:conn]\nmatch = accept\nrate = 1/h\nkey = ip\n",
		gport, seg);
	fclose(f);
	setenv("RLSHIM_CONFIG", conf_path, 1);
	return 0;
}

static int teardown_all(void **state)
{
	(void)state;
	close(guarded);
	close(unguarded);
	unlink(conf_path);
	rl_table_unlink(seg);
	return 0;
}

/* A client connected to `lfd`; the real accept's fd and peer in *fd, *ss. */
static int connect_to(int lfd, int *fd, struct sockaddr_storage *ss,
		      socklen_t *sl)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	int c = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(c >= 0);
	getsockname(lfd, (struct sockaddr *)&a, &al);
	assert_int_equal(connect(c, (struct sockaddr *)&a, al), 0);
	if (fd) {
		*sl = sizeof(*ss);
		*fd = accept(lfd, (struct sockaddr *)ss, sl);
		assert_true(*fd >= 0);
	}
	return c;
}

/* A client connects to `lfd` (its socket in *client), the real accept
 * takes the connection (*fd), and rl_accept_take decides: returns what it
 * returned. */
static int take(int lfd, int *fd, int *client, int *refused)
{
	struct sockaddr_storage ss;
	socklen_t sl;

	*client = connect_to(lfd, fd, &ss, &sl);
	return rl_accept_take(&rl_sys, lfd, *fd, (struct sockaddr *)&ss, sl,
			      refused);
}

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* ---- the peer copied out ---------------------------------------------------------- */

static void test_copy_peer(void **state)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	char out[sizeof(struct sockaddr_in)];
	socklen_t alen;

	(void)state;
	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	in->sin_port = htons(4321);
	in->sin_addr.s_addr = htonl(0x7f000001);
	/* Truncated to what the application has room for, *alen the real
	 * length. */
	memset(out, 0x55, sizeof(out));
	alen = 4;
	rl_accept_copy_peer((struct sockaddr *)out, &alen, &ss, sizeof(*in));
	assert_int_equal(alen, sizeof(*in));
	assert_memory_equal(out, &ss, 4);
	assert_int_equal((unsigned char)out[4], 0x55);
	/* Whole. */
	alen = sizeof(out);
	rl_accept_copy_peer((struct sockaddr *)out, &alen, &ss, sizeof(*in));
	assert_int_equal(alen, sizeof(*in));
	assert_memory_equal(out, &ss, sizeof(*in));
	/* No buffer: only the length. */
	alen = 0;
	rl_accept_copy_peer(NULL, &alen, &ss, sizeof(*in));
	assert_int_equal(alen, sizeof(*in));
	rl_accept_copy_peer(NULL, NULL, &ss, sizeof(*in));
}

/* ---- accepting again after a refusal ---------------------------------------------- */

static int fake_fl;

static int fake_getfl(int fd)
{
	(void)fd;
	return fake_fl;
}

static void test_again(void **state)
{
	struct rl_sys sys = rl_sys;
	int c;

	(void)state;
	sys.getfl = fake_getfl;
	/* Nonblocking: again, up to 64 in a row, then EAGAIN. */
	fake_fl = O_RDWR | O_NONBLOCK;
	assert_int_equal(rl_accept_again(&sys, guarded, 1), 0);
	assert_int_equal(rl_accept_again(&sys, guarded, 63), 0);
	assert_int_equal(rl_accept_again(&sys, guarded, 64), EAGAIN);
	/* Blocking, nothing waiting: never block in here. */
	fake_fl = O_RDWR;
	assert_int_equal(rl_accept_again(&sys, guarded, 1), ECONNABORTED);
	/* Blocking, a connection waiting: again, up to 64. */
	c = connect_to(guarded, NULL, NULL, NULL);
	assert_int_equal(rl_accept_again(&sys, guarded, 1), 0);
	assert_int_equal(rl_accept_again(&sys, guarded, 64), ECONNABORTED);
	/* Accepted by nobody: take it off the queue. */
	close(accept(guarded, NULL, NULL));
	close(c);
}

/* ---- the phases -------------------------------------------------------------------- */

static void test_first_accept_configures(void **state)
{
	int fd, c, refused = 0;

	(void)state;
	assert_int_equal(rl_shim_phase(), RL_SHIM_COLD);
	assert_int_equal(take(unguarded, &fd, &c, &refused), RL_ACCEPT_GIVE);
	/* The file is read, nothing opened: not a guarded port. */
	assert_int_equal(rl_shim_phase(), RL_SHIM_CONFIGURED);
	assert_int_equal(rl_fd_get(unguarded)->kind, RL_FD_LISTEN);
	assert_int_equal(rl_fd_get(unguarded)->guarded, 0);
	assert_int_equal(rl_fd_get(fd)->kind, RL_FD_UNKNOWN);
	assert_int_equal(refused, 0);
	close(fd);
	close(c);
}

static void test_first_guarded_accept_activates(void **state)
{
	int fd, c, refused = 0;

	(void)state;
	assert_int_equal(take(guarded, &fd, &c, &refused), RL_ACCEPT_GIVE);
	assert_int_equal(rl_shim_phase(), RL_SHIM_ACTIVE);
	assert_int_equal(rl_fd_get(guarded)->guarded, 1);
	assert_int_equal(rl_fd_get(fd)->kind, RL_FD_CONN);
	assert_non_null(rl_conn_of(rl_fd_get(fd)));
	rl_io_close(fd);
	close(fd);
	close(c);
}

/* The client's one connection an hour is used: the next are refused,
 * closed, and the application's accept says what accept(2) would. */
static void test_refused_blocking(void **state)
{
	int fd, c, refused = 0;

	(void)state;
	assert_int_equal(take(guarded, &fd, &c, &refused), ECONNABORTED);
	assert_int_equal(refused, 1);
	assert_false(is_open(fd));
	close(c);
}

static void test_refused_blocking_another_waits(void **state)
{
	int fd, c, c2, refused = 0;

	(void)state;
	c2 = connect_to(guarded, NULL, NULL, NULL);
	assert_int_equal(take(guarded, &fd, &c, &refused), RL_ACCEPT_AGAIN);
	assert_false(is_open(fd));
	close(accept(guarded, NULL, NULL));
	close(c);
	close(c2);
}

static void test_refused_nonblocking(void **state)
{
	int fd, c, refused = 0;

	(void)state;
	fcntl(guarded, F_SETFL, O_NONBLOCK);
	assert_int_equal(take(guarded, &fd, &c, &refused), RL_ACCEPT_AGAIN);
	assert_int_equal(refused, 1);
	assert_false(is_open(fd));
	close(c);
	/* The 64th in a row: EAGAIN, the server goes back to its loop. */
	refused = 63;
	assert_int_equal(take(guarded, &fd, &c, &refused), EAGAIN);
	assert_int_equal(refused, 64);
	close(c);
	fcntl(guarded, F_SETFL, 0);
}

/* ---- the fd table across fd passing, close_range, writes ------------------------- */

/* A socket of `kind` at `fd` as far as the table knows (a pool
 * connection for RL_FD_CONN). */
static void mark(int fd, int kind)
{
	struct rl_fd *e = rl_fd_get(fd);

	assert_non_null(e);
	if (e->kind != RL_FD_UNKNOWN)
		rl_fd_forget(e);
	if (kind == RL_FD_CONN)
		assert_non_null(rl_conn_new(e));
	else
		e->kind = (uint8_t)kind;
}

static void test_passed_fds_forgotten(void **state)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	int sp[2], got[2], one = 'x';
	struct iovec v = { &one, 1 };
	struct msghdr msg = { .msg_iov = &v, .msg_iovlen = 1,
			      .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	int keep;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	/* Two fds handed over, as a master hands sockets to its workers. */
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
	memcpy(CMSG_DATA(cm), (int[]){ guarded, unguarded }, 2 * sizeof(int));
	assert_int_equal(sendmsg(sp[0], &msg, 0), 1);
	memset(u.buf, 0, sizeof(u.buf));
	msg.msg_controllen = sizeof(u.buf);
	assert_int_equal(recvmsg(sp[1], &msg, 0), 1);
	cm = CMSG_FIRSTHDR(&msg);
	assert_non_null(cm);
	memcpy(got, CMSG_DATA(cm), sizeof(got));
	/* The table had other sockets at those numbers once. */
	mark(got[0], RL_FD_CONN);
	mark(got[1], RL_FD_IGNORED);
	keep = sp[0];
	mark(keep, RL_FD_IGNORED);
	rl_io_passed(&msg);
	assert_int_equal(rl_fd_get(got[0])->kind, RL_FD_UNKNOWN);
	assert_int_equal(rl_fd_get(got[1])->kind, RL_FD_UNKNOWN);
	assert_int_equal(rl_fd_get(keep)->kind, RL_FD_IGNORED);
	/* Only SCM_RIGHTS: another control message names no fds. */
	cm->cmsg_type = SCM_CREDENTIALS;
	mark(got[0], RL_FD_IGNORED);
	rl_io_passed(&msg);
	assert_int_equal(rl_fd_get(got[0])->kind, RL_FD_IGNORED);
	rl_fd_forget(rl_fd_get(got[0]));
	rl_fd_forget(rl_fd_get(keep));
	close(got[0]);
	close(got[1]);
	close(sp[0]);
	close(sp[1]);
}

static void test_close_range(void **state)
{
	int fds[4];

	(void)state;
	for (int i = 0; i < 4; i++) {
		fds[i] = dup(guarded);
		mark(fds[i], RL_FD_CONN);
	}
	/* The middle two, in whatever order dup gave the numbers. */
	{
		int lo = fds[1] < fds[2] ? fds[1] : fds[2];
		int hi = fds[1] < fds[2] ? fds[2] : fds[1];
		int inside = 0;

		rl_io_close_range((unsigned)lo, (unsigned)hi);
		for (int i = 0; i < 4; i++) {
			int in = fds[i] >= lo && fds[i] <= hi;

			inside += in;
			assert_int_equal(rl_fd_get(fds[i])->kind,
					 in ? RL_FD_UNKNOWN : RL_FD_CONN);
		}
		assert_true(inside >= 2);
	}
	/* closefrom: everything from the lowest up, past the highest seen. */
	rl_io_close_range((unsigned)fds[0] < (unsigned)fds[3] ? (unsigned)fds[0]
							      : (unsigned)fds[3],
			  ~0u);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(rl_fd_get(fds[i])->kind, RL_FD_UNKNOWN);
		close(fds[i]);
	}
}

static void test_written(void **state)
{
	int fd = dup(guarded);
	struct rl_conn *c;

	(void)state;
	mark(fd, RL_FD_IGNORED);
	assert_null(rl_io_written(fd));
	assert_null(rl_io_written(-1));
	mark(fd, RL_FD_CONN);
	c = rl_conn_of(rl_fd_get(fd));
	/* Framing: its answers are followed. */
	assert_ptr_equal(rl_io_written(fd), c);
	assert_int_equal(rl_io_write(c, NULL, 0), 0);
	/* Not HTTP/1.x (any more): passed untouched. */
	c->state = RL_CONN_PASS;
	assert_null(rl_io_written(fd));
	/* Answers not framed: passed, ... */
	c->state = RL_CONN_HTTP;
	c->ans.broken = 1;
	assert_null(rl_io_written(fd));
	/* ... unless the shim has answered: then swallowed. */
	c->state = RL_CONN_DONE;
	assert_ptr_equal(rl_io_written(fd), c);
	assert_int_equal(rl_io_write(c, NULL, 0), 1);
	rl_fd_forget(rl_fd_get(fd));
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy_peer),
		cmocka_unit_test(test_again),
		cmocka_unit_test(test_first_accept_configures),
		cmocka_unit_test(test_first_guarded_accept_activates),
		cmocka_unit_test(test_refused_blocking),
		cmocka_unit_test(test_refused_blocking_another_waits),
		cmocka_unit_test(test_refused_nonblocking),
		cmocka_unit_test(test_passed_fds_forgotten),
		cmocka_unit_test(test_close_range),
		cmocka_unit_test(test_written),
	};

	return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
