/* test_bigmem.c - rt_big_alloc: alignment, sizes, and the sizes it must
 * refuse rather than wrap around. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "platform/bigmem.h"

int main(void)
{
	/* small: the alignment asked for */
	void *p = rt_big_alloc(1000, 64);
	CHECK(p && (uintptr_t)p % 64 == 0);
	if (p)
		memset(p, 1, 1000);
	free(p);
	/* big: 2 MiB aligned, all of it writable */
	size_t big = (5u << 20) + 123;
	unsigned char *q = rt_big_alloc(big, 128);
	CHECK(q && (uintptr_t)q % (2u << 20) == 0);
	if (q) {
		memset(q, 7, big);
		CHECK(q[0] == 7 && q[big - 1] == 7);
	}
	free(q);
	/* sizes that would wrap, and alignments past a huge page */
	CHECK(rt_big_alloc(SIZE_MAX, 64) == NULL);
	CHECK(rt_big_alloc(SIZE_MAX - 100, 64) == NULL);
	CHECK(rt_big_alloc(4096, 4u << 20) == NULL);
	return check_report("test_bigmem");
}
