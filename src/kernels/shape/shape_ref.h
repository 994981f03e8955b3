/* shape_ref.h - reference kernels of the shape and data movement ops. */
#ifndef AIR_KERNELS_SHAPE_SHAPE_REF_H
#define AIR_KERNELS_SHAPE_SHAPE_REF_H

#include "kernels/common/kernel.h"

air_status kref_reshape(const k_call *call);
air_status kref_copy(const k_call *call);
air_status kref_permute(const k_call *call);
air_status kref_expand(const k_call *call);
air_status kref_slice(const k_call *call);
air_status kref_cat(const k_call *call);

/* Copies a strided view of src (element strides, in elements) into the
 * dense dst of the given dims; elem bytes per element. Used by permute,
 * slice and expand. */
void kref_strided_copy(void *dst, const void *src, int rank, const int64_t *dims, const int64_t *strides,
		       size_t elem, rt_pool *pool);

#endif
