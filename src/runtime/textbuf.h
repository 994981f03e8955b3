/* textbuf.h - text written into a caller's buffer of fixed size, counting
 * what did not fit, so a first call with no buffer asks for the length (the
 * contract of air_model_dot and air_model_text). */
#ifndef AIR_RUNTIME_TEXTBUF_H
#define AIR_RUNTIME_TEXTBUF_H

#include <stddef.h>

typedef struct rt_textbuf {
	char *buf;
	size_t size, len; /* len counts what did not fit too */
} rt_textbuf;

/* printf into the buffer's room; the length grows by the full text. */
void rt_textbuf_put(rt_textbuf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
