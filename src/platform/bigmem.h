/* bigmem.h - memory for big, long-lived buffers (packed weights, a
 * session's arena), backed by transparent huge pages where the kernel
 * offers them. */
#ifndef AIR_PLATFORM_BIGMEM_H
#define AIR_PLATFORM_BIGMEM_H

#include <stddef.h>

/* bytes at an address aligned to align (a power of two from 64 to 2 MiB),
 * or NULL. From 4 MiB up the block is 2 MiB aligned, its size rounded up to 2
 * MiB, and marked for huge pages (madvise; a no-op where THP is off).
 * Released with free(). */
void *rt_big_alloc(size_t bytes, size_t align);

#endif
