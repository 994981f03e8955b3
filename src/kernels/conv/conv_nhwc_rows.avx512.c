/* conv_nhwc_rows.avx512.c - the channels-last row loops (kernels/conv/conv_nhwc_rows.h)
 * compiled with AVX-512 (one 16-float vector per register). */
#define KNHWC_SUFFIX avx512
#include "kernels/conv/conv_nhwc_rows.h"
