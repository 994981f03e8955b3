/* conv_narrow.h - an NCHW convolution of a narrow input (ResNet's stem: 3
 * channels, 7x7, stride 2) computed straight into NCHW (conv_narrow.c).
 *
 * The pixels of an output row are the vector lanes: for tap (c, ki, kj),
 * sixteen consecutive output pixels read sixteen input values sw apart,
 * which are consecutive once the input rows are split into their sw column
 * phases (even and odd columns for stride 2). So each task copies its input
 * rows into a zero-padded band of phase rows, and the micro-kernel reads a
 * tap's pixels at band + off[k] + ow: a table of K offsets (one per tap)
 * instead of an im2col, and each output channel's row of pixels is stored
 * where NCHW wants it, with no transpose. */
#ifndef AIR_KERNELS_CONV_CONV_NARROW_H
#define AIR_KERNELS_CONV_CONV_NARROW_H

#include "kernels/common/kernel.h"

/* Output channels per micro-kernel call: the broadcast side. */
enum { KNARROW_CH = 8 };

/* One output row of KNARROW_CH channels. */
typedef struct knarrow_row {
	const float *band;  /* the band at this output row's first input row */
	const int32_t *off; /* K offsets into band, one per tap */
	int64_t K;
	const float *w;    /* K x KNARROW_CH weights, tap-major */
	const float *bias; /* KNARROW_CH (zero past the last channel) */
	float *y;          /* channel 0 of the group, this row: y[r * ystride + ow] */
	int64_t ystride;
	int64_t OW;
	int nch; /* channels to store, 1..KNARROW_CH */
	int act; /* K_ACT_NONE, K_ACT_RELU or K_ACT_RELU6 */
} knarrow_row;

/* The micro-kernel (conv_narrow.avx512.c). It reads up to 47
 * floats past band + off[k] + OW - 1: the band has slack for that. */
void knarrow_row__avx512(const knarrow_row *r);
/* even[i] = src[2 i], odd[i] = src[2 i + 1] for i < n: stride 2's phases. */
void knarrow_deinterleave2__avx512(const float *src, int64_t n, float *even, float *odd);

extern const k_kernel kfast_conv2d_narrow_nchw;

#endif
