/* registry.c - which fast kernels exist for which op. Adding a kernel: its
 * k_kernel in its own file, a line here. */
#include "kernels/registry.h"

#include <stddef.h>

#include "ops/op.h"

static const k_kernel *const none[] = {NULL};

const k_kernel *const *kreg_fast_kernels(int op)
{
	switch (op) {
	default: return none;
	}
}
