/* ukernel.avx2.c - the AVX2+FMA GEMM micro-kernel: a 6x16 register tile
 * (12 accumulators, 2 B vectors, 1 broadcast = 15 of 16 YMM registers) with
 * the epilogue applied to the accumulators before they are stored.
 *
 * Tiles with fewer than 6 rows get their own instantiation (m is known at
 * compile time there), so a thin product such as M = 1 does 2 FMAs per k,
 * not 12. With few rows there are too few independent accumulators to hide
 * the FMA latency (4-5 cycles), so those variants keep two accumulator sets
 * (even and odd k) and add them at the end.
 *
 * The strided entry reads B in place, rows ldb apart (masked loads for a
 * last block narrower than 16): thin products, and 1x1 convolutions whose
 * pixels would otherwise be packed on every call (thin.c,
 * kgemm_f32_b_in_place). */
#include <immintrin.h>

#include "kernels/gemm/ukernel.h"
#include "kernels/vmath/vmath_avx2.h"

enum { MR = 6, NR = 16 };

/* Lanes [0, n) set, n in [0, 8]. */
static inline __m256i lane_mask(int n)
{
	static const int32_t ones_then_zeros[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
	return _mm256_loadu_si256((const __m256i *)(ones_then_zeros + 8 - n));
}

static inline __attribute__((always_inline)) void load16(const float *p, int full, __m256i m0, __m256i m1,
							 __m256 *v0, __m256 *v1)
{
	if (full) {
		*v0 = _mm256_loadu_ps(p);
		*v1 = _mm256_loadu_ps(p + 8);
	} else {
		/* masked lanes are not read, so a row that ends at a page is safe */
		*v0 = _mm256_maskload_ps(p, m0);
		*v1 = _mm256_maskload_ps(p + 8, m1);
	}
}

/* One k row of B: two vectors, or the first only (NV == 1; *v1 zero),
 * masked to n columns when MASKED. */
static inline __attribute__((always_inline)) void load_b(const float *p, const int NV, const int MASKED, __m256i m0,
							 __m256i m1, __m256 *v0, __m256 *v1)
{
	if (NV == 2) {
		load16(p, !MASKED, m0, m1, v0, v1);
		return;
	}
	*v0 = MASKED ? _mm256_maskload_ps(p, m0) : _mm256_loadu_ps(p);
	*v1 = _mm256_setzero_ps();
}

static inline __attribute__((always_inline)) __m256 act_simple(__m256 v, k_act act)
{
	const __m256 zero = _mm256_setzero_ps(), six = _mm256_set1_ps(6.0f);
	switch (act) {
	case K_ACT_RELU:
		return _mm256_max_ps(zero, v);
	case K_ACT_RELU6:
		return _mm256_min_ps(six, _mm256_max_ps(zero, v));
	case K_ACT_HARDSWISH: {
		__m256 t = _mm256_min_ps(six, _mm256_max_ps(zero, _mm256_add_ps(v, _mm256_set1_ps(3.0f))));
		return _mm256_mul_ps(v, _mm256_mul_ps(t, _mm256_set1_ps(1.0f / 6.0f)));
	}
	default:
		return v;
	}
}

static inline __m256 act_transcendental(__m256 v, k_act act)
{
	switch (act) {
	case K_ACT_GELU: return kv_gelu8(v);
	case K_ACT_GELU_TANH: return kv_gelu_tanh8(v);
	case K_ACT_SILU: return kv_silu8(v);
	case K_ACT_SIGMOID: return kv_sigmoid8(v);
	case K_ACT_TANH: return kv_tanh8(v);
	default: return v;
	}
}

/* The second pass for exp/erf/tanh-based activations over a tile that was
 * just stored (so it is in L1). Out of line: inlined into every row-count
 * variant, these long polynomials would only bloat the kernel. */
static __attribute__((noinline)) void act_tile(float *c, int64_t ldc, int m, int n, k_act act)
{
	const int full = n == NR;
	const __m256i m0 = lane_mask(n < 8 ? n : 8), m1 = lane_mask(n > 8 ? n - 8 : 0);
	for (int r = 0; r < m; r++) {
		float *cr = c + r * ldc;
		__m256 v0, v1;
		load16(cr, full, m0, m1, &v0, &v1);
		v0 = act_transcendental(v0, act);
		if (full) {
			_mm256_storeu_ps(cr, v0);
			_mm256_storeu_ps(cr + 8, act_transcendental(v1, act));
		} else {
			_mm256_maskstore_ps(cr, m0, v0);
			if (n > 8)
				_mm256_maskstore_ps(cr + 8, m1, act_transcendental(v1, act));
		}
	}
}

/* The tile body for a compile-time row count ROWS (1..6). SPLIT keeps a
 * second accumulator set for odd k. NV is the vectors per row: 1 for a
 * tile at most 8 columns wide (a last tile of N), which does half the FMAs
 * of a full one (49 pixels are 3 tiles and 1 column). */
static inline __attribute__((always_inline)) void tile(const int ROWS, const int SPLIT, const int BMASK,
						       const int NV, int64_t kc, int64_t nseg, int64_t seg_stride,
						       const float *a, int64_t rs_a, int64_t cs_a, const float *b,
						       int64_t ldb, float *c, int64_t ldc, int n,
						       const kgemm_tile_ep *ep)
{
	const __m256i bm0 = lane_mask(n < 8 ? n : 8), bm1 = lane_mask(n > 8 ? n - 8 : 0);
	__m256 acc[MR][2], odd[MR][2];
#pragma GCC unroll 6
	for (int r = 0; r < ROWS; r++) {
		acc[r][0] = acc[r][1] = _mm256_setzero_ps();
		odd[r][0] = odd[r][1] = _mm256_setzero_ps();
	}
	/* C (or the residual) is read once the sums are done; start it coming */
	{
		const int first = ep->flags & KGEMM_TILE_FIRST;
		const float *pc = first ? ep->res : c;
		int64_t ld = first ? ep->ld_res : ldc;
		if (pc) {
#pragma GCC unroll 6
			for (int r = 0; r < ROWS; r++) {
				_mm_prefetch((const char *)(pc + r * ld), _MM_HINT_T0);
				_mm_prefetch((const char *)(pc + r * ld + NR - 1), _MM_HINT_T0);
			}
		}
	}
	/* nseg blocks of kc along K, block s of A at a + s * seg_stride (see
	 * kgemm_ukernel_seg_fn); 1 for a plain tile */
	const float *a0 = a;
	for (int64_t s = 0; s < nseg; s++) {
		a = a0 + s * seg_stride;
		int64_t p = 0;
		if (SPLIT) {
			for (; p + 2 <= kc; p += 2) {
				__m256 b0, b1, b2, b3;
				load_b(b, NV, BMASK, bm0, bm1, &b0, &b1);
				load_b(b + ldb, NV, BMASK, bm0, bm1, &b2, &b3);
#pragma GCC unroll 6
				for (int r = 0; r < ROWS; r++) {
					__m256 ar = _mm256_broadcast_ss(a + r * rs_a);
					acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
					if (NV == 2)
						acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
					__m256 as = _mm256_broadcast_ss(a + cs_a + r * rs_a);
					odd[r][0] = _mm256_fmadd_ps(as, b2, odd[r][0]);
					if (NV == 2)
						odd[r][1] = _mm256_fmadd_ps(as, b3, odd[r][1]);
				}
				a += 2 * cs_a;
				b += 2 * ldb;
			}
		}
#pragma GCC unroll 4
		for (; p < kc; p++) {
			__m256 b0, b1;
			load_b(b, NV, BMASK, bm0, bm1, &b0, &b1);
#pragma GCC unroll 6
			for (int r = 0; r < ROWS; r++) {
				__m256 ar = _mm256_broadcast_ss(a + r * rs_a);
				acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
				if (NV == 2)
					acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
			}
			a += cs_a;
			b += ldb;
		}
	}
	if (SPLIT) {
#pragma GCC unroll 6
		for (int r = 0; r < ROWS; r++) {
			acc[r][0] = _mm256_add_ps(acc[r][0], odd[r][0]);
			acc[r][1] = _mm256_add_ps(acc[r][1], odd[r][1]);
		}
	}

	const int first = ep->flags & KGEMM_TILE_FIRST, last = ep->flags & KGEMM_TILE_LAST;
	const int full = n == NR;
	const __m256i m0 = lane_mask(n < 8 ? n : 8), m1 = lane_mask(n > 8 ? n - 8 : 0);
	const __m256 alpha = _mm256_set1_ps(ep->alpha);
	const k_act act = last ? ep->act : K_ACT_NONE;
	__m256 bn0 = _mm256_setzero_ps(), bn1 = _mm256_setzero_ps();
	if (first && ep->bias_n)
		load16(ep->bias_n, full, m0, m1, &bn0, &bn1);
#pragma GCC unroll 6
	for (int r = 0; r < ROWS; r++) {
		/* alpha * acc is exact for alpha == 1, so no branch for it */
		__m256 v0 = _mm256_mul_ps(acc[r][0], alpha), v1 = _mm256_mul_ps(acc[r][1], alpha);
		__m256 o0, o1;
		if (first) {
			v0 = _mm256_add_ps(v0, bn0);
			v1 = _mm256_add_ps(v1, bn1);
			if (ep->bias_m) {
				__m256 bm = _mm256_broadcast_ss(ep->bias_m + r);
				v0 = _mm256_add_ps(v0, bm);
				v1 = _mm256_add_ps(v1, bm);
			}
			if (ep->res) {
				load16(ep->res + r * ep->ld_res, full, m0, m1, &o0, &o1);
				v0 = _mm256_add_ps(v0, o0);
				v1 = _mm256_add_ps(v1, o1);
			}
		} else {
			load16(c + r * ldc, full, m0, m1, &o0, &o1);
			v0 = _mm256_add_ps(v0, o0);
			v1 = _mm256_add_ps(v1, o1);
		}
		v0 = act_simple(v0, act);
		v1 = act_simple(v1, act);
		float *cr = c + r * ldc;
		if (full) {
			_mm256_storeu_ps(cr, v0);
			_mm256_storeu_ps(cr + 8, v1);
		} else if (NV == 1 && n == 8) {
			_mm256_storeu_ps(cr, v0);
		} else {
			_mm256_maskstore_ps(cr, m0, v0);
			if (NV == 2)
				_mm256_maskstore_ps(cr + 8, m1, v1);
		}
	}
	if (kgemm_act_is_transcendental(act))
		act_tile(c, ldc, ROWS, n, act);
}

/* The tile for m rows (1..6), nseg K blocks (1 for a plain tile); B rows
 * ldb apart, read with lane masks when BMASK (a strided B's last columns).
 * A tile of at most 8 columns takes the one-vector body, with the odd-k
 * accumulators whatever its rows (6 chains would not cover the FMA
 * latency). */
static inline __attribute__((always_inline)) void tile_rows(const int BMASK, const int NV, int m, int64_t kc,
							    int64_t nseg, int64_t seg_stride, const float *a,
							    int64_t rs_a, int64_t cs_a, const float *b, int64_t ldb,
							    float *c, int64_t ldc, int n, const kgemm_tile_ep *ep)
{
	const int wide = NV == 2;
	switch (m) {
	case 6: tile(6, !wide, BMASK, NV, kc, nseg, seg_stride, a, rs_a, cs_a, b, ldb, c, ldc, n, ep); break;
	case 5: tile(5, !wide, BMASK, NV, kc, nseg, seg_stride, a, rs_a, cs_a, b, ldb, c, ldc, n, ep); break;
	case 4: tile(4, !wide, BMASK, NV, kc, nseg, seg_stride, a, rs_a, cs_a, b, ldb, c, ldc, n, ep); break;
	case 3: tile(3, 1, BMASK, NV, kc, nseg, seg_stride, a, rs_a, cs_a, b, ldb, c, ldc, n, ep); break;
	case 2: tile(2, 1, BMASK, NV, kc, nseg, seg_stride, a, rs_a, cs_a, b, ldb, c, ldc, n, ep); break;
	case 1: tile(1, 1, BMASK, NV, kc, nseg, seg_stride, a, rs_a, cs_a, b, ldb, c, ldc, n, ep); break;
	default: break;
	}
}

static inline __attribute__((always_inline)) void tile_m(const int BMASK, int m, int64_t kc, int64_t nseg,
							 int64_t seg_stride, const float *a, int64_t rs_a,
							 int64_t cs_a, const float *b, int64_t ldb, float *c,
							 int64_t ldc, int n, const kgemm_tile_ep *ep)
{
	if (n <= 8)
		tile_rows(BMASK, 1, m, kc, nseg, seg_stride, a, rs_a, cs_a, b, ldb, c, ldc, n, ep);
	else
		tile_rows(BMASK, 2, m, kc, nseg, seg_stride, a, rs_a, cs_a, b, ldb, c, ldc, n, ep);
}

void kgemm_ukernel_6x16__avx2(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b,
			      float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep)
{
	tile_m(0, m, kc, 1, 0, a, rs_a, cs_a, b, NR, c, ldc, n, ep);
}

void kgemm_ukernel_6x16_seg__avx2(int64_t kc, int64_t nseg, int64_t seg_stride, const float *a, int64_t rs_a,
				  const float *b, float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep)
{
	tile_m(0, m, kc, nseg, seg_stride, a, rs_a, 1, b, NR, c, ldc, n, ep);
}

/* B read in place (kgemm_ukernel_strided_fn): whole 16-column rows with
 * plain loads, a last partial block with masked ones (never past n). */
void kgemm_ukernel_6x16_strided__avx2(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b,
				      int64_t ldb, float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep)
{
	if (n == NR)
		tile_m(0, m, kc, 1, 0, a, rs_a, cs_a, b, ldb, c, ldc, n, ep);
	else
		tile_m(1, m, kc, 1, 0, a, rs_a, cs_a, b, ldb, c, ldc, n, ep);
}
