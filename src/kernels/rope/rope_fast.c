/* rope_fast.c - the rope op's fast kernel: the reference driver with the
 * AVX2 row (kernels/rope/rope.avx2.c). A LLaMA layer's q and k: the
 * row ran scalar in the reference. */
#include "kernels/rope/rope_fast.h"

#include "kernels/common/cpu.h"
#include "kernels/rope/rope_ref.h"

static bool rope_supports(const k_call *call)
{
	(void)call;
#ifdef AIR_HAVE_X86
	return (kcpu_features() & KCPU_AVX2) != 0;
#else
	return false;
#endif
}

static air_status rope_run(const k_call *call)
{
#ifdef AIR_HAVE_X86
	return krope_run(call, krope_row__avx2);
#else
	return kref_rope(call);
#endif
}

const k_kernel kfast_rope = {"rope_avx2", 0, rope_supports, NULL, NULL, NULL, rope_run};
