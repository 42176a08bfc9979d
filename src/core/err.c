/* SPDX-License-Identifier: MIT */
/* err.c - writing the one line of a struct rl_err (see err.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

void rl_err_set(struct rl_err *e, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

void rl_err_errno(struct rl_err *e, const char *name, int errnum)
{
	rl_err_set(e, "%s: %s", name, strerror(errnum));
}
