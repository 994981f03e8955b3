/* conv_winograd_tiles.avx2.c - the Winograd tile transforms
 * (kernels/conv/conv_winograd_tiles.h) compiled with AVX2+FMA. */
#define KWINO_SUFFIX avx2
#include "kernels/conv/conv_winograd_tiles.h"
