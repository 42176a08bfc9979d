/* SPDX-License-Identifier: MIT */
/*
 * test_answers.c - the answer framer's writes (io_answers.c) without
 * LD_PRELOAD: requests read through rl_io_read() from real loopback
 * sockets, the application's answers written as the write hooks write
 * them (rl_io_send() while fields are owed, else the call and then
 * rl_io_wrote()), into a fake sendmsg that records what went out and can
 * be told to take only so much. What is checked is what a client would
 * get, byte for byte, and what the application is told.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "io.h"
#include "clock.h"

static struct rl_config *cfg;
static struct rl_table *table;
static char seg[64];
static int listener;

/* ---- the socket the answers go to ------------------------------------------------ */

static struct {
	char buf[1 << 20];
	size_t len;
	size_t room;    /* bytes it takes before it says EAGAIN (SIZE_MAX: any) */
	size_t cap;     /* bytes one call takes at most (0: no limit) */
	unsigned calls; /* system calls made */
} wire;

static void wire_reset(void)
{
	wire.len = 0;
	wire.room = SIZE_MAX;
	wire.cap = 0;
	wire.calls = 0;
}

static ssize_t fake_sendmsg(int fd, const struct msghdr *m, int flags)
{
	size_t n = 0, want = 0;

	(void)fd;
	(void)flags;
	wire.calls++;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		want += m->msg_iov[i].iov_len;
	if (want && wire.room == 0) {
		errno = EAGAIN;
		return -1;
	}
	for (size_t i = 0; i < m->msg_iovlen; i++) {
		size_t l = m->msg_iov[i].iov_len, take = l;

		if (take > wire.room - n)
			take = wire.room - n;
		if (wire.cap && take > wire.cap - n)
			take = wire.cap - n;
		assert_true(wire.len + take <= sizeof(wire.buf));
		memcpy(wire.buf + wire.len, m->msg_iov[i].iov_base, take);
		wire.len += take;
		n += take;
		if (take < l)
			break;
	}
	if (wire.room != SIZE_MAX)
		wire.room -= n;
	return (ssize_t)n;
}

static int getfl(int fd)
{
	return fcntl(fd, F_GETFL);
}

static int inq(int fd)
{
	int n = 0;

	return ioctl(fd, SIOCINQ, &n) < 0 ? -1 : n;
}

/*
 * A TLS session's SSL_write, as libssl's (no partial writes): a call takes
 * all its bytes or none (EAGAIN: would block, room for fewer), and the one
 * after a call that would block must be its retry, the same bytes at the
 * same address (libssl's "bad write retry" otherwise).
 */
static struct {
	const void *stuck;
	size_t stuck_len;
} tls_w;

static ssize_t fake_tls_write(void *ssl, const void *buf, size_t len)
{
	(void)ssl;
	if (tls_w.stuck) {
		assert_ptr_equal(buf, tls_w.stuck);
		assert_int_equal(len, tls_w.stuck_len);
	}
	wire.calls++;
	if (len > wire.room) {
		tls_w.stuck = buf;
		tls_w.stuck_len = len;
		errno = EAGAIN;
		return -1;
	}
	tls_w.stuck = NULL;
	assert_true(wire.len + len <= sizeof(wire.buf));
	memcpy(wire.buf + wire.len, buf, len);
	wire.len += len;
	if (wire.room != SIZE_MAX)
		wire.room -= len;
	return (ssize_t)len;
}

static const struct rl_sys sys = {
	.read = read, .write = write, .close = close, .recv = recv,
	.send = send, .sendmsg = fake_sendmsg, .getfl = getfl, .inq = inq,
	.tls_write = fake_tls_write,
};

/* `page` counts /p*, nearest its limit by far; /u* nobody counts; login
 * charges only its failures. */
static const char conf[] =
	"[global]\n"
	"headers_on = all\n"
	"[limit:page]\n"
	"match = * /p*\n"
	"rate = 1000000/d\n" /* one back in 86 ms: Remaining goes down */
	"[limit:login]\n"
	"match = POST /login\n"
	"rate = 3/m\n"
	"count_status = 401 403\n";

enum { RULE_PAGE = 0, RULE_LOGIN = 1 };

static int setup_all(void **state)
{
	struct rl_err err;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	(void)state;
	snprintf(seg, sizeof(seg), "rlshim-test-answers-%d", (int)getpid());
	rl_table_unlink(seg);
	if (rl_config_parse(conf, "t.conf", &cfg, &err) ||
	    rl_table_open(seg, 1024, RL_TABLE_CREATE, &table, NULL) ||
	    rl_io_start(&sys, cfg, table, &err)) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return -1;
	}
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

/* ---- a connection, its requests, its answers --------------------------------------- */

struct pair {
	int client;
	int fd;
	struct rl_conn *conn;
};

/* A connection from 127.0.0.`host`, tracked as the hooks track it. */
static void pair_open_from(struct pair *p, int host)
{
	struct sockaddr_in a, from = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct sockaddr_storage peer;
	socklen_t pl = sizeof(peer);
	int one = 1;

	getsockname(listener, (struct sockaddr *)&a, &al);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	from.sin_addr.s_addr = htonl(0x7f000000u | (unsigned)host);
	p->client = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(p->client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	assert_int_equal(bind(p->client, (struct sockaddr *)&from, sizeof(from)), 0);
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
	pair_open_from(p, 1);
}

static void pair_close(struct pair *p)
{
	rl_io_close(p->fd);
	close(p->fd);
	close(p->client);
}

struct call {
	int fd;
	void *buf;
	size_t len;
};

static ssize_t do_recv(void *ctx)
{
	struct call *c = ctx;

	return recv(c->fd, c->buf, c->len, 0);
}

/* The client sends `reqs`, the application reads all of them (through
 * the shim: each decided). Returns the number of the first on the
 * connection. */
static uint32_t ask(struct pair *p, const char *reqs)
{
	static char buf[65536];
	size_t len = strlen(reqs), got = 0;
	uint32_t first = p->conn->delivered + 1;

	assert_int_equal(send(p->client, reqs, len, 0), (ssize_t)len);
	while (got < len) {
		struct call c = { p->fd, buf, sizeof(buf) };
		struct iovec v = { buf, sizeof(buf) };
		struct rl_read r = { p->fd, &v, 1, 0, do_recv, &c, NULL, NULL };
		ssize_t n = rl_io_read(p->conn, &r);

		assert_true(n > 0);
		assert_memory_equal(buf, reqs + got, (size_t)n);
		got += (size_t)n;
	}
	assert_int_equal(p->conn->state, RL_CONN_HTTP);
	return first;
}

/* The fields request `k` was decided with, as the answer is to carry
 * them (headers = ratelimit); "" when it carries none. Only while its
 * answer is not written. */
static const char *fields_of(struct pair *p, uint32_t k)
{
	static char f[RL_OWED][256];
	const struct rl_owed *o = rl_owed_find(p->conn, k);
	char *s = f[(k - 1) % RL_OWED];

	assert_non_null(o);
	if (o->near < 0)
		return "";
	snprintf(s, sizeof(f[0]),
		 "RateLimit-Limit: %u\r\nRateLimit-Remaining: %u\r\n"
		 "RateLimit-Reset: %llu\r\n", o->limit, o->remaining,
		 (unsigned long long)rl_time_ceil_sec(o->reset_ns));
	return s;
}

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t n = 0;

	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* The application's writev, as the hooks make it. */
static ssize_t app_writev(struct pair *p, const struct iovec *iov, int cnt)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt };
	struct rl_conn *c = rl_io_written(p->fd);
	ssize_t r;

	if (c && rl_io_write(c, iov, cnt))
		return (ssize_t)iov_total(iov, cnt);
	if (c && rl_io_inserting(c) && iov_total(iov, cnt) > 0)
		return rl_io_send(c, p->fd, iov, cnt, 0, NULL);
	r = fake_sendmsg(p->fd, &m, 0);
	if (c && r > 0)
		rl_io_wrote(c, p->fd, iov, cnt, (size_t)r);
	return r;
}

static ssize_t app_write(struct pair *p, const char *s, size_t len)
{
	struct iovec v = { (void *)s, len };

	return app_writev(p, &v, 1);
}

/* A blocking application's loop: write until all of it went. */
static void app_write_all(struct pair *p, const char *s, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = app_write(p, s + done, len - done);

		assert_true(r > 0);
		assert_true((size_t)r <= len - done);
		done += (size_t)r;
	}
}

/* What the client must get for `ans` (n answers as the application
 * writes them), each with fields[i] inserted before its head's blank
 * line. */
static size_t expect(char *out, size_t cap, const char *const *ans,
		     const char *const *fields, int n)
{
	size_t len = 0;

	for (int i = 0; i < n; i++) {
		const char *a = ans[i], *e = strstr(a, "\r\n\r\n");
		size_t al = strlen(a), cut = e && fields[i][0] ? (size_t)(e - a) + 2 : al;
		size_t fl = cut < al ? strlen(fields[i]) : 0;

		assert_true(len + al + fl <= cap);
		memcpy(out + len, a, cut);
		memcpy(out + len + cut, fields[i], fl);
		memcpy(out + len + cut + fl, a + cut, al - cut);
		len += al + fl;
	}
	return len;
}

static size_t join(char *out, size_t cap, const char *const *ans, int n)
{
	size_t len = 0;

	for (int i = 0; i < n; i++) {
		size_t l = strlen(ans[i]);

		assert_true(len + l <= cap);
		memcpy(out + len, ans[i], l);
		len += l;
	}
	return len;
}

static void wire_is(const char *want, size_t len)
{
	if (wire.len != len || memcmp(wire.buf, want, len) != 0) {
		wire.buf[wire.len < sizeof(wire.buf) ? wire.len : sizeof(wire.buf) - 1] = '\0';
		fail_msg("the client got %zu bytes:\n%s\nnot %zu:\n%.*s", wire.len,
			 wire.buf, len, (int)len, want);
	}
}

static unsigned count_of(const char *hay, size_t len, const char *needle)
{
	size_t nl = strlen(needle);
	unsigned n = 0;

	for (size_t i = 0; i + nl <= len; i++)
		if (memcmp(hay + i, needle, nl) == 0)
			n++;
	return n;
}

/* The metrics of the rule `i` of the configuration. */
static struct rl_rule_stats stats_of(int i)
{
	struct rl_rule_stats st;
	uint64_t sum = 0;

	assert_int_equal(rl_table_rule_stats(table, rl_io_policy()->ids[i], &st), 0);
	for (int b = 0; b < RL_SERVICE_BUCKETS; b++)
		sum += st.service[b];
	/* every final answer counted has its service time */
	assert_int_equal(sum, st.answers[0] + st.answers[1] + st.answers[2] +
			 st.answers[3] + st.answers[4]);
	return st;
}

static const char get_p[] = "GET /p HTTP/1.1\r\nHost: x\r\n\r\n";
static const char ok5[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

/* ---- one answer ------------------------------------------------------------------ */

/* Head and body in one write, or in one writev: the fields once, before
 * the blank line, in the one system call; the application is told its
 * own length. */
static void test_one_write(void **state)
{
	static char want[4096];
	const char *f;
	struct pair p;
	uint32_t k;
	size_t wl;

	(void)state;
	pair_open(&p);
	for (int v = 0; v < 2; v++) {
		k = ask(&p, get_p);
		f = fields_of(&p, k);
		assert_non_null(strstr(f, "RateLimit-Limit: 1000000\r\n"));
		wl = expect(want, sizeof(want), (const char *[]){ ok5 }, &f, 1);
		wire_reset();
		errno = 4321;
		if (v == 0) {
			assert_int_equal(app_write(&p, ok5, strlen(ok5)), (ssize_t)strlen(ok5));
		} else {
			struct iovec iov[2] = { { (void *)ok5, strlen(ok5) - 5 },
						{ (void *)(ok5 + strlen(ok5) - 5), 5 } };

			assert_int_equal(app_writev(&p, iov, 2), (ssize_t)strlen(ok5));
		}
		assert_int_equal(errno, 4321);
		wire_is(want, wl);
		assert_int_equal(wire.calls, 1);
		assert_int_equal(count_of(wire.buf, wire.len, "RateLimit-Limit"), 1);
		assert_non_null(strstr(wire.buf, "Content-Length: 5\r\nRateLimit-Limit: "));
		assert_int_equal(memcmp(wire.buf + wire.len - 9, "\r\n\r\nhello", 9), 0);
		/* nothing owed now: the next write is a plain one */
		assert_false(rl_io_inserting(p.conn));
	}
	pair_close(&p);
}

/* The head in N pieces, for every N. */
static void test_head_in_pieces(void **state)
{
	static const char a[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\nhi";
	static char want[4096];
	size_t len = strlen(a);
	struct pair p;

	(void)state;
	pair_open(&p);
	for (size_t n = 1; n <= len; n++) {
		const char *f = fields_of(&p, ask(&p, get_p));
		size_t wl = expect(want, sizeof(want), (const char *[]){ a }, &f, 1);

		wire_reset();
		for (size_t i = 0; i < n; i++) {
			size_t from = i * len / n, to = (i + 1) * len / n;

			assert_int_equal(app_write(&p, a + from, to - from),
					 (ssize_t)(to - from));
		}
		wire_is(want, wl);
	}
	pair_close(&p);
}

/* The head's end split at every offset: two writes, three writes (a byte
 * alone in the middle), one writev of two buffers. */
static void test_blank_line_split(void **state)
{
	static const char a[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
	static char want[4096];
	size_t len = strlen(a);
	struct pair p;

	(void)state;
	pair_open(&p);
	for (int how = 0; how < 3; how++)
		for (size_t s = 1; s + (how == 1) < len; s++) {
			const char *f = fields_of(&p, ask(&p, get_p));
			size_t wl = expect(want, sizeof(want), (const char *[]){ a }, &f, 1);

			wire_reset();
			if (how == 0) {
				assert_int_equal(app_write(&p, a, s), (ssize_t)s);
				assert_int_equal(app_write(&p, a + s, len - s),
						 (ssize_t)(len - s));
			} else if (how == 1) {
				assert_int_equal(app_write(&p, a, s), (ssize_t)s);
				assert_int_equal(app_write(&p, a + s, 1), 1);
				assert_int_equal(app_write(&p, a + s + 1, len - s - 1),
						 (ssize_t)(len - s - 1));
			} else {
				struct iovec iov[2] = { { (void *)a, s },
							{ (void *)(a + s), len - s } };

				assert_int_equal(app_writev(&p, iov, 2), (ssize_t)len);
			}
			wire_is(want, wl);
		}
	pair_close(&p);
}

/* ---- short writes ------------------------------------------------------------------ */

/*
 * The socket takes X bytes and then says EAGAIN, for every X up to the
 * whole output (before the fields, inside them, right after them, in the
 * body); the application then writes the rest, as it would. The client
 * gets the answer exactly, the application is told its own bytes only,
 * and the answer is counted once.
 */
static void test_short_write_every_offset(void **state)
{
	static char want[4096];
	size_t len = strlen(ok5), cr = strstr(ok5, "\r\n\r\n") - ok5 + 2;
	struct rl_rule_stats before = stats_of(RULE_PAGE), after;
	unsigned answers = 0;
	struct pair p;
	size_t wl = 0;

	(void)state;
	pair_open(&p);
	for (size_t x = 0; x == 0 || x < wl; x++) {
		const char *f = fields_of(&p, ask(&p, get_p));
		size_t fl = strlen(f), want_r;
		ssize_t r;

		wl = expect(want, sizeof(want), (const char *[]){ ok5 }, &f, 1);
		wire_reset();
		wire.room = x;
		errno = 4321;
		r = app_write(&p, ok5, len);
		want_r = x <= cr ? x : x <= cr + fl ? cr : x - fl;
		if (want_r == 0) {
			assert_int_equal(r, -1);
			assert_int_equal(errno, EAGAIN);
			r = 0;
		} else {
			assert_int_equal(r, (ssize_t)want_r);
			assert_int_equal(errno, 4321);
		}
		assert_int_equal(wire.len, x); /* all the socket took */
		wire.room = SIZE_MAX;
		assert_int_equal(app_write(&p, ok5 + r, len - (size_t)r),
				 (ssize_t)(len - (size_t)r));
		wire_is(want, wl);
		assert_false(rl_io_inserting(p.conn));
		answers++;
	}
	/* A socket that takes K bytes a call (a blocking one, signals). */
	for (size_t k = 1; k <= wl; k++) {
		const char *f = fields_of(&p, ask(&p, get_p));

		wl = expect(want, sizeof(want), (const char *[]){ ok5 }, &f, 1);
		wire_reset();
		wire.cap = k;
		app_write_all(&p, ok5, len);
		wire_is(want, wl);
		answers++;
	}
	after = stats_of(RULE_PAGE);
	assert_int_equal(after.answers[1] - before.answers[1], answers);
	assert_int_equal(after.answers[0], before.answers[0]);
	pair_close(&p);
}

/* The socket full again while the rest of the fields goes: EAGAIN only
 * when none of the application's bytes went, its errno untouched when
 * some did. */
static void test_eagain_in_fields(void **state)
{
	static char want[4096];
	size_t len = strlen(ok5), cr = strstr(ok5, "\r\n\r\n") - ok5 + 2;
	struct pair p;
	const char *f;
	size_t wl, fl, done;

	(void)state;
	pair_open(&p);
	f = fields_of(&p, ask(&p, get_p));
	fl = strlen(f);
	wl = expect(want, sizeof(want), (const char *[]){ ok5 }, &f, 1);
	wire_reset();
	wire.room = cr + 3;
	assert_int_equal(app_write(&p, ok5, len), (ssize_t)cr);
	assert_true(rl_io_inserting(p.conn)); /* the rest of them owed */
	/* 5 more bytes of the fields, then EAGAIN: none of the app's. */
	wire.room = 5;
	errno = 0;
	assert_int_equal(app_write(&p, ok5 + cr, len - cr), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(wire.len, cr + 8);
	/* The rest of the fields and one byte of the application's. */
	wire.room = fl - 8 + 1;
	errno = 4321;
	assert_int_equal(app_write(&p, ok5 + cr, len - cr), 1);
	assert_int_equal(errno, 4321);
	done = cr + 1;
	wire.room = SIZE_MAX;
	assert_int_equal(app_write(&p, ok5 + done, len - done), (ssize_t)(len - done));
	wire_is(want, wl);
	assert_false(rl_io_inserting(p.conn));
	pair_close(&p);
}

/*
 * Over TLS (headers_on = all through SSL_write): the application's write
 * goes out as pieces, its own bytes and the fields, each one SSL_write
 * that takes all of it or none. Whichever piece a full socket stops at,
 * the application is told "would block" (never a short count: apache
 * takes one for an error), its retry of the very same call goes on with
 * the very piece libssl holds, and the client gets every byte once, the
 * fields in place. Two pipelined answers in one write, then one split
 * over two writes.
 */
static void test_tls_pieces(void **state)
{
	static char want[4096], two[256];
	static int session;
	size_t len, wl = 0;
	struct pair p;

	(void)state;
	len = (size_t)snprintf(two, sizeof(two), "%s%s", ok5, ok5);
	pair_open(&p);
	for (size_t x = 0; x == 0 || x <= wl; x++) {
		const char *f[2];
		uint32_t k = ask(&p, "GET /p HTTP/1.1\r\nHost: x\r\n\r\n"
				     "GET /p HTTP/1.1\r\nHost: x\r\n\r\n");
		ssize_t r;
		int blocked = 0;

		f[0] = fields_of(&p, k);
		f[1] = fields_of(&p, k + 1);
		wl = expect(want, sizeof(want), (const char *[]){ ok5, ok5 }, f, 2);
		p.conn->ssl = &session;
		wire_reset();
		wire.room = x;
		tls_w.stuck = NULL;
		assert_true(rl_io_inserting(p.conn));
		/* The server retries the same call until it goes, the socket
		 * making room for `x` more bytes each time. */
		while ((r = rl_io_tls_send(p.conn, p.fd, two, len)) < 0) {
			assert_int_equal(errno, EAGAIN);
			assert_true(blocked++ < 1000);
			wire.room += x ? x : 1;
		}
		assert_int_equal(r, (ssize_t)len);
		assert_null(tls_w.stuck);
		wire_is(want, wl);
		assert_false(rl_io_inserting(p.conn));
		p.conn->ssl = NULL;
	}
	/* One answer over two SSL_writes, the head cut before its blank
	 * line: the fields go with the second. */
	{
		uint32_t k = ask(&p, get_p);
		const char *f = fields_of(&p, k);
		size_t cut = strstr(ok5, "\r\n\r\n") - ok5;

		wl = expect(want, sizeof(want), (const char *[]){ ok5 }, &f, 1);
		p.conn->ssl = &session;
		wire_reset();
		assert_int_equal(rl_io_tls_send(p.conn, p.fd, ok5, cut), (ssize_t)cut);
		assert_int_equal(rl_io_tls_send(p.conn, p.fd, ok5 + cut,
						strlen(ok5) - cut),
				 (ssize_t)(strlen(ok5) - cut));
		wire_is(want, wl);
		p.conn->ssl = NULL;
	}
	pair_close(&p);
}

/* ---- several answers ---------------------------------------------------------------- */

#define NPIPE 6

static const char *const pipe_ans[NPIPE] = {
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nA1",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nA22",
	"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nA444",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n5",
	"HTTP/1.1 500 Oops\r\nContent-Length: 2\r\n\r\nA6",
};

static uint32_t ask_pipelined(struct pair *p, const char **f)
{
	static char reqs[NPIPE * sizeof(get_p)];
	uint32_t k;

	reqs[0] = '\0';
	for (int i = 0; i < NPIPE; i++)
		strcat(reqs, get_p);
	k = ask(p, reqs);
	for (int i = 0; i < NPIPE; i++)
		f[i] = fields_of(p, k + (uint32_t)i);
	return k;
}

/*
 * Six pipelined answers in one write, more than one system call inserts
 * fields into (4): each carries its own request's fields, and the write
 * goes on in another call; a socket that fills up after the first makes
 * it come back short, the rest follows. Then a socket that takes X bytes
 * for every X.
 */
static void test_pipelined(void **state)
{
	static char app[4096], want[8192];
	size_t len = join(app, sizeof(app), pipe_ans, NPIPE), wl, first, first_app;
	struct rl_rule_stats before = stats_of(RULE_PAGE), after;
	unsigned answers = 0;
	const char *f[NPIPE];
	struct pair p;

	(void)state;
	pair_open(&p);
	ask_pipelined(&p, f);
	for (int i = 1; i < NPIPE; i++)
		assert_string_not_equal(f[i - 1], f[i]); /* Remaining went down */
	wl = expect(want, sizeof(want), pipe_ans, f, NPIPE);
	wire_reset();
	assert_int_equal(app_write(&p, app, len), (ssize_t)len);
	wire_is(want, wl);
	assert_int_equal(wire.calls, 2);
	assert_int_equal(count_of(wire.buf, wire.len, "RateLimit-Limit"), NPIPE);
	answers += NPIPE;

	/* Room for exactly the first call's bytes: up to the fifth answer's
	 * blank line. */
	ask_pipelined(&p, f);
	wl = expect(want, sizeof(want), pipe_ans, f, NPIPE);
	first_app = 0;
	for (int i = 0; i < 4; i++)
		first_app += strlen(pipe_ans[i]);
	first_app += strstr(pipe_ans[4], "\r\n\r\n") - pipe_ans[4] + 2;
	first = first_app;
	for (int i = 0; i < 4; i++)
		first += strlen(f[i]);
	wire_reset();
	wire.room = first;
	errno = 4321;
	assert_int_equal(app_write(&p, app, len), (ssize_t)first_app);
	assert_int_equal(errno, 4321);
	wire.room = SIZE_MAX;
	assert_int_equal(app_write(&p, app + first_app, len - first_app),
			 (ssize_t)(len - first_app));
	wire_is(want, wl);
	answers += NPIPE;

	for (size_t x = 0; x < wl; x++) {
		size_t done;
		ssize_t r;

		ask_pipelined(&p, f);
		wl = expect(want, sizeof(want), pipe_ans, f, NPIPE);
		wire_reset();
		wire.room = x;
		r = app_write(&p, app, len);
		if (r < 0) {
			assert_int_equal(errno, EAGAIN);
			r = 0;
		}
		assert_int_equal(wire.len, x);
		done = (size_t)r;
		wire.room = SIZE_MAX;
		app_write_all(&p, app + done, len - done);
		wire_is(want, wl);
		answers += NPIPE;
	}
	after = stats_of(RULE_PAGE);
	/* each final answer once: 4 of 6 are 2xx, one 4xx, one 5xx */
	assert_int_equal(after.answers[1] - before.answers[1], answers / NPIPE * 4);
	assert_int_equal(after.answers[3] - before.answers[3], answers / NPIPE);
	assert_int_equal(after.answers[4] - before.answers[4], answers / NPIPE);
	pair_close(&p);
}

/* Every split of `n` answers in two writes, and in two buffers of one
 * writev; `reqs` are the requests they answer. */
static void every_split(struct pair *p, const char *reqs, const char *const *ans,
			int n)
{
	static char app[65536], want[65536];
	size_t len = join(app, sizeof(app), ans, n);

	for (int how = 0; how < 2; how++)
		for (size_t s = 0; s <= len; s++) {
			const char *f[8];
			uint32_t k = ask(p, reqs);
			size_t wl;

			for (int i = 0; i < n; i++)
				f[i] = fields_of(p, k + (uint32_t)i);
			wl = expect(want, sizeof(want), ans, f, n);
			wire_reset();
			if (how == 0) {
				if (s)
					assert_int_equal(app_write(p, app, s), (ssize_t)s);
				if (s < len)
					assert_int_equal(app_write(p, app + s, len - s),
							 (ssize_t)(len - s));
			} else {
				struct iovec iov[2] = { { app, s }, { app + s, len - s } };

				assert_int_equal(app_writev(p, iov, 2), (ssize_t)len);
			}
			wire_is(want, wl);
			assert_false(rl_io_inserting(p->conn));
		}
}

/* The answer to HEAD has no body, whatever its Content-Length: the next
 * answer's head is found after it. So for 204 and 304. */
static void test_head_then_next(void **state)
{
	struct pair p;

	(void)state;
	pair_open(&p);
	every_split(&p, "HEAD /p HTTP/1.1\r\n\r\nGET /p HTTP/1.1\r\n\r\n",
		    (const char *[]){ "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n",
				      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi" }, 2);
	every_split(&p, "GET /p HTTP/1.1\r\n\r\nGET /p HTTP/1.1\r\n\r\nGET /p HTTP/1.1\r\n\r\n",
		    (const char *[]){ "HTTP/1.1 204 No Content\r\n\r\n",
				      "HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n",
				      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi" }, 3);
	pair_close(&p);
}

/* Interim answers (100, 103) go as written; the final one carries the
 * fields, and only it is counted. */
static void test_interim_then_final(void **state)
{
	static const char *const ans[3] = {
		"HTTP/1.1 100 Continue\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi",
	};
	static char app[1024], want[2048];
	size_t len = join(app, sizeof(app), ans, 3), wl;
	struct rl_rule_stats before = stats_of(RULE_PAGE), after;
	struct pair p;
	unsigned n = 0;

	(void)state;
	pair_open(&p);
	for (int how = 0; how < 2; how++)
		for (size_t s = 0; s <= len; s++) {
			const char *f[3] = { "", "", fields_of(&p, ask(&p, get_p)) };

			wl = expect(want, sizeof(want), ans, f, 3);
			wire_reset();
			if (how == 0) {
				if (s)
					assert_int_equal(app_write(&p, app, s), (ssize_t)s);
				if (s < len)
					assert_int_equal(app_write(&p, app + s, len - s),
							 (ssize_t)(len - s));
			} else {
				/* one byte at a time up to s, the rest at once */
				for (size_t i = 0; i < s; i++)
					assert_int_equal(app_write(&p, app + i, 1), 1);
				if (s < len)
					assert_int_equal(app_write(&p, app + s, len - s),
							 (ssize_t)(len - s));
			}
			wire_is(want, wl);
			assert_int_equal(count_of(wire.buf, wire.len, "RateLimit-Limit"), 1);
			n++;
		}
	after = stats_of(RULE_PAGE);
	assert_int_equal(after.answers[0], before.answers[0]);
	assert_int_equal(after.answers[1] - before.answers[1], n);
	pair_close(&p);
}

/* A chunked body (with and without trailers) and the answer after it. */
static void test_chunked_then_next(void **state)
{
	static const char two[] = "GET /p HTTP/1.1\r\n\r\nGET /p HTTP/1.1\r\n\r\n";
	struct pair p;

	(void)state;
	pair_open(&p);
	every_split(&p, two,
		    (const char *[]){ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				      "5\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
				      "HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nx" }, 2);
	every_split(&p, two,
		    (const char *[]){ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				      "4;x=y\r\n\r\n\r\n\r\n0\r\nX-T: 1\r\n\r\n",
				      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" }, 2);
	pair_close(&p);
}

/*
 * A head over 16 KiB is not framed: it and every answer after it pass
 * unchanged, however it is written (whole in one buffer, or in pieces).
 * One of exactly 16 KiB is framed, either way.
 */
static void big_head(char *out, size_t head_len, const char *body)
{
	static const char pre[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Big: ";
	size_t pl = strlen(pre), fill = head_len - pl - 4;

	memcpy(out, pre, pl);
	memset(out + pl, 'b', fill);
	memcpy(out + pl + fill, "\r\n\r\n", 4);
	strcpy(out + head_len, body);
}

static void test_big_head(void **state)
{
	static char big[RL_ANSWER_HEAD_MAX + 64], app[2 * RL_ANSWER_HEAD_MAX],
		want[2 * RL_ANSWER_HEAD_MAX];
	static const char next[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nB2";

	(void)state;
	for (int over = 0; over < 2; over++)
		for (int pieces = 0; pieces < 2; pieces++) {
			struct pair p;
			const char *f[2];
			uint32_t k;
			size_t len, wl;

			pair_open(&p);
			big_head(big, RL_ANSWER_HEAD_MAX + (size_t)over, "B1");
			k = ask(&p, "GET /p HTTP/1.1\r\n\r\nGET /p HTTP/1.1\r\n\r\n");
			f[0] = over ? "" : fields_of(&p, k);
			f[1] = over ? "" : fields_of(&p, k + 1);
			len = join(app, sizeof(app), (const char *[]){ big, next }, 2);
			wl = expect(want, sizeof(want), (const char *[]){ big, next }, f, 2);
			wire_reset();
			if (pieces) {
				for (size_t at = 0; at < len; at += 1000) {
					size_t n = len - at < 1000 ? len - at : 1000;

					assert_int_equal(app_write(&p, app + at, n), (ssize_t)n);
				}
			} else {
				assert_int_equal(app_write(&p, app, len), (ssize_t)len);
			}
			if (wire.len != wl || memcmp(wire.buf, want, wl))
				fail_msg("a head of %zu bytes written %s: %zu bytes out, "
					 "%zu expected (%s)", (size_t)RL_ANSWER_HEAD_MAX + (size_t)over,
					 pieces ? "in pieces" : "whole", wire.len, wl,
					 over ? "unchanged" : "with fields");
			pair_close(&p);
		}
}

/* An answer to a request no rule counted gets nothing, in a write that
 * inserts nothing; next to one that does, only that one gets fields. */
static void test_uncounted(void **state)
{
	static const char a[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
	struct pair p;
	uint32_t k;

	(void)state;
	pair_open(&p);
	k = ask(&p, "GET /u HTTP/1.1\r\n\r\n");
	assert_string_equal(fields_of(&p, k), "");
	assert_false(rl_io_inserting(p.conn));
	wire_reset();
	assert_int_equal(app_write(&p, a, strlen(a)), (ssize_t)strlen(a));
	wire_is(a, strlen(a));
	every_split(&p, "GET /u HTTP/1.1\r\n\r\nGET /p HTTP/1.1\r\n\r\nGET /u HTTP/1.1\r\n\r\n",
		    (const char *[]){ a, a, a }, 3);
	pair_close(&p);
}

/* ---- count_status ------------------------------------------------------------------ */

struct find {
	unsigned rule;
	const uint8_t *key;
	size_t len;
	int64_t remaining;
};

static int find_key(const struct rl_slot_view *v, void *arg)
{
	struct find *f = arg;

	if (v->rule != f->rule || v->key_len != f->len || memcmp(v->key, f->key, f->len))
		return 0;
	f->remaining = v->peek.remaining;
	return 1;
}

/* What the login rule has left for the client of `p`: a key whose state
 * says nothing any more (all given back) has all of it, 3. */
static int64_t login_left(const struct pair *p)
{
	struct find f = { rl_io_policy()->ids[RULE_LOGIN], p->conn->peer.key,
			  p->conn->peer.key_len, 3 };

	rl_table_foreach(table, rl_time_now_ns(), find_key, &f);
	return f.remaining;
}

static const char login[] = "POST /login HTTP/1.1\r\nContent-Length: 0\r\n\r\n";

/* Charged when read, given back when the status is not listed (200,
 * 404), kept when it is (401, 403); counted in the metrics by class. */
static void test_count_status(void **state)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	static const char no[] = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n";
	static const char nf[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
	static const char fb[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
	static char reqs[4 * sizeof(login)], app[1024];
	struct rl_rule_stats before = stats_of(RULE_LOGIN), after;
	struct pair p;
	size_t len;

	(void)state;
	pair_open_from(&p, 2);
	ask(&p, login);
	assert_int_equal(login_left(&p), 2);
	wire_reset();
	app_write_all(&p, ok, strlen(ok));
	assert_int_equal(login_left(&p), 3); /* a 200 is no failure */
	ask(&p, login);
	assert_int_equal(login_left(&p), 2);
	app_write_all(&p, no, strlen(no));
	assert_int_equal(login_left(&p), 2); /* a 401 is */

	/* Pipelined, the head of the 404 in pieces: the budget bounds them
	 * as they are read, the answers settle each. */
	snprintf(reqs, sizeof(reqs), "%s%s", login, login);
	ask(&p, reqs);
	assert_int_equal(login_left(&p), 0);
	len = join(app, sizeof(app), (const char *[]){ nf, fb }, 2);
	for (size_t i = 0; i < len; i += 7)
		app_write_all(&p, app + i, len - i < 7 ? len - i : 7);
	assert_int_equal(login_left(&p), 1);
	after = stats_of(RULE_LOGIN);
	assert_int_equal(after.answers[1] - before.answers[1], 1);
	assert_int_equal(after.answers[3] - before.answers[3], 3);
	pair_close(&p);
}

/* A write that stops short does not settle an answer twice, nor one whose
 * head did not go. */
static void test_count_status_short(void **state)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct pair p;

	(void)state;
	pair_open_from(&p, 3);
	for (size_t x = 0; x < strlen(ok) + 100; x++) {
		ssize_t r;

		ask(&p, login);
		assert_int_equal(login_left(&p), 2);
		wire_reset();
		wire.room = x;
		r = app_write(&p, ok, strlen(ok));
		if (r < 0)
			r = 0;
		wire.room = SIZE_MAX;
		app_write_all(&p, ok + r, strlen(ok) - (size_t)r);
		assert_int_equal(login_left(&p), 3);
	}
	pair_close(&p);
}

/*
 * One write ends a head written in pieces and begins the next one, also
 * in pieces: each head is read as the application wrote it. (The look
 * ahead once put the second head's bytes over the first's in the buffer
 * they share, so the first was read with the second's status line: a 404
 * counted as a 2xx, a 401 that count_status keeps given back.)
 */
static void test_two_heads_in_pieces(void **state)
{
	static const char a1[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno";
	static const char a2[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	static const char no[] = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\n\r\nno";
	static char app[256], want[1024];
	size_t l1 = strlen(a1), h1 = l1 - 2, h2 = strlen(a2) - 2, len, wl;
	struct rl_rule_stats before = stats_of(RULE_PAGE), after;
	unsigned n = 0;
	struct pair p;

	(void)state;
	pair_open(&p);
	len = join(app, sizeof(app), (const char *[]){ a1, a2 }, 2);
	for (size_t s = 1; s < h1; s++)
		for (size_t t = 1; t < h2; t++) {
			const char *f[2];
			uint32_t k = ask(&p, "GET /p HTTP/1.1\r\n\r\nGET /p HTTP/1.1\r\n\r\n");

			f[0] = fields_of(&p, k);
			f[1] = fields_of(&p, k + 1);
			wl = expect(want, sizeof(want), (const char *[]){ a1, a2 }, f, 2);
			wire_reset();
			assert_int_equal(app_write(&p, app, s), (ssize_t)s);
			assert_int_equal(app_write(&p, app + s, l1 + t - s), (ssize_t)(l1 + t - s));
			assert_int_equal(app_write(&p, app + l1 + t, len - l1 - t),
					 (ssize_t)(len - l1 - t));
			wire_is(want, wl);
			n++;
		}
	after = stats_of(RULE_PAGE);
	assert_int_equal(after.answers[3] - before.answers[3], n);
	assert_int_equal(after.answers[1] - before.answers[1], n);
	pair_close(&p);

	/* The failed login stays charged, the good one is given back. */
	pair_open_from(&p, 4);
	{
		static char two[2 * sizeof(login)];

		snprintf(two, sizeof(two), "%s%s", login, login);
		ask(&p, two);
	}
	assert_int_equal(login_left(&p), 1);
	len = join(app, sizeof(app), (const char *[]){ no, a2 }, 2);
	app_write_all(&p, app, 10);
	app_write_all(&p, app + 10, strlen(no) + 10 - 10);
	app_write_all(&p, app + strlen(no) + 10, len - strlen(no) - 10);
	assert_int_equal(login_left(&p), 2);
	pair_close(&p);
}

/* The same rules without headers_on = all put in force: no fields go into
 * the answers (with them the head is framed, to place them). Returns the
 * policy in force before, for back_to(). */
static const struct rl_policy *without_fields(void)
{
	const struct rl_policy *all = rl_io_policy();
	struct rl_config *plain;
	struct rl_err err;

	assert_int_equal(rl_config_parse(strstr(conf, "[limit:page]"), "plain.conf",
					 &plain, &err), 0);
	assert_int_equal(rl_io_reload(plain, &err), 0);
	return all;
}

/* Back to headers_on = all, the policy the other tests run with. */
static void back_to(const struct rl_policy *all)
{
	const struct rl_policy *plain = rl_io_policy();

	__atomic_store_n(&rl_io.pol, all, __ATOMIC_RELEASE);
	assert_ptr_not_equal(plain, all);
}

/* The answer to the last request a connection frames (Connection:
 * close, HTTP/1.0): only its status is read, and what the application
 * writes passes as written: its body in any shape, and bytes after it.
 * count_status and the metrics still see each status once; an interim
 * answer before it is not taken for it. */
static void test_last_request(void **state)
{
	static const char close_login[] =
		"POST /login HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
	static const char ok[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				 "2\r\nok\r\n0\r\n\r\n";
	static const char no[] = "HTTP/1.1 401 Unauthorized\r\n\r\nto the end";
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	static const char junk[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
	static char wire_want[1024];
	/* kept: a policy is never freed (a reload leaves the old one) */
	const struct rl_policy *all;
	struct rl_rule_stats before = stats_of(RULE_LOGIN), after;
	struct pair p;
	size_t wl;

	(void)state;
	all = without_fields();
	for (int v = 0; v < 3; v++) {
		pair_open_from(&p, 5 + v);
		ask(&p, close_login);
		assert_int_equal(p.conn->http.phase, RL_HTTP_DONE);
		assert_int_equal(login_left(&p), 2);
		wire_reset();
		wl = 0;
		if (v == 2) {
			/* an interim answer first, whole, then the final */
			app_write_all(&p, cont, strlen(cont));
			assert_false(p.conn->ans.broken);
			assert_int_equal(login_left(&p), 2);
			memcpy(wire_want, cont, strlen(cont));
			wl = strlen(cont);
		}
		{
			const char *a = v == 1 ? no : ok;
			size_t n = strlen(a);

			/* in three pieces, the first with the status line */
			app_write_all(&p, a, 14);
			assert_true(p.conn->ans.broken);
			assert_null(rl_io_written(p.fd)); /* the rest passes */
			app_write_all(&p, a + 14, 3);
			app_write_all(&p, a + 17, n - 17);
			memcpy(wire_want + wl, a, n);
			wl += n;
		}
		/* a 200 is given back, a 401 kept */
		assert_int_equal(login_left(&p), v == 1 ? 2 : 3);
		/* what the application writes after it goes as written */
		app_write_all(&p, junk, strlen(junk));
		memcpy(wire_want + wl, junk, strlen(junk));
		wl += strlen(junk);
		wire_is(wire_want, wl);
		pair_close(&p);
	}
	after = stats_of(RULE_LOGIN);
	assert_int_equal(after.answers[1] - before.answers[1], 2);
	assert_int_equal(after.answers[3] - before.answers[3], 1);
	assert_int_equal(after.answers[0] - before.answers[0], 0);
	back_to(all);
}

/* Without fields, an answer whose head is whole in a write is read ahead
 * of the walk (quick_head): a client that pipelines later, its next
 * request read while the body is still going out, still has each answer
 * settled as its own (count_status, the metrics), the first answer's rest
 * told from the second's head by the first one's length. */
static void test_pipelines_later(void **state)
{
	static const char h1[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello";
	static const char r1[] = "world";
	static const char a2[] = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n";
	const struct rl_policy *all;
	struct rl_rule_stats before = stats_of(RULE_LOGIN), after;
	char tail[128], want[256];
	struct pair p;

	(void)state;
	all = without_fields();
	pair_open_from(&p, 9);
	wire_reset();
	ask(&p, login);
	assert_int_equal(login_left(&p), 2);
	/* the head and half the body: a 200, given back */
	app_write_all(&p, h1, strlen(h1));
	assert_int_equal(login_left(&p), 3);
	assert_int_equal(p.conn->ans.h.phase, RL_HTTP_BODY);
	/* the next request, read while the body is still going out */
	ask(&p, login);
	assert_int_equal(login_left(&p), 2);
	/* the body's rest and the next answer in one write: a 401, kept */
	snprintf(tail, sizeof(tail), "%s%s", r1, a2);
	app_write_all(&p, tail, strlen(tail));
	assert_int_equal(login_left(&p), 2);
	assert_int_equal(p.conn->ans.answered, 2);
	assert_false(p.conn->ans.broken);
	snprintf(want, sizeof(want), "%s%s", h1, tail);
	wire_is(want, strlen(want));
	after = stats_of(RULE_LOGIN);
	assert_int_equal(after.answers[1] - before.answers[1], 1);
	assert_int_equal(after.answers[3] - before.answers[3], 1);
	pair_close(&p);
	back_to(all);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_write),
		cmocka_unit_test(test_head_in_pieces),
		cmocka_unit_test(test_blank_line_split),
		cmocka_unit_test(test_short_write_every_offset),
		cmocka_unit_test(test_eagain_in_fields),
		cmocka_unit_test(test_tls_pieces),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_head_then_next),
		cmocka_unit_test(test_interim_then_final),
		cmocka_unit_test(test_chunked_then_next),
		cmocka_unit_test(test_big_head),
		cmocka_unit_test(test_uncounted),
		cmocka_unit_test(test_count_status),
		cmocka_unit_test(test_count_status_short),
		cmocka_unit_test(test_two_heads_in_pieces),
		cmocka_unit_test(test_last_request),
		cmocka_unit_test(test_pipelines_later),
	};

	return cmocka_run_group_tests_name("answers", tests, setup_all, teardown_all);
}
