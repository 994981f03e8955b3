/* vmath.h - elementwise f32 math over arrays (exp, log, tanh, erf, sigmoid,
 * gelu, silu, sin, cos, rsqrt), each within a few ulp of the exact result
 * over all inputs, with PyTorch's answers for NaN, infinities and the tails.
 * The kernel behind each function (AVX-512, AVX2+FMA or portable C) is
 * chosen once from kcpu_features(); the bounds measured are in
 * test_vmath.c (the AVX-512 kernels give bitwise the AVX2 ones' results). */
#ifndef AIR_KERNELS_VMATH_VMATH_H
#define AIR_KERNELS_VMATH_VMATH_H

#include <stdint.h>

/* The functions, in one list: X(name, what it computes). Everything else
 * (the enum, names, kernel tables) is generated from it. */
#define KV_FUNCS(X)                                                  \
	X(exp, "e^x")                                                \
	X(log, "natural log; NaN below 0, -inf at 0")                \
	X(tanh, "tanh")                                              \
	X(erf, "erf")                                                \
	X(sigmoid, "1 / (1 + e^-x)")                                 \
	X(gelu, "x/2 (1 + erf(x / sqrt 2)); accurate in the tail")   \
	X(gelu_tanh, "x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))") \
	X(silu, "x sigmoid(x)")                                      \
	X(sin, "sin")                                                \
	X(cos, "cos")                                                \
	X(rsqrt, "1 / sqrt x, correctly rounded or nearly")

typedef enum kv_func {
#define KV_ENUM_(name, doc) KV_##name,
	KV_FUNCS(KV_ENUM_)
#undef KV_ENUM_
	KV_FUNC_COUNT
} kv_func;

/* y[i] = f(x[i]) for i in [0, n). x == y (in place) is allowed; other
 * overlaps are not. n <= 0 does nothing. No alignment needed. */
typedef void (*kv_unary_f32)(const float *x, float *y, int64_t n);

#define KV_DECL_(name, doc) void kv_##name##_f32(const float *x, float *y, int64_t n);
KV_FUNCS(KV_DECL_)
#undef KV_DECL_

/* The kernel chosen for f on this machine (for loops that call it per tile
 * without the extra indirection); NULL for an invalid f. */
kv_unary_f32 kv_unary(kv_func f);

/* "exp", "gelu_tanh", ...; "?" for an invalid f. */
const char *kv_func_name(kv_func f);

/* "avx512", "avx2" or "scalar": the kernel set in use ("avx512": the
 * AVX-512 kernels where a function has one, the AVX2 ones elsewhere). */
const char *kv_isa_name(void);

#endif
