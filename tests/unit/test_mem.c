/* SPDX-License-Identifier: MIT */
/* test_mem.c - the core's long-lived memory in mappings of its own. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "mem.h"

static int zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void test_alloc_zeroed_aligned(void **state)
{
	static const size_t sizes[] = { 0, 1, 15, 16, 4079, 4080, 4081, 89120,
					1u << 20 };

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		unsigned char *p = rl_mem_alloc(sizes[i]);

		assert_non_null(p);
		assert_int_equal((uintptr_t)p % 16, 0);
		assert_true(zero(p, sizes[i]));
		memset(p, 0xa5, sizes[i]);
		rl_mem_free(p);
	}
}

static void test_realloc_keeps_bytes(void **state)
{
	unsigned char *p, *q;

	(void)state;
	p = rl_mem_realloc(NULL, 100);
	assert_non_null(p);
	for (int i = 0; i < 100; i++)
		p[i] = (unsigned char)i;
	q = rl_mem_realloc(p, 200000); /* grows past its pages: may move */
	assert_non_null(q);
	for (int i = 0; i < 100; i++)
		assert_int_equal(q[i], (unsigned char)i);
	assert_true(zero(q + 4096 * 2, 200000 - 4096 * 2)); /* new pages */
	q[199999] = 1;
	p = rl_mem_realloc(q, 50); /* shrinks */
	assert_non_null(p);
	for (int i = 0; i < 50; i++)
		assert_int_equal(p[i], (unsigned char)i);
	assert_ptr_equal(rl_mem_realloc(p, 60), p); /* the same page */
	rl_mem_free(p);
	assert_null(rl_mem_alloc(SIZE_MAX - 8));
	assert_int_equal(errno, ENOMEM);
}

static void test_free_keeps_errno(void **state)
{
	void *p = rl_mem_alloc(10);

	(void)state;
	errno = EAGAIN;
	rl_mem_free(p);
	rl_mem_free(NULL);
	assert_int_equal(errno, EAGAIN);
}

/* The configuration and its text are not the heap's: a parse and a free
 * leave malloc's arena as they found it. */
static void test_config_not_in_heap(void **state)
{
	struct rl_config *c = NULL;
	struct rl_err err;
	struct mallinfo2 before, after;

	(void)state;
	before = mallinfo2();
	assert_int_equal(rl_config_parse("[limit:a]\nrate = 1/s\n", "x.conf",
					 &c, &err), 0);
	after = mallinfo2();
	assert_int_equal(after.uordblks, before.uordblks);
	rl_config_free(c);
	assert_int_equal(rl_config_default(&c), 0);
	after = mallinfo2();
	assert_int_equal(after.uordblks, before.uordblks);
	rl_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alloc_zeroed_aligned),
		cmocka_unit_test(test_realloc_keeps_bytes),
		cmocka_unit_test(test_free_keeps_errno),
		cmocka_unit_test(test_config_not_in_heap),
	};

	return cmocka_run_group_tests_name("mem", tests, NULL, NULL);
}
