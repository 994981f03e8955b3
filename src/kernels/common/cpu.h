/* cpu.h - CPU features, detected once from CPUID, that pick the kernels. */
#ifndef AIR_KERNELS_COMMON_CPU_H
#define AIR_KERNELS_COMMON_CPU_H

#include <stddef.h>

enum {
	KCPU_AVX2 = 1u << 0, /* AVX2 + FMA3 (+ OS support for YMM state) */
	KCPU_AVX512F = 1u << 1,
	KCPU_AVX512BW = 1u << 2,
	KCPU_AVX512VL = 1u << 3,
	KCPU_AVX512BF16 = 1u << 4,
	KCPU_AVX512VNNI = 1u << 5,
	KCPU_F16C = 1u << 6,
	KCPU_AVX512DQ = 1u << 7,
	KCPU_AMXTILE = 1u << 8, /* AMX-TILE with the OS's leave to use tile data */
	KCPU_AMXBF16 = 1u << 9,
	/* what the AVX-512 kernels (compiled with -mavx512f/bw/vl/dq) need */
	KCPU_AVX512 = KCPU_AVX2 | KCPU_AVX512F | KCPU_AVX512BW | KCPU_AVX512VL | KCPU_AVX512DQ,
	/* what the AMX GEMM (kernels/gemm/amx.h) needs */
	KCPU_AMX = KCPU_AVX512 | KCPU_AVX512BF16 | KCPU_AMXTILE | KCPU_AMXBF16,
};

/* Features of this CPU, less those disabled by AIR_ISA:
 *   AIR_ISA=scalar  portable C only
 *   AIR_ISA=avx2    at most AVX2+FMA
 *   AIR_ISA=avx512  at most AVX-512 (no AMX)
 *   AIR_ISA=amx     everything detected (the default)
 * Read once; later changes of the variable have no effect. */
unsigned kcpu_features(void);

/* Features detected from CPUID, ignoring AIR_ISA. */
unsigned kcpu_detected(void);

/* A short name of the widest ISA in kcpu_features(): "amx" (AVX-512 with
 * AMX, which the GEMM uses), "avx512", "avx2" or "scalar". */
const char *kcpu_isa_name(void);

/* The CPU's brand string from CPUID ("AMD EPYC 9R14 ..."), or "unknown";
 * always terminated. What the autotuner's cache is keyed by, with the ISA. */
void kcpu_brand(char *buf, size_t size);

#endif
