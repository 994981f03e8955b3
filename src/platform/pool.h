/* pool.h - the runtime's own thread pool: persistent pthread workers that
 * spin briefly, then sleep, and run fork-join parallel loops for kernels.
 * When the host lends its threads (air_set_parallel_runner), loops go to
 * the host's runner instead, with the same slot indices and semantics. */
#ifndef AIR_PLATFORM_POOL_H
#define AIR_PLATFORM_POOL_H

#include <stdint.h>

#include "air/air.h"

typedef struct rt_pool rt_pool;

/* One task of a parallel loop: task is in [0, ntasks), thread in [0, size). */
typedef void (*rt_task_fn)(void *ctx, int64_t task, int thread);

/* Creates a pool of nthreads threads in all (the caller counts as one, so
 * nthreads - 1 workers are started). nthreads < 1 is an error. */
air_status rt_pool_create(int nthreads, rt_pool **out);

/* Stops and joins the workers. Accepts NULL. */
void rt_pool_destroy(rt_pool *pool);

/* Number of threads that run tasks (workers + caller); 1 for NULL. */
int rt_pool_size(const rt_pool *pool);

/* Runs fn(ctx, t, thread) for every t in [0, ntasks) and returns when all are
 * done. Tasks are handed out dynamically (an atomic counter), so uneven
 * tasks balance. pool == NULL, ntasks == 1, or a pool already running a loop
 * for another caller all run the loop serially on the calling thread: never
 * a deadlock, never nested fan-out. */
void rt_pool_run(rt_pool *pool, int64_t ntasks, rt_task_fn fn, void *ctx);

/* The process-wide pool used by compiled models, created on first use with
 * rt_default_threads() threads. Returns NULL if it could not be created
 * (then loops run serially). */
rt_pool *rt_pool_default(void);

/* Thread count for the default pool: AIR_NUM_THREADS if set, else the number
 * of online CPUs. */
int rt_default_threads(void);

/* Sets the default pool's size (re-creates it if the size differs). Must not
 * be called while a model runs. */
air_status rt_pool_set_default_threads(int nthreads);

#endif
