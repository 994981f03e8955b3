/* norm_ref.h - reference kernels of the normalizations: softmax,
 * log_softmax, layer_norm, rms_norm (norm_ref.c) and inference batch_norm
 * (batch_norm_ref.c). */
#ifndef AIR_KERNELS_NORM_NORM_REF_H
#define AIR_KERNELS_NORM_NORM_REF_H

#include "kernels/common/kernel.h"

#define KREF_NORM(X) X(softmax) X(log_softmax) X(layer_norm) X(rms_norm) X(batch_norm)

#define X(name) air_status kref_##name(const k_call *call);
KREF_NORM(X)
#undef X

/* The inputs of a batch_norm call; weight and bias may be NULL. */
void kref_bn_inputs(const k_call *call, const k_tensor **weight, const k_tensor **bias, const k_tensor **mean,
		    const k_tensor **var);

#endif
