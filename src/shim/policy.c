/* SPDX-License-Identifier: MIT */
/* policy.c - clients, rule matching, keys and decisions. */
#include "policy.h"

#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "ban.h"
#include "err.h"
#include "log.h"
#include "spawn.h"
#include "table.h"
#include "clock.h"
#include "cookie.h"
#include "jwt.h"

_Static_assert(RL_WANT_MAX >= RL_MAX_KEY_HEADERS,
	       "the parser asks for every header a valid configuration names");

/* The index of `name` in `w`, adding it if new; -1 if `w` is full. */
static int want_add(struct rl_http_want *w, const char *name)
{
	size_t n = strlen(name);

	for (unsigned i = 0; i < w->n; i++)
		if (rl_http_name_eq(w->name[i], w->len[i], name, n))
			return (int)i;
	if (w->n == RL_WANT_MAX || n >= sizeof(w->name[0]))
		return -1;
	memcpy(w->name[w->n], name, n + 1);
	w->len[w->n] = (uint8_t)n;
	return (int)w->n++;
}

/*
 * The process's cache of the tokens its jwt rules read (jwt.h), one for
 * all its threads and policies: a policy's claim and key pairs each get a
 * tag of their own, new at every policy (a reload reads each token once
 * more), so an entry never answers for another claim or secret.
 */
static struct rl_jwt_cache jwt_cache;
static uint64_t jwt_tags; /* __atomic: the last tag given */

static uint64_t jwt_tag(const struct rl_table *t)
{
	uint64_t tag = __atomic_add_fetch(&jwt_tags, 1, __ATOMIC_RELAXED);

	if (tag == 1)
		rl_jwt_cache_init(&jwt_cache, t->seed);
	return tag;
}

int rl_policy_init(struct rl_policy *p, const struct rl_config *cfg,
		   struct rl_table *t, struct rl_err *err)
{
	int rc;

	memset(p, 0, sizeof(*p));
	p->cfg = cfg;
	p->table = t;
	p->want_xff = -1;
	if (cfg->trusted_proxies.n > 0 && cfg->client_ip_header[0])
		p->want_xff = want_add(&p->want, cfg->client_ip_header);
	rc = rl_config_register(cfg, t, p->ids, err);
	if (rc)
		return rc;
	for (unsigned i = 0; i < cfg->nrules; i++) {
		const struct rl_rule_cfg *r = &cfg->rules[i];

		p->want_key[i] = -1;
		if (rl_config_key_header(r)) {
			p->want_key[i] = want_add(&p->want, rl_config_key_header(r));
			if (p->want_key[i] < 0) {
				rl_err_set(err, "rule [limit:%s]: too many "
					 "distinct key headers (%d at most)",
					 r->name, RL_WANT_MAX);
				return -ENOSPC;
			}
		}
		p->jwt_of[i] = -1;
		if (r->key == RL_KEY_JWT) {
			/* the configuration's slot: the first rule of each
			 * prepares its HMAC key */
			p->jwt_of[i] = (int8_t)r->jwt_slot;
			if (r->jwt_slot == p->njwt) {
				p->jwt_verify[p->njwt] = r->jwt_secret_len > 0;
				p->jwt_tag[p->njwt] = jwt_tag(t);
				if (r->jwt_secret_len)
					rl_sha256_hmac_init(&p->jwt_hmac[p->njwt],
							    r->jwt_secret,
							    r->jwt_secret_len);
				p->njwt++;
			}
		}
		if (r->match == RL_MATCH_ACCEPT)
			p->accept_rules = 1;
		if (r->match == RL_MATCH_REQUEST && r->path[0])
			p->want.need_path = 1;
	}
	/* The order rules are taken in: the file's, strict rules last, so
	 * that a request another rule refuses never spends a strict rule's
	 * budget in the store (which no give-back reaches). */
	for (unsigned pass = 0; pass < 2; pass++)
		for (unsigned i = 0; i < cfg->nrules; i++)
			if ((cfg->redis &&
			     cfg->rules[i].sync == RL_SYNC_STRICT) == (int)pass)
				p->steps[p->nsteps++] = (uint8_t)i;
	/* All of it is right: its rates in force in this process. */
	return rl_config_use(cfg, t, p->ids, err);
}

int rl_policy_expects_proxy(const struct rl_policy *p,
			    const struct rl_addr *peer)
{
	return p->cfg->proxy_protocol &&
	       rl_cidr_set_contains(&p->cfg->trusted_proxies, peer);
}

static void verdict_allow(const struct rl_policy *p, struct rl_verdict *v)
{
	/* near_res and charge[] are read only as near and ncharge say: not
	 * cleared (a third of the verdict, on every request). */
	memset(v, 0, offsetof(struct rl_verdict, near_res));
	v->ncharge = 0;
	v->cfg = p->cfg;
	v->allowed = 1;
	v->rule = -1;
	v->near = -1;
}


/* 1 at most once per `gap` (in the unit of `t`) for the whole process:
 * dry-run's lines could otherwise come at the request rate. */
static int now_and_then(_Atomic uint64_t *last, uint64_t t, uint64_t gap)
{
	uint64_t prev = atomic_load_explicit(last, memory_order_relaxed);

	return t - prev >= gap && atomic_compare_exchange_strong(last, &prev, t);
}

/*
 * The client was denied by rule `i` (in dry-run: would have been): count
 * it towards the rule's maxretry, per client address at the prefix bans
 * work at, whatever the rule keys by, and ban the address when reached. A
 * refusal because the store is down is not the client's doing. `hint` is
 * the decision's, if the rule keyed by that same address.
 */
static void offend(const struct rl_policy *p, unsigned i,
		   const struct rl_addr *client, const uint8_t *ipkey,
		   size_t iplen, struct rl_slot_hint *hint, uint64_t now,
		   const struct rl_verdict *v)
{
	const struct rl_config *cfg = p->cfg;
	const struct rl_rule_cfg *r = &cfg->rules[i];
	struct rl_ban_rule br = { r->bantime_ns / RL_NS_PER_MS,
				  r->bantime_max_ns / RL_NS_PER_MS,
				  r->bantime_increment, p->ids[i] };
	struct rl_cidr c = { *client,
			     (uint8_t)rl_config_ip_prefix(cfg, client) };
	uint64_t wall = rl_time_wall_ms(), until = 0;
	uint32_t n = 0;
	char who[RL_CIDR_STRLEN], dur[32];

	if (!r->maxretry || v->store_down || !iplen)
		return;
	if (rl_table_fail(p->table, p->ids[i], ipkey, iplen, r->maxretry,
			  r->findtime_ns, now, hint) != 1)
		return;
	rl_cidr_format(&c, who, sizeof(who));
	if (cfg->mode == RL_MODE_DRY_RUN) {
		/* Nothing stops a client in dry-run, so this could come at
		 * the request rate: one line a second at most. */
		static _Atomic uint64_t last;

		if (now_and_then(&last, now, RL_NS_PER_SEC))
			rl_log(RL_LOG_WARN, "msg=\"dry-run: would ban\" "
			       "client=%s rule=%s maxretry=%u", who, r->name,
			       r->maxretry);
		return;
	}
	if (rl_ban_offence(p->table, &c, &br, wall, &until, &n) != 0)
		return; /* banned already (another worker), or no room */
	rl_table_count_ban(p->table, p->ids[i]);
	rl_time_format_duration(dur, sizeof(dur),
				(until - wall) * RL_NS_PER_MS);
	rl_log(RL_LOG_WARN, "msg=\"banned\" client=%s rule=%s maxretry=%u "
	       "for=%s offence=%u", who, r->name, r->maxretry, dur, n);
}

/*
 * A ban holds `a`: refuse, saying for how long. 1 if so. In dry-run the
 * refusal is counted as in enforce mode (the ban's and the segment's
 * counters), said in a line a second at most, and not made: 0.
 */
static int banned(const struct rl_policy *p, const struct rl_addr *a,
		  struct rl_verdict *v)
{
	uint64_t wall = rl_time_wall_ms();
	uint64_t until = rl_ban_lookup(p->table, a, wall);

	if (!until)
		return 0;
	rl_table_count(p->table, RL_COUNT_BAN_REFUSALS);
	if (p->cfg->mode == RL_MODE_DRY_RUN) {
		static _Atomic uint64_t last_ms;
		char who[RL_ADDR_STRLEN], dur[32];

		if (now_and_then(&last_ms, wall, 1000)) {
			uint64_t left = (until - wall) * RL_NS_PER_MS;

			rl_addr_format(a, who, sizeof(who));
			rl_time_format_duration(dur, sizeof(dur),
						rl_time_ceil_sec(left) *
						RL_NS_PER_SEC);
			rl_log(RL_LOG_WARN, "msg=\"dry-run: would refuse\" "
			       "client=%s reason=ban for=%s", who, dur);
		}
		return 0;
	}
	v->allowed = 0;
	v->banned = 1;
	v->res.retry_after_ns = (until - wall) * RL_NS_PER_MS;
	v->res.reset_after_ns = v->res.retry_after_ns;
	return 1;
}

/*
 * Take one unit of rule `i` for `key`. On a denial, give back the units
 * taken for rules taken[0..ntaken) and fill `v`. Returns 1 if it denied.
 */
struct taken {
	unsigned rule;
	const void *key;
	size_t len;
	uint32_t limit, remaining;
	uint64_t reset_ns;
};

/* Give back what a request took: it is refused after all. */
static void refund_all(const struct rl_policy *p, const struct taken *done,
		       unsigned ndone, uint64_t now)
{
	for (unsigned k = 0; k < ndone; k++)
		rl_table_give_back(p->table, p->ids[done[k].rule], done[k].key,
				   done[k].len, 1, now);
}

/* The request passed every rule: count it allowed by each that took, and
 * say what its answer needs (struct rl_verdict). */
static void count_all(const struct rl_policy *p, const struct taken *done,
		      unsigned ndone, uint64_t now, struct rl_verdict *v)
{
	const struct rl_config *cfg = p->cfg;

	for (unsigned k = 0; k < ndone; k++) {
		const struct taken *d = &done[k];
		const struct rl_rule_cfg *r = &cfg->rules[d->rule];

		rl_table_count_allowed(p->table, p->ids[d->rule]);
		v->counted |= 1ull << p->ids[d->rule];
		if (cfg->headers_on == RL_HEADERS_ON_ALL &&
		    (v->near < 0 || d->remaining < v->near_res.remaining ||
		     (d->remaining == v->near_res.remaining &&
		      d->reset_ns > v->near_res.reset_after_ns))) {
			v->near = (int)d->rule;
			v->near_res.limit = d->limit;
			v->near_res.remaining = d->remaining;
			v->near_res.reset_after_ns = d->reset_ns;
		}
		if (r->count_status_on && v->ncharge < RL_CHARGES_MAX) {
			struct rl_charge *c = &v->charge[v->ncharge++];

			c->rule = (uint8_t)d->rule;
			c->id = (uint8_t)p->ids[d->rule];
			rl_table_key_ref(p->table, c->id, d->key, d->len, &c->ref);
			c->ref.until_ns = now + d->reset_ns;
		}
	}
}

/* With [redis], is the store (or the agent that talks to it) down? */
static int store_down(const struct rl_policy *p, uint64_t now)
{
	return (rl_table_agent_flags(p->table) & RL_AGENT_STORE_DOWN) ||
	       rl_agent_dead(p->table, now);
}

/* The store cannot decide for rule `r`, on_store_down = closed: 429,
 * Retry-After 1, until the store is back. */
static void fail_closed(const struct rl_rule_cfg *r, struct rl_result *res,
			struct rl_verdict *v)
{
	memset(res, 0, sizeof(*res));
	res->limit = r->rate.burst;
	res->retry_after_ns = RL_NS_PER_SEC;
	res->reset_after_ns = RL_NS_PER_SEC;
	v->store_down = 1;
}

/*
 * Rule `i` is strict: the store decides, through the agent, within the
 * store's timeout; a key the store already refused is refused here. When
 * the store cannot decide (down, slow, no agent), on_store_down: open keeps
 * the decision made here (on this host's share, as for async rules), closed
 * refuses as for a store known to be down.
 */
static void strict(const struct rl_policy *p, unsigned i, const void *key,
		   size_t len, uint64_t now, struct rl_result *res,
		   struct rl_slot_hint *hint, struct rl_verdict *v)
{
	const struct rl_rule_cfg *r = &p->cfg->rules[i];

	/* Known down: no request waits for it (closed was refused before). */
	if (store_down(p, now)) {
		rl_table_take_uncounted(p->table, p->ids[i], key, len, 1, now,
					res, hint);
		return;
	}
	if (rl_table_take_strict(p->table, p->ids[i], key, len, 1, now,
				 now + p->cfg->redis_timeout_ns, res, hint) !=
	    -EAGAIN)
		return;
	if (r->on_store_down != RL_STORE_DOWN_CLOSED)
		return;
	if (res->allowed)
		rl_table_give_back(p->table, p->ids[i], key, len, 1, now);
	/* A denial of the table's own is counted already. */
	rl_table_count_store_down(p->table, p->ids[i], !res->allowed);
	fail_closed(r, res, v);
}

/* Returns 1 when the request is refused by rule `i`. A denial (or in
 * dry-run, a would-be denial) is left in v->rule: the caller counts it
 * towards maxretry. */
static int take(const struct rl_policy *p, unsigned i, const void *key,
		size_t len, uint64_t now, struct taken *done, unsigned *ndone,
		struct rl_verdict *v, struct rl_slot_hint *hint)
{
	const struct rl_rule_cfg *r = &p->cfg->rules[i];
	struct rl_result res;

	if (r->on_store_down == RL_STORE_DOWN_CLOSED && p->cfg->redis &&
	    store_down(p, now)) {
		/* No decision of the table's: counted here, denied and as
		 * the store's doing. */
		rl_table_count_store_down(p->table, p->ids[i], 0);
		fail_closed(r, &res, v);
	} else if (r->sync == RL_SYNC_STRICT && p->cfg->redis) {
		strict(p, i, key, len, now, &res, hint, v);
	} else if (p->cfg->redis && r->algorithm == RL_ALGO_GCRA &&
		   !store_down(p, now)) {
		/* async: a key whose share is spent (or new here, other hosts
		 * alive) asks the store for more of what it has left, within
		 * the store's timeout; without an answer, decided as ever
		 * (on_store_down). A key within its share: as ever. */
		rl_table_take_lend(p->table, p->ids[i], key, len, 1, now,
				   now + p->cfg->redis_timeout_ns, &res, hint);
	} else {
		rl_table_take_uncounted(p->table, p->ids[i], key, len, 1, now,
					&res, hint);
	}
	if (res.allowed) {
		struct taken *d = &done[(*ndone)++];

		d->rule = i;
		d->key = key;
		d->len = len;
		d->limit = res.limit;
		d->remaining = res.remaining;
		d->reset_ns = res.reset_after_ns;
		return 0;
	}
	if (p->cfg->mode == RL_MODE_DRY_RUN) {
		/* Count and go on; remember the first that would deny. */
		if (v->rule < 0) {
			v->rule = (int)i;
			v->res = res;
			return 2;
		}
		return 0;
	}
	refund_all(p, done, *ndone, now);
	v->allowed = 0;
	v->rule = (int)i;
	v->res = res;
	return 1;
}

void rl_policy_accept(const struct rl_policy *p, const struct rl_addr *client,
		      uint64_t now_ns, struct rl_verdict *v)
{
	const struct rl_config *cfg = p->cfg;
	struct taken done[RL_MAX_RULES];
	uint8_t ipkey[17];
	size_t iplen;
	unsigned ndone = 0;

	verdict_allow(p, v);
	if (rl_cidr_set_contains(&cfg->allow, client))
		return; /* never limited, never banned */
	/* A ban: the cheapest refusal, before anything is read. */
	if (rl_ban_any(p->table, client->family) && banned(p, client, v))
		return;
	if (!p->accept_rules)
		return;
	iplen = rl_config_ip_key(cfg, client, ipkey);
	for (unsigned step = 0; step < p->nsteps; step++) {
		unsigned i = p->steps[step];
		const struct rl_rule_cfg *r = &cfg->rules[i];
		const uint8_t *key = r->key == RL_KEY_IP ? ipkey
						       : (const uint8_t *)"";
		size_t len = r->key == RL_KEY_IP ? iplen : 0;
		int rc;

		if (r->match != RL_MATCH_ACCEPT)
			continue;
		rc = take(p, i, key, len, now_ns, done, &ndone, v, NULL);
		if (rc)
			offend(p, i, client, ipkey, iplen, NULL, now_ns, v);
		if (rc == 1)
			return;
	}
	count_all(p, done, ndone, now_ns, v);
}

/* Parse one element of a comma-separated address list, trimmed. */
static int list_addr(const char *s, size_t n, struct rl_addr *out)
{
	while (n && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	return rl_addr_parse(s, n, out);
}

void rl_policy_client(const struct rl_policy *p, const struct rl_addr *peer,
		      const struct rl_http_req *req, struct rl_addr *client)
{
	const struct rl_cidr_set *trusted = &p->cfg->trusted_proxies;
	unsigned w = (unsigned)p->want_xff, kept;

	*client = *peer;
	if (p->want_xff < 0 || !rl_cidr_set_contains(trusted, peer))
		return;
	kept = req->nvalues[w] < RL_WANT_VALUES ? req->nvalues[w]
						: RL_WANT_VALUES;
	/* Right to left over the kept occurrences and their elements: the
	 * first address that is not a trusted proxy is the client. Anything
	 * unparsable stops the walk at the last good hop. */
	for (unsigned k = kept; k-- > 0;) {
		const char *v = req->values[w][k].p;
		size_t end = req->values[w][k].len;

		while (end > 0) {
			size_t start = end;
			struct rl_addr a;

			while (start > 0 && v[start - 1] != ',')
				start--;
			if (list_addr(v + start, end - start, &a))
				return;
			*client = a;
			if (!rl_cidr_set_contains(trusted, &a))
				return;
			end = start > 0 ? start - 1 : 0;
		}
	}
}

/* A path's length without its trailing slashes ("/" stays "/"). */
static size_t unslashed(const char *p, size_t n)
{
	while (n > 1 && p[n - 1] == '/')
		n--;
	return n;
}

/*
 * Methods match in any letter case (busybox httpd takes "get" for GET), and
 * a GET rule covers HEAD, which servers answer as GET. An exact path
 * matches itself with or without trailing slashes (Python's http.server
 * serves "/a/." and "/a%2F" as the file /a) and every path below it: a
 * server that runs a script for "/a.php" runs it for "/a.php/x" too, with
 * PATH_INFO "/x" (php -S, mod_php, CGI, FastCGI, WSGI's SCRIPT_NAME). "/"
 * is only itself. An index file's rule also matches its directory
 * (config_value.c, rl_cfg_path_lengths). A path cut to the head's size
 * matches on what was kept: over-counting rather than under.
 */
static int rule_matches(const struct rl_rule_cfg *r,
			const struct rl_http_req *req)
{
	size_t n, m;

	if (r->match != RL_MATCH_REQUEST)
		return 0;
	if (r->method[0]) {
		size_t k = strlen(r->method), l = strlen(req->method);

		if (!rl_http_name_eq(r->method, k, req->method, l) &&
		    !(req->head && rl_http_name_eq(r->method, k, "GET", 3)))
			return 0;
	}
	if (!r->path[0])
		return 1;
	n = r->path_len;
	m = req->path_len;
	if (r->path_prefix)
		return m >= n && memcmp(req->path, r->path, n) == 0;
	if (m >= n && memcmp(req->path, r->path, n) == 0 &&
	    (m == n || (n > 1 && req->path[n] == '/')))
		return 1;
	n = r->path_dir_len;
	return n && unslashed(req->path, m) == n &&
	       memcmp(req->path, r->path, n) == 0;
}

void rl_policy_peer(const struct rl_policy *p, const struct rl_addr *a,
		    struct rl_peer *out)
{
	const struct rl_config *cfg = p->cfg;

	out->pol = p;
	out->addr = *a;
	out->allowed = (uint8_t)rl_cidr_set_contains(&cfg->allow, a);
	out->trusted = p->want_xff >= 0 &&
		       rl_cidr_set_contains(&cfg->trusted_proxies, a);
	out->key_len = (uint8_t)rl_config_ip_key(cfg, a, out->key);
	/* Checked at accept, by rl_policy_accept(). */
	out->ban_gen = rl_table_ban_gen(p->table);
	memset(out->hints, 0, sizeof(out->hints));
}

/* A key header's value: 0 with it in *val, 1 if the request has none,
 * -EINVAL if it came with two different values (which one does the
 * application read? unknowable), or more often than are kept. */
static int one_value(const struct rl_http_req *req, unsigned w,
		     const struct rl_http_value **val)
{
	unsigned n = req->nvalues[w];
	const struct rl_http_value *v = req->values[w];

	if (n == 0)
		return 1;
	if (n > RL_WANT_VALUES)
		return -EINVAL;
	for (unsigned k = 1; k < n; k++)
		if (v[k].len != v[0].len || memcmp(v[k].p, v[0].p, v[0].len))
			return -EINVAL;
	*val = &v[0];
	return 0;
}

/* The value of cookie rule `r`'s cookie in the request's Cookie headers
 * (rl_cookie_find: the first pair of the name decides): 0 with it in
 * *key, *len; 1 for none (absent, empty, malformed); -EINVAL if more
 * Cookie headers came than are kept (the first ones are lost). */
static int cookie_key(const struct rl_rule_cfg *r, const struct rl_http_req *req,
		      unsigned w, const void **key, size_t *len)
{
	struct rl_cookie_header h[RL_WANT_VALUES];
	unsigned n = req->nvalues[w];
	const char *v;

	if (n > RL_WANT_VALUES)
		return -EINVAL;
	for (unsigned k = 0; k < n; k++) {
		h[k].value = req->values[w][k].p;
		h[k].len = req->values[w][k].len;
	}
	if (rl_cookie_find(h, n, r->header, strlen(r->header), &v, len))
		return 1;
	*key = v;
	return 0;
}

/* The claims of a request's token, each decoded once (policy.jwt_of):
 * state 0 not yet, 1 in claim[], -1 no key. */
struct jwt_claims {
	int8_t state[RL_JWT_KEYS_MAX];
	int64_t now_s;
	size_t len[RL_JWT_KEYS_MAX];
	char claim[RL_JWT_KEYS_MAX][RL_JWT_VALUE_MAX];
};

/* Rule `i`'s claim: 0 with it in *key, *len; 1 for no key (no token, an
 * unverified or expired one, no such claim); -EINVAL for two different
 * Authorization values. */
static int jwt_key(const struct rl_policy *p, unsigned i,
		   const struct rl_http_req *req, struct jwt_claims *jc,
		   const void **key, size_t *len)
{
	unsigned j = (unsigned)p->jwt_of[i];
	const struct rl_http_value *val;
	int rc;

	if (!jc->state[j]) {
		rc = one_value(req, (unsigned)p->want_key[i], &val);
		if (rc < 0)
			return rc;
		if (!jc->now_s)
			jc->now_s = (int64_t)(rl_time_wall_ms() / 1000);
		jc->state[j] = -1;
		if (!rc && !rl_jwt_claim_key_cached(&jwt_cache, p->jwt_tag[j],
						    val->p, val->len,
						    p->cfg->rules[i].header,
						    p->jwt_verify[j] ? &p->jwt_hmac[j] : NULL,
						    jc->now_s, jc->claim[j],
						    sizeof(jc->claim[j]), &jc->len[j]))
			jc->state[j] = 1;
	}
	if (jc->state[j] < 0)
		return 1;
	*key = jc->claim[j];
	*len = jc->len[j];
	return 0;
}

int rl_policy_request(const struct rl_policy *p, const struct rl_addr *peer,
		      const struct rl_http_req *req, uint64_t now_ns,
		      struct rl_verdict *v)
{
	struct rl_peer pe;

	rl_policy_peer(p, peer, &pe);
	return rl_policy_request_peer(p, &pe, req, now_ns, v);
}

int rl_policy_request_peer(const struct rl_policy *p, struct rl_peer *peer,
			   const struct rl_http_req *req, uint64_t now_ns,
			   struct rl_verdict *v)
{
	const struct rl_config *cfg = p->cfg;
	struct taken done[RL_MAX_RULES];
	struct jwt_claims jc;
	uint8_t buf[17];
	const uint8_t *ipkey = peer->key;
	const struct rl_addr *client = &peer->addr;
	struct rl_addr proxied;
	size_t iplen;
	unsigned ndone = 0;
	int allowed;
	uint64_t gen;

	if (peer->pol != p) {
		/* A reload since this connection's last request: what the
		 * new configuration says of its peer (allow list, prefix),
		 * and a ban check at the next step. */
		proxied = peer->addr;
		rl_policy_peer(p, &proxied, peer);
		peer->ban_gen = ~0ull;
	}
	allowed = peer->allowed;
	iplen = peer->key_len;
	memset(jc.state, 0, sizeof(jc.state));
	jc.now_s = 0;
	verdict_allow(p, v);
	if (peer->trusted && req->nvalues[p->want_xff]) {
		/* A proxy vouches for another client: key that one. */
		rl_policy_client(p, &peer->addr, req, &proxied);
		client = &proxied;
		allowed = rl_cidr_set_contains(&cfg->allow, client);
		iplen = rl_config_ip_key(cfg, client, buf);
		ipkey = buf;
		if (!allowed && rl_ban_any(p->table, client->family) &&
		    banned(p, client, v))
			return 0;
	}
	if (allowed)
		return 0;
	/* Banned since the connection was accepted? One load tells whether
	 * any ban has come in since this connection last looked. */
	gen = rl_table_ban_gen(p->table);
	if (gen != peer->ban_gen) {
		peer->ban_gen = gen;
		if (client == &peer->addr && banned(p, client, v))
			return 0;
	}
	for (unsigned step = 0; step < p->nsteps; step++) {
		unsigned i = p->steps[step];
		const struct rl_rule_cfg *r = &cfg->rules[i];
		struct rl_slot_hint *hint = NULL;
		const void *key = NULL;
		size_t len = 0;
		int rc, kc = 0;

		if (!rule_matches(r, req))
			continue;
		switch (r->key) {
		case RL_KEY_IP:
			key = ipkey;
			len = iplen;
			/* the connection's own key: worth a hint */
			if (ipkey == peer->key && i < RL_PEER_HINTS)
				hint = &peer->hints[i];
			break;
		case RL_KEY_GLOBAL:
			key = "";
			if (i < RL_PEER_HINTS)
				hint = &peer->hints[i];
			break;
		case RL_KEY_HEADER: {
			const struct rl_http_value *val;

			/* nginx's rule: no key, not accounted */
			kc = one_value(req, (unsigned)p->want_key[i], &val);
			if (!kc) {
				key = val->p;
				len = val->len;
				kc = len == 0;
			}
			break;
		}
		case RL_KEY_COOKIE:
			kc = cookie_key(r, req, (unsigned)p->want_key[i], &key, &len);
			break;
		case RL_KEY_JWT:
			kc = jwt_key(p, i, req, &jc, &key, &len);
			break;
		}
		if (kc > 0)
			continue;
		/* An ambiguous key refuses (a 400 costs the client nothing,
		 * like a 429), except in dry-run, which never refuses. */
		if (kc < 0) {
			if (cfg->mode == RL_MODE_DRY_RUN)
				continue;
			refund_all(p, done, ndone, now_ns);
			return -EINVAL;
		}
		rc = take(p, i, key, len, now_ns, done, &ndone, v, hint);
		if (rc)
			offend(p, i, client, ipkey, iplen,
			       key == ipkey ? hint : NULL, now_ns, v);
		if (rc == 1)
			return 0;
	}
	count_all(p, done, ndone, now_ns, v);
	return 0;
}
