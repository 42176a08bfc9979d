/* SPDX-License-Identifier: MIT */
/* io_iov.c - copying between the application's iovecs and flat buffers. */
#include "io.h"

#include <string.h>

#include "io_int.h"

/* Copy `len` bytes between the iovecs, from offset `off`, and `buf`: out
 * of them, or into them with `into`. */
static void iov_copy(const struct iovec *iov, int cnt, size_t off, void *buf,
		     size_t len, int into)
{
	char *b = buf;

	for (int i = 0; i < cnt && len; i++) {
		size_t n = iov[i].iov_len;
		char *at;

		if (off >= n) {
			off -= n;
			continue;
		}
		at = (char *)iov[i].iov_base + off;
		n -= off;
		if (n > len)
			n = len;
		if (into)
			memcpy(at, b, n);
		else
			memcpy(b, at, n);
		b += n;
		len -= n;
		off = 0;
	}
}

void rl_iov_gather(const struct iovec *iov, int cnt, size_t off, void *dst,
		   size_t len)
{
	iov_copy(iov, cnt, off, dst, len, 0);
}

/* Write `len` bytes into the iovecs from offset `off`. */
void rl_iov_put(const struct iovec *iov, int cnt, size_t off,
		const void *src, size_t len)
{
	iov_copy(iov, cnt, off, (void *)src, len, 1);
}

size_t rl_iov_total(const struct iovec *iov, int cnt)
{
	size_t n = 0;

	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}
