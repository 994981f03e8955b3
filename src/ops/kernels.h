/* kernels.h - the fast kernels per op, widest ISA first. The compiler takes
 * the first whose ISA is present and whose supports() accepts the node, and
 * falls back to the op's reference kernel. */
#ifndef AIR_OPS_KERNELS_H
#define AIR_OPS_KERNELS_H

#include "kernels/common/kernel.h"

/* NULL-terminated list of fast kernels for op (may be empty, never NULL). */
const k_kernel *const *kreg_fast_kernels(int op);

/* Does kernel k read constant input `input` at run time only through what
 * its prepare() made (a packed copy)? Then the model may free an owned copy
 * of that constant after preparing (e.g. batch-norm-folded conv weights,
 * which would otherwise be held twice: folded and packed). */
bool kreg_prepared_replaces_input(const k_kernel *k, int input);

#endif
