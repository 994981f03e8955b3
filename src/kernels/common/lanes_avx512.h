/* lanes_avx512.h - the mask of a vector's first lanes, shared by the
 * AVX-512 kernels for their column, pixel and key tails. */
#ifndef AIR_KERNELS_COMMON_LANES_AVX512_H
#define AIR_KERNELS_COMMON_LANES_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* Lanes [0, n) of one 16-lane vector, n clamped to [0, 16]. */
static inline __mmask16 k16_lanes(int64_t n)
{
	return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

#endif
