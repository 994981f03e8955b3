/* pyair.c - helpers the files of torchair._C share (see pyair.h): the Error
 * exception and raising it, reading a sequence of ints. */
#include "pyair.h"

#include <stdarg.h>

PyObject *Error; /* torchair._C.Error, a RuntimeError */

PyObject *raise_status(air_status st)
{
	PyObject *args = Py_BuildValue("(iss)", (int)st, air_status_string(st), air_last_error());
	if (args) {
		PyErr_SetObject(Error, args);
		Py_DECREF(args);
	}
	return NULL;
}

/* Raises Error with args (status code, status name, formatted message), the
 * same shape as the errors that come from libair. */
PyObject *raise_msg(air_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
	va_end(ap);
	if (!msg)
		return NULL;
	PyObject *args = Py_BuildValue("(isN)", (int)st, air_status_string(st), msg);
	if (args) {
		PyErr_SetObject(Error, args);
		Py_DECREF(args);
	}
	return NULL;
}

/* Reads a sequence of ints into out[0..n), at most max. */
int read_ints(PyObject *seq, int64_t *out, int max, int *n)
{
	PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
	if (!fast)
		return -1;
	Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
	if (len > max) {
		Py_DECREF(fast);
		PyErr_Format(PyExc_ValueError, "at most %d ints, got %zd", max, len);
		return -1;
	}
	for (Py_ssize_t i = 0; i < len; i++) {
		long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
		if (v == -1 && PyErr_Occurred()) {
			Py_DECREF(fast);
			return -1;
		}
		out[i] = v;
	}
	*n = (int)len;
	Py_DECREF(fast);
	return 0;
}
