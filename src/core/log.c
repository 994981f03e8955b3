/* log.c - the one log callback and level (air_set_log_callback). The state
 * is process-wide and set before models compile or run (air.h), so plain
 * loads suffice; relaxed atomics keep sanitizers quiet about the rare set
 * from another thread. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static _Atomic(air_log_fn) callback;
static void *_Atomic callback_user;
static _Atomic int level = AIR_LOG_WARNING;

void air_set_log_callback(air_log_fn fn, void *user)
{
	callback_user = user;
	callback = fn;
}

void air_set_log_level(air_log_level l)
{
	if (l < AIR_LOG_ERROR)
		l = AIR_LOG_ERROR;
	if (l > AIR_LOG_DEBUG)
		l = AIR_LOG_DEBUG;
	level = (int)l;
}

air_log_level air_get_log_level(void)
{
	return (air_log_level)level;
}

bool air_log_enabled(air_log_level l)
{
	return callback != NULL && (int)l <= level;
}

void air_log(air_log_level l, const char *fmt, ...)
{
	air_log_fn fn = callback;
	if (!fn || (int)l > level)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fn(l, msg, callback_user);
}
