/* conv_rows.h - the channels-last convolution that reads its weight in
 * place (conv_rows.c), listed in ops/kernels.c before the packed kernels. */
#ifndef AIR_KERNELS_CONV_CONV_ROWS_H
#define AIR_KERNELS_CONV_CONV_ROWS_H

#include <stddef.h>

#include "kernels/common/kernel.h"

extern const k_kernel kfast_conv2d_nhwc_rows;
/* Bytes its prepare holds (the scale); in *source_bytes, the source
 * weight it reads on every call that no graph node reads (a folded one). */
size_t kconv_rows_prepared_bytes(const void *prepared, size_t *source_bytes);

#endif
