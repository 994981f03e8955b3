/* error.h - air_status values with a thread-local message (errors are values,
 * never abort()). */
#ifndef AIR_CORE_ERROR_H
#define AIR_CORE_ERROR_H

#include "air/air.h"

/* Sets the calling thread's message (printf-style) and returns status. */
air_status air_error(air_status status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Prefixes the thread's current message with "where: ", keeping the status. */
air_status air_error_context(air_status status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void air_error_clear(void);

#define AIR_TRY(expr)                          \
	do {                                   \
		air_status air_try_st_ = (expr);   \
		if (air_try_st_ != AIR_OK)         \
			return air_try_st_;        \
	} while (0)

#endif
