/* transpose_blocks.avx2.c - the 8 x 8 block transpose (transpose_blocks.h)
 * compiled with AVX2. */
#define KTR_SUFFIX avx2
#include "kernels/shape/transpose_blocks.h"
