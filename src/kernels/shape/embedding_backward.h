/* embedding_backward.h - the dense weight gradient of an embedding lookup
 * (embedding_backward_ref.c). */
#ifndef AIR_KERNELS_SHAPE_EMBEDDING_BACKWARD_H
#define AIR_KERNELS_SHAPE_EMBEDDING_BACKWARD_H

#include "kernels/common/kernel.h"

air_status kref_embedding_backward(const k_call *call);

#endif
