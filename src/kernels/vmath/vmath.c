/* vmath.c - the portable array kernels of vmath.h and the table that picks,
 * once, the widest variant this CPU runs (AVX-512 where a function has one,
 * AVX2+FMA, then portable C). */
#include "kernels/vmath/vmath.h"

#include <pthread.h>
#include <string.h>

#include "kernels/common/cpu.h"
#include "kernels/vmath/vmath_impl.h"
#include "kernels/vmath/vmath_scalar.h"

#define KV_SCALAR_LOOP_(name, doc)                                         \
	void kv_##name##_f32_scalar(const float *x, float *y, int64_t n)   \
	{                                                                  \
		for (int64_t i = 0; i < n; i++)                            \
			y[i] = kv_##name##1(x[i]);                         \
	}
KV_FUNCS(KV_SCALAR_LOOP_)
#undef KV_SCALAR_LOOP_

static const char *const names[KV_FUNC_COUNT] = {
#define KV_NAME_(name, doc) #name,
	KV_FUNCS(KV_NAME_)
#undef KV_NAME_
};

static const kv_unary_f32 scalar_table[KV_FUNC_COUNT] = {
#define KV_SCALAR_(name, doc) kv_##name##_f32_scalar,
	KV_FUNCS(KV_SCALAR_)
#undef KV_SCALAR_
};

#ifdef AIR_HAVE_X86
static const kv_unary_f32 avx2_table[KV_FUNC_COUNT] = {
#define KV_AVX2_(name, doc) kv_##name##_f32_avx2,
	KV_FUNCS(KV_AVX2_)
#undef KV_AVX2_
};

/* the AVX2 table with the AVX-512 kernels in (filled once, by choose) */
static kv_unary_f32 avx512_table[KV_FUNC_COUNT];
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const kv_unary_f32 *table = scalar_table;
static const char *table_isa = "scalar";

static void choose(void)
{
#ifdef AIR_HAVE_X86
	memcpy(avx512_table, avx2_table, sizeof avx512_table);
#define KV_AVX512_(name) avx512_table[KV_##name] = kv_##name##_f32_avx512;
	KV_AVX512_FUNCS(KV_AVX512_)
#undef KV_AVX512_
	const unsigned have = kcpu_features();
	if ((have & KCPU_AVX512) == KCPU_AVX512) {
		table = avx512_table;
		table_isa = "avx512";
	} else if (have & KCPU_AVX2) {
		table = avx2_table;
		table_isa = "avx2";
	}
#endif
}

static const kv_unary_f32 *chosen(void)
{
	pthread_once(&once, choose);
	return table;
}

#define KV_DISPATCH_(name, doc)                                         \
	void kv_##name##_f32(const float *x, float *y, int64_t n)       \
	{                                                               \
		chosen()[KV_##name](x, y, n);                           \
	}
KV_FUNCS(KV_DISPATCH_)
#undef KV_DISPATCH_

kv_unary_f32 kv_unary(kv_func f)
{
	if ((unsigned)f >= KV_FUNC_COUNT)
		return NULL;
	return chosen()[f];
}

kv_unary_f32 kv_unary_isa(kv_func f, const char *isa)
{
	if ((unsigned)f >= KV_FUNC_COUNT || !isa)
		return NULL;
	if (strcmp(isa, "scalar") == 0)
		return scalar_table[f];
#ifdef AIR_HAVE_X86
	if (strcmp(isa, "avx2") == 0)
		return avx2_table[f];
	if (strcmp(isa, "avx512") == 0)
		return chosen() ? avx512_table[f] : NULL; /* (filled by choose) */
#endif
	return NULL;
}

const char *kv_func_name(kv_func f)
{
	return (unsigned)f < KV_FUNC_COUNT ? names[f] : "?";
}

const char *kv_isa_name(void)
{
	chosen();
	return table_isa;
}
