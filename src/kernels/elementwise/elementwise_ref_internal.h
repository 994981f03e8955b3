/* elementwise_ref_internal.h - what the unary and binary reference kernels
 * (unary_ref.c, binary_ref.c) share: the bool element type and the error for
 * a dtype an op has no loop for. */
#ifndef AIR_KERNELS_ELEMENTWISE_ELEMENTWISE_REF_INTERNAL_H
#define AIR_KERNELS_ELEMENTWISE_ELEMENTWISE_REF_INTERNAL_H

#include <stdint.h>

#include "core/error.h"
#include "kernels/common/kernel.h"

typedef uint8_t kbool;

static inline air_status bad_dtype(const char *op, air_dtype dt)
{
	return air_error(AIR_UNSUPPORTED, "%s: no reference kernel for %s", op, air_dtype_name(dt));
}

#endif
