/* transpose.c - transposes of 4-byte matrices in register blocks (16 x 16
 * with AVX-512, 8 x 8, then one element at a time for the strips left), and
 * the permute kernel built on them. Shared by every family that moves a
 * matrix's rows into columns: the layout permutes, the GEMM's transposed B
 * panels, attention's K^T, linear's transposed output. */
#include "kernels/shape/transpose.h"

#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/common/kernel.h"

#define KTR_SUFFIX portable
#include "kernels/shape/transpose_blocks.h"

typedef struct ktr_blocks {
	ktr_block_fn b8;
	ktr_block_fn b16; /* or NULL */
} ktr_blocks;

static ktr_blocks pick_blocks(void)
{
	ktr_blocks f = {ktr_block8__portable, NULL};
#ifdef AIR_HAVE_X86
	unsigned isa = kcpu_features();
	const unsigned avx512 = KCPU_AVX512F | KCPU_AVX512BW | KCPU_AVX512VL;
	if ((isa & avx512) == avx512) {
		f.b8 = ktr_block8__avx512;
		f.b16 = ktr_block16__avx512;
	} else if (isa & KCPU_AVX2) {
		f.b8 = ktr_block8__avx2;
	}
#endif
	return f;
}

/* A permutation that keeps dims [0, k) and swaps [k, k + a) with [k + a,
 * rank) moves, per index of the kept dims, an R x S matrix to S x R: the
 * layout pass's [0, 2, 3, 1] into NHWC (R = C, S = H*W) and [0, 3, 1, 2]
 * back (R = H*W, S = C), and any transpose of the last two dims (a
 * linear's weight in a backward graph: [1, 0], 3.5 ms a 2048 x 1000 in the
 * element-by-element reference). In 16 x 16 (AVX-512) or 8 x 8 blocks
 * transposed in registers (ktranspose), a strip of TR rows by up to TS
 * columns per task. The scalar 16 x 16 tiles this replaced took 0.5 ms
 * for a 64 x 112 x 112 map on Zen 3, and a 3-channel input (the stem's)
 * was a single task. */
enum { TR = 32, TS = 4096 };

/* The split (n, R, S) of a permute of 4-byte elements that swaps two
 * trailing blocks, or false. */
static bool swap_split(const k_call *call, int64_t *n, int64_t *R, int64_t *S)
{
	const k_attr *p = &call->attrs[0];
	const int rank = call->in[0].rank;
	if (rank < 2 || p->n != rank || air_dtype_size(call->in[0].dtype) != 4)
		return false;
	int64_t v[AIR_MAX_RANK];
	for (int i = 0; i < rank; i++)
		v[i] = p->ints[i] < 0 ? p->ints[i] + rank : p->ints[i];
	int k = 0;
	while (k < rank && v[k] == k)
		k++;
	if (k == rank)
		return false; /* the identity: a copy */
	const int64_t a = v[k] - k, b = rank - k - a; /* sizes of the two blocks */
	if (a < 1 || b < 1)
		return false;
	for (int i = 0; i < b; i++)
		if (v[k + i] != k + a + i)
			return false;
	for (int i = 0; i < a; i++)
		if (v[k + b + i] != k + i)
			return false;
	const int64_t *d = call->in[0].dims;
	*n = k_numel(k, d);
	*R = k_numel((int)a, d + k);
	*S = k_numel((int)b, d + k + a);
	return true;
}

static bool tr_supports(const k_call *call)
{
	int64_t n, R, S;
	return swap_split(call, &n, &R, &S);
}

typedef struct tr_job {
	const float *x; /* any 4-byte elements: only moved */
	float *y;
	int64_t R, S;   /* rows, columns of each image's matrix */
	int64_t nr, ns; /* row strips, column chunks per image */
} tr_job;

/* Rows [r0, r1) x columns [c0, c1) of x transposed into y (+ res if not
 * NULL): blocks of b x b where the CPU has them (16, then 8 for the strips
 * they leave), then one element at a time. */
static void transpose_region(const ktr_blocks *f, int b, const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy,
			     const float *res, int64_t ldr, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
	if (r0 >= r1 || c0 >= c1)
		return;
	ktr_block_fn block = b == 16 ? f->b16 : b == 8 ? f->b8 : NULL;
	if (!block && b > 1) {
		transpose_region(f, b / 2, x, ldx, y, ldy, res, ldr, r0, r1, c0, c1);
		return;
	}
	if (!block) {
		for (int64_t c = c0; c < c1; c++)
			for (int64_t r = r0; r < r1; r++) {
				if (res)
					((float *)y)[c * ldy + r] = ((const float *)x)[r * ldx + c] + res[c * ldr + r];
				else
					y[c * ldy + r] = x[r * ldx + c];
			}
		return;
	}
	const int64_t rb = r0 + (r1 - r0) / b * b, cb = c0 + (c1 - c0) / b * b;
	for (int64_t c = c0; c < cb; c += b)
		for (int64_t r = r0; r < rb; r += b)
			block(x + r * ldx + c, ldx, y + c * ldy + r, ldy, res ? res + c * ldr + r : NULL, ldr);
	/* the strips left: columns past the blocks, then rows past them */
	transpose_region(f, b / 2, x, ldx, y, ldy, res, ldr, r0, rb, cb, c1);
	transpose_region(f, b / 2, x, ldx, y, ldy, res, ldr, rb, r1, c0, c1);
}

void ktranspose(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t rows, int64_t cols)
{
	ktr_blocks f = pick_blocks();
	transpose_region(&f, 16, (const uint32_t *)x, ldx, (uint32_t *)y, ldy, NULL, 0, 0, rows, 0, cols);
}

void ktranspose_add(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t rows, int64_t cols,
		    const float *res, int64_t ldr)
{
	ktr_blocks f = pick_blocks();
	transpose_region(&f, 16, (const uint32_t *)x, ldx, (uint32_t *)y, ldy, res, ldr, 0, rows, 0, cols);
}

static void tr_task(void *p, int64_t t, int thread)
{
	(void)thread;
	const tr_job *j = p;
	const int64_t sc = t % j->ns, rest = t / j->ns, rs = rest % j->nr, n = rest / j->nr;
	const int64_t R = j->R, S = j->S;
	const int64_t r0 = rs * TR, r1 = k_min64(R, r0 + TR), s0 = sc * TS, s1 = k_min64(S, s0 + TS);
	const float *x = j->x + n * R * S;
	float *y = j->y + n * R * S;
	ktranspose(x + r0 * S + s0, S, y + s0 * R + r0, R, r1 - r0, s1 - s0);
}

static air_status tr_run(const k_call *call)
{
	const k_tensor *x = &call->in[0];
	if (x->numel == 0)
		return AIR_OK;
	tr_job j;
	int64_t n;
	if (!swap_split(call, &n, &j.R, &j.S))
		return air_error(AIR_INVALID_ARGUMENT, "permute_swap_tiles: not a swap of trailing dims");
	j.x = x->data;
	j.y = call->out[0].data;
	j.nr = k_cdiv(j.R, TR);
	j.ns = k_cdiv(j.S, TS);
	rt_pool_run(call->pool, n * j.nr * j.ns, tr_task, &j);
	return AIR_OK;
}

const k_kernel kfast_permute_swap = {"permute_swap_tiles", 0, tr_supports, NULL, NULL, NULL, tr_run};
