/* SPDX-License-Identifier: MIT */
/*
 * ascii.h - character helpers for the parsers (addresses, paths, HTTP).
 * ASCII only, whatever the locale: the bytes come from the network.
 */
#ifndef RL_ASCII_H
#define RL_ASCII_H

#include <stdint.h>

/* The value of a hex digit, or -1. */
static inline int rl_ascii_hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static inline uint8_t rl_ascii_lower(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
}

#endif /* RL_ASCII_H */
