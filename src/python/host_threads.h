/* host_threads.h - lends PyTorch's OpenMP team to libair's parallel loops. */
#ifndef AIR_PYTHON_HOST_THREADS_H
#define AIR_PYTHON_HOST_THREADS_H

/* Runs libair's parallel loops on the OpenMP runtime already loaded from
 * path (dlopen with RTLD_NOLOAD: never a second copy of the runtime, whose
 * threads would compete with torch's). Returns 1 when installed, 0 when
 * path is not loaded or lacks GOMP_parallel / omp_get_thread_num; path
 * NULL goes back to libair's own pool and returns 0. */
int host_threads_use_openmp(const char *path);

/* Parallel loops run through OpenMP so far (tests use it to see that the
 * runner is really in use). */
unsigned long long host_threads_openmp_loops(void);

#endif
