"""Lowerings of the training ops that decompositions.KEEP_BACKWARD keeps whole: the
layer norm and embedding gradients and dropout as libair ops of their own
(src/ops/backward.c); the softmax and activation gradients as a few elementwise
ops and a sum, which the fusion pass joins into one loop where it can."""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from torchair.errors import Unsupported
from torchair.lowering.core import Lowerer, Value, arg, aten, lowers, meta, norm_axis, out_val, storage_dtype


def _same_dtype_float(n: Node, *args: Node) -> torch.dtype:
    """The floating dtype of n's output (of its first tensor argument for a
    multi-output op), which each of args must have too."""
    dt = meta(args[0]).dtype if isinstance(meta(n), (tuple, list)) else out_val(n).dtype
    if dt not in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        raise Unsupported(f"{n.target} on {dt}")
    for a in args:
        if meta(a).dtype != dt:
            raise Unsupported(f"{n.target} with mixed dtypes")
    return dt


# ---- normalization --------------------------------------------------------


@lowers(aten.native_layer_norm_backward.default, outputs=(0, 1, 2))
def _layer_norm_backward(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    """One layer_norm_backward node: grad_input row by row, grad_weight and
    grad_bias as column sums. Outputs torch leaves None (no weight, no bias)
    are not offered."""
    g, x, shape, mean, rstd, w, b = n.args[:7]
    _same_dtype_float(n, g, x, *([w] if w is not None else []))
    inputs = [L.value(g), L.value(x), L.value(mean), L.value(rstd)] + ([L.value(w)] if w is not None else [])
    # mean and rstd of a 16-bit x are f32 in torch; everything computes in x's (widened) dtype
    dt = L.dtype_of(inputs[1])
    inputs = [v if L.dtype_of(v) == dt else L.node("cast", [v], {"dtype": dt}) for v in inputs]
    attrs = {"normalized_ndim": len(shape), "has_weight": int(w is not None)}
    gx, gw, gb = L.node("layer_norm_backward", inputs, attrs)
    return gx, gw if w is not None else None, gb if b is not None else None


@lowers(aten._softmax_backward_data.default, aten._log_softmax_backward_data.default)
def _softmax_backward(L: Lowerer, n: Node) -> Value:
    """softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g) (torch's CPU
    kernels' formulas): one softmax_backward node (a row kernel over the last dim),
    or the elementwise ops and a sum where g and y would broadcast."""
    g, y, dim, input_dtype = n.args[:4]
    dt = _same_dtype_float(n, g, y)
    if input_dtype != dt:
        raise Unsupported("softmax backward to another dtype")
    axis = norm_axis(dim, out_val(n).dim())
    log = n.target == aten._log_softmax_backward_data.default
    if tuple(meta(g).shape) == tuple(meta(y).shape):  # one row kernel
        return L.node("softmax_backward", [L.value(g), L.value(y)], {"axis": axis, "log": int(log)})
    gv, yv = L.value(g), L.value(y)
    red = {"axes": [axis], "keepdim": 1}
    if not log:
        s = L.node("sum", [L.node("mul", [gv, yv])], red)
        return L.node("mul", [yv, L.node("sub", [gv, s])])
    s = L.node("sum", [gv], red)
    return L.node("sub", [gv, L.node("mul", [L.node("exp", [yv]), s])])


# ---- activations ------------------------------------------------------------

# activation_backward's kinds (src/kernels/elementwise/act_backward.h)
_KA_GELU, _KA_GELU_TANH, _KA_SILU, _KA_TANH, _KA_SIGMOID = range(5)


def _one_pass(L: Lowerer, g: Node, t: Node, kind: int) -> Value | None:
    """The gradient as one activation_backward node (one pass over memory), when g
    and t have one shape; None where torch would broadcast (then the caller
    composes elementwise ops)."""
    if tuple(meta(g).shape) != tuple(meta(t).shape):
        return None
    return L.node("activation_backward", [L.value(g), L.value(t)], {"kind": kind})


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_KAPPA = 0.044715


@lowers(aten.gelu_backward.default)
def _gelu_backward(L: Lowerer, n: Node) -> Value:
    """torch's formulas: 'none': g * (cdf + x * pdf), cdf = (1 + erf(x/sqrt2)) / 2,
    pdf = exp(-x^2/2) / sqrt(2 pi); 'tanh': the derivative of x/2 (1 + tanh(u)),
    u = sqrt(2/pi) (x + 0.044715 x^3)."""
    g, x = n.args[:2]
    approx = arg(n, 2, "approximate", "none")
    dt = _same_dtype_float(n, g, x)
    if approx in ("none", "tanh"):
        v = _one_pass(L, g, x, _KA_GELU if approx == "none" else _KA_GELU_TANH)
        if v is not None:
            return v
    gv, xv = L.value(g), L.value(x)

    def c(v: float) -> Value:
        return L.scalar(v, dt)

    def mul(a: Value, b: Value) -> Value:
        return L.node("mul", [a, b])

    def add(a: Value, b: Value) -> Value:
        return L.node("add", [a, b])

    if approx == "none":
        cdf = mul(c(0.5), add(c(1.0), L.node("erf", [mul(xv, c(_SQRT1_2))])))
        pdf = mul(c(_INV_SQRT_2PI), L.node("exp", [mul(c(-0.5), mul(xv, xv))]))
        return mul(gv, add(cdf, mul(xv, pdf)))
    if approx != "tanh":
        raise Unsupported(f"gelu_backward approximate={approx!r}")
    beta = math.sqrt(2.0 / math.pi)
    x_sq = mul(xv, xv)
    inner = mul(c(beta), add(xv, mul(c(_GELU_KAPPA), mul(x_sq, xv))))
    t = L.node("tanh", [inner])
    left = mul(c(0.5), xv)
    right = add(c(1.0), t)
    left_d = mul(c(0.5), right)
    one_minus_t2 = L.node("sub", [c(1.0), mul(t, t)])
    right_d = mul(mul(mul(left, one_minus_t2), c(beta)), add(c(1.0), mul(c(3.0 * _GELU_KAPPA), x_sq)))
    return mul(gv, add(left_d, right_d))


@lowers(aten.silu_backward.default)
def _silu_backward(L: Lowerer, n: Node) -> Value:
    """g * s * (1 + x * (1 - s)), s = sigmoid(x)."""
    g, x = n.args[:2]
    dt = _same_dtype_float(n, g, x)
    v = _one_pass(L, g, x, _KA_SILU)
    if v is not None:
        return v
    gv, xv = L.value(g), L.value(x)
    s = L.node("sigmoid", [xv])
    one = L.scalar(1.0, dt)
    inner = L.node("add", [one, L.node("mul", [xv, L.node("sub", [one, s])])])
    return L.node("mul", [L.node("mul", [gv, s]), inner])


@lowers(aten.tanh_backward.default)
def _tanh_backward(L: Lowerer, n: Node) -> Value:
    """g * (1 - y^2), y the forward's output."""
    g, y = n.args[:2]
    dt = _same_dtype_float(n, g, y)
    v = _one_pass(L, g, y, _KA_TANH)
    if v is not None:
        return v
    yv = L.value(y)
    return L.node("mul", [L.value(g), L.node("sub", [L.scalar(1.0, dt), L.node("mul", [yv, yv])])])


@lowers(aten.sigmoid_backward.default)
def _sigmoid_backward(L: Lowerer, n: Node) -> Value:
    """g * (1 - y) * y, y the forward's output."""
    g, y = n.args[:2]
    dt = _same_dtype_float(n, g, y)
    v = _one_pass(L, g, y, _KA_SIGMOID)
    if v is not None:
        return v
    yv = L.value(y)
    return L.node("mul", [L.node("mul", [L.value(g), L.node("sub", [L.scalar(1.0, dt), yv])]), yv])


def _zero_where(L: Lowerer, cond: Value, g: Value, dt: torch.dtype) -> Value:
    return L.node("where", [cond, L.scalar(0.0, dt), g])


@lowers(aten.hardtanh_backward.default)
def _hardtanh_backward(L: Lowerer, n: Node) -> Value:
    """0 where x <= min or x >= max, else g (torch's bounds are inclusive)."""
    g, x, lo, hi = n.args[:4]
    dt = _same_dtype_float(n, g, x)
    if not all(isinstance(v, (int, float)) for v in (lo, hi)):
        raise Unsupported("hardtanh_backward with tensor bounds")
    xv = L.value(x)
    below = L.node("le", [xv, L.scalar(float(lo), dt)])
    above = L.node("ge", [xv, L.scalar(float(hi), dt)])
    return _zero_where(L, L.node("logical_or", [below, above]), L.value(g), dt)


# ---- embedding ------------------------------------------------------------------


@lowers(aten.embedding_dense_backward.default)
def _embedding_backward(L: Lowerer, n: Node) -> Value:
    g, idx, num_weights, padding_idx, by_freq = n.args[:5]
    if by_freq:
        raise Unsupported("embedding backward with scale_grad_by_freq")
    if not isinstance(num_weights, int) or not isinstance(padding_idx, int):
        raise Unsupported("embedding backward with symbolic sizes")
    _same_dtype_float(n, g)
    return L.node("embedding_backward", [L.value(g), L.value(idx)],
                  {"num_weights": num_weights, "padding_idx": padding_idx})


# ---- dropout ----------------------------------------------------------------------

SEED_INPUT = "__torchair_seed__"


def seed_of(L: Lowerer) -> Value:
    """The graph's seed input (made on first use): a 0-d i64 that the subgraph's caller
    fills from torch's default generator on every call (AirSubgraph.seeded). All the
    graph's dropouts share it and differ by their ``stream`` (see next_stream)."""
    v = getattr(L, "seed_value", None)
    if v is None:
        v = L.g.input(storage_dtype(torch.int64), [], SEED_INPUT)
        L.seed_value = v  # type: ignore[attr-defined]
        L.seed_streams = 0  # type: ignore[attr-defined]
    return v


def next_stream(L: Lowerer) -> int:
    s = L.seed_streams  # type: ignore[attr-defined]
    L.seed_streams = s + 1  # type: ignore[attr-defined]
    return s


@lowers(aten.native_dropout.default, outputs=(0, 1))
def _native_dropout(L: Lowerer, n: Node) -> tuple[Value, Value]:
    """(x * mask / (1 - p), mask) with mask drawn by libair's own generator, seeded
    from torch's per call: reproducible under torch.manual_seed, not eager's masks."""
    x, p, train = n.args[:3]
    if train is not True:
        raise Unsupported("native_dropout outside training")
    if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise Unsupported(f"dropout p={p!r}")
    if meta(x).dtype not in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        raise Unsupported(f"dropout on {meta(x).dtype}")
    seed = seed_of(L)
    y, mask = L.node("dropout", [L.value(x), seed], {"p": float(p), "stream": next_stream(L)})
    return y, mask


@lowers(aten.native_dropout_backward.default)
def _native_dropout_backward(L: Lowerer, n: Node) -> Value:
    """g * (mask * scale), as torch computes it: one dropout_backward node for a bool
    mask of g's shape, else the elementwise ops."""
    g, mask, scale = n.args[:3]
    dt = _same_dtype_float(n, g)
    if not isinstance(scale, (int, float)):
        raise Unsupported("dropout backward with a tensor scale")
    if meta(mask).dtype == torch.bool and tuple(meta(mask).shape) == tuple(meta(g).shape):
        return L.node("dropout_backward", [L.value(g), L.value(mask)], {"scale": float(scale)})
    m = L.cast(L.value(mask), dt)
    return L.node("mul", [L.value(g), L.node("mul", [m, L.scalar(float(scale), dt)])])
