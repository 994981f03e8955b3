/* conv_patches.c - conv2d whose stride is its kernel (no padding, no
 * dilation, one group): a vision transformer's patch embedding (ViT's
 * 16x16 stride-16 over 224x224). Its windows do not overlap, so im2col
 * copies every input float once; laid out a patch per row, [P, K] with K =
 * C * KH * KW in the weight's (c, kh, kw) order, each (c, kh) of a patch is
 * KW contiguous floats of one input row, where the column layout [K, P]
 * took every KW-th float of that row (ViT's stem: 16 passes over each
 * input line). Then Y^T[P, O] = patches @ W^T with W^T packed once at
 * prepare (a constant weight), the bias per column and the activation in
 * the GEMM's epilogue, and Y^T transposed into NCHW.
 *
 * ViT-Tiny's patch embedding (3 -> 192, 16x16 stride 16, 224x224), 2
 * threads, in one process against F.conv2d (oneDNN, 0.33-0.34 ms): the
 * implicit GEMM took 0.43 ms, im2col + GEMM 0.39, the patches read as a
 * transposed B packed on every call 0.36. */
#include "kernels/conv/conv_patches.h"

#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_ref.h"
#include "kernels/gemm/gemm.h"
#include "kernels/shape/transpose.h"

/* Narrower kernels read too little per copy to win over the general paths */
enum { MIN_KW = 4 };

static bool patch_geom(const k_call *call, kconv_geom *g)
{
	return k_all_f32(call) && kconv_geom_make(call, g) == AIR_OK && g->G == 1 && g->KH == g->sh &&
	       g->KW == g->sw && g->KW >= MIN_KW && g->ph == 0 && g->pw == 0 && g->dh == 1 && g->dw == 1 &&
	       g->O > 0 && g->OH > 0 && g->OW > 0 && !g->has_residual;
}

/* a constant weight only: it is packed once */
static bool patches_supports(const k_call *call)
{
	kconv_geom g;
	return call->in_const && call->in_const[1] && patch_geom(call, &g);
}

static air_status patches_prepare(const k_call *call, void **out)
{
	kconv_geom g;
	*out = NULL;
	if (!patch_geom(call, &g) || !call->in[1].data)
		return air_error(AIR_INVALID_ARGUMENT, "conv2d_patches: not a patch convolution with a constant weight");
	const int64_t K = g.C * g.KH * g.KW;
	kgemm_packed_b *wt;
	/* B(k, o) = W[o][k] */
	AIR_TRY(kgemm_pack_b(K, g.O, call->in[1].data, 1, K, &wt));
	*out = wt;
	return AIR_OK;
}

static void patches_release(void *prepared)
{
	kgemm_packed_b_free(prepared);
}

/* workspace: the patches [P][K], Y^T [P][O], the GEMM's */
static size_t patches_ws(const k_call *call, int nthreads)
{
	kconv_geom g;
	if (!patch_geom(call, &g))
		return 0;
	const int64_t P = g.OH * g.OW, K = g.C * g.KH * g.KW;
	return k_align64(sizeof(float) * (size_t)(P * K)) + k_align64(sizeof(float) * (size_t)(P * g.O)) +
	       kgemm_packed_workspace_bytes(P, g.O, K, nthreads);
}

typedef struct patch_job {
	const kconv_geom *g;
	const float *x; /* one image */
	float *patches; /* [OH * OW][C * KH * KW] */
} patch_job;

/* KW floats; whole 16-float lines as fixed-size copies, which the compiler
 * inlines (a memcpy call per 64 bytes took a fifth of ViT's patch
 * embedding) */
static inline void copy_run(float *restrict d, const float *restrict s, int64_t n)
{
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		__builtin_memcpy(d + i, s + i, 16 * sizeof(float));
	for (; i < n; i++)
		d[i] = s[i];
}

/* Patch rows of output row oh: for each (c, kh), KW floats per patch. */
static void gather_task(void *ctx, int64_t oh, int thread)
{
	(void)thread;
	const patch_job *j = ctx;
	const kconv_geom *g = j->g;
	const int64_t K = g->C * g->KH * g->KW;
	for (int64_t ow = 0; ow < g->OW; ow++) {
		float *row = j->patches + (oh * g->OW + ow) * K;
		for (int64_t c = 0; c < g->C; c++)
			for (int64_t kh = 0; kh < g->KH; kh++)
				copy_run(row + (c * g->KH + kh) * g->KW,
					 j->x + (c * g->H + oh * g->sh + kh) * g->W + ow * g->sw, g->KW);
	}
}

/* Y^T [P][O] into y [O][P], output channels split across threads */
typedef struct transpose_job {
	const float *yt;
	float *y;
	int64_t P, O, per;
} transpose_job;

static void transpose_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const transpose_job *j = ctx;
	int64_t o0 = t * j->per, no = j->O - o0 < j->per ? j->O - o0 : j->per;
	ktranspose(j->yt + o0, j->O, j->y + o0 * j->P, j->P, j->P, no);
}

static air_status patches_run(const k_call *call)
{
	kconv_geom g;
	if (!patch_geom(call, &g) || !call->prepared)
		return air_error(AIR_INVALID_ARGUMENT, "conv2d_patches: not a prepared patch convolution");
	const int64_t P = g.OH * g.OW, K = g.C * g.KH * g.KW;
	float *patches = call->workspace;
	float *yt = (float *)((char *)call->workspace + k_align64(sizeof(float) * (size_t)(P * K)));
	char *gemm_ws = (char *)yt + k_align64(sizeof(float) * (size_t)(P * g.O));
	k_epilogue ep = k_epilogue_none();
	ep.bias_n = g.has_bias ? call->in[2].data : NULL;
	ep.act = g.act;
	for (int64_t n = 0; n < g.N; n++) {
		patch_job j = {&g, (const float *)call->in[0].data + n * g.C * g.H * g.W, patches};
		rt_pool_run(call->pool, g.OH, gather_task, &j);
		kgemm_f32_packed(P, g.O, K, patches, K, 1, call->prepared, yt, g.O, &ep, call->pool, gemm_ws);
		transpose_job tj = {yt, (float *)call->out[0].data + n * g.O * P, P, g.O, 64};
		rt_pool_run(call->pool, (g.O + tj.per - 1) / tj.per, transpose_task, &tj);
	}
	return AIR_OK;
}

const k_kernel kfast_conv2d_patches = {"conv2d_patches_gemm", 0, patches_supports, patches_prepare,
				       patches_release, patches_ws, patches_run};
