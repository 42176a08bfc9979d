/* SPDX-License-Identifier: MIT */
/*
 * json.c - the JSON writer that status, bans, top and xdp stats share
 * (ctl.h says what it promises).
 */
#include <stdio.h>

#include "ctl.h"

void ctl_jstr(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putchar('"');
	while (*p) {
		unsigned n = *p < 0x80 ? 0 : (*p & 0xE0) == 0xC0 && *p >= 0xC2 ? 1
			     : (*p & 0xF0) == 0xE0 ? 2
			     : (*p & 0xF8) == 0xF0 && *p <= 0xF4 ? 3 : 4;
		unsigned k;

		/* No overlong forms, no surrogates, nothing past U+10FFFF. */
		if ((*p == 0xE0 && p[1] < 0xA0) || (*p == 0xED && p[1] >= 0xA0) ||
		    (*p == 0xF0 && p[1] < 0x90) || (*p == 0xF4 && p[1] >= 0x90))
			n = 4;

		if (n == 0) {
			if (*p == '"' || *p == '\\')
				printf("\\%c", *p);
			else if (*p < 0x20)
				printf("\\u%04x", *p);
			else
				putchar(*p);
			p++;
			continue;
		}
		for (k = 1; n < 4 && k <= n && (p[k] & 0xC0) == 0x80; k++)
			;
		if (n == 4 || k <= n) {
			fputs("\\ufffd", stdout);
			p++;
			continue;
		}
		fwrite(p, 1, n + 1, stdout);
		p += n + 1;
	}
	putchar('"');
}

void ctl_jkey(struct ctl_json *j, const char *key)
{
	if (!j->first[j->depth])
		putchar(',');
	j->first[j->depth] = 0;
	if (key) {
		ctl_jstr(key);
		putchar(':');
	}
}

void ctl_jopen(struct ctl_json *j, const char *key, char brace)
{
	ctl_jkey(j, key);
	putchar(brace);
	j->first[++j->depth] = 1;
}

void ctl_jclose(struct ctl_json *j, char brace)
{
	putchar(brace);
	j->depth--;
}

void ctl_jtext(struct ctl_json *j, const char *key, const char *v)
{
	ctl_jkey(j, key);
	if (v)
		ctl_jstr(v);
	else
		fputs("null", stdout);
}

void ctl_jnum(struct ctl_json *j, const char *key, uint64_t v)
{
	ctl_jkey(j, key);
	printf("%llu", (unsigned long long)v);
}

void ctl_jbool(struct ctl_json *j, const char *key, int v)
{
	ctl_jkey(j, key);
	fputs(v ? "true" : "false", stdout);
}

void ctl_jnull(struct ctl_json *j, const char *key)
{
	ctl_jkey(j, key);
	fputs("null", stdout);
}
