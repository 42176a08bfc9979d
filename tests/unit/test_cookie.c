/* SPDX-License-Identifier: MIT */
/*
 * test_cookie.c - a cookie's value from the Cookie headers
 * (src/core/cookie.c): RFC 6265's examples, the browsers' habits, hostile
 * headers.
 *
 * Every header is copied into a heap buffer of exactly its length, with no
 * NUL after it: under ASan a read past `len` fails here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cookie.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAXH 4

/* rl_cookie_find over exact copies of up to MAXH headers (NULL-ended);
 * `got` receives the value as a string. */
static int find_n(const char *const *vals, size_t lens_given, const size_t *lens,
		  const char *name, char *got, size_t cap)
{
	struct rl_cookie_header h[MAXH];
	char *copy[MAXH];
	size_t n = 0;
	const char *v = NULL;
	size_t vlen = 0;
	int rc;

	for (; n < MAXH && vals[n]; n++) {
		size_t len = lens_given ? lens[n] : strlen(vals[n]);

		copy[n] = malloc(len ? len : 1);
		assert_non_null(copy[n]);
		memcpy(copy[n], vals[n], len);
		h[n].value = copy[n];
		h[n].len = len;
	}
	rc = rl_cookie_find(h, n, name, strlen(name), &v, &vlen);
	got[0] = '\0';
	if (rc == 0) {
		assert_true(vlen > 0 && vlen < cap);
		/* the value lies within one of the headers */
		int inside = 0;
		for (size_t i = 0; i < n; i++)
			if (v >= h[i].value && v + vlen <= h[i].value + h[i].len)
				inside = 1;
		assert_true(inside);
		memcpy(got, v, vlen);
		got[vlen] = '\0';
	}
	for (size_t i = 0; i < n; i++)
		free(copy[i]);
	return rc;
}

static int find1(const char *hdr, const char *name, char *got)
{
	const char *vals[] = { hdr, NULL };

	return find_n(vals, 0, NULL, name, got, 256);
}

/* ---- RFC 6265 ---- */

static void test_rfc6265_examples(void **state)
{
	char got[256];

	(void)state;
	/* section 3.1 */
	assert_int_equal(find1("SID=31d4d96e407aad42", "SID", got), 0);
	assert_string_equal(got, "31d4d96e407aad42");
	assert_int_equal(find1("SID=31d4d96e407aad42; lang=en-US", "SID", got), 0);
	assert_string_equal(got, "31d4d96e407aad42");
	assert_int_equal(find1("SID=31d4d96e407aad42; lang=en-US", "lang", got), 0);
	assert_string_equal(got, "en-US");
	assert_int_equal(find1("SID=31d4d96e407aad42; lang=en-US", "en-US", got), -ENOENT);
	/* section 4.2.1: cookie-value = *cookie-octet / ( DQUOTE *cookie-octet DQUOTE ) */
	assert_int_equal(find1("a=\"quoted\"; b=2", "a", got), 0);
	assert_string_equal(got, "quoted");
	assert_int_equal(find1("a=\"\"; b=2", "a", got), -ENOENT);
}

/* Section 5.4: the browser sends the longer path first, so the first pair
 * of a repeated name is the one meant. */
static void test_first_wins(void **state)
{
	char got[256];
	const char *two[] = { "sess=first; x=1", "sess=second", NULL };

	(void)state;
	assert_int_equal(find1("sess=one; sess=two", "sess", got), 0);
	assert_string_equal(got, "one");
	assert_int_equal(find_n(two, 0, NULL, "sess", got, 256), 0);
	assert_string_equal(got, "first");
	/* ... even when the first one is empty or bad: no key, not the second */
	assert_int_equal(find1("sess=; sess=two", "sess", got), -ENOENT);
	assert_int_equal(find1("sess=\"x; sess=two", "sess", got), -EINVAL);
}

static void test_several_headers(void **state)
{
	char got[256];
	const char *v[] = { "a=1", "b=2; c=3", "d=4", NULL };

	(void)state;
	assert_int_equal(find_n(v, 0, NULL, "c", got, 256), 0);
	assert_string_equal(got, "3");
	assert_int_equal(find_n(v, 0, NULL, "d", got, 256), 0);
	assert_string_equal(got, "4");
	assert_int_equal(find_n(v, 0, NULL, "e", got, 256), -ENOENT);
	/* a pair does not continue into the next header */
	const char *w[] = { "a", "=1", NULL };
	assert_int_equal(find_n(w, 0, NULL, "a", got, 256), -ENOENT);
	/* none at all */
	assert_int_equal(find_n((const char *[]){ NULL }, 0, NULL, "a", got, 256), -ENOENT);
}

static void test_whitespace_and_separators(void **state)
{
	char got[256];

	(void)state;
	assert_int_equal(find1("  a=1  ;b=2;\tc = 3 ;;; d=4;", "c", got), 0);
	assert_string_equal(got, "3");
	assert_int_equal(find1("a=1;b=2", "b", got), 0);
	assert_string_equal(got, "2");
	assert_int_equal(find1("a=1; d=4;", "d", got), 0);
	assert_string_equal(got, "4");
	/* the value keeps everything after the first '=' */
	assert_int_equal(find1("tok=YWJj==; x=1", "tok", got), 0);
	assert_string_equal(got, "YWJj==");
	/* spaces inside, ',' and UTF-8 are taken as they are */
	assert_int_equal(find1("n=a b,c\xc3\xa9", "n", got), 0);
	assert_string_equal(got, "a b,c\xc3\xa9");
	/* quotes only around the whole, trimmed value */
	assert_int_equal(find1("a= \"v\" ", "a", got), 0);
	assert_string_equal(got, "v");
}

static void test_names_exact(void **state)
{
	char got[256];

	(void)state;
	assert_int_equal(find1("SID=1", "sid", got), -ENOENT);
	assert_int_equal(find1("xSID=1; SIDx=2", "SID", got), -ENOENT);
	assert_int_equal(find1("sid=1; SID=2", "SID", got), 0);
	assert_string_equal(got, "2");
	/* no decoding: %53ID is not SID, and a quoted name is its quotes */
	assert_int_equal(find1("%53ID=1; \"SID\"=2", "SID", got), -ENOENT);
	assert_int_equal(find1("%53ID=1", "%53ID", got), 0);
	/* a pair without '=' is no cookie, even one spelled like the name */
	assert_int_equal(find1("SID; SID=7", "SID", got), 0);
	assert_string_equal(got, "7");
	assert_int_equal(find1("SID", "SID", got), -ENOENT);
	/* an empty name matches nothing, not "=x" */
	assert_int_equal(find1("=x", "", got), -ENOENT);
	assert_int_equal(find1("=x; a=1", "a", got), 0);
}

static void test_bad_values(void **state)
{
	char got[256];
	const char *v[] = { "a=x\0y; b=1", NULL };
	size_t lens[] = { 10 };

	(void)state;
	assert_int_equal(find1("a=", "a", got), -ENOENT);
	assert_int_equal(find1("a=   ", "a", got), -ENOENT);
	assert_int_equal(find1("a=\"", "a", got), -EINVAL);
	assert_int_equal(find1("a=\"abc", "a", got), -EINVAL);
	assert_int_equal(find1("a=abc\"", "a", got), -EINVAL);
	assert_int_equal(find1("a=ab\"c", "a", got), -EINVAL);
	assert_int_equal(find1("a=\"a\"b\"", "a", got), -EINVAL);
	assert_int_equal(find1("a=x\x01y", "a", got), -EINVAL);
	assert_int_equal(find1("a=x\x7fy", "a", got), -EINVAL);
	assert_int_equal(find1("a=x\ty", "a", got), -EINVAL);
	assert_int_equal(find1("a=x\r\n", "a", got), -EINVAL);
	/* a NUL is a byte like the others: no key for a, b still found */
	assert_int_equal(find_n(v, 1, lens, "a", got, 256), -EINVAL);
	assert_int_equal(find_n(v, 1, lens, "b", got, 256), 0);
	assert_string_equal(got, "1");
	/* controls in another pair are not looked at */
	assert_int_equal(find1("x=\x01\x02; a=ok", "a", got), 0);
	assert_string_equal(got, "ok");
}

/* A 1 MB header of 100,000 pairs: found at the end, or not at all. */
static void test_huge(void **state)
{
	size_t n = 100000, len = 0;
	char *big = malloc(n * 10 + 32), got[256];
	struct rl_cookie_header h;
	const char *v;
	size_t vlen;

	(void)state;
	assert_non_null(big);
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(big + len, "k%05zu=v; ", i % 100000);
	len += (size_t)sprintf(big + len, "want=yes");
	h.value = big;
	h.len = len;
	assert_int_equal(rl_cookie_find(&h, 1, "want", 4, &v, &vlen), 0);
	assert_int_equal(vlen, 3);
	assert_memory_equal(v, "yes", 3);
	assert_int_equal(rl_cookie_find(&h, 1, "k00007", 6, &v, &vlen), 0);
	assert_int_equal(rl_cookie_find(&h, 1, "nope", 4, &v, &vlen), -ENOENT);
	/* all ';', all '=', all quotes, all spaces */
	memset(big, ';', len);
	assert_int_equal(rl_cookie_find(&h, 1, "a", 1, &v, &vlen), -ENOENT);
	memset(big, '=', len);
	assert_int_equal(rl_cookie_find(&h, 1, "a", 1, &v, &vlen), -ENOENT);
	memset(big, ' ', len);
	assert_int_equal(rl_cookie_find(&h, 1, "a", 1, &v, &vlen), -ENOENT);
	/* one huge value */
	memset(big, 'x', len);
	memcpy(big, "a=", 2);
	assert_int_equal(rl_cookie_find(&h, 1, "a", 1, &v, &vlen), 0);
	assert_int_equal(vlen, len - 2);
	(void)got;
	free(big);
}

/* A NULL header value (a caller's empty slot) is skipped. */
static void test_null_header(void **state)
{
	struct rl_cookie_header h[2] = { { NULL, 5 }, { "a=1", 3 } };
	const char *v;
	size_t vlen;

	(void)state;
	assert_int_equal(rl_cookie_find(h, 2, "a", 1, &v, &vlen), 0);
	assert_int_equal(vlen, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc6265_examples),
		cmocka_unit_test(test_first_wins),
		cmocka_unit_test(test_several_headers),
		cmocka_unit_test(test_whitespace_and_separators),
		cmocka_unit_test(test_names_exact),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_huge),
		cmocka_unit_test(test_null_header),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
