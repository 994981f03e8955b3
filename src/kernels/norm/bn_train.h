/* bn_train.h - training-mode batch norm over a dense [N, C, ...] tensor
 * (statistics of the batch, the running statistics' update, the
 * normalization, and the backward) and ReLU's backward (threshold_backward):
 * the reference kernels (bn_train_ref.c, the oracle) and the fast ones
 * (bn_train.c: two passes over the data, channels split across threads,
 * vectorized per ISA in bn_train.avx2.c / bn_train.avx512.c).
 *
 * The ops (ops/norm_train.c):
 *   batch_norm_train(x, weight?, bias?, running_mean, running_var; momentum, eps,
 *       act) -> y, mean [C], invstd [C], running [2, C]: y is relu'd when
 *       act is 1 (the model's relu fused in); the new running mean
 *       (row 0) and variance (row 1); biased variance for invstd, unbiased
 *       for the running variance, new = (1 - momentum) * old + momentum *
 *       batch, as aten does. (Two rows of one output: an op has at most
 *       OP_MAX_OUT = 4 outputs.)
 *   batch_norm_backward(dy, x, mean, invstd, weight?, relu_out?; train,
 *       has_mask, threshold) -> dx, dweight, dbias
 *       (train = 0: mean and invstd are the running ones, and dx has no
 *       terms through the batch statistics; has_mask: dy is first
 *       threshold_backward(dy, relu_out, threshold), ReLU's backward, so its
 *       masked copy is never written)
 *   threshold_backward(grad, x; threshold) -> grad where x > threshold, else 0 */
#ifndef AIR_KERNELS_NORM_BN_TRAIN_H
#define AIR_KERNELS_NORM_BN_TRAIN_H

#include "kernels/common/kernel.h"

air_status kref_batch_norm_train(const k_call *call);
air_status kref_batch_norm_backward(const k_call *call);
air_status kref_threshold_backward(const k_call *call);

extern const k_kernel kfast_batch_norm_train, kfast_batch_norm_backward,
	kfast_threshold_backward;

/* The inputs of batch_norm_train after x (weight and bias NULL when absent). */
void kbn_train_inputs(const k_call *call, const k_tensor **weight, const k_tensor **bias, const k_tensor **rm,
		      const k_tensor **rv);

/* The optional inputs of batch_norm_backward (NULL when absent). */
void kbn_backward_inputs(const k_call *call, const k_tensor **weight, const k_tensor **mask);

/* "avx512", "avx2" or "scalar": the fast kernels' vector loops in use. */
const char *kbn_isa_name(void);

#endif
