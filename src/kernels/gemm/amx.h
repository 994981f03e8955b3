/* amx.h - f32 GEMM on AMX tiles, as bf16 products that keep f32's
 * accuracy.
 *
 * AMX multiplies bf16 (8 significant bits) into f32 accumulators, 16 times
 * the multiply-adds per cycle of AVX-512's f32 FMA. Each f32 operand is
 * split exactly into three bf16 parts, x = x0 + x1 + x2 (24 bits in all),
 * and a*b is summed as the six part products whose size is at least
 * 2^-16 of a0*b0: a0b0 + a0b1 + a1b0 + a0b2 + a1b1 + a2b0. The three left
 * out are below 2^-24 relative, as f32's own rounding of a*b is; the sums
 * are f32 throughout. On 512^3 random data the RMSE against f64 is below
 * that of an f32 dot product (tests/c/test_gemm.c holds it to that).
 *
 * Operands whose magnitudes could make a part denormal (AMX flushes those)
 * or a product overflow are left to the f32 kernels: the path runs only
 * when every value is 0 or within [2^-40, 2^40). A packed B records
 * whether its values are (kgemm_pack_b); A is checked as it is split.
 *
 * Internal to the GEMM driver (gemm.c, pack.c). */
#ifndef AIR_KERNELS_GEMM_AMX_H
#define AIR_KERNELS_GEMM_AMX_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/epilogue.h"
#include "platform/pool.h"

/* Width of the f32 B panels the path reads (kgemm_pack_b's layout with
 * nr 32: K rows of 32 floats, zero past N). */
enum { KAMX_PANEL = 32 };

/* Whether this process may use the path (CPU, OS permission, AIR_ISA). */
int kamx_available(void);

/* Whether a product of this shape goes to the path when its values allow
 * (large enough to repay splitting B on every call). */
int kamx_wanted(int64_t M, int64_t N, int64_t K);

/* Workspace bytes the path needs for this shape on up to nthreads threads
 * (0 when kamx_wanted says no). */
size_t kamx_workspace_bytes(int64_t M, int64_t N, int64_t K, int nthreads);

/* Whether every one of n floats is 0 or within [2^-40, 2^40) in magnitude. */
int kamx_in_range(const float *x, size_t n);

/* C = epilogue(A @ B) with row-major A (rows rs_a apart) and B as f32
 * panels of KAMX_PANEL columns (K rows each, the panels K * KAMX_PANEL
 * floats apart, zero past N). Rows are done in passes, first to last;
 * returns how many were done: M, or fewer when a pass found A's values out
 * of range (it and the rows after it are left untouched, the residual too,
 * for the f32 kernels to do), or 0 when the epilogue has a residual with
 * alpha != 1 over more than one K block. */
int64_t kamx_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, const float *Bpanels,
		  float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace);

/* The same with B already split (kamx_presplit_b): no B is split per
 * call. Bsplit holds the panels of the product's columns, the first one
 * first. */
int64_t kamx_gemm_presplit(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, const uint16_t *Bsplit,
			   float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace);

/* bf16 values a split B of K rows takes per panel of KAMX_PANEL columns. */
size_t kamx_presplit_panel_u16(int64_t K);

/* Splits npanels f32 B panels (kamx_gemm's layout) into dst, panel after
 * panel, each kamx_presplit_panel_u16(K) values: the split that
 * kamx_gemm does on every call, done once for a weight. */
void kamx_presplit_b(const float *Bpanels, int64_t K, int64_t npanels, uint16_t *dst);

/* The same with B given transposed, as a linear's weight is: B[k][n] at
 * Bt[n * ldbt + k], read in place (split block by block as it is used).
 * Returns M when done; anything less (B or A out of range) leaves C partly
 * written, for the caller to compute again with the f32 kernels: the
 * residual must not be C. */
int64_t kamx_gemm_bt(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, const float *Bt, int64_t ldbt,
		     float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace);

/* Passes (row blocks of A) the path has run in this process: for tests
 * that must know which kernels ran. */
uint64_t kamx_passes(void);

/* ---- the tile kernels (amx_tiles.amx.c) ----------------------- */

/* A chunk is 32 values of K. A split A panel holds 32 rows: per chunk,
 * three parts of two 16 x 32 bf16 tiles (KAMX_CHUNK_U16 values). A split
 * B panel holds 32 columns: per chunk, three parts of two tiles of 16 k
 * pairs x 16 columns x 2 (the layout TDPBF16PS reads B in). */
enum { KAMX_CHUNK_U16 = 3 * 2 * 16 * 32 };

/* Loads this thread's tile configuration; kamx_tiles_end releases it. */
void kamx_tiles_begin(void);
void kamx_tiles_end(void);

/* Splits rows [0, m) (m <= 32) of A (rows rs_a apart, K long) into a
 * split A panel of nch chunks, zero past m and K. Returns 0 if a value is
 * out of range (kamx_in_range), 1 otherwise. */
int kamx_split_a(int m, int64_t K, const float *A, int64_t rs_a, int64_t nch, uint16_t *dst);

/* Splits rows [k0, k0 + nch * 32) of one f32 B panel (K rows of 32
 * floats) into a split B panel of nch chunks, zero past K. */
void kamx_split_b(const float *panel, int64_t K, int64_t k0, int64_t nch, uint16_t *dst);

/* The same from B transposed: columns [0, n) (n <= 32) at bt + j * ldbt,
 * contiguous along K; columns past n are zero. Returns 0 if a value is out
 * of range, 1 otherwise. */
int kamx_split_bt(const float *bt, int64_t ldbt, int n, int64_t K, int64_t k0, int64_t nch, uint16_t *dst);

/* The 32 x 32 block at out (rows ld_out floats apart) = the block at from
 * (rows ld_from apart; NULL: zeros) + the split A panel ap times the split
 * B panel bp over nch chunks. from may be out. */
void kamx_block(const uint16_t *ap, const uint16_t *bp, int64_t nch, const float *from, int64_t ld_from, float *out,
		int64_t ld_out);

/* The m x n block at c (rows ldc apart) = the simple part of ep applied to
 * the sums in buf (rows 32 apart): alpha, bias_n (offset to the block's
 * columns), bias_m (to its rows), res (to the block, rows ep->ld_residual
 * apart) and a min/max activation; a transcendental one is left to the
 * caller. */
void kamx_epilogue_block(const float *buf, int m, int n, float *c, int64_t ldc, const k_epilogue *ep,
			 const float *bias_n, const float *bias_m, const float *res);

#endif
