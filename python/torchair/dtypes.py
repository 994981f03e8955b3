"""The mapping between torch dtypes and libair's dtype codes."""

from __future__ import annotations

import torch

from torchair import _C

TORCH_TO_AIR: dict[torch.dtype, int] = {
    torch.float32: _C.F32,
    torch.float64: _C.F64,
    torch.float16: _C.F16,
    torch.bfloat16: _C.BF16,
    torch.int64: _C.I64,
    torch.int32: _C.I32,
    torch.int16: _C.I16,
    torch.int8: _C.I8,
    torch.uint8: _C.U8,
    torch.bool: _C.BOOL,
}
AIR_TO_TORCH: dict[int, torch.dtype] = {v: k for k, v in TORCH_TO_AIR.items()}
