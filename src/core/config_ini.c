/* SPDX-License-Identifier: MIT */
/*
 * config_ini.c - the INI line reader: drives libinih over a file or a
 * string one raw line at a time, and runs one parse to its first error.
 *
 * libinih splits lines into sections and `key = value` pairs (stripping
 * whitespace and " ;" comments); every meaning is ours. inih is driven
 * through ini_parse_stream() with our own line reader, which sees each raw
 * line before inih does. The reader
 *
 *   - counts lines, so every message can say `file:line:` (the handler that
 *     inih calls has no line number);
 *   - refuses over-long lines itself, instead of letting inih cut them;
 *   - handles `[section]` headers, so a duplicate or unknown section is
 *     reported at its own line even when it holds no key;
 *   - mirrors inih's rule for continuation lines (Debian builds inih with
 *     INI_ALLOW_MULTILINE: an indented line after a key continues that key),
 *     so the handler knows a new key from a continued one.
 */
#include "config_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "mem.h"

/* ---- the first error ---- */

/* Only the first call counts: see config_impl.h. */
void rl_cfg_perr_at(struct parser *p, int line, const char *fmt, ...)
{
	va_list ap;

	if (p->err_line)
		return;
	p->err_line = line;
	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
}

void rl_cfg_pwarn_at(struct parser *p, int line, const char *fmt, ...)
{
	struct rl_config *c = p->cfg;
	va_list ap;

	if (c->nwarnings < RL_CONFIG_WARN_MAX) {
		char *w = c->warnings[c->nwarnings];
		int n = snprintf(w, RL_ERR_MAX, "%s:%d: warning: ", p->name,
				 line);

		if (n > 0 && n < RL_ERR_MAX) {
			va_start(ap, fmt);
			vsnprintf(w + n, (size_t)(RL_ERR_MAX - n), fmt, ap);
			va_end(ap);
		}
	}
	c->nwarnings++;
}

/* `file:line: message` into `err`, or "" when there was no error. */
static void report(const struct parser *p, struct rl_err *err)
{
	if (!err)
		return;
	if (p->err_line)
		rl_err_set(err, "%s:%d: %s", p->name, p->err_line, p->err);
	else
		err->msg[0] = '\0';
}

/* ---- the line reader ---- */

static int next_char(struct parser *p)
{
	int c;

	if (!p->file)
		return *p->text ? (unsigned char)*p->text++ : EOF;
	c = getc_unlocked(p->file);
	if (c == EOF && ferror(p->file))
		p->io_err = errno ? errno : EIO;
	return c;
}

/*
 * Classify the line just read, as inih will: a comment or blank, a
 * continuation of the previous key, a section header, or a key. Headers are
 * handled here; inih still sees them, so its state stays like ours.
 */
static void classify(struct parser *p)
{
	const char *s = p->line, *end, *t;

	p->cont = false;
	while (is_space((unsigned char)*s))
		s++;
	if (*s == '\0' || *s == ';' || *s == '#')
		return;
	if (s > p->line && p->have_key) {
		p->cont = true;
		return;
	}
	if (*s == '[') {
		end = find_or_comment(s + 1, "]");
		if (*end != ']') {
			perr(p, "unterminated section header");
			return;
		}
		for (t = end + 1; is_space((unsigned char)*t); t++)
			;
		if (*t && *t != ';')
			perr(p, "unexpected text after ']'");
		p->have_key = false;
		rl_cfg_begin_section(p, s + 1, (size_t)(end - s - 1));
		return;
	}
	end = find_or_comment(s, "=:");
	if (*end != '=' && *end != ':') {
		perr(p, "expected 'key = value' or '[section]'");
		return;
	}
	for (t = end; t > s && is_space((unsigned char)t[-1]); t--)
		;
	p->have_key = t > s;
	if (t == s)
		perr(p, "missing key name before '%c'", *end);
}

/*
 * ini_reader: one physical line, with its newline, into `buf`. A line that
 * is too long or holds a NUL byte is reported and handed to inih as a blank
 * line, so that inih never splits a line and its count stays ours.
 */
static char *read_line(char *buf, int num, void *stream)
{
	struct parser *p = stream;
	bool any = false, too_long = false, nul = false;
	size_t n = 0, skip = 0;
	int c;

	if (num < 2)
		return NULL; /* never: inih passes ini_max_line */
	while ((c = next_char(p)) != EOF) {
		any = true;
		if (c == '\n')
			break;
		if (c == '\0')
			nul = true;
		if (n < LINE_MAX_BYTES)
			p->line[n++] = (char)c;
		else
			too_long = true;
	}
	if (!any)
		return NULL;
	p->line[n] = '\0';
	p->lineno++;
	p->cont = false;
	/* A UTF-8 byte order mark, as inih would skip it. */
	if (p->lineno == 1 && n >= 3 && !memcmp(p->line, "\xEF\xBB\xBF", 3))
		skip = 3;
	if (too_long || n + 2 > (size_t)num) {
		perr(p, "line too long (max %d bytes)", LINE_MAX_BYTES);
		p->line[0] = '\0';
	} else if (nul) {
		perr(p, "NUL byte in line");
		p->line[0] = '\0';
	} else if (skip) {
		memmove(p->line, p->line + skip, n - skip + 1);
	}
	classify(p);
	n = strlen(p->line);
	memcpy(buf, p->line, n);
	buf[n] = '\n';
	buf[n + 1] = '\0';
	return buf;
}

/* ---- inih's handler ---- */

/*
 * inih's handler. The section inih passes is ignored:
 * rl_cfg_begin_section() has already seen the header line, and inih
 * truncates long section names.
 * Always returns 1 (success): errors are recorded in the parser.
 */
static int on_pair(void *user, const char *section, const char *name,
		   const char *value)
{
	struct parser *p = user;

	(void)section;
	if (p->cont)
		return rl_cfg_on_continuation(p, value);
	return rl_cfg_on_key(p, name, value);
}

/* ---- one parse ---- */

int rl_cfg_parse(struct parser *p, struct rl_config **out, struct rl_err *err)
{
	struct rl_config *c;
	int rc;

	*out = NULL;
	if (err)
		err->msg[0] = '\0';
	c = rl_mem_alloc(sizeof(*c));
	if (!c) {
		rl_err_errno(err, p->name, ENOMEM);
		return -ENOMEM;
	}
	rl_cfg_global_defaults(c);
	snprintf(c->source, sizeof(c->source), "%s", p->name);
	p->cfg = c;
	memset(p->key_line, 0, sizeof(p->key_line));

	/*
	 * inih's line buffer is a VLA of ini_max_line bytes: make room for a
	 * whole line plus "\r\n\0"; read_line() refuses longer ones. It is
	 * not restored afterwards: every parse sets the same value, so two
	 * threads parsing at once cannot shrink each other's buffer, and no
	 * other code in the process uses this (statically linked) inih.
	 */
	ini_max_line = LINE_MAX_BYTES + 3;
	rc = ini_parse_stream(read_line, p, on_pair, p);

	if (p->io_err) {
		rl_err_errno(err, p->name, p->io_err);
		rl_config_free(c);
		return -p->io_err;
	}
	rl_cfg_end_section(p);
	rl_cfg_end_file(p);
	if (rc > 0)
		perr_at(p, rc, "syntax error"); /* inih saw what we did not */
	if (rc < 0 && !p->err_line) {
		rl_err_errno(err, p->name, ENOMEM);
		rl_config_free(c);
		return -ENOMEM;
	}
	if (p->err_line) {
		report(p, err);
		rl_config_free(c);
		return -EINVAL;
	}
	*out = c;
	return 0;
}
