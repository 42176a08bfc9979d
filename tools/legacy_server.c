/* SPDX-License-Identifier: MIT */
/*
 * legacy_server - the "unmodifiable legacy server" that rlshim protects.
 *
 * It is deliberately old-fashioned: one connection at a time, blocking
 * accept(2) and blocking read(2) into 4096-byte slices, write(2) for replies,
 * no threads, no fork, no poll. That is the shape of program the shim has to
 * cope with, so the tests run it under LD_PRELOAD.
 *
 * Its HTTP/1.x parser is strict and complete (Content-Length and chunked
 * bodies, pipelining, keep-alive) because it is also the tests' oracle: the
 * access log and POST /echo show exactly which bytes reached the application.
 *
 *   legacy_server [-p PORT]      (default 8080; 0 picks a free port)
 *
 * Routes: GET / and /books; POST /sms and /echo (the body back); POST
 * /login (200 for the body "pass=secret", else 401); /status/NNN (that
 * status; ?ms=N answers N ms late); GET /split/N (the answer in writes of N bytes); else 404.
 *
 * stdout: one line per request,
 *   ACCESS <peer-ip> "<METHOD> <target> <HTTP/x.y>" <status> <body-bytes>
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define READ_SIZE	4096			/* bytes asked of each read(2) */
#define HEAD_MAX	(64 * 1024)		/* request line + headers */
#define BODY_MAX	(64ULL * 1024 * 1024)	/* decoded request body */
#define CHUNK_LINE_MAX	4096			/* chunk size + extensions */
#define BUF_KEEP	(128 * 1024)		/* shrink back to this when idle */
#define IO_TIMEOUT_S	10

/* Set from the signal handler; accept() and read() return EINTR to see it. */
static volatile sig_atomic_t stop;

struct conn {
	int fd;
	char peer[INET6_ADDRSTRLEN];
	char *buf;		/* received, not yet consumed bytes */
	size_t len, cap;
	size_t scan;		/* where the search for CRLFCRLF resumes */
};

struct req {
	int have_line;		/* request line parsed: offsets below valid */
	size_t meth_off, meth_len, tgt_off, tgt_len, ver_off;
	int minor;		/* HTTP/1.minor */
	size_t head_len;	/* including the final CRLFCRLF */
	uint64_t clen;
	int has_clen, chunked, expect_100, conn_close, conn_keep;
	size_t body_len;	/* decoded; the body is at buf + head_len */
	size_t consumed;	/* bytes of buf this request used */
	int keep_alive;
};

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/*
 * Read one slice more into the connection's buffer, growing it as needed.
 * Returns the byte count, 0 at end of file, -1 on error, receive timeout
 * or a termination signal: in every case but the first the caller closes.
 */
static ssize_t fill(struct conn *c)
{
	ssize_t n;

	if (c->cap - c->len < READ_SIZE) {
		size_t cap = c->cap ? c->cap * 2 : 2 * READ_SIZE;
		char *p;

		while (cap - c->len < READ_SIZE)
			cap *= 2;
		p = realloc(c->buf, cap);
		if (!p)
			return -1;
		c->buf = p;
		c->cap = cap;
	}
	for (;;) {
		n = read(c->fd, c->buf + c->len, READ_SIZE);
		if (n >= 0)
			break;
		if (errno != EINTR || stop)
			return -1;
	}
	c->len += n;
	return n;
}

/* Drop the first n bytes; what follows is the next pipelined request. */
static void consume(struct conn *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
	c->scan = 0;
	/* One large body must not pin its buffer for the connection's life. */
	if (c->cap > BUF_KEEP && c->len <= BUF_KEEP / 2) {
		char *p = realloc(c->buf, BUF_KEEP);

		if (p) {
			c->buf = p;
			c->cap = BUF_KEEP;
		}
	}
}

/* GET /split/N: the answer goes out in write(2)s of N bytes at most, so
 * that its head comes in pieces (0: one write). */
static size_t write_piece;

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, write_piece && n > write_piece ?
					       write_piece : n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;	/* EPIPE, or the send timeout */
		}
		p += w;
		n -= w;
	}
	return 0;
}

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 413: return "Content Too Large";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 505: return "HTTP Version Not Supported";
	}
	return "Unknown";
}

static int is_tchar(unsigned char ch)
{
	return ch && ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= 'A' && ch <= 'Z') || strchr("!#$%&'*+-.^_`|~", ch));
}

static int is_method(const struct conn *c, const struct req *r, const char *m)
{
	return r->meth_len == strlen(m) &&
	       !memcmp(c->buf + r->meth_off, m, r->meth_len);
}

/*
 * Log the request, then send the response. The log line comes first so that
 * a test which has read the response can already find it on stdout.
 * Returns 0, or -1 when the connection is broken.
 */
static int respond(struct conn *c, const struct req *r, int status,
		   const char *ctype, const char *body, size_t blen,
		   const char *extra)
{
	int head_only = r->have_line && is_method(c, r, "HEAD");
	const char *ver = r->have_line && r->minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
	const char *cn = !r->keep_alive ? "Connection: close\r\n" :
			 r->minor == 0 ? "Connection: keep-alive\r\n" : "";
	char head[512];
	size_t hlen, total;
	char *out;
	int err;

	if (r->have_line)
		printf("ACCESS %s \"%.*s %.*s %.8s\" %d %zu\n", c->peer,
		       (int)r->meth_len, c->buf + r->meth_off,
		       (int)r->tgt_len, c->buf + r->tgt_off,
		       c->buf + r->ver_off, status, r->body_len);
	else
		printf("ACCESS %s \"- - -\" %d 0\n", c->peer, status);
	fflush(stdout);

	hlen = snprintf(head, sizeof(head),
			"%s %d %s\r\nContent-Type: %s\r\n"
			"Content-Length: %zu\r\n%s%s\r\n",
			ver, status, reason(status), ctype, blen, cn,
			extra ? extra : "");
	if (head_only)
		blen = 0;
	/* One write: a header-then-body pair would meet Nagle's algorithm. */
	total = hlen + blen;
	out = malloc(total);
	if (!out)
		return -1;
	memcpy(out, head, hlen);
	memcpy(out + hlen, body, blen);
	err = write_all(c->fd, out, total);
	free(out);
	write_piece = 0;
	return err;
}

static int respond_error(struct conn *c, struct req *r, int status)
{
	char body[96];
	int n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}",
			 reason(status));

	r->keep_alive = 0;
	return respond(c, r, status, "application/json", body, n, NULL);
}

/* Connection: a comma-separated token list; only two tokens matter here. */
static void parse_connection(struct req *r, const char *v, size_t n)
{
	while (n) {
		size_t t = 0;

		while (n && (*v == ' ' || *v == '\t' || *v == ',')) {
			v++;
			n--;
		}
		while (t < n && v[t] != ',' && v[t] != ' ' && v[t] != '\t')
			t++;
		if (t == 5 && !strncasecmp(v, "close", 5))
			r->conn_close = 1;
		if (t == 10 && !strncasecmp(v, "keep-alive", 10))
			r->conn_keep = 1;
		v += t;
		n -= t;
	}
}

/* Returns 0 or the error status for a field line; v is trimmed of OWS. */
static int parse_field(struct req *r, const char *name, size_t nlen,
		       const char *v, size_t vlen)
{
	uint64_t cl = 0;
	size_t i;

	if (nlen == 14 && !strncasecmp(name, "content-length", 14)) {
		if (!vlen)
			return 400;
		for (i = 0; i < vlen; i++) {
			if (v[i] < '0' || v[i] > '9')
				return 400;
			if (cl <= BODY_MAX)	/* saturate; 413 below */
				cl = cl * 10 + (v[i] - '0');
		}
		/* A repeat is only tolerable when it says the same thing. */
		if (r->has_clen && r->clen != cl)
			return 400;
		r->has_clen = 1;
		r->clen = cl;
	} else if (nlen == 17 && !strncasecmp(name, "transfer-encoding", 17)) {
		if (r->chunked)
			return 400;	/* chunked applied twice */
		if (vlen != 7 || strncasecmp(v, "chunked", 7))
			return 501;	/* a coding we cannot decode */
		r->chunked = 1;
	} else if (nlen == 10 && !strncasecmp(name, "connection", 10)) {
		parse_connection(r, v, vlen);
	} else if (nlen == 6 && !strncasecmp(name, "expect", 6)) {
		r->expect_100 = vlen == 12 && !strncasecmp(v, "100-continue", 12);
	}
	return 0;
}

/* Parse buf[0, head_len). Returns 0 or the status of the error reply. */
static int parse_head(struct conn *c, struct req *r)
{
	const unsigned char *b = (const unsigned char *)c->buf;
	size_t end = r->head_len - 2, i, p, le;
	int err;

	/* Every CR must start a CRLF and every LF end one: no bare LF. */
	for (i = 0; i < r->head_len; i++) {
		if (b[i] == '\r' && b[i + 1] != '\n')
			return 400;
		if (b[i] == '\n' && (!i || b[i - 1] != '\r'))
			return 400;
	}

	/* Request line: method SP request-target SP HTTP/1.x CRLF */
	le = (const char *)memmem(b, end, "\r\n", 2) - (const char *)b;
	for (p = 0; p < le && is_tchar(b[p]); p++)
		;
	if (!p || p >= le || b[p] != ' ')
		return 400;
	r->meth_off = 0;
	r->meth_len = p++;
	r->tgt_off = p;
	while (p < le && b[p] > ' ' && b[p] != 0x7f)
		p++;
	r->tgt_len = p - r->tgt_off;
	if (!r->tgt_len || p >= le || b[p] != ' ' || le - p - 1 != 8 ||
	    memcmp(b + p + 1, "HTTP/", 5) || b[p + 7] != '.' ||
	    b[p + 6] < '0' || b[p + 6] > '9' || b[p + 8] < '0' || b[p + 8] > '9')
		return 400;
	r->ver_off = p + 1;
	r->have_line = 1;
	r->minor = 1;		/* what a 505 is answered in */
	if (b[p + 6] != '1')
		return 505;
	r->minor = b[p + 8] - '0';

	/* Field lines: name ":" OWS value OWS CRLF */
	for (p = le + 2; p < end; p = le + 2) {
		size_t n, vs, ve;

		le = (const char *)memmem(b + p, end - p, "\r\n", 2) -
		     (const char *)b;
		for (n = p; n < le && is_tchar(b[n]); n++)
			;
		/* Also refuses obs-fold (a line starting with SP or HT). */
		if (n == p || n >= le || b[n] != ':')
			return 400;
		for (vs = n + 1; vs < le && (b[vs] == ' ' || b[vs] == '\t'); vs++)
			;
		for (ve = le; ve > vs && (b[ve - 1] == ' ' || b[ve - 1] == '\t'); ve--)
			;
		for (i = vs; i < ve; i++)
			if ((b[i] < ' ' && b[i] != '\t') || b[i] == 0x7f)
				return 400;
		err = parse_field(r, c->buf + p, n - p, c->buf + vs, ve - vs);
		if (err)
			return err;
	}

	/* Both framings at once is how requests get smuggled. */
	if (r->has_clen && r->chunked)
		return 400;
	if (r->has_clen && r->clen > BODY_MAX)
		return 413;
	if (r->conn_close)
		r->keep_alive = 0;
	else
		r->keep_alive = r->minor ? 1 : r->conn_keep;
	return 0;
}

/* Returns 0 with a parsed head, -1 to close quietly, or an error status. */
static int read_head(struct conn *c, struct req *r)
{
	for (;;) {
		char *e;

		/* Empty lines before a request line are to be ignored. */
		while (c->len >= 2 && c->buf[0] == '\r' && c->buf[1] == '\n')
			consume(c, 2);
		if (c->len) {
			size_t from = c->scan > 3 ? c->scan - 3 : 0;

			e = memmem(c->buf + from, c->len - from, "\r\n\r\n", 4);
			if (e) {
				r->head_len = e + 4 - c->buf;
				break;
			}
			c->scan = c->len;
			if (c->len >= HEAD_MAX)
				return 431;
		}
		/* End of file, between requests or inside one: no reply. */
		if (fill(c) <= 0)
			return -1;
	}
	if (r->head_len > HEAD_MAX)
		return 431;
	return parse_head(c, r);
}

/* 1*HEXDIG [ BWS ";" extensions ]; extensions are ignored. */
static int parse_chunk_size(const char *s, size_t n, uint64_t *size)
{
	size_t i;

	*size = 0;
	for (i = 0; i < n; i++) {
		char ch = s[i];
		int d = ch >= '0' && ch <= '9' ? ch - '0' :
			ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
			ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;

		if (d < 0)
			break;
		if (*size > BODY_MAX)
			return 413;
		*size = *size * 16 + d;
	}
	if (!i)
		return 400;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i == n || s[i] == ';' ? 0 : 400;
}

enum { CH_SIZE, CH_DATA, CH_DATA_CRLF, CH_TRAILER, CH_DONE };

/*
 * Decode a chunked body in place: data is moved down to follow the head, so
 * the body ends up at buf + head_len like a Content-Length one, and the
 * buffer never holds more than the decoded body plus unparsed bytes.
 */
static int read_chunked(struct conn *c, struct req *r)
{
	size_t pos = r->head_len, out = r->head_len, trailer = 0, n;
	uint64_t left = 0;
	int st = CH_SIZE, err;
	char *e;

	while (st != CH_DONE) {
		switch (st) {
		case CH_SIZE:
		case CH_TRAILER:
			e = memmem(c->buf + pos, c->len - pos, "\r\n", 2);
			if (!e) {
				if (c->len - pos > CHUNK_LINE_MAX)
					return 400;
				break;
			}
			n = e - (c->buf + pos);
			if (st == CH_TRAILER) {
				trailer += n + 2;
				if (trailer > HEAD_MAX)
					return 431;
				st = n ? CH_TRAILER : CH_DONE;
			} else {
				err = parse_chunk_size(c->buf + pos, n, &left);
				if (err)
					return err;
				if (left > BODY_MAX - (out - r->head_len))
					return 413;
				st = left ? CH_DATA : CH_TRAILER;
			}
			pos += n + 2;
			continue;
		case CH_DATA:
			n = c->len - pos < left ? c->len - pos : left;
			if (!n)
				break;
			memmove(c->buf + out, c->buf + pos, n);
			out += n;
			pos += n;
			left -= n;
			r->body_len = out - r->head_len;
			if (!left)
				st = CH_DATA_CRLF;
			continue;
		case CH_DATA_CRLF:
			if (c->len - pos < 2)
				break;
			if (c->buf[pos] != '\r' || c->buf[pos + 1] != '\n')
				return 400;
			pos += 2;
			st = CH_SIZE;
			continue;
		}
		/* Need more: close the gap left by decoding, then read. */
		memmove(c->buf + out, c->buf + pos, c->len - pos);
		c->len -= pos - out;
		pos = out;
		if (fill(c) <= 0)
			return -1;
	}
	r->consumed = pos;
	return 0;
}

/* Returns 0 with the whole body in the buffer, -1 to close, or a status. */
static int read_body(struct conn *c, struct req *r)
{
	/* Tell a client waiting on Expect: 100-continue to go ahead. */
	if (r->expect_100 && r->minor && c->len == r->head_len &&
	    (r->chunked || r->clen) &&
	    write_all(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25))
		return -1;
	if (r->chunked)
		return read_chunked(c, r);
	while (c->len - r->head_len < r->clen)
		if (fill(c) <= 0)
			return -1;
	r->body_len = r->clen;
	r->consumed = r->head_len + r->clen;
	return 0;
}

static int route(struct conn *c, struct req *r)
{
	static const char books[] = "{\"books\":[\"SICP\",\"TAOCP\",\"K&R\"]}";
	static const char sent[] = "{\"sent\":true}";
	static const char root[] = "legacy_server\n";
	static const char nf[] = "{\"error\":\"not found\"}";
	static const char na[] = "{\"error\":\"method not allowed\"}";
	const char *path = c->buf + r->tgt_off, *q;
	size_t plen = r->tgt_len;
	int get = is_method(c, r, "GET") || is_method(c, r, "HEAD");
	int post = is_method(c, r, "POST");

	/* absolute-form: http://host/path */
	if (plen > 7 && !strncasecmp(path, "http://", 7)) {
		q = memchr(path + 7, '/', plen - 7);
		if (q) {
			plen -= q - path;
			path = q;
		} else {
			path = "/";
			plen = 1;
		}
	}
	q = memchr(path, '?', plen);
	if (q)
		plen = q - path;

#define PATH_IS(s) (plen == sizeof(s) - 1 && !memcmp(path, s, plen))
	if (PATH_IS("/books"))
		return get ? respond(c, r, 200, "application/json", books,
				     sizeof(books) - 1, NULL) :
			     respond(c, r, 405, "application/json", na,
				     sizeof(na) - 1, "Allow: GET, HEAD\r\n");
	if (PATH_IS("/sms") || PATH_IS("/echo")) {
		if (!post)
			return respond(c, r, 405, "application/json", na,
				       sizeof(na) - 1, "Allow: POST\r\n");
		if (PATH_IS("/sms"))
			return respond(c, r, 200, "application/json", sent,
				       sizeof(sent) - 1, NULL);
		return respond(c, r, 200, "application/octet-stream",
			       c->buf + r->head_len, r->body_len, NULL);
	}
	if (PATH_IS("/login")) {
		/* POST /login: 200 for the body "pass=secret", else 401 */
		static const char ok[] = "{\"login\":true}";
		static const char no[] = "{\"login\":false}";

		if (!post)
			return respond(c, r, 405, "application/json", na,
				       sizeof(na) - 1, "Allow: POST\r\n");
		if (r->body_len == 11 && !memcmp(c->buf + r->head_len, "pass=secret", 11))
			return respond(c, r, 200, "application/json", ok,
				       sizeof(ok) - 1, NULL);
		return respond(c, r, 401, "application/json", no, sizeof(no) - 1,
			       "WWW-Authenticate: Basic realm=\"legacy\"\r\n");
	}
	if (plen > 8 && !memcmp(path, "/status/", 8)) {
		/* /status/NNN: that status, any method (204 and 304 without
		 * a body) */
		int st = atoi(path + 8);
		const char *ms = memmem(path, r->tgt_len - (size_t)(path - (c->buf + r->tgt_off)),
					"?ms=", 4);

		if (st < 200 || st > 599)
			st = 400;
		if (ms) /* ?ms=N: answered N ms late (a slow handler) */
			usleep((useconds_t)atoi(ms + 4) * 1000);
		return respond(c, r, st, "application/json", st == 204 || st == 304 ? "" : nf,
			       st == 204 || st == 304 ? 0 : sizeof(nf) - 1, NULL);
	}
	if (plen > 7 && !memcmp(path, "/split/", 7)) {
		write_piece = (size_t)atoi(path + 7);
		return respond(c, r, 200, "text/plain", root, sizeof(root) - 1, NULL);
	}
	if (PATH_IS("/"))
		return get ? respond(c, r, 200, "text/plain", root,
				     sizeof(root) - 1, NULL) :
			     respond(c, r, 405, "application/json", na,
				     sizeof(na) - 1, "Allow: GET, HEAD\r\n");
#undef PATH_IS
	return respond(c, r, 404, "application/json", nf, sizeof(nf) - 1, NULL);
}

/*
 * After an error reply the client may still be sending; closing with unread
 * input makes the kernel answer with RST, which can destroy the reply before
 * the client reads it. So half-close and discard input for up to 2 s first
 * (nginx's lingering close).
 */
static void linger(int fd)
{
	struct timeval tv = { .tv_usec = 250000 };
	struct timespec t0, t;
	char sink[READ_SIZE];

	shutdown(fd, SHUT_WR);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (read(fd, sink, sizeof(sink)) <= 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!stop && t.tv_sec - t0.tv_sec < 2);
}

/* Serve one request. Returns 1 to read the next one, 0 to close. */
static int serve_one(struct conn *c)
{
	struct req r;
	int st;

	memset(&r, 0, sizeof(r));
	st = read_head(c, &r);
	if (!st)
		st = read_body(c, &r);
	if (st < 0)
		return 0;
	if (st > 0) {
		if (!respond_error(c, &r, st))
			linger(c->fd);
		return 0;
	}
	if (route(c, &r))
		return 0;
	consume(c, r.consumed);
	return r.keep_alive;
}

static void serve(int fd, const struct sockaddr_storage *ss)
{
	struct timeval tv = { .tv_sec = IO_TIMEOUT_S };
	struct conn c = { .fd = fd };
	const struct sockaddr_in6 *s6 = (const void *)ss;
	const struct sockaddr_in *s4 = (const void *)ss;

	if (ss->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
		inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], c.peer,
			  sizeof(c.peer));
	else if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &s6->sin6_addr, c.peer, sizeof(c.peer));
	else
		inet_ntop(AF_INET, &s4->sin_addr, c.peer, sizeof(c.peer));

	/* A stalled client, reading or writing, must not hold us forever. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (!stop && serve_one(&c))
		;
	free(c.buf);
}

/* One IPv6 socket takes IPv4 too; IPv4 alone where IPv6 is missing. */
static int listen_on(int port, int family)
{
	struct sockaddr_storage ss = { .ss_family = family };
	struct sockaddr_in6 *s6 = (void *)&ss;
	struct sockaddr_in *s4 = (void *)&ss;
	int one = 1, zero = 0, fd, err;

	fd = socket(family, SOCK_STREAM, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET6) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		s6->sin6_addr = in6addr_any;
		s6->sin6_port = htons(port);
	} else {
		s4->sin_addr.s_addr = htonl(INADDR_ANY);
		s4->sin_port = htons(port);
	}
	if (bind(fd, (struct sockaddr *)&ss, family == AF_INET6 ?
		 sizeof(*s6) : sizeof(*s4)) || listen(fd, 128)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };	/* no SA_RESTART */
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	long port = 8080;
	char *end;
	int opt, lfd;

	while ((opt = getopt(argc, argv, "p:")) != -1) {
		if (opt != 'p')
			goto usage;
		port = strtol(optarg, &end, 10);
		if (!*optarg || *end || port < 0 || port > 65535)
			goto usage;
	}
	if (optind != argc)
		goto usage;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	lfd = listen_on(port, AF_INET6);
	if (lfd == -EAFNOSUPPORT || lfd == -EADDRNOTAVAIL)
		lfd = listen_on(port, AF_INET);
	if (lfd < 0) {
		fprintf(stderr, "legacy_server: port %ld: %s\n", port,
			strerror(-lfd));
		return 1;
	}
	/* With -p 0 the kernel chose; say which port that was. */
	if (!getsockname(lfd, (struct sockaddr *)&ss, &sl))
		port = ntohs(ss.ss_family == AF_INET6 ?
			     ((struct sockaddr_in6 *)&ss)->sin6_port :
			     ((struct sockaddr_in *)&ss)->sin_port);
	fprintf(stderr, "legacy_server: listening on port %ld\n", port);
	fflush(stderr);

	while (!stop) {
		int fd;

		sl = sizeof(ss);
		fd = accept(lfd, (struct sockaddr *)&ss, &sl);
		if (fd < 0)
			continue;	/* EINTR from a signal, or a lost peer */
		serve(fd, &ss);
		close(fd);
	}
	close(lfd);
	return 0;
usage:
	fprintf(stderr, "usage: legacy_server [-p PORT]\n");
	return 2;
}
