/* reduce.h - reference kernels of the reduction and normalization ops. */
#ifndef AIR_KERNELS_REDUCE_REDUCE_REF_H
#define AIR_KERNELS_REDUCE_REDUCE_REF_H

#include "kernels/common/kernel.h"

#define KREF_REDUCE(X)                                                                       \
	X(sum) X(mean) X(amax) X(amin) X(prod) X(argmax) X(cumsum) X(softmax) X(log_softmax) \
	X(layer_norm) X(rms_norm)

#define X(name) air_status kref_##name(const k_call *call);
KREF_REDUCE(X)
#undef X

#endif
