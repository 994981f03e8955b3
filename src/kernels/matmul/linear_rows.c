/* linear_rows.c - linear whose weight stays where its owner keeps it: a
 * module's parameter borrowed by the graph as a constant (the kernel under
 * enable_memory_optimization, which holds no packed copy), or a weight
 * that is a graph input (a training step's). linear_packed
 * held BERT-base's 343 MB of weights a second time, and its peak RSS was
 * 1.49x eager's.
 *
 * y[M, N] = act(x[M, K] w[N, K]^T + b + r) is computed as its transpose,
 * y^T = w x^T: the weight, row-major, is the GEMM's A, which the GEMM reads
 * in place (as it reads the activations in linear_packed), and x^T is B,
 * packed once per call (M x K floats, small next to w). Tasks take blocks
 * of w's rows (outputs) by blocks of tokens. Where the micro-kernel stores
 * tiles transposed (AVX-512), each tile of y^T goes into y from the
 * registers, with the bias, the residual and the activation. Otherwise a
 * task computes its block of y^T into its own buffer, with the bias as
 * the per-row bias of y^T and the activation when there is no residual,
 * then transposes it into y while it is in cache and adds the residual
 * and then the activation, if there is one. The residual is read after
 * the products, so it may not alias y (plan/inplace.c does not list this
 * kernel). */
#include "kernels/matmul/linear_rows.h"

#include <string.h>

#include "core/error.h"
#include "kernels/gemm/amx.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/ukernel.h"
#include "kernels/matmul/matmul_ref.h"
#include "kernels/shape/transpose.h"

/* Tokens per task: the y^T block (TOKENS x rows) stays in L2 beside the
 * block of w's rows the GEMM reads in place. Below MIN_TOKENS (or tokens
 * unknown at compile time) the packed kernel runs: x^T is then one panel
 * of tokens mostly empty, and the GEMM does panel-wide work per weight
 * row (Zen 3, 768x768 weight, rows/packed time: M = 4 2.8-3.3x, 8 1.7x,
 * 16 1.03x, 32 1.0x; M = 1 on ResNet's 2048x1000 fc 2.1x). */
enum { TOKENS = 256, MIN_TOKENS = 16 };
/* Smaller weights keep their packed copy: it costs little memory, and there
 * a task's share of w is too small next to packing x^T and transposing y
 * (ViT-Tiny's 192-wide layers took 1.17-1.22x the packed kernel's time). */
enum { MIN_WEIGHT_DIM = 256 };
/* A borrowed constant weight under this many bytes keeps its packed copy
 * too (2 MiB: BERT-base's smallest, 768 x 768, is 2.25 MiB). With 128
 * tokens, 40 weights cycled, the packed kernel ran 128x512x512 in 0.24 ms
 * against 0.26, 256x256 in 0.059 against 0.078, 1376x512 (a small
 * LLaMA's MLP) in 0.60 against 0.715; from 768 x 768 on it is 3-10%
 * faster but doubles the memory the weights take. */
#define MIN_BORROWED_WEIGHT_BYTES ((int64_t)2 << 20)
/* Tokens from which the AMX GEMM takes the product (kamx_gemm_bt). Eight
 * alternating 768 <-> 3072 and 768 x 768 linears, weights cold, 2 threads,
 * against eager, this kernel without AMX -> with it: 512 tokens 1.08-1.10x
 * -> 1.23-1.32x, 2048 tokens 1.04x -> 1.31x; at 128 tokens 1.07-1.19x ->
 * 1.10-1.15x, and BERT-base b1 (128 tokens) 1.32x -> 1.23x: splitting
 * the cold weight on every call costs more than the faster products save
 * when few tokens share it. */
enum { AMX_MIN_TOKENS = 512 };

typedef struct rows_plan {
	int64_t M, N, K;
	int64_t rows;   /* weight rows per task: a multiple of the tile rows */
	int64_t tokens; /* tokens per task: a multiple of the panel width */
	size_t packed_bytes, slot_bytes, buf_bytes;
	size_t a_bytes; /* a weight tile packed (pack_w), at the end of a slot */
} rows_plan;

/* The tile loop for a micro-kernel that prefetches (AVX-512), in place of
 * the blocked GEMM: one weight tile (mr rows, all of K) at a time through
 * every panel of the task's tokens, so the tile's rows, contiguous in
 * memory, are read from it once, in order, and the next tile's rows (which
 * follow them) are prefetched a share per panel call. The blocked GEMM's
 * order (K in blocks of 256; a panel of tokens at a time through all the
 * tiles) read the weight, cold from memory on every call, as twelve short
 * strided streams: on Sapphire Rapids with the weights cold, BERT-base's
 * 768x768, 3072x768 and 768x3072 products at 128 tokens ran at 272, 289 and
 * 271 GFLOP/s that way and 376, 359 and 332 this way (/tmp scratch, 2
 * threads). Up to DIRECT_MAX_K, where a panel of x^T (K x nr) still
 * streams from L2, and DIRECT_MAX_M tokens: with more, each weight row is
 * used by many panels and the blocked GEMM's K blocks win (2 threads,
 * kernel alone against eager, builds alternated: 577 x 4096 @ 4096 x 1024
 * 0.89x -> 0.97-0.98x, 4096 x 768 @ 768 x 768 0.90x -> 1.00-1.01x; at 512
 * x 1024 @ 1024 x 1024 the tile loop was 10% faster, with 256 as the
 * limit). */
enum { DIRECT_MAX_K = 4096, DIRECT_MAX_M = 512 };

static bool direct_tiles(int64_t M, int64_t K)
{
	return kgemm_active_ukernel()->tile_prefetch && K <= DIRECT_MAX_K && M <= DIRECT_MAX_M;
}

/* The tile loop stores its tiles into y itself (gemm_tiles), epilogue and
 * all: no y^T block to transpose after it. */
static bool tiles_into_y(int64_t M, int64_t K)
{
	return direct_tiles(M, K) && kgemm_active_ukernel()->store_t;
}

static rows_plan make_plan(int64_t M, int64_t N, int64_t K, int nthreads, bool pack_w)
{
	rows_plan p;
	p.M = M, p.N = N, p.K = K;
	int64_t mr = kgemm_tile_rows(), nr = kgemm_tile_cols();
	p.tokens = M <= TOKENS ? k_cdiv(M > 0 ? M : 1, nr) * nr : TOKENS;
	/* 16 tiles of rows (96 on AVX2): its part of w is read from L2 once
	 * per panel of tokens; fewer rows when there are too few tasks for
	 * the threads */
	/* the tile loop's first tile in a task comes cold: fewer, longer
	 * tasks (BERT's 768x768 at 128 tokens: 192-row tasks ran 1.13x as
	 * fast as 96-row ones) */
	const int64_t per_thread = direct_tiles(M, K) ? 2 : 4, token_blocks = k_cdiv(M > 0 ? M : 1, p.tokens);
	int64_t blocks = k_cdiv(N, 16 * mr);
	if (blocks * token_blocks < per_thread * (int64_t)nthreads)
		blocks = k_min64(k_cdiv(per_thread * (int64_t)nthreads, token_blocks), k_cdiv(N, mr));
	/* blocks of even size: shrinking 16 tiles a tile at a time until
	 * there were tasks enough cut N = 512 into 168, 168, 168 and 8 rows,
	 * three tasks' work on one thread of two (512x512 at 128 tokens ran at
	 * 192 GFLOP/s, the packed kernel at 267) */
	p.rows = blocks > 0 ? k_cdiv(k_cdiv(N, blocks), mr) * mr : mr;
	p.packed_bytes = k_align64(kgemm_packed_b_size(K, M));
	/* the y^T block; none where the tiles are stored into y directly */
	p.buf_bytes = tiles_into_y(M, K) ? 0 : k_align64(sizeof(float) * (size_t)(p.rows * p.tokens));
	/* the blocked GEMM's packing space, for K past the tile loop's reach */
	const size_t gemm_ws = direct_tiles(M, K) ? 0 : kgemm_packed_workspace_bytes(p.rows, p.tokens, K, 1);
	p.a_bytes = pack_w && direct_tiles(M, K) && kgemm_active_ukernel()->pack_a
			    ? k_align64(sizeof(float) * (size_t)(mr * K))
			    : 0;
	p.slot_bytes = p.buf_bytes + k_align64(gemm_ws) + p.a_bytes;
	return p;
}

typedef struct rows_job {
	rows_plan p;
	const float *x, *w, *bias, *res;
	const float *scale; /* per weight row (output), or NULL */
	float *y;
	k_act act;
	kgemm_packed_b *xt;
	char *slots;
	int64_t panels_per_task; /* packing */
} rows_job;

/* B(k, m) = x[m, k]: a panel of nr tokens is their rows of x transposed
 * (8 x 8 register blocks; the packing's scalar loop for a transposed B
 * took a tenth of a 768x768 linear's time at 128 tokens), zero past M. */
static void pack_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const rows_job *j = ctx;
	const int64_t nr = kgemm_tile_cols(), K = j->p.K, j0 = t * j->panels_per_task * nr;
	const int64_t j1 = k_min64(j->p.M, j0 + j->panels_per_task * nr);
	for (int64_t c = j0; c < j1; c += nr) {
		float *panel = kgemm_packed_b_panel(j->xt, c);
		const int64_t n = k_min64(nr, j1 - c);
		if (n < nr)
			memset(panel, 0, sizeof(float) * (size_t)(K * nr));
		ktranspose(j->x + c * K, K, panel, nr, n, K);
	}
}

/* The tile loop. With a kernel that stores tiles transposed (AVX-512),
 * each tile goes straight into y from the registers, with the bias, the
 * residual and the activation: no y^T block, no transpose pass (which
 * took 9% of BERT-base's 3072x768 product at 128 tokens). Otherwise it
 * writes the task's y^T block into buf, for gemm_task to transpose. */
static void gemm_tiles(const rows_job *j, int64_t n0, int64_t rows, int64_t m0, int64_t tokens, float *buf,
		       float *abuf)
{
	const kgemm_ukernel_desc *uk = kgemm_active_ukernel();
	const int mr = uk->mr, nr = uk->nr;
	const int64_t N = j->p.N, K = j->p.K, npanels = k_cdiv(tokens, nr);
	kgemm_tile_ep te = {0};
	te.alpha = 1.0f;
	/* a panel (K x nr, past L1 for K > 384) is read once per call */
	te.flags = KGEMM_TILE_FIRST | KGEMM_TILE_LAST | KGEMM_TILE_STREAM_B;
	/* with a row scale the tiles are the bare products: scale_block
	 * applies the epilogue after them */
	te.act = (j->res && !uk->store_t) || j->scale ? K_ACT_NONE : j->act;
	if (uk->store_t) {
		te.flags |= KGEMM_TILE_STORE_T;
		te.ld_res = N;
	}
	for (int64_t i = 0; i < rows; i += mr) {
		const int m = (int)k_min64(mr, rows - i);
		const float *w = j->w + (n0 + i) * K;
		te.bias_m = j->bias && !j->scale ? j->bias + n0 + i : NULL;
		/* the kernel takes at most kc / 4 lines a call */
		const int64_t lines = k_cdiv(k_min64(mr, rows - i - m) * K * (int64_t)sizeof(float), 64);
		const int64_t share = k_min64(k_cdiv(lines, npanels), K / 4);
		int64_t done = 0;
		for (int64_t p = 0; p < npanels; p++) {
			const int n = (int)k_min64(nr, tokens - p * nr);
			te.pf_lines = 0;
			if (m == mr && n > nr / 2 && done < lines) {
				te.pf = (const char *)(w + m * K) + 64 * done;
				te.pf_lines = (int)k_min64(share, lines - done);
				done += te.pf_lines;
			}
			const float *xt = kgemm_packed_b_panel(j->xt, m0 + p * nr);
			const float *a = w;
			int64_t rs_a = K, cs_a = 1;
			if (abuf) {
				if (p == 0)
					uk->pack_a(m, K, w, K, abuf);
				a = abuf, rs_a = 1, cs_a = mr;
			}
			if (uk->store_t) {
				const int64_t at = (m0 + p * nr) * N + n0 + i; /* token m0 + p * nr, output n0 + i */
				te.res = j->res && !j->scale ? j->res + at : NULL;
				uk->fn(K, a, rs_a, cs_a, xt, j->y + at, N, m, n, &te);
			} else {
				uk->fn(K, a, rs_a, cs_a, xt, buf + i * tokens + p * nr, tokens, m, n, &te);
			}
		}
	}
}

/* With a row scale (conv_rows.c: a folded batch norm's, applied here
 * rather than to a copy of the weight), the task's block of y holds the
 * bare products, still in cache: y = act(scale * y + residual + bias),
 * output channels contiguous along each token's row. */
static void scale_block(const rows_job *j, float *y, int64_t n0, int64_t rows, int64_t m0, int64_t tokens)
{
	const int64_t N = j->p.N;
	const float *s = j->scale + n0, *b = j->bias ? j->bias + n0 : NULL;
	for (int64_t m = 0; m < tokens; m++) {
		float *row = y + m * N;
		const float *r = j->res ? j->res + (m0 + m) * N + n0 : NULL;
		if (r)
			for (int64_t i = 0; i < rows; i++)
				row[i] = s[i] * row[i] + r[i];
		else
			for (int64_t i = 0; i < rows; i++)
				row[i] = s[i] * row[i];
		kgemm_epilogue_row(row, b, rows, j->act);
	}
}

static void gemm_task(void *ctx, int64_t t, int thread)
{
	const rows_job *j = ctx;
	const rows_plan *p = &j->p;
	int64_t nblk = k_cdiv(p->N, p->rows);
	int64_t n0 = (t % nblk) * p->rows, m0 = (t / nblk) * p->tokens;
	int64_t rows = k_min64(p->rows, p->N - n0), tokens = k_min64(p->tokens, p->M - m0);
	char *slot = j->slots + (size_t)thread * p->slot_bytes;
	float *buf = (float *)slot;
	float *y = j->y + m0 * p->N + n0;
	if (direct_tiles(p->M, p->K)) {
		gemm_tiles(j, n0, rows, m0, tokens, buf, p->a_bytes ? (float *)(slot + p->slot_bytes - p->a_bytes) : NULL);
		if (tiles_into_y(p->M, p->K)) {
			if (j->scale)
				scale_block(j, y, n0, rows, m0, tokens);
			return;
		}
	} else {
		k_epilogue ep = k_epilogue_none();
		ep.bias_m = j->bias && !j->scale ? j->bias + n0 : NULL;
		ep.act = j->res || j->scale ? K_ACT_NONE : j->act;
		kgemm_f32_packed_cols(rows, tokens, p->K, j->w + n0 * p->K, p->K, 1, j->xt, m0, buf, tokens, &ep,
				      NULL, slot + p->buf_bytes);
	}
	if (j->scale) {
		ktranspose(buf, tokens, y, p->N, rows, tokens);
		scale_block(j, y, n0, rows, m0, tokens);
		return;
	}
	if (!j->res) {
		ktranspose(buf, tokens, y, p->N, rows, tokens);
		return;
	}
	/* the residual is added as the block is stored (a pass of its own over
	 * y took 1.3% of BERT-base's linear time), then the activation */
	ktranspose_add(buf, tokens, y, p->N, rows, tokens, j->res + m0 * p->N + n0, p->N);
	if (j->act != K_ACT_NONE)
		for (int64_t m = 0; m < tokens; m++)
			kgemm_epilogue_row(y + m * p->N, NULL, rows, j->act);
}

static void dims(const k_call *call, int64_t *M, int64_t *N, int64_t *K)
{
	const k_tensor *x = &call->in[0], *w = &call->in[1];
	*K = w->dims[1];
	*N = w->dims[0];
	*M = 1;
	for (int i = 0; i < x->rank - 1; i++)
		*M = (*M < 0 || x->dims[i] < 0) ? -1 : *M * x->dims[i];
}

/* The weight is a graph input (a training step's parameter), or a borrowed
 * constant as it stands (not scaled by a folded batch norm) and the compile
 * prefers memory to time. An input weight would otherwise be transposed
 * into panels on every call (linear_gemm): BERT-base's products at 128
 * tokens, F.linear with the weight an argument, 2 threads, interleaved
 * medians against eager: 768x768 0.77x -> 0.84-0.88x, 768x3072 0.88x ->
 * 0.98-0.99x; a BERT-base b1 training step's linears 93 -> 68 ms. Under
 * 256 it lost there too (ViT-Tiny's 192-wide layers 0.69-0.86x -> 0.53-0.70x). */
static bool rows_supports(const k_call *call)
{
	int64_t M, N, K;
	if (!k_all_f32(call))
		return false;
	dims(call, &M, &N, &K);
	if (N < MIN_WEIGHT_DIM || K < MIN_WEIGHT_DIM || M < MIN_TOKENS)
		return false;
	if (!call->in_const[1])
		return true;
	if (!call->low_memory || !call->in_source || N * K * (int64_t)sizeof(float) < MIN_BORROWED_WEIGHT_BYTES)
		return false;
	const k_const_source *s = &call->in_source[1];
	return s->base && !s->row_scale && s->base == call->in[1].data;
}

size_t kwrows_workspace_bytes(int64_t M, int64_t N, int64_t K, int nthreads, bool pack_w)
{
	if (M <= 0 || N <= 0 || K <= 0)
		return 0;
	rows_plan p = make_plan(M, N, K, nthreads, pack_w);
	return p.packed_bytes + (size_t)(nthreads < 1 ? 1 : nthreads) * p.slot_bytes;
}

kgemm_packed_b *kwrows_panels(void *workspace, int64_t K, int64_t M)
{
	return kgemm_packed_b_init(workspace, K, M);
}

void kwrows_product(const kwrows_args *a, void *workspace, rt_pool *pool)
{
	rows_job j;
	memset(&j, 0, sizeof j);
	j.p = make_plan(a->M, a->N, a->K, rt_pool_size(pool), a->pack_w);
	j.w = a->w;
	j.scale = a->scale;
	j.bias = a->bias;
	j.res = a->res;
	j.y = a->y;
	j.act = a->act;
	j.xt = (kgemm_packed_b *)workspace; /* kwrows_panels put it there */
	j.slots = (char *)workspace + j.p.packed_bytes;
	rt_pool_run(pool, k_cdiv(a->N, j.p.rows) * k_cdiv(a->M, j.p.tokens), gemm_task, &j);
}

static size_t rows_ws(const k_call *call, int nthreads)
{
	int64_t M, N, K;
	dims(call, &M, &N, &K);
	if (M <= 0 || N <= 0 || K <= 0)
		return 0;
	size_t f32 = kwrows_workspace_bytes(M, N, K, nthreads, false);
	size_t amx = M >= AMX_MIN_TOKENS ? kamx_workspace_bytes(M, N, K, nthreads) : 0;
	return amx > f32 ? amx : f32;
}

static air_status rows_run(const k_call *call)
{
	rows_job j;
	int64_t M, N, K;
	dims(call, &M, &N, &K);
	if (call->in[0].dims[call->in[0].rank - 1] != K)
		return air_error(AIR_SHAPE_MISMATCH, "linear: contraction sizes differ: %lld and %lld",
				 (long long)call->in[0].dims[call->in[0].rank - 1], (long long)K);
	if (M == 0 || N == 0)
		return AIR_OK;
	int has_res = call->attrs[2].i != 0;
	j.bias = NULL;
	if (kref_present(call->attrs[0].i, call->n_in - has_res, 2)) {
		if (call->in[2].dims[0] != N)
			return air_error(AIR_SHAPE_MISMATCH, "linear: bias has %lld entries for %lld outputs",
					 (long long)call->in[2].dims[0], (long long)N);
		j.bias = call->in[2].data;
	}
	j.res = NULL;
	if (has_res) {
		const k_tensor *res = &call->in[call->n_in - 1];
		AIR_TRY(kref_check_residual("linear", res, &call->out[0]));
		j.res = res->data;
	}
	int nthreads = rt_pool_size(call->pool);
	/* On AMX, from AMX_MIN_TOKENS: y = x w^T in the usual orientation, the
	 * weight split block by block as it is read (gemm/amx.h); values it
	 * cannot take (it then returns less than M) are done again below. The
	 * residual is not y. */
	if (M >= AMX_MIN_TOKENS && kamx_available() && kamx_wanted(M, N, K)) {
		k_epilogue ep = k_epilogue_none();
		ep.bias_n = j.bias;
		ep.residual = j.res;
		ep.ld_residual = N;
		ep.act = (k_act)call->attrs[1].i;
		if (kamx_gemm_bt(M, N, K, call->in[0].data, K, call->in[1].data, K, call->out[0].data, N, &ep, call->pool,
				 call->workspace) == M)
			return AIR_OK;
	}
	j.p.M = M, j.p.K = K;
	j.x = call->in[0].data;
	j.xt = kwrows_panels(call->workspace, K, M);
	int64_t panels = k_cdiv(M, kgemm_tile_cols());
	j.panels_per_task = k_cdiv(panels, 4 * (int64_t)nthreads);
	rt_pool_run(call->pool, k_cdiv(panels, j.panels_per_task), pack_task, &j);
	kwrows_args a = {M, N, K, call->in[1].data, NULL, j.bias, j.res, call->out[0].data, (k_act)call->attrs[1].i,
			 false};
	kwrows_product(&a, call->workspace, call->pool);
	return AIR_OK;
}

const k_kernel kfast_linear_rows = {"linear_gemm_weight_rows", 0, rows_supports, NULL, NULL, rows_ws, rows_run};
