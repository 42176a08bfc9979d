/* SPDX-License-Identifier: MIT */
/*
 * noseg.c - why there is no segment to read. The shim makes the segment at
 * the first accept on a guarded port, so "no segment" is not "no server
 * accepted": a server under the shim that accepts only on ports `ports`
 * leaves out (a stock nginx on 80 with `ports = 8080`) makes none either.
 * What this host shows is said instead: the processes that have the shim
 * loaded (their /proc/PID/maps) and the ports they listen on (their
 * sockets, matched in /proc/net/tcp and tcp6), leaving out those whose
 * environment names another configuration. Root sees every process; a
 * user, their own.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"

#define MAX_LISTEN 256
#define MAX_PROCS 8

struct listen {
	unsigned long inode;
	unsigned port;
};

struct shimmed {
	char comm[32];
	unsigned pid, n;             /* the first pid, how many processes */
	unsigned ports[16], nports;
};

static unsigned read_listeners(struct listen *l, unsigned max)
{
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	unsigned n = 0;

	for (unsigned f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "re");
		char line[512];

		if (!fp)
			continue;
		while (fgets(line, sizeof(line), fp) && n < max) {
			char local[64];
			unsigned st, port;
			unsigned long inode;
			char *colon;

			/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
			if (sscanf(line, " %*s %63s %*s %x %*s %*s %*s %*s %*s %lu",
				   local, &st, &inode) != 3 || st != 0x0A)
				continue;
			colon = strrchr(local, ':');
			if (!colon || sscanf(colon + 1, "%x", &port) != 1)
				continue;
			l[n].inode = inode;
			l[n++].port = port;
		}
		fclose(fp);
	}
	return n;
}

/*
 * The configuration a process reads, when its environment says: 1 it is
 * `path` (or may be: the environment cannot be read, or was written over
 * as nginx's is by its process titles), 0 it is another file.
 */
static int same_config(unsigned pid, const char *path)
{
	char file[64], buf[16384];
	const char *want = path ? path : "";
	FILE *fp;
	size_t len;
	int seen = 0, same = 0;

	snprintf(file, sizeof(file), "/proc/%u/environ", pid);
	fp = fopen(file, "re");
	if (!fp)
		return 1;
	len = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[len] = '\0';
	for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
		if (strncmp(buf + i, "RLSHIM_CONFIG=", 14) == 0) {
			seen = 1;
			same = strcmp(buf + i + 14, want) == 0;
		}
	return !seen || same;
}

static int has_shim(unsigned pid)
{
	char path[64], line[1024];
	FILE *fp;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	fp = fopen(path, "re");
	if (!fp)
		return 0;
	while (!found && fgets(line, sizeof(line), fp))
		found = strstr(line, "/librlshim.so") != NULL;
	fclose(fp);
	return found;
}

static void add_port(struct shimmed *s, unsigned port)
{
	for (unsigned i = 0; i < s->nports; i++)
		if (s->ports[i] == port)
			return;
	if (s->nports < sizeof(s->ports) / sizeof(s->ports[0]))
		s->ports[s->nports++] = port;
}

static void listening_ports(unsigned pid, struct shimmed *s,
			    const struct listen *l, unsigned nl)
{
	char path[64];
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "/proc/%u/fd", pid);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		char fd[384], target[64];
		unsigned long inode;
		ssize_t len;

		snprintf(fd, sizeof(fd), "%s/%s", path, de->d_name);
		len = readlink(fd, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (sscanf(target, "socket:[%lu]", &inode) != 1)
			continue;
		for (unsigned i = 0; i < nl; i++)
			if (l[i].inode == inode)
				add_port(s, l[i].port);
	}
	closedir(d);
}

static void comm_of(unsigned pid, char *out, size_t len)
{
	char path[64];
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	snprintf(out, len, "?");
	fp = fopen(path, "re");
	if (!fp)
		return;
	if (fgets(out, (int)len, fp))
		out[strcspn(out, "\n")] = '\0';
	fclose(fp);
}

/* The processes with the shim loaded, one entry per program name. */
static unsigned find_shimmed(const struct ctl *c, struct shimmed *s,
			     unsigned max)
{
	static struct listen l[MAX_LISTEN];
	unsigned nl = read_listeners(l, MAX_LISTEN), n = 0;
	unsigned self = (unsigned)getpid();
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char comm[32];
		unsigned pid, i;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (unsigned)strtoul(de->d_name, NULL, 10);
		if (pid == self || !has_shim(pid) || !same_config(pid, c->path))
			continue;
		comm_of(pid, comm, sizeof(comm));
		for (i = 0; i < n; i++)
			if (strcmp(s[i].comm, comm) == 0)
				break;
		if (i == n) {
			if (n == max)
				continue;
			memset(&s[n], 0, sizeof(s[n]));
			snprintf(s[n].comm, sizeof(s[n].comm), "%s", comm);
			s[n].pid = pid;
			n++;
		}
		if (pid < s[i].pid)
			s[i].pid = pid;
		s[i].n++;
		listening_ports(pid, &s[i], l, nl);
	}
	closedir(d);
	return n;
}

static size_t port_list(char *out, size_t len, const unsigned *p, unsigned n)
{
	size_t k = 0;

	out[0] = '\0';
	for (unsigned i = 0; i < n && k < len; i++)
		k += (size_t)snprintf(out + k, len - k, "%s%u", i ? "," : "", p[i]);
	return k;
}

int ctl_no_segment(const struct ctl *c, const char *err)
{
	struct shimmed s[MAX_PROCS];
	unsigned n = find_shimmed(c, s, MAX_PROCS);
	char guarded[RL_MAX_PORTS * 7 + 8], why[1024];
	size_t k = 0;
	unsigned cfgports[RL_MAX_PORTS], ncfg = 0;
	int outside = 0, inside = 0;

	if (c->cfg) {
		ncfg = c->cfg->nports;
		for (unsigned i = 0; i < ncfg; i++)
			cfgports[i] = c->cfg->ports[i];
	}
	if (ncfg)
		port_list(guarded, sizeof(guarded), cfgports, ncfg);
	else
		snprintf(guarded, sizeof(guarded), "%s",
			 c->cfg ? "every port" : "?");
	why[0] = '\0';
	if (n == 0)
		k += (size_t)snprintf(why, sizeof(why), "; no process %s has the "
				      "shim loaded",
				      geteuid() == 0 ? "on this host"
						     : "of this user");
	for (unsigned i = 0; i < n && k < sizeof(why); i++) {
		char ports[128];
		int in = 0;

		for (unsigned j = 0; j < s[i].nports; j++)
			for (unsigned g = 0; g < ncfg; g++)
				in |= s[i].ports[j] == cfgports[g];
		if (c->cfg && !ncfg && s[i].nports)
			in = 1;
		if (s[i].nports) {
			inside |= in;
			outside |= !in;
		}
		port_list(ports, sizeof(ports), s[i].ports, s[i].nports);
		k += (size_t)snprintf(why + k, sizeof(why) - k,
				      "%s %s (pid %u", i ? "," : "; with the shim "
				      "loaded:", s[i].comm, s[i].pid);
		if (s[i].n > 1 && k < sizeof(why))
			k += (size_t)snprintf(why + k, sizeof(why) - k,
					      ", %u processes", s[i].n);
		if (k < sizeof(why))
			k += (size_t)snprintf(why + k, sizeof(why) - k,
					      ") %s%s", s[i].nports ?
					      "listening on " : "listening on "
					      "no port", ports);
	}
	if (outside && k < sizeof(why))
		k += (size_t)snprintf(why + k, sizeof(why) - k,
				      "; a server listening outside ports is "
				      "not limited: add its ports to ports%s%s "
				      "and restart it (its log says \"accepting "
				      "on a port outside ports\")",
				      c->path ? " in " : "", c->path ? c->path : "");
	if (inside && k < sizeof(why))
		snprintf(why + k, sizeof(why) - k, "; a server listening on a "
			 "guarded port has not accepted there yet, or runs "
			 "under another configuration (the \"limiting\" line "
			 "of its log names it)");
	return ctl_fail("%s: no server under the shim has accepted a "
			"connection on a guarded port (ports %s) yet%s",
			err, guarded, why);
}
