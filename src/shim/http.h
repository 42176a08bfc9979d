/* SPDX-License-Identifier: MIT */
/*
 * http.h - framing the HTTP/1.x request stream of one connection.
 *
 * Two parts, both pure (no I/O, no allocation, never read past a length):
 *
 *   rl_http_feed()        a streaming scanner with a few bytes of state. It
 *                         walks any split of the stream: skips bodies by
 *                         Content-Length or chunked coding, and stops at the
 *                         end of each request head.
 *   rl_http_parse_head()  parses one complete head, held contiguous by the
 *                         caller: request line, the headers that frame the
 *                         body, the headers rules are keyed by, and the path
 *                         normalised for matching.
 *
 * Both are strict where a lenient reading could let the application see a
 * request the shim did not count: bare LF, obs-fold, a bare CR, Content-Length
 * with Transfer-Encoding, a repeated or invalid Content-Length, a chunked
 * stream that is not exactly RFC 9112's, a head over RL_HEAD_MAX. Those are
 * errors, answered 400 by the caller.
 */
#ifndef RL_HTTP_H
#define RL_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"

#define RL_HEAD_MAX 16384      /* bytes of a request head, request line included */
#define RL_TRAILER_MAX 16384   /* bytes of a chunked body's trailer section */
#define RL_CHUNK_EXT_MAX 4096  /* bytes of one chunk-size line's extensions */
#define RL_BLANK_LINES_MAX 16  /* empty lines skipped before a request */
#define RL_METHOD_MAX 16       /* method bytes kept for matching (with NUL) */

enum rl_http_phase {
	RL_HTTP_IDLE = 0,   /* between requests */
	RL_HTTP_HEAD,       /* inside a head */
	RL_HTTP_BODY,       /* a Content-Length body: `remaining` bytes to go */
	RL_HTTP_CHUNK_SIZE, /* hex digits of a chunk size */
	RL_HTTP_CHUNK_EXT,  /* the rest of a chunk-size line: `ext` says
			       where in the extension grammar */
	RL_HTTP_CHUNK_LF,   /* the LF ending a chunk-size line */
	RL_HTTP_CHUNK_DATA, /* chunk data: `remaining` bytes to go */
	RL_HTTP_CHUNK_DCR,  /* the CR after chunk data */
	RL_HTTP_CHUNK_DLF,  /* the LF after chunk data */
	RL_HTTP_TRAILER,    /* trailer lines, up to an empty one */
	RL_HTTP_PASS,       /* not HTTP/1.x: every byte passes, unframed */
	RL_HTTP_DONE,       /* after a request that ends the connection
			       (Connection: close, HTTP/1.0): nothing more
			       is a request the application answers */
	RL_HTTP_ERROR,      /* framing failed: nothing more is framed */
};

struct rl_http {
	uint8_t phase;        /* enum rl_http_phase */
	uint8_t cr;           /* IDLE: a CR was seen, an LF must follow */
	uint8_t prev;         /* HEAD/TRAILER: the byte before this chunk */
	uint8_t blank_lines;  /* IDLE: empty lines skipped so far */
	uint8_t last;         /* the request being framed ends the connection */
	uint8_t tunnel;       /* IDLE: a CONNECT was answered 2xx; TLS may
				 start here (it passes), HTTP/1.x is framed */
	uint8_t ext;          /* CHUNK_EXT: the grammar's state (http_chunk.c) */
	uint32_t head_len;    /* HEAD/TRAILER: bytes so far */
	uint32_t line_len;    /* HEAD/TRAILER: bytes of the current line */
	uint32_t ext_len;     /* CHUNK_SIZE/EXT: digits, then extension bytes */
	uint32_t requests;    /* heads completed on this connection */
	uint64_t remaining;   /* BODY/CHUNK_DATA; CHUNK_SIZE: the size so far */
	const char *error;    /* ERROR: why, a static string */
	uint8_t in_body;      /* ERROR: it was in a body (after its head) */
	uint8_t in_tls;       /* the plaintext of a TLS session (io_tls.c):
				 a handshake record byte there is no TLS
				 start to pass but bytes to frame, unless a
				 CONNECT tunnel opened inside */
};

/* Whether a TLS handshake record may start at this request boundary, and
 * the connection pass unframed: the first bytes of a plain connection, or
 * the first after a CONNECT answered 2xx. Never the plaintext of a TLS
 * session the shim reads through: a record byte there is a bad request
 * line, or the bytes after it would reach the application uncounted. */
static inline int rl_http_tls_may_start(const struct rl_http *h)
{
	return h->tunnel || (h->requests == 0 && !h->in_tls);
}

enum rl_http_event {
	RL_HTTP_EV_NONE = 0, /* all bytes consumed, no head completed */
	RL_HTTP_EV_HEAD,     /* a head ends at `used`: parse it */
	RL_HTTP_EV_PASS,     /* not HTTP/1.x: the connection passes through */
	RL_HTTP_EV_ERROR,    /* see h->error; `used` stops before the bad byte */
	RL_HTTP_EV_DONE,     /* the message that ends the connection ended at
				`used`: what follows is not framed */
};

struct rl_http_feed {
	size_t used;          /* bytes consumed by this call */
	ssize_t head_begin;   /* where the current head began in this chunk,
				 or -1 if before it (or no head) */
	enum rl_http_event event;
};

/* A new connection's state. */
void rl_http_init(struct rl_http *h);

/*
 * Scan `p[0..len)`, continuing from the state in `h`. Stops right after a
 * complete head (EV_HEAD), at an error (EV_ERROR) or at the first byte of
 * a connection that is not HTTP/1.x (EV_PASS: TLS, where the caller must
 * pass everything through). After EV_HEAD the caller parses the head and
 * calls rl_http_begin_body() before feeding more. In PASS every byte is
 * consumed without an event.
 */
void rl_http_feed(struct rl_http *h, const uint8_t *p, size_t len,
		  struct rl_http_feed *out);

/* ---- the head ------------------------------------------------------------ */

#define RL_WANT_MAX 8         /* header names asked for */
#define RL_WANT_VALUES 8      /* occurrences kept per name (the last ones) */

/* Headers the caller needs the values of (API keys, X-Forwarded-For), and
 * whether it needs the path at all (no rule matching on paths: the target
 * of a request is only checked to be one, not normalised). */
struct rl_http_want {
	unsigned n;
	char name[RL_WANT_MAX][RL_HEADER_NAME_MAX];
	uint8_t len[RL_WANT_MAX];
	uint8_t need_path;
};

struct rl_http_value {
	const char *p;  /* into the head */
	uint32_t len;   /* without surrounding whitespace */
};

struct rl_http_req {
	char method[RL_METHOD_MAX]; /* NUL-terminated; longer methods are
				       valid but kept as "" (match only *) */
	char path[RL_HEAD_MAX];     /* decoded, dot segments removed, slashes
				       merged; no query; any length a head
				       holds */
	uint32_t path_len;
	uint8_t path_truncated;     /* longer than RL_PATH_MAX - 1 */
	uint8_t http10;             /* HTTP/1.0 */
	uint8_t head;               /* HEAD */
	uint8_t connect;            /* CONNECT (authority-form) */
	uint8_t upgrade;            /* has an Upgrade header */
	uint8_t preface;            /* the HTTP/2 connection preface */
	uint8_t last;               /* ends the connection: Connection: close,
				       or HTTP/1.0 without keep-alive */
	uint32_t h2c_at;            /* offset in the head of an "h2c" in
				       Upgrade, or 0 */
	uint8_t chunked;            /* Transfer-Encoding ends in chunked */
	uint8_t has_length;         /* Content-Length given */
	uint64_t content_length;
	const char *error;          /* why the head is refused */
	unsigned nvalues[RL_WANT_MAX];          /* occurrences seen */
	/* Last: the parser clears everything above it, not this. */
	struct rl_http_value values[RL_WANT_MAX][RL_WANT_VALUES]; /* the last
					   RL_WANT_VALUES, in order */
};

/*
 * Parse the complete head `p[0..len)` (request line through the empty line,
 * as delimited by rl_http_feed). Returns 0, or -EINVAL with req->error set.
 * Values point into `p`.
 */
int rl_http_parse_head(const uint8_t *p, size_t len,
		       const struct rl_http_want *want,
		       struct rl_http_req *req);

/*
 * Parse a head at the start of p[0..len), which may run on (the body, more
 * requests) or stop short. Returns 0 with *used the head's length, -EAGAIN
 * if the bytes end inside a head that is valid so far, or -EINVAL. A
 * complete head parsed here is exactly what rl_http_feed() would delimit
 * and rl_http_parse_head() accept (the fuzz target checks it), so the shim
 * parses a head that arrived whole in one pass instead of two.
 */
/* 0 when p[0..len) holds no CRLF CRLF, so no head ends in it (every head
 * rl_http_parse_prefix() takes ends so): a long read that cuts a head (a
 * browser's, at nginx's first 1 KiB) is held unparsed, and parsed once
 * whole. A quarter of what the parse costs per byte. */
int rl_http_may_end(const uint8_t *p, size_t len);

int rl_http_parse_prefix(const uint8_t *p, size_t len,
			 const struct rl_http_want *want,
			 struct rl_http_req *req, size_t *used);

/* A head parsed by rl_http_parse_prefix() at the state's current place:
 * account for it as rl_http_feed() would have. */
void rl_http_took_head(struct rl_http *h);

/* After EV_HEAD and a successful parse: frame the body that follows. */
void rl_http_begin_body(struct rl_http *h, const struct rl_http_req *req);

/* Stop framing: the connection is upgraded or not HTTP. */
void rl_http_pass(struct rl_http *h);

/* ---- the answers ---------------------------------------------------------- */

/*
 * The application's answers are framed with the same scanner (a struct
 * rl_http of their own): rl_http_feed() delimits each head, which
 * rl_http_parse_answer() reads, and rl_http_begin_answer() frames the body
 * that follows (by Content-Length, chunked, none, or to the end: PASS).
 */
struct rl_http_answer {
	int status;
	uint8_t chunked;
	uint8_t has_length;
	uint64_t length;
};

/* The status an answer's status line at p[0..len) gives ("HTTP/1.x NNN"),
 * -EAGAIN if it is too short to tell, or -EINVAL. */
int rl_http_status_of(const uint8_t *p, size_t len);

/* Parse the complete answer head p[0..len). 0, or -EINVAL. */
int rl_http_parse_answer(const uint8_t *p, size_t len, struct rl_http_answer *a);

/*
 * The common case in one pass: an answer head at the start of p[0..len),
 * which may run on (the body) or stop short. 0 with *used its length,
 * -EAGAIN if it goes on past len, -EINVAL if it is not one. Looks only at
 * what frames the body: lines are found by their LF, and only those that
 * can be Content-Length or Transfer-Encoding are read.
 */
int rl_http_answer_prefix(const uint8_t *p, size_t len,
			  struct rl_http_answer *a, size_t *used);

/* Frame the body of answer `a`; `no_body` for an answer to HEAD, and
 * RFC 9112 6.3's 1xx, 204 and 304 have none either. */
void rl_http_begin_answer(struct rl_http *h, const struct rl_http_answer *a,
			  int no_body);

/* 1 if `c` may be in a token (RFC 9110 tchar): a method's first byte. */
int rl_http_is_token(uint8_t c);

/* Header names are compared case-insensitively, ASCII only. */
int rl_http_name_eq(const char *a, size_t alen, const char *b, size_t blen);

#endif /* RL_HTTP_H */
