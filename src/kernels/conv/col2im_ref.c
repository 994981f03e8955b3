/* col2im_ref.c - reference kernel of col2im (torch's fold, with a bias and a
 * channels-last form): the second half of a transposed convolution, whose
 * GEMM writes every input pixel's output taps. Built with the vectorizer's
 * dynamic cost model (CMakeLists.txt): a channels-last tap is one
 * contiguous add of C floats. */
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_ref.h"

typedef struct col2im_ctx {
	int64_t C, KH, KW, LH, LW, OH, OW, sh, sw, ph, pw, dh, dw;
	int channels_last; /* cols [N, L, KH*KW*C] and y [N, OH, OW, C], else [N, C*KH*KW, L] and NCHW */
	const void *x, *bias;
	void *y;
} col2im_ctx;

/* cols [N, C*KH*KW, L]: one task per output plane t = (n, c), from its
 * KH*KW rows of cols, tap by tap and block row by block row (torch's order
 * of the sums), over the blocks whose tap lands inside the plane. The bias
 * starts the sums. */
#define COL2IM_TASK(T)                                                                            \
	static void col2im_task_##T(void *p, int64_t t, int thread)                               \
	{                                                                                         \
		(void)thread;                                                                     \
		const col2im_ctx *c = p;                                                          \
		const int64_t L = c->LH * c->LW, KK = c->KH * c->KW, CK = c->C * KK, n = t / c->C; \
		T *y = (T *)c->y + t * c->OH * c->OW;                                             \
		const T b0 = c->bias ? ((const T *)c->bias)[t % c->C] : (T)0;                     \
		for (int64_t i = 0; i < c->OH * c->OW; i++)                                       \
			y[i] = b0;                                                                \
		for (int64_t ki = 0; ki < c->KH; ki++)                                            \
			for (int64_t kj = 0; kj < c->KW; kj++) {                                  \
				const int64_t r = (t % c->C * c->KH + ki) * c->KW + kj;           \
				const T *xr = (const T *)c->x + n * CK * L + r * L;               \
				const int64_t offh = ki * c->dh - c->ph, offw = kj * c->dw - c->pw; \
				int64_t lh0, lh1, lw0, lw1;                                       \
				kconv_valid_range(c->LH, c->OH, c->sh, offh, &lh0, &lh1);         \
				kconv_valid_range(c->LW, c->OW, c->sw, offw, &lw0, &lw1);         \
				for (int64_t lh = lh0; lh < lh1; lh++) {                          \
					T *yr = y + (lh * c->sh + offh) * c->OW + offw;           \
					const T *xb = xr + lh * c->LW;                            \
					for (int64_t lw = lw0; lw < lw1; lw++)                    \
						yr[lw * c->sw] += xb[lw];                         \
				}                                                                 \
			}                                                                         \
	}
COL2IM_TASK(float)
COL2IM_TASK(double)

/* channels_last: one task per band of COL2IM_BAND output rows of one
 * image, reading the blocks whose taps land in the band in order; each tap
 * adds its C contiguous channels to one output pixel's C contiguous ones.
 * (A task per NCHW plane read a cache line of every block for its KH*KW
 * floats, and the planes' rows, 50 KB apart, fought over a few L1 sets: 2-4x
 * slower on a 4x4 stride-2 up-conv of 32 channels to 112x112.) */
enum { COL2IM_BAND = 8 };

#define COL2IM_BAND_TASK(T)                                                                       \
	static void col2im_band_##T(void *p, int64_t t, int thread)                               \
	{                                                                                         \
		(void)thread;                                                                     \
		const col2im_ctx *c = p;                                                          \
		const int64_t bands = (c->OH + COL2IM_BAND - 1) / COL2IM_BAND, n = t / bands;     \
		const int64_t oh0 = t % bands * COL2IM_BAND;                                      \
		const int64_t oh1 = oh0 + COL2IM_BAND < c->OH ? oh0 + COL2IM_BAND : c->OH;        \
		const int64_t C = c->C, CK = C * c->KH * c->KW;                                   \
		T *y = (T *)c->y + n * c->OH * c->OW * C;                                         \
		const T *bias = c->bias;                                                          \
		for (int64_t px = oh0 * c->OW; px < oh1 * c->OW; px++)                            \
			for (int64_t ch = 0; ch < C; ch++)                                        \
				y[px * C + ch] = bias ? bias[ch] : (T)0;                          \
		/* block rows with a tap in [oh0, oh1): lh*sh - ph + ki*dh for some ki */         \
		int64_t lh0 = 0, lh1 = c->LH;                                                     \
		while (lh0 < lh1 && lh0 * c->sh - c->ph + (c->KH - 1) * c->dh < oh0)              \
			lh0++;                                                                    \
		while (lh1 > lh0 && (lh1 - 1) * c->sh - c->ph >= oh1)                             \
			lh1--;                                                                    \
		for (int64_t lh = lh0; lh < lh1; lh++)                                            \
			for (int64_t lw = 0; lw < c->LW; lw++) {                                  \
				const T *blk = (const T *)c->x + (n * c->LH * c->LW + lh * c->LW + lw) * CK; \
				const int64_t ow0 = lw * c->sw - c->pw;                           \
				for (int64_t ki = 0; ki < c->KH; ki++) {                          \
					const int64_t oh = lh * c->sh - c->ph + ki * c->dh;       \
					if (oh < oh0 || oh >= oh1)                                \
						continue;                                         \
					for (int64_t kj = 0; kj < c->KW; kj++) {                  \
						const int64_t ow = ow0 + kj * c->dw;              \
						if (ow < 0 || ow >= c->OW)                        \
							continue;                                 \
						T *yo = y + (oh * c->OW + ow) * C;                \
						const T *tap = blk + (ki * c->KW + kj) * C;       \
						for (int64_t ch = 0; ch < C; ch++)                \
							yo[ch] += tap[ch];                        \
					}                                                         \
				}                                                                 \
			}                                                                         \
	}
COL2IM_BAND_TASK(float)
COL2IM_BAND_TASK(double)

air_status kref_col2im(const k_call *call)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
	int64_t k[2], d[2], p[2], s[2];
	kref_pair(call->attrs[1].ints, call->attrs[1].n, ones, k);
	kref_pair(call->attrs[2].ints, call->attrs[2].n, ones, d);
	kref_pair(call->attrs[3].ints, call->attrs[3].n, zeros, p);
	kref_pair(call->attrs[4].ints, call->attrs[4].n, ones, s);
	const int last = call->attrs[5].i != 0;
	col2im_ctx c = {y->dims[last ? 3 : 1], k[0], k[1], 0, 0, y->dims[last ? 1 : 2], y->dims[last ? 2 : 3],
			s[0], s[1], p[0], p[1], d[0], d[1], last, x->data, kref_present(call->attrs[6].i, call->n_in, 1) ? call->in[1].data : NULL,
			y->data};
	/* the blocks that fit, as shape inference counted them */
	c.LH = (c.OH + 2 * c.ph - c.dh * (c.KH - 1) - 1) / c.sh + 1;
	c.LW = (c.OW + 2 * c.pw - c.dw * (c.KW - 1) - 1) / c.sw + 1;
	if (c.LH * c.LW != x->dims[last ? 1 : 2])
		return air_error(AIR_SHAPE_MISMATCH, "col2im: cols has %lld blocks but the output fits %lld x %lld",
				 (long long)x->dims[last ? 1 : 2], (long long)c.LH, (long long)c.LW);
	if (y->numel == 0)
		return AIR_OK;
	const int64_t planes = y->dims[0] * c.C, bands = y->dims[0] * ((c.OH + COL2IM_BAND - 1) / COL2IM_BAND);
	switch (y->dtype) {
	case AIR_F32: rt_pool_run(call->pool, last ? bands : planes, last ? col2im_band_float : col2im_task_float, &c); break;
	case AIR_F64: rt_pool_run(call->pool, last ? bands : planes, last ? col2im_band_double : col2im_task_double, &c); break;
	default: return air_error(AIR_UNSUPPORTED, "col2im: no reference kernel for %s", air_dtype_name(y->dtype));
	}
	return AIR_OK;
}
