/* SPDX-License-Identifier: MIT */
/*
 * test_io.c - the shim's read path without LD_PRELOAD: real TCP sockets on
 * loopback, the application's reads made through rl_io_read() as the hooks
 * make them, and what both ends see checked byte for byte.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io.h"

static struct rl_config *cfg;
static struct rl_table *table;
static char seg[64];
static int listener;

static int getfl(int fd)
{
	return fcntl(fd, F_GETFL);
}

static int inq(int fd)
{
	int n = 0;

	return ioctl(fd, SIOCINQ, &n) < 0 ? -1 : n;
}

/* libc's own, one by one: the place a test would put a fake. */
/*
 * A session reading through a BIO of the application's (apache's), which
 * has read records ahead from the socket into its own buffers: `recs`,
 * handed out a record a read (a peek leaves it), the socket empty, and
 * libssl's own buffer too (SSL_has_pending 0). With `blocks`, a read
 * with no record left is one that waits for the client (mod_ssl's
 * blocking read): counted in `waited`, then EAGAIN, as when apache's
 * Timeout ends the wait.
 */
static struct {
	const char *recs[4];
	unsigned i;
	size_t off;
	int blocks;
	unsigned waited;
} app_bio;

static ssize_t app_bio_read(void *buf, size_t len, int peek)
{
	const char *r = app_bio.recs[app_bio.i];
	size_t n;

	if (!r) {
		app_bio.waited += app_bio.blocks;
		errno = EAGAIN; /* its BIO's non-blocking read: nothing */
		return -1;
	}
	n = strlen(r) - app_bio.off;
	if (n > len)
		n = len;
	memcpy(buf, r + app_bio.off, n);
	if (!peek) {
		app_bio.off += n;
		if (!r[app_bio.off]) {
			app_bio.i++;
			app_bio.off = 0;
		}
	}
	return (ssize_t)n;
}

static int app_bio_session; /* its SSL* */

/* A TLS session that is its socket (the session is the int holding the
 * fd): its plaintext is what the client sends, its writes go out as they
 * are, nothing is ever buffered in it. */
static ssize_t plain_tls_read(void *ssl, void *buf, size_t len, int peek)
{
	if (ssl == &app_bio_session)
		return app_bio_read(buf, len, peek);
	return recv(*(int *)ssl, buf, len, MSG_DONTWAIT | (peek ? MSG_PEEK : 0));
}

static ssize_t plain_tls_write(void *ssl, const void *buf, size_t len)
{
	return send(*(int *)ssl, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void plain_tls_close(void *ssl)
{
	(void)ssl;
}

static int plain_tls_pending(void *ssl)
{
	(void)ssl;
	return 0;
}

static const struct rl_sys sys = {
	.read = read, .write = write, .close = close, .recv = recv,
	.send = send, .getfl = getfl, .inq = inq,
	.tls_read = plain_tls_read, .tls_write = plain_tls_write,
	.tls_close = plain_tls_close, .tls_pending = plain_tls_pending,
};

static const char conf[] =
	"[global]\n"
	"trusted_proxies = 10.9.0.0/16\n"
	"[limit:sms]\n"
	"match = POST /sms\n"
	"rate = 2/m\n"
	"[limit:all]\n"
	"match = *\n"
	"rate = 1000/m\n";

static int setup_all(void **state)
{
	struct rl_err err;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	(void)state;
	snprintf(seg, sizeof(seg), "rlshim-test-io-%d", (int)getpid());
	rl_table_unlink(seg);
	if (rl_config_parse(conf, "t.conf", &cfg, &err) ||
	    rl_table_open(seg, 1024, RL_TABLE_CREATE, &table, NULL) ||
	    rl_io_start(&sys, cfg, table, &err))
		return -1;
	listener = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(listener, (struct sockaddr *)&a, sizeof(a)) || listen(listener, 64))
		return -1;
	return 0;
}

static int teardown_all(void **state)
{
	(void)state;
	close(listener);
	rl_table_unlink(seg);
	return 0;
}

/* A connected pair: `client` (the test's) and the accepted fd, tracked as
 * the hooks track it. */
struct pair {
	int client;
	int fd;
	struct rl_conn *conn;
};

/* `rcvbuf`: the client's SO_RCVBUF (0: the default), set before it
 * connects so that its window is that small. */
static void pair_open_rcv(struct pair *p, int rcvbuf)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	struct sockaddr_storage peer;
	socklen_t pl = sizeof(peer);
	int one = 1;

	getsockname(listener, (struct sockaddr *)&a, &al);
	p->client = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(p->client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (rcvbuf)
		setsockopt(p->client, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			   sizeof(rcvbuf));
	assert_int_equal(connect(p->client, (struct sockaddr *)&a, al), 0);
	p->fd = accept(listener, (struct sockaddr *)&peer, &pl);
	assert_true(p->fd >= 0);
	assert_int_equal(rl_io_listener(listener), 1);
	assert_int_equal(rl_io_accepted(listener, p->fd, (struct sockaddr *)&peer, pl), 1);
	p->conn = rl_conn_of(rl_fd_get(p->fd));
	assert_non_null(p->conn);
}

static void pair_open(struct pair *p)
{
	pair_open_rcv(p, 0);
}

static void pair_close(struct pair *p)
{
	rl_io_close(p->fd);
	close(p->fd);
	close(p->client);
}

static void put(struct pair *p, const char *s)
{
	assert_int_equal(send(p->client, s, strlen(s), 0), (ssize_t)strlen(s));
	usleep(20000); /* let it arrive: the reads below must see all of it */
}

/* The application's read: read(2) into `buf`, through the shim. */
struct call {
	int fd;
	void *buf;
	size_t len;
	int flags;
};

static ssize_t do_recv(void *ctx)
{
	struct call *c = ctx;

	return recv(c->fd, c->buf, c->len, c->flags);
}

static ssize_t app_read(struct pair *p, void *buf, size_t len, int flags)
{
	struct call c = { p->fd, buf, len, flags };
	struct iovec v = { buf, len };
	struct rl_read r = { p->fd, &v, 1, flags, do_recv, &c, NULL, NULL };

	return rl_io_read(p->conn, &r);
}

/* What the client got back, without waiting for more than `ms`. */
static size_t client_got(struct pair *p, char *buf, size_t len, int ms)
{
	size_t n = 0;
	struct pollfd pf = { p->client, POLLIN, 0 };

	while (n < len && poll(&pf, 1, ms) > 0) {
		ssize_t k = recv(p->client, buf + n, len - n, 0);

		if (k <= 0)
			break;
		n += (size_t)k;
	}
	buf[n < len ? n : len - 1] = '\0';
	return n;
}

static const char sms[] = "POST /sms HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";

/* ---- tests ---------------------------------------------------------------------- */

/* Allowed requests reach the application unchanged, in place. */
static void test_allowed_in_place(void **state)
{
	struct pair p;
	char buf[4096];
	ssize_t n;

	(void)state;
	pair_open(&p);
	put(&p, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
	n = app_read(&p, buf, sizeof(buf), 0);
	assert_int_equal(n, 47);
	assert_memory_equal(buf, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n\r\n", 47);
	assert_int_equal(p.conn->state, RL_CONN_HTTP);
	assert_null(p.conn->hold);
	pair_close(&p);
}

/* A denied request that comes first: answered at once, EOF to the app,
 * later writes swallowed. */
static void test_denied_first(void **state)
{
	struct pair p;
	char buf[4096];
	char late[] = "late";
	struct iovec w = { late, 4 };
	int i;

	(void)state;
	for (i = 0; i < 3; i++) {
		pair_open(&p);
		put(&p, sms);
		if (i < 2) {
			assert_int_equal(app_read(&p, buf, sizeof(buf), 0),
					 (ssize_t)strlen(sms));
			pair_close(&p);
		}
	}
	errno = 1234;
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	assert_int_equal(errno, 1234); /* preserved */
	assert_int_equal(p.conn->state, RL_CONN_DONE);
	assert_int_equal(rl_io_write(p.conn, &w, 1), 1);
	client_got(&p, buf, sizeof(buf), 200);
	assert_non_null(strstr(buf, "HTTP/1.1 429 Too Many Requests\r\n"));
	assert_non_null(strstr(buf, "RateLimit-Limit: 2\r\n"));
	assert_null(strstr(buf, "late"));
	/* Reads after the answer stay at EOF. */
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	pair_close(&p);
}

/* Pipelined: the allowed ones go first, the 429 at the next read. */
static void test_denied_after_allowed(void **state)
{
	struct pair p;
	char buf[4096], all[3 * sizeof(sms)];
	char peek;

	(void)state;
	snprintf(all, sizeof(all), "%s%s%s", "GET /x HTTP/1.1\r\n\r\n",
		 "GET /y HTTP/1.1\r\n\r\n", sms);
	/* test_denied_first spent this client's sms budget (2 a minute). */
	pair_open(&p);
	put(&p, all);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 38);
	assert_int_equal(p.conn->state, RL_CONN_DENY);
	client_got(&p, buf, sizeof(buf), 50);
	assert_int_equal(buf[0], '\0'); /* nothing answered yet */
	/* nginx-style peek while the answer is due: "still there". */
	assert_int_equal(app_read(&p, &peek, 1, MSG_PEEK), -1);
	assert_int_equal(errno, EAGAIN);
	/* The application answers its two, then reads again. */
	send(p.fd, "A1A2", 4, 0);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	client_got(&p, buf, sizeof(buf), 200);
	assert_memory_equal(buf, "A1A2HTTP/1.1 429", 16);
	pair_close(&p);
}

/* The same with a nonblocking server whose answers the write hooks see:
 * the 429 goes right after the answer to the last request before it, and
 * reads meanwhile find nothing (the denied request's bytes are dropped). */
static void app_write(struct pair *p, const char *s)
{
	struct iovec v = { (void *)s, strlen(s) };
	ssize_t n = send(p->fd, s, strlen(s), 0);

	assert_int_equal(n, (ssize_t)strlen(s));
	rl_io_wrote(p->conn, p->fd, &v, 1, (size_t)n);
}

static void test_denied_waits_for_answers(void **state)
{
	static const char a1[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nA1";
	struct pair p;
	char buf[4096], all[3 * sizeof(sms)];

	(void)state;
	snprintf(all, sizeof(all), "%s%s%s", "GET /x HTTP/1.1\r\n\r\n",
		 "HEAD /y HTTP/1.1\r\n\r\n", sms);
	pair_open(&p);
	fcntl(p.fd, F_SETFL, O_NONBLOCK);
	put(&p, all);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 39);
	assert_int_equal(p.conn->state, RL_CONN_DENY);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), -1);
	assert_int_equal(errno, EAGAIN);
	/* The first answer, its head and body in two writes. */
	app_write(&p, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n");
	app_write(&p, "A1");
	assert_int_equal(p.conn->state, RL_CONN_DENY);
	/* The answer to HEAD has no body, whatever its Content-Length. */
	app_write(&p, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n");
	assert_int_equal(p.conn->state, RL_CONN_DONE);
	client_got(&p, buf, sizeof(buf), 200);
	assert_memory_equal(buf, a1, sizeof(a1) - 1);
	assert_non_null(strstr(buf, "Content-Length: 9\r\n\r\nHTTP/1.1 429"));
	/* It lingers: end of file once the client has closed its side. */
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), -1);
	assert_int_equal(errno, EAGAIN);
	shutdown(p.client, SHUT_WR);
	usleep(20000);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	pair_close(&p);
}

/* Only the answer to that very request hands a connection over. */
static void test_switch_on_its_answer(void **state)
{
	static const char two[] = "GET /a HTTP/1.1\r\n\r\nCONNECT /b HTTP/1.1\r\n\r\n";
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	struct pair p;
	char buf[4096];

	(void)state;
	pair_open(&p);
	put(&p, two);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), (ssize_t)strlen(two));
	app_write(&p, ok); /* GET /a's: nothing changes */
	assert_int_equal(p.conn->http.tunnel, 0);
	put(&p, "GET /c HTTP/1.1\r\n\r\n");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 19);
	app_write(&p, ok); /* the CONNECT's: a tunnel */
	assert_int_equal(p.conn->http.tunnel, 1);
	assert_int_equal(p.conn->state, RL_CONN_HTTP);
	/* HTTP/1.x in it is still framed (and counted) ... */
	put(&p, "GET /d HTTP/1.1\r\n\r\n");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 19);
	assert_int_equal(p.conn->http.requests, 4);
	pair_close(&p);

	/* ... and TLS in a tunnel passes. */
	pair_open(&p);
	put(&p, "CONNECT h:443 HTTP/1.1\r\n\r\n");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 26);
	app_write(&p, "HTTP/1.1 200 Connection established\r\n\r\n");
	assert_int_equal(send(p.client, "\x16\x03\x01\x00\x01x", 6, 0), 6);
	usleep(20000);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 6);
	assert_int_equal(p.conn->state, RL_CONN_PASS);
	pair_close(&p);

	/* A 101 to a WebSocket upgrade: passed, after its answer only. */
	pair_open(&p);
	put(&p, "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
	assert_true(app_read(&p, buf, sizeof(buf), 0) > 0);
	app_write(&p, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n");
	assert_int_equal(p.conn->state, RL_CONN_PASS);
	pair_close(&p);
}

/* HTTP/2: prior knowledge refused the HTTP/2 way; an h2c offer blanked. */
static void test_http2(void **state)
{
	static const char up[] = "GET /u HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\n"
				 "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n";
	struct pair p;
	char buf[4096];
	ssize_t n;

	(void)state;
	pair_open(&p);
	put(&p, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	n = (ssize_t)client_got(&p, buf, sizeof(buf), 200);
	assert_int_equal(n, 26);
	assert_memory_equal(buf, "\0\0\0\4\0\0\0\0\0\0\0\x08\x07", 13);
	assert_int_equal(buf[25], 0x0d); /* HTTP_1_1_REQUIRED */
	pair_close(&p);

	pair_open(&p);
	put(&p, up);
	n = app_read(&p, buf, sizeof(buf) - 1, 0);
	assert_int_equal(n, (ssize_t)strlen(up));
	buf[n] = '\0';
	assert_non_null(strstr(buf, "\r\nUpgrade:    \r\n"));
	assert_int_equal(p.conn->upgrade_wait, 0);
	pair_close(&p);

	/* The same offer past the end of a small first read (in the part of
	 * the head still in the socket when it is decided), and in one that
	 * ends right before it: blanked all the same. */
	for (size_t first = 20; first < 90; first += 7) {
		size_t got = 0;

		pair_open(&p);
		put(&p, up);
		while (got < strlen(up)) {
			n = app_read(&p, buf + got, got ? 50 : first, 0);
			assert_true(n > 0);
			got += (size_t)n;
		}
		assert_int_equal(got, strlen(up));
		buf[got] = '\0';
		assert_non_null(strstr(buf, "\r\nUpgrade:    \r\n"));
		pair_close(&p);
	}
}

/* After a request that ends the connection, nothing more reaches the
 * application or is counted: a nonblocking read says EAGAIN (the bytes
 * are dropped, nothing is left to wake a level-triggered server), a
 * blocking one waits for more as its own would, and sees the end. */
static void test_after_last_request(void **state)
{
	static const char two[] = "GET /a HTTP/1.0\r\n\r\nGET /b HTTP/1.0\r\n\r\n";
	struct pair p;
	char buf[4096];
	int kernel = -1;

	(void)state;
	pair_open(&p);
	fcntl(p.fd, F_SETFL, O_NONBLOCK);
	put(&p, two);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 19);
	assert_memory_equal(buf, "GET /a HTTP/1.0\r\n\r\n", 19);
	assert_int_equal(p.conn->http.requests, 1);
	put(&p, "GET /c HTTP/1.1\r\n\r\n");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(ioctl(p.fd, FIONREAD, &kernel), 0);
	assert_int_equal(kernel, 0);
	assert_int_equal(p.conn->http.requests, 1);
	shutdown(p.client, SHUT_WR);
	usleep(20000);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	pair_close(&p);

	/* Blocking: the read waits, drops, and ends with the client. */
	pair_open(&p);
	put(&p, "POST /a HTTP/1.1\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhiGET /x HTTP/1.1\r\n\r\n");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 60);
	shutdown(p.client, SHUT_WR);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	assert_int_equal(p.conn->http.requests, 1);
	pair_close(&p);
}

/* FIONREAD counts what the shim holds for the application. */
static void test_fionread_counts_held(void **state)
{
	struct pair p;
	char buf[64];

	(void)state;
	pair_open(&p);
	fcntl(p.fd, F_SETFL, O_NONBLOCK);
	put(&p, "GET /held HTTP/1.1\r\nX: 1");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), -1);
	assert_int_equal(rl_io_held(p.conn), 24);
	put(&p, "\r\n\r\n");
	assert_int_equal(app_read(&p, buf, 10, 0), 10);
	/* 14 of the head held, the tail's 4 bytes still in the socket */
	assert_int_equal(rl_io_held(p.conn), 14);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 18);
	assert_int_equal(rl_io_held(p.conn), 0);
	pair_close(&p);
}

/* A head the client stops sending in the middle of gets a 400 (it may
 * still read), and so does one that is wrong before it is complete. */
static void test_cut_and_early_refusals(void **state)
{
	struct pair p;
	char buf[4096];

	(void)state;
	pair_open(&p);
	fcntl(p.fd, F_SETFL, O_NONBLOCK);
	put(&p, "GET /half HTTP/1.1\r\nHost: x\r\n");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), -1);
	assert_int_equal(errno, EAGAIN);
	shutdown(p.client, SHUT_WR);
	usleep(20000);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	client_got(&p, buf, sizeof(buf), 200);
	assert_non_null(strstr(buf, "400 Bad Request"));
	assert_non_null(strstr(buf, "incomplete request head"));
	pair_close(&p);

	pair_open(&p);
	fcntl(p.fd, F_SETFL, O_NONBLOCK);
	put(&p, "GE, /x HTTP/1.1\r\nHost:");
	/* Answered at once; the client has not closed: it lingers. */
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(p.conn->state, RL_CONN_DONE);
	client_got(&p, buf, sizeof(buf), 200);
	assert_non_null(strstr(buf, "400 Bad Request"));
	shutdown(p.client, SHUT_WR);
	usleep(20000);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	pair_close(&p);
}

/* A chunked body found bad after its head was delivered: the application
 * gets the body up to the bad byte, then (a nonblocking read once the
 * connection no longer lingers) the client's reset once (it is not told
 * the client stopped in the middle of a chunk, which gunicorn waits on
 * forever), then the end; the client gets the 400. Blocking and
 * nonblocking, and with the head and the bad byte in one read or two. */
static void test_bad_body_resets(void **state)
{
	static const char head[] = "POST /up HTTP/1.1\r\nHost: x\r\n"
				   "Transfer-Encoding: chunked\r\n\r\n";
	static const char good[] = "5\r\nhello";
	struct pair p;
	char buf[4096];
	int split, nb;

	(void)state;
	for (split = 0; split < 2; split++)
		for (nb = 0; nb < 2; nb++) {
			size_t want = strlen(head) + strlen(good);

			pair_open(&p);
			if (nb)
				fcntl(p.fd, F_SETFL, O_NONBLOCK);
			put(&p, head);
			if (split) {
				assert_int_equal(app_read(&p, buf, sizeof(buf), 0),
						 (ssize_t)strlen(head));
				want = strlen(good);
			}
			put(&p, good);
			put(&p, "XX0\r\n\r\nGET /next HTTP/1.1\r\n\r\n");
			usleep(20000);
			assert_int_equal(app_read(&p, buf, sizeof(buf), 0),
					 (ssize_t)want);
			assert_memory_equal(buf + want - 5, "hello", 5);
			if (nb) {
				/* lingering until the client's end */
				assert_int_equal(app_read(&p, buf, sizeof(buf), 0), -1);
				assert_int_equal(errno, EAGAIN);
				shutdown(p.client, SHUT_WR);
				usleep(20000);
			}
			errno = 0;
			assert_int_equal(app_read(&p, buf, sizeof(buf), 0), -1);
			assert_int_equal(errno, ECONNRESET);
			assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
			assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
			client_got(&p, buf, sizeof(buf), 200);
			assert_non_null(strstr(buf, "400 Bad Request"));
			assert_null(strstr(buf, "/next"));
			pair_close(&p);
		}
}

/* A POST's head read by the application, then its 10-byte body by a
 * child it forks (Python's CGI child reads it from the socket it
 * inherits). */
static void cgi_child_took_body(struct pair *p, char *buf, size_t head_len)
{
	pid_t pid;
	int st;

	put(p, "POST /cgi HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789");
	assert_int_equal(app_read(p, buf, head_len, 0), (ssize_t)head_len);
	pid = fork();
	if (pid == 0) {
		char body[10];

		_exit(recv(p->fd, body, sizeof(body), MSG_WAITALL) == 10 ? 0 : 1);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A child that reads the body itself (Python's CGI child reads it from the
 * socket it inherits): the parent's next read counts it off, and the
 * request after it is framed where it is, also after the client's FIN. */
static void test_child_took_body(void **state)
{
	static const char head[] = "POST /cgi HTTP/1.1\r\nContent-Length: 10\r\n\r\n";
	struct pair p;
	char buf[4096];

	(void)state;
	pair_open(&p);
	cgi_child_took_body(&p, buf, sizeof(head) - 1);
	put(&p, "GET /after HTTP/1.1\r\n\r\n");
	shutdown(p.client, SHUT_WR);
	usleep(20000);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 23);
	assert_memory_equal(buf, "GET /after HTTP/1.1\r\n\r\n", 23);
	assert_int_equal(p.conn->http.requests, 2);
	pair_close(&p);
}

/*
 * Bytes that arrive while the shim looks whether another process read the
 * socket after a fork: between its count of bytes received and its look at
 * the queue. late_inq is the queue's look, with `late` sent by the client
 * first and waited for; one time only.
 */
static struct {
	int client;
	const char *bytes;
} late;

static int late_inq(int fd)
{
	if (late.bytes) {
		int want = inq(fd) + (int)strlen(late.bytes);

		assert_int_equal(send(late.client, late.bytes, strlen(late.bytes), 0),
				 (ssize_t)strlen(late.bytes));
		late.bytes = NULL;
		for (int i = 0; i < 2000 && inq(fd) < want; i++)
			usleep(1000);
	}
	return inq(fd);
}

static void forked(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0)
		_exit(0);
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
}

/* busybox: the server forks a child per connection, which reads the head;
 * the rest of a split head comes as it looks. The head is the
 * application's, whole (it was end of file, and the child closed on the
 * unread head with an RST). */
static void test_bytes_while_looking_after_fork(void **state)
{
	static const char head[] = "GET /books HTTP/1.1\r\nHost: x\r\n\r\n";
	struct pair p;
	char buf[4096];

	(void)state;
	pair_open(&p);
	put(&p, "GET /books HT");
	forked();
	late.client = p.client;
	late.bytes = "TP/1.1\r\nHost: x\r\n\r\n";
	rl_io.sys.inq = late_inq;
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), (ssize_t)sizeof(head) - 1);
	rl_io.sys.inq = sys.inq;
	assert_memory_equal(buf, head, sizeof(head) - 1);
	assert_int_equal(p.conn->http.requests, 1);
	pair_close(&p);
}

/* Python's CGI: the child took the body; the next request comes as the
 * parent looks. The body is counted off whole, the request after it framed
 * where it is (it was taken for the rest of the body). */
static void test_child_took_body_bytes_while_looking(void **state)
{
	static const char head[] = "POST /cgi HTTP/1.1\r\nContent-Length: 10\r\n\r\n";
	struct pair p;
	char buf[4096];

	(void)state;
	pair_open(&p);
	cgi_child_took_body(&p, buf, sizeof(head) - 1);
	late.client = p.client;
	late.bytes = "GET /after HTTP/1.1\r\n\r\n";
	rl_io.sys.inq = late_inq;
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 23);
	rl_io.sys.inq = sys.inq;
	assert_memory_equal(buf, "GET /after HTTP/1.1\r\n\r\n", 23);
	assert_int_equal(p.conn->http.requests, 2);
	pair_close(&p);
}

/*
 * A long read that has no blank line and runs past what a hold buffer
 * holds (a server reading 64 KiB at a time, a client sending 30,000 bytes
 * of one header, or of anything that starts with a token byte): the head
 * is too large already, a 400, and never more held than the hold buffer
 * has room for.
 */
static void test_long_read_past_hold(void **state)
{
	static char big[30000], buf[65536];
	static const char *starts[] = { "GET / HTTP/1.1\r\nX: ", "AAAA" };
	struct pair p;

	(void)state;
	for (size_t s = 0; s < 2; s++) {
		size_t n = strlen(starts[s]);

		memset(big, 'a', sizeof(big));
		memcpy(big, starts[s], n);
		pair_open(&p);
		fcntl(p.fd, F_SETFL, O_NONBLOCK);
		assert_int_equal(send(p.client, big, sizeof(big), 0), (ssize_t)sizeof(big));
		usleep(50000);
		assert_true(app_read(&p, buf, sizeof(buf), 0) <= 0);
		assert_true(!p.conn->hold || p.conn->hold->len <= RL_HOLD_SIZE);
		client_got(&p, buf, sizeof(buf), 200);
		assert_memory_equal(buf, "HTTP/1.1 400", 12);
		pair_close(&p);
	}
}

/*
 * A long head (past the 512 bytes the shim holds unparsed when no blank
 * line is in it) that is wrong already, and the client sends no more: the
 * 400 at once, and the application's read is end of file with its errno
 * as it was (the look for more said EAGAIN).
 */
static void test_long_bad_head_errno(void **state)
{
	static char head[2048], buf[4096];
	struct pair p;

	(void)state;
	snprintf(head, sizeof(head), "GET /a HTTP/1.1\r\nBad Line\r\nX-Pad: ");
	memset(head + strlen(head), 'a', 1500);
	pair_open(&p);
	put(&p, head);
	errno = 1234;
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	assert_int_equal(errno, 1234);
	client_got(&p, buf, sizeof(buf), 200);
	assert_memory_equal(buf, "HTTP/1.1 400", 12);
	pair_close(&p);
}

/* A head in pieces is held, never shown; a nonblocking read says EAGAIN
 * (no busy loop) and the completed head is delivered whole. */
static void test_partial_head(void **state)
{
	struct pair p;
	char buf[4096];

	(void)state;
	pair_open(&p);
	fcntl(p.fd, F_SETFL, O_NONBLOCK);
	put(&p, "GET /books HT");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), -1);
	assert_int_equal(errno, EAGAIN);
	assert_non_null(p.conn->hold);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), -1);
	assert_int_equal(errno, EAGAIN);
	put(&p, "TP/1.1\r\nHost: x\r\n\r\nGET /next");
	/* The head, and not a byte of the next one, which is held (it waits
	 * for the client: nothing is left in the socket to wake a
	 * level-triggered server for). */
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 32);
	assert_memory_equal(buf, "GET /books HTTP/1.1\r\nHost: x\r\n\r\n", 32);
	assert_int_equal(recv(p.fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT), -1);
	assert_non_null(p.conn->hold);
	assert_int_equal(p.conn->hold->len, 9);
	put(&p, " HTTP/1.1\r\n\r\n");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 22);
	assert_memory_equal(buf, "GET /next HTTP/1.1\r\n\r\n", 22);
	pair_close(&p);
}

/* One-byte reads (python's CGI handler): the head comes byte by byte from
 * the hold buffer, and nothing past it is taken from the socket. */
static void test_one_byte_reads(void **state)
{
	static const char req[] = "POST /echo HTTP/1.1\r\nContent-Length: 4\r\n\r\n";
	struct pair p;
	char head[128], body[8];
	size_t n = 0;

	(void)state;
	pair_open(&p);
	put(&p, "POST /echo HTTP/1.1\r\nContent-Length: 4\r\n\r\nBODY");
	while (n < sizeof(req) - 1) {
		assert_int_equal(app_read(&p, head + n, 1, 0), 1);
		n++;
	}
	assert_memory_equal(head, req, sizeof(req) - 1);
	assert_null(p.conn->hold);
	/* The body is still in the socket, for whoever reads it. */
	assert_int_equal(recv(p.fd, body, sizeof(body), MSG_DONTWAIT), 4);
	assert_memory_equal(body, "BODY", 4);
	pair_close(&p);
}

/* readv with the head split across the application's buffers. */
static ssize_t do_readv(void *ctx)
{
	struct call *c = ctx;

	return readv(c->fd, c->buf, (int)c->len);
}

static void test_readv_split(void **state)
{
	struct pair p;
	char a[7], b[64];
	struct iovec iov[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	struct call c;
	struct rl_read r;

	(void)state;
	pair_open(&p);
	c = (struct call){ p.fd, iov, 2, 0 };
	r = (struct rl_read){ p.fd, iov, 2, 0, do_readv, &c, NULL, NULL };
	put(&p, "GET /readv HTTP/1.1\r\nX: y\r\n\r\n");
	assert_int_equal(rl_io_read(p.conn, &r), 29);
	assert_memory_equal(a, "GET /re", 7);
	assert_memory_equal(b, "adv HTTP/1.1\r\nX: y\r\n\r\n", 22);
	assert_null(p.conn->hold); /* the gathering buffer went back */
	pair_close(&p);
}

/*
 * readv: a whole head in the first buffer, then a second of 1.6 KiB
 * without its end in the second (held unparsed past 512 bytes), its end
 * a read later with a third after it: each given whole, each counted once.
 */
static void test_readv_long_second_head(void **state)
{
	static char second[2048], all[4096], b[4096];
	static const char first[] = "GET /one HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char third[] = "GET /three HTTP/1.1\r\n\r\n";
	char a[sizeof(first) - 1];
	struct iovec iov[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	struct pair p;
	struct call c;
	struct rl_read r;
	size_t n2, cut = 1500;

	(void)state;
	snprintf(second, sizeof(second), "GET /two HTTP/1.1\r\nX-Pad: ");
	memset(second + strlen(second), 'p', 1600);
	strcat(second, "\r\n\r\n");
	n2 = strlen(second);
	pair_open(&p);
	fcntl(p.fd, F_SETFL, O_NONBLOCK);
	c = (struct call){ p.fd, iov, 2, 0 };
	r = (struct rl_read){ p.fd, iov, 2, 0, do_readv, &c, NULL, NULL };
	snprintf(all, sizeof(all), "%s%.*s", first, (int)cut, second);
	put(&p, all);
	assert_int_equal(rl_io_read(p.conn, &r), (ssize_t)sizeof(a));
	assert_memory_equal(a, first, sizeof(a));
	assert_int_equal(p.conn->http.requests, 1);
	assert_non_null(p.conn->hold);
	assert_int_equal(p.conn->hold->len, cut);
	assert_int_equal(rl_io_read(p.conn, &r), -1);
	assert_int_equal(errno, EAGAIN);
	snprintf(all, sizeof(all), "%s%s", second + cut, third);
	put(&p, all);
	/* the held head, then the third from the socket after it */
	assert_int_equal(rl_io_read(p.conn, &r), (ssize_t)(n2 + strlen(third)));
	assert_memory_equal(a, second, sizeof(a));
	assert_memory_equal(b, second + sizeof(a), n2 - sizeof(a));
	assert_memory_equal(b + n2 - sizeof(a), third, strlen(third));
	assert_int_equal(p.conn->http.requests, 3);
	assert_null(p.conn->hold);
	assert_int_equal(recv(p.fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT), -1);
	pair_close(&p);
}

/* Garbage: the 400, nothing for the application. TLS: untouched. */
static void test_garbage_and_tls(void **state)
{
	struct pair p;
	char buf[4096];

	(void)state;
	pair_open(&p);
	put(&p, "\x01\x02nonsense\r\n\r\n");
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 0);
	client_got(&p, buf, sizeof(buf), 200);
	assert_non_null(strstr(buf, "400 Bad Request"));
	assert_non_null(strstr(buf, "not an HTTP request"));
	pair_close(&p);

	pair_open(&p);
	assert_int_equal(send(p.client, "\x16\x03\x01\x00\x05hello", 10, 0), 10);
	usleep(20000);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 10);
	assert_memory_equal(buf, "\x16\x03\x01\x00\x05hello", 10);
	assert_int_equal(p.conn->state, RL_CONN_PASS);
	pair_close(&p);
}

/*
 * An edge-triggered server (nginx) reads until a read comes back short,
 * or longer than FIONREAD said (the hook counts what the shim holds), and
 * then waits for an edge. With every byte of the stream already sent no
 * edge comes: whatever it reads in, it must have had every byte by then.
 */
static size_t et_drain(struct pair *p, char *out, size_t cap, size_t first,
		       size_t size, int fionread)
{
	size_t got = 0, want = first;

	for (;;) {
		int kernel = 0, avail = 0;
		ssize_t n;

		if (fionread) {
			assert_int_equal(ioctl(p->fd, FIONREAD, &kernel), 0);
			avail = kernel + (int)rl_io_held(p->conn);
		}
		if (want > cap - got)
			want = cap - got;
		if (want == 0)
			break;
		n = app_read(p, out + got, want, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
		if ((size_t)n < want || (fionread && n > avail))
			break;
		want = size;
	}
	return got;
}

static void test_edge_triggered(void **state)
{
	static char stream[40000], got[40000];
	static const struct {
		size_t first, size;
		int fionread;
	} readers[] = {
		{ 1024, 8192, 1 }, /* nginx: 1 KiB, then large buffers */
		{ 1024, 1024, 0 }, { 7, 7, 0 }, { 4096, 4096, 1 },
		{ 65536, 65536, 0 }, { 1, 1, 0 },
	};
	char cookie[9001];
	size_t len;

	(void)state;
	memset(cookie, 'c', sizeof(cookie) - 1);
	cookie[sizeof(cookie) - 1] = '\0';
	for (int kind = 0; kind < 5; kind++) {
		len = 0;
		switch (kind) {
		case 0: /* a browser's head with cookies */
			len = (size_t)snprintf(stream, sizeof(stream),
				"GET /a HTTP/1.1\r\nCookie: a=%.1500s\r\n\r\n", cookie);
			break;
		case 1: /* a small GET, then one with a 2,000-byte header */
			len = (size_t)snprintf(stream, sizeof(stream),
				"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nX: %.2000s\r\n\r\n",
				cookie);
			break;
		case 2: /* 40 small pipelined GETs */
			for (int i = 0; i < 40; i++)
				len += (size_t)snprintf(stream + len, sizeof(stream) - len,
					"GET /p%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
			break;
		case 3: /* a 1.5 KiB head and a 3,000-byte body */
			len = (size_t)snprintf(stream, sizeof(stream),
				"POST /up HTTP/1.1\r\nCookie: %.1500s\r\n"
				"Content-Length: 3000\r\n\r\n%.3000s", cookie, cookie);
			break;
		case 4: /* a 9 KiB head in nine fields */
			len = (size_t)snprintf(stream, sizeof(stream), "GET /big HTTP/1.1\r\n");
			for (int i = 0; i < 9; i++)
				len += (size_t)snprintf(stream + len, sizeof(stream) - len,
					"X-%d: %.1000s\r\n", i, cookie);
			len += (size_t)snprintf(stream + len, sizeof(stream) - len, "\r\n");
			break;
		}
		for (size_t r = 0; r < sizeof(readers) / sizeof(readers[0]); r++) {
			struct pair p;
			size_t n;

			pair_open(&p);
			fcntl(p.fd, F_SETFL, O_NONBLOCK);
			assert_int_equal(send(p.client, stream, len, 0), (ssize_t)len);
			usleep(20000);
			n = et_drain(&p, got, sizeof(got), readers[r].first,
				     readers[r].size, readers[r].fionread);
			if (n != len)
				fail_msg("stream %d, reads of %zu then %zu%s: %zu of %zu "
					 "bytes before the server would wait", kind,
					 readers[r].first, readers[r].size,
					 readers[r].fionread ? " (FIONREAD)" : "", n, len);
			assert_memory_equal(got, stream, len);
			assert_int_equal(p.conn->state, RL_CONN_HTTP);
			pair_close(&p);
		}
	}
}

/*
 * A pipeline with a bad head in it, from a client that reads slower than
 * it sends and is still sending when the 400 goes: the application, which
 * closes when its read says end of file, gets that only after the
 * client's own FIN. Closed earlier, the client's next bytes would make the
 * kernel reset the connection and throw away the answers still queued.
 * The client gets every answer, the 400, and a clean end.
 */
static int app_serve(struct pair *p, int *closed)
{
	char buf[4096];
	ssize_t n;

	if (*closed)
		return 0;
	n = app_read(p, buf, sizeof(buf), 0);
	if (n == 0) {
		rl_io_close(p->fd);
		close(p->fd);
		*closed = 1;
	}
	return (int)n;
}

/* The client sends more, whatever became of the connection. */
static void put_more(struct pair *p, const char *s)
{
	send(p->client, s, strlen(s), MSG_NOSIGNAL);
	usleep(20000);
}

static void test_linger_after_answer(void **state)
{
	static const char get[] = "GET /l HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char bad[] = "GET /l HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n";
	char answer[320], stream[64 * sizeof(get)], got[64 * 1024];
	size_t len = 0, n = 0;
	struct pair p;
	int closed = 0, answers = 0, dropped, err, seen[3];
	ssize_t r;

	(void)state;
	n = (size_t)snprintf(answer, sizeof(answer),
			     "HTTP/1.1 200 OK\r\nContent-Length: 250\r\n\r\n");
	memset(answer + n, 'a', 250);
	answer[n + 250] = '\0';
	n = 0;
	for (int i = 0; i < 40; i++)
		len += (size_t)snprintf(stream + len, sizeof(stream) - len, "%s", get);
	len += (size_t)snprintf(stream + len, sizeof(stream) - len, "%s%s", bad, get);
	pair_open_rcv(&p, 2048);
	fcntl(p.fd, F_SETFL, O_NONBLOCK);
	put(&p, stream);
	/* The application reads the 40 and answers each. */
	while ((r = app_read(&p, got, sizeof(got), 0)) > 0)
		n += (size_t)r;
	assert_int_equal(n, 40 * (sizeof(get) - 1));
	for (int i = 0; i < 40; i++)
		app_write(&p, answer);
	assert_int_equal(p.conn->state, RL_CONN_DONE);
	/* The client is not done: the application is told EAGAIN (it waits
	 * for readiness), and what the client sends is dropped. */
	seen[0] = app_serve(&p, &closed);
	put_more(&p, get);
	seen[1] = app_serve(&p, &closed);
	dropped = closed || inq(p.fd) == 0;
	put_more(&p, get);
	shutdown(p.client, SHUT_WR);
	usleep(20000);
	seen[2] = app_serve(&p, &closed);
	/* Now the client reads: every answer, the 400, the end. */
	n = 0;
	while (n < sizeof(got) - 1 &&
	       (r = recv(p.client, got + n, sizeof(got) - 1 - n, 0)) > 0)
		n += (size_t)r;
	err = r < 0 ? errno : 0;
	got[n] = '\0';
	for (char *at = got; (at = strstr(at, "HTTP/1.1 200 OK")); at++)
		answers++;
	assert_int_equal(answers, 40);
	assert_non_null(strstr(got, "HTTP/1.1 400 Bad Request\r\n"));
	assert_int_equal(strstr(got, "HTTP/1.1 400") - got, 40 * strlen(answer));
	assert_int_equal(r, 0); /* the end, not ECONNRESET */
	assert_int_equal(err, 0);
	close(p.client);
	/* The application's reads: EAGAIN until the client's FIN. */
	assert_int_equal(seen[0], -1);
	assert_int_equal(seen[1], -1);
	assert_true(dropped);
	assert_int_equal(seen[2], 0);
	assert_int_equal(closed, 1);

	/* A blocking read is not made to wait: end of file at once. Nor does
	 * a lingering one wait past the deadline. */
	for (int k = 0; k < 2; k++) {
		pair_open(&p);
		if (k)
			fcntl(p.fd, F_SETFL, O_NONBLOCK);
		put(&p, bad);
		errno = 1234;
		r = app_read(&p, got, sizeof(got), 0);
		if (k) {
			assert_int_equal(r, -1);
			assert_int_equal(errno, EAGAIN);
			assert_int_not_equal(p.conn->linger_ns, 0);
			p.conn->linger_ns = 1; /* long past */
			errno = 1234;
			r = app_read(&p, got, sizeof(got), 0);
		}
		assert_int_equal(r, 0);
		assert_int_equal(errno, 1234);
		if (k) /* and so it stays */
			assert_int_equal(app_read(&p, got, sizeof(got), 0), 0);
		pair_close(&p);
	}
}

/* A TLS session freed by the application (SSL_free before close) ends its
 * connection's framing, but nobody refused it: its close reads nothing
 * (no drain, no system call), while one the shim answered is drained. */
static void test_tls_freed_not_drained(void **state)
{
	static int session, other;
	struct pair p;

	(void)state;
	pair_open(&p);
	assert_ptr_equal(rl_io_tls_conn(p.fd, &session), p.conn);
	assert_ptr_equal(p.conn->ssl, &session);
	rl_io_tls_free(p.fd, &other); /* not its session: nothing */
	assert_ptr_equal(p.conn->ssl, &session);
	put(&p, "\x15\x03\x03");     /* the client's close_notify, say */
	rl_io_tls_free(p.fd, &session);
	assert_null(p.conn->ssl);
	assert_int_equal(p.conn->state, RL_CONN_DONE);
	rl_io_close(p.fd);
	assert_int_equal(inq(p.fd), 3); /* left in the socket */
	close(p.fd);
	close(p.client);

	/* Denied, then freed: drained at close as in plaintext. */
	pair_open(&p);
	assert_ptr_equal(rl_io_tls_conn(p.fd, &session), p.conn);
	p.conn->state = RL_CONN_DONE;
	put(&p, "abc");
	rl_io_tls_free(p.fd, &session);
	rl_io_close(p.fd);
	assert_int_equal(inq(p.fd), 0);
	close(p.fd);
	close(p.client);
}

/* The application's SSL_read: through the session, framed. */
static ssize_t do_tls_recv(void *ctx)
{
	struct call *c = ctx;

	return plain_tls_read(&c->fd, c->buf, c->len, 0);
}

static ssize_t do_app_bio_recv(void *ctx)
{
	struct call *c = ctx;

	return app_bio_read(c->buf, c->len, 0);
}

/*
 * Plaintext that starts with a TLS record byte, read through a TLS
 * session (SSL_read): a bad request line, the shim's 400 through the
 * session, nothing for the application; never the connection passed
 * unframed, as a handshake on a plain socket is (test_diff --tls found
 * nginx answering `\x16...` 400 and logging it, uncounted).
 */
static void test_tls_record_byte_inside(void **state)
{
	static int session;
	struct pair p;
	char buf[4096];

	(void)state;
	pair_open(&p);
	session = p.fd;
	assert_ptr_equal(rl_io_tls_conn(p.fd, &session), p.conn);
	put(&p, "\x16\x03\x01\x00\x05hello GET /sms HTTP/1.1\r\n\r\n");
	{
		struct call c = { p.fd, buf, sizeof(buf), 0 };
		struct iovec v = { buf, sizeof(buf) };
		struct rl_read r = { p.fd, &v, 1, 0, do_tls_recv, &c, NULL,
				     &session };

		assert_int_equal(rl_io_read(p.conn, &r), 0);
	}
	assert_int_not_equal(p.conn->state, RL_CONN_PASS);
	client_got(&p, buf, sizeof(buf), 200);
	assert_non_null(strstr(buf, "400 Bad Request"));
	assert_non_null(strstr(buf, "not an HTTP request"));
	pair_close(&p);
}

static ssize_t tls_app_read(struct pair *p, void *session, char *buf,
			    size_t len)
{
	struct call c = { p->fd, buf, len, 0 };
	struct iovec v = { buf, len };
	struct rl_read r = { p->fd, &v, 1, 0, do_tls_recv, &c, NULL, session };

	if (session == &app_bio_session)
		r.real = do_app_bio_recv;
	return rl_io_read(p->conn, &r);
}

/*
 * A head the shim holds, half come through a session over the socket
 * itself (nginx's, lighttpd's), and then the client's end: the
 * application's next SSL_read gets the end, not an EAGAIN (nothing in the
 * socket, but its end), which would be its answer for ever: a connection
 * never closed, a server's blocking read retried for ever.
 */
static void test_tls_held_head_then_end(void **state)
{
	static int session;
	struct pair p;
	char buf[4096];
	ssize_t r;

	(void)state;
	pair_open(&p);
	/* non-blocking, as every server's socket under its session is */
	fcntl(p.fd, F_SETFL, fcntl(p.fd, F_GETFL) | O_NONBLOCK);
	session = p.fd;
	assert_ptr_equal(rl_io_tls_conn(p.fd, &session), p.conn);
	put(&p, "GET / HTTP/1.1\r\nHost: x\r\n");
	errno = 0;
	assert_int_equal(tls_app_read(&p, &session, buf, sizeof(buf)), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(shutdown(p.client, SHUT_WR), 0);
	usleep(20000);
	errno = 0;
	r = tls_app_read(&p, &session, buf, sizeof(buf));
	assert_false(r < 0 && errno == EAGAIN);
	assert_true(r <= 0); /* the end (or the shim's 400 for a cut head) */
	pair_close(&p);
}

/*
 * Through apache's BIO: the head's records all read ahead into it at
 * once, the socket empty. The shim, holding the first, must read on
 * through the session (its BIO hands out the rest), not answer EAGAIN
 * because the socket is empty: mod_ssl's blocking read retries an EAGAIN
 * at once, and spun there (test_diff --tls, apache event and prefork:
 * children at 40% CPU each on a connection in CLOSE-WAIT).
 */
static void test_tls_app_bio_read_ahead(void **state)
{
	static const char head[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct pair p;
	char buf[4096];
	size_t got = 0;
	ssize_t r;
	int i;

	(void)state;
	pair_open(&p);
	fcntl(p.fd, F_SETFL, fcntl(p.fd, F_GETFL) | O_NONBLOCK); /* apache's */
	memset(&app_bio, 0, sizeof(app_bio));
	app_bio.recs[0] = "GET / HTTP/1.1\r\nHo";
	app_bio.recs[1] = "st: x\r\n\r\n";
	assert_ptr_equal(rl_io_tls_conn(p.fd, &app_bio_session), p.conn);
	p.conn->tls_app_bio = 1; /* as hooks.c marks apache's sessions */
	/* The head decided, its bytes are the application's: the held
	 * ones, then its tail as the BIO gives it. Before, every read was
	 * EAGAIN. */
	for (i = 0; i < 6 && got < strlen(head); i++) {
		errno = 0;
		r = tls_app_read(&p, &app_bio_session, buf + got,
				 sizeof(buf) - got);
		if (r > 0)
			got += (size_t)r;
		else
			assert_true(r < 0 && errno == EAGAIN);
	}
	assert_int_equal(got, strlen(head));
	assert_memory_equal(buf, head, got);
	pair_close(&p);
}

/*
 * Through apache's BIO, whose read blocks (mod_ssl reads a request head
 * as the core does: until the client sends, or apache's Timeout): a long
 * head (held unparsed, past RL_WHOLE_LOOK) that is wrong already, and the
 * client sends no more of it. The 400 goes at once, without a look for
 * more through the session: that look waited in apache's read for bytes
 * the client never sent, and the client had no answer (test_edges --tls,
 * apache event and prefork: long_bad_prefix timed out).
 */
static void test_tls_app_bio_long_bad_head(void **state)
{
	static char head[2048];
	struct pair p;
	char buf[4096];

	(void)state;
	snprintf(head, sizeof(head), "GET /a HTTP/1.1\r\nBad Line\r\nX-Pad: ");
	memset(head + strlen(head), 'a', 1500);
	pair_open(&p);
	memset(&app_bio, 0, sizeof(app_bio));
	app_bio.recs[0] = head;
	app_bio.blocks = 1;
	app_bio_session = p.fd; /* its writes go out on the socket */
	assert_ptr_equal(rl_io_tls_conn(p.fd, &app_bio_session), p.conn);
	p.conn->tls_app_bio = 1; /* as hooks.c marks apache's sessions */
	assert_int_equal(tls_app_read(&p, &app_bio_session, buf, sizeof(buf)), 0);
	assert_int_equal(app_bio.waited, 0);
	client_got(&p, buf, sizeof(buf), 200);
	assert_memory_equal(buf, "HTTP/1.1 400", 12);
	pair_close(&p);
	app_bio_session = 0;
}

/* A browser's head, longer than nginx's first read (1 KiB). */
static const char *long_head(const char *path)
{
	static char head[2048];

	snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: x\r\nX-Pad: ", path);
	memset(head + strlen(head), 'a', 1500);
	strcpy(head + strlen(head), "\r\n\r\n");
	return head;
}

/* The application's SSL_reads of `chunk` bytes until one says EAGAIN (or
 * the end), appended to got[*len]. Returns the last read's result. */
static ssize_t tls_read_all(struct pair *p, void *session, char *got,
			    size_t *len, size_t cap, size_t chunk)
{
	ssize_t r;

	for (;;) {
		size_t want = cap - *len < chunk ? cap - *len : chunk;

		errno = 0;
		r = tls_app_read(p, session, got + *len, want);
		if (r <= 0)
			return r;
		*len += (size_t)r;
	}
}

/*
 * A head cut by the application's first SSL_read (nginx's 1 KiB): the
 * rest is read from the session once, into the hold buffer (where a peek
 * and then libssl's copy again at the application's read were two trips
 * through libssl's record code), and given at the application's next read.
 * Bytes that came past the head (a pipeline, a head not complete yet) are
 * held unread: the reads after frame them as the session's own, in reads
 * as small as the application makes them, and nothing it did not ask for
 * stays in the socket. SSL_pending (rl_io_held) counts every held byte; a
 * peek sees the held bytes the next read gets.
 */
static void test_tls_cut_head_read_once(void **state)
{
	static int session;
	static char sent[4096], got[4096];
	const char *b = "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
	const char *c1 = "GET /c HTTP/1.1\r\nHo", *c2 = "st: x\r\n\r\n";
	size_t len = 0, want;
	struct pair p;
	char peek[64];
	ssize_t r;

	(void)state;
	for (size_t chunk = 7; chunk <= 4096; chunk *= 24) {
		pair_open(&p);
		fcntl(p.fd, F_SETFL, fcntl(p.fd, F_GETFL) | O_NONBLOCK);
		session = p.fd;
		assert_ptr_equal(rl_io_tls_conn(p.fd, &session), p.conn);
		snprintf(sent, sizeof(sent), "%s%s%s", long_head("/a"), b, c1);
		put(&p, sent);
		len = 0;
		assert_int_equal(tls_app_read(&p, &session, got, 1024), 1024);
		assert_int_equal(inq(p.fd), 0); /* the rest is held */
		assert_int_equal(rl_io_held(p.conn), strlen(sent) - 1024);
		assert_int_equal(rl_io_tls_peek(p.conn, peek, sizeof(peek), &r), 0);
		assert_int_equal(r, sizeof(peek));
		assert_memory_equal(peek, sent + 1024, sizeof(peek));
		len = 1024;
		r = tls_read_all(&p, &session, got, &len, sizeof(got), chunk);
		assert_true(r < 0 && errno == EAGAIN);
		want = strlen(sent) - strlen(c1); /* /c's start held undecided */
		assert_int_equal(len, want);
		assert_memory_equal(got, sent, want);
		assert_int_equal(p.conn->http.requests, 2);
		assert_int_equal(rl_io_held(p.conn), strlen(c1));
		/* A peek does not see a head not decided yet: libssl's (the
		 * socket, empty). */
		assert_int_equal(rl_io_tls_peek(p.conn, peek, sizeof(peek), &r), 1);
		put(&p, c2);
		r = tls_read_all(&p, &session, got, &len, sizeof(got), chunk);
		assert_true(r < 0 && errno == EAGAIN);
		strcat(sent, c2);
		assert_int_equal(len, strlen(sent));
		assert_memory_equal(got, sent, len);
		assert_int_equal(p.conn->http.requests, 3);
		assert_null(p.conn->hold);
		pair_close(&p);
	}
}

/*
 * A refusal among the bytes held unread after a cut head (a bad head,
 * pipelined): the requests before it reach the application, the bad one
 * never does, and its 400 reaches the client, as when those bytes come
 * from the session.
 */
static void test_tls_cut_head_then_refused(void **state)
{
	static int session;
	static char sent[4096], got[4096], ans[4096];
	const char *b = "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
	const char *bad = "GET /c HTTP/1.1\r\nBad Line\r\n\r\n";
	const char *a1 = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nA1";
	struct pair p;
	size_t len = 0;

	(void)state;
	pair_open(&p);
	fcntl(p.fd, F_SETFL, fcntl(p.fd, F_GETFL) | O_NONBLOCK);
	session = p.fd;
	assert_ptr_equal(rl_io_tls_conn(p.fd, &session), p.conn);
	snprintf(sent, sizeof(sent), "%s%s%s", long_head("/a"), b, bad);
	put(&p, sent);
	assert_int_equal(tls_app_read(&p, &session, got, 1024), 1024);
	len = 1024;
	tls_read_all(&p, &session, got, &len, sizeof(got), sizeof(got));
	assert_int_equal(len, strlen(sent) - strlen(bad));
	assert_memory_equal(got, sent, len);
	assert_int_equal(p.conn->state, RL_CONN_DENY);
	/* Its answers to the two: the 400 right after them. */
	app_write(&p, a1);
	app_write(&p, a1);
	client_got(&p, ans, sizeof(ans), 200);
	assert_memory_equal(ans, a1, strlen(a1));
	assert_memory_equal(ans + strlen(a1), a1, strlen(a1));
	assert_memory_equal(ans + 2 * strlen(a1), "HTTP/1.1 400 Bad Request", 24);
	pair_close(&p);
}

/* The application's own peeks pass untouched. */
static void test_app_peek(void **state)
{
	struct pair p;
	char buf[64];

	(void)state;
	pair_open(&p);
	put(&p, "GET /p HTTP/1.1\r\n\r\n");
	assert_int_equal(app_read(&p, buf, 4, MSG_PEEK), 4);
	assert_memory_equal(buf, "GET ", 4);
	assert_int_equal(app_read(&p, buf, sizeof(buf), 0), 19);
	pair_close(&p);
}

/* dup shares the connection; the last close frees it. */
static void test_dup_close(void **state)
{
	struct rl_conn_stats before, after;
	struct pair p;
	int d;

	(void)state;
	rl_conn_stats(&before);
	pair_open(&p);
	d = dup(p.fd);
	rl_io_dup(p.fd, d);
	assert_ptr_equal(rl_conn_of(rl_fd_get(d)), p.conn);
	rl_io_close(p.fd);
	close(p.fd);
	p.fd = d;
	assert_non_null(rl_conn_of(rl_fd_get(d)));
	pair_close(&p);
	rl_conn_stats(&after);
	assert_int_equal(after.conns_live, before.conns_live);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allowed_in_place),
		cmocka_unit_test(test_denied_first),
		cmocka_unit_test(test_denied_after_allowed),
		cmocka_unit_test(test_denied_waits_for_answers),
		cmocka_unit_test(test_linger_after_answer),
		cmocka_unit_test(test_switch_on_its_answer),
		cmocka_unit_test(test_http2),
		cmocka_unit_test(test_after_last_request),
		cmocka_unit_test(test_fionread_counts_held),
		cmocka_unit_test(test_cut_and_early_refusals),
		cmocka_unit_test(test_bad_body_resets),
		cmocka_unit_test(test_child_took_body),
		cmocka_unit_test(test_bytes_while_looking_after_fork),
		cmocka_unit_test(test_child_took_body_bytes_while_looking),
		cmocka_unit_test(test_partial_head),
		cmocka_unit_test(test_long_read_past_hold),
		cmocka_unit_test(test_long_bad_head_errno),
		cmocka_unit_test(test_one_byte_reads),
		cmocka_unit_test(test_readv_split),
		cmocka_unit_test(test_readv_long_second_head),
		cmocka_unit_test(test_garbage_and_tls),
		cmocka_unit_test(test_tls_record_byte_inside),
		cmocka_unit_test(test_tls_held_head_then_end),
		cmocka_unit_test(test_tls_cut_head_read_once),
		cmocka_unit_test(test_tls_cut_head_then_refused),
		cmocka_unit_test(test_tls_app_bio_read_ahead),
		cmocka_unit_test(test_tls_app_bio_long_bad_head),
		cmocka_unit_test(test_app_peek),
		cmocka_unit_test(test_tls_freed_not_drained),
		cmocka_unit_test(test_dup_close),
		cmocka_unit_test(test_edge_triggered),
	};

	return cmocka_run_group_tests_name("io", tests, setup_all, teardown_all);
}
