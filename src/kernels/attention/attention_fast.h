/* attention_fast.h - fused scaled-dot-product attention (flash style): per
 * block of queries, a loop over blocks of keys with an online softmax, so
 * the [L, S] score matrix never exists. The driver (attention_fast.c) packs
 * blocks and keeps the running statistics; the three inner loops below come
 * per ISA (portable here, attention.avx2.c,
 * attention.avx512.c). */
#ifndef AIR_KERNELS_ATTENTION_ATTENTION_FAST_H
#define AIR_KERNELS_ATTENTION_ATTENTION_FAST_H

#include <math.h>
#include <stdint.h>

#include "kernels/common/kernel.h"

extern const k_kernel kfast_sdpa_flash;

enum {
	KATT_BK = 64,  /* keys per block */
	KATT_BQ = 64,  /* most queries per task */
	KATT_PAD = 16, /* packed rows are padded to this many floats (every ISA's vector width divides it) */
	KATT_MR = 6,   /* rows per register tile in the inner loops */
};

/* Softmax weights e^d (d = x - running max <= 0) below e^KATT_EXP_FLOOR
 * are subnormal in f32: computing them cost a microcode assist per lane
 * (BERT's padded keys, masked with finfo.min, made sdpa 1.5x slower), and
 * next to the row's largest weight, 1, they are below f32's precision
 * anyway. So they are 0, on every ISA. e^-87 is still a normal number. */
#define KATT_EXP_FLOOR (-87.0f)

/* The scalar weight: 0 below the floor (and for -inf); NaN stays NaN. */
static inline float katt_weight(float d)
{
	return d < KATT_EXP_FLOOR ? 0.0f : expf(d);
}

/* The inner loops, all on f32. np is the padded key count of the block (a
 * multiple of KATT_PAD, at most KATT_BK), evp the padded value width (a
 * multiple of KATT_PAD). */
typedef struct katt_ops {
	const char *name;
	/* s[i * np + j] = sum_e q[i * ldq + e] * kt[e * np + j], i < rows, j < np */
	void (*qk)(const float *q, int64_t ldq, int rows, int64_t E, const float *kt, int np, float *s);
	/* One row of scores s[0..np): x_j = scale * s_j (+ madd[j]) for j < n,
	 * -inf where mbool[j] == 0 or j >= n (madd, mbool may be NULL; they
	 * have n readable entries). Online softmax step on the running max *m
	 * and sum *l: s becomes p_j = exp(x_j - m'), and *alpha = exp(m - m')
	 * rescales the old accumulator. A row with every x_j = -inf leaves m
	 * and l alone, gives p = 0 and alpha = 1. NaN propagates. Weights
	 * below e^KATT_EXP_FLOOR are 0 (p and alpha alike). */
	void (*softmax)(float *s, int np, int n, float scale, const float *madd, const uint8_t *mbool, float *m,
			float *l, float *alpha);
	/* softmax for rows rows of s (np apart) at once, each with n keys and
	 * its mask row (madd or mbool, may be NULL) ml entries after the
	 * previous row's; m, l, alpha per row. NULL where an ISA has no such
	 * loop (then softmax runs row by row). */
	void (*softmax_rows)(float *s, int np, int rows, int n, float scale, const float *madd, const uint8_t *mbool,
			     int64_t ml, float *m, float *l, float *alpha);
	/* o[i * evp + c] = alpha[i] * o[i * evp + c] + sum_{j < bk} p[i * np + j] * vp[j * ldv + c] */
	void (*pv)(const float *p, int np, int rows, int bk, const float *vp, int64_t ldv, int evp, float *o,
		   const float *alpha);
} katt_ops;

extern const katt_ops katt_ops_portable;
#ifdef AIR_HAVE_X86
extern const katt_ops katt_ops_avx2, katt_ops_avx512;
#endif

/* The ops for this CPU (kcpu_features(), so AIR_ISA applies). */
const katt_ops *katt_ops_best(void);

#endif
