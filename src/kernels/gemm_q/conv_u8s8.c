/* conv_u8s8.c - conv2d_u8s8's kernels (conv_u8s8.h). x [N, C, H, W] u8, w [O, C, KH, KW] s8,
 * y [N, O, OH, OW] f32 or u8, the epilogue of gemm_u8s8.h per output channel. Padding reads
 * the zero point: eager pads the dequantized input with 0.0, which is x_zp quantized, so the
 * padded taps add (x_zp - x_zp) * w = 0 in both. The fast kernel, per image: im2col rows
 * [OH * OW, C * KH * KW] of u8 (tasks by output row), the packed product into [OH * OW, O],
 * then a transpose into the image's NCHW planes (tasks by 16 channels). */
#include <math.h>
#include <string.h>

#include "kernels/gemm_q/conv_u8s8.h"
#include "kernels/gemm_q/gemm_u8s8.h"

typedef struct {
	int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
} cshape;

static cshape shape_of(const k_call *call)
{
	const k_tensor *x = &call->in[0], *w = &call->in[1], *y = &call->out[0];
	const int64_t *s = call->attrs[KCU8_ATTR_STRIDE].ints, *p = call->attrs[KCU8_ATTR_PADDING].ints;
	const int64_t *d = call->attrs[KCU8_ATTR_DILATION].ints;
	cshape c = {x->dims[0], x->dims[1], x->dims[2], x->dims[3], w->dims[0], w->dims[2], w->dims[3],
		    y->dims[2], y->dims[3], s[0], s[1], p[0], p[1], d[0], d[1]};
	return c;
}

static ku8_epi epi_of(const k_call *call, const ku8_packed *p)
{
	const k_attr *a = call->attrs;
	const int has_bias = kref_present(a[KCU8_ATTR_HAS_BIAS].i, call->n_in, 3);
	ku8_epi ep = {p ? p->colsum : NULL,
		      p ? p->scale : NULL,
		      has_bias ? call->in[3].data : NULL,
		      (int32_t)a[KCU8_ATTR_X_ZP].i,
		      (int)a[KCU8_ATTR_RELU].i,
		      (int)a[KCU8_ATTR_OUT_U8].i,
		      (float)a[KCU8_ATTR_OUT_INV_SCALE].f,
		      (float)a[KCU8_ATTR_OUT_ZP].i};
	return ep;
}

air_status kref_conv2d_u8s8(const k_call *call)
{
	const cshape s = shape_of(call);
	const uint8_t *x = call->in[0].data;
	const int8_t *w = call->in[1].data;
	const float *ws = call->in[2].data;
	const ku8_epi ep = epi_of(call, NULL);
	const float xs = (float)call->attrs[KCU8_ATTR_X_SCALE].f;
	const int64_t P = s.OH * s.OW;
	for (int64_t n = 0; n < s.N; n++)
		for (int64_t o = 0; o < s.O; o++)
			for (int64_t oh = 0; oh < s.OH; oh++)
				for (int64_t ow = 0; ow < s.OW; ow++) {
					int64_t acc = 0;
					for (int64_t c = 0; c < s.C; c++)
						for (int64_t kh = 0; kh < s.KH; kh++)
							for (int64_t kw = 0; kw < s.KW; kw++) {
								const int64_t ih = oh * s.sh - s.ph + kh * s.dh;
								const int64_t iw = ow * s.sw - s.pw + kw * s.dw;
								if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W)
									continue;
								const int64_t xv = x[((n * s.C + c) * s.H + ih) * s.W + iw];
								acc += (xv - ep.a_zp) *
								       w[((o * s.C + c) * s.KH + kh) * s.KW + kw];
							}
					float y = fmaf((float)(int32_t)acc, xs * ws[o], ep.bias ? ep.bias[o] : 0.0f);
					if (ep.relu && !(y > 0.0f))
						y = 0.0f;
					const int64_t off = (n * s.O + o) * P + oh * s.OW + ow;
					if (ep.out_u8)
						((uint8_t *)call->out[0].data)[off] = ku8_requant(&ep, y);
					else
						((float *)call->out[0].data)[off] = y;
				}
	return AIR_OK;
}

/* ---- fast: im2col + the packed product + a transpose ---- */

static size_t cols_bytes(const cshape *s)
{
	return k_align64((size_t)(s->OH * s->OW) * (size_t)(s->C * s->KH * s->KW));
}

static size_t ws_bytes(const k_call *call, int nthreads)
{
	(void)nthreads;
	const cshape s = shape_of(call);
	const size_t es = call->attrs[KCU8_ATTR_OUT_U8].i ? 1 : sizeof(float);
	return cols_bytes(&s) + (size_t)(s.OH * s.OW * s.O) * es + 64;
}

typedef struct {
	cshape s;
	const uint8_t *x; /* this image */
	uint8_t *cols;
	uint8_t zp;
	const char *t; /* the product [P x O] */
	char *y;       /* this image's planes [O x P] */
	size_t es;
} job;

/* A 1x1 kernel without padding reads one pixel per channel: rows [OW x C] of output row oh, no
 * bounds to check (the general loop below took 8x as long on ResNet-50's 1x1 convolutions). */
static void im2col_1x1(const job *j, int64_t oh)
{
	const cshape *s = &j->s;
	uint8_t *rows = j->cols + oh * s->OW * s->C;
	for (int64_t c = 0; c < s->C; c++) {
		const uint8_t *src = j->x + (c * s->H + oh * s->sh) * s->W;
		for (int64_t ow = 0; ow < s->OW; ow++)
			rows[ow * s->C + c] = src[ow * s->sw];
	}
}

static void im2col_task(void *ctx, int64_t oh, int thread)
{
	const job *j = ctx;
	const cshape *s = &j->s;
	(void)thread;
	if (s->KH == 1 && s->KW == 1 && s->ph == 0 && s->pw == 0) {
		im2col_1x1(j, oh);
		return;
	}
	const int64_t K = s->C * s->KH * s->KW;
	for (int64_t ow = 0; ow < s->OW; ow++) {
		uint8_t *row = j->cols + (oh * s->OW + ow) * K;
		for (int64_t c = 0; c < s->C; c++) {
			const uint8_t *plane = j->x + c * s->H * s->W;
			for (int64_t kh = 0; kh < s->KH; kh++) {
				const int64_t ih = oh * s->sh - s->ph + kh * s->dh;
				uint8_t *dst = row + (c * s->KH + kh) * s->KW;
				if (ih < 0 || ih >= s->H) {
					memset(dst, j->zp, (size_t)s->KW);
					continue;
				}
				for (int64_t kw = 0; kw < s->KW; kw++) {
					const int64_t iw = ow * s->sw - s->pw + kw * s->dw;
					dst[kw] = iw < 0 || iw >= s->W ? j->zp : plane[ih * s->W + iw];
				}
			}
		}
	}
}

enum { TB = 16 }; /* channels a transpose task moves */

static void transpose_task(void *ctx, int64_t t, int thread)
{
	const job *j = ctx;
	(void)thread;
	const int64_t P = j->s.OH * j->s.OW, O = j->s.O, o0 = t * TB, o1 = k_min64(O, o0 + TB);
	if (j->es == 1) {
		const uint8_t *src = (const uint8_t *)j->t;
		uint8_t *dst = (uint8_t *)j->y;
		for (int64_t p = 0; p < P; p++)
			for (int64_t o = o0; o < o1; o++)
				dst[o * P + p] = src[p * O + o];
	} else {
		const float *src = (const float *)j->t;
		float *dst = (float *)j->y;
		for (int64_t p = 0; p < P; p++)
			for (int64_t o = o0; o < o1; o++)
				dst[o * P + p] = src[p * O + o];
	}
}

static bool fast_supports(const k_call *call)
{
	return call->in_const && call->in_const[1] && call->in_const[2];
}

static air_status fast_prepare(const k_call *call, void **prepared)
{
	const k_tensor *w = &call->in[1];
	const int64_t K = w->dims[1] * w->dims[2] * w->dims[3];
	return ku8_pack(w->dims[0], K, w->data, K, (float)call->attrs[KCU8_ATTR_X_SCALE].f, call->in[2].data,
			(ku8_packed **)prepared);
}

static void fast_release(void *prepared)
{
	ku8_free(prepared);
}

static air_status fast_run(const k_call *call)
{
	const ku8_packed *p = call->prepared;
	const ku8_epi ep = epi_of(call, p);
	job j = {shape_of(call), NULL, NULL, (uint8_t)ep.a_zp, NULL, NULL, ep.out_u8 ? 1 : sizeof(float)};
	char *ws = (char *)(((uintptr_t)call->workspace + 63) & ~(uintptr_t)63);
	j.cols = (uint8_t *)ws;
	char *t = ws + cols_bytes(&j.s);
	j.t = t;
	const int64_t P = j.s.OH * j.s.OW, K = p->K;
	for (int64_t n = 0; n < j.s.N; n++) {
		j.x = (const uint8_t *)call->in[0].data + n * j.s.C * j.s.H * j.s.W;
		j.y = (char *)call->out[0].data + (size_t)(n * j.s.O * P) * j.es;
		rt_pool_run(call->pool, j.s.OH, im2col_task, &j);
		ku8_gemm(p, P, j.cols, K, &ep, t, p->N, call->pool);
		rt_pool_run(call->pool, k_cdiv(j.s.O, TB), transpose_task, &j);
	}
	return AIR_OK;
}

const k_kernel kfast_conv2d_u8s8 = {"conv2d_u8s8_im2col", 0, fast_supports, fast_prepare, fast_release,
				    ws_bytes, fast_run, 0};
