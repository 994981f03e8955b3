/* linear_q.h - the kernels of libair's linear_q op (ops/linear_q.c): linear with a weight-only
 * quantized weight (gemm_q.h's format): the reference (the oracle) and the fast one. */
#ifndef AIR_KERNELS_GEMM_Q_LINEAR_Q_H
#define AIR_KERNELS_GEMM_Q_LINEAR_Q_H

#include "kernels/common/kernel.h"
#include "kernels/gemm_q/gemm_q.h"

/* linear_q's attributes, in schema order */
enum { KLINQ_ATTR_BITS = 0, KLINQ_ATTR_GROUP, KLINQ_ATTR_HAS_BIAS, KLINQ_NATTRS };

/* The weight of a call (inputs 1 and 2, attributes bits and group). */
kq_weight klinear_q_weight(const k_call *call);

air_status kref_linear_q(const k_call *call);

extern const k_kernel kfast_linear_q;

#endif
