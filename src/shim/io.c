/* SPDX-License-Identifier: MIT */
/*
 * io.c - the active shim's lifecycle: started over a policy, a policy
 * published at each reload, refusing everything when the start failed, and
 * which process owns the fd table across fork and vfork.
 *
 * What the hooks do once it is active is in the other io_*.c files, all
 * behind io.h: the read path (io_read.c, io_hold.c, io_frame.c), the reply
 * to a denial (io_deny.c), the application's answers (io_answers.c), the
 * fd table across close, dup and fd passing (io_fds.c), and accept.c for
 * the sockets that come in.
 */
#include "io.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "err.h"
#include "mem.h"
#include "io_int.h"

struct rl_io rl_io;

/*
 * 1 if this process owns the memory the tables live in. A vfork() child
 * does not: it runs in its parent's memory until it execs, and the dup2()
 * and close() it makes on its way there (busybox's CGI) must not change
 * what the parent knows of its own fds. fork() children get their own pid
 * recorded by the atfork handler; vfork() runs no handlers.
 */
static pid_t owner;

static void owner_forked(void)
{
	owner = getpid();
}

/* In the parent, after a fork: a child may read a connection's bytes
 * (Python's CGI child reads the body from the socket it inherits). */
static void parent_forked(void)
{
	__atomic_add_fetch(&rl_io.forks, 1, __ATOMIC_RELAXED);
}

int rl_io_owner_here(void)
{
	return getpid() == owner;
}

/* Build a policy for `cfg` over `table` and put it in force. */
static int publish(const struct rl_config *cfg, struct rl_table *table,
		   struct rl_err *err)
{
	struct rl_policy *p = rl_mem_alloc(sizeof(*p));
	int rc;

	if (!p) {
		rl_err_set(err, "out of memory");
		return -ENOMEM;
	}
	rc = rl_policy_init(p, cfg, table, err);
	if (rc) {
		rl_mem_free(p);
		return rc;
	}
	__atomic_store_n(&rl_io.pol, p, __ATOMIC_RELEASE);
	return 0;
}

int rl_io_reload(const struct rl_config *cfg, struct rl_err *err)
{
	const struct rl_policy *old = rl_io_policy();

	if (!old) {
		rl_err_set(err, "not started");
		return -EINVAL;
	}
	return publish(cfg, old->table, err);
}

int rl_io_start(const struct rl_sys *sys, const struct rl_config *cfg,
		struct rl_table *table, struct rl_err *err)
{
	int rc;

	rl_io.sys = *sys;
	rc = rl_conn_setup();
	if (rc) {
		rl_err_set(err, "cannot map the fd table");
		return rc;
	}
	rc = publish(cfg, table, err);
	if (rc)
		return rc;
	rl_io.cfg = cfg;
	owner = getpid();
	pthread_atfork(NULL, parent_forked, owner_forked);
	return 0;
}

void rl_io_refuse(const struct rl_sys *sys)
{
	rl_io.sys = *sys;
	rl_conn_setup();
	rl_io.refuse = 1;
}
