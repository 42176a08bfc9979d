/* SPDX-License-Identifier: MIT */
/*
 * io_fds.c - the fd table kept right as the application closes, dups and
 * receives fds: the last close of a connection answered drains it first,
 * a dup shares the connection, an fd passed with SCM_RIGHTS is new.
 */
#include "io.h"

#include <sys/socket.h>

#include "io_int.h"

void rl_io_close(int fd)
{
	struct rl_fd *e = rl_fd_get(fd);
	struct rl_conn *c;

	if (!e)
		return;
	if ((e->kind == RL_FD_CONN || e->kind == RL_FD_LISTEN) && !rl_io_owner_here())
		return;
	c = rl_conn_of(e);
	/* Whatever of a denied request came since, read it so that the close
	 * sends a FIN after our answer, not an RST that could destroy it. */
	if (c && rl_fd_last(e) && c->state == RL_CONN_DONE &&
	    !c->tls_freed)
		rl_io_drain(fd);
	rl_fd_forget(e);
}

void rl_io_dup(int oldfd, int newfd)
{
	struct rl_fd *from = rl_fd_get(oldfd), *to = rl_fd_get(newfd);

	if (!to)
		return;
	if ((to->kind == RL_FD_CONN || to->kind == RL_FD_LISTEN ||
	     (from && from->kind == RL_FD_CONN)) && !rl_io_owner_here())
		return;
	if (to->kind != RL_FD_UNKNOWN)
		rl_fd_forget(to); /* dup2 over an fd closes it */
	if (from)
		rl_fd_share(to, from);
}

void rl_io_close_range(unsigned first, unsigned last)
{
	unsigned high = rl_fd_high();

	for (unsigned fd = first; fd <= last && fd <= high; fd++)
		rl_io_close((int)fd);
}

void rl_io_passed(struct msghdr *msg)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm;
	     cm = CMSG_NXTHDR(msg, cm)) {
		size_t n;
		int *fds;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		fds = (int *)(void *)CMSG_DATA(cm);
		for (size_t i = 0; i < n; i++) {
			struct rl_fd *e = rl_fd_get(fds[i]);

			if (e)
				rl_fd_forget(e);
		}
	}
}
