/* SPDX-License-Identifier: MIT */
/*
 * reply.h - the shim's own responses: 429 (DESIGN.md "The denial") and 400
 * (a request it cannot frame for certain). Built into a caller's buffer;
 * pure: no I/O, no allocation, no clock (the caller passes wall time).
 */
#ifndef RL_REPLY_H
#define RL_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "rlshim.h"
#include "config.h"

/* enough for any reply built here: the fields, and a body of a rule's
 * deny_html or deny_json file at most */
#define RL_REPLY_MAX (1024 + RL_DENY_BODY_MAX)

struct rl_reply_req {
	int http10;          /* the request was HTTP/1.0: answer HTTP/1.0 */
	int head;            /* HEAD: headers only, no body */
	uint64_t wall_ms;    /* CLOCK_REALTIME in ms, for Date (0: none) */
	int html;            /* 429: the client prefers text/html (a browser) */
	const char *body;    /* 429: the rule's body of that kind (deny_html,
				deny_json), body_len bytes, or NULL */
	size_t body_len;
};

/*
 * The 429 for a request denied by rule `rule_name` with `res` (from
 * rl_table_take), in header style `style`. `wall_ms` is CLOCK_REALTIME in
 * ms (for X-RateLimit-Reset, an epoch time). Retry-After is the whole
 * seconds, rounded up, of res->retry_after_ns, and never 0. With
 * `store_down` set, the reply is the fail-closed one: Retry-After: 1.
 * The body is req->body when given, else the built-in one: JSON, or with
 * req->html a short HTML page saying when to retry. Returns the length
 * written (< len), or -ENOSPC.
 */
int rl_reply_429(char *buf, size_t len, const struct rl_reply_req *req,
		 const char *rule_name, const struct rl_result *res,
		 const struct rl_rate *rate, enum rl_headers style,
		 uint64_t wall_ms, int store_down);

/*
 * The fields headers_on = all inserts into an allowed answer's head, for
 * rule `rule_name` with `res` as it was decided, each line ending in CRLF
 * (the IETF RateLimit field's t is the reset). Returns the length written
 * (< len), or -ENOSPC.
 */
int rl_reply_fields(char *buf, size_t len, const char *rule_name,
		    const struct rl_result *res, const struct rl_rate *rate,
		    enum rl_headers style, uint64_t wall_ms);

/* The 400 sent before closing a connection whose framing is uncertain;
 * `why` is a short reason put in the JSON body ("bare LF in head"). */
int rl_reply_400(char *buf, size_t len, const struct rl_reply_req *req,
		 const char *why);

/*
 * 1 if the request head p[0..len) (request line through its empty line)
 * prefers text/html to application/json by its Accept fields (RFC 9110
 * 12.5.1: each type's q from its most specific range, `*` ranges
 * included; a tie, no Accept or q=0 is JSON): a browser's, which gets the
 * 429 as a page. Read only for a denial, from the raw head.
 */
int rl_reply_prefers_html(const uint8_t *head, size_t len);

#endif /* RL_REPLY_H */
