/* bn_train_impl.h - the vector loops of the fast training batch norm and
 * threshold_backward, written once with GCC vector extensions and compiled
 * per ISA: bn_train.c (portable, 4 lanes), bn_train.avx2.c (8),
 * bn_train.avx512.c (16). Include after defining KBN_LANES and KBN_IMPL
 * (the name of the kbn_impl table to define). Each loop works on one
 * contiguous run of n floats (a channel's plane of one image). */
#include <stdint.h>
#include <string.h>

#include "kernels/norm/bn_train_impl_types.h"

typedef float kbn_v __attribute__((vector_size(KBN_LANES * 4)));
/* unaligned, may alias float: a load or store anywhere in a float array */
typedef float kbn_vu __attribute__((vector_size(KBN_LANES * 4), aligned(4), may_alias));
typedef int32_t kbn_vi __attribute__((vector_size(KBN_LANES * 4)));

/* Partial sums stay in float lanes for at most this many elements a lane,
 * then go to double: the error of a float sum grows with its length. */
#define KBN_BLOCK 256

static inline kbn_v kbn_splat(float f)
{
	kbn_v v;
	for (int l = 0; l < KBN_LANES; l++)
		v[l] = f;
	return v;
}

static inline double kbn_hsum(kbn_v v)
{
	double s = 0;
	for (int l = 0; l < KBN_LANES; l++)
		s += v[l];
	return s;
}

/* s1 += sum(x - k), s2 += sum((x - k)^2): the shift k (a value of the
 * channel) keeps the variance from cancelling when |mean| >> std */
static void stats_run(const float *x, int64_t n, float k, double *s1, double *s2)
{
	kbn_v vk = kbn_splat(k);
	int64_t i = 0;
	double a1 = 0, a2 = 0;
	while (i + KBN_LANES <= n) {
		kbn_v p1 = kbn_splat(0), p2 = kbn_splat(0), q1 = p1, q2 = p1;
		int64_t end = i + (int64_t)KBN_BLOCK * KBN_LANES;
		if (end > n)
			end = n;
		for (; i + 2 * KBN_LANES <= end; i += 2 * KBN_LANES) {
			kbn_v d = *(const kbn_vu *)(x + i) - vk, e = *(const kbn_vu *)(x + i + KBN_LANES) - vk;
			p1 += d;
			p2 += d * d;
			q1 += e;
			q2 += e * e;
		}
		for (; i + KBN_LANES <= end; i += KBN_LANES) {
			kbn_v d = *(const kbn_vu *)(x + i) - vk;
			p1 += d;
			p2 += d * d;
		}
		a1 += kbn_hsum(p1 + q1);
		a2 += kbn_hsum(p2 + q2);
	}
	for (; i < n; i++) {
		double d = (double)(x[i] - k);
		a1 += d;
		a2 += d * d;
	}
	*s1 += a1;
	*s2 += a2;
}

/* y = x * a + b (aten's form: a = invstd * weight, b = bias - mean * a),
 * then with relu set max(y, 0) (NaN stays NaN, as torch.relu) */
static void apply_run(const float *x, float *y, int64_t n, float a, float b, int relu)
{
	kbn_v va = kbn_splat(a), vb = kbn_splat(b), zero = kbn_splat(0);
	int64_t i = 0;
	if (relu) {
		for (; i + KBN_LANES <= n; i += KBN_LANES) {
			kbn_v v = *(const kbn_vu *)(x + i) * va + vb;
			kbn_vi neg = v < zero;
			*(kbn_vu *)(y + i) = (kbn_v)((kbn_vi)v & ~neg);
		}
		for (; i < n; i++) {
			float v = x[i] * a + b;
			y[i] = v < 0 ? 0.0f : v;
		}
		return;
	}
	for (; i + KBN_LANES <= n; i += KBN_LANES)
		*(kbn_vu *)(y + i) = *(const kbn_vu *)(x + i) * va + vb;
	for (; i < n; i++)
		y[i] = x[i] * a + b;
}

/* sdy += sum(dy), dot += sum(dy * (x - m)) */
static void bwd_sums_run(const float *dy, const float *x, int64_t n, float m, double *sdy, double *dot)
{
	kbn_v vm = kbn_splat(m);
	int64_t i = 0;
	double a1 = 0, a2 = 0;
	while (i + KBN_LANES <= n) {
		kbn_v p1 = kbn_splat(0), p2 = kbn_splat(0), q1 = p1, q2 = p1;
		int64_t end = i + (int64_t)KBN_BLOCK * KBN_LANES;
		if (end > n)
			end = n;
		for (; i + 2 * KBN_LANES <= end; i += 2 * KBN_LANES) {
			kbn_v g = *(const kbn_vu *)(dy + i), h = *(const kbn_vu *)(dy + i + KBN_LANES);
			p1 += g;
			p2 += g * (*(const kbn_vu *)(x + i) - vm);
			q1 += h;
			q2 += h * (*(const kbn_vu *)(x + i + KBN_LANES) - vm);
		}
		for (; i + KBN_LANES <= end; i += KBN_LANES) {
			kbn_v g = *(const kbn_vu *)(dy + i);
			p1 += g;
			p2 += g * (*(const kbn_vu *)(x + i) - vm);
		}
		a1 += kbn_hsum(p1 + q1);
		a2 += kbn_hsum(p2 + q2);
	}
	for (; i < n; i++) {
		a1 += dy[i];
		a2 += (double)dy[i] * (double)(x[i] - m);
	}
	*sdy += a1;
	*dot += a2;
}

/* g with zeros where r <= t (ReLU's backward, folded into batch norm's:
 * threshold_backward(g, r, t)) */
static inline kbn_v kbn_mask(kbn_v g, const float *r, kbn_v vt)
{
	kbn_vi le = *(const kbn_vu *)r <= vt;
	return (kbn_v)((kbn_vi)g & ~le);
}

/* bwd_sums_run of dy = threshold_backward(g, r, t) */
static void bwd_sums_masked_run(const float *g, const float *r, float t, const float *x, int64_t n, float m,
				double *sdy, double *dot)
{
	kbn_v vm = kbn_splat(m), vt = kbn_splat(t);
	int64_t i = 0;
	double a1 = 0, a2 = 0;
	while (i + KBN_LANES <= n) {
		kbn_v p1 = kbn_splat(0), p2 = kbn_splat(0);
		int64_t end = i + (int64_t)KBN_BLOCK * KBN_LANES;
		if (end > n)
			end = n;
		for (; i + KBN_LANES <= end; i += KBN_LANES) {
			kbn_v d = kbn_mask(*(const kbn_vu *)(g + i), r + i, vt);
			p1 += d;
			p2 += d * (*(const kbn_vu *)(x + i) - vm);
		}
		a1 += kbn_hsum(p1);
		a2 += kbn_hsum(p2);
	}
	for (; i < n; i++) {
		float d = r[i] <= t ? 0.0f : g[i];
		a1 += d;
		a2 += (double)d * (double)(x[i] - m);
	}
	*sdy += a1;
	*dot += a2;
}

/* bwd_dx_run of dy = threshold_backward(g, r, t) */
static void bwd_dx_masked_run(const float *g, const float *r, float t, const float *x, float *dx, int64_t n, float m,
			      float gm, float k, float s)
{
	kbn_v vm = kbn_splat(m), vg = kbn_splat(gm), vk = kbn_splat(k), vs = kbn_splat(s), vt = kbn_splat(t);
	int64_t i = 0;
	for (; i + KBN_LANES <= n; i += KBN_LANES) {
		kbn_v d = kbn_mask(*(const kbn_vu *)(g + i), r + i, vt), xv = *(const kbn_vu *)(x + i);
		*(kbn_vu *)(dx + i) = ((d - vg) - (xv - vm) * vk) * vs;
	}
	for (; i < n; i++) {
		float d = r[i] <= t ? 0.0f : g[i];
		dx[i] = ((d - gm) - (x[i] - m) * k) * s;
	}
}

/* dx = ((dy - gm) - (x - m) * k) * s, aten's training formula with s =
 * invstd * weight; the eval form is k = 0, gm = 0 */
static void bwd_dx_run(const float *dy, const float *x, float *dx, int64_t n, float m, float gm, float k, float s)
{
	kbn_v vm = kbn_splat(m), vg = kbn_splat(gm), vk = kbn_splat(k), vs = kbn_splat(s);
	int64_t i = 0;
	for (; i + KBN_LANES <= n; i += KBN_LANES) {
		kbn_v g = *(const kbn_vu *)(dy + i), xv = *(const kbn_vu *)(x + i);
		*(kbn_vu *)(dx + i) = ((g - vg) - (xv - vm) * vk) * vs;
	}
	for (; i < n; i++)
		dx[i] = ((dy[i] - gm) - (x[i] - m) * k) * s;
}

/* out = x <= t ? 0 : g (NaN in x keeps g, as aten) */
static void threshold_bwd_run(const float *g, const float *x, float *out, int64_t n, float t)
{
	kbn_v vt = kbn_splat(t);
	int64_t i = 0;
	for (; i + KBN_LANES <= n; i += KBN_LANES) {
		kbn_vi le = *(const kbn_vu *)(x + i) <= vt; /* all ones where true */
		*(kbn_vu *)(out + i) = (kbn_v)((kbn_vi) * (const kbn_vu *)(g + i) & ~le);
	}
	for (; i < n; i++)
		out[i] = x[i] <= t ? 0.0f : g[i];
}

const kbn_impl KBN_IMPL = {stats_run, apply_run, bwd_sums_run, bwd_dx_run, bwd_sums_masked_run, bwd_dx_masked_run,
			  threshold_bwd_run};
