/* SPDX-License-Identifier: MIT */
/*
 * cookie.c - one cookie's value from the Cookie headers (RFC 6265 sections
 * 4.2.1 and 5.4).
 *
 * Servers split the header at ';' and trim whitespace (RFC 6265 section
 * 5.2's user-agent rules, nginx's $cookie_NAME, Go's net/http); browsers
 * send "; " between pairs but store whatever a Set-Cookie gave them, so
 * the value is not held to section 4.2.1's cookie-octet set beyond what a
 * key must never hold: control bytes (a NUL would cut the key short in the
 * logs and `rlshimctl top`) and stray quotes.
 */
#include "cookie.h"

#include <errno.h>
#include <string.h>

static int ows(char c)
{
	return c == ' ' || c == '\t';
}

/* 0, -ENOENT (empty) or -EINVAL: the value p[0..len), already trimmed. */
static int value_of(const char *p, size_t len, const char **val, size_t *vlen)
{
	if (len >= 2 && p[0] == '"' && p[len - 1] == '"')
		p++, len -= 2;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c < 0x20 || c == 0x7f || c == '"')
			return -EINVAL;
	}
	if (!len)
		return -ENOENT;
	*val = p;
	*vlen = len;
	return 0;
}

int rl_cookie_find(const struct rl_cookie_header *hdrs, size_t n,
		   const char *name, size_t nlen, const char **val,
		   size_t *vlen)
{
	if (!nlen)
		return -ENOENT;
	for (size_t h = 0; h < n; h++) {
		const char *s = hdrs[h].value, *end = s + hdrs[h].len;

		if (!s)
			continue;
		while (s < end) {
			const char *semi = memchr(s, ';', (size_t)(end - s));
			const char *pe = semi ? semi : end, *eq, *ne;

			while (s < pe && ows(*s))
				s++;
			eq = memchr(s, '=', (size_t)(pe - s));
			if (eq) {
				ne = eq;
				while (ne > s && ows(ne[-1]))
					ne--;
				if ((size_t)(ne - s) == nlen && !memcmp(s, name, nlen)) {
					const char *v = eq + 1, *ve = pe;

					while (v < ve && ows(*v))
						v++;
					while (ve > v && ows(ve[-1]))
						ve--;
					return value_of(v, (size_t)(ve - v), val, vlen);
				}
			}
			s = semi ? semi + 1 : end;
		}
	}
	return -ENOENT;
}
