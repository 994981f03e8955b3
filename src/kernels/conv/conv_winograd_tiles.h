/* conv_winograd_tiles.h - the per-tile transforms of the Winograd
 * F(2x2, 3x3) convolution (kernels/conv/conv_winograd.c), written once in plain
 * C with GNU vectors of 8 floats and compiled per ISA: portable in
 * conv_winograd.c, and in conv_winograd_tiles.avx2.c (CMake gives *.avx2.c files their flags).
 * Without AVX, GCC keeps 8-float vectors in memory: the transforms took
 * 0.4-0.7 ms of a 1.5 ms convolution (64 channels at 56x56); compiled for
 * AVX2, 0.1 ms. Include it after defining KWINO_SUFFIX to emit them. */
#ifndef AIR_KERNELS_CONV_CONV_WINOGRAD_TILES_H
#define AIR_KERNELS_CONV_CONV_WINOGRAD_TILES_H

#include <stdint.h>

#include "kernels/common/epilogue.h"

/* One tile's row of V ([16][C], transform k = i * 4 + j at k * C) from its
 * 4x4 input patch: d[i * 4 + j] points at the C channels of patch pixel
 * (i, j) (a zero row outside the image). V = B^T d B. */
typedef void (*kwino_input_fn)(const float *const *d, int64_t C, float *v);
/* One tile's 2x2 output pixels from its row of M ([16][O]): Y = A^T M A,
 * plus bias (or NULL) and residual res[q] (or NULL), then act (a simple
 * one), into y[q] (NULL: pixel q is past the image's edge). */
typedef void (*kwino_output_fn)(const float *m, int64_t O, float *const *y, const float *const *res,
				const float *bias, k_act act);

#define KWINO_DECLARE(sfx)                                                                       \
	void kwino_input__##sfx(const float *const *d, int64_t C, float *v);                     \
	void kwino_output__##sfx(const float *m, int64_t O, float *const *y, const float *const *res, \
				 const float *bias, k_act act);
KWINO_DECLARE(portable)
KWINO_DECLARE(avx2)

#endif

#ifdef KWINO_SUFFIX
#define KWINO_CAT2(a, b) a##__##b
#define KWINO_CAT(a, b) KWINO_CAT2(a, b)
#define KWINO_FN(name) KWINO_CAT(name, KWINO_SUFFIX)

#include <string.h>

#include "kernels/gemm/ukernel.h" /* kgemm_act_simple_f32 */

/* Eight floats, loaded and stored unaligned (GCC splits them where the
 * target has no 256-bit vectors). Macros: a function returning one would
 * change the ABI with and without AVX. */
typedef float kwino_v8f __attribute__((vector_size(32)));
typedef int32_t kwino_v8i __attribute__((vector_size(32)));
#define v8f kwino_v8f
#define v8i kwino_v8i
#define ld8(p)                                   \
	({                                       \
		v8f v_;                          \
		memcpy(&v_, (p), sizeof v_);     \
		v_;                              \
	})
#define st8(p, x)                                \
	do {                                     \
		v8f x_ = (x);                    \
		memcpy((p), &x_, sizeof x_);     \
	} while (0)

/* B^T d B for 8 (or, in the scalar tail, 1) channels: d[i * 4 + j] is the
 * patch's row i, column j; v[(i * 4 + j) * C] gets the result. B^T's rows:
 * d0 - d2, d1 + d2, d2 - d1, d1 - d3. */
#define WINO_INPUT(T, LD, ST)                                                                    \
	do {                                                                                     \
		T s[4][4];                                                                       \
		for (int jj = 0; jj < 4; jj++) {                                                 \
			T d0 = LD(d[jj] + ci), d1 = LD(d[4 + jj] + ci), d2 = LD(d[8 + jj] + ci); \
			T d3 = LD(d[12 + jj] + ci);                                              \
			s[0][jj] = d0 - d2;                                                      \
			s[1][jj] = d1 + d2;                                                      \
			s[2][jj] = d2 - d1;                                                      \
			s[3][jj] = d1 - d3;                                                      \
		}                                                                                \
		for (int i = 0; i < 4; i++) {                                                    \
			ST(v + (i * 4 + 0) * C + ci, s[i][0] - s[i][2]);                         \
			ST(v + (i * 4 + 1) * C + ci, s[i][1] + s[i][2]);                         \
			ST(v + (i * 4 + 2) * C + ci, s[i][2] - s[i][1]);                         \
			ST(v + (i * 4 + 3) * C + ci, s[i][1] - s[i][3]);                         \
		}                                                                                \
	} while (0)

#define LD1(p) (*(p))
#define ST1(p, x) (*(p) = (x))

void KWINO_FN(kwino_input)(const float *const *d, int64_t C, float *v)
{
	int64_t ci = 0;
	for (; ci + 8 <= C; ci += 8)
		WINO_INPUT(v8f, ld8, st8);
	for (; ci < C; ci++)
		WINO_INPUT(float, LD1, ST1);
}

/* A^T m A for 8 (or 1) output channels from m[(i * 4 + j) * O]; A^T's
 * rows [1 1 1 0] and [0 1 -1 -1]. Gives the 2x2 pixels in out[0..3]. */
#define WINO_OUTPUT(T, LD)                                                                               \
	do {                                                                                             \
		T s0[4], s1[4];                                                                          \
		for (int jj = 0; jj < 4; jj++) {                                                         \
			T m0 = LD(m + jj * O + o), m1 = LD(m + (4 + jj) * O + o);                        \
			T m2 = LD(m + (8 + jj) * O + o), m3 = LD(m + (12 + jj) * O + o);                 \
			s0[jj] = m0 + m1 + m2;                                                           \
			s1[jj] = m1 - m2 - m3;                                                           \
		}                                                                                        \
		out[0] = s0[0] + s0[1] + s0[2];                                                          \
		out[1] = s0[1] - s0[2] - s0[3];                                                          \
		out[2] = s1[0] + s1[1] + s1[2];                                                          \
		out[3] = s1[1] - s1[2] - s1[3];                                                          \
	} while (0)

void KWINO_FN(kwino_output)(const float *m, int64_t O, float *const *y, const float *const *res,
			      const float *bias, k_act act)
{
	int64_t o = 0;
	if (act == K_ACT_NONE || act == K_ACT_RELU) {
		const v8f zero8 = {0};
		for (; o + 8 <= O; o += 8) {
			v8f out[4];
			WINO_OUTPUT(v8f, ld8);
			v8f b = bias ? ld8(bias + o) : zero8;
			for (int q = 0; q < 4; q++) {
				if (!y[q])
					continue;
				v8f r = out[q] + b;
				if (res[q])
					r += ld8(res[q] + o);
				if (act == K_ACT_RELU) /* lanes below 0 to 0; NaN stays NaN, as in torch */
					r = (v8f)((v8i)r & ~(v8i)(r < zero8));
				st8(y[q] + o, r);
			}
		}
	}
	for (; o < O; o++) {
		float out[4];
		WINO_OUTPUT(float, LD1);
		float b = bias ? bias[o] : 0.0f;
		for (int q = 0; q < 4; q++) {
			if (!y[q])
				continue;
			float r = out[q] + b;
			if (res[q])
				r += res[q][o];
			y[q][o] = kgemm_act_simple_f32(r, act);
		}
	}
}

#undef v8f
#undef v8i
#undef ld8
#undef st8
#undef LD1
#undef ST1
#undef WINO_INPUT
#undef WINO_OUTPUT
#endif
