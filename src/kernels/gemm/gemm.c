/* gemm.c - the portable f32 GEMM driver: micro-kernel dispatch, packing,
 * cache blocking, threading, the fused epilogue's plumbing, and the
 * reference oracle.
 *
 * Blocking follows the BLIS/GotoBLAS scheme. B is packed once into panels of
 * nr columns covering all of K (kgemm_pack_b for weights). A B given at call
 * time is packed as it is used, where the kernel can (row-major B and a
 * strided kernel that stores what it reads: kgemm_run_b_source), else in a
 * parallel phase of the call first. The output is cut into tasks of mc rows x nc columns.
 * A task walks K in blocks of kc; for each nr-wide B micro-panel (kc x nr,
 * in L1) it runs the micro-kernel down the block's rows, whose mc x kc block
 * of A stays in L2. Row-major A is read in place (the kernel broadcasts from
 * mr row pointers, as XNNPACK does) when a task is narrow: packing it cost as
 * much as the arithmetic it fed when N is small (ResNet's 64-channel layers
 * ran at 70% of peak instead of 90%). Wide tasks pack it, where the kernel
 * has a fast packing (kgemm_reads_a_in_place). Other layouts of A are always
 * packed into the thread's workspace slot. Partial sums over K blocks stay
 * in C (hot in L2); the last K block applies the activation tile by tile.
 * While the micro-tiles of one B micro-panel run, the next panel is
 * prefetched a slice per tile (it comes from L3 when B outgrows L2: +10% at
 * 1024^3 on AVX-512).
 *
 * Thin products (M <= KGEMM_THIN_M) in kgemm_f32 skip packing B: see
 * kgemm_thin.
 *
 * Threads take tasks dynamically from the pool. Tasks are numbered N-block
 * major, so threads running at the same time read the same packed B block
 * (shared, read-only, in L3). */
#include "kernels/gemm/gemm.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/common/epilogue.h" /* kref_act_f64: the oracle's activations */
#include "kernels/common/kernel.h"
#include "kernels/gemm/amx.h"
#include "kernels/gemm/gemm_internal.h"
#include "kernels/shape/transpose.h"
#include "kernels/vmath/vmath.h"
#include "platform/bigmem.h"

/* Cache blocks (in elements) of the portable kernel, and the AVX2 kernel's
 * mc and nc. kc x nr of B (16 KiB) stays in L1 next to a 6 x kc sliver of
 * A; mc x kc of A (144 KiB) stays in L2; a kc x nc block of B is shared by
 * the threads through L3. On a 2-core Zen test machine, kc in 192..384, mc
 * in 96..216 and nc 512..4096 were all within noise (+-3%) of this choice
 * (bench_gemm.c). Each kernel's entry in the table below carries its own
 * blocks.
 *
 * The AVX2 kernel takes K in blocks of up to KGEMM_KC_AVX2 = 1024: every K
 * block but the first reloads and restores each C tile, and on Zen 3 (32
 * KiB L1, 512 KiB L2) a B panel of up to 64 KiB streams from L2 fast
 * enough. ResNet-50's channels-last convolutions (K = 576..4608) took
 * 46.6-46.8 ms instead of 47.4 at batch 1 and 768 instead of 779 at batch
 * 16 (bench_conv --layout, 2 threads); squares and BERT's linears did not
 * move (bench_gemm). */
enum { KGEMM_KC = 256, KGEMM_KC_AVX2 = 1024, KGEMM_MC = 144, KGEMM_NC = 1024 };
/* Below this many multiply-adds a parallel loop costs more than it saves. */
#define KGEMM_PARALLEL_MIN_MACS (64.0 * 64.0 * 64.0)
/* How many B micro-panels ahead of the one in use the task prefetches: a
 * late ResNet-50 layer (M = 49, 9 MiB of weights) uses each panel for only
 * five micro-tiles, too short to hide memory latency one panel ahead.
 * ResNet-50 batch 1 convolutions: 1 ahead 31.2-31.7 ms, 2 ahead 29.9-30.9
 * (torchair.report.profile, 20 runs); BERT-base the same within noise. */
enum { KGEMM_PF_PANELS = 2 };
/* kgemm_f32_b_in_place has no workspace: a task packs B's micro-panels
 * into this much stack instead (a 256 x 32 panel: 32 KiB) */
enum { KGEMM_STACK_PANEL_FLOATS = 256 * 32 };
/* Workspace slices start on their own cache lines (two, for the adjacent-line
 * prefetcher), so threads never share one. */
enum { KGEMM_ALIGN = 128 };
/* The batched call packs B for at most this many bytes of items at a time. */
#define KGEMM_BATCH_PACK_BYTES ((size_t)32 << 20)

/* ---- dispatch ---------------------------------------------------------- */

/* Widest ISA first, portable last: the first entry whose features are all
 * present is used, once per process, so a B packed by kgemm_pack_b (whose
 * panel width is the kernel's nr) always meets the kernel it was packed for.
 *
 * AVX-512 blocks (Sapphire Rapids, 48 KiB L1d, 2 MiB L2): the 32 KiB B
 * micro-panel (kc 256) lives in L1/L2, the 168 x 256 A block (168 KiB) in L2.
 * kc 256..512, mc 120..336 and nc 256..1024 measured within the (large,
 * shared machine) noise of each other; kc 512 lost 10-20% on ResNet's K=576
 * layers. */
static const kgemm_ukernel_desc kgemm_ukernels[] = {
#ifdef AIR_HAVE_X86
	{.name = "avx512_12x32", .isa = KCPU_AVX512, .mr = 12, .nr = 32, .fn = kgemm_ukernel_12x32__avx512,
	 .kc = 256, .mc = 168, .nc = 1024, .strided = kgemm_ukernel_12x32_strided__avx512,
	 .dot = kgemm_dot_4x4__avx512, .dot_mr = 4, .dot_nr = 4, .seg = kgemm_ukernel_12x32_seg__avx512,
	 .tile_prefetch = 1, .strided_packs_b = 1, .pack_a = kgemm_pack_a_12__avx512, .store_t = 1,
	 .pack_a_t = kgemm_pack_a_t_12__avx512},
	{.name = "avx2_6x16", .isa = KCPU_AVX2, .mr = 6, .nr = 16, .fn = kgemm_ukernel_6x16__avx2,
	 .kc = KGEMM_KC_AVX2, .mc = KGEMM_MC, .nc = KGEMM_NC, .seg = kgemm_ukernel_6x16_seg__avx2,
	 .strided = kgemm_ukernel_6x16_strided__avx2},
#endif
	{.name = "scalar_4x16", .isa = 0, .mr = 4, .nr = 16, .fn = kgemm_ukernel_4x16__scalar, .kc = KGEMM_KC,
	 .mc = KGEMM_MC, .nc = KGEMM_NC},
};
enum { KGEMM_NUKERNELS = sizeof kgemm_ukernels / sizeof kgemm_ukernels[0] };

static pthread_once_t kgemm_once = PTHREAD_ONCE_INIT;
static const kgemm_ukernel_desc *kgemm_selected;

static void kgemm_select(void)
{
	unsigned f = kcpu_features();
	kgemm_selected = &kgemm_ukernels[KGEMM_NUKERNELS - 1];
	for (int i = 0; i < KGEMM_NUKERNELS; i++) {
		if ((kgemm_ukernels[i].isa & f) == kgemm_ukernels[i].isa) {
			kgemm_selected = &kgemm_ukernels[i];
			break;
		}
	}
}

static const kgemm_ukernel_desc *kgemm_ukernel(void)
{
	pthread_once(&kgemm_once, kgemm_select);
	return kgemm_selected;
}

const kgemm_ukernel_desc *kgemm_active_ukernel(void)
{
	return kgemm_ukernel();
}

const char *kgemm_kernel_name(void)
{
	return kgemm_ukernel()->name;
}

int kgemm_tile_rows(void)
{
	return kgemm_ukernel()->mr;
}

int kgemm_tile_cols(void)
{
	return kgemm_ukernel()->nr;
}

/* ---- activations --------------------------------------------------------- */

float kgemm_act_simple_f32(float x, k_act act)
{
	switch (act) {
	case K_ACT_RELU: return x < 0.0f ? 0.0f : x; /* NaN stays NaN, as in torch */
	case K_ACT_RELU6: return x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x);
	case K_ACT_HARDSWISH: {
		float t = x + 3.0f;
		t = t > 0.0f ? (t < 6.0f ? t : 6.0f) : 0.0f;
		return x * t * (1.0f / 6.0f);
	}
	default: return x;
	}
}

static kv_func kgemm_act_vmath(k_act act)
{
	switch (act) {
	case K_ACT_GELU: return KV_gelu;
	case K_ACT_GELU_TANH: return KV_gelu_tanh;
	case K_ACT_SILU: return KV_silu;
	case K_ACT_SIGMOID: return KV_sigmoid;
	default: return KV_tanh;
	}
}

void kgemm_act_tile(float *c, int64_t ldc, int64_t m, int64_t n, k_act act)
{
	kv_unary_f32 f = kv_unary(kgemm_act_vmath(act));
	for (int64_t r = 0; r < m; r++)
		f(c + r * ldc, c + r * ldc, n);
}

void kgemm_epilogue_row(float *y, const float *res, int64_t n, k_act act)
{
	if (res)
		for (int64_t i = 0; i < n; i++)
			y[i] += res[i];
	if (kgemm_act_is_transcendental(act))
		kgemm_act_tile(y, n, 1, n, act);
	else if (act != K_ACT_NONE)
		for (int64_t i = 0; i < n; i++)
			y[i] = kgemm_act_simple_f32(y[i], act);
}

/* ---- packing ------------------------------------------------------------ */

static size_t kgemm_align(size_t n)
{
	return (n + KGEMM_ALIGN - 1) / KGEMM_ALIGN * KGEMM_ALIGN;
}

/* A[m x k] (strides rs, cs) into panels of uk->mr rows, zero-padded:
 * panel i0/mr at dst + i0 * k, element (r, p) at [p * mr + r]. */
static void kgemm_pack_a(const kgemm_ukernel_desc *uk, int64_t m, int64_t k, const float *A, int64_t rs,
			 int64_t cs, float *dst)
{
	const int mr = uk->mr;
	if (cs == 1 && uk->pack_a) {
		uk->pack_a(m, k, A, rs, dst);
		return;
	}
	if (rs == 1 && uk->pack_a_t) {
		uk->pack_a_t(m, k, A, cs, dst);
		return;
	}
	for (int64_t i0 = 0; i0 < m; i0 += mr) {
		int rows = (int)k_min64(mr, m - i0);
		float *d = dst + i0 * k;
		const float *s = A + i0 * rs;
		if (cs == 1) {
			/* row-major A: read each row contiguously */
			for (int r = 0; r < rows; r++)
				for (int64_t p = 0; p < k; p++)
					d[p * mr + r] = s[r * rs + p];
			for (int r = rows; r < mr; r++)
				for (int64_t p = 0; p < k; p++)
					d[p * mr + r] = 0.0f;
		} else if (rs == 1) {
			/* transposed A (a gradient's x^T): a panel row is mr
			 * consecutive floats of A's storage */
			for (int64_t p = 0; p < k; p++) {
				memcpy(d + p * mr, s + p * cs, sizeof(float) * (size_t)rows);
				for (int r = rows; r < mr; r++)
					d[p * mr + r] = 0.0f;
			}
		} else {
			for (int64_t p = 0; p < k; p++) {
				for (int r = 0; r < rows; r++)
					d[p * mr + r] = s[r * rs + p * cs];
				for (int r = rows; r < mr; r++)
					d[p * mr + r] = 0.0f;
			}
		}
	}
}

/* B's value at (row p, column j) of a source block, times scale[j] when
 * there is a scale: in double, rounded once, so a weight scaled while it
 * is packed equals the one fold_batchnorm folds at compile time. */
static inline float kgemm_b_at(const float *s, int64_t at, const double *scale, int c)
{
	return scale ? (float)((double)s[at] * scale[c]) : s[at];
}

/* Rows [p0, p1) of columns [j0, j1) (j0 a multiple of nr) of B[K x N] into
 * whole panels of nr columns, zero-padded past N: panel j/nr at dst +
 * (j/nr) * K * nr. B points at element (p0, j0): (p, j) is at
 * B[(p - p0) * rs + (j - j0) * cs]; scale (or NULL) at column j0's. */
static void kgemm_pack_b_panels(int64_t K, int64_t N, int64_t p0, int64_t p1, const float *B, int64_t rs,
				int64_t cs, const double *scale, int nr, int64_t j0, int64_t j1, float *dst)
{
	for (int64_t j = j0; j < j1; j += nr) {
		int cols = (int)k_min64(nr, N - j);
		float *d = dst + (j / nr) * K * nr + p0 * nr;
		const float *s = B + (j - j0) * cs;
		const double *sc = scale ? scale + (j - j0) : NULL;
		int64_t rows = p1 - p0;
		if (cs == 1 && !sc) {
			for (int64_t p = 0; p < rows; p++) {
				memcpy(d + p * nr, s + p * rs, (size_t)cols * sizeof(float));
				for (int c = cols; c < nr; c++)
					d[p * nr + c] = 0.0f;
			}
		} else if (rs == 1 && !sc) {
			/* transposed B (a [N x K] weight, a linear's): the panel is
			 * the transpose of its cols x rows block, in 8 x 8 register
			 * blocks. Element by element it ran at about a float a cycle:
			 * a training step's linear (weight an input, packed on every
			 * call) at 768 x 3072 spent 0.7 ms of 3.1 packing */
			ktranspose(s, cs, d, nr, cols, rows);
			if (cols < nr)
				for (int64_t p = 0; p < rows; p++)
					memset(d + p * nr + cols, 0, sizeof(float) * (size_t)(nr - cols));
		} else if (rs < cs) {
			/* transposed B with a scale: a column at a time would
			 * touch K destination lines per column; 16 x nr tiles keep
			 * both sides within a few lines */
			for (int64_t q0 = 0; q0 < rows; q0 += 16) {
				int64_t q1 = k_min64(rows, q0 + 16);
				for (int c = 0; c < cols; c++)
					for (int64_t p = q0; p < q1; p++)
						d[p * nr + c] = kgemm_b_at(s, c * cs + p * rs, sc, c);
				for (int c = cols; c < nr; c++)
					for (int64_t p = q0; p < q1; p++)
						d[p * nr + c] = 0.0f;
			}
		} else {
			for (int64_t p = 0; p < rows; p++)
				for (int c = 0; c < nr; c++)
					d[p * nr + c] = c < cols ? kgemm_b_at(s, p * rs + c * cs, sc, c) : 0.0f;
		}
	}
}

static size_t kgemm_packed_floats(int64_t K, int64_t N, int nr)
{
	return (size_t)k_cdiv(N, nr) * (size_t)nr * (size_t)K;
}

struct kgemm_packed_b {
	int64_t K, N;
	int nr;
	size_t bytes;
	float *data; /* KGEMM_ALIGN-aligned panels */
	int amx_ok;  /* every value in kamx_in_range's range (0: not known) */
	/* the panels split for the AMX path (kgemm_packed_b_presplit), or NULL */
	uint16_t *amx_split;
	size_t split_bytes;
};

air_status kgemm_pack_b(int64_t K, int64_t N, const float *B, int64_t rs_b, int64_t cs_b,
			kgemm_packed_b **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "kgemm_pack_b: out is NULL");
	*out = NULL;
	if (K < 0 || N < 0)
		return air_error(AIR_INVALID_ARGUMENT, "kgemm_pack_b: negative size K=%lld N=%lld",
				 (long long)K, (long long)N);
	if (!B && K > 0 && N > 0)
		return air_error(AIR_INVALID_ARGUMENT, "kgemm_pack_b: B is NULL");
	const kgemm_ukernel_desc *uk = kgemm_ukernel();
	size_t nfloats = 0;
	if (K > 0 && N > 0) {
		if ((uint64_t)K > (SIZE_MAX / sizeof(float)) / ((uint64_t)N + uk->nr))
			return air_error(AIR_INVALID_ARGUMENT, "kgemm_pack_b: %lld x %lld is too large",
					 (long long)K, (long long)N);
		nfloats = kgemm_packed_floats(K, N, uk->nr);
	}
	kgemm_packed_b *p = calloc(1, sizeof *p);
	if (!p)
		return air_error(AIR_OUT_OF_MEMORY, "kgemm_pack_b: no memory");
	p->K = K;
	p->N = N;
	p->nr = uk->nr;
	p->bytes = kgemm_align(nfloats * sizeof(float));
	if (nfloats) {
		p->data = rt_big_alloc(p->bytes, KGEMM_ALIGN);
		if (!p->data) {
			size_t bytes = p->bytes;
			free(p);
			return air_error(AIR_OUT_OF_MEMORY, "kgemm_pack_b: no memory for %zu bytes", bytes);
		}
		kgemm_pack_b_panels(K, N, 0, K, B, rs_b, cs_b, NULL, uk->nr, 0, N, p->data);
		kgemm_packed_b_check_range(p);
	}
	*out = p;
	return AIR_OK;
}

air_status kgemm_packed_b_presplit(kgemm_packed_b *p)
{
	if (!p || !p->amx_ok || p->amx_split || p->K <= 0 || p->N <= 0)
		return AIR_OK;
	const int64_t npanels = k_cdiv(p->N, p->nr);
	const size_t bytes = kgemm_align((size_t)npanels * kamx_presplit_panel_u16(p->K) * sizeof(uint16_t));
	uint16_t *split = rt_big_alloc(bytes, KGEMM_ALIGN);
	if (!split)
		return air_error(AIR_OUT_OF_MEMORY, "kgemm_packed_b_presplit: no memory for %zu bytes", bytes);
	kamx_presplit_b(p->data, p->K, npanels, split);
	p->amx_split = split;
	p->split_bytes = bytes;
	return AIR_OK;
}

void kgemm_packed_b_free(kgemm_packed_b *packed)
{
	if (!packed)
		return;
	free(packed->data);
	free(packed->amx_split);
	free(packed);
}

size_t kgemm_packed_b_size(int64_t K, int64_t N)
{
	size_t floats = K > 0 && N > 0 ? kgemm_packed_floats(K, N, kgemm_ukernel()->nr) : 0;
	return kgemm_align(sizeof(kgemm_packed_b)) + kgemm_align(floats * sizeof(float));
}

kgemm_packed_b *kgemm_packed_b_init(void *mem, int64_t K, int64_t N)
{
	kgemm_packed_b *p = mem;
	p->K = K;
	p->N = N;
	p->nr = kgemm_ukernel()->nr;
	p->bytes = kgemm_packed_b_size(K, N) - kgemm_align(sizeof *p);
	p->data = (float *)((char *)mem + kgemm_align(sizeof *p));
	p->amx_ok = 0; /* filled by the caller: never checked */
	p->amx_split = NULL;
	p->split_bytes = 0;
	return p;
}

void kgemm_packed_b_check_range(kgemm_packed_b *p)
{
	const kgemm_ukernel_desc *uk = kgemm_ukernel();
	p->amx_ok = p->K > 0 && p->N > 0 && kamx_available() && uk->nr == KAMX_PANEL &&
		    kamx_in_range(p->data, kgemm_packed_floats(p->K, p->N, p->nr));
}

void kgemm_pack_b_block(kgemm_packed_b *p, int64_t p0, int64_t rows, int64_t j0, int64_t j1, const float *B,
			int64_t rs_b, int64_t cs_b, const double *scale)
{
	if (rows <= 0 || j1 <= j0)
		return;
	kgemm_pack_b_panels(p->K, p->N, p0, p0 + rows, B, rs_b, cs_b, scale, p->nr, j0, j1, p->data);
}

float *kgemm_packed_b_panel(kgemm_packed_b *p, int64_t j)
{
	return p->data + (j / p->nr) * p->K * p->nr;
}

size_t kgemm_packed_b_bytes(const kgemm_packed_b *packed)
{
	return packed ? sizeof *packed + packed->bytes + packed->split_bytes : 0;
}

/* ---- plan and workspace ------------------------------------------------- */

typedef struct kgemm_plan {
	int64_t nc, kc; /* block sizes: nc a multiple of nr (rows: kgemm_rows) */
	int64_t nm, nn; /* blocks per matrix */
} kgemm_plan;

/* Splits one matrix (of batch) into tasks. One thread: blocks of the cache
 * sizes. More: keep splitting (the longer side of a task, so tasks stay
 * square-ish and the A packing and B streaming per task stay small next to
 * its arithmetic) until there are a few tasks per thread to balance. */
static kgemm_plan kgemm_make_plan(const kgemm_ukernel_desc *uk, int64_t batch, int64_t M, int64_t N,
				  int64_t K, int nthreads)
{
	kgemm_plan p;
	/* K is blocked so that a B micro-panel stays in L1 while it is used by
	 * every micro-tile row of the block; with one row (GEMV-like) nothing
	 * reuses it, and one long stream per panel is better for the prefetcher */
	int64_t kb = M <= uk->mr ? 1 : k_cdiv(K, uk->kc);
	p.kc = kb ? k_cdiv(K, kb) : 0;
	int64_t nm = k_cdiv(M, uk->mc), nn = k_cdiv(N, uk->nc);
	int64_t mtiles = k_cdiv(M, uk->mr), ntiles = k_cdiv(N, uk->nr);
	/* tasks per thread: 4 balance uneven ones; but when one row block
	 * holds all of M, every task reads all of A, and 2 per thread ran
	 * BERT-base's M = 128 linears in 77.5-78.5 ms per run instead of
	 * 83.5-85.2 (1024^3, several row blocks, lost 7% with 2) */
	int64_t want = 1;
	if (nthreads > 1 && (double)batch * M * N * K >= KGEMM_PARALLEL_MIN_MACS)
		want = (batch == 1 && nm == 1 ? 2 : 4) * (int64_t)nthreads;
	while (batch * nm * nn < want) {
		int can_m = nm < mtiles, can_n = nn < ntiles;
		if (!can_m && !can_n)
			break;
		if (can_n && (!can_m || k_cdiv(N, nn) >= k_cdiv(M, nm)))
			nn++;
		else
			nm++;
	}
	/* As many tasks as threads or a multiple, of as many row tiles each
	 * as can be (kgemm_rows): 1500 x 256 @ 256 x 256 on 2 threads came out
	 * at 9 row blocks, 8 of 14 tiles and one of 13, and one thread did 70
	 * tiles while the other did 55 (0.92x MKL with 2 threads, 1.07x with
	 * one). */
	if (want > 1)
		while ((batch * nm * nn) % nthreads != 0 && nm < mtiles)
			nm++;
	p.nm = nm;
	p.nc = k_cdiv(k_cdiv(N, nn), uk->nr) * uk->nr;
	p.nn = k_cdiv(N, p.nc);
	return p;
}

/* Rows [*m0, *m1) of row block im of the plan: the M / mr row tiles split
 * as evenly as whole tiles allow. */
static void kgemm_rows(const kgemm_plan *p, int64_t M, int mr, int64_t im, int64_t *m0, int64_t *m1)
{
	const int64_t tiles = k_cdiv(M, mr);
	*m0 = im * tiles / p->nm * mr;
	*m1 = k_min64(M, (im + 1) * tiles / p->nm * mr);
}

/* Bytes of one thread's A block: an upper bound of mc * kc over all plans. */
static size_t kgemm_slot_bytes(const kgemm_ukernel_desc *uk, int64_t M, int64_t K)
{
	int64_t mc = k_min64(k_cdiv(M, uk->mr), k_cdiv(uk->mc, uk->mr)) * uk->mr;
	int64_t kc = M <= uk->mr ? K : k_min64(K, uk->kc);
	return kgemm_align((size_t)mc * (size_t)kc * sizeof(float));
}

/* Bytes of one micro-panel of B a thread packs as it goes. */
static size_t kgemm_panel_bytes(const kgemm_ukernel_desc *uk, int64_t M, int64_t K)
{
	int64_t kc = M <= uk->mr ? K : k_min64(K, uk->kc);
	return kgemm_align((size_t)kc * (size_t)uk->nr * sizeof(float));
}

static int kgemm_empty(int64_t M, int64_t N, int64_t K)
{
	return M <= 0 || N <= 0 || K <= 0;
}

/* The per-thread A blocks of the f32 kernels. */
static size_t kgemm_slots_workspace_bytes(int64_t M, int64_t N, int64_t K, int nthreads)
{
	if (kgemm_empty(M, N, K))
		return 0;
	if (nthreads < 1)
		nthreads = 1;
	return (size_t)nthreads * kgemm_slot_bytes(kgemm_ukernel(), M, K);
}

size_t kgemm_packed_workspace_bytes(int64_t M, int64_t N, int64_t K, int nthreads)
{
	size_t f32 = kgemm_slots_workspace_bytes(M, N, K, nthreads);
	size_t amx = kgemm_empty(M, N, K) ? 0 : kamx_workspace_bytes(M, N, K, nthreads);
	return amx > f32 ? amx : f32;
}

/* kgemm_f32's workspace for row-major A: room for either way of running B. */
static size_t kgemm_base_workspace_bytes(const kgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K,
					 int nthreads)
{
	return kgemm_align(kgemm_packed_floats(K, N, uk->nr) * sizeof(float)) +
	       kgemm_slots_workspace_bytes(M, N, K, nthreads) + (size_t)nthreads * kgemm_panel_bytes(uk, M, K);
}

/* Bytes of all of A packed once (kgemm_pack_a_whole). */
static size_t kgemm_whole_a_bytes(const kgemm_ukernel_desc *uk, int64_t M, int64_t K)
{
	return kgemm_align((size_t)k_cdiv(M, uk->mr) * (size_t)uk->mr * (size_t)K * sizeof(float));
}

size_t kgemm_workspace_bytes(int64_t M, int64_t N, int64_t K, int64_t cs_a, int nthreads)
{
	if (kgemm_empty(M, N, K))
		return 0;
	const kgemm_ukernel_desc *uk = kgemm_ukernel();
	if (nthreads < 1)
		nthreads = 1;
	size_t bytes = kgemm_base_workspace_bytes(uk, M, N, K, nthreads);
	if (cs_a != 1)
		bytes += kgemm_whole_a_bytes(uk, M, K);
	/* enough for kgemm_f32_packed too (gemm.h) */
	size_t amx = kamx_workspace_bytes(M, N, K, nthreads);
	return amx > bytes ? amx : bytes;
}

/* Batch items whose packed B fit in one round of the batched call. */
static int64_t kgemm_batch_chunk(int64_t batch, int64_t N, int64_t K)
{
	size_t item = kgemm_align(kgemm_packed_floats(K, N, kgemm_ukernel()->nr) * sizeof(float));
	int64_t chunk = (int64_t)(KGEMM_BATCH_PACK_BYTES / item);
	return chunk < 1 ? 1 : (chunk > batch ? batch : chunk);
}

size_t kgemm_batched_workspace_bytes(int64_t batch, int64_t M, int64_t N, int64_t K, int nthreads)
{
	if (batch <= 0 || kgemm_empty(M, N, K))
		return 0;
	size_t item = kgemm_align(kgemm_packed_floats(K, N, kgemm_ukernel()->nr) * sizeof(float));
	return (size_t)kgemm_batch_chunk(batch, N, K) * item + kgemm_slots_workspace_bytes(M, N, K, nthreads);
}

/* ---- the parallel loops ------------------------------------------------- */

typedef struct kgemm_job {
	const kgemm_ukernel_desc *uk;
	int64_t M, N, K;
	const float *A;
	int64_t bs_a, rs_a, cs_a;
	const float *Bp; /* packed B of item b at Bp + b * bs_bp */
	int64_t bs_bp;
	float *C;
	int64_t bs_c, ldc;
	const k_epilogue *ep;
	kgemm_plan plan;
	char *slots; /* per-thread A blocks */
	size_t slot_bytes;
	int direct_a; /* A is read in place (row-major), not packed */
	/* B not packed beforehand (Bp unused): row-major, rows ldb apart. A
	 * task's first row tile reads each micro-panel in place and stores it
	 * packed, at panel_at in the thread's slot, for the tiles below it */
	const float *Bsrc;
	int64_t ldb;
	size_t panel_at;
	int64_t ntasks; /* the last one prefetches ep->next_b */
	/* all of A packed once (kgemm_share_a), K block pc at a_whole + pc *
	 * (M rounded up to mr), or NULL: each task packs its own block */
	const float *a_whole;
} kgemm_job;

static void kgemm_task(void *ctx, int64_t t, int thread)
{
	const kgemm_job *j = ctx;
	const kgemm_ukernel_desc *uk = j->uk;
	const int mr = uk->mr, nr = uk->nr;
	const int64_t per = j->plan.nm * j->plan.nn;
	const int64_t b = t / per, r = t % per, jn = r / j->plan.nm;
	int64_t m0, m1;
	kgemm_rows(&j->plan, j->M, mr, r % j->plan.nm, &m0, &m1);
	const int64_t n0 = jn * j->plan.nc, n1 = k_min64(j->N, n0 + j->plan.nc);
	const int64_t K = j->K, ldc = j->ldc;
	const float *A = j->A + b * j->bs_a;
	const float *Bp = j->Bp + b * j->bs_bp;
	float *C = j->C + b * j->bs_c;
	const k_epilogue *ep = j->ep;
	const float *res = ep->residual ? ep->residual + b * j->bs_c : NULL;
	float *abuf = j->slots ? (float *)(j->slots + (size_t)thread * j->slot_bytes) : NULL;
	float stack_panel[KGEMM_STACK_PANEL_FLOATS] __attribute__((aligned(64)));
	float *bpanel = j->slots ? (float *)(j->slots + (size_t)thread * j->slot_bytes + j->panel_at) : stack_panel;

	kgemm_tile_ep te = {0};
	te.alpha = ep->alpha;
	te.act = ep->act;
	te.ld_res = ep->ld_residual;
	const int64_t npanels = k_cdiv(n1 - n0, nr);
	for (int64_t pc = 0; pc < K; pc += j->plan.kc) {
		const int64_t kc = k_min64(j->plan.kc, K - pc);
		/* row-major A is read in place; anything else is packed */
		const float *ablk = A + m0 * j->rs_a + pc;
		int64_t rs = j->rs_a, cs = 1;
		if (j->a_whole) {
			ablk = j->a_whole + pc * k_cdiv(j->M, mr) * mr + m0 * kc;
			rs = 1;
			cs = mr;
		} else if (!j->direct_a) {
			kgemm_pack_a(uk, m1 - m0, kc, A + m0 * j->rs_a + pc * j->cs_a, j->rs_a, j->cs_a, abuf);
			ablk = abuf;
			rs = 1;
			cs = mr;
		}
		te.flags = (pc == 0 ? KGEMM_TILE_FIRST : 0) | (pc + kc == K ? KGEMM_TILE_LAST : 0);
		/* lines of a B micro-panel to prefetch per micro-tile: a later
		 * panel comes from L3 or memory while this one is in use */
		const int64_t plines = kc * nr / 16, tiles = k_cdiv(m1 - m0, mr);
		const int64_t pf_step = k_cdiv(plines, tiles);
		for (int64_t jj = n0; jj < n1; jj += nr) {
			const float *bp = j->Bsrc ? bpanel : Bp + (jj / nr) * K * nr + pc * nr;
			/* prefetched: the panel KGEMM_PF_PANELS ahead in this task's
			 * order (panels of a K block, then the next K block) */
			const int64_t q = (pc / j->plan.kc) * npanels + (jj - n0) / nr + KGEMM_PF_PANELS;
			const int64_t pc_next = (q / npanels) * j->plan.kc, jj_next = n0 + (q % npanels) * nr;
			/* (not when one tile covers the task's rows and the kernel
			 * prefetches: the whole panel would go in a burst, and the
			 * hardware prefetchers alone ran M = 1 and M = 4 against a
			 * 2048x1000 weight 1.15-1.4x as fast, hot or cold) */
			const int burst_only = uk->tile_prefetch && m1 - m0 <= mr;
			const char *next = NULL;
			if (pc_next < K && !burst_only && !j->Bsrc) {
				next = (const char *)(Bp + (jj_next / nr) * K * nr + pc_next * nr);
			} else if (ep->next_b && !burst_only && t == j->ntasks - 1) {
				/* past the last panel: the caller's next B, panel by panel */
				const int64_t at = (q - k_cdiv(K, j->plan.kc) * npanels) * plines * 64;
				next = at < ep->next_b_bytes ? (const char *)ep->next_b + at : NULL;
			}
			const int n = (int)k_min64(nr, n1 - jj);
			te.bias_n = ep->bias_n ? ep->bias_n + jj : NULL;
			int64_t pf = 0;
			for (int64_t ii = m0; ii < m1; ii += mr) {
				const int m = (int)k_min64(mr, m1 - ii);
				te.pf_lines = 0;
				if (next) {
					const int64_t e = k_min64(plines, pf + pf_step);
					/* spread over a full tile's k steps where the
					 * kernel can (gemm_internal.h); else now */
					if (uk->tile_prefetch && m == mr && n > nr / 2 && 2 * (e - pf) <= kc) {
						te.pf = next + pf * 64;
						te.pf_lines = (int)(e - pf);
						pf = e;
					}
					for (; pf < e; pf++)
						__builtin_prefetch(next + pf * 64, 0, 2);
				}
				te.bias_m = ep->bias_m ? ep->bias_m + ii : NULL;
				te.res = res ? res + ii * te.ld_res + jj : NULL;
				/* a packed panel holds mr rows: (ii - m0) * kc = panel * mr * kc */
				const float *a = j->direct_a ? ablk + (ii - m0) * rs : ablk + (ii - m0) * kc;
				if (j->Bsrc && ii == m0) {
					te.bcopy = bpanel;
					uk->strided(kc, a, rs, cs, j->Bsrc + pc * j->ldb + jj, j->ldb, C + ii * ldc + jj,
						    ldc, m, n, &te);
					te.bcopy = NULL;
					continue;
				}
				uk->fn(kc, a, rs, cs, bp, C + ii * ldc + jj, ldc, m, n, &te);
			}
		}
	}
}

typedef struct kgemm_pack_job {
	int64_t K, N;
	const float *B;
	int64_t bs_b, rs_b, cs_b;
	float *dst;
	int64_t bs_dst;
	int nr;
	int64_t per_item, cols; /* tasks per item, columns per task */
} kgemm_pack_job;

static void kgemm_pack_task(void *ctx, int64_t t, int thread)
{
	const kgemm_pack_job *p = ctx;
	int64_t b = t / p->per_item, j0 = (t % p->per_item) * p->cols;
	kgemm_pack_b_panels(p->K, p->N, 0, p->K, p->B + b * p->bs_b + j0 * p->cs_b, p->rs_b, p->cs_b, NULL, p->nr, j0,
			    k_min64(p->N, j0 + p->cols), p->dst + b * p->bs_dst);
}

/* Packs B of `batch` items into dst (item stride bs_dst floats) in parallel. */
static void kgemm_pack_b_parallel(int64_t batch, int64_t K, int64_t N, const float *B, int64_t bs_b,
				  int64_t rs_b, int64_t cs_b, int nr, float *dst, int64_t bs_dst,
				  rt_pool *pool)
{
	kgemm_pack_job p = {K, N, B, bs_b, rs_b, cs_b, dst, bs_dst, nr, 0, 0};
	/* ~64 KiB of packed panels per task */
	int64_t panels = k_cdiv(N, nr), per_task = (16384 + K * nr - 1) / (K * nr);
	if (per_task > panels)
		per_task = panels;
	p.cols = per_task * nr;
	p.per_item = k_cdiv(panels, per_task);
	rt_pool_run(pool, batch * p.per_item, kgemm_pack_task, &p);
}

/* C = epilogue(0): what a product over K == 0 leaves. */
static void kgemm_epilogue_only(int64_t M, int64_t N, float *C, int64_t ldc, const k_epilogue *ep,
				const float *res)
{
	for (int64_t i = 0; i < M; i++) {
		for (int64_t jj = 0; jj < N; jj++) {
			float v = 0.0f;
			if (ep->bias_n)
				v += ep->bias_n[jj];
			if (ep->bias_m)
				v += ep->bias_m[i];
			if (res)
				v += res[i * ep->ld_residual + jj];
			C[i * ldc + jj] = kgemm_act_simple_f32(v, ep->act);
		}
	}
	if (kgemm_act_is_transcendental(ep->act))
		kgemm_act_tile(C, ldc, M, N, ep->act);
}

/* Row-major A is read in place, unless the kernel packs it fast (pack_a)
 * and each task's block of A feeds enough B micro-panels to repay packing
 * it. Read in place, the mr rows a tile broadcasts from are mr streams,
 * which share L1 sets when lda is a multiple of 1-4 KiB; packed, they are
 * one. Measured with 2 threads against the in-place reads, interleaved
 * (tasks' width in brackets): 1024^3 +5% (512), 1536^3 +8% (768), 2048^3
 * +10-12% (1024), 128x768 @ 768x2304 +7% (576), 512^3 +2-4% (256), a
 * 3136x64 @ 64x256 1x1 convolution +3% (256); tasks 192 columns wide or
 * less (BERT's 768-wide linears, ViT-Tiny's, 128-channel convolutions)
 * lost 3-13%, so those keep reading A in place. Since the AVX-512 tile
 * over A in place that prefetches got a loop without spills
 * (gemm_avx512.c, inplace_sums), 256-wide tasks read in place too: 512^3
 * went from 0.968-0.977x to 1.013-1.029x MKL (model.run against torch.mm,
 * builds alternated); 256^3, 1024^3 and 128x768 @ 768x3072 did not move,
 * nor did ResNet-50 b1 or GPT-2. With 1024, 128x768 @ 768x3072 (768-wide
 * tasks) lost 2%. */
enum { KGEMM_PACK_A_MIN_COLS = 512 };

static int kgemm_reads_a_in_place(const kgemm_ukernel_desc *uk, const kgemm_plan *plan, int64_t cs_a,
				  const char *slots)
{
	/* no slots: kgemm_f32_b_in_place, which has no workspace to pack into */
	return cs_a == 1 && (!slots || !(uk->pack_a && plan->nc >= KGEMM_PACK_A_MIN_COLS));
}

typedef struct kgemm_pack_a_job {
	const kgemm_ukernel_desc *uk;
	int64_t M, K, kc;
	const float *A;
	int64_t rs_a, cs_a;
	float *dst;
	int64_t rows; /* per task: a multiple of mr */
	int64_t chunks; /* tasks per K block */
} kgemm_pack_a_job;

static void kgemm_pack_a_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const kgemm_pack_a_job *p = ctx;
	const int64_t pc = (t / p->chunks) * p->kc, kc = k_min64(p->kc, p->K - pc);
	const int64_t i0 = (t % p->chunks) * p->rows, i1 = k_min64(p->M, i0 + p->rows);
	const int64_t mpad = k_cdiv(p->M, p->uk->mr) * p->uk->mr;
	kgemm_pack_a(p->uk, i1 - i0, kc, p->A + i0 * p->rs_a + pc * p->cs_a, p->rs_a, p->cs_a,
		     p->dst + pc * mpad + i0 * kc);
}

/* A that is not row-major is packed by the task that reads it; when
 * several tasks share its rows (the plan splits N), that is once per
 * column block, from strided reads that cost as much as the products
 * (ViT-Tiny's weight gradients, g^T @ x, 192 x 1576 @ 1576 x 768: A
 * packed by each of four column blocks took 24% of the time). Then all of
 * A is packed once into room (kgemm_whole_a_bytes), in parallel, K block
 * by K block in the tasks' layout, and the tasks read it there. Returns
 * the packed A, or NULL to leave the packing to the tasks. */
static const float *kgemm_share_a(const kgemm_ukernel_desc *uk, const kgemm_plan *plan, int64_t M, int64_t K,
				  const float *A, int64_t rs_a, int64_t cs_a, float *room, rt_pool *pool)
{
	if (!room || cs_a == 1 || plan->nn < 2)
		return NULL;
	const int64_t kblocks = k_cdiv(K, plan->kc), tiles = k_cdiv(M, uk->mr);
	/* a few tasks per thread, of whole row tiles */
	const int64_t chunks = k_min64(tiles, k_cdiv(4 * (int64_t)rt_pool_size(pool), kblocks));
	kgemm_pack_a_job p = {uk, M, K, plan->kc, A, rs_a, cs_a, room, k_cdiv(tiles, chunks) * uk->mr, 0};
	p.chunks = k_cdiv(M, p.rows);
	rt_pool_run(pool, kblocks * p.chunks, kgemm_pack_a_task, &p);
	return room;
}

static void kgemm_run(const kgemm_ukernel_desc *uk, int64_t batch, int64_t M, int64_t N, int64_t K,
		      const float *A, int64_t bs_a, int64_t rs_a, int64_t cs_a, const float *Bp,
		      int64_t bs_bp, float *C, int64_t bs_c, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
		      char *slots, float *a_room)
{
	kgemm_plan plan = kgemm_make_plan(uk, batch, M, N, K, rt_pool_size(pool));
	kgemm_job j = {uk, M, N, K, A, bs_a, rs_a, cs_a, Bp, bs_bp, C, bs_c, ldc, ep,
		       plan, slots, kgemm_slot_bytes(uk, M, K),
		       kgemm_reads_a_in_place(uk, &plan, cs_a, slots), NULL, 0, 0, batch * plan.nm * plan.nn,
		       batch == 1 ? kgemm_share_a(uk, &plan, M, K, A, rs_a, cs_a, a_room, pool) : NULL};
	rt_pool_run(pool, batch * j.plan.nm * j.plan.nn, kgemm_task, &j);
}

/* kgemm_run with a row-major B not packed beforehand (kgemm_job.Bsrc): a
 * separate packing pass read all of B from memory and wrote it back before
 * any product started; here each panel is packed by the tile that first
 * reads it, while it computes. */
static void kgemm_run_b_source(const kgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, const float *A,
			       int64_t rs_a, int64_t cs_a, const float *B, int64_t ldb, float *C, int64_t ldc,
			       const k_epilogue *ep, rt_pool *pool, char *slots, float *a_room)
{
	kgemm_plan plan = kgemm_make_plan(uk, 1, M, N, K, rt_pool_size(pool));
	size_t a_bytes = kgemm_slot_bytes(uk, M, K);
	kgemm_job j = {uk, M, N, K, A, 0, rs_a, cs_a, NULL, 0, C, 0, ldc, ep,
		       plan, slots, a_bytes + kgemm_panel_bytes(uk, M, K),
		       kgemm_reads_a_in_place(uk, &plan, cs_a, slots), B, ldb, a_bytes, plan.nm * plan.nn,
		       kgemm_share_a(uk, &plan, M, K, A, rs_a, cs_a, a_room, pool)};
	rt_pool_run(pool, j.plan.nm * j.plan.nn, kgemm_task, &j);
}

/* Handles the degenerate sizes; returns 1 if nothing is left to do. */
static int kgemm_trivial(int64_t batch, int64_t M, int64_t N, int64_t K, float *C, int64_t bs_c,
			 int64_t ldc, const k_epilogue *ep)
{
	if (batch <= 0 || M <= 0 || N <= 0)
		return 1;
	if (K > 0)
		return 0;
	for (int64_t b = 0; b < batch; b++)
		kgemm_epilogue_only(M, N, C + b * bs_c, ldc, ep, ep->residual ? ep->residual + b * bs_c : NULL);
	return 1;
}

static const k_epilogue *kgemm_ep_or_none(const k_epilogue *ep, k_epilogue *none)
{
	if (ep)
		return ep;
	*none = k_epilogue_none();
	return none;
}

/* ---- thin products: B read in place ------------------------------------ */

/* Up to this many rows, kgemm_f32 does not pack B: each B element is used
 * M times only, so copying it costs as much as using it (M = 1 ran at half
 * the speed of the packed product). */
enum { KGEMM_THIN_M = 16 };

typedef struct kgemm_thin_job {
	const kgemm_ukernel_desc *uk;
	int64_t M, N, K;
	const float *A;
	int64_t rs_a, cs_a;
	const float *B;
	int64_t rs_b, cs_b;
	float *C;
	int64_t ldc;
	const k_epilogue *ep;
	int use_dot;
	int64_t cols;     /* columns per task */
	const float *Ap; /* A packed in mr-row panels, or NULL */
} kgemm_thin_job;

static void kgemm_thin_task(void *ctx, int64_t t, int thread)
{
	const kgemm_thin_job *j = ctx;
	const kgemm_ukernel_desc *uk = j->uk;
	const k_epilogue *ep = j->ep;
	const int64_t j0 = t * j->cols, j1 = k_min64(j->N, j0 + j->cols);
	const int mr = j->use_dot ? uk->dot_mr : uk->mr, nr = j->use_dot ? uk->dot_nr : uk->nr;
	kgemm_tile_ep te = {0};
	te.alpha = ep->alpha;
	te.act = ep->act;
	te.ld_res = ep->ld_residual;
	te.flags = KGEMM_TILE_FIRST | KGEMM_TILE_LAST;
	for (int64_t jj = j0; jj < j1; jj += nr) {
		const int n = (int)k_min64(nr, j1 - jj);
		te.bias_n = ep->bias_n ? ep->bias_n + jj : NULL;
		for (int64_t ii = 0; ii < j->M; ii += mr) {
			const int m = (int)k_min64(mr, j->M - ii);
			te.bias_m = ep->bias_m ? ep->bias_m + ii : NULL;
			te.res = ep->residual ? ep->residual + ii * te.ld_res + jj : NULL;
			const float *a = j->A + ii * j->rs_a;
			float *c = j->C + ii * j->ldc + jj;
			if (j->use_dot)
				uk->dot(j->K, a, j->rs_a, j->B + jj * j->cs_b, j->cs_b, c, j->ldc, m, n, &te);
			else if (j->Ap)
				uk->strided(j->K, j->Ap + ii * j->K, 1, mr, j->B + jj, j->rs_b, c, j->ldc, m, n, &te);
			else
				uk->strided(j->K, a, j->rs_a, j->cs_a, j->B + jj, j->rs_b, c, j->ldc, m, n, &te);
		}
	}
}

/* C = epilogue(A @ B) for M <= KGEMM_THIN_M with B read where it is: rows of
 * B along N (cs_b == 1) go to the strided micro-kernel, rows along K
 * (rs_b == 1, a [N x K] weight) to the dot kernel. Returns 0 (nothing done)
 * when neither fits. */
static int kgemm_thin(const kgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, const float *A,
		      int64_t rs_a, int64_t cs_a, const float *B, int64_t rs_b, int64_t cs_b, float *C,
		      int64_t ldc, const k_epilogue *ep, rt_pool *pool, float *workspace)
{
	if (M > KGEMM_THIN_M)
		return 0;
	kgemm_thin_job j = {uk, M, N, K, A, rs_a, cs_a, B, rs_b, cs_b, C, ldc, ep, 0, 0, NULL};
	if (cs_b == 1 && uk->strided) {
		j.use_dot = 0;
		/* rows of A read in place are up to mr streams that may share an L1
		 * set (lda a multiple of 4 KiB); packed, they are one. The panels
		 * (at most 2 * mr <= nr rows of K) fit where kgemm_f32 packs B. */
		if (M > 1 || cs_a != 1) {
			kgemm_pack_a(uk, M, K, A, rs_a, cs_a, workspace);
			j.Ap = workspace;
		}
	} else if (rs_b == 1 && cs_a == 1 && uk->dot) {
		j.use_dot = 1;
	} else {
		return 0;
	}
	const int nr = j.use_dot ? uk->dot_nr : uk->nr;
	int64_t ntasks = 1, nthreads = rt_pool_size(pool);
	if (nthreads > 1 && (double)M * N * K >= KGEMM_PARALLEL_MIN_MACS)
		ntasks = k_min64(4 * nthreads, k_cdiv(N, nr));
	j.cols = k_cdiv(k_cdiv(N, ntasks), nr) * nr;
	rt_pool_run(pool, k_cdiv(N, j.cols), kgemm_thin_task, &j);
	return 1;
}

/* ---- B read in place, one thread ---------------------------------------- */

int kgemm_b_in_place_available(void)
{
	return kgemm_ukernel()->strided != NULL;
}

/* One block of rows and columns, on the calling thread: K in blocks of
 * the kernel's kc, each B micro-panel (kc x nr, from rows ldb apart) used
 * by every row tile of the block while it is in L1/L2. */
static void kgemm_b_in_place_block(const kgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, const float *A,
				   int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, const k_epilogue *ep)
{
	const int mr = uk->mr, nr = uk->nr;
	kgemm_tile_ep te = {0};
	te.alpha = ep->alpha;
	te.act = ep->act;
	te.ld_res = ep->ld_residual;
	const int64_t kb = k_cdiv(K, uk->kc), kc_max = k_cdiv(K, kb);
	for (int64_t pc = 0; pc < K; pc += kc_max) {
		const int64_t kc = k_min64(kc_max, K - pc);
		te.flags = (pc == 0 ? KGEMM_TILE_FIRST : 0) | (pc + kc == K ? KGEMM_TILE_LAST : 0);
		for (int64_t jj = 0; jj < N; jj += nr) {
			const int n = (int)k_min64(nr, N - jj);
			te.bias_n = ep->bias_n ? ep->bias_n + jj : NULL;
			for (int64_t ii = 0; ii < M; ii += mr) {
				te.bias_m = ep->bias_m ? ep->bias_m + ii : NULL;
				te.res = ep->residual ? ep->residual + ii * te.ld_res + jj : NULL;
				uk->strided(kc, A + ii * lda + pc, lda, 1, B + pc * ldb + jj, ldb, C + ii * ldc + jj, ldc,
					    (int)k_min64(mr, M - ii), n, &te);
			}
		}
	}
}

typedef struct kgemm_bip_job {
	const kgemm_ukernel_desc *uk;
	int64_t M, N, K;
	const float *A;
	int64_t lda;
	const float *B;
	int64_t ldb;
	float *C;
	int64_t ldc;
	const k_epilogue *ep;
	kgemm_plan plan;
} kgemm_bip_job;

static void kgemm_bip_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const kgemm_bip_job *j = ctx;
	const int64_t jn = t / j->plan.nm;
	int64_t m0, m1;
	kgemm_rows(&j->plan, j->M, j->uk->mr, t % j->plan.nm, &m0, &m1);
	const int64_t n0 = jn * j->plan.nc, n1 = k_min64(j->N, n0 + j->plan.nc);
	if (m0 >= m1 || n0 >= n1)
		return;
	k_epilogue ep = *j->ep;
	ep.bias_m = ep.bias_m ? ep.bias_m + m0 : NULL;
	ep.bias_n = ep.bias_n ? ep.bias_n + n0 : NULL;
	ep.residual = ep.residual ? ep.residual + m0 * ep.ld_residual + n0 : NULL;
	kgemm_b_in_place_block(j->uk, m1 - m0, n1 - n0, j->K, j->A + m0 * j->lda, j->lda, j->B + n0, j->ldb,
			       j->C + m0 * j->ldc + n0, j->ldc, &ep);
}

int kgemm_f32_b_in_place(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
			 float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool)
{
	const kgemm_ukernel_desc *uk = kgemm_ukernel();
	if (!uk->strided)
		return 0;
	k_epilogue none;
	ep = kgemm_ep_or_none(ep, &none);
	if (kgemm_trivial(1, M, N, K, C, 0, ldc, ep))
		return 1;
	/* A kernel that packs the panels it reads is faster still, with the
	 * panels on the stack (A is read in place: no other workspace). ResNet
	 * 1x1 convs as NCHW GEMMs (ab harness, 2 threads, interleaved): 64x3136x64
	 * 284 -> 322 GFLOP/s, 128x3136x256 329 -> 392, 256x196x1024 296 -> 349;
	 * 1 thread +20-22% */
	if (uk->strided_packs_b && M > uk->mr && (int64_t)uk->kc * uk->nr <= KGEMM_STACK_PANEL_FLOATS) {
		kgemm_run_b_source(uk, M, N, K, A, lda, 1, B, ldb, C, ldc, ep, pool, NULL, NULL);
		return 1;
	}
	kgemm_bip_job j = {uk, M, N, K, A, lda, B, ldb, C, ldc, ep, kgemm_make_plan(uk, 1, M, N, K, rt_pool_size(pool))};
	rt_pool_run(pool, j.plan.nm * j.plan.nn, kgemm_bip_task, &j);
	return 1;
}

/* ---- entry points -------------------------------------------------------- */

void kgemm_f32_packed(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a,
		      const kgemm_packed_b *B, float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
		      void *workspace)
{
	kgemm_f32_packed_cols(M, N, K, A, rs_a, cs_a, B, 0, C, ldc, ep, pool, workspace);
}

void kgemm_f32_packed_cols(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a,
			   const kgemm_packed_b *B, int64_t j0, float *C, int64_t ldc, const k_epilogue *ep,
			   rt_pool *pool, void *workspace)
{
	k_epilogue none;
	ep = kgemm_ep_or_none(ep, &none);
	if (kgemm_trivial(1, M, N, K, C, 0, ldc, ep))
		return;
	/* packed->nr is the selected kernel's: both come from kgemm_ukernel(),
	 * chosen once per process */
	const kgemm_ukernel_desc *uk = kgemm_ukernel();
	if (B->nr != uk->nr) /* unreachable; never read panels of another width */
		return;
	if (j0 % uk->nr != 0 || j0 + N > k_cdiv(B->N, uk->nr) * uk->nr || K != B->K)
		return; /* unreachable for callers that keep the contract */
	const float *panels = B->data + (j0 / uk->nr) * K * uk->nr;
	/* rows the AMX path leaves (A out of its range: done < M) go to the
	 * f32 kernels, with the epilogue's per-row operands moved on */
	int64_t done = 0;
	if (B->amx_ok && cs_a == 1 && kamx_wanted(M, N, K))
		done = B->amx_split ? kamx_gemm_presplit(M, N, K, A, rs_a,
							 B->amx_split + (j0 / uk->nr) * kamx_presplit_panel_u16(K), C,
							 ldc, ep, pool, workspace)
				    : kamx_gemm(M, N, K, A, rs_a, panels, C, ldc, ep, pool, workspace);
	if (done == M)
		return;
	k_epilogue rest = *ep;
	if (rest.residual)
		rest.residual += done * rest.ld_residual;
	if (rest.bias_m)
		rest.bias_m += done;
	kgemm_run(uk, 1, M - done, N, K, A + done * rs_a, 0, rs_a, cs_a, panels, 0, C + done * ldc, 0, ldc, &rest,
		  pool, workspace, NULL);
}

void kgemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a, const float *B,
	       int64_t rs_b, int64_t cs_b, float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
	       void *workspace)
{
	k_epilogue none;
	ep = kgemm_ep_or_none(ep, &none);
	if (kgemm_trivial(1, M, N, K, C, 0, ldc, ep))
		return;
	const kgemm_ukernel_desc *uk = kgemm_ukernel();
	if (kgemm_thin(uk, M, N, K, A, rs_a, cs_a, B, rs_b, cs_b, C, ldc, ep, pool, workspace))
		return;
	/* past the base workspace, room for all of A packed when it is not
	 * row-major (kgemm_workspace_bytes) */
	float *a_room = cs_a == 1 ? NULL
			: (float *)((char *)workspace + kgemm_base_workspace_bytes(uk, M, N, K, rt_pool_size(pool)));
	if (cs_b == 1 && uk->strided_packs_b) {
		kgemm_run_b_source(uk, M, N, K, A, rs_a, cs_a, B, rs_b, C, ldc, ep, pool, workspace, a_room);
		return;
	}
	float *Bp = workspace;
	char *slots = (char *)workspace + kgemm_align(kgemm_packed_floats(K, N, uk->nr) * sizeof(float));
	kgemm_pack_b_parallel(1, K, N, B, 0, rs_b, cs_b, uk->nr, Bp, 0, pool);
	kgemm_run(uk, 1, M, N, K, A, 0, rs_a, cs_a, Bp, 0, C, 0, ldc, ep, pool, slots, a_room);
}

void kgemm_f32_batched(int64_t batch, int64_t M, int64_t N, int64_t K, const float *A, int64_t bs_a,
		       int64_t rs_a, int64_t cs_a, const float *B, int64_t bs_b, int64_t rs_b, int64_t cs_b,
		       float *C, int64_t bs_c, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
		       void *workspace)
{
	k_epilogue none;
	ep = kgemm_ep_or_none(ep, &none);
	if (kgemm_trivial(batch, M, N, K, C, bs_c, ldc, ep))
		return;
	const kgemm_ukernel_desc *uk = kgemm_ukernel();
	const int64_t item = (int64_t)(kgemm_align(kgemm_packed_floats(K, N, uk->nr) * sizeof(float)) /
				       sizeof(float));
	const int64_t chunk = kgemm_batch_chunk(batch, N, K);
	float *Bp = workspace;
	char *slots = (char *)workspace + (size_t)chunk * (size_t)item * sizeof(float);
	for (int64_t b0 = 0; b0 < batch; b0 += chunk) {
		int64_t nb = k_min64(chunk, batch - b0);
		kgemm_pack_b_parallel(nb, K, N, B + b0 * bs_b, bs_b, rs_b, cs_b, uk->nr, Bp, item, pool);
		k_epilogue e = *ep;
		if (e.residual)
			e.residual += b0 * bs_c;
		kgemm_run(uk, nb, M, N, K, A + b0 * bs_a, bs_a, rs_a, cs_a, Bp, item, C + b0 * bs_c, bs_c, ldc,
			  &e, pool, slots, NULL);
	}
}

/* ---- the oracle ---------------------------------------------------------- */

void kgemm_f32_reference(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a,
			 const float *B, int64_t rs_b, int64_t cs_b, float *C, int64_t ldc,
			 const k_epilogue *ep)
{
	k_epilogue none;
	ep = kgemm_ep_or_none(ep, &none);
	for (int64_t i = 0; i < M; i++) {
		for (int64_t jj = 0; jj < N; jj++) {
			double s = 0.0;
			for (int64_t p = 0; p < K; p++)
				s += (double)A[i * rs_a + p * cs_a] * (double)B[p * rs_b + jj * cs_b];
			s *= ep->alpha;
			if (ep->bias_n)
				s += ep->bias_n[jj];
			if (ep->bias_m)
				s += ep->bias_m[i];
			/* read before C[i, jj] is written: the residual may alias C */
			if (ep->residual)
				s += ep->residual[i * ep->ld_residual + jj];
			kref_act_f64(&s, 1, ep->act);
			C[i * ldc + jj] = (float)s;
		}
	}
}
