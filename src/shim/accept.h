/* SPDX-License-Identifier: MIT */
/*
 * accept.h - what the accept hooks do with a connection the real accept
 * returned: the shim's phases moved on (configured at the first accept,
 * active at the first on a guarded port), the connection tracked or
 * refused, and what the application's accept then says.
 */
#ifndef RL_ACCEPT_H
#define RL_ACCEPT_H

#include <sys/socket.h>

#include "sys.h"

/*
 * The peer of an accepted connection, `ss` of `sl` bytes, copied out as
 * accept(2) would: truncated to *alen, *alen set to the real length. The
 * hooks accept into their own storage because the shim needs the peer
 * even when the application passes NULL.
 */
void rl_accept_copy_peer(struct sockaddr *addr, socklen_t *alen,
			 const struct sockaddr_storage *ss, socklen_t sl);

enum {
	RL_ACCEPT_GIVE = 0,   /* the application gets the fd */
	RL_ACCEPT_AGAIN = -1, /* refused and closed: accept the next one */
};

/*
 * The real accept on `lfd` returned `fd` from `peer`: read the
 * configuration at the first accept (with `sys`, kept), activate the shim
 * at the first accept on a guarded port (or look after the agent once
 * active), and track the connection or refuse it (closed). Returns
 * RL_ACCEPT_GIVE, RL_ACCEPT_AGAIN, or a positive errno to fail the
 * application's accept with (after a refusal). `*refused` counts this
 * accept call's refusals in a row (start it at 0).
 */
int rl_accept_take(const struct rl_sys *sys, int lfd, int fd,
		   const struct sockaddr *peer, socklen_t peerlen, int *refused);

/*
 * After `refused` connections refused in a row on `lfd`: 0 to accept
 * again, else the errno to fail this accept with (rl_accept_take).
 */
int rl_accept_again(const struct rl_sys *sys, int lfd, int refused);

#endif /* RL_ACCEPT_H */
