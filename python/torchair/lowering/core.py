"""The lowering table and what every lowering uses: ``LOWERINGS`` and the
``lowers`` decorator that fills it, ``Lowerer`` (one libair graph being built
from FX nodes, symbolic sizes included) and the small argument helpers."""

from __future__ import annotations

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


def lowering_for(target: Any) -> Lowering | None:
    """The lowering of an op. Ops that exist only once some torch module registered them
    (inductor's prims.fma) are keyed by their name, so torchair need not import it."""
    fn = LOWERINGS.get(target)
    if fn is None and isinstance(target, torch._ops.OpOverload):
        fn = LOWERINGS.get(str(target))
    return fn


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


# 16-bit floats are storage types in libair graphs: a value of one is widened
# to f32 where it enters (an input, a constant a generic op reads) and
# narrowed where it leaves (an output), and every op in between computes in
# f32. Only weights stay 16-bit inside, read in place by the products that
# take them (lowering/lowp.py). So every lowering asks for f32 where a node's
# dtype is bf16/f16 (air_dtype), and only inputs, constants and outputs see
# the stored type (storage_dtype).
LOW_PRECISION = (torch.bfloat16, torch.float16)

# returned by a lowering that defers its node (Lowerer.lazy)
LAZY = object()


def storage_dtype(dtype: torch.dtype) -> int:
    code = TORCH_TO_AIR.get(dtype)
    if code is None:
        raise Unsupported(f"dtype {dtype} is not supported")
    return code


def air_dtype(dtype: torch.dtype) -> int:
    """The dtype a lowered op computes in for a node of this dtype."""
    return storage_dtype(torch.float32 if dtype in LOW_PRECISION else dtype)


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
        # low precision (see LOW_PRECISION): the 16-bit value of a node whose
        # env value is (or will be) its f32 widening
        self.raw: dict[Node, Value] = {}
        # nodes lowered on first use only (a 16-bit weight's f32 widening,
        # its transpose): thunk giving the value
        self.lazy: dict[Node, Callable[[], Value]] = {}
        # frozen tensors lowered as constants, by node (mixed precision
        # converts weights from them)
        self.const_tensors: dict[Node, torch.Tensor] = {}
        # a transposed 2-D weight -> its 16-bit value in [N, K] layout, for
        # the products that read it in place (lowering/lowp.py)
        self.weight_t: dict[Node, Value] = {}
        self.mixed_precision: torch.dtype | None = None
        self._mixed_cache: dict[tuple[Node, torch.dtype], Value] = {}
        # bytes of each f32 weight this graph reads as a 16-bit copy
        # (mixed_precision, autocast): for the compile report
        self.converted: list[int] = []

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
                    # its non-constant part too (ceil-like sizes X + 1, with X =
                    # (s0 - 1)//32): sympy expands products of such sizes
                    # (12*X**2 + 24*X + 12), which then name X, not X + 1
                    k, rest = expr.as_coeff_Add()
                    if (k.is_Integer and int(k) > 0 and not rest.is_number and not isinstance(rest, sympy.Symbol)
                            and rest not in self.composites):
                        self.composites[rest] = self.g.dim_expr(_DIM_SUB, self.composites[expr], int(k))

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
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and 1 <= int(e.exp) <= 8:
            # h*w of a square feature map under duck sizing: ((s0 - 1)//32 + 1)**2
            return self._fold(_DIM_MUL, [self._expr(e.base)] * int(e.exp))
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
        v = self.g.input(storage_dtype(val.dtype), self.dims(val.shape), node.name)
        if val.dtype in LOW_PRECISION:
            self.raw[node] = v
            v = self.node("cast", [v], {"dtype": air_dtype(val.dtype)})
        self.env[node] = v
        return v

    def add_constant(self, tensor: torch.Tensor) -> Value:
        """A borrowed constant of the tensor's own dtype (16-bit included)."""
        if tensor.device.type != "cpu":
            raise Unsupported(f"constant on {tensor.device}")
        t = tensor.detach()
        if not t.is_contiguous():
            t = t.contiguous()
        return self.g.constant(t.data_ptr(), storage_dtype(t.dtype), list(t.shape), t, True)

    def bind_constant(self, node: Node, tensor: torch.Tensor) -> None:
        """node's value is the tensor, borrowed; a 16-bit one is widened to
        f32 only if a generic op reads it."""
        v = self.add_constant(tensor)
        self.const_tensors[node] = tensor
        if tensor.dtype in LOW_PRECISION:
            self.raw[node] = v
            self.lazy[node] = lambda: self.node("cast", [v], {"dtype": air_dtype(tensor.dtype)})
        else:
            self.env[node] = v

    def bind(self, node: Node, value: Any) -> None:
        """Records what a lowering returned for node (LAZY: deferred)."""
        if value is not LAZY:
            self.env[node] = value

    def scalar(self, value: float | bool, dtype: torch.dtype) -> Value:
        """A 0-d constant of dtype (copied into the graph)."""
        if dtype in LOW_PRECISION:
            dtype = torch.float32
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
        if v is None and arg in self.lazy:
            v = self.env[arg] = self.lazy.pop(arg)()
        if v is None and isinstance(meta(arg), (torch.SymInt, torch.SymFloat)):
            v = self.env[arg] = self.size_number(arg)
        if v is None or isinstance(v, tuple):
            raise Unsupported(f"{arg.name} has no single libair value")
        return v

    def size_number(self, node: Node) -> Value:
        """A size used as a number, as a 0-d tensor the session fills in: a
        SymInt (StaticCache's counter + the prompt's length) as i64, a SymInt
        ratio (interpolate's scale, in/out) as f64, divided as Python divides
        them, so the f32 product that reads it rounds as eager's does."""
        val = meta(node)
        if isinstance(val, torch.SymInt):
            return self.node("size_scalar", [], {"size": self.dim(val)})
        if node.target is operator.truediv and len(node.args) == 2:
            a, b = (self.cast(self.value(x), torch.float64) if isinstance(x, Node) else
                    self.scalar(float(x), torch.float64) for x in node.args)
            return self.node("div", [a, b])
        raise Unsupported(f"{node.name}: a symbolic number from {getattr(node.target, '__name__', node.target)}")

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
