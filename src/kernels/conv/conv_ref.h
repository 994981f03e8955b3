/* conv_ref.h - reference kernels of 2-D convolution (conv_ref.c) and col2im
 * (col2im_ref.c), and the geometry helpers the fast convolutions and the
 * pooling kernels share (batch norm: kernels/norm/norm_ref.h; pooling:
 * kernels/pool/pool_ref.h). */
#ifndef AIR_KERNELS_CONV_CONV_REF_H
#define AIR_KERNELS_CONV_CONV_REF_H

#include "kernels/common/epilogue.h"
#include "kernels/common/kernel.h"

air_status kref_conv2d(const k_call *call);
air_status kref_col2im(const k_call *call);

/* The input and weight of a conv call as f32 values: their own data, or,
 * with a 16-bit weight (bf16, f16), the weight widened and the input
 * rounded to the weight's type (as the fast kernels' GEMM rounds it,
 * kernels/gemm/lowp_w.h, and as eager's input already is), in one malloc'ed
 * block at *owned that the caller frees (NULL when the weight is f32). The
 * reference kernels' way to take a 16-bit weight. */
air_status kconv_lowp_operands(const k_call *call, const float **x, const float **w, float **owned);

/* An INTS attribute of two entries: none gives def, one entry means both. */
static inline void kref_pair(const int64_t *ints, int n, const int64_t def[2], int64_t out[2])
{
	out[0] = n == 0 ? def[0] : ints[0];
	out[1] = n == 0 ? def[1] : n == 1 ? ints[0] : ints[1];
}

/* Everything about one conv2d call, with concrete sizes. */
typedef struct kconv_geom {
	int64_t N, C, H, W;    /* input */
	int64_t O, OH, OW;     /* output */
	int64_t KH, KW;        /* kernel */
	int64_t G, Cg, Og;     /* groups, input and output channels per group */
	int64_t sh, sw, ph, pw, dh, dw;
	int has_bias;
	int has_residual; /* the last input, the output's shape, added before act */
	k_act act;        /* the fused activation, applied last */
} kconv_geom;

/* Reads the geometry of a conv2d call and checks the concrete sizes that
 * shape inference could only check symbolically. Also usable at compile
 * time, where unknown sizes are -1 (then nothing about them is checked). */
air_status kconv_geom_make(const k_call *call, kconv_geom *g);

/* The output positions [lo, hi) of out_n whose input position o*s + off
 * lies inside [0, in_n): where a kernel tap reads real input, not padding. */
static inline void kconv_valid_range(int64_t out_n, int64_t in_n, int64_t s, int64_t off, int64_t *lo,
				     int64_t *hi)
{
	/* o*s + off >= 0  <=>  o >= ceil(-off / s) */
	int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
	/* o*s + off <= in_n - 1  <=>  o <= floor((in_n - 1 - off) / s) */
	int64_t top = in_n - 1 - off;
	int64_t h = top < 0 ? 0 : top / s + 1;
	if (h > out_n)
		h = out_n;
	if (l > h)
		l = h;
	*lo = l;
	*hi = h;
}

#endif
