/* SPDX-License-Identifier: MIT */
/*
 * config.c - rlshim.conf into an immutable struct rl_config: the entry
 * points that read a file or a string, give the built-in default, find the
 * file through $RLSHIM_CONFIG, stamp it, and register its rules with the
 * table.
 *
 * The parse itself is config_ini.c (lines), config_key.c (keys and
 * sections) and config_value.c (values); config_impl.h joins them.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "config_impl.h"
#include "hash.h"
#include "mem.h"
#include "sys.h"
#include "table.h"

/* ---- parsing a file or a string ---- */

int rl_config_load(const char *path, struct rl_config **out, struct rl_err *err)
{
	struct parser p;
	int rc;

	if (!path || !out)
		return -EINVAL;
	memset(&p, 0, sizeof(p));
	p.name = path;
	p.file = fopen(path, "re");
	if (!p.file) {
		rc = -errno;
		*out = NULL;
		rl_err_errno(err, path, -rc);
		return rc;
	}
	errno = 0;
	rc = rl_cfg_parse(&p, out, err);
	fclose(p.file);
	return rc;
}

int rl_config_read(const char *path, char **text, size_t *len, struct rl_err *err)
{
	size_t cap = 4096, n = 0;
	char *buf = NULL;
	int fd, rc = 0;

	*text = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		rl_err_errno(err, path, -rc);
		return rc;
	}
	for (;;) {
		ssize_t r;

		if (n + 1 >= cap || !buf) {
			char *nb;

			if (buf)
				cap *= 2;
			if (cap > RL_CONFIG_FILE_MAX) {
				rl_err_set(err, "%s: larger than %u bytes",
					 path, RL_CONFIG_FILE_MAX);
				rc = -EFBIG;
				break;
			}
			nb = rl_mem_realloc(buf, cap);
			if (!nb) {
				rc = -ENOMEM;
				rl_err_errno(err, path, ENOMEM);
				break;
			}
			buf = nb;
		}
		r = rl_sys.read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			rl_err_errno(err, path, -rc);
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	rl_sys.close(fd);
	if (rc) {
		rl_mem_free(buf);
		return rc;
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

int rl_config_parse(const char *text, const char *name,
		    struct rl_config **out, struct rl_err *err)
{
	struct parser p;

	if (!text || !out)
		return -EINVAL;
	memset(&p, 0, sizeof(p));
	p.name = name ? name : "<string>";
	p.text = text;
	return rl_cfg_parse(&p, out, err);
}

int rl_config_default(struct rl_config **out)
{
	struct rl_config *c;
	struct rl_rule_cfg *r;

	if (!out)
		return -EINVAL;
	c = rl_mem_alloc(sizeof(*c));
	if (!c) {
		*out = NULL;
		return -ENOMEM;
	}
	rl_cfg_global_defaults(c);
	r = &c->rules[0];
	rl_cfg_rule_defaults(r);
	snprintf(r->name, sizeof(r->name), "default");
	r->rate.period_ns = NS_PER_MIN;
	r->rate.count = 60;
	r->rate.burst = 60;
	c->nrules = 1;
	*out = c;
	return 0;
}

/* ---- which file ---- */

/* $RLSHIM_CONFIG as it was when rl_config_remember_env() ran. */
static char remembered[RL_PATH_MAX];

void rl_config_remember_env(void)
{
	const char *env = getenv(RL_CONFIG_ENV);

	if (env && *env && strlen(env) < sizeof(remembered))
		memcpy(remembered, env, strlen(env) + 1);
}

const char *rl_config_path(void)
{
	const char *env = getenv(RL_CONFIG_ENV);

	if (env && *env)
		return env;
	if (remembered[0])
		return remembered;
	if (access(RL_CONFIG_DEFAULT_PATH, F_OK) == 0)
		return RL_CONFIG_DEFAULT_PATH;
	return NULL;
}

/* ---- the table ---- */

/* Rule `r` as the table's API takes it; `plans` is its storage. */
static void rule_def(const struct rl_rule_cfg *r, struct rl_rate *plans,
		     struct rl_rule_def *def)
{
	for (unsigned k = 0; k < r->nplans; k++)
		plans[k] = r->plans[k].rate;
	def->name = r->name;
	def->algorithm = r->algorithm;
	def->rate = r->rate;
	def->nplans = r->nplans;
	def->plans = plans;
}

int rl_config_register(const struct rl_config *c, struct rl_table *t,
		       unsigned ids[RL_MAX_RULES], struct rl_err *err)
{
	for (unsigned i = 0; i < c->nrules; i++) {
		const struct rl_rule_cfg *r = &c->rules[i];
		struct rl_rate plans[RL_MAX_PLANS];
		struct rl_rule_def def;
		int rc;

		rule_def(r, plans, &def);
		rc = rl_table_rule_claim(t, &def, &ids[i]);
		if (rc) {
			rl_err_set(err, "rule [limit:%s]: %s", r->name,
				 rc == -ENOSPC ? "the segment holds 64 rules "
						 "already (every name it has "
						 "seen, until it is removed)"
					       : "cannot be registered");
			return rc;
		}
	}
	return 0;
}

int rl_config_use(const struct rl_config *c, struct rl_table *t,
		  const unsigned ids[RL_MAX_RULES], struct rl_err *err)
{
	for (unsigned i = 0; i < c->nrules; i++) {
		struct rl_rate plans[RL_MAX_PLANS];
		struct rl_rule_def def;
		int rc;

		rule_def(&c->rules[i], plans, &def);
		rc = rl_table_rule_use(t, ids[i], &def);
		if (rc) {
			rl_err_set(err, "rule [limit:%s]: %s",
				 c->rules[i].name, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* ---- reloads, ports and stamps ---- */

int rl_config_reload_ok(const struct rl_config *next, struct rl_err *err)
{
	if (next->nrules > 0)
		return 0;
	rl_err_set(err, "%s: no [limit:*] rule (to lift every limit on "
		 "purpose, set mode = dry-run)", next->source);
	return -EINVAL;
}

int rl_config_check(const char *path, struct rl_config **out, struct rl_err *err)
{
	char *text = NULL;
	size_t len;
	int rc;

	*out = NULL;
	rc = rl_config_read(path, &text, &len, err);
	if (rc == 0)
		rc = rl_config_parse(text, path, out, err);
	rl_config_text_free(text);
	if (rc == 0 && (rc = rl_config_reload_ok(*out, err)) != 0) {
		rl_config_free(*out);
		*out = NULL;
	}
	return rc;
}

unsigned rl_config_ip_prefix(const struct rl_config *c, const struct rl_addr *a)
{
	return a->family == RL_AF_INET ? c->ipv4_prefix : c->ipv6_prefix;
}

size_t rl_config_ip_key(const struct rl_config *c, const struct rl_addr *a,
			uint8_t out[17])
{
	return rl_addr_key(a, rl_config_ip_prefix(c, a), out);
}

const void *rl_config_key_of_text(const struct rl_config *c,
				  const struct rl_rule_cfg *r, const char *text,
				  size_t tlen, uint8_t buf[17], size_t *len)
{
	struct rl_addr a;

	switch (r->key) {
	case RL_KEY_GLOBAL:
		*len = 0;
		return tlen == 1 && text[0] == '*' ? "" : NULL;
	case RL_KEY_IP:
		if (rl_addr_parse(text, tlen, &a))
			return NULL;
		*len = rl_config_ip_key(c, &a, buf);
		return *len ? buf : NULL;
	case RL_KEY_HEADER:
	case RL_KEY_COOKIE:
	case RL_KEY_JWT:
		break;
	}
	/* the shim counts no empty value */
	if (!tlen || tlen > RL_KEY_MAX)
		return NULL;
	*len = tlen;
	return text;
}

const char *rl_config_key_header(const struct rl_rule_cfg *r)
{
	switch (r->key) {
	case RL_KEY_HEADER:
		return r->header;
	case RL_KEY_COOKIE:
		return "Cookie";
	case RL_KEY_JWT:
		return "Authorization";
	case RL_KEY_IP:
	case RL_KEY_GLOBAL:
		break;
	}
	return NULL;
}

bool rl_config_same_jwt(const struct rl_rule_cfg *a, const struct rl_rule_cfg *b)
{
	return a->key == RL_KEY_JWT && b->key == RL_KEY_JWT &&
	       strcmp(a->header, b->header) == 0 &&
	       a->jwt_secret_len == b->jwt_secret_len &&
	       memcmp(a->jwt_secret, b->jwt_secret, a->jwt_secret_len) == 0;
}

const char *rl_config_key_kind(const struct rl_rule_cfg *r)
{
	static const char *const kind[] = {
		[RL_KEY_IP] = "ip", [RL_KEY_HEADER] = "header",
		[RL_KEY_GLOBAL] = "global", [RL_KEY_COOKIE] = "cookie",
		[RL_KEY_JWT] = "jwt",
	};

	return kind[r->key];
}

int rl_config_guards(const struct rl_config *c, uint16_t port)
{
	if (c->nports == 0)
		return 1;
	for (unsigned i = 0; i < c->nports; i++)
		if (c->ports[i] == port)
			return 1;
	return 0;
}

uint64_t rl_config_stamp(const char *path)
{
	struct stat st;
	uint64_t v[5];

	if (!path)
		return 1;
	if (stat(path, &st) < 0)
		return 0;
	v[0] = (uint64_t)st.st_dev;
	v[1] = (uint64_t)st.st_ino;
	v[2] = (uint64_t)st.st_size;
	v[3] = (uint64_t)st.st_mtim.tv_sec;
	v[4] = (uint64_t)st.st_mtim.tv_nsec;
	/* 0 and 1 mean "none" and "built-in" */
	return rl_hash_sip13(rl_hash_public_key, v, sizeof(v)) | 2;
}

void rl_config_free(struct rl_config *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < RL_MAX_RULES; i++) {
		rl_mem_free(c->rules[i].deny_body[0]);
		rl_mem_free(c->rules[i].deny_body[1]);
	}
	rl_mem_free(c);
}

void rl_config_text_free(char *text)
{
	rl_mem_free(text);
}
