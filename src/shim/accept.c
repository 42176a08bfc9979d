/* SPDX-License-Identifier: MIT */
/*
 * accept.c - the sockets that come in: listeners classified (guarded or
 * not), accepted connections tracked or refused at accept, sockets the
 * application got some other way adopted at their first read, and the
 * accept hooks' steps through the shim's phases.
 */
#include "accept.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>

#include "io.h"
#include "log.h"
#include "shim.h"
#include "clock.h"

static int tcp_port(int fd, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int type = 0;
	socklen_t tl = sizeof(type);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
	    type != SOCK_STREAM)
		return -1;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET)
		*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else if (ss.ss_family == AF_INET6)
		*port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else
		return -1;
	return 0;
}

static void remember_listener(uint16_t port)
{
	unsigned n = __atomic_load_n(&rl_io.nlisten, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < n; i++)
		if (rl_io.listen_ports[i] == port)
			return;
	if (n < RL_MAX_PORTS) {
		rl_io.listen_ports[n] = port;
		__atomic_store_n(&rl_io.nlisten, n + 1, __ATOMIC_RELEASE);
	}
}

/*
 * The process accepts on a port `ports` leaves out: its connections pass
 * unlimited, which is what `ports` says, but a server the shim was meant
 * to protect (a stock nginx on 80 with `ports = 8080`) must not stay
 * unguarded in silence. Said once per process, in the server's log, with
 * the ports the shim guards.
 */
static void unguarded_port(uint16_t port)
{
	static int said;
	const struct rl_config *cfg = rl_io.cfg;
	char ports[RL_MAX_PORTS * 7 + 1], q[RL_PATH_MAX * 2];
	size_t n = 0;

	if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	ports[0] = '\0';
	for (unsigned i = 0; i < cfg->nports && n < sizeof(ports) - 7; i++)
		n += (size_t)snprintf(ports + n, sizeof(ports) - n, "%s%u",
				      i ? "," : "", cfg->ports[i]);
	rl_log(RL_LOG_WARN, "msg=\"accepting on a port outside ports: its "
	       "connections are not limited (said once per process)\" "
	       "port=%u ports=%s config=\"%s\"", port, ports,
	       rl_log_quote(cfg->source[0] ? cfg->source : "built-in default",
			    q, sizeof(q)));
}

int rl_io_listener(int lfd)
{
	struct rl_fd *e = rl_fd_get(lfd);
	uint16_t port;

	if (!e)
		return 0;
	if (e->kind == RL_FD_LISTEN)
		return e->guarded;
	if (tcp_port(lfd, &port) < 0) {
		e->kind = RL_FD_IGNORED;
		return 0;
	}
	e->kind = RL_FD_LISTEN;
	e->port = port;
	e->guarded = (uint8_t)(rl_io.refuse || !rl_io.cfg ||
			       rl_config_guards(rl_io.cfg, port));
	if (e->guarded)
		remember_listener(port);
	else
		unguarded_port(port);
	return e->guarded;
}

/* Close a refused connection at once: an RST, no TIME_WAIT kept here. */
static void refuse_close(int fd)
{
	struct linger lg = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	rl_io.sys.close(fd);
}

int rl_io_accepted(int lfd, int fd, const struct sockaddr *peer,
		   socklen_t peerlen)
{
	struct rl_fd *e = rl_fd_get(fd), *l = rl_fd_get(lfd);
	const struct rl_policy *pol;
	struct rl_verdict v;
	struct rl_addr client;
	struct rl_conn *c;

	if (rl_io.refuse) {
		refuse_close(fd);
		return 0;
	}
	if (!e || rl_addr_from_sockaddr(peer, peerlen, &client)) {
		/* Not an address we can key (or an fd beyond the table):
		 * refuse rather than let it through unframed. */
		refuse_close(fd);
		return 0;
	}
	if (e->kind == RL_FD_CONN)
		rl_fd_forget(e); /* a stale entry: closed behind our back */
	pol = rl_io_policy();
	if (!rl_policy_expects_proxy(pol, &client)) {
		rl_policy_accept(pol, &client, rl_time_now_ns(), &v);
		if (!v.allowed) {
			refuse_close(fd);
			return 0;
		}
	}
	c = rl_conn_new(e);
	if (!c) {
		refuse_close(fd);
		return 0;
	}
	rl_policy_peer(pol, &client, &c->peer);
	/* Accepted here, read by nobody yet: only a fork after this one
	 * (a CGI child) can make another reader of it. A pre-fork server's
	 * child that accepts, or busybox's child that serves what its parent
	 * accepted, needs no look at who read what. */
	c->fork_seen = __atomic_load_n(&rl_io.forks, __ATOMIC_RELAXED);
	c->port = l ? l->port : 0;
	c->proxy = (uint8_t)rl_policy_expects_proxy(pol, &client);
	return 1;
}

void rl_io_adopt(int fd, struct rl_fd *e)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct rl_addr client;
	uint16_t port;
	int known = 0, listening = 0;
	socklen_t ll = sizeof(listening);
	const struct rl_policy *pol;
	struct rl_conn *c;

	e->kind = RL_FD_IGNORED;
	if (rl_io.refuse || !rl_io.cfg || tcp_port(fd, &port) < 0)
		return;
	/* With no ports configured, only ports this process has accepted on:
	 * an outgoing connection (to a database, say) is never framed. */
	if (rl_io.cfg->nports) {
		known = rl_config_guards(rl_io.cfg, port);
	} else {
		unsigned n = __atomic_load_n(&rl_io.nlisten, __ATOMIC_ACQUIRE);

		for (unsigned i = 0; i < n; i++)
			known |= rl_io.listen_ports[i] == port;
	}
	if (!known)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) == 0 &&
	    listening)
		return;
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    rl_addr_from_sockaddr((struct sockaddr *)&ss, len, &client))
		return;
	c = rl_conn_new(e);
	if (!c)
		return;
	pol = rl_io_policy();
	rl_policy_peer(pol, &client, &c->peer);
	c->port = port;
	c->proxy = (uint8_t)rl_policy_expects_proxy(pol, &client);
}

/* ---- the accept hooks' steps ---------------------------------------------------- */

void rl_accept_copy_peer(struct sockaddr *addr, socklen_t *alen,
			 const struct sockaddr_storage *ss, socklen_t sl)
{
	if (addr && alen) {
		socklen_t n = sl < *alen ? sl : *alen;

		for (socklen_t i = 0; i < n; i++)
			((char *)addr)[i] = ((const char *)ss)[i];
		*alen = sl;
	} else if (alen) {
		*alen = sl;
	}
}

/*
 * A nonblocking listener is accepted from again (EAGAIN when nothing
 * waits), but a flood must not hold the server in here: EAGAIN after 64. A
 * blocking listener is accepted from again only when a connection is
 * already waiting: blocking in here would keep from the server a signal
 * that came meanwhile (its handler has run, and the server's loop would
 * not see its flag until the next connection). It gets ECONNABORTED, what
 * accept says of a connection gone before it was accepted, which servers
 * take as a reason to try again.
 */
int rl_accept_again(const struct rl_sys *sys, int lfd, int refused)
{
	struct pollfd p = { lfd, POLLIN, 0 };

	if (sys->getfl(lfd) & O_NONBLOCK)
		return refused >= 64 ? EAGAIN : 0;
	if (refused < 64 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
		return 0;
	return ECONNABORTED;
}

int rl_accept_take(const struct rl_sys *sys, int lfd, int fd,
		   const struct sockaddr *peer, socklen_t peerlen, int *refused)
{
	enum rl_shim_phase ph = rl_shim_configure(sys);
	int err;

	if ((ph != RL_SHIM_CONFIGURED && ph != RL_SHIM_ACTIVE &&
	     ph != RL_SHIM_REFUSE) || !rl_io_listener(lfd))
		return RL_ACCEPT_GIVE;
	if (ph == RL_SHIM_CONFIGURED)
		rl_shim_activate();
	else if (ph == RL_SHIM_ACTIVE)
		rl_shim_watch();
	if (rl_shim_phase() == RL_SHIM_OFF ||
	    rl_io_accepted(lfd, fd, peer, peerlen))
		return RL_ACCEPT_GIVE;
	/* Refused and closed: take the next one, as if this connection had
	 * never come. */
	err = rl_accept_again(sys, lfd, ++*refused);
	return err ? err : RL_ACCEPT_AGAIN;
}
