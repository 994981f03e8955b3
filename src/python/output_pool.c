/* output_pool.c - see output_pool.h. Every operation runs with the GIL held
 * (block allocation from a Python call, release from the object's
 * deallocation), which is the pool's lock. */
#include "output_pool.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Free blocks kept for reuse: at most this many, and this many bytes in
 * all; past either, the longest-held free block is unmapped first. The
 * cap holds an LLM's logits (1024 tokens x 32000 x 4 bytes is 131 MB:
 * glibc maps anything over 32 MiB afresh on every call, and a 41 MB one
 * took 12K page faults a call, 145-154 ms instead of 121-126 for its
 * GEMM), and a training step's activations: the forward returns every
 * tensor saved for backward, ResNet-50 at batch 4 about 150 outputs of 1
 * MiB and more a step. With 16 blocks and 256 MiB most of them were fresh
 * mappings, faulted in page by page on every step: 0.71-0.75x eager a
 * step, against 0.86x with 256 blocks and 1 GiB. */
enum { POOL_MAX_BLOCKS = 256 };
#define POOL_MAX_BYTES ((size_t)1 << 30)

typedef struct {
	void *p;
	size_t mapped; /* bytes mapped: a whole number of pages */
} pool_entry;

static pool_entry held[POOL_MAX_BLOCKS]; /* oldest first */
static int n_held;
static size_t held_bytes;
static unsigned long long reused, mapped_new;

static size_t page_round(size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (bytes + page - 1) / page * page;
}

static void drop_oldest(void)
{
	munmap(held[0].p, held[0].mapped);
	held_bytes -= held[0].mapped;
	n_held--;
	memmove(held, held + 1, sizeof held[0] * (size_t)n_held);
}

/* A block of at least `need` bytes: the smallest held one up to an eighth
 * larger (the most recently freed among equals: its pages are warmest), so
 * outputs whose sizes vary a little (a sequence a few tokens longer) reuse
 * blocks instead of leaving the pool full of sizes never asked for again;
 * else a new mapping. *got: the block's mapped bytes. */
static void *pool_take(size_t need, size_t *got)
{
	int best = -1;
	for (int i = n_held - 1; i >= 0; i--)
		if (held[i].mapped >= need && held[i].mapped - need <= need / 8 &&
		    (best < 0 || held[i].mapped < held[best].mapped))
			best = i;
	if (best >= 0) {
		void *p = held[best].p;
		*got = held[best].mapped;
		held_bytes -= *got;
		n_held--;
		memmove(held + best, held + best + 1, sizeof held[0] * (size_t)(n_held - best));
		reused++;
		return p;
	}
	void *p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	*got = need;
	mapped_new++;
	return p;
}

static void pool_give(void *p, size_t mapped)
{
	if (mapped > POOL_MAX_BYTES) {
		munmap(p, mapped);
		return;
	}
	while (n_held > 0 && (n_held == POOL_MAX_BLOCKS || held_bytes + mapped > POOL_MAX_BYTES))
		drop_oldest();
	held[n_held].p = p;
	held[n_held].mapped = mapped;
	n_held++;
	held_bytes += mapped;
}

/* ---- the buffer object ------------------------------------------------- */

typedef struct {
	PyObject_HEAD
	void *p;
	size_t bytes, mapped;
} Block;

static int block_getbuffer(PyObject *o, Py_buffer *view, int flags)
{
	Block *b = (Block *)o;
	return PyBuffer_FillInfo(view, o, b->p, (Py_ssize_t)b->bytes, 0, flags);
}

static void block_dealloc(PyObject *o)
{
	Block *b = (Block *)o;
	if (b->p)
		pool_give(b->p, b->mapped);
	Py_TYPE(o)->tp_free(o);
}

static PyBufferProcs block_as_buffer = {block_getbuffer, NULL};

static PyTypeObject BlockType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "torchair._C.OutputBlock",
	.tp_basicsize = sizeof(Block),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Memory of a model output, from the output pool; returns there when freed.",
	.tp_dealloc = block_dealloc,
	.tp_as_buffer = &block_as_buffer,
};

int output_pool_init(void)
{
	return PyType_Ready(&BlockType);
}

PyObject *output_pool_block(size_t bytes)
{
	size_t mapped;
	void *p = pool_take(page_round(bytes ? bytes : 1), &mapped);
	if (!p)
		return PyErr_NoMemory();
	Block *b = PyObject_New(Block, &BlockType);
	if (!b) {
		pool_give(p, mapped);
		return NULL;
	}
	b->p = p;
	b->bytes = bytes;
	b->mapped = mapped;
	return (PyObject *)b;
}

PyObject *output_pool_stats(void)
{
	return Py_BuildValue("(inKK)", n_held, (Py_ssize_t)held_bytes, reused, mapped_new);
}
