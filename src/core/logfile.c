/* SPDX-License-Identifier: MIT */
/*
 * logfile.c - where the agent's log may go. A fixed name in /tmp is a trap:
 * another user links it to a file of root's first, and an agent started by
 * a root server appends to that file. So the log lives in a directory only
 * its user can write, and the file is opened without following links.
 */
#include "logfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys.h"

int rl_logfile_dir_check(const char *dir, const char **why)
{
	struct stat st;

	if (lstat(dir, &st) < 0) {
		int err = -errno;

		*why = strerror(errno);
		return err;
	}
	if (S_ISLNK(st.st_mode)) {
		*why = "a symbolic link";
		return -ELOOP;
	}
	if (!S_ISDIR(st.st_mode)) {
		*why = "not a directory";
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		*why = "owned by another user";
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		*why = "writable by its group or others";
		return -EPERM;
	}
	return 0;
}

/* What may stand at the file's name: nothing yet, or our own file. */
static int file_check(const struct stat *st, const char **why)
{
	if (S_ISLNK(st->st_mode)) {
		*why = "a symbolic link";
		return -ELOOP;
	}
	if (!S_ISREG(st->st_mode)) {
		*why = "not a regular file";
		return -EINVAL;
	}
	if (st->st_uid != geteuid()) {
		*why = "owned by another user";
		return -EPERM;
	}
	if (st->st_nlink != 1) {
		*why = "a file with other links";
		return -EMLINK;
	}
	return 0;
}

int rl_logfile_path(const char *shm, char *out, size_t len, const char **why)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char dirs[3][256];
	int n = 0, rc = -ENOENT;
	struct stat st;

	if (geteuid() == 0)
		snprintf(dirs[n++], sizeof(dirs[0]), "/run/rlshim");
	if (xdg && xdg[0] == '/' && strlen(xdg) < sizeof(dirs[0]) - 8)
		snprintf(dirs[n++], sizeof(dirs[0]), "%s/rlshim", xdg);
	snprintf(dirs[n++], sizeof(dirs[0]), "/tmp/rlshim-%u",
		 (unsigned)geteuid());
	*why = "no directory";
	for (int i = 0; i < n; i++) {
		if ((size_t)snprintf(out, len, "%s/rlshimd-%s.log", dirs[i],
				     shm) >= len) {
			rc = -ENAMETOOLONG;
			*why = "name too long";
			continue;
		}
		/* mkdir never follows a link at the name, and a directory
		 * someone else made first fails the check. */
		if (mkdir(dirs[i], 0700) < 0 && errno != EEXIST) {
			rc = -errno;
			*why = strerror(errno);
			continue;
		}
		rc = rl_logfile_dir_check(dirs[i], why);
		if (rc)
			continue;
		/* The directory is the place: what stands at the file's name
		 * there is the answer, not a reason to look elsewhere. */
		if (lstat(out, &st) == 0)
			return file_check(&st, why);
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		*why = strerror(errno);
		return rc;
	}
	return rc;
}

int rl_logfile_open(const char *path, const char **why)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	struct stat st;
	int fd, rc;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	rc = rl_logfile_dir_check(dir, why);
	if (rc)
		return rc;
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
			O_NOCTTY | O_NONBLOCK, 0600);
	if (fd < 0) {
		rc = -errno;
		*why = errno == ELOOP ? "a symbolic link" : strerror(errno);
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		*why = strerror(errno);
	} else {
		rc = file_check(&st, why);
	}
	if (rc) {
		rl_sys.close(fd);
		return rc;
	}
	/* O_NONBLOCK only kept a FIFO planted there from holding the open. */
	fcntl(fd, F_SETFL, O_APPEND);
	return fd;
}
