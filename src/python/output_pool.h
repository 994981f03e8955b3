/* output_pool.h - memory for large model outputs that stays mapped between
 * calls, handed to torch as buffer objects (torch.frombuffer).
 *
 * A model's output is a fresh tensor each call. From malloc, a large one
 * lands where the heap was just trimmed (glibc returns the top of the heap
 * after any big free, eager ops' scratch included) or in a fresh mapping,
 * and the kernel writing it takes a page fault every 4 KiB: 750-780 faults
 * for a 3.2 MB conv output right after an eager op, which made the
 * ResNet-50 stem 3.4 ms instead of 2.2 and 64>256 1x1 at 56x56 2.4 ms
 * instead of 1.1. Outputs over 32 MiB are mapped afresh by glibc on every
 * call: an LM head's 41 MB of logits took 12K faults a call (145-154 ms,
 * 121-126 from the pool). A block returned to the pool (its tensor freed)
 * keeps its pages for the next call's output of the same size. */
#ifndef AIR_PYTHON_OUTPUT_POOL_H
#define AIR_PYTHON_OUTPUT_POOL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Readies the block type; 0 on success, -1 with a Python error set. */
int output_pool_init(void);

/* A writable buffer object of exactly bytes bytes (page-aligned, contents
 * undefined), from the pool when it holds a free block of that many pages
 * up to an eighth more, else newly mapped. Its memory goes back to the pool when the
 * object is freed (when the last tensor over it is). NULL with a Python
 * error set on failure. The GIL guards the pool. */
PyObject *output_pool_block(size_t bytes);

/* (free blocks held, bytes held, blocks reused, blocks mapped) so far. */
PyObject *output_pool_stats(void);

#endif
