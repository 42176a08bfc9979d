/* SPDX-License-Identifier: MIT */
/*
 * sys.c - the system call table of every program but the shim: libc's
 * functions themselves. librlshim.so defines rl_sys in hooks.c instead,
 * so this member of librlcore.a is never linked into it.
 */
#include "sys.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int libc_getfl(int fd)
{
	return fcntl(fd, F_GETFL);
}

static int libc_inq(int fd)
{
	int n = 0;

	return ioctl(fd, SIOCINQ, &n) < 0 ? -1 : n;
}

struct rl_sys rl_sys = {
	.read = read,
	.write = write,
	.close = close,
	.recv = recv,
	.send = send,
	.sendmsg = sendmsg,
	.getfl = libc_getfl,
	.inq = libc_inq,
};
