/* error.c - the thread-local error message behind air_last_error(). */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char message[1024];

air_status air_error(air_status status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	return status;
}

air_status air_error_context(air_status status, const char *fmt, ...)
{
	char prefix[256], old[sizeof message];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	memcpy(old, message, sizeof old);
	snprintf(message, sizeof message, "%.255s: %.760s", prefix, old);
	return status;
}

void air_error_clear(void)
{
	message[0] = '\0';
}

const char *air_last_error(void)
{
	return message;
}

const char *air_status_string(air_status status)
{
	switch (status) {
	case AIR_OK: return "ok";
	case AIR_INVALID_ARGUMENT: return "invalid argument";
	case AIR_UNSUPPORTED: return "unsupported";
	case AIR_SHAPE_MISMATCH: return "shape mismatch";
	case AIR_DTYPE_MISMATCH: return "dtype mismatch";
	case AIR_OUT_OF_MEMORY: return "out of memory";
	case AIR_INVALID_GRAPH: return "invalid graph";
	case AIR_INVALID_STATE: return "invalid state";
	case AIR_BAD_FILE: return "bad file";
	case AIR_INTERNAL: return "internal error";
	}
	return "unknown status";
}
