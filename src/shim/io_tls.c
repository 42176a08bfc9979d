/* SPDX-License-Identifier: MIT */
/*
 * io_tls.c - connections under TLS: the application's libssl session
 * bound to the connection of its socket, and the transport the read and
 * answer paths use (the socket, or the session over it).
 *
 * A TLS connection opens with a handshake record, which the framer passes
 * (RL_CONN_PASS). At the application's first SSL call on that socket
 * (SSL_read, SSL_write, ...: hooks.c) the session is bound to the
 * connection and the framing starts again on the plaintext, from its first
 * request: the socket's own reads and writes carry records from then on and
 * pass untouched (io_read.c, io_answers.c). A session is bound only while
 * nothing has been framed on the socket itself, so a connection is framed
 * once, in one layer; a session over a socket that carried a request
 * (TLS inside a CONNECT tunnel) passes, as it did before.
 */
#include "io.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "io_int.h"
#include "log.h"

/* Whether the socket has nothing to read yet: no byte, and not at its
 * end either (a peek of one byte, the cost of FIONREAD, which cannot tell
 * an end from nothing). */
static int socket_waits(int fd)
{
	uint8_t b;
	int saved = errno;
	ssize_t n = rl_io.sys.recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 1;
	errno = saved;
	return 0;
}

ssize_t rl_conn_recv(struct rl_conn *c, int fd, void *buf, size_t len,
		     int flags)
{
	if (!c->ssl)
		return rl_io.sys.recv(fd, buf, len, flags | MSG_DONTWAIT);
	/*
	 * Nothing decrypted or buffered and nothing in the socket: a
	 * blocking socket's read would wait, and so would the session's.
	 * Not when the socket is at its end (the session's read sees it at
	 * once: an EAGAIN there would never end, the client gone), nor
	 * through a BIO of the application's: apache's reads ahead into
	 * its own buffers, so the records a head still needs may be there
	 * and no longer in the socket; its read waits (or not) as the
	 * application's own read would, and an EAGAIN here, which mod_ssl's
	 * blocking read retries at once, would spin for as long as the
	 * client sends nothing more.
	 */
	if (!c->tls_app_bio && !rl_io.sys.tls_pending(c->ssl) &&
	    socket_waits(fd)) {
		errno = EAGAIN;
		return -1;
	}
	return rl_io.sys.tls_read(c->ssl, buf, len, flags & MSG_PEEK);
}

ssize_t rl_conn_send(struct rl_conn *c, int fd, const void *buf, size_t len)
{
	if (c->ssl)
		return rl_io.sys.tls_write(c->ssl, buf, len);
	return rl_io.sys.send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Once a process: TLS is framed here. */
static int said_tls;

void rl_io_tls_seen(void)
{
	static int said;

	if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	if (rl_io.sys.tls_live && rl_io.sys.tls_live())
		return;
	rl_log(RL_LOG_WARN, "msg=\"TLS connections get accept-level limits "
			    "only: no libssl behind the shim in this process "
			    "(TLS linked statically, or another library)\"");
}

void rl_io_tls_no_socket(void)
{
	static int said;

	if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	rl_log(RL_LOG_WARN, "msg=\"TLS connections get accept-level limits "
			    "only: the server moves its sessions' records "
			    "itself (its own BIOs, as Node.js does), so the "
			    "shim sees no socket behind them\"");
}

struct rl_conn *rl_io_tls_conn(int fd, void *ssl)
{
	struct rl_fd *e = rl_fd_get(fd);
	struct rl_conn *c;

	if (!e)
		return NULL;
	if (e->kind == RL_FD_UNKNOWN)
		rl_io_adopt(fd, e);
	c = rl_conn_of(e);
	if (!c || c->ssl == ssl)
		return c;
	/* Another session's, or a socket whose own bytes were framed. */
	if (c->ssl || c->http.requests || c->delivered || c->hold)
		return NULL;
	switch ((enum rl_conn_state)c->state) {
	case RL_CONN_PASS:
	case RL_CONN_HTTP:
		/* The handshake passed; the plaintext is framed from its
		 * start. */
		rl_http_init(&c->http);
		c->http.in_tls = 1; /* a record byte in there is no TLS */
		c->state = RL_CONN_HTTP;
		c->skip = 0;
		c->raw = 0;
		c->mask_at = -1;
		break;
	case RL_CONN_DENY:
	case RL_CONN_DONE:
		break; /* refused before any request: it stays so */
	}
	c->ssl = ssl;
	if (!__atomic_exchange_n(&said_tls, 1, __ATOMIC_RELAXED))
		rl_log(RL_LOG_INFO, "msg=\"TLS: requests framed through libssl\" "
				    "port=%u", (unsigned)c->port);
	return c;
}

void rl_io_tls_free(int fd, void *ssl)
{
	struct rl_fd *e = rl_fd_get(fd);
	struct rl_conn *c = e ? rl_conn_of(e) : NULL;

	if (!c || c->ssl != ssl)
		return;
	/* The session is gone; what the socket carries now is nobody's to
	 * frame (nothing readable was decided). */
	c->ssl = NULL;
	if (c->state != RL_CONN_DONE && c->state != RL_CONN_DENY)
		c->tls_freed = 1; /* nobody refused it: no drain at close */
	c->state = RL_CONN_DONE;
	if (c->hold) {
		c->hold->len = c->hold->decided = 0;
		rl_conn_unhold(c);
	}
}

int rl_io_tls_peek(struct rl_conn *c, void *buf, size_t len, ssize_t *ret)
{
	struct rl_hold *h = c->hold;
	size_t n;

	/* As a socket's peek (io_read.c): nothing while an answer is due,
	 * the end once answered. */
	if (c->state == RL_CONN_DENY) {
		errno = EAGAIN;
		*ret = -1;
		return 0;
	}
	if (c->state == RL_CONN_DONE) {
		*ret = 0;
		return 0;
	}
	/* Bytes the session gave that the shim holds come first, as the
	 * application's next read gets them: decided ones, or those held
	 * unread (which a peek sees as libssl's own, unframed). A head held
	 * undecided is not the application's yet: the peek is libssl's. */
	if (!h || len == 0 || (!h->decided && h->len > h->unread))
		return 1;
	n = h->decided ? h->decided : h->unread;
	if (n > len)
		n = len;
	memcpy(buf, h->data, n);
	*ret = (ssize_t)n;
	return 0;
}

int rl_io_tls_no_h2(int fd)
{
	static int said;
	struct rl_fd *e = rl_fd_get(fd);

	if (!e || !rl_conn_of(e))
		return 0;
	if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		rl_log(RL_LOG_INFO, "msg=\"TLS: the server offers HTTP/2; framed "
				    "connections are kept on HTTP/1.1 (ALPN)\"");
	return 1;
}
