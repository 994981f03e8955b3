/* kernel.h - how the runtime calls a kernel: concrete tensors, resolved
 * attributes, the thread pool and a workspace. Shared by the reference
 * kernels (kernels/<family>/<name>_ref.c) and the fast ones. */
#ifndef AIR_KERNELS_COMMON_KERNEL_H
#define AIR_KERNELS_COMMON_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "air/air.h"
#include "platform/pool.h"

/* A dense row-major tensor with concrete dims. */
typedef struct k_tensor {
	void *data;
	air_dtype dtype;
	int rank;
	int64_t dims[AIR_MAX_RANK];
	int64_t numel;
} k_tensor;

/* What a constant input can be rebuilt from: W[o][...] = base[o][...] *
 * row_scale[o] (in double, rounded once), or base itself when row_scale is
 * NULL. base is caller memory that outlives the model (a borrowed constant,
 * or what fold_batchnorm scaled: ir_constant.row_base); NULL: no source. */
typedef struct k_const_source {
	const float *base;
	const double *row_scale;
} k_const_source;

/* An attribute with every symbolic dim already evaluated. */
typedef struct k_attr {
	int64_t i;
	double f;
	const int64_t *ints;
	int n;
} k_attr;

typedef struct k_call {
	const k_attr *attrs; /* the op's schema order */
	const k_tensor *in;
	int n_in;
	const k_tensor *out; /* data is writable */
	int n_out;
	rt_pool *pool;
	void *workspace;      /* k_kernel.workspace bytes, 64-byte aligned */
	const void *prepared; /* from k_kernel.prepare, or NULL */
	const bool *in_const; /* in_const[i]: input i is a constant */
	/* At prepare only (else NULL): in_source[i] for constant inputs, and
	 * whether the compile would rather spend a little time than memory
	 * (enable_memory_optimization): then a kernel may re-pack a weight
	 * from its source on every call instead of holding a packed copy. */
	const k_const_source *in_source;
	bool low_memory;
	/* AIR_COMPILE_WEIGHTS_IN_PLACE (implies low_memory): a kernel that reads
	 * the weight where the caller keeps it may be chosen though it is slower */
	bool weights_in_place;
} k_call;

typedef air_status (*k_run_fn)(const k_call *call);
/* Workspace bytes for these concrete shapes (data pointers not yet valid). */
typedef size_t (*k_workspace_fn)(const k_call *call, int nthreads);
/* Work done once per model (e.g. packing a constant weight). Only constant
 * inputs have data; others have data == NULL. */
typedef air_status (*k_prepare_fn)(const k_call *call, void **prepared);
typedef void (*k_release_fn)(void *prepared);
/* Can this kernel run this call (shapes, dtypes, attributes, constness)? */
typedef bool (*k_supports_fn)(const k_call *call);

/* What the memory plan may do with a kernel's output (k_kernel.flags). A
 * kernel says so only after its loops were read for it. */
enum k_kernel_flags {
	/* Its output may take over the buffer of any input of the output's
	 * size: every element i of that input is read before element i of the
	 * output is written, nothing is read ahead of what was written, and
	 * nothing is read again after. */
	K_INPLACE_ANY = 1u << 0,
	/* Its output may take over its fused residual's buffer (the last input
	 * when has_residual is set): each tile of the residual is read just
	 * before the same tile of the output is written, through the same
	 * pointer and row stride. */
	K_INPLACE_RESIDUAL = 1u << 1,
};

typedef struct k_kernel {
	const char *name; /* "conv2d_ref", "gemm_avx2", ... */
	unsigned isa;     /* KCPU_* bits it needs; 0 for portable */
	k_supports_fn supports; /* NULL: supports everything the op allows */
	k_prepare_fn prepare;   /* may be NULL */
	k_release_fn release;   /* may be NULL */
	k_workspace_fn workspace; /* may be NULL: none */
	k_run_fn run;
	unsigned flags; /* k_kernel_flags */
} k_kernel;

/* Number of elements of dims[0..rank). */
static inline int64_t k_numel(int rank, const int64_t *dims)
{
	int64_t n = 1;
	for (int i = 0; i < rank; i++)
		n *= dims[i];
	return n;
}

/* Every input and output is f32: what most fast kernels require. */
static inline bool k_all_f32(const k_call *call)
{
	for (int i = 0; i < call->n_in; i++)
		if (call->in[i].dtype != AIR_F32)
			return false;
	for (int o = 0; o < call->n_out; o++)
		if (call->out[o].dtype != AIR_F32)
			return false;
	return true;
}

/* n rounded up to a cache line: workspace slices never share one. */
static inline size_t k_align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

static inline int64_t k_min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* a / b rounded up, for a >= 0 and b > 0. */
static inline int64_t k_cdiv(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* Whether an optional input is there. Its has_<x> attribute is -1 by
 * default, meaning "decided by the number of inputs" (more than n_without
 * inputs: present); 0 or 1 say so explicitly and shape inference checks
 * that they agree with the count. */
static inline int kref_present(int64_t attr, int n_in, int n_without)
{
	return attr < 0 ? n_in > n_without : attr != 0;
}

/* Grain for parallel loops over elements: about this many per task. */
enum { K_GRAIN = 16384 };

#endif
