"""The ``dynamic_axes`` option (SPEC section 2): ``{argument: {axis: 'name'}}`` or
``{axis: ('name', min, max)}`` names axes of the compiled forward's tensor arguments that are
symbols from the first compile, so no later size needs another.

Options reach a backend only when dynamo calls it with the graph of its first trace, which
has every size static. So on that call the backend finds the frame's arguments (by the
forward's parameter names, however they were passed), marks the declared dims on them as
dynamo's ``maybe_mark_dynamic`` does (the trace that follows, and aot_autograd's, treat
sizes size-obliviously, so a first size of 1 is a symbol too, not the constant dynamo makes
of 0 and 1) and raises the one restart exception dynamo's backend call lets
through; dynamo traces the frame again before any compiled code has run, with those dims
symbolic, and the backend compiles that graph. Its marks are taken off the caller's tensors
then. A dim the model's own code makes a constant (a loop unrolled over its size) stays one:
say so (a warning), compile, do not restart again; a Python branch on a size only guards it,
so each side of the branch is one symbolic graph.

Ranges and shared names are checked on every call by the compiled graph's wrapper (guard()):
a size outside a declared range, or two axes of one name with different sizes, raise
DynamicAxesError (an OptionError) naming them.

This leans on dynamo internals (``InstructionTranslator.current_tx``, its speculation log,
``TensorifyScalarRestartAnalysis``), checked against torch 2.13. Only the compiled callable's
own frame is marked: frames dynamo compiles later (resumed after a graph break, or a function
it traced on its own) are left to its defaults."""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from torchair.errors import OptionError


class DynamicAxesError(OptionError):
    """A bad dynamic_axes value, or a call whose sizes break what it declares."""


@dataclass(frozen=True)
class Axis:
    name: str
    min: int | None = None
    max: int | None = None


Spec = dict[str, dict[int, Axis]]

# what this module sets on a caller's tensor, to take its marks off again
_OURS = "_torchair_dynamic_axes_marks"


def _bad(msg: str) -> DynamicAxesError:
    return DynamicAxesError(1, "invalid argument", f"dynamic_axes: {msg}")


def parse(spec: Any) -> Spec:
    """The option's value checked and normalized; a name's range applies to each of its uses."""
    if not isinstance(spec, dict) or not spec:
        raise _bad(f"expected a non-empty dict {{argument: {{axis: 'name'}}}}, got {spec!r}")
    out: Spec = {}
    ranges: dict[str, tuple[int | None, int | None]] = {}
    for arg, axes in spec.items():
        if not isinstance(arg, str) or not arg.isidentifier():
            raise _bad(f"argument names are the forward's parameter names, got {arg!r}")
        if not isinstance(axes, dict) or not axes:
            raise _bad(f"{arg!r} must map axis -> 'name' or ('name', min, max), got {axes!r}")
        out[arg] = {}
        for ax, v in axes.items():
            if not isinstance(ax, int) or isinstance(ax, bool):
                raise _bad(f"{arg!r}: an axis is an int, got {ax!r}")
            if isinstance(v, str) and v:
                a = Axis(v)
            elif (
                isinstance(v, (tuple, list))
                and len(v) == 3
                and isinstance(v[0], str)
                and v[0]
                and all(b is None or (isinstance(b, int) and not isinstance(b, bool) and b >= 0) for b in v[1:])
            ):
                a = Axis(v[0], v[1], v[2])
                if a.min is not None and a.max is not None and a.min > a.max:
                    raise _bad(f"{arg!r} axis {ax}: min {a.min} is above max {a.max}")
                if a.max is not None and a.max < 2:
                    raise _bad(f"{arg!r} axis {ax}: a range up to {a.max} is not dynamic")
            else:
                raise _bad(f"{arg!r} axis {ax}: expected 'name' or ('name', min, max) with sizes >= 0, got {v!r}")
            if (a.min, a.max) != (None, None) and ranges.setdefault(a.name, (a.min, a.max)) != (a.min, a.max):
                raise _bad(f"{a.name!r} is given two ranges, {ranges[a.name]} and {(a.min, a.max)}")
            out[arg][ax] = a
    return {
        arg: {ax: Axis(a.name, *ranges.get(a.name, (a.min, a.max))) for ax, a in axes.items()}
        for arg, axes in out.items()
    }


def _frame() -> Any:
    from torch._dynamo.symbolic_convert import InstructionTranslator

    tx = InstructionTranslator.current_tx()
    return tx.output.root_tx if tx is not None else None


def _parameters(code: Any) -> list[str]:
    n = code.co_argcount + code.co_kwonlyargcount
    return [p for p in code.co_varnames[:n] if p != "self"]


def _argument(tx: Any, name: str) -> Any:
    if name in tx.f_locals:
        return tx.f_locals[name]
    code = tx.f_code
    if code.co_flags & 0x08:  # forward(self, **kwargs)
        n = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04)
        kw = tx.f_locals.get(code.co_varnames[n])
        if isinstance(kw, dict):
            return kw.get(name)
    return None


def _symbolic(gm: torch.fx.GraphModule, t: torch.Tensor, dim: int) -> bool | None:
    """Whether dim of the argument t is a symbol in the traced graph (None: t is not one of
    its inputs)."""
    fake = _fake(gm, t)
    if not isinstance(fake, torch.Tensor):
        return None
    s = fake.shape[dim]
    return isinstance(s, torch.SymInt) and not s.node.expr.is_number


def _unmark(t: torch.Tensor) -> None:
    for attr in getattr(t, _OURS, ()):
        if hasattr(t, attr):
            delattr(t, attr)
    if hasattr(t, _OURS):
        delattr(t, _OURS)


def _check_sizes(sizes: list[tuple[str, int, int, Axis]]) -> None:
    seen: dict[str, tuple[str, int, int]] = {}
    for arg, size, ax, a in sizes:
        if (a.min is not None and size < a.min) or (a.max is not None and size > a.max):
            raise _bad(f"{arg}.size({ax}) is {size}, outside {a.name!r}'s range [{a.min}, {a.max}]")
        other = seen.setdefault(a.name, (arg, ax, size))
        if other[2] != size:
            raise _bad(
                f"the axes named {a.name!r} have different sizes: {other[0]}.size({other[1]}) is {other[2]}, "
                f"{arg}.size({ax}) is {size}"
            )


def guard(compiled: Any, plan: Plan) -> Any:
    """compiled, refusing a call whose declared sizes break a range or differ under one name
    (a few integer compares a call)."""
    checks = plan.checks
    if not checks:
        return compiled

    def call(*args: Any) -> Any:
        _check_sizes([(arg, args[i].shape[ax], ax, a) for i, ax, a, arg in checks])
        return compiled(*args)

    return call


def _fake(gm: torch.fx.GraphModule, t: torch.Tensor) -> Any:
    for n in gm.graph.nodes:
        ex = n.meta.get("grapharg") if n.op == "placeholder" else None
        if ex is not None and getattr(ex, "example", None) is t:
            return n.meta.get("example_value")
    return None


_SAVED_OBLIVIOUS: list[bool] = []


def _oblivious(on: bool) -> None:
    """Dynamo specializes a size of 0 or 1 even when marked dynamic, unless the shape
    environment treats sizes size-obliviously: on for the trace we ask for, off again when it
    reaches the backend."""
    import torch.fx.experimental._config as shape_config

    if on:
        _SAVED_OBLIVIOUS.append(shape_config.backed_size_oblivious)
        shape_config.backed_size_oblivious = True
    elif _SAVED_OBLIVIOUS:
        shape_config.backed_size_oblivious = _SAVED_OBLIVIOUS.pop()


def size_oblivious(plan: Plan) -> Any:
    """The context in which to trace the graph further (aot_autograd): size-oblivious when its
    dynamo trace was, so sizes of 1 stay generic there too and the compiled graph serves them."""
    import contextlib

    import torch.fx.experimental._config as shape_config

    return shape_config.patch(backed_size_oblivious=True) if plan.oblivious else contextlib.nullcontext()


Check = tuple[int, int, Axis, str]  # graph input, its axis, the declaration, the argument


@dataclass
class _Root:
    """The frame a compile (one torch.compile call, or one backend object) first traced: the
    compiled callable's own frame, whose arguments the declaration names. Frames dynamo
    compiles later (after a graph break, or a function it could not inline) have other
    arguments, perhaps of the same names: left alone."""

    code: Any
    compiled: bool = False  # a graph of it was compiled already
    oblivious: bool = False  # the trace under way was asked for size-obliviously


# by id of the compile's owner object, held weakly (torch's compile wrapper is unhashable)
_ROOTS: dict[int, tuple[Any, _Root]] = {}


def _root(owner: Any, code: Any) -> _Root:
    for key in [k for k, (ref, _) in _ROOTS.items() if ref() is None]:
        del _ROOTS[key]
    held = _ROOTS.get(id(owner))
    if held is None or held[0]() is not owner:
        held = _ROOTS[id(owner)] = (weakref.ref(owner), _Root(code))
    return held[1]


class Plan:
    """What apply() found for the graph to compile: the per-call checks (guard()) and whether
    aot_autograd is to trace it size-obliviously too (size_oblivious())."""

    def __init__(self, checks: list[Check], oblivious: bool) -> None:
        self.checks = checks
        self.oblivious = oblivious


def apply(gm: torch.fx.GraphModule, example_inputs: list[Any], spec: Spec, owner: Any) -> Plan:
    """Called first in the backend with the dynamo graph. Returns when gm is the graph to
    compile, with what to check on every call; raises dynamo's restart exception once per
    frame to have it traced again with the declared dims symbolic; DynamicAxesError for sizes
    that break the declaration. owner: an object that lives as long as the compile (torch's
    wrapper of one torch.compile call, or the backend's config), which tells its frames apart.

    Sizes 0 and 1 are symbols only on the frame's first compile (size-oblivious tracing, or
    dynamo makes them constants): a model's code that branches on a size being 1 (LLaMA's
    attention: causal only when the query is longer than 1) would trace a symbolic bool there.
    Later, a new size of 1 (a decode step after the prefill) gets a graph of its own."""
    _oblivious(False)
    tx = _frame()
    if tx is None:
        return Plan([], False)
    root = _root(owner, tx.f_code)
    if root.code is not tx.f_code:
        return Plan([], False)
    found: list[tuple[str, torch.Tensor, int, Axis]] = []
    for arg, axes in spec.items():
        t = _argument(tx, arg)
        takes_any = tx.f_code.co_flags & 0x08  # **kwargs: a name it was not given is just absent
        if t is None and arg not in tx.f_code.co_varnames and not takes_any:
            raise _bad(f"{tx.f_code.co_name}() has no argument {arg!r}; its arguments: {_parameters(tx.f_code)}")
        if not isinstance(t, torch.Tensor):
            continue  # None or not a tensor in this call: nothing to mark
        for ax, a in axes.items():
            if not -t.dim() <= ax < t.dim():
                raise _bad(f"{arg!r} has {t.dim()} dims, no axis {ax}")
            found.append((arg, t, ax % t.dim(), a))
    _check_sizes([(arg, t.size(ax), ax, a) for arg, t, ax, a in found])
    retraced = any(hasattr(t, _OURS) for _, t, _, _ in found)
    for _, t, _, _ in found:
        _unmark(t)
    static = [(arg, t, ax, a) for arg, t, ax, a in found if _symbolic(gm, t, ax) is False]
    if root.compiled:
        static = [(arg, t, ax, a) for arg, t, ax, a in static if t.size(ax) >= 2]
    if not static or retraced:
        if static:
            names = ", ".join(f"{arg} axis {ax} ({a.name})" for arg, _, ax, a in static)
            warnings.warn(f"torchair dynamic_axes: the model's code fixed {names}; other sizes there will recompile")
        where = {id(x): i for i, x in enumerate(example_inputs)}
        plan = Plan([(where[id(t)], ax, a, arg) for arg, t, ax, a in found if id(t) in where], root.oblivious)
        root.compiled, root.oblivious = True, False
        return plan
    for _, t, ax, a in static:
        before = set(vars(t))
        # no min/max here: a guard on them would only have dynamo trace again, and guard()
        # refuses a size out of range with an error that names it; maybe_: a dim the model's
        # code fixes is a warning above, not dynamo's ConstraintViolationError
        torch._dynamo.maybe_mark_dynamic(t, ax)
        setattr(t, _OURS, tuple(set(getattr(t, _OURS, ())) | (set(vars(t)) - before)))
    from torch._dynamo.exc import TensorifyScalarRestartAnalysis

    root.oblivious = any(t.size(ax) < 2 for _, t, ax, _ in static)
    if root.oblivious:
        _oblivious(True)
    tx.speculation_log.clear()  # the new trace may take other paths
    raise TensorifyScalarRestartAnalysis("torchair dynamic_axes: trace again with the declared axes symbolic")
