/* SPDX-License-Identifier: MIT */
/*
 * fuzz_answers.c - libFuzzer target for the answer framer (io_answers.c).
 *
 * From the input: rounds of up to 20 pipelined requests (GET or HEAD of a
 * counted path, of one no rule counts, POST /login charged by
 * count_status; past RL_OWED of them owed, in a long pipeline's buffer), read
 * through rl_io_read(); the application's answers to them (interim 1xx
 * first or not, a status, extra fields, a body by Content-Length, chunked
 * with extensions and trailers, none, or to the end of the connection; a
 * head over 16 KiB now and then); how the application splits them into
 * write and writev calls; and how much each system call takes (a fake
 * sendmsg that takes so many bytes, or says EAGAIN). The application
 * writes as a server does: it goes on after a short count, tries again
 * after EAGAIN.
 *
 * What must hold: the client gets the answers exactly, with one block of
 * rate-limit fields, its request's, before the blank line of each final
 * answer to a counted request (none once an answer cannot be framed);
 * what the application is told sums to what it wrote, never more than a
 * call asked; nothing stays owed at the end; each final answer is counted
 * once in its class; count_status gives back exactly the answers whose
 * status it does not list. The sanitizers catch the rest; a write loop
 * that makes no progress aborts.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <netinet/in.h>

#include "io.h"
#include "clock.h"

/* An invariant broke: say which, with what the client got and should
 * have, for the crash's log. */
#define check(cond) do { if (!(cond)) broke(#cond, __LINE__); } while (0)

static void broke(const char *what, int line);

#define MAX_REQ 20 /* a round's requests: some past RL_OWED, in the hold
			    buffer a long pipeline takes */
#define FD 1000    /* never open: what the shim does to it fails harmlessly */

/* ---- the input ------------------------------------------------------------------ */

static const uint8_t *in;
static size_t in_len;

static unsigned byte(void)
{
	if (!in_len)
		return 0;
	in_len--;
	return *in++;
}

/* ---- the socket ----------------------------------------------------------------- */

static char wire[1 << 19];
static size_t wire_len;
static int last_eagain;

/* How much this call takes: from the input, EAGAIN never twice running
 * (the socket drains), all of it once the input is used up. */
static ssize_t fake_sendmsg(int fd, const struct msghdr *m, int flags)
{
	size_t n = 0, room = SIZE_MAX;
	unsigned b = in_len ? byte() : 255;

	(void)fd;
	(void)flags;
	if (b < 40 && !last_eagain) {
		last_eagain = 1;
		errno = EAGAIN;
		return -1;
	}
	last_eagain = 0;
	if (b < 200)
		room = 1 + b % 64;
	for (size_t i = 0; i < m->msg_iovlen && n < room; i++) {
		size_t l = m->msg_iov[i].iov_len;

		if (l > room - n)
			l = room - n;
		if (wire_len + l > sizeof(wire))
			abort();
		memcpy(wire + wire_len, m->msg_iov[i].iov_base, l);
		wire_len += l;
		n += l;
	}
	return (ssize_t)n;
}

/* The requests the application reads. */
static const char *req_src;
static size_t req_len, req_off;

static ssize_t fake_recv(int fd, void *buf, size_t len, int flags)
{
	size_t n = req_len - req_off < len ? req_len - req_off : len;

	(void)fd;
	(void)flags;
	if (!n) {
		errno = EAGAIN;
		return -1;
	}
	memcpy(buf, req_src + req_off, n);
	req_off += n;
	return (ssize_t)n;
}

static ssize_t fake_send(int fd, const void *buf, size_t len, int flags)
{
	(void)fd;
	(void)buf;
	(void)flags;
	abort(); /* a 429 or 400: nothing here is refused */
	return (ssize_t)len;
}

static int fake_getfl(int fd)
{
	(void)fd;
	return O_NONBLOCK | O_RDWR;
}

static int fake_inq(int fd)
{
	(void)fd;
	return (int)(req_len - req_off);
}

static int fake_close(int fd)
{
	(void)fd;
	return 0;
}

static const struct rl_sys sys = {
	.read = read, .write = write, .close = fake_close, .recv = fake_recv,
	.send = fake_send, .sendmsg = fake_sendmsg, .getfl = fake_getfl,
	.inq = fake_inq,
};

/*
 * The clock every decision reads (the link wraps rl_time_now_ns): still
 * within an input, so what a key has left moves only by what is taken and
 * given back; 200 s on for the next, more than login's most charges of an
 * input (3 x 12 of 1000/h) take to come back, so every key starts afresh
 * and the table never fills up with live ones. (Days on would overflow
 * the signed nanoseconds of the table within a run.)
 */
static uint64_t now_ns = 1000 * RL_NS_PER_SEC;

uint64_t __wrap_rl_time_now_ns(void);

uint64_t __wrap_rl_time_now_ns(void)
{
	return now_ns;
}

/* page: counted, never near its limit; login: failures only. */
static const char conf[] =
	"[global]\n"
	"headers_on = all\n"
	"get_body = pass\n"
	"[limit:page]\n"
	"match = * /p*\n"
	"rate = 100000000/s\n"
	"[limit:login]\n"
	"match = POST /login\n"
	"rate = 1000/h\n"
	"count_status = 401 403 5xx\n";

static struct rl_table *table;
static char seg[64];
/* conf, and the same rules without headers_on = all: no fields, so the
 * answers are framed only as far as the requests after them need
 * (io_answers.c quick_head); an input's length picks one (its bytes keep
 * their meaning: the corpus still says what it said). */
static const struct rl_policy *pols[2];

static void unlink_seg(void)
{
	rl_table_unlink(seg);
}

static void setup(void)
{
	static char plain[sizeof(conf) + 16];
	static int done;
	struct rl_config *cfg;
	struct rl_err err;

	if (done)
		return;
	done = 1;
	snprintf(seg, sizeof(seg), "rlshim-fuzz-answers-%d", (int)getpid());
	rl_table_unlink(seg);
	snprintf(plain, sizeof(plain), "[global]\n%s", strstr(conf, "get_body"));
	if (rl_config_parse(conf, "fuzz.conf", &cfg, &err) ||
	    rl_table_open(seg, 256, RL_TABLE_CREATE, &table, NULL) ||
	    rl_io_start(&sys, cfg, table, &err))
		abort();
	pols[0] = rl_io_policy();
	/* Built once, over the same table (the rules keep their ids), and
	 * put in force per input as a reload would: a policy is never
	 * freed, so a reload per input would only pile them up. */
	if (rl_config_parse(plain, "plain.conf", &cfg, &err) ||
	    rl_io_reload(cfg, &err))
		abort();
	pols[1] = rl_io_policy();
	atexit(unlink_seg);
}

/* ---- what the application writes --------------------------------------------------- */

enum { REQ_GET, REQ_HEAD, REQ_UNCOUNTED, REQ_LOGIN };

struct answer {
	size_t at, len;      /* in app[] */
	size_t blank;        /* its final head's blank line, in app[] */
	unsigned status;
	int big;             /* a head over 16 KiB */
	int to_close;        /* a body to the end of the connection */
	int bad_body;        /* a chunked body that is not: framing stops */
};

/* Room for a round's 12 answers, each with a head over 16 KiB. */
static char app[1 << 19], want[1 << 19];
static size_t app_len, want_len;

static void put(const char *s, size_t n)
{
	if (app_len + n > sizeof(app))
		abort();
	memcpy(app + app_len, s, n);
	app_len += n;
}

static void puts_(const char *s)
{
	put(s, strlen(s));
}

static void putf(const char *fmt, unsigned long v)
{
	char b[64];

	snprintf(b, sizeof(b), fmt, v);
	puts_(b);
}

static const unsigned statuses[] = { 200, 201, 204, 206, 304, 401, 403, 404,
				     429, 500, 503, 302 };

/* Body bytes: anything, heads and blank lines included. */
static void body_bytes(size_t n)
{
	static const char junk[] = "\r\n\r\nHTTP/1.1 200 OK\r\n\r\n0\r\n";

	for (size_t i = 0; i < n; i++) {
		unsigned b = byte();
		char c = (char)(b & 1 ? junk[(b >> 1) % (sizeof(junk) - 1)] : b);

		put(&c, 1);
	}
}

/* The answer to a request of `kind`; `last` if nothing may follow a body
 * to the end of the connection. */
static void gen_answer(struct answer *a, int kind, int last)
{
	unsigned b = byte(), st = statuses[byte() % (sizeof(statuses) / sizeof(statuses[0]))];
	unsigned nf = byte() % 4;
	int head_only = kind == REQ_HEAD || st == 204 || st == 304;

	a->at = app_len;
	if (b & 1)
		puts_("HTTP/1.1 100 Continue\r\n\r\n");
	if (b & 2)
		puts_("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n");
	a->status = st;
	putf("HTTP/1.1 %lu X\r\n", st);
	for (unsigned i = 0; i < nf; i++) {
		unsigned l = byte() % 40;

		puts_("X-F: ");
		for (unsigned j = 0; j < l; j++)
			put(&"abc def;=,\t"[byte() % 11], 1);
		puts_("\r\n");
	}
	a->big = (b & 0xfc) == 0xfc;
	if (a->big) {
		puts_("X-Big: ");
		for (unsigned i = 0; i <= RL_ANSWER_HEAD_MAX; i++)
			put("b", 1);
		puts_("\r\n");
	}
	a->to_close = a->bad_body = 0;
	switch (head_only ? 0 : 1 + (b >> 2) % 3) {
	case 0: /* no body, a length said or not */
		if (b & 4)
			putf("Content-Length: %lu\r\n", byte() % 50);
		a->blank = app_len;
		puts_("\r\n");
		break;
	case 1: {
		unsigned n = byte() % 60;

		putf("Content-Length: %lu\r\n", n);
		a->blank = app_len;
		puts_("\r\n");
		body_bytes(n);
		break;
	}
	case 2: {
		unsigned nc = byte() % 4;

		puts_("Transfer-Encoding: chunked\r\n");
		a->blank = app_len;
		puts_("\r\n");
		if ((byte() & 0x1f) == 0x1f) {
			a->bad_body = 1;
			puts_("zz\r\n");
			body_bytes(byte() % 20);
			break;
		}
		for (unsigned i = 0; i < nc; i++) {
			unsigned n = 1 + byte() % 30;

			putf("%lx", n);
			if (byte() & 1)
				puts_(";ext=v");
			puts_("\r\n");
			body_bytes(n);
			puts_("\r\n");
		}
		puts_("0\r\n");
		if (byte() & 1)
			puts_("X-Trailer: t\r\n");
		puts_("\r\n");
		break;
	}
	case 3:
		if (last) { /* to the end of the connection */
			a->to_close = 1;
			a->blank = app_len;
			puts_("\r\n");
			body_bytes(byte() % 40);
		} else {
			puts_("Content-Length: 0\r\n");
			a->blank = app_len;
			puts_("\r\n");
		}
		break;
	}
	a->len = app_len - a->at;
}

/* ---- one connection ---------------------------------------------------------------- */

static ssize_t do_read(void *ctx)
{
	struct iovec *v = ctx;

	return fake_recv(FD, v->iov_base, v->iov_len, 0);
}

static ssize_t app_writev(struct rl_conn *c0, const struct iovec *iov, int cnt)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt };
	struct rl_conn *c = rl_io_written(FD);
	size_t total = 0;
	ssize_t r;

	(void)c0;
	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	if (c && rl_io_write(c, iov, cnt))
		abort(); /* never answered by the shim */
	if (c && rl_io_inserting(c) && total > 0)
		return rl_io_send(c, FD, iov, cnt, 0, NULL);
	r = fake_sendmsg(FD, &m, 0);
	if (c && r > 0)
		rl_io_wrote(c, FD, iov, cnt, (size_t)r);
	return r;
}

/* The application writes app[] as the input says, as a server would. */
static void write_all(struct rl_conn *c)
{
	size_t done = 0;
	unsigned rounds = 0;

	while (done < app_len) {
		unsigned b = in_len ? byte() : 255; /* the rest at once */
		size_t n = b >= 224 ? app_len - done : 1 + (size_t)(b % 97) * (b % 7 + 1);
		struct iovec iov[48];
		unsigned c3 = byte();
		/* mostly 1 to 3 buffers; now and then more than one system
		 * call takes (rl_io_send's view of 28) */
		int cnt = c3 >= 0xf0 ? 30 + (int)(c3 % 16) : 1 + (int)(c3 % 3);
		size_t at = done;
		ssize_t r;

		check(++rounds < 100000); /* no progress */
		if (n > app_len - done)
			n = app_len - done;
		for (int i = 0; i < cnt; i++) {
			size_t l = i == cnt - 1 ? done + n - at :
				   cnt > 3 ? byte() % 4 : (n * (size_t)(byte() % 8)) / 8;

			if (l > done + n - at)
				l = done + n - at;
			iov[i].iov_base = app + at;
			iov[i].iov_len = l;
			at += l;
		}
		errno = 4321;
		r = app_writev(c, iov, cnt);
		if (r < 0) {
			check(errno == EAGAIN);
			continue;
		}
		check((size_t)r <= n && (r > 0 || n == 0));
		/* a count comes back with the errno as it was */
		check(errno == 4321);
		done += (size_t)r;
	}
}

/* Fields of request `o` as its answer carries them (headers = ratelimit). */
static size_t fields(const struct rl_owed *o, char *out, size_t cap)
{
	if (o->near < 0)
		return 0;
	return (size_t)snprintf(out, cap,
				"RateLimit-Limit: %u\r\nRateLimit-Remaining: %u\r\n"
				"RateLimit-Reset: %llu\r\n", o->limit, o->remaining,
				(unsigned long long)rl_time_ceil_sec(o->reset_ns));
}

static void broke(const char *what, int line)
{
	fprintf(stderr, "fuzz_answers.c:%d: %s\n--- the client got %zu bytes:\n%.*s\n"
		"--- it should have got %zu:\n%.*s\n---\n", line, what, wire_len,
		(int)wire_len, wire, want_len, (int)want_len, want);
	abort();
}

static void want_put(const char *s, size_t n)
{
	if (want_len + n > sizeof(want))
		abort();
	memcpy(want + want_len, s, n);
	want_len += n;
}

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

static int64_t login_left(const struct rl_conn *c)
{
	struct find f = { rl_io_policy()->ids[1], c->peer.key, c->peer.key_len,
			  1000 };

	rl_table_foreach(table, rl_time_now_ns(), find_key, &f);
	return f.remaining;
}

static void class_counts(unsigned rule, uint64_t out[5])
{
	struct rl_rule_stats st;
	uint64_t sum = 0;

	if (rl_table_rule_stats(table, rl_io_policy()->ids[rule], &st))
		abort();
	for (int i = 0; i < 5; i++)
		out[i] = st.answers[i];
	for (int i = 0; i < RL_SERVICE_BUCKETS; i++)
		sum += st.service[i];
	if (sum != st.answers[0] + st.answers[1] + st.answers[2] + st.answers[3] +
		   st.answers[4])
		abort();
}

/* One round: requests, all read; their answers, all written; checked. */
static int round_trip(struct rl_conn *c, int *framing)
{
	static const char *const reqs[] = {
		"GET /p HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD /p HTTP/1.1\r\n\r\n",
		"GET /u HTTP/1.1\r\n\r\n",
		"POST /login HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
	};
	static char rbuf[MAX_REQ * 64], buf[65536];
	struct answer ans[MAX_REQ];
	int kind[MAX_REQ], n = 1 + (int)(byte() % MAX_REQ), ended = 0;
	uint64_t page0[5], page1[5], login0[5], login1[5];
	uint64_t want_page[5] = { 0 }, want_login[5] = { 0 };
	int64_t left0, left1, given = 0;
	uint32_t first = c->delivered + 1;
	size_t rl = 0;

	for (int i = 0; i < n; i++) {
		kind[i] = (int)(byte() % 4);
		memcpy(rbuf + rl, reqs[kind[i]], strlen(reqs[kind[i]]));
		rl += strlen(reqs[kind[i]]);
	}
	req_src = rbuf;
	req_len = rl;
	req_off = 0;
	while (req_off < req_len) {
		struct iovec v = { buf, sizeof(buf) };
		struct rl_read r = { FD, &v, 1, 0, do_read, &v, NULL };
		size_t at = req_off;
		ssize_t got = rl_io_read(c, &r);

		if (got <= 0 || memcmp(buf, rbuf + at, (size_t)got))
			abort();
	}
	if (c->state != RL_CONN_HTTP || c->delivered != first - 1 + (uint32_t)n)
		abort();
	/* Past RL_OWED answers owed a request's record goes to the hold
	 * buffer a long pipeline takes (RL_OWED_MORE more): a round's
	 * MAX_REQ all have one. */
	app_len = want_len = 0;
	for (int i = 0; i < n; i++) {
		const struct rl_owed *o = rl_owed_find(c, first + (uint32_t)i);
		struct answer *a = &ans[i];
		char f[RL_FIELDS_MAX];
		int rec = o != NULL;
		size_t fl;

		if (!rec)
			abort();
		gen_answer(a, kind[i], i == n - 1);
		fl = rec ? fields(o, f, sizeof(f)) : 0;
		/* Counted, and given back as its status says, once its status
		 * line is out: a head over 16 KiB too, though it passes
		 * unchanged and the framing stops there. */
		if (*framing) {
			if (kind[i] == REQ_LOGIN) {
				want_login[a->status / 100 - 1]++;
				if (a->status != 401 && a->status != 403 && a->status / 100 != 5)
					given++;
			} else if (kind[i] != REQ_UNCOUNTED) {
				want_page[a->status / 100 - 1]++;
			}
		}
		if (*framing && !a->big) {
			want_put(app + a->at, a->blank - a->at);
			want_put(f, fl);
			want_put(app + a->blank, a->at + a->len - a->blank);
			if (a->to_close || a->bad_body) {
				*framing = 0;
				ended = 1;
			}
		} else {
			*framing = 0;
			want_put(app + a->at, a->len);
		}
	}
	class_counts(0, page0);
	class_counts(1, login0);
	left0 = login_left(c);
	wire_len = 0;
	last_eagain = 0;
	write_all(c);
	check(wire_len == want_len && memcmp(wire, want, want_len) == 0);
	/* nothing owed: all of it went */
	check(!rl_io_inserting(c) && c->pend_off == c->pend_len);
	class_counts(0, page1);
	class_counts(1, login1);
	left1 = login_left(c);
	for (int i = 0; i < 5; i++)
		check(page1[i] - page0[i] == want_page[i] &&
		      login1[i] - login0[i] == want_login[i]);
	check(left1 - left0 == given);
	return ended || !*framing;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in peer = { .sin_family = AF_INET };
	struct rl_conn *c;
	int framing = 1;
	unsigned rounds;

	setup();
	in = data;
	in_len = size;
	__atomic_store_n(&rl_io.pol, pols[size & 1], __ATOMIC_RELEASE);
	now_ns += 200 * RL_NS_PER_SEC;
	peer.sin_addr.s_addr = htonl(0x0a000001u);
	if (rl_io_accepted(-1, FD, (struct sockaddr *)&peer, sizeof(peer)) != 1)
		abort();
	c = rl_conn_of(rl_fd_get(FD));
	if (!c)
		abort();
	rounds = 1 + byte() % 3;
	for (unsigned r = 0; r < rounds; r++)
		if (round_trip(c, &framing))
			break;
	rl_io_close(FD);
	{
		/* Nothing of it stays: no connection, no buffer of a head. */
		struct rl_conn_stats st;

		rl_conn_stats(&st);
		check(st.conns_live == 0 && st.holds_live == 0);
	}
	return 0;
}
