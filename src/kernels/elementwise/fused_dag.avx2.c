/* fused_dag.avx2.c - fused_dag's tile interpreter (fused_dag_body.h)
 * compiled with AVX2 + FMA flags: 8-lane loops. */
#include "kernels/common/cpu.h"
#include "kernels/elementwise/fused_dag_fast.h"

#define KD_RUN kd_run_avx2
#include "kernels/elementwise/fused_dag_body.h"

const k_kernel kfast_fused_dag_avx2 = {"fused_dag_avx2", KCPU_AVX2, kd_fast_supports, NULL, NULL, NULL, kd_run_avx2,
				       K_INPLACE_ANY};
