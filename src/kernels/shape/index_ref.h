/* index_ref.h - reference kernels of the indexing and creation ops
 * (index_copy and size_scalar: index_copy_ref.c). */
#ifndef AIR_KERNELS_SHAPE_INDEX_REF_H
#define AIR_KERNELS_SHAPE_INDEX_REF_H

#include "kernels/common/kernel.h"

#define KREF_INDEX(X) X(arange) X(full) X(embedding) X(gather) X(index) X(index_select) X(index_copy) X(size_scalar)

#define X(name) air_status kref_##name(const k_call *call);
KREF_INDEX(X)
#undef X

#endif
