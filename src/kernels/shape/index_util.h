/* index_util.h - helpers shared by the indexing kernels (index_ref.c,
 * index_copy_ref.c): task sizing, reading i64/i32 indices, element copies,
 * and recording the first bad index from worker threads. */
#ifndef AIR_KERNELS_SHAPE_INDEX_UTIL_H
#define AIR_KERNELS_SHAPE_INDEX_UTIL_H

#include <stdatomic.h>
#include <string.h>

#include "kernels/common/kernel.h"

/* Gathers move whole elements by size, so every dtype works. An index out
 * of range is AIR_INVALID_ARGUMENT naming the first bad index, never a
 * crash: worker threads record the lowest bad position and the calling
 * thread reports it, since the error message is thread-local. */

static inline int64_t ki_min(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static inline int64_t ki_per_task(int64_t cost)
{
	int64_t n = K_GRAIN / (cost > 0 ? cost : 1);
	return n < 1 ? 1 : n;
}

static inline int64_t ki_ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* Index i of an i64 or i32 tensor. */
static inline int64_t ki_get(const void *p, air_dtype dt, int64_t i)
{
	return dt == AIR_I64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

/* Copies n elements of elem bytes; single elements without a libc call. */
static inline void ki_copy(char *dst, const char *src, int64_t n, size_t elem)
{
	if (n == 1) {
		switch (elem) {
		case 8: memcpy(dst, src, 8); return;
		case 4: memcpy(dst, src, 4); return;
		case 2: memcpy(dst, src, 2); return;
		case 1: *dst = *src; return;
		}
	}
	if (n > 0)
		memcpy(dst, src, (size_t)n * elem);
}

/* The lowest bad position seen by any thread; INT64_MAX if none. */
static inline void ki_note_bad(atomic_llong *slot, int64_t pos)
{
	long long cur = atomic_load_explicit(slot, memory_order_relaxed);
	while (pos < cur &&
	       !atomic_compare_exchange_weak_explicit(slot, &cur, pos, memory_order_relaxed, memory_order_relaxed))
		;
}

#endif
