/* fused_dag.avx512.c - fused_dag's tile interpreter (fused_dag_body.h)
 * compiled with AVX-512 flags: 16-lane loops. */
#include "kernels/common/cpu.h"
#include "kernels/elementwise/fused_dag_fast.h"

#define KD_RUN kd_run_avx512
#include "kernels/elementwise/fused_dag_body.h"

const k_kernel kfast_fused_dag_avx512 = {"fused_dag_avx512", KCPU_AVX512,
					 kd_fast_supports, NULL, NULL, NULL, kd_run_avx512, K_INPLACE_ANY};
