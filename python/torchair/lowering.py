"""Lowering from ATen FX graphs to libair graphs, through one table.

``LOWERINGS`` maps each supported ATen overload to a function that emits the
libair nodes for it. Adding an op: its C op (op table entry, kernel, tests),
then one entry here. The same functions serve the support check: a node is
supported exactly when its lowering succeeds on a scratch graph, so the check
sees dtypes and attributes, not only the op name.

Types come from each node's ``meta['val']`` (fake tensors); symbolic sizes
(SymInts) become libair dim expressions over symbols bound by input dims.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
from torch.fx import Node

from torchair import _C
from torchair.dtypes import TORCH_TO_AIR
from torchair.errors import Unsupported

aten = torch.ops.aten

Value = int  # a libair value id
Lowering = Callable[["Lowerer", Node], Any]

LOWERINGS: dict[Any, Lowering] = {}
# For ops with several outputs: which getitem indices libair produces.
AVAILABLE_OUTPUTS: dict[Any, frozenset[int]] = {}

_DIM_ADD, _DIM_SUB, _DIM_MUL, _DIM_FLOORDIV, _DIM_CEILDIV, _DIM_MOD, _DIM_MIN, _DIM_MAX = range(8)
_INT64_MAX = 2**63 - 1


def lowers(*targets: Any, outputs: Sequence[int] | None = None) -> Callable[[Lowering], Lowering]:
    def register(fn: Lowering) -> Lowering:
        for t in targets:
            LOWERINGS[t] = fn
            if outputs is not None:
                AVAILABLE_OUTPUTS[t] = frozenset(outputs)
        return fn

    return register


def meta(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, Node) else None


def air_dtype(dtype: torch.dtype) -> int:
    code = TORCH_TO_AIR.get(dtype)
    if code is None:
        raise Unsupported(f"dtype {dtype} is not supported")
    return code


class Lowerer:
    """Builds one libair graph from FX nodes. ``env`` maps each FX node to its
    libair value (or a tuple of values for multi-output ops)."""

    def __init__(self) -> None:
        self.g = _C.Graph()
        self.env: dict[Node, Any] = {}
        self.symbols: dict[sympy.Symbol, int] = {}
        # whole size expressions of inputs (s0*s1 after a flattening view),
        # bound as symbols of their own: see bind_symbols
        self.composites: dict[sympy.Expr, int] = {}
        self._scalar_cache: dict[tuple[Any, int], Value] = {}

    # ---- symbolic sizes -------------------------------------------------

    def dim(self, size: Any) -> int:
        """A libair dim for an int or SymInt."""
        if isinstance(size, int):
            return size
        if isinstance(size, torch.SymInt):
            expr = size.node.expr
            if expr.is_number:
                return int(expr)
            return self._expr(expr)
        raise Unsupported(f"size {size!r} is not an int")

    def dims(self, sizes: Sequence[Any]) -> list[int]:
        return [self.dim(s) for s in sizes]

    def bind_symbols(self, sizes: Sequence[Any], name: str) -> None:
        """Creates a symbol for each symbolic size of an input: a bare
        symbol (s0) binds that symbol; an expression (s0*s1, the rows of a
        flattened [s0, s1, C] input) binds a symbol for the whole
        expression, used where its parts are not known. A subgraph that
        starts after a flattening view (an addmm on [s0*s1, C]) then needs
        no bare s1, which no input of it has."""
        for i, s in enumerate(sizes):
            if isinstance(s, torch.SymInt):
                expr = s.node.expr
                if isinstance(expr, sympy.Symbol):
                    if expr not in self.symbols:
                        self.symbols[expr] = self.g.symbol(str(expr))
                elif not expr.is_number and expr not in self.composites:
                    self.composites[expr] = self.g.symbol(str(expr))

    def add_size_input(self, size: Any, name: str) -> bool:
        """For a SymInt argument that no tensor input has bound (a bare
        symbol, or an expression such as s//16 that a view's shape names):
        an f32 input of dims [0, size] (empty, so its caller passes
        torch.empty((0, n)) at no cost) that binds it. False if not needed."""
        expr = size.node.expr
        if expr.is_number or expr in self.symbols or expr in self.composites:
            return False
        self.bind_symbols([size], name)
        bound = self.symbols[expr] if isinstance(expr, sympy.Symbol) else self.composites[expr]
        self.g.input(air_dtype(torch.float32), [0, bound], name)
        return True

    def _expr(self, e: sympy.Expr) -> int:
        if e.is_Integer:
            v = int(e)
            if v < 0:
                raise Unsupported(f"negative size expression {e}")
            return v
        if isinstance(e, sympy.Symbol):
            if e not in self.symbols:
                raise Unsupported(f"symbol {e} is not a dim of any input of this subgraph")
            return self.symbols[e]
        if e in self.composites and not e.free_symbols <= self.symbols.keys():
            return self.composites[e]
        if isinstance(e, sympy.Add):
            pos, neg = [], []
            for term in e.args:
                coeff, rest = term.as_coeff_Mul()
                if coeff < 0:
                    neg.append(-coeff * rest)
                else:
                    pos.append(term)
            acc = self._fold(_DIM_ADD, [self._expr(t) for t in pos])
            for t in neg:
                acc = self.g.dim_expr(_DIM_SUB, acc, self._expr(t))
            return acc
        if isinstance(e, sympy.Mul):
            return self._fold(_DIM_MUL, [self._expr(t) for t in e.args])
        name = type(e).__name__
        if name in ("CeilToInt", "FloorToInt") and type(e.args[0]).__name__ == "IntTrueDiv":
            # ceil(a / b), floor(a / b) of ints: an exact division, rounded
            a, b = e.args[0].args
            op = _DIM_CEILDIV if name == "CeilToInt" else _DIM_FLOORDIV
            return self.g.dim_expr(op, self._expr(a), self._expr(b))
        ops = {"FloorDiv": _DIM_FLOORDIV, "CeilDiv": _DIM_CEILDIV, "PythonMod": _DIM_MOD, "Mod": _DIM_MOD}
        if name in ops:
            a, b = e.args
            return self.g.dim_expr(ops[name], self._expr(a), self._expr(b))
        if name in ("Max", "Min"):
            return self._fold(_DIM_MAX if name == "Max" else _DIM_MIN, [self._expr(t) for t in e.args])
        raise Unsupported(f"size expression {e} ({name}) is not supported")

    def _fold(self, op: int, dims: list[int]) -> int:
        acc = dims[0]
        for d in dims[1:]:
            acc = self.g.dim_expr(op, acc, d)
        return acc

    # ---- values ---------------------------------------------------------

    def add_input(self, node: Node) -> Value:
        val = meta(node)
        if not isinstance(val, torch.Tensor):
            raise Unsupported(f"input {node.name} is not a tensor")
        if val.device.type != "cpu":
            raise Unsupported(f"input {node.name} is on {val.device}")
        self.bind_symbols(val.shape, node.name)
        v = self.g.input(air_dtype(val.dtype), self.dims(val.shape), node.name)
        self.env[node] = v
        return v

    def add_constant(self, tensor: torch.Tensor) -> Value:
        if tensor.device.type != "cpu":
            raise Unsupported(f"constant on {tensor.device}")
        t = tensor.detach()
        if not t.is_contiguous():
            t = t.contiguous()
        return self.g.constant(t.data_ptr(), air_dtype(t.dtype), list(t.shape), t, True)

    def scalar(self, value: float | int | bool, dtype: torch.dtype) -> Value:
        """A 0-d constant of dtype (copied into the graph)."""
        code = air_dtype(dtype)
        key = (value, code, type(value))
        v = self._scalar_cache.get(key)
        if v is None:
            t = torch.tensor(value, dtype=dtype)
            v = self.g.constant(t.data_ptr(), code, [], t, False)
            self._scalar_cache[key] = v
        return v

    def value(self, arg: Any) -> Value:
        if not isinstance(arg, Node):
            raise Unsupported(f"expected a tensor, got {type(arg).__name__}")
        v = self.env.get(arg)
        if v is None or isinstance(v, tuple):
            raise Unsupported(f"{arg.name} has no single libair value")
        return v

    def operand(self, arg: Any, dtype: torch.dtype) -> Value:
        """arg (a tensor node or a Python number) as a value of dtype."""
        if isinstance(arg, Node):
            v = self.value(arg)
            return self.cast(v, dtype)
        if isinstance(arg, (bool, int, float)):
            return self.scalar(arg, dtype)
        raise Unsupported(f"operand {arg!r} is not a tensor or number")

    def dtype_of(self, v: Value) -> int:
        return self.g.value_info(v)[0]

    def shape_of(self, v: Value) -> tuple[int, ...]:
        return self.g.value_info(v)[1]

    def cast(self, v: Value, dtype: torch.dtype) -> Value:
        code = air_dtype(dtype)
        if self.dtype_of(v) == code:
            return v
        return self.node("cast", [v], {"dtype": code})

    def node(self, op: str, inputs: Sequence[Value], attrs: dict[str, Any] | None = None) -> Any:
        attrs = attrs or {}
        for key, v in attrs.items():
            # dynamo turns ints that change between compiles (a stride, a
            # padding) into SymInts; libair attributes are fixed at compile time.
            if any(isinstance(e, Node) for e in (v if isinstance(v, (list, tuple)) else (v,))):
                raise Unsupported(f"{op} with a symbolic {key}")
        outs = self.g.node(op, list(inputs), attrs)
        return outs[0] if len(outs) == 1 else outs


# ---- helpers ---------------------------------------------------------------


def out_val(node: Node) -> torch.Tensor:
    val = meta(node)
    if not isinstance(val, torch.Tensor):
        raise Unsupported(f"{node.name} does not produce a tensor")
    return val


def arg(node: Node, i: int, name: str, default: Any = None) -> Any:
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def norm_axis(axis: int, rank: int) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < max(rank, 1):
        raise Unsupported(f"axis {axis} out of range for rank {rank}")
    return a


def result_dtype(a: Any, b: Any) -> torch.dtype:
    ma = meta(a) if isinstance(a, Node) else a
    mb = meta(b) if isinstance(b, Node) else b
    return torch.result_type(ma, mb)


def is_float(dtype: torch.dtype) -> bool:
    return dtype in (torch.float32, torch.float64)


# ---- elementwise -----------------------------------------------------------

_UNARY = {
    aten.neg.default: "neg",
    aten.abs.default: "abs",
    aten.exp.default: "exp",
    aten.log.default: "log",
    aten.log1p.default: "log1p",
    aten.expm1.default: "expm1",
    aten.sqrt.default: "sqrt",
    aten.rsqrt.default: "rsqrt",
    aten.sin.default: "sin",
    aten.cos.default: "cos",
    aten.tanh.default: "tanh",
    aten.sigmoid.default: "sigmoid",
    aten.erf.default: "erf",
    aten.relu.default: "relu",
    aten.silu.default: "silu",
    aten.hardswish.default: "hardswish",
    aten.hardsigmoid.default: "hardsigmoid",
    aten.reciprocal.default: "reciprocal",
    aten.floor.default: "floor",
    aten.ceil.default: "ceil",
    aten.round.default: "round",
    aten.trunc.default: "trunc",
    aten.sign.default: "sign",
    aten.logical_not.default: "logical_not",
    aten.bitwise_not.default: "bitwise_not",
    aten.isnan.default: "isnan",
}


def _unary(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    x = L.value(n.args[0])
    op = _UNARY[n.target]
    if op in ("logical_not", "isnan"):
        return L.node(op, [x])
    # float ops on integer inputs: torch promotes to the default float dtype
    return L.node(op, [L.cast(x, out.dtype)])


for _t in _UNARY:
    LOWERINGS[_t] = _unary


@lowers(aten.gelu.default)
def _gelu(L: Lowerer, n: Node) -> Value:
    approx = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
    return L.node("gelu_tanh" if approx == "tanh" else "gelu", [L.value(n.args[0])])


@lowers(aten.hardtanh.default, aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    x = L.cast(L.value(n.args[0]), out.dtype)
    if n.target == aten.hardtanh.default:
        lo, hi = arg(n, 1, "min_val", -1.0), arg(n, 2, "max_val", 1.0)
    elif n.target == aten.clamp_min.default:
        lo, hi = arg(n, 1, "min"), None
    elif n.target == aten.clamp_max.default:
        lo, hi = None, arg(n, 1, "max")
    else:
        lo, hi = arg(n, 1, "min"), arg(n, 2, "max")
    for b in (lo, hi):
        if b is not None and not isinstance(b, (int, float)):
            raise Unsupported("clamp bounds must be numbers")
    attrs = {"has_min": int(lo is not None), "has_max": int(hi is not None)}
    if lo is not None:
        attrs["min"] = float(lo)
    if hi is not None:
        attrs["max"] = float(hi)
    return L.node("clamp", [x], attrs)


@lowers(aten.clamp.Tensor)
def _clamp_tensor(L: Lowerer, n: Node) -> Value:
    # torch.clamp(x, lo, hi) == minimum(maximum(x, lo), hi), NaN included
    out = out_val(n)
    y = L.cast(L.value(n.args[0]), out.dtype)
    lo, hi = arg(n, 1, "min"), arg(n, 2, "max")
    if lo is not None:
        y = L.node("maximum", [y, L.operand(lo, out.dtype)])
    if hi is not None:
        y = L.node("minimum", [y, L.operand(hi, out.dtype)])
    return y if (lo is not None or hi is not None) else L.node("copy", [y])


@lowers(aten.leaky_relu.default)
def _leaky_relu(L: Lowerer, n: Node) -> Value:
    return L.node("leaky_relu", [L.value(n.args[0])], {"negative_slope": float(arg(n, 1, "negative_slope", 0.01))})


@lowers(aten.elu.default)
def _elu(L: Lowerer, n: Node) -> Value:
    """ELU, and SELU and CELU through its arguments: one elementwise op."""
    alpha, scale, input_scale = (arg(n, i, k, 1.0) for i, k in ((1, "alpha"), (2, "scale"), (3, "input_scale")))
    if any(not isinstance(v, (int, float)) for v in (alpha, scale, input_scale)):
        raise Unsupported("elu with a symbolic alpha or scale")
    return L.node("elu", [L.value(n.args[0])],
                  {"alpha": float(alpha), "scale": float(scale), "input_scale": float(input_scale)})


_BINARY = {
    aten.add.Tensor: "add",
    aten.add.Scalar: "add",
    aten.sub.Tensor: "sub",
    aten.sub.Scalar: "sub",
    aten.rsub.Scalar: "rsub",
    aten.rsub.Tensor: "rsub",
    aten.mul.Tensor: "mul",
    aten.mul.Scalar: "mul",
    aten.div.Tensor: "div",
    aten.div.Scalar: "div",
    aten.pow.Tensor_Scalar: "pow",
    aten.pow.Tensor_Tensor: "pow",
    aten.pow.Scalar: "pow",
    aten.maximum.default: "maximum",
    aten.minimum.default: "minimum",
    aten.remainder.Tensor: "remainder",
    aten.remainder.Scalar: "remainder",
    aten.fmod.Tensor: "fmod",
    aten.fmod.Scalar: "fmod",
    aten.floor_divide.default: "floor_divide",
    aten.bitwise_and.Tensor: "bitwise_and",
    aten.bitwise_and.Scalar: "bitwise_and",
    aten.bitwise_or.Tensor: "bitwise_or",
    aten.bitwise_or.Scalar: "bitwise_or",
    aten.bitwise_xor.Tensor: "bitwise_xor",
    aten.bitwise_xor.Scalar: "bitwise_xor",
}


def _zero_pad_window(n: Any) -> tuple[int, int, Node] | None:
    """(dim, start, x) for constant_pad_nd(x, pad, 0) that pads one dim of x
    and crops none; else None."""
    if not isinstance(n, Node) or n.op != "call_function" or n.target != aten.constant_pad_nd.default:
        return None
    x, pad = n.args[:2]
    value = arg(n, 2, "value", 0)
    if not isinstance(value, (int, float)) or value != 0 or any(not isinstance(p, int) or p < 0 for p in pad):
        return None
    padded = [i for i in range(len(pad) // 2) if pad[2 * i] or pad[2 * i + 1]]
    if len(padded) != 1 or not isinstance(x, Node):
        return None
    return meta(x).dim() - 1 - padded[0], pad[2 * padded[0]], x


# adds deep enough to be something else than a split's gradients
_PAD_SUM_DEPTH = 16


def _zero_pad_parts(n: Any, like: torch.Tensor, depth: int = 0) -> tuple[int, list[tuple[int, Node]]] | None:
    """n as a sum of zero pads along one dim, each of like's shape and dtype:
    (dim, [(start, unpadded source)]), or None. An add both of whose
    operands are pads or adds is looked into, to a bounded depth: every add
    of a residual stream asks, and must not walk the stream (quadratic, and
    Python's recursion limit past a thousand layers)."""
    m = meta(n) if isinstance(n, Node) else None
    if not isinstance(m, torch.Tensor) or m.shape != like.shape or m.dtype != like.dtype:
        return None
    if (w := _zero_pad_window(n)) is not None:
        return w[0], [(w[1], w[2])]
    if n.target != aten.add.Tensor or n.kwargs.get("alpha", 1) != 1 or len(n.args) != 2 or depth >= _PAD_SUM_DEPTH:
        return None
    if not all(isinstance(v, Node) and (v.target == aten.add.Tensor or _zero_pad_window(v)) for v in n.args):
        return None
    a = _zero_pad_parts(n.args[0], like, depth + 1)
    b = _zero_pad_parts(n.args[1], like, depth + 1) if a is not None else None
    if a is None or b is None or a[0] != b[0]:
        return None
    return a[0], a[1] + b[1]


def _pads_as_cat(L: Lowerer, n: Node) -> Value | None:
    """A sum of zero pads whose unpadded windows do not overlap, as one cat
    of the windows (and zeros between them). It is select_backward's (see
    decompositions.py) in a ViT's qkv split: three pads of [3, B, H, T, D]
    and two adds, five full-size passes, where the cat writes once. Values
    as the sum gives them, but for -0.0, which the cat keeps (as eager's own
    select_backward does) where + 0.0 made it 0.0."""
    out = out_val(n)
    parts = _zero_pad_parts(n, out)
    if parts is None or len(parts[1]) < 2:
        return None
    d, windows = parts
    if not isinstance(out.shape[d], int) or any(not isinstance(meta(src).shape[d], int) for _, src in windows):
        return None
    if any(isinstance(L.env.get(src), (tuple, type(None))) for _, src in windows):
        return None  # a source lowered elsewhere (check_node lowers the add alone)
    windows.sort(key=lambda w: w[0])
    pieces, at = [], 0
    for start, src in windows:
        if start < at:
            return None  # overlapping windows: a sum, not a cat
        if start > at:
            block = list(out.shape[:d]) + [start - at] + list(out.shape[d + 1:])
            pieces.append(L.node("full", [], {"shape": L.dims(block), "value": 0.0, "dtype": air_dtype(out.dtype)}))
        pieces.append(L.value(src))
        at = start + meta(src).shape[d]
    if at < out.shape[d]:
        block = list(out.shape[:d]) + [out.shape[d] - at] + list(out.shape[d + 1:])
        pieces.append(L.node("full", [], {"shape": L.dims(block), "value": 0.0, "dtype": air_dtype(out.dtype)}))
    return L.node("cat", pieces, {"axis": d})


def _binary(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    op = _BINARY[n.target]
    a, b = n.args[0], n.args[1]
    if n.target == aten.add.Tensor and (joined := _pads_as_cat(L, n)) is not None:
        return joined
    if op == "pow" and isinstance(b, (int, float)) and not isinstance(b, bool):
        if b == 2:
            x = L.operand(a, out.dtype)
            return L.node("mul", [x, x])
        if b == 0.5 and is_float(out.dtype):
            return L.node("sqrt", [L.operand(a, out.dtype)])
        if b == 1:
            return L.node("copy", [L.operand(a, out.dtype)])
    alpha = n.kwargs.get("alpha", n.args[2] if len(n.args) > 2 else 1)
    if op == "rsub":
        a, b, op = b, a, "sub"
    x, y = L.operand(a, out.dtype), L.operand(b, out.dtype)
    if alpha != 1 and op in ("add", "sub"):
        y = L.node("mul", [y, L.scalar(alpha, out.dtype)])
    if n.target == aten.div.Tensor and n.kwargs.get("rounding_mode") is not None:
        raise Unsupported("div with rounding_mode")
    return L.node(op, [x, y])


for _t in _BINARY:
    LOWERINGS[_t] = _binary


@lowers(aten.div.Tensor_mode)
def _div_mode(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    mode = n.kwargs.get("rounding_mode", n.args[2] if len(n.args) > 2 else None)
    x, y = L.operand(n.args[0], out.dtype), L.operand(n.args[1], out.dtype)
    if mode == "floor":
        return L.node("floor_divide", [x, y])
    if mode == "trunc" and is_float(out.dtype):
        return L.node("trunc", [L.node("div", [x, y])])
    if mode is None and is_float(out.dtype):
        return L.node("div", [x, y])
    raise Unsupported(f"div rounding_mode={mode!r} on {out.dtype}")


_COMPARE = {
    aten.eq.Tensor: "eq",
    aten.eq.Scalar: "eq",
    aten.ne.Tensor: "ne",
    aten.ne.Scalar: "ne",
    aten.lt.Tensor: "lt",
    aten.lt.Scalar: "lt",
    aten.le.Tensor: "le",
    aten.le.Scalar: "le",
    aten.gt.Tensor: "gt",
    aten.gt.Scalar: "gt",
    aten.ge.Tensor: "ge",
    aten.ge.Scalar: "ge",
    aten.logical_and.default: "logical_and",
    aten.logical_or.default: "logical_or",
    aten.logical_xor.default: "logical_xor",
}


def _compare(L: Lowerer, n: Node) -> Value:
    a, b = n.args[0], n.args[1]
    dt = result_dtype(a, b)
    return L.node(_COMPARE[n.target], [L.operand(a, dt), L.operand(b, dt)])


for _t in _COMPARE:
    LOWERINGS[_t] = _compare


@lowers(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    cond = L.cast(L.value(n.args[0]), torch.bool)
    return L.node("where", [cond, L.operand(n.args[1], out.dtype), L.operand(n.args[2], out.dtype)])


@lowers(aten._to_copy.default, aten.to.dtype)
def _to_copy(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    if out.device.type != "cpu":
        raise Unsupported(f"copy to {out.device}")
    x = L.value(n.args[0])
    if L.dtype_of(x) == air_dtype(out.dtype):
        return L.node("copy", [x])
    return L.cast(x, out.dtype)


@lowers(aten.scalar_tensor.default)
def _scalar_tensor(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    return L.node("copy", [L.scalar(n.args[0], out.dtype)])


# ---- shapes ----------------------------------------------------------------


@lowers(
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.alias.default,
    aten.detach.default,
    aten.flatten.using_ints,
    aten.lift_fresh_copy.default,
)
def _reshape(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    return L.node("reshape", [L.value(n.args[0])], {"shape": L.dims(out.shape)})


@lowers(aten.clone.default)
def _clone(L: Lowerer, n: Node) -> Value:
    return L.node("copy", [L.value(n.args[0])])


@lowers(aten.permute.default)
def _permute(L: Lowerer, n: Node) -> Value:
    x, perm = L.value(n.args[0]), list(n.args[1])
    sizes = meta(n.args[0]).shape
    moved = [d % len(sizes) for d in perm if not (isinstance(sizes[d], int) and sizes[d] == 1)]
    if moved == sorted(moved):
        # only dims of size 1 move: the same memory order, a reshape (no copy)
        return L.node("reshape", [x], {"shape": L.dims(out_val(n).shape)})
    return L.node("permute", [x], {"perm": perm})


@lowers(aten.t.default, aten.transpose.int)
def _transpose(L: Lowerer, n: Node) -> Value:
    x = L.value(n.args[0])
    rank = len(L.shape_of(x))
    if n.target == aten.t.default:
        d0, d1 = 0, min(1, rank - 1)
    else:
        d0, d1 = norm_axis(n.args[1], rank), norm_axis(n.args[2], rank)
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return L.node("permute", [x], {"perm": perm})


@lowers(aten.expand.default)
def _expand(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    return L.node("expand", [L.value(n.args[0])], {"shape": L.dims(out.shape)})


@lowers(aten.repeat.default)
def _repeat(L: Lowerer, n: Node) -> Value:
    """x.repeat(reps) tiles x: each dim s (with leading 1s for extra reps)
    becomes a new dim of its rep count before it, expanded, then the pairs
    merge: [1, s0, 1, s1] -> [r0, s0, r1, s1] -> [r0 * s0, r1 * s1]."""
    x, reps = n.args[:2]
    xm = meta(x)
    if any(not isinstance(r, int) for r in reps) or len(reps) < xm.dim():
        raise Unsupported("repeat with symbolic or too few repeats")
    shape = [1] * (len(reps) - xm.dim()) + list(xm.shape)
    split = [d for s in shape for d in (1, s)]
    paired = [d for r, s in zip(reps, shape) for d in (r, s)]
    y = L.node("reshape", [L.value(x)], {"shape": L.dims(split)})
    y = L.node("expand", [y], {"shape": L.dims(paired)})
    return L.node("reshape", [y], {"shape": L.dims(out_val(n).shape)})


def _nonnegative(e: sympy.Expr) -> bool:
    """Whether a size expression cannot be negative; sympy does not know it
    of ceil(a / b) or floor(a / b) of sizes (CeilToInt(IntTrueDiv(a, b)))."""
    if e.is_nonnegative:
        return True
    if type(e).__name__ in ("CeilToInt", "FloorToInt") and type(e.args[0]).__name__ == "IntTrueDiv":
        return all(_nonnegative(a) for a in e.args[0].args)
    return False


def _size_bound(b: Any) -> Any:
    """A slice bound that is a graph node holding a SymInt which cannot be
    negative (an expression of sizes): that SymInt; anything else as it is."""
    v = meta(b) if isinstance(b, Node) else b
    if isinstance(v, torch.SymInt) and _nonnegative(v.node.expr):
        return v
    return b


def _slice_bounds(L: Lowerer, size: Any, start: Any, end: Any) -> tuple[int, int]:
    """Normalizes Python slice bounds to [start, end) within [0, size]."""
    if isinstance(size, int) and isinstance(start, int) and isinstance(end, int):
        s = max(0, min(size, start + size if start < 0 else start))
        e = max(s, min(size, end + size if end < 0 else end))
        return s, e
    size_d = L.dim(size)
    if isinstance(start, int) and start >= 0 and isinstance(end, int) and end >= _INT64_MAX // 2:
        return L.g.dim_expr(_DIM_MIN, start, size_d), size_d
    end = _size_bound(end)
    if not isinstance(start, int) or not isinstance(end, (int, torch.SymInt)):
        raise Unsupported("slice with symbolic bounds")
    # int bounds on a symbolic size (wav2vec2's positional conv output [..., :-1]),
    # or a size-like SymInt end (BERT's position_ids[:, :s]): Python's clamping
    # written as dim expressions, evaluated per call; a negative bound is
    # size - min(size, -b), as no dim may evaluate below 0
    def bound(b: int | torch.SymInt) -> int:
        if isinstance(b, torch.SymInt):
            return L.g.dim_expr(_DIM_MIN, L.dim(b), size_d)
        if b >= _INT64_MAX // 2:
            return size_d
        if b >= 0:
            return L.g.dim_expr(_DIM_MIN, b, size_d)
        return L.g.dim_expr(_DIM_SUB, size_d, L.g.dim_expr(_DIM_MIN, size_d, -b))

    s = bound(start)
    return s, L.g.dim_expr(_DIM_MAX, s, bound(end))


@lowers(aten.slice.Tensor)
def _slice(L: Lowerer, n: Node) -> Value:
    x = L.value(n.args[0])
    xv = meta(n.args[0])
    rank = xv.dim()
    axis = norm_axis(arg(n, 1, "dim", 0), rank)
    start = arg(n, 2, "start", None)
    end = arg(n, 3, "end", None)
    step = arg(n, 4, "step", 1)
    start = 0 if start is None else start
    end = _INT64_MAX if end is None else end
    start, end = _slice_bounds(L, xv.shape[axis], start, end)
    return L.node("slice", [x], {"axis": axis, "start": start, "end": end, "step": int(step)})


@lowers(aten.select.int)
def _select(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    xv = meta(n.args[0])
    axis = norm_axis(n.args[1], xv.dim())
    index = n.args[2]
    size = xv.shape[axis]
    if not isinstance(index, int):
        raise Unsupported("select with a symbolic index")
    if isinstance(size, int):
        if index < 0:
            index += size
        start, end = index, index + 1
    else:
        # an int index into a symbolic size (RoBERTa's [:, 0] at a second
        # length): the slice's clamped bounds, evaluated per call; an index
        # out of range leaves an empty slice, which the reshape refuses
        start, end = _slice_bounds(L, size, index, _INT64_MAX if index == -1 else index + 1)
    s = L.node("slice", [L.value(n.args[0])], {"axis": axis, "start": start, "end": end, "step": 1})
    return L.node("reshape", [s], {"shape": L.dims(out.shape)})


@lowers(aten.copy.default)
def _copy(L: Lowerer, n: Node) -> Value:
    """copy(self, src), functionalized copy_: src's values in self's dtype
    and shape (broadcast); self's values are not read."""
    out = out_val(n)
    src = n.args[1]
    v = L.cast(L.value(src), out.dtype)
    if tuple(meta(src).shape) != tuple(out.shape):
        return L.node("expand", [v], {"shape": L.dims(out.shape)})
    return L.node("copy", [v])


def _scatter_pieces(L: Lowerer, base: Node, axis: int, start: Any, end: Any, middle: Value) -> Value:
    """base with [start, end) along axis replaced by middle: a cat of what
    is kept on either side and middle (pieces known to be empty left out)."""
    size = meta(base).shape[axis]
    b = L.value(base)
    pieces = []
    if not (isinstance(start, int) and start == 0):
        s, e = _slice_bounds(L, size, 0, start)
        pieces.append(L.node("slice", [b], {"axis": axis, "start": s, "end": e, "step": 1}))
    pieces.append(middle)
    if not (isinstance(end, int) and (end >= _INT64_MAX // 2 or (isinstance(size, int) and end >= size))):
        s, e = _slice_bounds(L, size, end, _INT64_MAX)
        pieces.append(L.node("slice", [b], {"axis": axis, "start": s, "end": e, "step": 1}))
    return pieces[0] if len(pieces) == 1 else L.node("cat", pieces, {"axis": axis})


@lowers(aten.slice_scatter.default)
def _slice_scatter(L: Lowerer, n: Node) -> Value:
    """slice_scatter(base, src, dim, start, end, step 1): functionalized
    x[..., a:b] = src (BART's shift_tokens_right)."""
    out = out_val(n)
    base, src = n.args[:2]
    axis = norm_axis(arg(n, 2, "dim", 0), out.dim())
    start, end, step = arg(n, 3, "start", None), arg(n, 4, "end", None), arg(n, 5, "step", 1)
    if step != 1:
        raise Unsupported("slice_scatter with a step")
    start = 0 if start is None else start
    end = _INT64_MAX if end is None else end
    if not isinstance(start, int) or not isinstance(end, int):
        raise Unsupported("slice_scatter with symbolic bounds")
    size = out.shape[axis]
    if isinstance(size, int):  # Python's clamping, so that the pieces are what eager keeps
        start, end = _slice_bounds(L, size, start, end)
    elif start < 0 or end < 0:
        raise Unsupported("slice_scatter with a negative bound on a symbolic size")
    return _scatter_pieces(L, base, axis, start, end, L.cast(L.value(src), out.dtype))


@lowers(aten.select_scatter.default)
def _select_scatter(L: Lowerer, n: Node) -> Value:
    """select_scatter(base, src, dim, index): functionalized x[..., i] = src."""
    out = out_val(n)
    base, src = n.args[:2]
    axis = norm_axis(n.args[2], out.dim())
    index, size = n.args[3], out.shape[axis]
    if not isinstance(index, int) or (index < 0 and not isinstance(size, int)):
        raise Unsupported("select_scatter with a symbolic or negative index on a symbolic size")
    if index < 0:
        index += size
    shape = list(out.shape)
    shape[axis] = 1
    middle = L.node("reshape", [L.cast(L.value(src), out.dtype)], {"shape": L.dims(shape)})
    return _scatter_pieces(L, base, axis, index, index + 1, middle)


@lowers(aten.cat.default)
def _cat(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    tensors = [t for t in n.args[0] if not (isinstance(t, Node) and meta(t).numel() == 0 and meta(t).dim() == 1)]
    axis = norm_axis(arg(n, 1, "dim", 0), out.dim())
    values = [L.cast(L.value(t), out.dtype) for t in tensors]
    if len(values) == 1:
        return L.node("copy", values)
    return L.node("cat", values, {"axis": axis})


@lowers(aten.split_with_sizes.default, aten.split.Tensor)
def _split(L: Lowerer, n: Node) -> tuple[Value, ...]:
    xv = meta(n.args[0])
    axis = norm_axis(arg(n, 2, "dim", 0), xv.dim())
    outs = meta(n)
    x = L.value(n.args[0])
    start = 0
    values = []
    for o in outs:
        length = o.shape[axis]
        if not isinstance(length, int):
            raise Unsupported("split with symbolic sizes")
        values.append(L.node("slice", [x], {"axis": axis, "start": start, "end": start + length, "step": 1}))
        start += length
    return tuple(values)


@lowers(operator.getitem)
def _getitem(L: Lowerer, n: Node) -> Value:
    src, index = n.args
    values = L.env.get(src)
    if not isinstance(values, tuple) or not isinstance(index, int) or values[index] is None:
        raise Unsupported(f"output {index} of {getattr(src, 'name', src)} is not available")
    return values[index]


# ---- reductions and normalization -----------------------------------------


def _axes(dims: Any, rank: int) -> list[int]:
    if dims is None or rank == 0:  # a 0-d tensor takes dim 0 or -1: "all" of nothing
        return []
    if isinstance(dims, int):
        dims = [dims]
    return sorted(norm_axis(d, rank) for d in dims)


@lowers(
    aten.mean.dim,
    aten.sum.dim_IntList,
    aten.amax.default,
    aten.amin.default,
    aten.mean.default,
    aten.sum.default,
    aten.prod.default,
    aten.prod.dim_int,
)
def _reduce(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    xv = meta(n.args[0])
    op = {
        aten.mean.dim: "mean",
        aten.mean.default: "mean",
        aten.sum.dim_IntList: "sum",
        aten.sum.default: "sum",
        aten.amax.default: "amax",
        aten.amin.default: "amin",
        aten.prod.default: "prod",
        aten.prod.dim_int: "prod",
    }[n.target]
    if n.target in (aten.mean.default, aten.sum.default, aten.prod.default):
        axes, keep = list(range(xv.dim())), 0
    else:
        axes = _axes(arg(n, 1, "dim", None), xv.dim())
        keep = int(bool(arg(n, 2, "keepdim", False)))
        if not axes:
            axes = list(range(xv.dim()))
    x = L.cast(L.value(n.args[0]), out.dtype)
    return L.node(op, [x], {"axes": axes, "keepdim": keep})


@lowers(aten.any.dim, aten.any.dims, aten.any.default, aten.all.dim, aten.all.dims, aten.all.default)
def _any_all(L: Lowerer, n: Node) -> Value:
    # on bool, amax is "any" and amin is "all"
    xv = meta(n.args[0])
    op = "amax" if n.target in (aten.any.dim, aten.any.dims, aten.any.default) else "amin"
    axes = _axes(arg(n, 1, "dim", None), xv.dim()) if len(n.args) > 1 or "dim" in n.kwargs else []
    keep = int(bool(arg(n, 2, "keepdim", False)))
    x = L.cast(L.value(n.args[0]), torch.bool)
    return L.node(op, [x], {"axes": axes or list(range(xv.dim())), "keepdim": keep})


@lowers(aten.linalg_vector_norm.default)
def _vector_norm(L: Lowerer, n: Node) -> Value:
    """||x||_ord over dims (all when none), in the output's dtype: ord 2 as
    sqrt(sum(x * x)), 1 as sum(|x|), +-inf as amax / amin(|x|), 0 as the
    count of nonzeros, any other p as sum(|x|^p)^(1/p). Eager computes them
    the same way, without scaling (so 1e20 overflows to inf in both).
    Weight norm (wav2vec2's positional conv) and F.normalize reach the graph
    as this op; as a fallback it split the graph, and its weight norm, all
    parameters, could not fold at compile time."""
    out = out_val(n)
    xv = meta(n.args[0])
    if not is_float(out.dtype) or xv.is_complex():
        raise Unsupported("linalg_vector_norm of a non-float tensor")
    order = arg(n, 1, "ord", 2)
    if not isinstance(order, (int, float)) or isinstance(order, bool) or math.isnan(order):
        raise Unsupported(f"linalg_vector_norm of ord {order}")
    axes = _axes(arg(n, 2, "dim", None), xv.dim()) or list(range(xv.dim()))
    keep = int(bool(arg(n, 3, "keepdim", False)))
    # (dynamo never makes a size of 0 symbolic, so an empty extent is an int here)
    if (order < 0 or order == math.inf) and any(isinstance(xv.shape[a], int) and xv.shape[a] == 0 for a in axes):
        raise Unsupported(f"linalg_vector_norm: the {order} norm of nothing (eager raises)")
    x = L.cast(L.value(n.args[0]), out.dtype)
    attrs = {"axes": axes, "keepdim": keep}
    if order == 2:
        return L.node("sqrt", [L.node("sum", [L.node("mul", [x, x])], attrs)])
    if order == 0:
        nonzero = L.node("ne", [x, L.operand(0.0, out.dtype)])
        return L.node("sum", [L.cast(nonzero, out.dtype)], attrs)
    a = L.node("abs", [x])
    if order in (1, math.inf, -math.inf):
        return L.node({1: "sum", math.inf: "amax", -math.inf: "amin"}[order], [a], attrs)
    powered = L.node("pow", [a, L.operand(float(order), out.dtype)])
    return L.node("pow", [L.node("sum", [powered], attrs), L.operand(1.0 / order, out.dtype)])


@lowers(aten.cumsum.default)
def _cumsum(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    x = L.cast(L.value(n.args[0]), out.dtype)
    return L.node("cumsum", [x], {"axis": norm_axis(n.args[1], out.dim())})


@lowers(aten.argmax.default)
def _argmax(L: Lowerer, n: Node) -> Value:
    dim = arg(n, 1, "dim", None)
    xv = meta(n.args[0])
    if dim is None or xv.dim() == 0:  # over everything: flatten first
        flat = L.node("reshape", [L.value(n.args[0])], {"shape": [L.dim(xv.numel())]})
        out = L.node("argmax", [flat], {"axis": 0, "keepdim": 0})
        return L.node("reshape", [out], {"shape": L.dims(out_val(n).shape)})
    return L.node("argmax", [L.value(n.args[0])], {"axis": norm_axis(dim, xv.dim()), "keepdim": int(arg(n, 2, "keepdim", False))})


@lowers(aten._softmax.default, aten._log_softmax.default)
def _softmax(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    if arg(n, 2, "half_to_float", False):
        raise Unsupported("softmax with half_to_float")
    op = "softmax" if n.target == aten._softmax.default else "log_softmax"
    return L.node(op, [L.value(n.args[0])], {"axis": norm_axis(n.args[1], out.dim())})


@lowers(aten.native_layer_norm.default, outputs=(0, 1, 2))
def _layer_norm(L: Lowerer, n: Node) -> tuple[Value, ...]:
    x, shape, w, b, eps = n.args[:5]
    inputs = [L.value(x)]
    if w is not None:
        inputs.append(L.value(w))
    if b is not None:
        inputs.append(L.value(b))
    attrs = {"normalized_ndim": len(shape), "eps": float(eps), "has_weight": int(w is not None), "has_bias": int(b is not None)}
    return tuple(L.node("layer_norm", inputs, attrs))


@lowers(aten.native_group_norm.default, outputs=(0, 1, 2))
def _group_norm(L: Lowerer, n: Node) -> tuple[Value, ...]:
    """GroupNorm as a layer norm over each group's elements, which are contiguous in
    [N, C, *spatial] ([N, G, C/G * HxW]), then the per-channel affine as a broadcast
    multiply and add. Returns (out, mean [N, G], rstd [N, G]) as aten does. Sizes come
    from the tensors' shapes, so a symbolic batch or image size stays symbolic."""
    x, w, b = n.args[:3]
    groups, eps = n.args[6], n.args[7]
    xm = meta(x)
    C = xm.shape[1]
    if not isinstance(groups, int) or not isinstance(C, int) or groups <= 0 or C % groups != 0:
        raise Unsupported(f"group_norm: {C} channels in {groups} groups")
    per_group = C // groups
    for s in xm.shape[2:]:
        per_group = per_group * s
    flat = L.node("reshape", [L.value(x)], {"shape": L.dims([xm.shape[0], groups, per_group])})
    y, mean, rstd = L.node("layer_norm", [flat], {"normalized_ndim": 1, "eps": float(eps), "has_weight": 0,
                                                  "has_bias": 0})
    y = L.node("reshape", [y], {"shape": L.dims(xm.shape)})
    per_channel = [C] + [1] * (xm.dim() - 2)
    if w is not None:
        y = L.node("mul", [y, L.node("reshape", [L.value(w)], {"shape": per_channel})])
    if b is not None:
        y = L.node("add", [y, L.node("reshape", [L.value(b)], {"shape": per_channel})])
    stats = {"shape": L.dims([xm.shape[0], groups])}
    return y, L.node("reshape", [mean], stats), L.node("reshape", [rstd], stats)


@lowers(aten._native_batch_norm_legit.no_stats, outputs=(0, 1, 2))
def _batch_norm_batch_stats(L: Lowerer, n: Node) -> tuple[Value, ...]:
    """Batch norm with the batch's own statistics and no running ones. InstanceNorm
    (``F.instance_norm``) becomes this over x viewed as [1, N*C, *spatial]. Each
    channel's statistics are over every dim but 1: with a batch of one that is a
    layer norm over the rows of [C, prod(spatial)]; otherwise the channels are first
    moved to the front ([C, N, *spatial]) and back after. Then the per-channel affine,
    as for GroupNorm. Returns (out, mean [C], rstd [C]) as aten does."""
    x, w, b, training, _momentum, eps = n.args
    if training is not True:
        raise Unsupported("_native_batch_norm_legit.no_stats without training=True")
    xm = meta(x)
    if xm.dim() < 2:
        raise Unsupported(f"batch norm over a {xm.dim()}-d input")
    C, N, rank = xm.shape[1], xm.shape[0], xm.dim()
    one_image = isinstance(N, int) and N == 1  # a symbolic batch is not known to be 1
    rows = list(xm.shape[2:]) if one_image else [N] + list(xm.shape[2:])  # each channel's elements
    swap = [1, 0] + list(range(2, rank))  # [N, C, ...] <-> [C, N, ...]
    xv = L.value(x) if one_image else L.node("permute", [L.value(x)], {"perm": swap})
    per_channel = 1
    for s in rows:
        per_channel = per_channel * s
    flat = L.node("reshape", [xv], {"shape": L.dims([C, per_channel])})
    y, mean, rstd = L.node("layer_norm", [flat], {"normalized_ndim": 1, "eps": float(eps), "has_weight": 0,
                                                  "has_bias": 0})
    if one_image:
        y = L.node("reshape", [y], {"shape": L.dims(xm.shape)})
    else:
        y = L.node("permute", [L.node("reshape", [y], {"shape": L.dims([C] + rows)})], {"perm": swap})
    affine_shape = [C] + [1] * (rank - 2)
    if w is not None:
        y = L.node("mul", [y, L.node("reshape", [L.value(w)], {"shape": affine_shape})])
    if b is not None:
        y = L.node("add", [y, L.node("reshape", [L.value(b)], {"shape": affine_shape})])
    stats = {"shape": L.dims([C])}
    return y, L.node("reshape", [mean], stats), L.node("reshape", [rstd], stats)


# ---- matrix products, convolution, pooling, attention ---------------------


@lowers(aten.mm.default)
def _mm(L: Lowerer, n: Node) -> Value:
    return L.node("mm", [L.value(n.args[0]), L.value(n.args[1])])


@lowers(aten.bmm.default)
def _bmm(L: Lowerer, n: Node) -> Value:
    return L.node("bmm", [L.value(n.args[0]), L.value(n.args[1])])


@lowers(aten.addmm.default)
def _addmm(L: Lowerer, n: Node) -> Value:
    bias, a, b = (L.value(v) for v in n.args[:3])
    beta = float(n.kwargs.get("beta", 1))
    alpha = float(n.kwargs.get("alpha", 1))
    return L.node("addmm", [bias, a, b], {"alpha": alpha, "beta": beta})


@lowers(aten.convolution.default)
def _convolution(L: Lowerer, n: Node) -> Value:
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = n.args
    if isinstance(groups, Node):
        raise Unsupported("convolution with symbolic groups")
    if transposed:
        return _conv_transpose2d(L, n)
    rank = meta(x).dim()
    if rank not in (3, 4):
        raise Unsupported(f"{rank - 2}-d convolution (only 1-d and 2-d)")
    for v in (stride, padding, dilation):
        if any(isinstance(e, Node) for e in v):
            raise Unsupported("convolution with a symbolic stride, padding or dilation")
    xv, wv = L.value(x), L.value(w)
    stride, padding, dilation = list(stride), list(padding), list(dilation)
    if rank == 3:
        # a 1-d convolution is a 2-d one over [N, C, 1, L] with a [O, C/g, 1, K] kernel;
        # shapes from libair's own dims, as a symbolic length (s//5 - 1 after a
        # stride-5 conv) is bound whole and the output's (s//10 - 1) could not be
        # written from it, but conv2d computes it
        wm = meta(w)
        n0, c0, l0 = L.shape_of(xv)
        xv = L.node("reshape", [xv], {"shape": [n0, c0, 1, l0]})
        wv = L.node("reshape", [wv], {"shape": L.dims([wm.shape[0], wm.shape[1], 1, wm.shape[2]])})
        stride, padding, dilation = [1, stride[-1]], [0, padding[-1]], [1, dilation[-1]]
    inputs = [xv, wv]
    if b is not None:
        inputs.append(L.value(b))
    attrs = {
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "groups": int(groups),
        "has_bias": int(b is not None),
    }
    y = L.node("conv2d", inputs, attrs)
    if rank == 3:
        d = L.shape_of(y)
        y = L.node("reshape", [y], {"shape": [d[0], d[1], d[3]]})
    return y


# Groups of a transposed convolution lowered one GEMM and col2im each; more
# (a depthwise one: a GEMM per channel) fall back.
MAX_TRANSPOSED_GROUPS = 8


def _conv_transpose2d(L: Lowerer, n: Node) -> Value:
    """A transposed convolution as the GEMM it is, then col2im: each input
    pixel's C channels times the weight give its KH x KW x O output taps, and
    col2im adds every tap, and the bias, into the output pixel it lands on
    (stride, padding and dilation as the forward convolution's;
    output_padding only makes the output larger). The pixels of every image
    are the GEMM's rows ([N*H*W, C], a permute of x), so the weight
    ([C, KH*KW*O], permuted once: folded when it is a constant) is one B
    operand for the whole batch, packed at compile time; col2im then works
    channels-last (each tap's O channels contiguous) and one permute brings
    the output back to NCHW. Groups (up to MAX_TRANSPOSED_GROUPS) are a GEMM
    and col2im each on their slices of the channels, joined by a cat."""
    x, w, b, stride, padding, dilation, _transposed, output_padding, groups = n.args
    xm, wm, out = meta(x), meta(w), out_val(n)
    if xm.dim() != 4:
        raise Unsupported(f"{xm.dim() - 2}-d transposed convolution (only 2-d)")
    if any(not isinstance(p, int) or p >= s for p, s in zip(output_padding, stride)):
        # allowed by torch when dilation exceeds stride; col2im's blocks would not tile it
        raise Unsupported("transposed convolution with output_padding >= stride")
    if not isinstance(groups, int) or groups > MAX_TRANSPOSED_GROUPS:
        raise Unsupported(f"transposed convolution with {groups} groups (at most {MAX_TRANSPOSED_GROUPS})")
    for v in (stride, padding, dilation):
        if any(isinstance(e, Node) for e in v):
            raise Unsupported("transposed convolution with a symbolic stride, padding or dilation")
    N, C, H, W = xm.shape
    Og, KH, KW = wm.shape[1], wm.shape[2], wm.shape[3]
    Cg = C // groups
    pixels = L.node("permute", [L.value(x)], {"perm": [0, 2, 3, 1]})
    pixels = L.node("reshape", [pixels], {"shape": L.dims([N * H * W, C])})
    weight = L.node("permute", [L.value(w)], {"perm": [0, 2, 3, 1]})  # [C, KH, KW, Og]
    weight = L.node("reshape", [weight], {"shape": L.dims([C, KH * KW * Og])})
    attrs = {"output_size": L.dims(out.shape[2:]), "kernel": [KH, KW], "dilation": list(dilation),
             "padding": list(padding), "stride": list(stride), "channels_last": 1, "has_bias": int(b is not None)}
    parts = []
    for g in range(groups):  # each group its own GEMM and col2im, joined on channels
        rows, wg = pixels, weight
        if groups > 1:
            rows = L.node("slice", [pixels], {"axis": 1, "start": g * Cg, "end": (g + 1) * Cg, "step": 1})
            wg = L.node("slice", [weight], {"axis": 0, "start": g * Cg, "end": (g + 1) * Cg, "step": 1})
        cols = L.node("reshape", [L.node("mm", [rows, wg])], {"shape": L.dims([N, H * W, KH * KW * Og])})
        inputs = [cols]
        if b is not None:
            bias = L.value(b)
            if groups > 1:
                bias = L.node("slice", [bias], {"axis": 0, "start": g * Og, "end": (g + 1) * Og, "step": 1})
            inputs.append(bias)
        parts.append(L.node("col2im", inputs, attrs))
    y = parts[0] if groups == 1 else L.node("cat", parts, {"axis": 3})
    return L.node("permute", [y], {"perm": [0, 3, 1, 2]})


@lowers(aten.constant_pad_nd.default)
def _constant_pad(L: Lowerer, n: Node) -> Value:
    """F.pad with a constant: pairs of (before, after) from the last dim
    backwards. A negative amount crops (a slice); a positive one joins blocks
    of the fill value on that side (cat with full)."""
    x, pad = n.args[:2]
    value = arg(n, 2, "value", 0)
    xm = meta(x)
    if any(not isinstance(p, int) for p in pad) or not isinstance(value, (int, float, bool)):
        raise Unsupported("constant_pad_nd with a symbolic pad or value")
    if len(pad) % 2 or len(pad) // 2 > xm.dim():
        raise Unsupported(f"constant_pad_nd with pad {list(pad)} for rank {xm.dim()}")
    if isinstance(value, float) and math.isnan(value) and not is_float(xm.dtype):
        raise Unsupported("NaN fill of an integer tensor")
    y, shape = L.value(x), list(xm.shape)
    for i in range(len(pad) // 2):
        d, before, after = xm.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]
        if before < 0 or after < 0:
            start, end = _slice_bounds(L, shape[d], max(-before, 0), shape[d] - max(-after, 0))
            y = L.node("slice", [y], {"axis": d, "start": start, "end": end, "step": 1})
            shape[d] = shape[d] - max(-before, 0) - max(-after, 0)
        parts = []
        for amount in (before, after):
            if amount > 0:
                block = shape[:d] + [amount] + shape[d + 1:]
                parts.append(L.node("full", [], {"shape": L.dims(block), "value": float(value),
                                                 "dtype": air_dtype(xm.dtype)}))
        if parts:
            parts.insert(1 if before > 0 else 0, y)
            y = L.node("cat", parts, {"axis": d})
            shape[d] = shape[d] + max(before, 0) + max(after, 0)
    return y


@lowers(aten.col2im.default)
def _col2im(L: Lowerer, n: Node) -> Value:
    """torch's fold; an unbatched [C*KH*KW, L] input gains and loses a batch of one."""
    x, output_size, kernel, dilation, padding, stride = n.args[:6]
    xm = meta(x)
    if any(isinstance(e, Node) for e in list(kernel) + list(dilation) + list(padding) + list(stride)):
        raise Unsupported("col2im with a symbolic kernel, dilation, padding or stride")
    xv = L.value(x)
    if xm.dim() == 2:
        xv = L.node("reshape", [xv], {"shape": L.dims([1] + list(xm.shape))})
    y = L.node("col2im", [xv], {"output_size": L.dims(list(output_size)), "kernel": list(kernel),
                                "dilation": list(dilation), "padding": list(padding), "stride": list(stride)})
    if xm.dim() == 2:
        y = L.node("reshape", [y], {"shape": L.dims(out_val(n).shape)})
    return y


@lowers(aten._native_batch_norm_legit_no_training.default, outputs=(0,))
def _batch_norm(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    x, w, b, mean, var, _momentum, eps = n.args
    inputs = [L.value(x)]
    if w is not None:
        inputs.append(L.value(w))
    if b is not None:
        inputs.append(L.value(b))
    inputs += [L.value(mean), L.value(var)]
    attrs = {"eps": float(eps), "has_weight": int(w is not None), "has_bias": int(b is not None)}
    return (L.node("batch_norm", inputs, attrs), None, None)


def _pair(v: Any, default: int) -> list[int]:
    if isinstance(v, Node) or (isinstance(v, (list, tuple)) and any(isinstance(e, Node) for e in v)):
        raise Unsupported("a symbolic kernel size, stride, padding or dilation")
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return [default, default]
    if isinstance(v, int):
        return [v, v]
    return [int(v[0]), int(v[-1])] if len(v) == 1 else [int(v[0]), int(v[1])]


@lowers(aten.max_pool2d_with_indices.default, outputs=(0,))
def _max_pool(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    kernel = _pair(n.args[1], 1)
    stride = _pair(arg(n, 2, "stride", None), 0)
    if stride == [0, 0]:
        stride = kernel
    attrs = {
        "kernel": kernel,
        "stride": stride,
        "padding": _pair(arg(n, 3, "padding", 0), 0),
        "dilation": _pair(arg(n, 4, "dilation", 1), 1),
        "ceil_mode": int(bool(arg(n, 5, "ceil_mode", False))),
    }
    return (L.node("max_pool2d", [L.value(n.args[0])], attrs), None)


@lowers(aten.adaptive_max_pool2d.default, outputs=(0,))
def _adaptive_max_pool(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    """Adaptive max pooling where its windows are a plain pooling's: to 1x1 an
    amax over H and W (a global max pool); to sizes that divide the input, a
    max_pool2d with kernel = stride = input / output. Other sizes (uneven,
    overlapping windows) fall back, and so does a use of the indices."""
    x, size = n.args[:2]
    xm = meta(x)
    H, W = xm.shape[-2], xm.shape[-1]
    size = [size, size] if isinstance(size, int) else list(size)
    if list(size) == [1, 1]:
        return (L.node("amax", [L.value(x)], {"axes": [xm.dim() - 2, xm.dim() - 1], "keepdim": 1}), None)
    if not all(isinstance(v, int) and v > 0 for v in [H, W] + size) or H % size[0] or W % size[1]:
        raise Unsupported(f"adaptive max pool of {H}x{W} to {size[0]}x{size[1]} (uneven windows)")
    kernel = [H // size[0], W // size[1]]
    attrs = {"kernel": kernel, "stride": kernel, "padding": [0, 0], "dilation": [1, 1], "ceil_mode": 0}
    return (L.node("max_pool2d", [L.value(x)], attrs), None)


@lowers(aten.avg_pool2d.default)
def _avg_pool(L: Lowerer, n: Node) -> Value:
    kernel = _pair(n.args[1], 1)
    stride = _pair(arg(n, 2, "stride", None), 0)
    if stride == [0, 0]:
        stride = kernel
    divisor = arg(n, 6, "divisor_override", None)
    attrs = {
        "kernel": kernel,
        "stride": stride,
        "padding": _pair(arg(n, 3, "padding", 0), 0),
        "ceil_mode": int(bool(arg(n, 4, "ceil_mode", False))),
        "count_include_pad": int(bool(arg(n, 5, "count_include_pad", True))),
        "divisor_override": int(divisor or 0),
    }
    return L.node("avg_pool2d", [L.value(n.args[0])], attrs)


@lowers(aten._adaptive_avg_pool2d.default, aten.adaptive_avg_pool2d.default)
def _adaptive_avg_pool(L: Lowerer, n: Node) -> Value:
    return L.node("adaptive_avg_pool2d", [L.value(n.args[0])], {"output_size": _pair(n.args[1], 1)})


@lowers(aten._scaled_dot_product_flash_attention_for_cpu.default, outputs=(0,))
def _sdpa_flash(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    q, k, v = n.args[:3]
    dropout = arg(n, 3, "dropout_p", 0.0)
    if dropout:
        raise Unsupported("attention dropout")
    is_causal = bool(arg(n, 4, "is_causal", False))
    mask = n.kwargs.get("attn_mask")
    scale = n.kwargs.get("scale")
    inputs = [L.value(q), L.value(k), L.value(v)]
    if mask is not None:
        inputs.append(L.value(mask))
    attrs = {"scale": float(scale or 0.0), "is_causal": int(is_causal), "has_mask": int(mask is not None)}
    return (L.node("sdpa", inputs, attrs), None)


@lowers(aten.scaled_dot_product_attention.default)
def _sdpa(L: Lowerer, n: Node) -> Value:
    q, k, v = n.args[:3]
    mask = arg(n, 3, "attn_mask", None)
    if arg(n, 4, "dropout_p", 0.0):
        raise Unsupported("attention dropout")
    inputs = [L.value(q), L.value(k), L.value(v)]
    if mask is not None:
        inputs.append(L.value(mask))
    attrs = {
        "scale": float(n.kwargs.get("scale") or 0.0),
        "is_causal": int(bool(arg(n, 5, "is_causal", False))),
        "has_mask": int(mask is not None),
    }
    return L.node("sdpa", inputs, attrs)


@lowers(aten._transformer_encoder_layer_fwd.default)
def _transformer_encoder_layer(L: Lowerer, n: Node) -> Value:
    """nn.TransformerEncoderLayer's inference fast path (eval, batch_first, no
    grad) as the ops it is: the packed q/k/v projection, attention, the output
    projection, two layer norms and the feed-forward pair, post- or pre-norm
    (norm_first). Masks are not lowered (the layer falls back with one)."""
    (x, E, H, qkv_w, qkv_b, proj_w, proj_b, use_gelu, norm_first, eps,
     n1_w, n1_b, n2_w, n2_b, f1_w, f1_b, f2_w, f2_b) = n.args[:18]
    mask = arg(n, 18, "mask", None)
    if mask is not None:
        raise Unsupported("transformer encoder layer fast path with a mask")
    xm = meta(x)
    if xm.dim() != 3 or not isinstance(E, int) or not isinstance(H, int) or E % H:
        raise Unsupported("transformer encoder layer fast path: not [B, L, E] with E divisible by heads")
    B, T = xm.shape[0], xm.shape[1]
    D = E // H

    def linear(v: Value, w: Any, b: Any) -> Value:
        return L.node("linear", [v, L.value(w), L.value(b)], {"has_bias": 1})

    def norm(v: Value, w: Any, b: Any) -> Value:
        out = L.node("layer_norm", [v, L.value(w), L.value(b)],
                     {"normalized_ndim": 1, "eps": float(eps), "has_weight": 1, "has_bias": 1})
        return out[0]

    def attention(v: Value) -> Value:
        qkv = linear(v, qkv_w, qkv_b)  # [B, T, 3E]: q, k, v in turn
        heads = []
        for i in range(3):
            part = L.node("slice", [qkv], {"axis": 2, "start": i * E, "end": (i + 1) * E, "step": 1})
            part = L.node("reshape", [part], {"shape": L.dims([B, T, H, D])})
            heads.append(L.node("permute", [part], {"perm": [0, 2, 1, 3]}))
        a = L.node("sdpa", heads, {"scale": 0.0, "is_causal": 0, "has_mask": 0})  # [B, H, T, D]
        a = L.node("reshape", [L.node("permute", [a], {"perm": [0, 2, 1, 3]})], {"shape": L.dims([B, T, E])})
        return linear(a, proj_w, proj_b)

    def feed_forward(v: Value) -> Value:
        h = linear(v, f1_w, f1_b)
        h = L.node("gelu", [h]) if use_gelu else L.node("relu", [h])
        return linear(h, f2_w, f2_b)

    y = L.value(x)
    if norm_first:
        y = L.node("add", [y, attention(norm(y, n1_w, n1_b))])
        return L.node("add", [y, feed_forward(norm(y, n2_w, n2_b))])
    y = norm(L.node("add", [y, attention(y)]), n1_w, n1_b)
    return norm(L.node("add", [y, feed_forward(y)]), n2_w, n2_b)


# ---- indexing and creation ------------------------------------------------


@lowers(aten.embedding.default)
def _embedding(L: Lowerer, n: Node) -> Value:
    return L.node("embedding", [L.value(n.args[0]), L.value(n.args[1])])


@lowers(aten.gather.default)
def _gather(L: Lowerer, n: Node) -> Value:
    xv = meta(n.args[0])
    if arg(n, 3, "sparse_grad", False):
        raise Unsupported("sparse gather")
    return L.node("gather", [L.value(n.args[0]), L.value(n.args[2])], {"axis": norm_axis(n.args[1], xv.dim())})


@lowers(aten.index_select.default)
def _index_select(L: Lowerer, n: Node) -> Value:
    xv = meta(n.args[0])
    return L.node("index_select", [L.value(n.args[0]), L.value(n.args[2])], {"axis": norm_axis(n.args[1], xv.dim())})


@lowers(aten.index.Tensor)
def _index(L: Lowerer, n: Node) -> Value:
    x, indices = n.args
    axes, values = [], []
    for axis, idx in enumerate(indices):
        if idx is None:
            continue
        iv = meta(idx)
        if iv.dtype not in (torch.int64, torch.int32):
            raise Unsupported(f"index with a {iv.dtype} index (boolean masks give data-dependent shapes)")
        axes.append(axis)
        values.append(L.value(idx))
    return L.node("index", [L.value(x)] + values, {"axes": axes})


@lowers(aten.arange.start_step, aten.arange.default, aten.arange.start)
def _arange(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    if n.target == aten.arange.default:
        start, end, step = 0, n.args[0], 1
    else:
        start, end = n.args[0], n.args[1]
        step = n.args[2] if len(n.args) > 2 else n.kwargs.get("step", 1)
    for v in (start, step):
        if not isinstance(v, (int, float)):
            raise Unsupported("arange with symbolic start or step")
    length = out.shape[0]
    return L.node("arange", [], {"start": float(start), "step": float(step), "length": L.dim(length), "dtype": air_dtype(out.dtype)})


@lowers(aten.full.default, aten.zeros.default, aten.ones.default, aten.full_like.default, aten.zeros_like.default, aten.ones_like.default)
def _full(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    if n.target in (aten.full.default, aten.full_like.default):
        value = n.args[1]
    elif n.target in (aten.zeros_like.default, aten.ones_like.default):
        value = 0 if n.target == aten.zeros_like.default else 1
    else:
        value = 0 if n.target == aten.zeros.default else 1
    if not isinstance(value, (int, float, bool)):
        raise Unsupported("full with a symbolic value")
    if isinstance(value, float) and math.isnan(value) and not is_float(out.dtype):
        raise Unsupported("NaN fill of an integer tensor")
    return L.node("full", [], {"shape": L.dims(out.shape), "value": float(value), "dtype": air_dtype(out.dtype)})
