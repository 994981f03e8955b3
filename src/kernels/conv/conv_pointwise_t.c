/* conv_pointwise_t.c - an NCHW 1x1 convolution on a small map, computed
 * as its transpose: Y^T[P, O] = X^T[P, C] @ W^T[C, O], with the weight
 * packed once at prepare, or by every call when it is a graph input (the
 * channels-last kernels' packing, kconv_nhwc_weight_blocks) and X^T read
 * through strides (the GEMM packs its row blocks, as it packs any A that
 * is not row-major), then each image's [P, O] product transposed into
 * Y[O, P] in 8 x 8 register blocks.
 *
 * Why: the direct NCHW kernel (conv_fast.c) makes the pixels the GEMM's
 * N and the weight its A, read in place. On ResNet-50's late maps P is 49
 * or 196, so the last 16-column tile is mostly padding (49 = 3 * 16 + 1:
 * four tiles for 3.06 of work) and the large weight streams unpacked, six
 * rows at a time. Here the pixels are the M side, whose short last tile has
 * its own cheaper variant, and the weight streams as packed panels: the
 * 512>2048 and 2048>512 convs at 7x7 took 0.80-0.83 ms direct against
 * 0.57-0.62 ms for the same product channels-last (bench_conv --layout).
 *
 * Scratch: a pass of images' [nimg * P, O] product per call (P <=
 * MAX_PIXELS, up to PASS_BYTES of it), shared by the threads; one GEMM of
 * nimg * P rows fills it, then the threads transpose it by image and block
 * of output channels, adding the residual and the activation there (the
 * residual is NCHW, so not in the GEMM's epilogue). A pass rather than an
 * image a GEMM: three fork-joins an image made a batch-16 call 16x as many
 * joins, each waiting for the slowest thread (a scheduler time slice on a
 * loaded machine: 7x the one-thread time), and 49 rows a GEMM is a short
 * product. */
#include "core/error.h"
#include "kernels/conv/conv_nhwc.h"
#include "kernels/gemm/ukernel.h" /* kgemm_epilogue_row */
#include "kernels/matmul/matmul_fast.h"
#include "kernels/shape/transpose.h"

/* Largest map taken: past it the scratch and the transpose cost more than
 * the direct kernel's edge tiles (28x28 = 784 ran level with it). */
enum { MAX_PIXELS = 256, ROWS_PER_TASK = 64, PASS_BYTES = 8 << 20 };

static bool geom(const k_call *call, kconv_geom *g)
{
	return kconv_geom_make(call, g) == AIR_OK && g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 &&
	       g->ph == 0 && g->pw == 0 && g->G == 1 && g->O > 0 && g->C > 0;
}

static bool pt_supports(const k_call *call)
{
	kconv_geom g;
	if (!k_all_f32(call) || !geom(call, &g))
		return false;
	/* sizes unknown at compile time (-1) are not taken: the scratch is sized
	 * there. Taken where the direct kernel's last tile of pixels wastes
	 * more than 1/8 of its work. The vector kernels run a last tile of at
	 * most half their width with one vector, so the waste is counted in
	 * half tiles. AVX2 (16 columns): 14x14 (196 = 24.5 vectors of 8) ran
	 * level with it, 7x7 (49 = 6.1) 20% faster. AVX-512 (32 columns):
	 * 14x14 (12.25 vectors of 16) ran 7-10% faster direct, 7x7 (3.06)
	 * 13-20% slower (bench_conv --layout, medians) */
	const int64_t P = g.OH * g.OW, step = kgemm_tile_cols() / 2 > 0 ? kgemm_tile_cols() / 2 : 1;
	return g.OH > 0 && g.OW > 0 && P <= MAX_PIXELS && (k_cdiv(P, step) * step - P) * 8 > P;
}

static air_status pt_prepare(const k_call *call, void **out)
{
	kconv_geom g;
	if (!geom(call, &g))
		return air_error(AIR_INVALID_ARGUMENT, "conv2d_gemm_1x1_t: bad geometry");
	return kconv_nhwc_pack_weight(call, &g, INT64_MAX, out);
}

/* Images a pass: as many as keep its transposed input and its product
 * within PASS_BYTES each (at least one), the passes even. */
static int64_t pass_images(const kconv_geom *g)
{
	const int64_t N = g->N > 0 ? g->N : 1, P = g->OH * g->OW > 0 ? g->OH * g->OW : 1;
	const int64_t per = (int64_t)sizeof(float) * P * (g->C > g->O ? g->C : g->O);
	int64_t most = PASS_BYTES / per;
	most = most < 1 ? 1 : k_min64(most, N);
	return k_cdiv(N, k_cdiv(N, most));
}

static size_t scratch_bytes(const kconv_geom *g)
{
	return k_align64(sizeof(float) * (size_t)(pass_images(g) * g->OH * g->OW * g->O));
}

static size_t in_bytes(const kconv_geom *g)
{
	return k_align64(sizeof(float) * (size_t)(pass_images(g) * g->H * g->W * g->C));
}

static size_t pt_ws(const k_call *call, int nthreads)
{
	kconv_geom g;
	if (!geom(call, &g))
		return 0;
	const int64_t P = g.OH * g.OW;
	return kconv_nhwc_repack_bytes(call->prepared, &g) + scratch_bytes(&g) + in_bytes(&g) +
	       kgemm_packed_workspace_bytes(pass_images(&g) * P, g.O, g.C, nthreads < 1 ? 1 : nthreads);
}

typedef struct in_job {
	const float *x; /* [nimg][C, P] of the pass's images */
	float *xt;      /* [nimg * P, C] */
	int64_t P, C;
} in_job;

/* a block of channels of one image (task = image * blocks + block) */
static void in_task(void *ctx, int64_t task, int thread)
{
	(void)thread;
	const in_job *j = ctx;
	const int64_t nblk = k_cdiv(j->C, ROWS_PER_TASK), n = task / nblk;
	const int64_t c0 = task % nblk * ROWS_PER_TASK, c1 = k_min64(j->C, c0 + ROWS_PER_TASK);
	ktranspose(j->x + (n * j->C + c0) * j->P, j->P, j->xt + n * j->P * j->C + c0, j->C, c1 - c0, j->P);
}

typedef struct pt_job {
	const float *t; /* [nimg * P, O] */
	float *y;       /* [nimg][O, P] of the pass's images */
	const float *res;
	int64_t P, O;
	k_act act; /* applied here (0 when the GEMM applied it) */
} pt_job;

/* a block of output channels of one image (task = image * blocks + block) */
static void pt_task(void *ctx, int64_t task, int thread)
{
	(void)thread;
	const pt_job *j = ctx;
	const int64_t nblk = k_cdiv(j->O, ROWS_PER_TASK), n = task / nblk;
	const int64_t o0 = task % nblk * ROWS_PER_TASK, o1 = k_min64(j->O, o0 + ROWS_PER_TASK);
	float *y = j->y + (n * j->O + o0) * j->P;
	ktranspose(j->t + n * j->P * j->O + o0, j->O, y, j->P, j->P, o1 - o0);
	if (j->res || j->act != K_ACT_NONE)
		kgemm_epilogue_row(y, j->res ? j->res + (n * j->O + o0) * j->P : NULL, (o1 - o0) * j->P, j->act);
}

static air_status pt_run(const k_call *call)
{
	kconv_geom g;
	if (!geom(call, &g))
		return air_error(AIR_INVALID_ARGUMENT, "conv2d_gemm_1x1_t: bad geometry");
	if (call->out[0].numel == 0)
		return AIR_OK;
	const int64_t P = g.OH * g.OW, O = g.O, C = g.C;
	char *ws = call->workspace;
	kgemm_packed_b *const *b = kconv_nhwc_weight_blocks(call, &g, &ws);
	float *t = (float *)ws;
	ws += scratch_bytes(&g);
	float *xt = (float *)ws;
	ws += in_bytes(&g);
	const float *res = g.has_residual ? call->in[call->n_in - 1].data : NULL;
	k_epilogue ep = k_epilogue_none();
	ep.bias_n = g.has_bias ? call->in[2].data : NULL;
	/* the residual comes in at the transpose, and the activation after it */
	ep.act = res ? K_ACT_NONE : g.act;
	const int64_t most = pass_images(&g);
	for (int64_t n = 0; n < g.N; n += most) {
		const int64_t nimg = k_min64(most, g.N - n);
		const float *x = (const float *)call->in[0].data + n * C * P;
		in_job ij = {x, xt, P, C};
		rt_pool_run(call->pool, nimg * k_cdiv(C, ROWS_PER_TASK), in_task, &ij);
		kgemm_f32_packed(nimg * P, O, C, xt, C, 1, b[0], t, O, &ep, call->pool, ws);
		pt_job j = {t, (float *)call->out[0].data + n * O * P, res ? res + n * O * P : NULL, P, O,
			    res ? g.act : K_ACT_NONE};
		rt_pool_run(call->pool, nimg * k_cdiv(O, ROWS_PER_TASK), pt_task, &j);
	}
	return AIR_OK;
}

const k_kernel kfast_conv2d_1x1_t = {"conv2d_gemm_1x1_t", 0, pt_supports, pt_prepare, kconv_nhwc_packed_release,
				     pt_ws, pt_run};
