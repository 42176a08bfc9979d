/* SPDX-License-Identifier: MIT */
/*
 * cookie.h - one cookie's value from a request's Cookie headers, the key of
 * a `key = cookie:NAME` rule (issue 17).
 */
#ifndef RL_COOKIE_H
#define RL_COOKIE_H

#include <stddef.h>

/* One Cookie header's field value, as received (not NUL-terminated). */
struct rl_cookie_header {
	const char *value;
	size_t len;
};

/*
 * The value of cookie `name` (`nlen` bytes, compared byte for byte, case
 * sensitive, never decoded) in the `n` Cookie header values `hdrs`, given
 * in the order they came (RFC 6265 section 5.4: a browser sends one header
 * of "a=1; b=2"; HTTP/2 and some proxies split it in several).
 *
 * Each value is split at ';' into pairs, each pair trimmed of spaces and
 * tabs; a pair's name is what comes before its first '=' (trimmed), its
 * value what comes after (trimmed), without one pair of enclosing DQUOTEs.
 * A pair without '=' names no cookie. The FIRST pair with the name decides
 * (browsers send the most specific path first), even if its value is bad:
 *
 *   0        *val points into that header, *vlen > 0 bytes;
 *   -ENOENT  no pair has the name, or the first one's value is empty
 *            (also `a=""`): no key;
 *   -EINVAL  that value holds a control byte (below 0x20, DEL; NUL
 *            included), an unbalanced or inner DQUOTE: no key.
 *
 * An empty `name` matches nothing (-ENOENT).
 * Bytes 0x80 and up, spaces inside a value and ',' are taken as they are
 * (servers read what browsers store). Hostile input is bounded by its
 * length: one pass, no recursion, no allocation, nothing read past a
 * header's `len`; control bytes in other pairs are not looked at.
 */
int rl_cookie_find(const struct rl_cookie_header *hdrs, size_t n,
		   const char *name, size_t nlen, const char **val,
		   size_t *vlen);

#endif /* RL_COOKIE_H */
