/* linear_rows.h - linear with its constant weight read where its owner
 * keeps it (linear_rows.c), listed in ops/kernels.c before linear_packed. */
#ifndef AIR_KERNELS_MATMUL_LINEAR_ROWS_H
#define AIR_KERNELS_MATMUL_LINEAR_ROWS_H

#include "kernels/common/kernel.h"

extern const k_kernel kfast_linear_rows;

#endif
