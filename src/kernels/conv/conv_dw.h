/* conv_dw.h - the depthwise convolution loop (groups == C == O, NCHW, f32),
 * written once in plain C and compiled twice: portable in conv_fast.c and
 * with AVX2+FMA in conv_dw.avx2.c (CMake gives *.avx2.c files their
 * flags), so the compiler's vectorizer does the per-ISA work. Include it
 * after defining KCONV_DW_FN to the function name to emit. */
#ifndef AIR_KERNELS_CONV_CONV_DW_H
#define AIR_KERNELS_CONV_CONV_DW_H

#include "kernels/conv/conv_ref.h"

/* Output is computed in blocks of KCONV_DW_ROWS rows x KCONV_DW_COLS
 * columns: 8 AVX2 registers of independent sums, enough to hide the FMA
 * latency (a single row of sums would wait on each tap). */
enum { KCONV_DW_ROWS = 8, KCONV_DW_COLS = 8, KCONV_DW_MAX_TAPS = 64, KCONV_DW_MAX_STRIDE = 16 };

/* Eight floats as one GNU C vector (one AVX2 register, two SSE ones), and
 * the same at 4-byte alignment for loads and stores at any column. */
typedef float kconv_v8 __attribute__((vector_size(32)));
typedef float kconv_v8u __attribute__((vector_size(32), aligned(4)));

/* The padded, stride-split copy of one input plane that the loop reads:
 * rows are the padded input rows (input row r - ph); each row is stored as
 * sw phases, phase q holding padded columns q, q + sw, q + 2 sw, ..., so a
 * tap reads a contiguous run for any stride. Hp and Wq cover whole blocks
 * of output (the extra is zeros; its results are not stored). */
typedef struct kconv_dw_layout {
	int64_t Hp, Wq;
} kconv_dw_layout;

static inline kconv_dw_layout kconv_dw_layout_of(const kconv_geom *g)
{
	kconv_dw_layout l;
	int64_t ohr = (g->OH + KCONV_DW_ROWS - 1) / KCONV_DW_ROWS * KCONV_DW_ROWS;
	int64_t owr = (g->OW + KCONV_DW_COLS - 1) / KCONV_DW_COLS * KCONV_DW_COLS;
	l.Hp = ohr > 0 ? (ohr - 1) * g->sh + (g->KH - 1) * g->dh + 1 : 0;
	l.Wq = owr + (g->KW - 1) * g->dw / g->sw + 1;
	return l;
}

/* Floats of scratch one thread needs. */
static inline size_t kconv_dw_scratch_floats(const kconv_geom *g)
{
	kconv_dw_layout l = kconv_dw_layout_of(g);
	return (size_t)(l.Hp * g->sw * l.Wq);
}

typedef void (*kconv_dw_fn)(const kconv_geom *g, const float *restrict x, const float *restrict w,
			    const float *restrict bias, float *restrict y, int64_t t0, int64_t t1,
			    float *restrict scratch);
void kconv_dw_rows__portable(const kconv_geom *g, const float *restrict x, const float *restrict w,
			     const float *restrict bias, float *restrict y, int64_t t0, int64_t t1,
			     float *restrict scratch);
void kconv_dw_rows__avx2(const kconv_geom *g, const float *restrict x, const float *restrict w,
			 const float *restrict bias, float *restrict y, int64_t t0, int64_t t1,
			 float *restrict scratch);

#endif

#ifdef KCONV_DW_FN
/* GCC's -O2 vectorizes only loops that need no remainder; these rows are
 * of any length, so ask for its normal cost model here (clang vectorizes
 * them at -O2 as it is). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
/* Output planes [t0, t1) of the N * C planes (at most KCONV_DW_MAX_TAPS
 * kernel taps and a column stride of at most KCONV_DW_MAX_STRIDE). Each
 * input plane is first copied into the padded layout (zeros where torch
 * pads), so the loop below has no clipping: each block of outputs takes
 * every tap as contiguous loads and FMAs, and is stored once. */
void KCONV_DW_FN(const kconv_geom *g, const float *restrict x, const float *restrict w,
		 const float *restrict bias, float *restrict y, int64_t t0, int64_t t1, float *restrict xs)
{
	const int64_t OH = g->OH, OW = g->OW, H = g->H, W = g->W, sw = g->sw, KH = g->KH, KW = g->KW;
	const kconv_dw_layout l = kconv_dw_layout_of(g);
	const int64_t Wq = l.Wq, row = sw * Wq, rstep = g->sh * row, ntaps = KH * KW;
	/* where tap (ki, kj) starts, relative to its output's top-left */
	int64_t toff[KCONV_DW_MAX_TAPS];
	for (int64_t ki = 0; ki < KH; ki++)
		for (int64_t kj = 0; kj < KW; kj++) {
			int64_t cc = kj * g->dw;
			toff[ki * KW + kj] = ki * g->dh * row + (cc % sw) * Wq + cc / sw;
		}
	/* phase q's entries [ilo, ihi) hold input columns, the rest padding */
	int64_t ilo[KCONV_DW_MAX_STRIDE], ihi[KCONV_DW_MAX_STRIDE];
	for (int64_t q = 0; q < sw; q++)
		kconv_valid_range(Wq, W, sw, q - g->pw, &ilo[q], &ihi[q]);
	for (int64_t t = t0; t < t1; t++) {
		const int64_t c = t % g->C;
		const float *restrict xp = x + t * H * W;
		const float *restrict wp = w + c * ntaps;
		float *restrict yp = y + t * OH * OW;
		const float b0 = bias ? bias[c] : 0.0f;
		for (int64_t r = 0; r < l.Hp; r++) {
			float *restrict dst = xs + r * row;
			const int64_t ih = r - g->ph;
			if (ih < 0 || ih >= H) {
				for (int64_t i = 0; i < row; i++)
					dst[i] = 0.0f;
				continue;
			}
			const float *restrict src = xp + ih * W;
			if (sw == 1) {
				int64_t lo = g->pw < Wq ? g->pw : Wq, hi = g->pw + W < Wq ? g->pw + W : Wq;
				for (int64_t i = 0; i < lo; i++)
					dst[i] = 0.0f;
				for (int64_t i = lo; i < hi; i++)
					dst[i] = src[i - g->pw];
				for (int64_t i = hi; i < Wq; i++)
					dst[i] = 0.0f;
			} else {
				for (int64_t q = 0; q < sw; q++) {
					float *restrict d = dst + q * Wq;
					const float *restrict sq = src + q - g->pw; /* sq[i * sw] is column i */
					for (int64_t i = 0; i < ilo[q]; i++)
						d[i] = 0.0f;
					for (int64_t i = ilo[q]; i < ihi[q]; i++)
						d[i] = sq[i * sw];
					for (int64_t i = ihi[q]; i < Wq; i++)
						d[i] = 0.0f;
				}
			}
		}
		for (int64_t oh = 0; oh < OH; oh += KCONV_DW_ROWS) {
			for (int64_t ob = 0; ob < OW; ob += KCONV_DW_COLS) {
				kconv_v8 acc[KCONV_DW_ROWS];
				for (int r = 0; r < KCONV_DW_ROWS; r++)
					acc[r] = (kconv_v8){0} + b0;
				const float *restrict xb = xs + oh * rstep + ob;
				for (int64_t tap = 0; tap < ntaps; tap++) {
					const kconv_v8 wv = (kconv_v8){0} + wp[tap];
					const float *restrict xt = xb + toff[tap];
					/* unrolled, so the sums stay in registers */
#pragma GCC unroll 8
					for (int r = 0; r < KCONV_DW_ROWS; r++)
						acc[r] += wv * *(const kconv_v8u *)(xt + r * rstep);
				}
				int64_t nr = OH - oh < KCONV_DW_ROWS ? OH - oh : KCONV_DW_ROWS;
				int64_t nc = OW - ob < KCONV_DW_COLS ? OW - ob : KCONV_DW_COLS;
				for (int64_t r = 0; r < nr; r++) {
					float *yr = yp + (oh + r) * OW + ob;
					if (nc == KCONV_DW_COLS) {
						*(kconv_v8u *)yr = acc[r];
					} else {
						for (int64_t k = 0; k < nc; k++)
							yr[k] = acc[r][k];
					}
				}
			}
		}
	}
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
#endif
