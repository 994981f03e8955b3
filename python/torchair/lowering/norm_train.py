"""Lowerings of training-mode batch norm, its backward and ReLU's backward
onto libair's ``batch_norm_train``, ``batch_norm_backward`` and
``threshold_backward`` (src/ops/norm_train.c; the formulas are aten's, in
src/kernels/norm/bn_train.h). The new running statistics come out of the
graph as values; writing them into the module's buffers is the compiler's
(``torchair.write_back``)."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.fx import Node

from torchair.errors import Unsupported
from torchair.lowering.core import LAZY, LOW_PRECISION, Lowerer, Value, aten, is_float, lowers, meta, out_val


def _same_float_dtype(op: str, *nodes: Any) -> torch.dtype:
    """The one f32/f64 dtype every tensor among nodes (None skipped) is
    computed in: bf16 and f16 ones are f32 values in libair (lowering/core.py:
    LOW_PRECISION), so autocast's bf16 activations with f32 parameters and
    statistics are f32 throughout, as eager computes them."""
    dtypes = {torch.float32 if meta(n).dtype in LOW_PRECISION else meta(n).dtype for n in nodes if isinstance(n, Node)}
    if len(dtypes) != 1 or not is_float(next(iter(dtypes))):
        raise Unsupported(f"{op} takes f32 or f64 tensors of one dtype, got {sorted(map(str, dtypes))}")
    return next(iter(dtypes))


def _number(op: str, name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Unsupported(f"{op} with a {name} that is not a number known at compile time")
    return float(v)


def _row(L: Lowerer, running: Value, i: int, channels: Any) -> Value:
    """Row i of batch_norm_train's [2, C] running statistics, as [C]."""
    s = L.node("slice", [running], {"axis": 0, "start": i, "end": i + 1, "step": 1})
    return L.node("reshape", [s], {"shape": L.dims([channels])})


def _relu_after(n: Node) -> Node | None:
    """The relu that is the only user of the batch norm's output (getitem 0),
    which the batch norm then applies itself (one pass less over the
    activation), or None."""
    firsts = [u for u in n.users if u.target is operator.getitem and u.args[1] == 0]
    if len(firsts) != 1 or len(firsts[0].users) != 1:
        return None
    user = next(iter(firsts[0].users))
    return user if user.target is aten.relu.default and meta(user).dtype == meta(firsts[0]).dtype else None


@lowers(aten._native_batch_norm_legit_functional.default, outputs=(0, 1, 2, 3, 4))
def _batch_norm_train(L: Lowerer, n: Node) -> tuple[Value, ...]:
    """(out, save_mean, save_invstd, new_running_mean, new_running_var) with
    the batch's statistics: BatchNorm in train mode after functionalization."""
    x, w, b, rm, rv, training, momentum, eps = n.args
    if training is not True:
        raise Unsupported("_native_batch_norm_legit_functional with training=False")
    if not isinstance(rm, Node) or not isinstance(rv, Node):
        raise Unsupported("batch norm in training without running statistics")
    _same_float_dtype("batch norm", x, w, b, rm, rv)
    xm = meta(x)
    if xm.dim() < 2:
        raise Unsupported(f"batch norm over a {xm.dim()}-d input")
    relu = _relu_after(n)
    attrs = {
        "momentum": _number("batch norm", "momentum", momentum),
        "eps": _number("batch norm", "eps", eps),
        "has_weight": int(w is not None),
        "has_bias": int(b is not None),
        "act": int(relu is not None),
    }
    inputs = [L.value(x)] + [L.value(t) for t in (w, b) if t is not None] + [L.value(rm), L.value(rv)]
    y, mean, invstd, running = L.node("batch_norm_train", inputs, attrs)
    if relu is not None:  # the relu is this y: the compiler then skips its node
        L.env[relu] = y
    C = xm.shape[1]
    return y, mean, invstd, _row(L, running, 0, C), _row(L, running, 1, C)


@lowers(aten.native_batch_norm_backward.default, outputs=(0, 1, 2))
def _batch_norm_backward(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    """(grad_input, grad_weight, grad_bias), None where output_mask says it is
    not wanted. In training the saved batch statistics are used; in eval
    (train=False) the running ones, with invstd = rsqrt(running_var + eps)."""
    dy, x, w, rm, rv, save_mean, save_invstd, train, eps, mask = n.args
    _same_float_dtype("batch norm backward", dy, x, w, rm, rv, save_mean, save_invstd)
    if meta(x).dim() < 2 or tuple(meta(dy).shape) != tuple(meta(x).shape):
        raise Unsupported("batch norm backward: dy and x must be one [N, C, ...] shape")
    if train:
        if not isinstance(save_mean, Node) or not isinstance(save_invstd, Node):
            raise Unsupported("batch norm backward in training without the saved statistics")
        mean, invstd = L.value(save_mean), L.value(save_invstd)
    else:
        if not isinstance(rm, Node) or not isinstance(rv, Node):
            raise Unsupported("batch norm backward in eval without running statistics")
        dtype = meta(x).dtype
        mean = L.value(rm)
        invstd = L.node("rsqrt", [L.node("add", [L.value(rv), L.scalar(_number("batch norm", "eps", eps), dtype)])])
    attrs = {"has_weight": int(w is not None), "train": int(bool(train))}
    relu = _deferred_relu_backward(L, dy, x)
    if relu is not None:  # ReLU's backward folded in: its masked gradient is never written
        dy, relu_out, threshold = relu
        attrs.update(has_mask=1, threshold=threshold)
    inputs = [L.value(dy), L.value(x), mean, invstd] + ([L.value(w)] if w is not None else [])
    if relu is not None:
        inputs.append(L.value(relu_out))
    dx, dw, db = L.node("batch_norm_backward", inputs, attrs)
    return tuple(v if want else None for v, want in zip((dx, dw, db), mask))


def _deferred_relu_backward(L: Lowerer, dy: Any, x: Node) -> tuple[Node, Node, float] | None:
    """(grad, relu_out, threshold) when dy is a deferred threshold_backward
    of x's shape used only here, which batch_norm_backward then takes over
    (and which is then never built); else None."""
    if not isinstance(dy, Node) or dy.target is not aten.threshold_backward.default or dy not in L.lazy:
        return None
    if len(dy.users) != 1 or tuple(meta(dy.args[1]).shape) != tuple(meta(x).shape):
        return None
    L.lazy.pop(dy)
    return dy.args[0], dy.args[1], float(dy.args[2])


@lowers(aten.threshold_backward.default)
def _threshold_backward(L: Lowerer, n: Node) -> Any:
    """grad where self > threshold, else 0: ReLU's backward (threshold 0),
    one pass in C (where(le(self, t), 0, grad) would be two, with a bool
    tensor between: compares and where do not fuse). Deferred: a batch norm
    backward that is its only user folds it in (_deferred_relu_backward);
    otherwise it is built where first used."""
    grad, x, threshold = n.args
    _same_float_dtype("threshold_backward", grad, x)
    if tuple(meta(grad).shape) != tuple(meta(x).shape) or tuple(out_val(n).shape) != tuple(meta(x).shape):
        raise Unsupported("threshold_backward with broadcasting")
    t = _number("threshold_backward", "threshold", threshold)
    L.lazy[n] = lambda: L.node("threshold_backward", [L.value(grad), L.value(x)], {"threshold": t})
    return LAZY
