/* pyair.h - what the files of torchair._C share: the Error exception and
 * raising it, reading int sequences, the two type objects, making a Model. */
#ifndef AIR_PYTHON_PYAIR_H
#define AIR_PYTHON_PYAIR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "air/air.h"

extern PyObject *Error; /* torchair._C.Error, a RuntimeError; made by PyInit__C */

/* Raises Error with args (status code, status name, libair's last error);
 * returns NULL. */
PyObject *raise_status(air_status st);

/* Raises Error with args (status code, status name, formatted message), the
 * same shape as the errors that come from libair; returns NULL. */
PyObject *raise_msg(air_status st, const char *fmt, ...);

/* Reads a sequence of ints into out[0..n), at most max. */
int read_ints(PyObject *seq, int64_t *out, int max, int *n);

extern PyTypeObject GraphType; /* torchair._C.Graph (graph_type.c) */

typedef struct {
	PyObject_HEAD air_graph *g;
	PyObject *owners; /* list: objects whose memory borrowed constants use */
} GraphObject;

/* .air files (air_file.c): Graph.save, the File type, and the module's
 * open_file / load / load_graph. */
extern PyTypeObject FileType;
PyObject *graph_save(PyObject *self, PyObject *args, PyObject *kw);
#define GRAPH_SAVE_DOC                                                                                      \
	"save(path=None, meta=None, externals=None, output_names=None, flags=0, num_threads=0, "           \
	"fusion_threshold=0, disabled_passes=0) -> bytes, or None when path is given.\n"                    \
	"Saves the graph as a .air file (written atomically). meta: dict of str -> str. externals: dict "   \
	"name -> constant value id, saved as dtype and dims only. The compile arguments are the defaults "  \
	"a loader uses."
extern PyMethodDef air_file_methods[]; /* open_file, load, load_graph: added to the module */
extern PyTypeObject ModelType; /* torchair._C.Model (model_type.c) */

/* A Model over the compiled m, which it takes (destroyed on failure too):
 * it keeps a copy of graph_owners (the graph's list of objects whose memory
 * borrowed constants use), the dtypes per input and output, and empty. NULL
 * with a Python error set on failure. */
PyObject *model_new(air_model *m, PyObject *graph_owners, PyObject *in_dt, PyObject *out_dt, PyObject *empty);

/* Interns the attribute names Model reads from tensors. */
void model_intern_names(void);

#endif
