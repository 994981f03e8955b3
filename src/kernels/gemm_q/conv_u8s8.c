/* conv_u8s8.c - conv2d_u8s8's kernels (conv_u8s8.h). x [N, C, H, W] u8, w [O, C, KH, KW] s8,
 * y [N, O, OH, OW] f32 or u8, the epilogue of gemm_u8s8.h per output channel. Padding reads
 * the zero point: eager pads the dequantized input with 0.0, which is x_zp quantized, so the
 * padded taps add (x_zp - x_zp) * w = 0 in both. The fast kernel, per image, in tasks of
 * pixels: their im2col rows [pixels, C * KH * KW] of u8, the packed product into [pixels, O],
 * then those columns of the image's NCHW planes. */
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
	const ku8_packed *p;
	const ku8_epi *ep;
	const uint8_t *x; /* this image */
	uint8_t *cols;
	char *t; /* the product [P x O] */
	char *y; /* this image's planes [O x P] */
	size_t es;
	int64_t rows; /* pixels a task takes */
} job;

/* u8 im2col rows of pixels [p0, p1): row p holds K = C * KH * KW values, zero point where the
 * tap falls in the padding. The sizes are copied to locals: the byte stores may alias anything,
 * and reading them through the job after each store took 18 ns a byte. */
static void im2col_rows(const job *j, int64_t p0, int64_t p1)
{
	const int64_t C = j->s.C, H = j->s.H, W = j->s.W, KH = j->s.KH, KW = j->s.KW, OW = j->s.OW;
	const int64_t sh = j->s.sh, sw = j->s.sw, ph = j->s.ph, pw = j->s.pw, dh = j->s.dh, dw = j->s.dw;
	const int64_t K = C * KH * KW;
	const uint8_t zp = (uint8_t)j->ep->a_zp, *x = j->x;
	uint8_t *cols = j->cols;
	if (KH == 1 && KW == 1 && ph == 0 && pw == 0) { /* one pixel per channel, no bounds */
		for (int64_t p = p0; p < p1; p++) {
			const uint8_t *src = x + (p / OW) * sh * W + (p % OW) * sw;
			uint8_t *row = cols + p * K;
			for (int64_t c = 0; c < C; c++)
				row[c] = src[c * H * W];
		}
		return;
	}
	for (int64_t p = p0; p < p1; p++) {
		const int64_t oh = p / OW, ow = p % OW;
		uint8_t *row = cols + p * K;
		for (int64_t c = 0; c < C; c++) {
			const uint8_t *plane = x + c * H * W;
			for (int64_t kh = 0; kh < KH; kh++) {
				const int64_t ih = oh * sh - ph + kh * dh;
				uint8_t *dst = row + (c * KH + kh) * KW;
				if (ih < 0 || ih >= H) {
					memset(dst, zp, (size_t)KW);
					continue;
				}
				const uint8_t *line = plane + ih * W;
				for (int64_t kw = 0; kw < KW; kw++) {
					const int64_t iw = ow * sw - pw + kw * dw;
					dst[kw] = iw < 0 || iw >= W ? zp : line[iw];
				}
			}
		}
	}
}

/* One task: its pixels' im2col rows, their product on one thread, and their columns of the
 * output planes. One pool hand-off per image: with three (im2col, product, transpose) a
 * 7x7x512 convolution took 34 ms on 2 threads of the loaded machine against 5 ms on one. */
static void rows_task(void *ctx, int64_t t, int thread)
{
	const job *j = ctx;
	(void)thread;
	const int64_t P = j->s.OH * j->s.OW, O = j->s.O, p0 = t * j->rows, p1 = k_min64(P, p0 + j->rows);
	const int64_t K = j->p->K;
	im2col_rows(j, p0, p1);
	char *t0 = j->t + (size_t)(p0 * O) * j->es;
	ku8_gemm(j->p, p1 - p0, j->cols + p0 * K, K, j->ep, t0, O, NULL);
	if (j->es == 1) {
		const uint8_t *src = (const uint8_t *)t0;
		uint8_t *dst = (uint8_t *)j->y;
		for (int64_t o = 0; o < O; o++)
			for (int64_t p = p0; p < p1; p++)
				dst[o * P + p] = src[(p - p0) * O + o];
	} else {
		const float *src = (const float *)t0;
		float *dst = (float *)j->y;
		for (int64_t o = 0; o < O; o++)
			for (int64_t p = p0; p < p1; p++)
				dst[o * P + p] = src[(p - p0) * O + o];
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
	job j = {shape_of(call), p, &ep, NULL, NULL, NULL, NULL, ep.out_u8 ? 1 : sizeof(float), 0};
	char *ws = (char *)(((uintptr_t)call->workspace + 63) & ~(uintptr_t)63);
	j.cols = (uint8_t *)ws;
	j.t = ws + cols_bytes(&j.s);
	const int64_t P = j.s.OH * j.s.OW;
	/* about 2 tasks a thread, a multiple of the tile's 4 rows, at least 16 pixels */
	const int64_t tasks = 2 * (int64_t)rt_pool_size(call->pool);
	j.rows = k_cdiv(k_cdiv(P, tasks < 1 ? 1 : tasks), 4) * 4;
	if (j.rows < 16)
		j.rows = 16;
	for (int64_t n = 0; n < j.s.N; n++) {
		j.x = (const uint8_t *)call->in[0].data + n * j.s.C * j.s.H * j.s.W;
		j.y = (char *)call->out[0].data + (size_t)(n * j.s.O * P) * j.es;
		rt_pool_run(call->pool, k_cdiv(P, j.rows), rows_task, &j);
	}
	return AIR_OK;
}

const k_kernel kfast_conv2d_u8s8 = {"conv2d_u8s8_im2col", 0, fast_supports, fast_prepare, fast_release,
				    ws_bytes, fast_run, 0};
