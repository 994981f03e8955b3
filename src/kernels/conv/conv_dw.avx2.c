/* conv_dw.avx2.c - the depthwise convolution loop of conv_dw.h, compiled
 * with AVX2+FMA (this folder's flags); conv_fast.c picks it when the CPU
 * has AVX2. */
#define KCONV_DW_FN kconv_dw_rows__avx2
#include "kernels/conv/conv_dw.h"
