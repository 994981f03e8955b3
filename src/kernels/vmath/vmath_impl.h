/* vmath_impl.h - the per-ISA array kernels behind vmath.h, declared for the
 * dispatch table in vmath.c and for tests and benchmarks that compare ISAs.
 * Callers outside kernels/ use vmath.h. */
#ifndef AIR_KERNELS_VMATH_VMATH_IMPL_H
#define AIR_KERNELS_VMATH_VMATH_IMPL_H

#include "kernels/vmath/vmath.h"

#define KV_DECL_ISA_(name, doc)                                                 \
	void kv_##name##_f32_scalar(const float *x, float *y, int64_t n);    \
	void kv_##name##_f32_avx2(const float *x, float *y, int64_t n);
KV_FUNCS(KV_DECL_ISA_)
#undef KV_DECL_ISA_

/* The functions with an AVX-512 kernel (vmath.avx512.c): the
 * activations models spend time in. The others run their AVX2 kernel on
 * AVX-512 machines. */
#define KV_AVX512_FUNCS(X) X(exp) X(tanh) X(sigmoid) X(silu) X(gelu) X(gelu_tanh)

#define KV_DECL_AVX512_(name) void kv_##name##_f32_avx512(const float *x, float *y, int64_t n);
KV_AVX512_FUNCS(KV_DECL_AVX512_)
#undef KV_DECL_AVX512_

/* The kernel table of one ISA ("scalar" always; "avx2" and "avx512" only on
 * x86 builds, and only safe to call when kcpu_features() has KCPU_AVX2,
 * KCPU_AVX512). "avx512" gives the AVX2 kernel of a function without an
 * AVX-512 one. NULL entries for an ISA that was not built. */
kv_unary_f32 kv_unary_isa(kv_func f, const char *isa);

#endif
