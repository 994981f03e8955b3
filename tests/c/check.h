/* check.h - a tiny test harness for the C tests: CHECK keeps going and
 * counts, the process exits non-zero if anything failed. */
#ifndef AIR_TESTS_CHECK_H
#define AIR_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures, check_count;

#define CHECK(cond)                                                              \
	do {                                                                     \
		check_count++;                                                   \
		if (!(cond)) {                                                   \
			check_failures++;                                        \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                \
	} while (0)

#define CHECK_OK(expr)                                                           \
	do {                                                                     \
		check_count++;                                                   \
		air_status check_st_ = (expr);                                   \
		if (check_st_ != AIR_OK) {                                       \
			check_failures++;                                        \
			fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr, \
				air_status_string(check_st_), air_last_error()); \
		}                                                                \
	} while (0)

#define CHECK_NEAR(a, b, tol)                                                    \
	do {                                                                     \
		check_count++;                                                   \
		double check_a_ = (a), check_b_ = (b);                           \
		if (!(fabs(check_a_ - check_b_) <= (tol))) {                     \
			check_failures++;                                        \
			fprintf(stderr, "%s:%d: %s = %g, %s = %g, tol %g\n", __FILE__, __LINE__, #a, \
				check_a_, #b, check_b_, (double)(tol));          \
		}                                                                \
	} while (0)

static inline int check_report(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
	return check_failures ? 1 : 0;
}

#endif
