/* SPDX-License-Identifier: MIT */
/* test_logfile.c - the agent's log file: never through a link, only in a
 * directory of this user's that nobody else can write. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "logfile.h"

static char base[64];

static int setup(void **state)
{
	(void)state;
	snprintf(base, sizeof(base), "/tmp/rlshim-test-logfile-XXXXXX");
	return mkdtemp(base) ? 0 : -1; /* mode 0700, ours */
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

static void file_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_opens_in_private_dir(void **state)
{
	char path[128];
	const char *why = NULL;
	struct stat st;
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/a.log", base);
	fd = rl_logfile_open(path, &why);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x\n", 2), 2);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(fd, F_GETFL) & O_APPEND);
	assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK);
	close(fd);
	fd = rl_logfile_open(path, &why); /* again: appends to our own file */
	assert_true(fd >= 0);
	close(fd);
}

static void test_refuses_link(void **state)
{
	char target[128], link[128];
	const char *why = NULL;
	char buf[16] = "";
	FILE *f;

	(void)state;
	snprintf(target, sizeof(target), "%s/target", base);
	snprintf(link, sizeof(link), "%s/link.log", base);
	file_text(target, "kept\n");
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(rl_logfile_open(link, &why), -ELOOP);
	assert_string_equal(why, "a symbolic link");
	f = fopen(target, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "kept\n");
}

static void test_refuses_hard_link(void **state)
{
	char target[128], hard[128];
	const char *why = NULL;

	(void)state;
	snprintf(target, sizeof(target), "%s/other", base);
	snprintf(hard, sizeof(hard), "%s/hard.log", base);
	file_text(target, "kept\n");
	assert_int_equal(link(target, hard), 0);
	assert_int_equal(rl_logfile_open(hard, &why), -EMLINK);
	assert_string_equal(why, "a file with other links");
}

static void test_refuses_open_dir(void **state)
{
	char dir[128], path[160];
	const char *why = NULL;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/open", base);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	snprintf(path, sizeof(path), "%s/a.log", dir);
	assert_int_equal(rl_logfile_open(path, &why), -EPERM);
	assert_string_equal(why, "writable by its group or others");
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(rl_logfile_dir_check("/tmp", &why), -EPERM);
}

static void test_refuses_dir_link(void **state)
{
	char dir[128], link[128], path[160];
	const char *why = NULL;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/real", base);
	snprintf(link, sizeof(link), "%s/linked", base);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(symlink(dir, link), 0);
	assert_int_equal(rl_logfile_dir_check(link, &why), -ELOOP);
	snprintf(path, sizeof(path), "%s/a.log", link);
	assert_int_equal(rl_logfile_open(path, &why), -ELOOP);
	assert_string_equal(why, "a symbolic link");
}

static void test_refuses_fifo(void **state)
{
	char path[128];
	const char *why = NULL;

	(void)state;
	snprintf(path, sizeof(path), "%s/fifo.log", base);
	assert_int_equal(mkfifo(path, 0600), 0);
	/* No reader: O_NONBLOCK fails at once rather than hang the agent. */
	assert_true(rl_logfile_open(path, &why) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opens_in_private_dir),
		cmocka_unit_test(test_refuses_link),
		cmocka_unit_test(test_refuses_hard_link),
		cmocka_unit_test(test_refuses_open_dir),
		cmocka_unit_test(test_refuses_dir_link),
		cmocka_unit_test(test_refuses_fifo),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
