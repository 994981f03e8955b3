/* transpose.h - 4-byte matrices transposed in register blocks, and the
 * permute kernel that swaps two blocks of trailing dims (transpose.c). */
#ifndef AIR_KERNELS_SHAPE_TRANSPOSE_H
#define AIR_KERNELS_SHAPE_TRANSPOSE_H

#include <stdint.h>

#include "kernels/common/kernel.h"

/* y[c * ldy + r] = x[r * ldx + c] for r < rows, c < cols: any 4-byte
 * elements (floats, int32s), moved bit for bit. */
void ktranspose(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t rows, int64_t cols);
/* The same, adding res[c * ldr + r] (floats only) as it stores; res may
 * not alias y. */
void ktranspose_add(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t rows, int64_t cols,
		    const float *res, int64_t ldr);

/* permutes of 4-byte elements that swap two blocks of trailing dims: the
 * layout pass's [0, 2, 3, 1] and [0, 3, 1, 2], and transposes of the last
 * two dims. */
extern const k_kernel kfast_permute_swap;

#endif
