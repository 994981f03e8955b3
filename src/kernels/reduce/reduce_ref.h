/* reduce_ref.h - reference kernels of the reductions: sum, mean, amax, amin,
 * prod (reduce_ref.c), argmax and cumsum (reduce_axis_ref.c). Softmax and
 * the norms are the norm family's (kernels/norm/norm_ref.h). */
#ifndef AIR_KERNELS_REDUCE_REDUCE_REF_H
#define AIR_KERNELS_REDUCE_REDUCE_REF_H

#include "kernels/common/kernel.h"

#define KREF_REDUCE(X) X(sum) X(mean) X(amax) X(amin) X(prod) X(argmax) X(cumsum)

#define X(name) air_status kref_##name(const k_call *call);
KREF_REDUCE(X)
#undef X

#endif
