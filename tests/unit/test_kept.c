/* SPDX-License-Identifier: MIT */
/* test_kept.c - the configuration in force, kept in the segment: stored
 * and read back whole, refused when torn or another file's, and used by a
 * process whose file is broken. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kept.h"
#include "shm.h"

static char seg[64], path[128];
static struct rl_table *t;

static void write_file(const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
	static int n;

	(void)state;
	snprintf(seg, sizeof(seg), "rlshim-tkept-%d-%d", (int)getpid(), n);
	snprintf(path, sizeof(path), "/tmp/rlshim-tkept-%d-%d.conf",
		 (int)getpid(), n++);
	rl_table_unlink(seg);
	assert_int_equal(rl_table_open(seg, 64, RL_TABLE_CREATE, &t, NULL), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rl_table_close(t);
	rl_table_unlink(seg);
	unlink(path);
	return 0;
}

static void test_store_load(void **state)
{
	char *buf = malloc(RL_KEPT_MAX), big[100];
	uint64_t stamp = 0;

	(void)state;
	assert_non_null(buf);
	assert_int_equal(rl_kept_load(t, "/a.conf", buf, RL_KEPT_MAX, &stamp),
			 -ENOENT);
	assert_int_equal(rl_kept_store(t, "/a.conf", "[limit:a]\nrate = 1/s\n",
				       21, 77), 0);
	assert_int_equal(rl_kept_load(t, "/a.conf", buf, RL_KEPT_MAX, &stamp), 21);
	assert_string_equal(buf, "[limit:a]\nrate = 1/s\n");
	assert_int_equal(stamp, 77);
	/* Another file's text is not this file's. */
	assert_int_equal(rl_kept_load(t, "/b.conf", buf, RL_KEPT_MAX, &stamp),
			 -ENOENT);
	assert_int_equal(rl_kept_load(t, "/a.con", buf, RL_KEPT_MAX, &stamp),
			 -ENOENT);
	/* Torn (a writer mid-copy, or a dead one): none, never garbage. */
	t->kept[9] ^= 1;
	assert_int_equal(rl_kept_load(t, "/a.conf", buf, RL_KEPT_MAX, &stamp),
			 -ENOENT);
	t->kept[9] ^= 1;
	assert_int_equal(rl_kept_load(t, "/a.conf", buf, RL_KEPT_MAX, &stamp), 21);
	atomic_store(&t->hdr->kept_stamp, 0);
	assert_int_equal(rl_kept_load(t, "/a.conf", buf, RL_KEPT_MAX, &stamp),
			 -ENOENT);
	/* Too big for the region: nothing kept, the old one not damaged
	 * either way (it is replaced only by a whole new one); whatever the
	 * segment's header says of the region's size. */
	free(buf);
	buf = malloc(RL_KEPT_MAX * 2);
	assert_non_null(buf);
	memset(buf, 'x', RL_KEPT_MAX * 2);
	assert_int_equal(rl_kept_store(t, "/a.conf", buf, RL_KEPT_MAX - 8, 78),
			 -E2BIG);
	t->hdr->kept_cap = 1u << 30;
	assert_int_equal(rl_kept_store(t, "/a.conf", buf, RL_KEPT_MAX + 100, 78),
			 -E2BIG);
	t->hdr->kept_cap = RL_KEPT_MAX;
	memset(big, 0, sizeof(big));
	assert_int_equal(rl_kept_load(t, "/a.conf", big, sizeof(big), &stamp),
			 -ENOENT); /* stamp 0 from above; and too long for big */
	free(buf);
}

/* The file broken: the kept text, under the file's name; an unbroken
 * file is always its own text. */
static void test_config_fallback(void **state)
{
	struct rl_config *c = NULL;
	struct rl_err err;
	char *text = NULL, good[256];
	size_t len = 0;
	int kept = -1;

	(void)state;
	snprintf(good, sizeof(good), "[global]\nshm = %s\n[limit:a]\nmatch = *\n"
		 "rate = 3/m\n", seg);
	write_file(good);
	assert_int_equal(rl_kept_config(path, &c, &text, &len, &kept, &err), 0);
	assert_int_equal(kept, 0);
	assert_non_null(text);
	assert_int_equal(len, strlen(good));
	assert_string_equal(text, good);
	assert_int_equal(c->rules[0].rate.count, 3);
	rl_config_text_free(text);
	text = NULL;
	rl_config_free(c);
	{
		char bad[300];

		snprintf(bad, sizeof(bad), "[global]\n  shm = %s ; here\n"
			 "[limit:a]\nrate = lots\n", seg);
		write_file(bad);
	}
	/* Nothing kept yet: a broken file is an error. */
	assert_int_equal(rl_kept_config(path, &c, &text, &len, &kept, &err), -EINVAL);
	assert_int_equal(kept, 0);
	assert_int_equal(rl_kept_store(t, path, good, strlen(good), 5), 0);
	assert_int_equal(rl_kept_config(path, &c, &text, &len, &kept, &err), 0);
	assert_int_equal(kept, 1);
	assert_null(text);
	assert_string_equal(c->source, path);
	assert_int_equal(c->rules[0].rate.count, 3);
	assert_non_null(strstr(err.msg, ":4: bad rate 'lots'"));
	rl_config_free(c);
	/* No rule at all (emptied, caught half-written): the kept one too. */
	{
		char empty[128];

		snprintf(empty, sizeof(empty), "[global]\nshm = %s\n", seg);
		write_file(empty);
	}
	assert_int_equal(rl_kept_config(path, &c, &text, &len, &kept, &err), 0);
	assert_int_equal(kept, 1);
	assert_int_equal(c->nrules, 1);
	assert_non_null(strstr(err.msg, "no [limit:*] rule"));
	rl_config_free(c);
	/* ... but taken as it is where nothing is kept. */
	write_file("[global]\nshm = rlshim-tkept-none\n");
	assert_int_equal(rl_kept_config(path, &c, &text, &len, &kept, &err), 0);
	assert_int_equal(kept, 0);
	assert_int_equal(c->nrules, 0);
	rl_config_free(c);
	rl_config_text_free(text);
	text = NULL;
	/* Broken and naming a segment that keeps nothing: the error. */
	write_file("[global]\nshm = rlshim-tkept-none\n[limit:a]\nrate = lots\n");
	c = (struct rl_config *)err.msg;
	assert_int_equal(rl_kept_config(path, &c, &text, &len, &kept, &err), -EINVAL);
	assert_int_equal(kept, 0);
	/* Missing altogether: the error too (no shm to look in but the
	 * default one, which this test does not have). */
	unlink(path);
	assert_int_equal(rl_kept_config(path, &c, &text, &len, &kept, &err), -ENOENT);
}

/* A file that no longer names its segment (emptied, deleted): found by
 * the path its text is kept for; a file not in /dev/shm's segments is
 * not found, and a non-segment file there is passed over. */
static void test_find(void **state)
{
	char shm[RL_SHM_NAME_MAX], junk[96];
	FILE *f;

	(void)state;
	snprintf(junk, sizeof(junk), "/dev/shm/%s-junk", seg);
	f = fopen(junk, "w");
	assert_non_null(f);
	fputs("not a segment", f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rl_kept_find(path, shm, sizeof(shm)), -ENOENT);
	assert_int_equal(rl_kept_store(t, path, "[limit:a]\nrate = 1/s\n", 21,
				       5), 0);
	assert_int_equal(rl_kept_find(path, shm, sizeof(shm)), 0);
	assert_string_equal(shm, seg);
	assert_int_equal(rl_kept_find("/tmp/another.conf", shm, sizeof(shm)),
			 -ENOENT);
	unlink(junk);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_store_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_find, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
