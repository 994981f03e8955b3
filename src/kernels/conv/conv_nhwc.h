/* conv_nhwc.h - fast kernels of the channels-last ops (conv2d_nhwc and the
 * NHWC pools) that the layout pass creates. */
#ifndef AIR_KERNELS_CONV_CONV_NHWC_H
#define AIR_KERNELS_CONV_CONV_NHWC_H

#include "kernels/common/kernel.h"
#include "kernels/conv/conv_nhwc_ref.h"
#include "kernels/conv/conv_ref.h"
#include "kernels/gemm/gemm.h"

/* groups == C == O: a direct loop vectorized over channels. */
extern const k_kernel kfast_conv2d_nhwc_depthwise;
/* 1x1 stride 1 unpadded: one GEMM [N*H*W, C] x packed [C, O]. */
extern const k_kernel kfast_conv2d_nhwc_1x1;
/* 3x3 stride 1, one group, a simple activation: Winograd F(2x2, 3x3)
 * (conv_winograd.c), for the shapes where it wins (see its supports). */
extern const k_kernel kfast_conv2d_nhwc_winograd;
size_t kconv_winograd_prepared_bytes(const void *prepared, size_t *source_bytes); /* the same */
/* a narrow input (the stem's 3 channels), or a wide one whose output rows
 * hold two micro-tiles or more: the GEMM reads the rows of each tap row
 * straight from a padded copy of the input (conv_implicit.c). */
extern const k_kernel kfast_conv2d_nhwc_implicit;
/* The same for the NCHW conv2d op: the padded band is built channels-last
 * from the NCHW input and each output row is transposed out of L1, so a
 * lone stem needs no layout permutes around it. Its conditions, for the
 * layout pass (which leaves such a conv in NCHW when it is alone). */
extern const k_kernel kfast_conv2d_implicit_nchw;
bool kconv_implicit_fits(int64_t C, int64_t groups, int64_t KH, int64_t KW, int64_t dilation_w);
/* Bands of output rows for N images of OH rows on nthreads threads: of
 * band rows down to half that, the one whose busiest thread has the
 * fewest rows (conv_implicit.c, conv_narrow.c). */
int64_t kconv_even_band(int64_t band, int64_t N, int64_t OH, int64_t nthreads);
/* A conv2d_nhwc of one group with a 16-bit weight (bf16, f16) and f32
 * activations (conv_nhwc_lowp.c): 1x1 stride 1 unpadded, one GEMM reading
 * the weight in place; anything else, im2col in row blocks against the
 * weight permuted once to [O, KH, KW, C] in its 16-bit type. */
extern const k_kernel kfast_conv2d_nhwc_lowp_1x1;
extern const k_kernel kfast_conv2d_nhwc_lowp_im2col;
size_t kconv_lowp_prepared_bytes(const void *prepared);
/* Row r (a pixel of its image) of channels-last col for group grp: for
 * each tap (ki, kj) the Cg channels under it, zeros in the padding; xi
 * holds the image's rows from input row ih0 on (conv_nhwc_im2col.c). */
void kconv_nhwc_im2col_row(const kconv_geom *g, const float *xi, int64_t ih0, int64_t r, int64_t grp, float *dst);
/* anything else: NHWC im2col in row blocks + GEMM with packed weights. */
extern const k_kernel kfast_conv2d_nhwc_im2col;
/* The same for the NCHW conv2d op (spatial, ungrouped, no residual), which
 * it runs channels-last inside: each task transposes the input rows its
 * pixels read into a band in L2, and its output back out of L2
 * (conv_nhwc_im2col.c). */
extern const k_kernel kfast_conv2d_im2col_channels_last;
/* Whether a GEMM conv kernel re-packs its weight on every call instead of
 * holding a packed copy (conv_nhwc.c: low memory, a weight source, at least
 * 512 output pixels); kconv_geom from the compile-time call. */
bool kconv_nhwc_repack_per_call(const k_call *call, const kconv_geom *g);
/* Such a kernel's weight source (call->in_source[1]) at prepare: *src the
 * caller's weight, *scale a malloc'ed copy of its O row scales or NULL. */
air_status kconv_nhwc_weight_source(const k_call *call, int64_t O, const float **src, double **scale);
/* Whether a GEMM conv kernel (1x1 or im2col) takes this conv2d_nhwc call:
 * f32, a constant weight, something to multiply; *c its geometry. */
bool kconv_nhwc_gemm_ok(const k_call *call, kconv_nhwc *c);
/* The inputs of a conv2d_nhwc call after the weight: bias and residual (or NULL). */
void kconv_nhwc_operands(const k_call *call, const kconv_nhwc *c, const float **bias, const float **res);
/* The weight as packed GEMM B blocks of up to nb_want output channels,
 * shared by the GEMM conv kernels: packed at prepare, or (low memory, see
 * kconv_nhwc_repack_per_call; or a weight that is a graph input, not a
 * constant) re-packed per call into the front of the workspace: kconv_nhwc_repack_bytes there, which kconv_nhwc_weight_blocks
 * fills and steps *ws past. Blocks are indexed [group * nblk + block]. */
air_status kconv_nhwc_pack_weight(const k_call *call, const kconv_geom *g, int64_t nb_want, void **out);
void kconv_nhwc_packed_release(void *prepared);
size_t kconv_nhwc_repack_bytes(const void *prepared, const kconv_geom *g);
kgemm_packed_b *const *kconv_nhwc_weight_blocks(const k_call *call, const kconv_geom *g, char **ws);
/* The blocking kconv_nhwc_pack_weight chose: nblk blocks of nb channels. */
void kconv_nhwc_weight_blocking(const void *prepared, int64_t *nblk, int64_t *nb);
/* Bytes of the weight copy that the 1x1 or im2col kernel's prepare made
 * (next to nothing when it re-packs the weight on every call); in
 * *source_bytes, the bytes of caller memory it reads on every call instead
 * that no graph node reads (a folded weight's source), else 0. */
size_t kconv_nhwc_prepared_bytes(const void *prepared, size_t *source_bytes);
extern const k_kernel kfast_max_pool2d_nhwc;
extern const k_kernel kfast_avg_pool2d_nhwc;
extern const k_kernel kfast_adaptive_avg_pool2d_nhwc;

#endif
