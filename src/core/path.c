/* SPDX-License-Identifier: MIT */
/*
 * path.c - a request target's path as an application will route it:
 * percent-decoded, dot segments removed (RFC 3986 5.2.4), slashes merged,
 * without the query. Rules are matched against this form (and written in
 * it: the configuration normalises their paths the same way), so "/%73ms",
 * "//sms" and "/a/../sms" are all "/sms" to the limiter as they are to
 * nginx or Python's http.server.
 */
#include "path.h"

#include <errno.h>
#include <string.h>

#include "ascii.h"

/* RFC 3986 scheme characters: ALPHA DIGIT "+" "-" "." */
static inline int scheme_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
}

/* Append one decoded byte to the normalised path, resolving dot segments
 * and merging slashes as they complete. */
struct pathbuf {
	char *out;
	size_t cap, len;
	uint8_t truncated;
};

static void path_segment_end(struct pathbuf *b)
{
	size_t start, seg;

	/* The segment just finished runs from after the last '/' to len. */
	for (start = b->len; start > 0 && b->out[start - 1] != '/'; start--)
		;
	seg = b->len - start;
	if (seg == 1 && b->out[start] == '.') {
		b->len = start; /* "/./" -> "/" */
	} else if (seg == 2 && b->out[start] == '.' && b->out[start + 1] == '.') {
		/* "/a/../" -> "/": drop the segment before, never above root */
		size_t up = start > 0 ? start - 1 : 0;

		while (up > 0 && b->out[up - 1] != '/')
			up--;
		b->len = up > 0 ? up : 1;
		if (b->len == 1)
			b->out[0] = '/';
	}
}

static void path_put(struct pathbuf *b, char c)
{
	if (c == '/') {
		path_segment_end(b);
		if (b->len > 0 && b->out[b->len - 1] == '/')
			return; /* "//" -> "/" */
	}
	if (b->len + 1 >= b->cap) {
		b->truncated = 1;
		return;
	}
	b->out[b->len++] = c;
}

int rl_path_normalize(const char *target, size_t len, char *out,
		      size_t outlen, uint32_t *out_len, uint8_t *truncated)
{
	struct pathbuf b = { out, outlen, 0, 0 };
	size_t i = 0;

	if (outlen < 2)
		return -EINVAL;
	if (len == 1 && target[0] == '*') {
		out[0] = '*';
		out[1] = '\0';
		*out_len = 1;
		*truncated = 0;
		return 0;
	}
	if (len == 0)
		return -EINVAL;
	if (target[0] != '/') {
		/* absolute-form: scheme "://" authority, then the path */
		size_t s = 0;

		while (s < len && scheme_char((uint8_t)target[s]))
			s++;
		if (s + 2 < len && target[s] == ':' && target[s + 1] == '/' &&
		    target[s + 2] == '/') {
			i = s + 3;
			while (i < len && target[i] != '/' && target[i] != '?' &&
			       target[i] != '#') {
				/* An escape in the authority: Python's
				 * http.server resolves the whole target as a
				 * path ("x://..%2fa" is /a to it). */
				if (target[i] == '%')
					return -EINVAL;
				i++;
			}
			if (i == len || target[i] != '/') {
				out[0] = '/';
				out[1] = '\0';
				*out_len = 1;
				*truncated = 0;
				return 0;
			}
		} else {
			/* authority-form (CONNECT host:port): no path */
			out[0] = '\0';
			*out_len = 0;
			*truncated = 0;
			return 0;
		}
	}
	/* Most paths need nothing: no escape, no dot segment, no empty
	 * segment. Then the form to match is the path as it came. */
	{
		size_t k = i, end;

		for (; k < len; k++) {
			char c = target[k];

			if (c == '?' || c == '#' || c == '%' ||
			    (c == '/' && k + 1 < len &&
			     (target[k + 1] == '/' || target[k + 1] == '.')))
				break;
		}
		end = k;
		if (end == len || target[end] == '?' || target[end] == '#') {
			/* a last segment of "." or ".." ends in "/." too */
			size_t n = end - i;

			if (n >= outlen) {
				n = outlen - 1;
				*truncated = 1;
			} else {
				*truncated = 0;
			}
			memcpy(out, target + i, n);
			out[n] = '\0';
			*out_len = (uint32_t)n;
			return 0;
		}
	}
	for (; i < len; i++) {
		char c = target[i];

		if (c == '?' || c == '#')
			break;
		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -EINVAL;
			hi = rl_ascii_hexval((uint8_t)target[i + 1]);
			lo = rl_ascii_hexval((uint8_t)target[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (char)(hi << 4 | lo);
			if (c == '\0')
				return -EINVAL;
			i += 2;
		}
		path_put(&b, c);
	}
	/* A last segment of "." or ".." resolves as if a '/' followed. */
	if (b.len > 0) {
		size_t start;

		for (start = b.len; start > 0 && b.out[start - 1] != '/'; start--)
			;
		if ((b.len - start == 1 && b.out[start] == '.') ||
		    (b.len - start == 2 && b.out[start] == '.' &&
		     b.out[start + 1] == '.'))
			path_segment_end(&b);
	}
	out[b.len] = '\0';
	*out_len = (uint32_t)b.len;
	*truncated = b.truncated;
	return 0;
}

