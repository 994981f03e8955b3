/* bn_train.avx2.c - the fast training batch norm loops (bn_train_impl.h),
 * 8 lanes, built with AVX2+FMA. */
#define KBN_LANES 8
#define KBN_IMPL kbn_impl_avx2
#include "kernels/norm/bn_train_impl.h"
