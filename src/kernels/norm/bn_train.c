/* bn_train.c - the fast kernels of training batch norm (forward with the
 * running statistics' update, backward) and threshold_backward for dense
 * f32 tensors. Batch norm works a channel at a time: one task holds a few
 * whole channels (every image's plane of them), makes its first pass (the
 * statistics, or the backward's two sums) and its second (the normalized
 * output, or dx) while the channel's data is still in the cache. The loops
 * (bn_train_impl.h) are built for 4 lanes here and for AVX2 and AVX-512 in
 * their own files; the widest the CPU allows is chosen once. */
#include <math.h>
#include <pthread.h>

#include "kernels/common/cpu.h"
#include "kernels/norm/bn_train.h"

#define KBN_LANES 4
#define KBN_IMPL kbn_impl_scalar
#include "kernels/norm/bn_train_impl.h"

static const kbn_impl *impl = &kbn_impl_scalar;
static const char *impl_name = "scalar";
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void choose(void)
{
#ifdef AIR_HAVE_X86
	unsigned f = kcpu_features();
	if ((f & KCPU_AVX512) == KCPU_AVX512) {
		impl = &kbn_impl_avx512;
		impl_name = "avx512";
	} else if (f & KCPU_AVX2) {
		impl = &kbn_impl_avx2;
		impl_name = "avx2";
	}
#endif
}

static const kbn_impl *chosen(void)
{
	pthread_once(&once, choose);
	return impl;
}

const char *kbn_isa_name(void)
{
	chosen();
	return impl_name;
}

/* Channels per task: whole channels, about K_GRAIN elements a task. */
static int64_t chans_per_task(int64_t per_channel)
{
	int64_t k = per_channel > 0 ? K_GRAIN / per_channel : 1;
	return k < 1 ? 1 : k;
}

/* Dense f32 [N, C, ...] with planes long enough for the vector loops (a
 * [N, C] batch norm's planes of one element are left to the reference). */
static bool planes_supported(const k_call *call, const k_tensor *x)
{
	return k_all_f32(call) && x->rank >= 3 && k_numel(x->rank - 2, x->dims + 2) >= 8;
}

/* ---- batch_norm_train ---------------------------------------------------- */

typedef struct train_ctx {
	const kbn_impl *v;
	const float *x, *w, *b, *rm, *rv;
	float *y, *mean, *invstd, *running;
	double momentum, eps;
	int relu;
	int64_t N, C, inner, per_task;
} train_ctx;

static void train_task(void *p, int64_t t, int thread)
{
	(void)thread;
	const train_ctx *c = p;
	int64_t c0 = t * c->per_task, c1 = k_min64(c0 + c->per_task, c->C);
	double M = (double)(c->N * c->inner);
	for (int64_t ch = c0; ch < c1; ch++) {
		float k = c->x[ch * c->inner];
		double s1 = 0, s2 = 0;
		for (int64_t n = 0; n < c->N; n++)
			c->v->stats(c->x + (n * c->C + ch) * c->inner, c->inner, k, &s1, &s2);
		double dm = s1 / M, var = s2 / M - dm * dm;
		if (var < 0)
			var = 0;
		double mean = k + dm, invstd = 1.0 / sqrt(var + c->eps);
		double w = c->w ? c->w[ch] : 1.0, b = c->b ? c->b[ch] : 0.0;
		float a = (float)(invstd * w), sh = (float)(b - mean * (invstd * w));
		for (int64_t n = 0; n < c->N; n++) {
			int64_t off = (n * c->C + ch) * c->inner;
			c->v->apply(c->x + off, c->y + off, c->inner, a, sh, c->relu);
		}
		c->mean[ch] = (float)mean;
		c->invstd[ch] = (float)invstd;
		c->running[ch] = (float)(c->momentum * mean + (1 - c->momentum) * c->rm[ch]);
		c->running[c->C + ch] = (float)(c->momentum * (var * M / (M - 1)) + (1 - c->momentum) * c->rv[ch]);
	}
}

static bool train_supports(const k_call *call)
{
	return planes_supported(call, &call->in[0]) && call->in[0].dims[0] > 0;
}

static air_status train_run(const k_call *call)
{
	const k_tensor *x = &call->in[0], *w, *b, *rm, *rv;
	kbn_train_inputs(call, &w, &b, &rm, &rv);
	train_ctx c = {chosen(), x->data, w ? w->data : NULL, b ? b->data : NULL, rm->data, rv->data,
		       call->out[0].data, call->out[1].data, call->out[2].data, call->out[3].data,
		       call->attrs[0].f, call->attrs[1].f, call->attrs[4].i == 1, x->dims[0], x->dims[1],
		       k_numel(x->rank - 2, x->dims + 2), 0};
	c.per_task = chans_per_task(c.N * c.inner);
	rt_pool_run(call->pool, k_cdiv(c.C, c.per_task), train_task, &c);
	return AIR_OK;
}

const k_kernel kfast_batch_norm_train = {"batch_norm_train_planes", 0, train_supports, NULL, NULL, NULL,
					 train_run, 0};

/* ---- batch_norm_backward ------------------------------------------------- */

typedef struct bwd_ctx {
	const kbn_impl *v;
	const float *dy, *x, *mean, *invstd, *w, *mask;
	float *dx, *dw, *db;
	bool train;
	float t;
	int64_t N, C, inner, per_task;
} bwd_ctx;

static void bwd_task(void *p, int64_t t, int thread)
{
	(void)thread;
	const bwd_ctx *c = p;
	int64_t c0 = t * c->per_task, c1 = k_min64(c0 + c->per_task, c->C);
	double M = (double)(c->N * c->inner);
	for (int64_t ch = c0; ch < c1; ch++) {
		float m = c->mean[ch];
		double sdy = 0, dot = 0;
		for (int64_t n = 0; n < c->N; n++) {
			int64_t off = (n * c->C + ch) * c->inner;
			if (c->mask)
				c->v->bwd_sums_masked(c->dy + off, c->mask + off, c->t, c->x + off, c->inner, m, &sdy, &dot);
			else
				c->v->bwd_sums(c->dy + off, c->x + off, c->inner, m, &sdy, &dot);
		}
		double s = c->invstd[ch], w = c->w ? c->w[ch] : 1.0;
		float k = c->train ? (float)(dot * s * s / M) : 0.0f, gm = c->train ? (float)(sdy / M) : 0.0f;
		for (int64_t n = 0; n < c->N; n++) {
			int64_t off = (n * c->C + ch) * c->inner;
			if (c->mask)
				c->v->bwd_dx_masked(c->dy + off, c->mask + off, c->t, c->x + off, c->dx + off, c->inner, m,
						    gm, k, (float)(s * w));
			else
				c->v->bwd_dx(c->dy + off, c->x + off, c->dx + off, c->inner, m, gm, k, (float)(s * w));
		}
		c->dw[ch] = (float)(dot * s);
		c->db[ch] = (float)sdy;
	}
}

static bool bwd_supports(const k_call *call)
{
	return planes_supported(call, &call->in[1]) && call->in[1].dims[0] > 0;
}

static air_status bwd_run(const k_call *call)
{
	const k_tensor *x = &call->in[1];
	const k_tensor *w, *mask;
	kbn_backward_inputs(call, &w, &mask);
	bwd_ctx c = {chosen(), call->in[0].data, x->data, call->in[2].data, call->in[3].data, w ? w->data : NULL,
		     mask ? mask->data : NULL, call->out[0].data, call->out[1].data, call->out[2].data,
		     call->attrs[1].i != 0, (float)call->attrs[3].f, x->dims[0], x->dims[1],
		     k_numel(x->rank - 2, x->dims + 2), 0};
	c.per_task = chans_per_task(c.N * c.inner);
	rt_pool_run(call->pool, k_cdiv(c.C, c.per_task), bwd_task, &c);
	return AIR_OK;
}

const k_kernel kfast_batch_norm_backward = {"batch_norm_backward_planes", 0, bwd_supports, NULL, NULL, NULL,
					    bwd_run, 0};

/* ---- threshold_backward -------------------------------------------------- */

typedef struct thr_ctx {
	const kbn_impl *v;
	const float *g, *x;
	float *out;
	float t;
	int64_t n;
} thr_ctx;

static void thr_task(void *p, int64_t t, int thread)
{
	(void)thread;
	const thr_ctx *c = p;
	int64_t i0 = t * 4 * K_GRAIN, i1 = k_min64(i0 + 4 * K_GRAIN, c->n);
	c->v->threshold_bwd(c->g + i0, c->x + i0, c->out + i0, i1 - i0, c->t);
}

static bool thr_supports(const k_call *call)
{
	return k_all_f32(call);
}

static air_status thr_run(const k_call *call)
{
	thr_ctx c = {chosen(), call->in[0].data, call->in[1].data, call->out[0].data, (float)call->attrs[0].f,
		     call->out[0].numel};
	rt_pool_run(call->pool, k_cdiv(c.n, 4 * K_GRAIN), thr_task, &c);
	return AIR_OK;
}

/* each element of grad and x is read just before the same element of the
 * output is written */
const k_kernel kfast_threshold_backward = {"threshold_backward_lanes", 0, thr_supports, NULL, NULL, NULL, thr_run,
					   K_INPLACE_ANY};
