"""Lowering from ATen FX graphs to libair graphs, through one table.

``LOWERINGS`` maps each supported ATen overload to a function that emits the
libair nodes for it. Adding an op: its C op (op table entry, kernel, tests),
then one entry here, in the module of its family. The same functions serve
the support check: a node is supported exactly when its lowering succeeds on
a scratch graph, so the check sees dtypes and attributes, not only the op name.

Types come from each node's ``meta['val']`` (fake tensors); symbolic sizes
(SymInts) become libair dim expressions over symbols bound by input dims.

This package: the table, ``Lowerer`` and the shared helpers are in ``core``;
the lowerings themselves in one module per op family (elementwise, shape,
reduce, matmul, conv, attention, index), all imported here.
"""

# Each family registers its lowerings when imported; this order (the order of
# the one module they came from) fills LOWERINGS in the same order as before.
# isort: off
from torchair.lowering import elementwise  # noqa: F401
from torchair.lowering import shape  # noqa: F401
from torchair.lowering import reduce  # noqa: F401
from torchair.lowering import matmul  # noqa: F401
from torchair.lowering import conv  # noqa: F401
from torchair.lowering import conv_backward  # noqa: F401
from torchair.lowering import attention  # noqa: F401
from torchair.lowering import attention_backward  # noqa: F401
from torchair.lowering import index  # noqa: F401
from torchair.lowering import backward  # noqa: F401
from torchair.lowering import norm_train  # noqa: F401
from torchair.lowering import pt2e  # noqa: F401
# isort: on
from torchair.lowering.conv import MAX_TRANSPOSED_GROUPS
from torchair.lowering.core import (
    AVAILABLE_OUTPUTS,
    LOWERINGS,
    Lowerer,
    Lowering,
    Value,
    air_dtype,
    arg,
    aten,
    is_float,
    lowering_for,
    lowers,
    meta,
    norm_axis,
    out_val,
    result_dtype,
)
from torchair.lowering.elementwise import _zero_pad_parts

__all__ = [
    "AVAILABLE_OUTPUTS",
    "LOWERINGS",
    "lowering_for",
    "MAX_TRANSPOSED_GROUPS",
    "Lowerer",
    "Lowering",
    "Value",
    "_zero_pad_parts",
    "air_dtype",
    "arg",
    "aten",
    "is_float",
    "lowers",
    "meta",
    "norm_axis",
    "out_val",
    "result_dtype",
]
