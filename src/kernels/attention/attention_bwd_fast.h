/* attention_bwd_fast.h - the blocked (flash-style) sdpa_backward kernel:
 * the [L, S] weights are recomputed a tile at a time from the forward's
 * log-sum-exp, never stored whole (attention_bwd_fast.c). */
#ifndef AIR_KERNELS_ATTENTION_ATTENTION_BWD_FAST_H
#define AIR_KERNELS_ATTENTION_ATTENTION_BWD_FAST_H

#include "kernels/common/kernel.h"

extern const k_kernel kfast_sdpa_backward_flash;

#endif
