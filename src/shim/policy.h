/* SPDX-License-Identifier: MIT */
/*
 * policy.h - what a configuration says about one connection or request:
 * who the client is (the peer, a PROXY header, or a trusted proxy's
 * X-Forwarded-For), whether it is on the allow list, which rules match,
 * the key of each, and the decision from the shared table.
 *
 * A policy is built once from an immutable configuration and an attached
 * table, and then only read, so any number of threads may use it.
 */
#ifndef RL_POLICY_H
#define RL_POLICY_H

#include <stdint.h>

#include "rlshim.h"
#include "addr.h"
#include "config.h"
#include "sha256.h"
#include "http.h"
#include "table.h"

/* A jwt:CLAIM key's text, the NUL included: a longer claim is no key. */
#define RL_JWT_VALUE_MAX 256

struct rl_policy {
	const struct rl_config *cfg;
	struct rl_table *table;
	unsigned ids[RL_MAX_RULES];    /* each rule's id in the table */
	struct rl_http_want want;      /* the headers requests are parsed for */
	int want_xff;                  /* index in `want`, or -1 */
	int want_key[RL_MAX_RULES];    /* header-keyed rules: index in `want` */
	/* key = jwt:CLAIM rules: each distinct claim and secret decoded once
	 * a request, its HMAC key prepared here (verify: it has a secret) */
	int8_t jwt_of[RL_MAX_RULES];   /* index in jwt_hmac, or -1 */
	uint8_t njwt;
	uint8_t jwt_verify[RL_JWT_KEYS_MAX];
	struct rl_sha256_hmac jwt_hmac[RL_JWT_KEYS_MAX];
	uint64_t jwt_tag[RL_JWT_KEYS_MAX]; /* in the process's token cache */
	uint8_t accept_rules;          /* some rule has match = accept */
	uint8_t nsteps;                /* the rules in the order taken: */
	uint8_t steps[RL_MAX_RULES];   /* the file's, strict rules last */
};

/* What a connection's peer means to the policy, worked out once at
 * accept rather than for every request. */
#define RL_PEER_HINTS 4 /* the first rules keyed by ip or global */

struct rl_peer {
	const struct rl_policy *pol; /* the policy that worked it out */
	struct rl_addr addr;
	uint8_t allowed;   /* on the allow list */
	uint8_t trusted;   /* a trusted proxy whose client_ip_header counts */
	uint8_t key_len;
	uint8_t key[17];   /* what `key = ip` rules key it by */
	uint64_t ban_gen;  /* the segment's ban_gen when last checked */
	/* where this client's keys of the first rules are in the table */
	struct rl_slot_hint hints[RL_PEER_HINTS];
};

void rl_policy_peer(const struct rl_policy *p, const struct rl_addr *a,
		    struct rl_peer *out);

/* count_status rules one request is charged by, followed to its answer
 * (a request matching more is charged by the others for good). */
#define RL_CHARGES_MAX 2

/* The outcome of a decision. */
struct rl_verdict {
	const struct rl_config *cfg; /* the configuration decided by (`rule`
				      indexes its rules) */
	int allowed;          /* 1: pass; 0: answer 429 (or refuse at accept) */
	int banned;           /* refused by a ban: at accept, closed; a
				 request, 429 with res.retry_after_ns the
				 time the ban has left */
	int store_down;       /* refused because the store is down and the
				 rule is on_store_down = closed */
	int rule;             /* the configuration's index of the rule that
				 denied (in dry-run: would have), or -1 */
	struct rl_result res; /* that rule's result */
	/* An allowed request, for its answer (io_answers.c): */
	uint64_t counted;     /* the table ids of the rules that took it */
	int near;             /* headers_on = all: of those, the one nearest
				 its limit (an index in cfg), or -1 */
	struct rl_result near_res;
	unsigned ncharge;     /* count_status rules it was charged by */
	struct rl_charge {
		uint8_t rule, id; /* an index in cfg, and its table id */
		struct rl_key_ref ref;
	} charge[RL_CHARGES_MAX];
};

/*
 * Build `p` over `cfg` (kept, not copied) and `t`, registering every rule
 * in the table. Returns 0, or a negative errno with a one-line reason in
 * `err` (a rule the table cannot hold).
 */
int rl_policy_init(struct rl_policy *p, const struct rl_config *cfg,
		   struct rl_table *t, struct rl_err *err);

/* 1 if `proxy_protocol` applies to connections from `peer`. */
int rl_policy_expects_proxy(const struct rl_policy *p,
			    const struct rl_addr *peer);

/*
 * At accept: the allow list, the bans, then every `match = accept` rule
 * keyed by `client`. Never fails. In dry-run a ban refuses nothing (it is
 * counted and logged, `would refuse`).
 */
void rl_policy_accept(const struct rl_policy *p, const struct rl_addr *client,
		      uint64_t now_ns, struct rl_verdict *v);

/*
 * The client of a request on a connection from `peer`: the peer itself,
 * unless the peer is a trusted proxy and the request carries the
 * configured client_ip_header; then the rightmost address in it that is not
 * a trusted proxy (nginx's real_ip_recursive).
 */
void rl_policy_client(const struct rl_policy *p, const struct rl_addr *peer,
		      const struct rl_http_req *req, struct rl_addr *client);

/*
 * Decide a request: a client banned since its connection was accepted (or
 * a proxy's client that is banned) is refused; then every matching rule
 * takes one unit; if one denies, the units the others took are given back
 * and the verdict names the denier, and the denial counts towards the
 * rule's maxretry, which bans the client's address (at ipv4_prefix /
 * ipv6_prefix) when reached.
 * In dry-run mode the verdict always allows, naming the rule that would
 * have denied; a ban only counts and logs. Returns 0, or -EINVAL when the request is ambiguous for a
 * rule keyed by a header that appears twice with different values (answer
 * 400: the shim cannot know which one the application reads).
 */
int rl_policy_request(const struct rl_policy *p, const struct rl_addr *peer,
		      const struct rl_http_req *req, uint64_t now_ns,
		      struct rl_verdict *v);

/* The same, for a peer worked out by rl_policy_peer(): the shim's way
 * (its hints are updated). */
int rl_policy_request_peer(const struct rl_policy *p, struct rl_peer *peer,
			   const struct rl_http_req *req, uint64_t now_ns,
			   struct rl_verdict *v);

#endif /* RL_POLICY_H */
