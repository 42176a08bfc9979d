/* SPDX-License-Identifier: MIT */
/*
 * keys.c - one key's view as top and show present it: the wait for its
 * next request, worked out from its rule's algorithm, and its name as the
 * rule keys by it.
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"

#include "addr.h"
#include "sha256.h"

/*
 * The wait for a cost-1 request. The view's peek is a cost-0 request,
 * which passes even from an empty bucket, so its retry is always 0: the
 * wait is worked out from the rule's algorithm. GCRA: the bucket is empty
 * until one interval past TAT - depth, and the reset is TAT - now, so the
 * wait is reset + interval - depth (the key's plan is the one whose burst
 * is the view's limit). Fixed window: the window's end, which is the
 * reset. Sliding window: the counts are not in the view; the reset (both
 * windows gone) bounds the wait from above.
 */
uint64_t ctl_key_retry(struct ctl *c, const struct rl_slot_view *v, int *bound)
{
	const struct rl_rule_cache *rc = rl_table_rule_get(c->table, v->rule);
	const struct rl_algo *a;
	uint64_t retry = 0;

	*bound = 0;
	if (!rc || v->peek.remaining > 0)
		return 0;
	a = &rc->algo;
	for (unsigned i = 0; i < rc->nplans && a->rate.burst != v->peek.limit; i++)
		a = &rc->plans[i];
	if (a->rate.burst != v->peek.limit)
		a = &rc->algo;
	switch (a->kind) {
	case RL_ALGO_GCRA:
		if (v->peek.reset_after_ns + a->interval_ns > a->depth_ns)
			retry = v->peek.reset_after_ns + a->interval_ns -
				a->depth_ns;
		break;
	case RL_ALGO_FIXED_WINDOW:
		retry = v->peek.reset_after_ns;
		break;
	case RL_ALGO_SLIDING_WINDOW:
		retry = v->peek.reset_after_ns;
		*bound = 1;
		break;
	}
	return v->peek.retry_after_ns > retry ? v->peek.retry_after_ns : retry;
}

const struct rl_rule_cfg *ctl_rule_cfg(struct ctl *c, const char *name)
{
	for (unsigned i = 0; c->cfg && i < c->cfg->nrules; i++)
		if (strncmp(c->cfg->rules[i].name, name, RL_RULE_NAME_MAX) == 0)
			return &c->cfg->rules[i];
	return NULL;
}

/*
 * An `ip` key is rl_addr_key()'s: the family byte, then the address
 * masked to the configured prefix (4 or 16 bytes). It is shown as the
 * address, with the prefix when it is not a host's.
 */
static int format_addr(struct ctl *c, const struct rl_slot_view *v, char *buf,
		       size_t len)
{
	struct rl_addr a;
	unsigned prefix, bits;
	char text[RL_ADDR_STRLEN];

	memset(&a, 0, sizeof(a));
	if (v->truncated)
		return -1;
	if (v->key_len == 5 && v->key[0] == RL_AF_INET)
		bits = 32;
	else if (v->key_len == 17 && v->key[0] == RL_AF_INET6)
		bits = 128;
	else
		return -1;
	a.family = v->key[0];
	memcpy(a.bytes, v->key + 1, bits / 8);
	if (rl_addr_format(&a, text, sizeof(text)))
		return -1;
	prefix = !c->cfg ? bits : bits == 32 ? c->cfg->ipv4_prefix
					      : c->cfg->ipv6_prefix;
	if (prefix >= bits)
		snprintf(buf, len, "%s", text);
	else
		snprintf(buf, len, "%s/%u", text, prefix);
	return 0;
}

/* A header's value as text: printable ASCII as it is, the rest escaped,
 * a truncated key's digest replaced by "…". */
static void format_text(const struct rl_slot_view *v, char *buf, size_t len)
{
	size_t n = v->key_len, o = 0;

	if (v->truncated && n >= 8)
		n -= 8;
	for (size_t i = 0; i < n && o + 5 < len; i++) {
		uint8_t b = v->key[i];

		if (b == '\\')
			o += (size_t)snprintf(buf + o, len - o, "\\\\");
		else if (b >= 0x20 && b < 0x7f)
			buf[o++] = (char)b;
		else
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", b);
	}
	buf[o] = '\0';
	if (v->truncated)
		snprintf(buf + o, len - o, "…");
}

int ctl_fmt_view_key(struct ctl *c, const struct rl_slot_view *v, char *buf,
		     size_t len)
{
	const struct rl_rule_cfg *r =
		ctl_rule_cfg(c, rl_table_rule_name(c->table, v->rule));

	if ((r && r->key == RL_KEY_GLOBAL) || (!r && v->key_len == 0)) {
		snprintf(buf, len, "(global)");
		return 1;
	}
	/* A cookie's value is a session's secret: who reads top could take
	 * it over. Its digest names it apart from the others. */
	if (r && r->key == RL_KEY_COOKIE && !c->show_secrets) {
		char name[RL_SHA256_NAME_LEN];

		rl_sha256_name(v->key, v->key_len, name);
		snprintf(buf, len, "%s", name);
		return 0;
	}
	if ((r && r->key != RL_KEY_IP) || format_addr(c, v, buf, len))
		format_text(v, buf, len);
	return 0;
}

