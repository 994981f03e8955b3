/* registry.h - the fast kernels per op, widest ISA first. The compiler takes
 * the first whose ISA is present and whose supports() accepts the node, and
 * falls back to the op's reference kernel. */
#ifndef AIR_KERNELS_REGISTRY_H
#define AIR_KERNELS_REGISTRY_H

#include "kernels/kernel.h"

/* NULL-terminated list of fast kernels for op (may be empty, never NULL). */
const k_kernel *const *kreg_fast_kernels(int op);

#endif
