/* amx_tiles.amx.c - the AMX side of amx.h: splitting f32 operands into
 * bf16 parts, and the 32 x 32 block product over them. Built with AMX and
 * AVX-512 BF16 enabled; called only when kamx_available(). */
#include <immintrin.h>
#include <string.h>

#include "kernels/common/transpose_avx512.h"
#include "kernels/gemm/amx.h"

/* Tiles 0-3: the C block's four 16 x 16 quarters; 4-5: the A parts' two
 * row halves; 6-7: the B parts' two column halves. Every tile is 16 rows
 * of 64 bytes. */
typedef struct {
	uint8_t palette, start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} kamx_tilecfg;

/* A constant, not a local filled in: GCC's _tile_loadconfig tells the
 * compiler it reads only a pointer's worth of the struct, and stores to a
 * local config were dropped as dead (ldtilecfg then read garbage: #GP). */
static const kamx_tilecfg kamx_cfg __attribute__((aligned(64))) = {
	.palette = 1,
	.colsb = {64, 64, 64, 64, 64, 64, 64, 64},
	.rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

void kamx_tiles_begin(void)
{
	_tile_loadconfig(&kamx_cfg);
}

void kamx_tiles_end(void)
{
	_tile_release();
}

/* The range of kamx_in_range as bit patterns of |x|: 2^-40 and 2^40. */
#define KAMX_LO ((uint32_t)(127 - 40) << 23)
#define KAMX_HI ((uint32_t)(127 + 40) << 23)

static inline __mmask16 k_mask(int64_t n)
{
	return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

static inline __mmask16 out_of_range(__m512 x)
{
	__m512i a = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
	__mmask16 zero = _mm512_cmpeq_epi32_mask(a, _mm512_setzero_si512());
	__mmask16 in = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32((int)KAMX_LO)) &
		       _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32((int)KAMX_HI));
	return (__mmask16)~(zero | in);
}

int kamx_in_range(const float *x, size_t n)
{
	__mmask16 bad = 0;
	size_t i = 0;
	for (; i + 16 <= n; i += 16)
		bad |= out_of_range(_mm512_loadu_ps(x + i));
	if (i < n)
		bad |= out_of_range(_mm512_maskz_loadu_ps(k_mask((int64_t)(n - i)), x + i)) & k_mask((int64_t)(n - i));
	return bad == 0;
}

static inline __m512 bf16_to_f32(__m256i h)
{
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* x = p0 + p1 + p2 exactly (in range): each part is the bf16 nearest to
 * what the parts before it left, and each remainder is exact in f32 */
static inline void split16(__m512 x, __m256i *p0, __m256i *p1, __m256i *p2)
{
	__m256i h = (__m256i)_mm512_cvtneps_pbh(x);
	__m512 r = _mm512_sub_ps(x, bf16_to_f32(h));
	*p0 = h;
	h = (__m256i)_mm512_cvtneps_pbh(r);
	r = _mm512_sub_ps(r, bf16_to_f32(h));
	*p1 = h;
	*p2 = (__m256i)_mm512_cvtneps_pbh(r);
}

int kamx_split_a(int m, int64_t K, const float *A, int64_t rs_a, int64_t nch, uint16_t *dst)
{
	__mmask16 bad = 0;
	for (int64_t c = 0; c < nch; c++) {
		uint16_t *blk = dst + c * KAMX_CHUNK_U16;
		const int64_t k0 = c * 32;
		const __mmask16 m0 = k_mask(K - k0), m1 = k_mask(K - k0 - 16);
		for (int r = 0; r < 32; r++) {
			__m512 x0 = _mm512_setzero_ps(), x1 = _mm512_setzero_ps();
			if (r < m) {
				x0 = _mm512_maskz_loadu_ps(m0, A + r * rs_a + k0);
				x1 = _mm512_maskz_loadu_ps(m1, A + r * rs_a + k0 + 16);
				bad |= out_of_range(x0) | out_of_range(x1);
			}
			__m256i a0, a1, a2, b0, b1, b2;
			split16(x0, &a0, &a1, &a2);
			split16(x1, &b0, &b1, &b2);
			uint16_t *d = blk + (r / 16) * 512 + (r % 16) * 32;
			_mm256_storeu_si256((__m256i *)d, a0);
			_mm256_storeu_si256((__m256i *)(d + 16), b0);
			_mm256_storeu_si256((__m256i *)(d + 1024), a1);
			_mm256_storeu_si256((__m256i *)(d + 1024 + 16), b1);
			_mm256_storeu_si256((__m256i *)(d + 2048), a2);
			_mm256_storeu_si256((__m256i *)(d + 2048 + 16), b2);
		}
	}
	return bad == 0;
}

/* rows k and k + 1 of 16 columns, interleaved: (k, 0), (k + 1, 0), (k, 1), ... */
static inline __m512i pairs(__m256i k, __m256i k1)
{
	const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
					     22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
	return _mm512_permutexvar_epi16(idx, _mm512_inserti64x4(_mm512_castsi256_si512(k), k1, 1));
}

void kamx_split_b(const float *panel, int64_t K, int64_t k0, int64_t nch, uint16_t *dst)
{
	for (int64_t c = 0; c < nch; c++) {
		uint16_t *blk = dst + c * KAMX_CHUNK_U16;
		for (int pr = 0; pr < 16; pr++) {
			const int64_t k = k0 + c * 32 + 2 * pr;
			__m256i p[2][2][3]; /* [row of the pair][column half][part] */
			for (int e = 0; e < 2; e++)
				for (int h = 0; h < 2; h++) {
					__m512 x = k + e < K ? _mm512_loadu_ps(panel + (k + e) * 32 + 16 * h)
							     : _mm512_setzero_ps();
					split16(x, &p[e][h][0], &p[e][h][1], &p[e][h][2]);
				}
			for (int part = 0; part < 3; part++)
				for (int h = 0; h < 2; h++)
					_mm512_storeu_si512(blk + part * 1024 + h * 512 + pr * 32,
							    pairs(p[0][h][part], p[1][h][part]));
		}
	}
}

int kamx_split_bt(const float *bt, int64_t ldbt, int n, int64_t K, int64_t k0, int64_t nch, uint16_t *dst)
{
	__mmask16 bad = 0;
	for (int64_t c = 0; c < nch; c++) {
		uint16_t *blk = dst + c * KAMX_CHUNK_U16;
		const int64_t k = k0 + c * 32;
		const __mmask16 m0 = k_mask(K - k), m1 = k_mask(K - k - 16);
		for (int h = 0; h < 2; h++) {
			/* r[part][column]: the column's 32 values of K as 16
			 * pairs of bf16, one per 32-bit lane; transposed, lane
			 * j of r[part][pair] is column j's pair, as the tile
			 * has it */
			__m512 r[3][16];
			for (int col = 0; col < 16; col++) {
				const int j = 16 * h + col;
				__m512 x0 = _mm512_setzero_ps(), x1 = _mm512_setzero_ps();
				if (j < n) {
					x0 = _mm512_maskz_loadu_ps(m0, bt + j * ldbt + k);
					x1 = _mm512_maskz_loadu_ps(m1, bt + j * ldbt + k + 16);
					bad |= out_of_range(x0) | out_of_range(x1);
				}
				__m256i a[3], b[3];
				split16(x0, &a[0], &a[1], &a[2]);
				split16(x1, &b[0], &b[1], &b[2]);
				for (int part = 0; part < 3; part++)
					r[part][col] = _mm512_castsi512_ps(
						_mm512_inserti64x4(_mm512_castsi256_si512(a[part]), b[part], 1));
			}
			for (int part = 0; part < 3; part++) {
				k16_transpose(r[part]);
				for (int pr = 0; pr < 16; pr++)
					_mm512_storeu_ps((float *)(blk + part * 1024 + h * 512 + pr * 32), r[part][pr]);
			}
		}
	}
	return bad == 0;
}

#define A_TILE(p, t) (ap + (p) * 1024 + (t) * 512)
#define B_TILE(p, t) (bp + (p) * 1024 + (t) * 512)
#define LOAD_A(tile, p, t) _tile_loadd(tile, A_TILE(p, t), 64)
#define LOAD_B(tile, p, t) _tile_loadd(tile, B_TILE(p, t), 64)
/* one part product into the four C tiles: C0 = A4 B6, C1 = A4 B7, C2 = A5 B6, C3 = A5 B7 */
#define DP(c, a, b) _tile_dpbf16ps(c, a, b)
/* A sixth of the next chunk's A and B (96 lines each) towards L1, one
 * sixth per product, none past the last chunk: with B split ahead and
 * read from memory, 2048^3 on 2 threads ran 462-489 -> 501-519 GFLOP/s
 * (bench_gemm, 3 runs each); the smaller squares did not move. */
#define PREFETCH_NEXT(g)                                                                               \
	do {                                                                                           \
		for (int l = 0; l < 16 && ch + 1 < nch; l++) {                                         \
			_mm_prefetch((const char *)(ap + KAMX_CHUNK_U16) + ((g) * 16 + l) * 64, _MM_HINT_T0); \
			_mm_prefetch((const char *)(bp + KAMX_CHUNK_U16) + ((g) * 16 + l) * 64, _MM_HINT_T0); \
		}                                                                                      \
	} while (0)

void kamx_block(const uint16_t *ap, const uint16_t *bp, int64_t nch, const float *from, int64_t ld_from, float *out,
		int64_t ld_out)
{
	if (from) {
		const long ld = (long)ld_from * 4;
		_tile_loadd(0, from, ld);
		_tile_loadd(1, from + 16, ld);
		_tile_loadd(2, from + 16 * ld_from, ld);
		_tile_loadd(3, from + 16 * ld_from + 16, ld);
	} else {
		_tile_zero(0);
		_tile_zero(1);
		_tile_zero(2);
		_tile_zero(3);
	}
	/* The six part products in an order where each one changes only A's
	 * part or only B's from the one before (a2b0 a1b0 a1b1 a0b1 a0b2
	 * a0b0): 14 tile loads feed 24 products (16 in the order a0b0 a0b1
	 * a0b2 a1b1 a1b0 a2b0). Each load is placed right after the last
	 * product that reads the tile it replaces, and the next product
	 * starts on the tile loaded first, so a load overlaps the products
	 * still running instead of waiting for all four. */
	for (int64_t ch = 0; ch < nch; ch++, ap += KAMX_CHUNK_U16, bp += KAMX_CHUNK_U16) {
		LOAD_A(4, 2, 0);
		LOAD_B(6, 0, 0);
		LOAD_A(5, 2, 1);
		LOAD_B(7, 0, 1);
		/* a2 b0, then a1 */
		PREFETCH_NEXT(0);
		DP(0, 4, 6); DP(1, 4, 7); LOAD_A(4, 1, 0); DP(2, 5, 6); DP(3, 5, 7); LOAD_A(5, 1, 1);
		/* a1 b0, then b1 */
		PREFETCH_NEXT(1);
		DP(0, 4, 6); DP(1, 4, 7); DP(2, 5, 6); LOAD_B(6, 1, 0); DP(3, 5, 7); LOAD_B(7, 1, 1);
		/* a1 b1, then a0 */
		PREFETCH_NEXT(2);
		DP(0, 4, 6); DP(2, 5, 6); DP(1, 4, 7); LOAD_A(4, 0, 0); DP(3, 5, 7); LOAD_A(5, 0, 1);
		/* a0 b1, then b2 */
		PREFETCH_NEXT(3);
		DP(0, 4, 6); DP(1, 4, 7); DP(2, 5, 6); LOAD_B(6, 2, 0); DP(3, 5, 7); LOAD_B(7, 2, 1);
		/* a0 b2, then b0 */
		PREFETCH_NEXT(4);
		DP(0, 4, 6); DP(2, 5, 6); LOAD_B(6, 0, 0); DP(1, 4, 7); DP(3, 5, 7); LOAD_B(7, 0, 1);
		/* a0 b0 */
		PREFETCH_NEXT(5);
		DP(0, 4, 6); DP(2, 5, 6); DP(1, 4, 7); DP(3, 5, 7);
	}
	const long ld = (long)ld_out * 4;
	_tile_stored(0, out, ld);
	_tile_stored(1, out + 16, ld);
	_tile_stored(2, out + 16 * ld_out, ld);
	_tile_stored(3, out + 16 * ld_out + 16, ld);
}

void kamx_epilogue_block(const float *buf, int m, int n, float *c, int64_t ldc, const k_epilogue *ep,
			 const float *bias_n, const float *bias_m, const float *res)
{
	const __m512 alpha = _mm512_set1_ps(ep->alpha), zero = _mm512_setzero_ps(), six = _mm512_set1_ps(6.0f);
	const __m512 three = _mm512_set1_ps(3.0f), sixth = _mm512_set1_ps(1.0f / 6.0f);
	for (int r = 0; r < m; r++) {
		for (int h = 0; h < 2; h++) {
			const __mmask16 k = k_mask(n - 16 * h);
			if (!k)
				break;
			__m512 v = _mm512_mul_ps(alpha, _mm512_loadu_ps(buf + r * 32 + 16 * h));
			if (bias_n)
				v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, bias_n + 16 * h));
			if (bias_m)
				v = _mm512_add_ps(v, _mm512_set1_ps(bias_m[r]));
			if (res)
				v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, res + r * ep->ld_residual + 16 * h));
			switch (ep->act) {
			case K_ACT_RELU:
				v = _mm512_max_ps(v, zero);
				break;
			case K_ACT_RELU6:
				v = _mm512_min_ps(_mm512_max_ps(v, zero), six);
				break;
			case K_ACT_HARDSWISH: {
				__m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, three), zero), six);
				v = _mm512_mul_ps(_mm512_mul_ps(v, t), sixth);
				break;
			}
			default: /* none, or a transcendental one the caller applies */
				break;
			}
			_mm512_mask_storeu_ps(c + r * ldc + 16 * h, k, v);
		}
	}
}
