/* matmul_ref.h - reference kernels of the matrix products (mm, bmm, addmm,
 * linear), the fused activations, and the helpers that the fast kernels
 * share with them for reading optional inputs. */
#ifndef AIR_KERNELS_MATMUL_MATMUL_REF_H
#define AIR_KERNELS_MATMUL_MATMUL_REF_H

#include "kernels/common/epilogue.h"
#include "kernels/common/kernel.h"

air_status kref_mm(const k_call *call);
air_status kref_bmm(const k_call *call);
air_status kref_addmm(const k_call *call);
air_status kref_linear(const k_call *call);

#endif
