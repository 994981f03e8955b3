/* conv_backward.h - the gradients of a 2-D convolution (NCHW, not
 * transposed): conv2d_backward_input gives dx from (dy, w) and
 * conv2d_backward_weight gives dw from (dy, x). Reference kernels in
 * conv_backward_ref.c (the oracle), the GEMM ones in conv_backward.c.
 * Both ops share the attribute order stride, padding, dilation, groups,
 * then the size the gradient cannot be inferred from: input_size [H, W]
 * (the input's height and width) or kernel [KH, KW]. */
#ifndef AIR_KERNELS_CONV_CONV_BACKWARD_H
#define AIR_KERNELS_CONV_CONV_BACKWARD_H

#include "kernels/conv/conv_ref.h"

enum { KCONVB_STRIDE = 0, KCONVB_PADDING, KCONVB_DILATION, KCONVB_GROUPS, KCONVB_SIZE };

air_status kref_conv2d_backward_input(const k_call *call);
air_status kref_conv2d_backward_weight(const k_call *call);

/* The forward convolution's geometry (kconv_geom, no bias, residual or
 * activation) of a backward call: weight selects conv2d_backward_weight's
 * operands (dy, x -> dw), else conv2d_backward_input's (dy, w -> dx).
 * Checks the concrete sizes shape inference could only check loosely. */
air_status kconvb_geom(const k_call *call, bool weight, kconv_geom *g);

extern const k_kernel kfast_conv2d_backward_input_gemm;
extern const k_kernel kfast_conv2d_backward_weight_gemm;

#endif
