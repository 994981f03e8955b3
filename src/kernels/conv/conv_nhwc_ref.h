/* conv_nhwc_ref.h - reference kernels of the channels-last ops the layout pass
 * creates (conv2d_nhwc and the NHWC pools), and the geometry they share
 * with the fast kernels (kernels/conv/conv_nhwc.c). */
#ifndef AIR_KERNELS_CONV_CONV_NHWC_REF_H
#define AIR_KERNELS_CONV_CONV_NHWC_REF_H

#include "kernels/common/epilogue.h"
#include "kernels/common/kernel.h"
#include "kernels/conv/conv_ref.h"

air_status kref_conv2d_nhwc(const k_call *call);
air_status kref_max_pool2d_nhwc(const k_call *call);
air_status kref_avg_pool2d_nhwc(const k_call *call);
air_status kref_adaptive_avg_pool2d_nhwc(const k_call *call);

/* One conv2d_nhwc call: x [N, H, W, C], weight [O, Cg, KH, KW], bias? [O],
 * residual? [N, OH, OW, O] (the last input). Unknown sizes (compile time)
 * are -1. */
typedef struct kconv_nhwc {
	kconv_geom g;
	k_act act;
	int has_residual;
} kconv_nhwc;

air_status kconv_nhwc_make(const k_call *call, kconv_nhwc *c);

#endif
