/* SPDX-License-Identifier: MIT */
/*
 * io_answers.c - the application's answers, framed as it writes them
 * (whose request each one answers, where its body ends), so that the
 * reply to a pipelined denial goes after the answers before it and a 101
 * or 2xx hands the connection over only when it answers that Upgrade or
 * CONNECT; and the writes swallowed once the shim has answered.
 */
#include "io.h"

#include <errno.h>
#include <sys/socket.h>

#include "io_int.h"

struct rl_conn *rl_io_written(int fd)
{
	struct rl_fd *e = rl_fd_get(fd);
	struct rl_conn *conn = e ? rl_conn_of(e) : NULL;

	if (!conn || conn->state == RL_CONN_PASS ||
	    (conn->ans_broken && conn->state != RL_CONN_DONE))
		return NULL;
	return conn;
}

int rl_io_write(struct rl_conn *c, const struct iovec *iov, int iovcnt)
{
	(void)iov;
	(void)iovcnt;
	return c->state == RL_CONN_DONE;
}

/* The answers can no longer be told apart: a denial that waited for them
 * is answered at the next read, which the shut-down read side wakes the
 * server for. */
static void ans_fail(struct rl_conn *c, int fd)
{
	c->ans_broken = 1;
	c->upgrade_wait = 0;
	if (c->state == RL_CONN_DENY && c->deny_wait) {
		c->deny_wait = 0;
		shutdown(fd, SHUT_RD);
	}
}

/* The final answer being written, if one is, has ended. */
static void answer_ended(struct rl_conn *c)
{
	if (c->ans_final) {
		c->answered++;
		c->ans_final = 0;
	}
}

/* Count `n` bytes of a body with a length off; returns how many it took.
 * The answer ends with its last byte. */
static size_t answer_body(struct rl_conn *c, size_t n)
{
	if (n > c->ans.remaining)
		n = (size_t)c->ans.remaining;
	c->ans.remaining -= n;
	if (c->ans.remaining == 0) {
		c->ans.phase = RL_HTTP_IDLE;
		answer_ended(c);
	}
	return n;
}

/* After a write: the reply to a denial goes once the answers it follows
 * are out. */
static void answers_out(struct rl_conn *c, int fd)
{
	if (c->state == RL_CONN_DENY && c->deny_wait && c->answered >= c->owed)
		rl_io_answer(c, fd);
}

/* An answer whose head the application has written: whose is it, and
 * what follows it. */
static void answer_begun(struct rl_conn *c, int fd, const struct rl_http_answer *ap)
{
	struct rl_http_answer a = *ap;
	uint32_t k;
	int head_req;

	answer_ended(c); /* the one before, if its body had no length */
	if (a.status < 200 && a.status != 101) {
		rl_http_begin_answer(&c->ans, &a, 1); /* interim: 100, 103 */
		return;
	}
	k = c->answered + 1;
	if (k > c->delivered) {
		ans_fail(c, fd); /* an answer to no request it was given */
		return;
	}
	head_req = 0;
	for (unsigned i = 0; i < c->nheads; i++) {
		if (c->heads[i] == k) {
			head_req = 1;
			c->heads[i] = c->heads[--c->nheads];
			break;
		}
	}
	if (c->upgrade_wait && k == c->switch_at) {
		enum rl_switch sw = (enum rl_switch)c->upgrade_wait;

		c->upgrade_wait = 0;
		if (sw == RL_SWITCH_UPGRADE && a.status == 101) {
			c->state = RL_CONN_PASS;
			rl_http_pass(&c->http);
			if (c->hold)
				c->hold->decided = c->hold->len;
			c->ans_broken = 1;
			return;
		}
		if (sw == RL_SWITCH_CONNECT && a.status / 100 == 2) {
			/* A tunnel: TLS in it passes untouched, but requests
			 * the application may still read as HTTP/1.x (a
			 * server that answers 200 and does not tunnel) are
			 * framed and counted. */
			c->http.tunnel = 1;
			ans_fail(c, fd);
			return;
		}
	}
	if (a.status == 101) {
		ans_fail(c, fd); /* a switch nobody was allowed: stop here */
		return;
	}
	c->ans_final = 1;
	rl_http_begin_answer(&c->ans, &a, head_req);
	if (c->ans.phase == RL_HTTP_PASS)
		ans_fail(c, fd); /* to the end: no answer after it */
}

void rl_io_wrote(struct rl_conn *c, int fd, const struct iovec *iov, int iovcnt,
		 size_t n)
{
	uint8_t gather[RL_ANSWER_HEAD_MAX];
	size_t pos = 0, seg_off = 0;
	ssize_t head_start = -1;

	if (c->ans_broken || c->state == RL_CONN_PASS || c->state == RL_CONN_DONE)
		return;
	if (c->ans.phase == RL_HTTP_HEAD) {
		/* A head written in more than one call: not followed. */
		ans_fail(c, fd);
		return;
	}
	for (int seg = 0; seg < iovcnt && pos < n && !c->ans_broken; seg++) {
		size_t end = seg_off + iov[seg].iov_len;

		if (end > n)
			end = n;
		while (pos < end && !c->ans_broken) {
			const uint8_t *b = (const uint8_t *)iov[seg].iov_base;
			struct rl_http_answer a;
			struct rl_http_feed f;
			size_t used;
			int rc;

			if (c->ans.phase == RL_HTTP_BODY) {
				pos += answer_body(c, end - pos);
				continue;
			}
			if (c->ans.phase == RL_HTTP_IDLE && !c->ans.cr) {
				/* A head whole in this buffer: one pass. */
				rc = rl_http_answer_prefix(b + (pos - seg_off),
							   end - pos, &a, &used);
				if (rc == 0) {
					pos += used;
					answer_begun(c, fd, &a);
					continue;
				}
				if (rc == -EINVAL) {
					ans_fail(c, fd);
					break;
				}
			}
			rl_http_feed(&c->ans, b + (pos - seg_off), end - pos, &f);
			if (f.head_begin >= 0)
				head_start = (ssize_t)(pos + (size_t)f.head_begin);
			pos += f.used;
			if (f.event == RL_HTTP_EV_NONE)
				continue;
			if (f.event != RL_HTTP_EV_HEAD || head_start < 0 ||
			    pos - (size_t)head_start > sizeof(gather)) {
				ans_fail(c, fd);
				break;
			}
			{
				const uint8_t *hp = gather;
				struct rl_http_answer a2;

				if ((size_t)head_start >= seg_off)
					hp = b + (head_start - (ssize_t)seg_off);
				else
					rl_iov_gather(iov, iovcnt, (size_t)head_start,
						      gather, pos - (size_t)head_start);
				if (rl_http_parse_answer(hp, pos - (size_t)head_start,
							 &a2))
					ans_fail(c, fd);
				else
					answer_begun(c, fd, &a2);
			}
			head_start = -1;
		}
		seg_off += iov[seg].iov_len;
	}
	if (c->ans_broken)
		return;
	if (c->ans.phase == RL_HTTP_HEAD) {
		ans_fail(c, fd);
		return;
	}
	if (c->ans.phase == RL_HTTP_IDLE)
		answer_ended(c); /* a chunked one, or one with no body */
	answers_out(c, fd);
}

void rl_io_wrote_file(struct rl_conn *c, int fd, size_t n)
{
	if (c->ans_broken || c->state == RL_CONN_PASS || c->state == RL_CONN_DONE)
		return;
	/* A file's bytes can only be a body with a length. */
	if (c->ans.phase != RL_HTTP_BODY || c->ans.remaining < n) {
		ans_fail(c, fd);
		return;
	}
	answer_body(c, n);
	answers_out(c, fd);
}
