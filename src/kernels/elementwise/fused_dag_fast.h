/* fused_dag_fast.h - the tile kernels of fused_dag (kernels/elementwise/
 * fused_dag_body.h), one per ISA, listed in ops/kernels.c best first. */
#ifndef AIR_KERNELS_ELEMENTWISE_FUSED_DAG_FAST_H
#define AIR_KERNELS_ELEMENTWISE_FUSED_DAG_FAST_H

#include "kernels/common/kernel.h"

extern const k_kernel kfast_fused_dag_avx512;
extern const k_kernel kfast_fused_dag_avx2;
extern const k_kernel kfast_fused_dag;

/* What every variant supports: f32 outputs of one size, inputs f32 or bool
 * of that size or repeating over it, a well-formed program. */
bool kd_fast_supports(const k_call *call);

#endif
