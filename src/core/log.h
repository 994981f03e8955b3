/* log.h - libair's messages at levels, delivered through the one callback
 * of air_set_log_callback (core/log.c). */
#ifndef AIR_CORE_LOG_H
#define AIR_CORE_LOG_H

#include <stdbool.h>

#include "air/air.h"

/* Is a message at level delivered? (cheap: callers test it before building
 * costly text). */
bool air_log_enabled(air_log_level level);

/* Formats and delivers a message at level, if enabled. */
void air_log(air_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
