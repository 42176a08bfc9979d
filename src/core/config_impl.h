/* SPDX-License-Identifier: MIT */
/*
 * config_impl.h - what the config_*.c files share to parse rlshim.conf:
 * the parser's state and the declarations of each file's part.
 *
 * Private to src/core: config.h is the API. One parse runs through four
 * files, each with one job:
 *
 *   config.c        the entry points: a file, a string, the built-in
 *                   default, $RLSHIM_CONFIG, the stamp, the table;
 *   config_ini.c    the line reader that drives inih, and one parse's run;
 *   config_key.c    the key table, and the checks when a section or the
 *                   file ends;
 *   config_value.c  the value parsers, one key's text into its field.
 *
 * librlcore.a is installed, so the functions they share are named rl_cfg_*
 * (not the rl_config_* API); the small helpers are static inline here.
 */
#ifndef RL_CONFIG_IMPL_H
#define RL_CONFIG_IMPL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "clock.h"
#include "err.h"

#define LINE_MAX_BYTES 1024          /* longest line, without its newline */
#define QUOTE_MAX 100                /* longest value quoted in a message */
#define KEYS_MAX 64                  /* room in the parser for the key table */
#define NS_PER_MIN (60 * RL_NS_PER_SEC)
#define NS_PER_DAY (86400 * RL_NS_PER_SEC)

/* ---- parser state ---- */

enum sec_kind {
	SEC_NONE = 0, /* before the first header */
	SEC_GLOBAL,
	SEC_REDIS,
	SEC_XDP,
	SEC_LIMIT,
	SEC_BAD,      /* invalid header, already reported: keys are ignored */
};

struct key_def;

struct parser {
	struct rl_config *cfg;
	const char *name;             /* the path, for messages */

	/* input: a FILE or a NUL-terminated string */
	FILE *file;
	const char *text;
	int io_err;                   /* errno of a failed read */

	/* the current line, as read */
	int lineno;
	bool cont;                    /* continues the previous key */
	bool have_key;                /* inih's prev_name is set */
	char line[LINE_MAX_BYTES + 1];

	/* the current section */
	enum sec_kind sec;
	int sec_line;
	char sec_text[48];            /* "limit:sms", for messages */
	struct rl_rule_cfg *rule;     /* SEC_LIMIT */
	const struct key_def *key;    /* the key being parsed (NULL: ignore) */
	int key_line[KEYS_MAX];       /* per key_def: line it was given, 0 */
	uint32_t burst;               /* given burst, applied at section end */

	/* the first `sync = strict`, checked against [redis] at the end */
	int strict_line;
	/* the first `plans`, likewise */
	int plans_line;

	/* sections seen once */
	int global_line, redis_line, xdp_line;

	/* [global] facts checked at the end */
	int proxy_protocol_line;
	bool allow_none, trusted_none;

	/* the first error */
	int err_line;
	char err[RL_ERR_MAX];
};

/* ---- keys (config_key.c) ---- */

enum val_type {
	V_FN,       /* fn(p, value) does everything */
	V_CHOICE,   /* an enum (int-sized) from `choices` */
	V_BOOL,     /* a bool from bool_choices */
	V_UINT,     /* min..max into a field of `size` bytes */
	V_DURATION, /* min..max nanoseconds into a uint64_t */
};

struct choices;

struct key_def {
	enum sec_kind sec;
	const char *name;
	enum val_type type;
	size_t off;                   /* in rl_config, or rl_rule_cfg (SEC_LIMIT) */
	size_t size;
	uint64_t min, max;
	const struct choices *choices;
	int (*fn)(struct parser *p, const char *v);
	bool list;                    /* continuation lines append */
};

void rl_cfg_global_defaults(struct rl_config *c);
void rl_cfg_rule_defaults(struct rl_rule_cfg *r);

/* A `[text]` header at the current line: ends the section before it. */
void rl_cfg_begin_section(struct parser *p, const char *text, size_t len);
/* Checks that need the whole section, then no section is current. */
void rl_cfg_end_section(struct parser *p);
/* Checks across sections, once the whole file is read. */
void rl_cfg_end_file(struct parser *p);

/* A `name = value` line, and an indented line that continues it; both
 * return 1 (inih's success), errors are recorded in the parser. */
int rl_cfg_on_key(struct parser *p, const char *name, const char *value);
int rl_cfg_on_continuation(struct parser *p, const char *value);

/* ---- the line reader and a parse's run (config_ini.c) ---- */

/*
 * Keep the first error found, at `line`. Lines are read in order and a
 * section's cross-key checks run when the section ends, so this is the
 * first problem in the file, except that a key's own error beats a check
 * of its section ("rat = 3/m" is reported, not the rate that is then
 * missing).
 */
__attribute__((format(printf, 3, 4)))
void rl_cfg_perr_at(struct parser *p, int line, const char *fmt, ...);

/* A warning at `line`: the file still loads (struct rl_config warnings). */
__attribute__((format(printf, 3, 4)))
void rl_cfg_pwarn_at(struct parser *p, int line, const char *fmt, ...);

/* Shorthands: the first error at `line`, or at the line being read. */
#define perr_at(p, line, ...) rl_cfg_perr_at((p), (line), __VA_ARGS__)
#define perr(p, ...) rl_cfg_perr_at((p), (p)->lineno, __VA_ARGS__)

/*
 * Parse the input `p` was set up with (name, and file or text; the rest
 * zeroed). On success *out is a new configuration and 0 is returned; on
 * error *out is NULL, `err` holds the one-line message and -EINVAL (the
 * content), -ENOMEM or the negative errno of a failed read is returned.
 */
int rl_cfg_parse(struct parser *p, struct rl_config **out, struct rl_err *err);

/* ---- character classes and small parsers, for every part ---- */

static inline bool is_space(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

/* Rule, plan and segment names: [A-Za-z0-9_.-]. */
static inline bool is_name(const char *s, size_t len, size_t max)
{
	if (len == 0 || len > max)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return false;
	}
	return true;
}

/*
 * inih's inline comment: a ';' after whitespace. Returns the first of
 * `chars` or of such a comment, or the end of the string.
 */
static inline const char *find_or_comment(const char *s, const char *chars)
{
	bool was_space = false;

	for (; *s; s++) {
		if (strchr(chars, *s) || (was_space && *s == ';'))
			break;
		was_space = is_space((unsigned char)*s);
	}
	return s;
}

/* Decimal digits only: no sign, no space. Returns 0, -EINVAL or -ERANGE. */
static inline int parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(s[i] - '0'), &v))
			return -ERANGE;
	}
	*out = v;
	return 0;
}

/* How much of a `len`-byte item a message quotes (its "%.*s"). */
static inline int quote_len(size_t len)
{
	return (int)(len < QUOTE_MAX ? len : QUOTE_MAX);
}

/* 1 if the string `s` is the `len` bytes at `t` (not NUL-terminated): a
 * name that an item of a list or a section header repeats. */
static inline bool same_text(const char *s, const char *t, size_t len)
{
	return strlen(s) == len && !memcmp(s, t, len);
}

/* "bad KEY 'v' (expected ...)", of the key being parsed: -EINVAL. */
static inline int bad_value(struct parser *p, const char *v,
			    const char *expected)
{
	perr(p, "bad %s '%.*s' (%s)", p->key->name, QUOTE_MAX, v, expected);
	return -EINVAL;
}

/* Copy `v` into a char array field that is known to be large enough. */
static inline void set_text(char *dst, size_t size, const char *v,
			    size_t len)
{
	if (len >= size)
		len = size - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

/* ---- values (config_value.c) ---- */

/*
 * The keys that parse their own value (V_FN), each into its field of the
 * current configuration or rule. Each returns 0, or a negative errno with
 * the error recorded in the parser.
 */
int rl_cfg_parse_ports(struct parser *p, const char *v);
int rl_cfg_parse_shm(struct parser *p, const char *v);
int rl_cfg_parse_allow(struct parser *p, const char *v);
int rl_cfg_parse_trusted(struct parser *p, const char *v);
int rl_cfg_parse_client_ip_header(struct parser *p, const char *v);
int rl_cfg_parse_url(struct parser *p, const char *v);
int rl_cfg_parse_prefix(struct parser *p, const char *v);
int rl_cfg_parse_interfaces(struct parser *p, const char *v);
int rl_cfg_parse_match(struct parser *p, const char *v);
int rl_cfg_parse_rate(struct parser *p, const char *v);
int rl_cfg_parse_burst(struct parser *p, const char *v);
int rl_cfg_parse_key(struct parser *p, const char *v);
int rl_cfg_parse_jwt_secret(struct parser *p, const char *v);
int rl_cfg_parse_deny_json(struct parser *p, const char *v);
int rl_cfg_parse_deny_html(struct parser *p, const char *v);
int rl_cfg_parse_plans(struct parser *p, const char *v);
int rl_cfg_parse_count_status(struct parser *p, const char *v);

#endif /* RL_CONFIG_IMPL_H */
