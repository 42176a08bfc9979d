/* SPDX-License-Identifier: MIT */
/*
 * http_chunk.c - the chunked coding of a body, RFC 9112 7.1 exactly: the
 * chunk-size lines and their extensions, the data and its CRLF, and the
 * trailer section's lines. rl_http_feed() hands it the chunk phases.
 */
#include "http.h"

#include "ascii.h"
#include "http_int.h"

/*
 * A trailer line may not fold and may carry no control character but HTAB
 * and its CRLF. Checked byte by byte over p[0..len), the trailer bytes only
 * (trailers are rare), continuing from `line` bytes into the current line
 * with `prev` the byte before p[0]. Returns the offset of the first bad
 * byte, or -1.
 */
ssize_t rl_http_trailer_check(struct rl_http *h, const uint8_t *p, size_t len,
			      uint32_t line, uint8_t prev)
{
	for (size_t i = 0; i < len; prev = p[i], i++) {
		uint8_t c = p[i];

		if (prev == '\r' && c != '\n') {
			h->error = "bare CR in trailer";
			return (ssize_t)i;
		}
		if (c == '\n') {
			line = 0;
			continue;
		}
		if (line == 0 && (c == ' ' || c == '\t')) {
			h->error = "obs-fold in trailer";
			return (ssize_t)i;
		}
		if (c != '\r' && !rl_http_value_byte(c)) {
			h->error = "control character in trailer";
			return (ssize_t)i;
		}
		line++;
	}
	return -1;
}

/*
 * The rest of a chunk-size line after its digits, RFC 9112 7.1.1 exactly:
 *
 *   chunk-line     = chunk-size [ chunk-ext ] CRLF
 *   chunk-ext      = *( BWS ";" BWS chunk-ext-name
 *                       [ BWS "=" BWS chunk-ext-val ] )
 *   chunk-ext-name = token
 *   chunk-ext-val  = token / quoted-string
 *
 * BWS comes only before and after ";" and "=": whitespace before the CRLF
 * ("a \r\n", "2;a \r\n") is not in the grammar, nor is an empty name or
 * value. One byte at a time, with the state in h->ext.
 */
enum chunk_ext {
	EXT_AFTER = 0, /* after the size, a value or its closing quote */
	EXT_WS,        /* whitespace there: a ";" must follow */
	EXT_NAME_BWS,  /* after ";": whitespace, then a name */
	EXT_NAME,      /* in a name */
	EXT_NAME_WS,   /* whitespace after a name: "=" or ";" must follow */
	EXT_VAL_BWS,   /* after "=": whitespace, then a token or a quote */
	EXT_TOKEN,     /* in a token value */
	EXT_QUOTED,    /* in a quoted-string */
	EXT_QPAIR,     /* after its backslash */
};

/* 1: the CR ending the line; 0: c is valid, more to come; -1: invalid. */
static int chunk_ext_byte(struct rl_http *h, uint8_t c)
{
	int ws = c == ' ' || c == '\t';

	switch ((enum chunk_ext)h->ext) {
	case EXT_TOKEN:
		if (rl_http_tchar[c])
			return 0;
		/* fall through */
	case EXT_AFTER:
		if (c == '\r')
			return 1;
		/* fall through */
	case EXT_WS:
		if (c == ';')
			h->ext = EXT_NAME_BWS;
		else if (ws)
			h->ext = EXT_WS;
		else
			return -1;
		return 0;
	case EXT_NAME_BWS:
		if (rl_http_tchar[c])
			h->ext = EXT_NAME;
		else if (!ws)
			return -1;
		return 0;
	case EXT_NAME:
		if (rl_http_tchar[c])
			return 0;
		if (c == '\r')
			return 1;
		/* fall through */
	case EXT_NAME_WS:
		if (c == '=')
			h->ext = EXT_VAL_BWS;
		else if (c == ';')
			h->ext = EXT_NAME_BWS;
		else if (ws)
			h->ext = EXT_NAME_WS;
		else
			return -1;
		return 0;
	case EXT_VAL_BWS:
		if (rl_http_tchar[c])
			h->ext = EXT_TOKEN;
		else if (c == '"')
			h->ext = EXT_QUOTED;
		else if (!ws)
			return -1;
		return 0;
	case EXT_QUOTED:
		/* qdtext: HTAB, SP, VCHAR but DQUOTE and "\", obs-text */
		if (c == '"')
			h->ext = EXT_AFTER;
		else if (c == '\\')
			h->ext = EXT_QPAIR;
		else if (!rl_http_value_byte(c))
			return -1;
		return 0;
	case EXT_QPAIR:
		/* quoted-pair: "\" ( HTAB / SP / VCHAR / obs-text ) */
		if (!rl_http_value_byte(c))
			return -1;
		h->ext = EXT_QUOTED;
		return 0;
	}
	return -1;
}

static int bad_chunk(const char **why, const char *what)
{
	*why = what;
	return -1;
}

int rl_http_chunk_step(struct rl_http *h, const uint8_t *p, size_t *i,
		       size_t len, const char **why)
{
	uint8_t c = p[*i];
	uint64_t take;
	int v;

	switch ((enum rl_http_phase)h->phase) {
	case RL_HTTP_CHUNK_SIZE:
		v = rl_ascii_hexval(c);
		if (v >= 0) {
			/* Leading zeros are digits like any (RFC 9112
			 * 7.1: 1*HEXDIG), so only the value is bounded
			 * (below 2^60), and the line's length. */
			if (++h->ext_len > RL_CHUNK_EXT_MAX)
				return bad_chunk(why, "chunk size too long");
			if (h->remaining >= (1ull << 56))
				return bad_chunk(why, "chunk size too large");
			h->remaining = (h->remaining << 4) | (uint64_t)v;
			(*i)++;
			return 0;
		}
		if (h->ext_len == 0)
			return bad_chunk(why, "bad chunk size");
		h->ext_len = 0;
		if (c == '\r') {
			h->phase = RL_HTTP_CHUNK_LF;
			(*i)++;
			return 0;
		}
		if (c != ';' && c != ' ' && c != '\t')
			return bad_chunk(why, "bad chunk size");
		h->phase = RL_HTTP_CHUNK_EXT;
		h->ext = EXT_AFTER;
		/* fall through */
	case RL_HTTP_CHUNK_EXT:
		v = chunk_ext_byte(h, c);
		if (v < 0)
			return bad_chunk(why, "bad chunk extension");
		if (v > 0) {
			h->phase = RL_HTTP_CHUNK_LF;
			(*i)++;
			return 0;
		}
		if (++h->ext_len > RL_CHUNK_EXT_MAX)
			return bad_chunk(why, "chunk extension too long");
		(*i)++;
		return 0;
	case RL_HTTP_CHUNK_LF:
		if (c != '\n')
			return bad_chunk(why, "bare CR in chunk size line");
		(*i)++;
		if (h->remaining == 0) {
			h->phase = RL_HTTP_TRAILER;
			h->head_len = 0;
			h->line_len = 0;
			h->prev = '\n';
		} else {
			h->phase = RL_HTTP_CHUNK_DATA;
		}
		return 0;
	case RL_HTTP_CHUNK_DATA:
		take = h->remaining < len - *i ? h->remaining : len - *i;
		h->remaining -= take;
		*i += take;
		if (h->remaining == 0)
			h->phase = RL_HTTP_CHUNK_DCR;
		return 0;
	case RL_HTTP_CHUNK_DCR:
		if (c != '\r')
			return bad_chunk(why, "chunk data longer than its size");
		h->phase = RL_HTTP_CHUNK_DLF;
		(*i)++;
		return 0;
	case RL_HTTP_CHUNK_DLF:
		if (c != '\n')
			return bad_chunk(why, "bare CR after chunk data");
		h->phase = RL_HTTP_CHUNK_SIZE;
		h->remaining = 0;
		h->ext_len = 0;
		(*i)++;
		return 0;
	default:
		return bad_chunk(why, "not in a chunked body");
	}
}
