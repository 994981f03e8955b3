/* cpu.c - CPUID and XGETBV probing, and the AIR_ISA override used by tests
 * to force the AVX2 and portable paths on machines that have more. */
#include "kernels/common/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* Linux lets a process use AMX tile data only once it has asked
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); the leave is the
 * whole process's, its threads' too. */
static int amx_permitted(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
	return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
	return 0;
#endif
}

static unsigned long long xgetbv0(void)
{
	unsigned eax, edx;
	__asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
	return ((unsigned long long)edx << 32) | eax;
}

static unsigned probe(void)
{
	unsigned a, b, c, d, f = 0;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
	int f16c = (c >> 29) & 1;
	if (!osxsave || !avx)
		return 0;
	unsigned long long xcr0 = xgetbv0();
	int ymm_ok = (xcr0 & 0x6) == 0x6;
	int zmm_ok = (xcr0 & 0xe6) == 0xe6;
	if (!ymm_ok)
		return 0;
	if (f16c)
		f |= KCPU_F16C;
	if (__get_cpuid_max(0, NULL) < 7)
		return f;
	__cpuid_count(7, 0, a, b, c, d);
	if (((b >> 5) & 1) && fma)
		f |= KCPU_AVX2;
	if (zmm_ok && ((b >> 16) & 1)) {
		f |= KCPU_AVX512F;
		if ((b >> 17) & 1)
			f |= KCPU_AVX512DQ;
		if ((b >> 30) & 1)
			f |= KCPU_AVX512BW;
		if ((b >> 31) & 1)
			f |= KCPU_AVX512VL;
		if ((c >> 11) & 1)
			f |= KCPU_AVX512VNNI;
		unsigned a1, b1, c1, d1;
		__cpuid_count(7, 1, a1, b1, c1, d1);
		if ((a1 >> 5) & 1)
			f |= KCPU_AVX512BF16;
		/* AMX: CPUID, tile state enabled in XCR0 (bits 17, 18), the OS's leave */
		int tile = (d >> 24) & 1, bf16 = (d >> 22) & 1;
		if (tile && bf16 && (xcr0 & 0x60000) == 0x60000 && amx_permitted())
			f |= KCPU_AMXTILE | KCPU_AMXBF16;
	}
	return f;
}
#else
static unsigned probe(void)
{
	return 0;
}
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned detected, enabled;

static void init(void)
{
	detected = probe();
	enabled = detected;
	const char *isa = getenv("AIR_ISA");
	if (isa && strcmp(isa, "scalar") == 0)
		enabled = 0;
	else if (isa && strcmp(isa, "avx2") == 0)
		enabled &= KCPU_AVX2 | KCPU_F16C;
	else if (isa && strcmp(isa, "avx512") == 0)
		enabled &= ~(unsigned)(KCPU_AMXTILE | KCPU_AMXBF16);
}

unsigned kcpu_features(void)
{
	pthread_once(&once, init);
	return enabled;
}

unsigned kcpu_detected(void)
{
	pthread_once(&once, init);
	return detected;
}

const char *kcpu_isa_name(void)
{
	unsigned f = kcpu_features();
	if ((f & KCPU_AMX) == KCPU_AMX)
		return "amx";
	if (f & KCPU_AVX512F)
		return "avx512";
	if (f & KCPU_AVX2)
		return "avx2";
	return "scalar";
}

void kcpu_brand(char *buf, size_t size)
{
	if (!buf || size == 0)
		return;
	snprintf(buf, size, "unknown");
#if defined(__x86_64__) || defined(__i386__)
	unsigned r[12];
	if (__get_cpuid_max(0x80000000u, NULL) < 0x80000004u)
		return;
	for (unsigned i = 0; i < 3; i++)
		__cpuid(0x80000002u + i, r[4 * i], r[4 * i + 1], r[4 * i + 2], r[4 * i + 3]);
	char s[49];
	memcpy(s, r, 48);
	s[48] = 0;
	const char *p = s;
	while (*p == ' ')
		p++;
	snprintf(buf, size, "%s", p);
#endif
}
