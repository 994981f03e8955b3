"""PT2E static int8 (torchao's ``prepare_pt2e`` / ``convert_pt2e``, X86InductorQuantizer): the
graph holds ``quantized_decomposed`` quantize/dequantize ops around the float products.

Every such op lowers on its own, as torch computes it (so any PT2E graph compiles):
- ``quantize_per_tensor``: libair's ``quantize`` op, ``clamp(round(x * (1 / scale)) + zp,
  qmin, qmax)`` to u8/s8 in one pass (kernels/gemm_q/quantize.h), rounding half to even as
  torch.round; the five generic ops it replaced took 2.3x the int8 products' time on BERT;
- ``dequantize_per_tensor`` / ``dequantize_per_channel``: ``(q - zp) * scale``, deferred
  (Lowerer.lazy): a dequantized weight that only an int8 product reads is never made, and a
  frozen one that something else reads is dequantized once, in torch, as a constant.

The product patterns ``linear(dq(q_x u8), dq_per_channel(W s8))`` (aot_autograd's
``addmm(b, x, t(W))`` / ``mm(x, t(W))``, through lowp.py's deferred transpose) becomes
libair's ``linear_u8s8``, and ``convolution(dq(q_x u8), dq_per_channel(W s8))`` of one group
``conv2d_u8s8`` (u8 im2col rows on the same product): u8 activations times the s8 weight in s32, packed once at compile
time (kernels/gemm_q/gemm_u8s8.h), dequantized in the epilogue with the bias; a relu that is
the product's only user and a u8 quantize that is the next one's are fused too (requantized in
the epilogue, so the f32 result is never written). The weight must be per output channel with
zero points 0 (the quantizer's symmetric weights) and the activation u8 per tensor; anything
else lowers through the generic ops above."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import Node

from torchair.lowering.core import LAZY, Lowerer, Unsupported, Value, air_dtype, aten, lowers, meta, out_val

# keyed by name (lowering_for): the ops exist once torchao or torch.ao's _decomposed module is
# imported, which a PT2E graph's maker has done; torchair need not import them (33 ms)
QPT = "quantized_decomposed.quantize_per_tensor.default"
DQPT = "quantized_decomposed.dequantize_per_tensor.default"
DQPC = "quantized_decomposed.dequantize_per_channel.default"
VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
QUANT_DTYPES = {torch.uint8: (0, 255), torch.int8: (-128, 127)}


@dataclass
class PT2EWeight:
    """A frozen per-channel s8 weight [N, K] of a linear, with its f32 scales, as
    linear_u8s8 reads them."""

    q: Value
    scales: Value
    n: int
    k: int


def _is(n: Any, name: str) -> bool:
    return isinstance(n, Node) and isinstance(n.target, torch._ops.OpOverload) and str(n.target) == name


def _qparams(n: Node) -> tuple[float, int, int, int, torch.dtype]:
    scale, zp, qmin, qmax, dtype = n.args[1:6]
    if not isinstance(scale, (int, float)) or not isinstance(zp, int):
        raise Unsupported(f"{n.name}: scale and zero point must be numbers")
    if dtype not in QUANT_DTYPES or not (QUANT_DTYPES[dtype][0] <= qmin <= qmax <= QUANT_DTYPES[dtype][1]):
        raise Unsupported(f"{n.name}: quantized dtype {dtype} [{qmin}, {qmax}] is not u8 or s8")
    return float(scale), zp, int(qmin), int(qmax), dtype


def _f32_in(n: Node) -> None:
    x = meta(n.args[0])
    if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise Unsupported(f"{n.name}: quantizes a {getattr(x, 'dtype', None)} tensor")


@lowers(QPT)
def _quantize_per_tensor(L: Lowerer, n: Node) -> Value:
    scale, zp, qmin, qmax, dtype = _qparams(n)
    _f32_in(n)
    x = L.cast(L.value(n.args[0]), torch.float32)
    # torch: input * (1.0 / scale), the inverse a Python float that the f32 product rounds
    attrs = {"inv_scale": 1.0 / scale, "zp": zp, "qmin": qmin, "qmax": qmax, "dtype": air_dtype(dtype)}
    return L.node("quantize", [x], attrs)


def _dq_tensor(L: Lowerer, n: Node) -> Value:
    scale, zp, _, _, _ = _qparams(n)
    q = L.cast(L.value(n.args[0]), torch.float32)
    t = L.node("sub", [q, L.scalar(float(zp), torch.float32)])
    return L.node("mul", [t, L.scalar(scale, torch.float32)])


@lowers(DQPT)
def _dequantize_per_tensor(L: Lowerer, n: Node) -> Any:
    _, _, _, _, dtype = _qparams(n)
    src = meta(n.args[0])
    if not isinstance(src, torch.Tensor) or src.dtype != dtype:
        raise Unsupported(f"{n.name}: input is not {dtype}")
    if n.kwargs.get("out_dtype") not in (None, torch.float32):
        raise Unsupported(f"{n.name}: out_dtype {n.kwargs['out_dtype']}")
    L.lazy[n] = lambda: _dq_tensor(L, n)
    return LAZY


def _channel_args(n: Node) -> tuple[Node, Node, Any, int]:
    w, scales, zps, axis = n.args[:4]
    dtype = n.args[6]
    wv = meta(w)
    if not isinstance(wv, torch.Tensor) or dtype not in QUANT_DTYPES or wv.dtype != dtype:
        raise Unsupported(f"{n.name}: the weight is not {dtype}")
    if not isinstance(scales, Node) or not isinstance(meta(scales), torch.Tensor):
        raise Unsupported(f"{n.name}: scales must be a tensor")
    if n.kwargs.get("out_dtype") not in (None, torch.float32):
        raise Unsupported(f"{n.name}: out_dtype {n.kwargs['out_dtype']}")
    return w, scales, zps, axis % wv.dim()


def _dq_channel(L: Lowerer, n: Node) -> Value:
    w, scales, zps, axis = _channel_args(n)
    consts = [L.const_tensors.get(a) if isinstance(a, Node) else a for a in (w, scales, zps)]
    if all(c is not None for c in consts[:2]) and (zps is None or consts[2] is not None):
        # a frozen weight: dequantized once, by torch itself
        with torch.no_grad():
            t = torch.ops.quantized_decomposed.dequantize_per_channel.default(consts[0], consts[1], consts[2], axis, *n.args[4:7])
        return L.add_constant(t.contiguous())
    rank = meta(w).dim()
    shape = [1] * rank
    shape[axis] = meta(w).shape[axis]
    dims = L.dims(shape)
    t = L.cast(L.value(w), torch.float32)
    if zps is not None:
        z = L.node("reshape", [L.cast(L.value(zps), torch.float32)], {"shape": dims})
        t = L.node("sub", [t, z])
    s = L.node("reshape", [L.cast(L.value(scales), torch.float32)], {"shape": dims})
    return L.node("mul", [t, s])


@lowers(DQPC)
def _dequantize_per_channel(L: Lowerer, n: Node) -> Any:
    _, _, zps, _ = _channel_args(n)
    if zps is not None and not isinstance(zps, Node):
        raise Unsupported(f"{n.name}: zero points must be a tensor")
    L.lazy[n] = lambda: _dq_channel(L, n)
    return LAZY


# ---- the int8 product ---------------------------------------------------------------------


def pt2e_weight(L: Lowerer, src: Any) -> PT2EWeight | None:
    """src's s8 weight when src is dequantize_per_channel of a frozen 2-D s8 weight over its
    rows, with frozen scales and zero points all 0; else None."""
    got = _channel_weight(L, src, 2)
    if got is None:
        return None
    wt = L.const_tensors[src.args[0]]
    return PT2EWeight(got[0], got[1], int(wt.shape[0]), int(wt.shape[1]))


def _channel_weight(L: Lowerer, src: Node, rank: int) -> tuple[Value, Value] | None:
    """(the s8 weight, its f32 scales) of dequantize_per_channel src over axis 0 of a frozen
    s8 weight of this rank, frozen scales > 0 and zero points all 0; else None."""
    if not _is(src, DQPC):
        return None
    try:
        w, scales, zps, axis = _channel_args(src)
    except Unsupported:
        return None
    wt, st = L.const_tensors.get(w), L.const_tensors.get(scales)
    zt = L.const_tensors.get(zps) if isinstance(zps, Node) else None
    if wt is None or st is None or wt.dtype != torch.int8 or wt.dim() != rank or axis != 0:
        return None
    if zps is not None and (zt is None or bool((zt != 0).any())):
        return None
    if st.dim() != 1 or st.shape[0] != wt.shape[0] or not bool((st > 0).all()):
        return None
    cache: dict[Node, tuple[Value, Value]] = L.__dict__.setdefault("_pt2e_cache", {})
    if src not in cache:
        # the s8 weight borrowed: the packed copy is made once by the kernel
        cache[src] = (L.value(w), L.add_constant(st.to(torch.float32).contiguous()))
    return cache[src]


def _single_user(n: Node) -> Node | None:
    users = list(n.users)
    return users[0] if len(users) == 1 else None


def _product_node(x: Any, wt: Node, bias: Any) -> Node | None:
    for u in wt.users:
        if u.target == aten.addmm.default and bias is not None and u.args[:3] == (bias, x, wt):
            return u
        if u.target == aten.mm.default and bias is None and u.args[:2] == (x, wt):
            return u
    return None


def _epilogue(prod: Node, n_out: int, attrs: dict[str, Any]) -> tuple[Node, list[Node]]:
    """What the product's epilogue takes over: a relu, then a u8 quantize, each the only user of
    what it reads (after the view that gives a 3-D input's product back its leading dims);
    attrs gets relu / out_u8 for them. (last node taken, the nodes taken)."""
    last, fused = prod, []
    nxt = _single_user(last)
    if nxt is not None and nxt.target in VIEWS and out_val(nxt).shape[-1] == n_out:
        last = nxt
        fused.append(nxt)
        nxt = _single_user(last)
    if nxt is not None and nxt.target == aten.relu.default:
        attrs["relu"] = 1
        last = nxt
        fused.append(nxt)
        nxt = _single_user(last)
    if _is(nxt, QPT):
        try:
            oscale, ozp, qmin, qmax, odtype = _qparams(nxt)
        except Unsupported:
            odtype = None
        if odtype == torch.uint8 and (qmin, qmax) == (0, 255) and 0 <= ozp <= 255:
            attrs.update(out_u8=1, out_inv_scale=1.0 / oscale, out_zp=ozp)
            last = nxt
            fused.append(nxt)
    return last, fused


def _bind(L: Lowerer, out: Value, last: Node, fused: list[Node]) -> Value:
    shape = out_val(last).shape
    if list(L.shape_of(out)) != list(shape):  # a reshape is an alias: free
        out = L.node("reshape", [out], {"shape": L.dims(shape)})
    for f in fused:  # lowered here: the compiler skips them
        L.env[f] = out
    return out


def _u8_source(x: Any) -> tuple[Node, float, int] | None:
    """(the u8 tensor, scale, zero point) when x is a u8 per-tensor dequantize, seen through
    views; else None."""
    dq = x
    while isinstance(dq, Node) and dq.target in VIEWS:
        dq = dq.args[0]
    if not _is(dq, DQPT):
        return None
    scale, zp, _, _, dtype = _qparams(dq)
    src = meta(dq.args[0])
    if dtype != torch.uint8 or not isinstance(src, torch.Tensor) or src.dtype != torch.uint8:
        return None
    return dq.args[0], scale, zp


def pt2e_conv(L: Lowerer, n: Node) -> Value | None:
    """conv2d_u8s8 for convolution(dq(q_x u8), dq_per_channel(W s8)[, bias]) of one group, 2-D,
    with static sizes; None otherwise (the generic lowering then runs)."""
    x, w, b, stride, padding, dilation, transposed, _, groups = n.args
    if transposed or groups != 1 or not isinstance(w, Node):
        return None
    wv = meta(w)
    if not isinstance(wv, torch.Tensor) or wv.dim() != 4:
        return None
    src = _u8_source(x)
    if src is None or meta(src[0]).dim() != 4:
        return None
    weight = _channel_weight(L, w, 4)
    if weight is None:
        return None
    q, scales = weight
    xsrc, scale, zp = src
    if any(isinstance(e, Node) for v in (stride, padding, dilation) for e in v):
        return None
    if any(not isinstance(d, int) for d in meta(xsrc).shape):
        return None
    attrs: dict[str, Any] = {"stride": list(stride), "padding": list(padding), "dilation": list(dilation),
                             "x_scale": scale, "x_zp": zp}
    inputs = [L.value(xsrc), q, scales]
    if b is not None:
        bv = meta(b)
        if not isinstance(bv, torch.Tensor) or bv.dim() != 1 or bv.dtype != torch.float32:
            return None
        inputs.append(L.value(b))
    attrs["has_bias"] = int(b is not None)
    last, fused = _epilogue(n, int(wv.shape[0]), attrs)
    return _bind(L, L.node("conv2d_u8s8", inputs, attrs), last, fused)


def pt2e_linear(L: Lowerer, x: Any, wt: Node, w: PT2EWeight, bias: Any = None) -> Value | None:
    """linear_u8s8 for mm/addmm(x, t(W)) when x is a u8 per-tensor dequantize (seen through a
    view that flattens the leading dims) and the bias a 1-D f32 tensor; None otherwise (the
    caller lowers the product on f32, the dequantized weight then made)."""
    found = _u8_source(x)
    if found is None:
        return None
    xsrc, scale, zp = found
    src = meta(xsrc)
    if src.dim() < 1 or src.shape[-1] != w.k:
        return None
    prod = _product_node(x, wt, bias)
    if prod is None:
        return None
    attrs: dict[str, Any] = {"x_scale": scale, "x_zp": zp}
    inputs = [L.value(xsrc), w.q, w.scales]
    if bias is not None:
        bv = meta(bias)
        if not isinstance(bv, torch.Tensor) or bv.dim() != 1 or bv.dtype != torch.float32:
            return None
        inputs.append(L.value(bias))
    attrs["has_bias"] = int(bias is not None)
    last, fused = _epilogue(prod, w.n, attrs)
    out = L.node("linear_u8s8", inputs, attrs)
    return _bind(L, out, last, fused)
