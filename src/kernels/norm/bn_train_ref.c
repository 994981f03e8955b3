/* bn_train_ref.c - reference kernels of training batch norm (statistics,
 * normalization, backward) and threshold_backward: every sum in double, one
 * thread, f32 and f64. The oracle the fast kernels (bn_train.c) are tested
 * against; the formulas are aten's (batch_norm_cpu_* in
 * aten/src/ATen/native/Normalization.cpp). */
#include <math.h>

#include "core/error.h"
#include "kernels/norm/bn_train.h"

static air_status bad_dtype(const char *op, air_dtype dt)
{
	return air_error(AIR_UNSUPPORTED, "%s: no reference kernel for %s", op, air_dtype_name(dt));
}

static double get(const k_tensor *t, int64_t i)
{
	return t->dtype == AIR_F64 ? ((const double *)t->data)[i] : (double)((const float *)t->data)[i];
}

static void put(const k_tensor *t, int64_t i, double v)
{
	if (t->dtype == AIR_F64)
		((double *)t->data)[i] = v;
	else
		((float *)t->data)[i] = (float)v;
}

/* x [N, C, inner]: element (n, c, i) */
static int64_t at(int64_t C, int64_t inner, int64_t n, int64_t c, int64_t i)
{
	return (n * C + c) * inner + i;
}

void kbn_train_inputs(const k_call *call, const k_tensor **weight, const k_tensor **bias, const k_tensor **rm,
		      const k_tensor **rv)
{
	int i = 1;
	*weight = kref_present(call->attrs[2].i, call->n_in, 3) ? &call->in[i++] : NULL;
	*bias = kref_present(call->attrs[3].i, call->n_in, 3) ? &call->in[i++] : NULL;
	*rm = &call->in[i++];
	*rv = &call->in[i];
}

air_status kref_batch_norm_train(const k_call *call)
{
	const k_tensor *x = &call->in[0], *w, *b, *rm, *rv;
	kbn_train_inputs(call, &w, &b, &rm, &rv);
	if (x->dtype != AIR_F32 && x->dtype != AIR_F64)
		return bad_dtype("batch_norm_train", x->dtype);
	int64_t N = x->dims[0], C = x->dims[1], inner = k_numel(x->rank - 2, x->dims + 2);
	double momentum = call->attrs[0].f, eps = call->attrs[1].f, M = (double)(N * inner);
	bool relu = call->attrs[4].i == 1;
	for (int64_t c = 0; c < C; c++) {
		double sum = 0, sq = 0;
		for (int64_t n = 0; n < N; n++)
			for (int64_t i = 0; i < inner; i++)
				sum += get(x, at(C, inner, n, c, i));
		double mean = sum / M;
		for (int64_t n = 0; n < N; n++)
			for (int64_t i = 0; i < inner; i++) {
				double d = get(x, at(C, inner, n, c, i)) - mean;
				sq += d * d;
			}
		double invstd = 1.0 / sqrt(sq / M + eps);
		double wc = w ? get(w, c) : 1.0, bc = b ? get(b, c) : 0.0;
		for (int64_t n = 0; n < N; n++)
			for (int64_t i = 0; i < inner; i++) {
				int64_t k = at(C, inner, n, c, i);
				double v = (get(x, k) - mean) * invstd * wc + bc;
				put(&call->out[0], k, relu && v < 0 ? 0.0 : v);
			}
		put(&call->out[1], c, M > 0 ? mean : 0.0);
		put(&call->out[2], c, M > 0 ? invstd : 0.0);
		/* one element per channel: 0 / 0, NaN, as aten; an empty batch
		 * leaves the running statistics as they were */
		double unbiased = sq / (M - 1);
		put(&call->out[3], c, M > 0 ? momentum * mean + (1 - momentum) * get(rm, c) : get(rm, c));
		put(&call->out[3], C + c, M > 0 ? momentum * unbiased + (1 - momentum) * get(rv, c) : get(rv, c));
	}
	return AIR_OK;
}

void kbn_backward_inputs(const k_call *call, const k_tensor **weight, const k_tensor **mask)
{
	bool hm = call->attrs[2].i != 0;
	*mask = hm ? &call->in[call->n_in - 1] : NULL;
	*weight = call->n_in - (hm ? 1 : 0) > 4 && call->attrs[0].i != 0 ? &call->in[4] : NULL;
}

/* dy at k, masked as threshold_backward(dy, mask, t) when there is a mask */
static double grad_at(const k_tensor *dy, const k_tensor *mask, double t, int64_t k)
{
	return mask && get(mask, k) <= t ? 0.0 : get(dy, k);
}

air_status kref_batch_norm_backward(const k_call *call)
{
	const k_tensor *dy = &call->in[0], *x = &call->in[1], *mean = &call->in[2], *invstd = &call->in[3], *w, *mask;
	kbn_backward_inputs(call, &w, &mask);
	bool train = call->attrs[1].i != 0;
	double t = call->attrs[3].f;
	if (x->dtype != AIR_F32 && x->dtype != AIR_F64)
		return bad_dtype("batch_norm_backward", x->dtype);
	int64_t N = x->dims[0], C = x->dims[1], inner = k_numel(x->rank - 2, x->dims + 2);
	double M = (double)(N * inner);
	for (int64_t c = 0; c < C; c++) {
		double m = get(mean, c), s = get(invstd, c), wc = w ? get(w, c) : 1.0;
		double sdy = 0, dot = 0; /* sum(dy), sum(dy * (x - mean)) */
		for (int64_t n = 0; n < N; n++)
			for (int64_t i = 0; i < inner; i++) {
				int64_t k = at(C, inner, n, c, i);
				sdy += grad_at(dy, mask, t, k);
				dot += grad_at(dy, mask, t, k) * (get(x, k) - m);
			}
		double k_ = M > 0 ? dot * s * s / M : 0.0, gmean = M > 0 ? sdy / M : 0.0;
		for (int64_t n = 0; n < N; n++)
			for (int64_t i = 0; i < inner; i++) {
				int64_t k = at(C, inner, n, c, i);
				double g = grad_at(dy, mask, t, k);
				double d = train ? (g - gmean - (get(x, k) - m) * k_) * s * wc : g * s * wc;
				put(&call->out[0], k, d);
			}
		put(&call->out[1], c, dot * s);
		put(&call->out[2], c, sdy);
	}
	return AIR_OK;
}

air_status kref_threshold_backward(const k_call *call)
{
	const k_tensor *g = &call->in[0], *x = &call->in[1];
	if (x->dtype != AIR_F32 && x->dtype != AIR_F64)
		return bad_dtype("threshold_backward", x->dtype);
	double t = call->attrs[0].f;
	for (int64_t i = 0; i < x->numel; i++)
		put(&call->out[0], i, get(x, i) <= t ? 0.0 : get(g, i)); /* NaN in x keeps the gradient */
	return AIR_OK;
}
