/* bn_train.avx512.c - the fast training batch norm loops (bn_train_impl.h),
 * 16 lanes, built with AVX-512. */
#define KBN_LANES 16
#define KBN_IMPL kbn_impl_avx512
#include "kernels/norm/bn_train_impl.h"
