/* SPDX-License-Identifier: MIT */
/* mem.c - long-lived memory in mappings of its own (mem.h). */
#include "mem.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* In front of every block: the mapping's size (16 bytes, so the block
 * keeps malloc's alignment). */
#define HEAD 16u

static size_t page_size(void)
{
	static size_t page;

	if (!page) {
		long p = sysconf(_SC_PAGESIZE);

		page = p > 0 ? (size_t)p : 4096u;
	}
	return page;
}

static int mapping_size(size_t n, size_t *out)
{
	size_t pg = page_size();

	if (n > SIZE_MAX - HEAD - pg) {
		errno = ENOMEM;
		return -1;
	}
	*out = (n + HEAD + pg - 1) & ~(pg - 1);
	return 0;
}

void *rl_mem_alloc(size_t n)
{
	size_t size;
	void *m;

	if (mapping_size(n, &size))
		return NULL;
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	*(size_t *)m = size;
	return (char *)m + HEAD;
}

void *rl_mem_realloc(void *p, size_t n)
{
	size_t size, had;
	char *m, *q;

	if (!p)
		return rl_mem_alloc(n);
	if (mapping_size(n, &size))
		return NULL;
	m = (char *)p - HEAD;
	had = *(size_t *)m;
	if (size == had)
		return p;
	q = mremap(m, had, size, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		return NULL;
	*(size_t *)q = size;
	return q + HEAD;
}

void rl_mem_free(void *p)
{
	int saved = errno;
	char *m;

	if (!p)
		return;
	m = (char *)p - HEAD;
	munmap(m, *(size_t *)m);
	errno = saved;
}
