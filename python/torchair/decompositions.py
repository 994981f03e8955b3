"""The decomposition table torchair hands to aot_autograd.

We start from PyTorch's core-ATen table and take out the ops torchair implements well
as single kernels, so they reach the torchair graph whole instead of as chains of
primitive ops. Everything else is decomposed to core ATen.

Ops that are not in the core table at all (``convolution``, ``addmm``/``mm``/``bmm``,
``native_layer_norm``, ``_softmax``, ``gelu``, ``hardtanh``, ``sigmoid``, ``tanh``,
``_native_batch_norm_legit_no_training``, ``max_pool2d_with_indices``, ``avg_pool2d``,
``_adaptive_avg_pool2d``, ``embedding``, ``convolution_backward``, ...) survive on their
own; they are listed in ``ALREADY_KEPT`` for reference.

Notes on what reaches the graph (torch 2.13, CPU):

* ``F.scaled_dot_product_attention`` is CompositeImplicitAutograd: the dispatcher turns it
  into ``aten._scaled_dot_product_flash_attention_for_cpu`` (one op, returning
  ``(out, logsumexp)``; the graph takes ``getitem(.., 0)``). A boolean ``attn_mask`` is
  first converted to an additive float mask by ``where(mask, 0.0, -inf)`` in the graph.
  The table entry for ``aten.scaled_dot_product_attention`` is never reached; we remove it
  anyway so a graph that does carry it keeps it whole.
* ``adaptive_avg_pool2d`` to (1, 1) becomes ``aten.mean.dim([-1, -2], keepdim=True)``
  before the table is consulted; other output sizes give ``aten._adaptive_avg_pool2d``.
* ``F.max_pool2d`` always becomes ``max_pool2d_with_indices`` (+ ``getitem(.., 0)``).
* ``relu6`` becomes ``hardtanh(x, 0, 6)``; ``linear`` becomes ``addmm``/``mm`` + views.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._decomp import core_aten_decompositions
from torch._ops import OperatorBase

aten = torch.ops.aten

# Inference ops that the core table would decompose but torchair keeps whole.
KEEP_FORWARD: tuple[OperatorBase, ...] = (
    aten.scaled_dot_product_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten.adaptive_avg_pool2d.default,
    aten.silu.default,
    aten.hardswish.default,
    aten.hardsigmoid.default,
    aten.col2im.default,  # F.fold; the core table's index_put chain fell back
    aten.index_copy.default,  # StaticCache's writes: one libair op instead of index_put
)

# Training (backward) ops kept whole: one fused kernel each instead of a chain of reductions.
KEEP_BACKWARD: tuple[OperatorBase, ...] = (
    aten.native_batch_norm_backward.default,
    aten.native_layer_norm_backward.default,
    aten._softmax_backward_data.default,
    aten._log_softmax_backward_data.default,
    aten.gelu_backward.default,
    aten.silu_backward.default,
    aten.hardtanh_backward.default,
    aten.sigmoid_backward.default,
    aten.tanh_backward.default,
    aten.threshold_backward.default,
    aten.embedding_dense_backward.default,
    aten.native_dropout_backward.default,
    aten.nll_loss_forward.default,
    aten.nll_loss_backward.default,
)

# Not in the core table: these reach the graph whole without any action from us.
ALREADY_KEPT: tuple[OperatorBase, ...] = (
    aten.convolution.default,
    aten.addmm.default,
    aten.mm.default,
    aten.bmm.default,
    aten.native_layer_norm.default,
    aten._softmax.default,
    aten._log_softmax.default,
    aten.gelu.default,
    aten.hardtanh.default,
    aten.sigmoid.default,
    aten.tanh.default,
    aten.relu.default,
    aten._native_batch_norm_legit_no_training.default,
    aten._native_batch_norm_legit_functional.default,
    aten.max_pool2d_with_indices.default,
    aten.avg_pool2d.default,
    aten._adaptive_avg_pool2d.default,
    aten.embedding.default,
    aten.native_dropout.default,
    aten.convolution_backward.default,
    aten.max_pool2d_with_indices_backward.default,
    aten.avg_pool2d_backward.default,
    aten._adaptive_avg_pool2d_backward.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
)


def _select_backward(grad: torch.Tensor, input_sizes: list[int], dim: int, index: int) -> torch.Tensor:
    """``select_backward`` as the gradient padded with zeros around ``index`` along ``dim``.

    The core table writes it as ``where(arange == index, expand(grad), 0)``: an expanded copy
    and a select over the whole input, where only one slice is nonzero. A ViT's qkv split
    (``unbind`` of a [3, B, H, T, D] tensor) takes three of these and two adds a layer in
    its backward; padding writes each result once."""
    rank = len(input_sizes)
    dim = dim % rank
    index = index % input_sizes[dim]
    pad = [0, 0] * (rank - 1 - dim) + [index, input_sizes[dim] - 1 - index]
    return aten.constant_pad_nd.default(aten.unsqueeze.default(grad, dim), pad, 0.0)


def torchair_decompositions(keep_backward: bool = True) -> dict[OperatorBase, Callable[..., object]]:
    """Core-ATen decompositions minus the ops torchair keeps whole.

    ``keep_backward=False`` also decomposes the fused backward ops in ``KEEP_BACKWARD``.
    """
    table = core_aten_decompositions()  # a lazy CustomDecompTable: copy into a plain dict
    decomps = {op: table[op] for op in table}
    for op in KEEP_FORWARD + (KEEP_BACKWARD if keep_backward else ()):
        decomps.pop(op, None)
    decomps[aten.select_backward.default] = _select_backward
    return decomps
