/* kernels.c - which fast kernels exist for which op. Adding a kernel: its
 * k_kernel in its own file, a line here. Within an op the list is tried in
 * order, so the most specialised kernel comes first. */
#include "ops/kernels.h"

#include <stddef.h>

#include "kernels/attention/attention_fast.h"
#include "kernels/attention/attention_bwd_fast.h"
#include "kernels/conv/conv_backward.h"
#include "kernels/conv/conv_narrow.h"
#include "kernels/conv/conv_nhwc.h"
#include "kernels/conv/conv_rows.h"
#include "kernels/conv/conv_patches.h"
#include "kernels/elementwise/act_backward.h"
#include "kernels/elementwise/cast_half.h"
#include "kernels/elementwise/dropout.h"
#include "kernels/elementwise/elementwise_fast.h"
#include "kernels/elementwise/fused_fast.h"
#include "kernels/elementwise/fused_dag_fast.h"
#include "kernels/elementwise/sqrt_where_fast.h"
#include "kernels/gemm_q/linear_q.h"
#include "kernels/gemm_q/conv_u8s8.h"
#include "kernels/gemm_q/linear_u8s8.h"
#include "kernels/gemm_q/quantize.h"
#include "kernels/matmul/linear_lowp.h"
#include "kernels/matmul/linear_rows.h"
#include "kernels/matmul/matmul_fast.h"
#include "kernels/norm/bn_train.h"
#include "kernels/norm/layer_norm_backward.h"
#include "kernels/norm/softmax_backward.h"
#include "kernels/norm/rowops_fast.h"
#include "kernels/pool/pool_nchw.h"
#include "kernels/reduce/reduce_fast.h"
#include "kernels/rope/rope_fast.h"
#include "kernels/shape/transpose.h"
#include "ops/op.h"

static const k_kernel *const none[] = {NULL};
static const k_kernel *const mm[] = {&kfast_mm_packed, &kfast_mm, NULL};
static const k_kernel *const addmm[] = {&kfast_addmm_packed, &kfast_addmm, NULL};
static const k_kernel *const linear[] = {&kfast_linear_lowp_w, &kfast_linear_rows, &kfast_linear_packed, &kfast_linear, NULL};
static const k_kernel *const linear_q[] = {&kfast_linear_q, NULL};
static const k_kernel *const linear_u8s8[] = {&kfast_linear_u8s8, NULL};
static const k_kernel *const quantize[] = {&kfast_quantize, NULL};
static const k_kernel *const conv2d_u8s8[] = {&kfast_conv2d_u8s8, NULL};
static const k_kernel *const bmm[] = {&kfast_bmm, NULL};
static const k_kernel *const sdpa[] = {&kfast_sdpa_flash, NULL};
static const k_kernel *const sdpa_backward[] = {&kfast_sdpa_backward_flash, NULL};
static const k_kernel *const conv2d_nhwc[] = {&kfast_conv2d_nhwc_lowp_1x1, &kfast_conv2d_nhwc_lowp_im2col,
						&kfast_conv2d_nhwc_depthwise, &kfast_conv2d_nhwc_rows, &kfast_conv2d_nhwc_1x1,
						&kfast_conv2d_nhwc_winograd, &kfast_conv2d_nhwc_implicit,
						&kfast_conv2d_nhwc_im2col, NULL};
static const k_kernel *const conv2d_backward_input[] = {&kfast_conv2d_backward_input_gemm, NULL};
static const k_kernel *const conv2d_backward_weight[] = {&kfast_conv2d_backward_weight_gemm, NULL};
static const k_kernel *const permute[] = {&kfast_permute_swap, NULL};
static const k_kernel *const max_pool2d_nhwc[] = {&kfast_max_pool2d_nhwc, NULL};
static const k_kernel *const max_pool2d[] = {&kfast_max_pool2d_rows, NULL};
static const k_kernel *const avg_pool2d_nhwc[] = {&kfast_avg_pool2d_nhwc, NULL};
static const k_kernel *const adaptive_avg_pool2d_nhwc[] = {&kfast_adaptive_avg_pool2d_nhwc, NULL};
static const k_kernel *const fused[] = {&kfast_fused_elementwise, NULL};
static const k_kernel *const fused_dag[] = {&kfast_fused_dag_avx512, &kfast_fused_dag_avx2, &kfast_fused_dag, NULL};
static const k_kernel *const sqrt_[] = {&kfast_sqrt_lanes, NULL};
static const k_kernel *const where_[] = {&kfast_where_lanes, NULL};
static const k_kernel *const softmax[] = {&kfast_softmax_rows, NULL};
static const k_kernel *const log_softmax[] = {&kfast_log_softmax_rows, NULL};
static const k_kernel *const layer_norm[] = {&kfast_layer_norm_rows, NULL};
static const k_kernel *const rms_norm[] = {&kfast_rms_norm_rows, NULL};
static const k_kernel *const batch_norm_train[] = {&kfast_batch_norm_train, NULL};
static const k_kernel *const batch_norm_backward[] = {&kfast_batch_norm_backward, NULL};
static const k_kernel *const threshold_backward[] = {&kfast_threshold_backward, NULL};
static const k_kernel *const rope[] = {&kfast_rope, NULL};
static const k_kernel *const elu[] = {&kfast_elu_vmath, NULL};
static const k_kernel *const relu[] = {&kfast_relu_lanes, NULL};
static const k_kernel *const clamp[] = {&kfast_clamp_lanes, NULL};
static const k_kernel *const add[] = {&kfast_add_lanes, NULL};
static const k_kernel *const sub[] = {&kfast_sub_lanes, NULL};
static const k_kernel *const mul[] = {&kfast_mul_lanes, NULL};
static const k_kernel *const div_[] = {&kfast_div_lanes, NULL};
static const k_kernel *const sum[] = {&kfast_sum_columns, NULL};
static const k_kernel *const cast[] = {&kfast_cast_half, &kfast_cast_bytes_f32, NULL};
static const k_kernel *const layer_norm_backward[] = {&kfast_layer_norm_backward_rows, NULL};
static const k_kernel *const dropout[] = {&kfast_dropout, NULL};
#ifdef AIR_HAVE_X86
static const k_kernel *const softmax_backward[] = {&kfast_softmax_backward_avx2, NULL};
#else
static const k_kernel *const softmax_backward[] = {NULL};
#endif
static const k_kernel *const activation_backward[] = {&kfast_activation_backward, NULL};
static const k_kernel *const dropout_backward[] = {&kfast_dropout_backward, NULL};
#define VMATH_LIST_(name) static const k_kernel *const vmath_##name[] = {&kfast_##name##_vmath, NULL};
KFAST_VMATH_OPS(VMATH_LIST_)
#undef VMATH_LIST_
static const k_kernel *const conv2d[] = {&kfast_conv2d_depthwise,	 &kfast_conv2d_1x1_t, &kfast_conv2d_1x1,
					 &kfast_conv2d_narrow_nchw, &kfast_conv2d_patches, &kfast_conv2d_implicit_nchw,
					 &kfast_conv2d_im2col_channels_last,
					 &kfast_conv2d_im2col, NULL};

const k_kernel *const *kreg_fast_kernels(int op)
{
	switch (op) {
	case OP_mm: return mm;
	case OP_addmm: return addmm;
	case OP_linear: return linear;
	case OP_linear_q: return linear_q;
	case OP_linear_u8s8: return linear_u8s8;
	case OP_quantize: return quantize;
	case OP_conv2d_u8s8: return conv2d_u8s8;
	case OP_bmm: return bmm;
	case OP_sdpa: return sdpa;
	case OP_sdpa_lse: return sdpa;
	case OP_sdpa_backward: return sdpa_backward;
	case OP_conv2d: return conv2d;
	case OP_conv2d_nhwc: return conv2d_nhwc;
	case OP_conv2d_backward_input: return conv2d_backward_input;
	case OP_conv2d_backward_weight: return conv2d_backward_weight;
	case OP_permute: return permute;
	case OP_max_pool2d_nhwc: return max_pool2d_nhwc;
	case OP_max_pool2d: return max_pool2d;
	case OP_avg_pool2d_nhwc: return avg_pool2d_nhwc;
	case OP_adaptive_avg_pool2d_nhwc: return adaptive_avg_pool2d_nhwc;
	case OP_fused_elementwise: return fused;
	case OP_fused_dag: return fused_dag;
	case OP_sqrt: return sqrt_;
	case OP_where: return where_;
	case OP_softmax: return softmax;
	case OP_batch_norm_train: return batch_norm_train;
	case OP_batch_norm_backward: return batch_norm_backward;
	case OP_threshold_backward: return threshold_backward;
	case OP_log_softmax: return log_softmax;
	case OP_layer_norm: return layer_norm;
	case OP_rms_norm: return rms_norm;
	case OP_rope: return rope;
	case OP_elu: return elu;
	case OP_relu: return relu;
	case OP_clamp: return clamp;
	case OP_add: return add;
	case OP_sum: return sum;
	case OP_cast: return cast;
	case OP_sub: return sub;
	case OP_mul: return mul;
	case OP_div: return div_;
	case OP_layer_norm_backward: return layer_norm_backward;
	case OP_dropout: return dropout;
	case OP_softmax_backward: return softmax_backward;
	case OP_activation_backward: return activation_backward;
	case OP_dropout_backward: return dropout_backward;
#define VMATH_CASE_(name) \
	case OP_##name: return vmath_##name;
	KFAST_VMATH_OPS(VMATH_CASE_)
#undef VMATH_CASE_
	default: return none;
	}
}

bool kreg_prepared_replaces_input(const k_kernel *k, int input)
{
	/* the weight is input 1 of linear, conv2d and conv2d_nhwc; these kernels' run
	 * functions read only its dims, the data through call->prepared */
	if (input != 1)
		return false;
	return k == &kfast_linear_packed || k == &kfast_conv2d_nhwc_1x1 || k == &kfast_conv2d_nhwc_im2col ||
	       k == &kfast_conv2d_nhwc_implicit || k == &kfast_conv2d_implicit_nchw ||
	       k == &kfast_conv2d_im2col_channels_last ||
	       k == &kfast_conv2d_nhwc_winograd || k == &kfast_conv2d_nhwc_depthwise || k == &kfast_conv2d_1x1_t ||
	       k == &kfast_conv2d_nhwc_lowp_im2col || k == &kfast_conv2d_nhwc_rows;
}
