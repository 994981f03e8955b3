/* textbuf.c - see textbuf.h. */
#include "runtime/textbuf.h"

#include <stdarg.h>
#include <stdio.h>

void rt_textbuf_put(rt_textbuf *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t room = o->len < o->size ? o->size - o->len : 0;
	int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}
