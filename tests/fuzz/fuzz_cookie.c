/* SPDX-License-Identifier: MIT */
/*
 * fuzz_cookie.c - the Cookie header reader (src/core/cookie.c) on any
 * bytes. The input is the cookie's name, a '\n', then up to eight header
 * values separated by '\n', each copied to a buffer of exactly its length.
 * No crash, nothing read out of bounds, and a value found:
 *   - lies within one header, is not empty, and holds no control byte,
 *     no DQUOTE, no ';', no leading or trailing space or tab unless it
 *     was quoted (the quotes are then right around it);
 *   - is preceded in that header by the name, optional blanks and '='
 *     (and an optional DQUOTE).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cookie.h"

#define MAXH 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rl_cookie_header h[MAXH];
	char *copy[MAXH];
	const uint8_t *nl = memchr(data, '\n', size), *p, *end = data + size;
	size_t n = 0, nlen, vlen = 0;
	const char *v = NULL;
	int rc;

	if (!nl)
		return 0;
	nlen = (size_t)(nl - data);
	for (p = nl + 1; n < MAXH && p <= end;) {
		const uint8_t *e = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((e ? e : end) - p);

		copy[n] = malloc(len ? len : 1);
		memcpy(copy[n], p, len);
		h[n].value = copy[n];
		h[n].len = len;
		n++;
		if (!e)
			break;
		p = e + 1;
	}
	rc = rl_cookie_find(h, n, (const char *)data, nlen, &v, &vlen);
	if (rc != 0 && rc != -ENOENT && rc != -EINVAL)
		abort();
	if (rc == 0) {
		size_t i;

		for (i = 0; i < n; i++)
			if (v >= h[i].value && v + vlen <= h[i].value + h[i].len)
				break;
		if (i == n || !vlen || !nlen)
			abort();
		for (size_t j = 0; j < vlen; j++) {
			unsigned char c = (unsigned char)v[j];

			if (c < 0x20 || c == 0x7f || c == '"' || c == ';')
				abort();
		}
		/* blanks at the ends only inside quotes */
		int quoted = v > h[i].value && v[-1] == '"';
		if (!quoted && (v[0] == ' ' || v[vlen - 1] == ' ' ||
				v[0] == '\t' || v[vlen - 1] == '\t'))
			abort();
		if (quoted && (v + vlen >= h[i].value + h[i].len || v[vlen] != '"'))
			abort();
		/* back from the value: an optional quote, blanks, '=', blanks, the name */
		const char *q = v, *s = h[i].value;
		if (q > s && q[-1] == '"')
			q--;
		while (q > s && (q[-1] == ' ' || q[-1] == '\t'))
			q--;
		if (q == s || q[-1] != '=')
			abort();
		q--;
		while (q > s && (q[-1] == ' ' || q[-1] == '\t'))
			q--;
		if ((size_t)(q - s) < nlen || memcmp(q - nlen, data, nlen))
			abort();
	}
	for (size_t i = 0; i < n; i++)
		free(copy[i]);
	return 0;
}
