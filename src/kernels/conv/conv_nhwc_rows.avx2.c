/* conv_nhwc_rows.avx2.c - the channels-last row loops (kernels/conv/conv_nhwc_rows.h)
 * compiled with AVX2+FMA. */
#define KNHWC_SUFFIX avx2
#include "kernels/conv/conv_nhwc_rows.h"
