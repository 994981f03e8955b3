"""What torchair's backend records while torch's aot_compile has it compile a graph
(precompiling()): the inference ATen graph as aot_autograd handed it over (pickled
before torchair's partitioning rewrites it), which of its arguments are frozen
parameters, and the compile cache's entries its subgraphs were saved to or found
in. A graph that cannot be rebuilt from these alone is refused with the reason
(PrecompileError), never saved half right."""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule


class PrecompileError(RuntimeError):
    """torchair cannot save this compile for torch's aot_compile, or cannot load a saved one."""


class PrecompileWarning(UserWarning):
    """A saved compile was made by another torchair or libair build: its subgraphs are lowered again."""


@dataclass
class Capture:
    graph: bytes | None = None  # the ATen graph (GraphPickler)
    frozen: list[int] = field(default_factory=list)  # argument positions compiled in as constants
    by_content: list[int] = field(default_factory=list)  # of those, the ones the guard compares by value
    freezing: str = "off"  # the report's note on freezing
    entries: dict[str, bytes] = field(default_factory=dict)  # compile-cache key -> .air bytes
    problem: str | None = None  # why this compile cannot be saved (the first reason)
    graphs: int = 0  # ATen graphs compiled under this capture

    def refuse(self, why: str) -> None:
        if self.problem is None:
            self.problem = why

    def record(self, gm: GraphModule, frozen: dict[int, Any], note: str, by_content: set[int]) -> None:
        self.graphs += 1
        if self.graphs > 1:
            self.refuse("more than one ATen graph was compiled (a precision recompile or a second graph)")
            return
        self.frozen = sorted(frozen)
        self.by_content = sorted(by_content)
        self.freezing = note
        try:
            self.graph = dump_graph(gm)
        except Exception as e:  # noqa: BLE001  (an op or constant the pickler does not take)
            self.refuse(f"the ATen graph cannot be pickled ({type(e).__name__}: {e})")


_current: contextvars.ContextVar[Capture | None] = contextvars.ContextVar("torchair_precompile", default=None)


def current_capture() -> Capture | None:
    return _current.get()


@contextlib.contextmanager
def capturing(capture: Capture) -> Iterator[None]:
    """The backend's compile under aot_compile: records into capture, collects the
    compile cache's entries, and keeps aot_autograd from making its own cache entry
    (aot_compile asks for one, and it holds only Inductor's compiled code)."""
    from torchair.cache.entry import embedded

    token = _current.set(capture)
    try:
        with embedded(collect=capture.entries), torch._functorch.config.patch(
            force_autograd_cache=False, bundled_autograd_cache=False, strict_autograd_cache=False
        ):
            yield
    finally:
        _current.reset(token)


def precompiling() -> bool:
    """Whether the backend is being called by torch's aot_compile (aot_compile_fullgraph
    is on the stack: the flags it patches are not specific enough to tell)."""
    mod = sys.modules.get("torch._dynamo.aot_compile")
    target = getattr(getattr(mod, "aot_compile_fullgraph", None), "__code__", None)
    if target is None:
        return False
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is target:
            return True
        frame = frame.f_back
    return False


# node meta the lowering reads; the rest (stack traces, module stacks, source
# functions) holds objects the pickler may not take and is not needed again
_KEPT_META = ("val",)


def dump_graph(gm: GraphModule) -> bytes:
    from torch.fx._graph_pickler import GraphPickler, Options

    saved = [(n, n.meta) for n in gm.graph.nodes]
    gm_meta = gm.meta
    try:
        for n, m in saved:
            n.meta = {k: m[k] for k in _KEPT_META if k in m}
        gm.meta = {}
        return GraphPickler.dumps(gm, Options(ops_filter=None))
    finally:
        for n, m in saved:
            n.meta = m
        gm.meta = gm_meta


def load_graph(data: bytes) -> GraphModule:
    from torch._subclasses import FakeTensorMode
    from torch.fx._graph_pickler import GraphPickler
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    gm = GraphPickler.loads(data, FakeTensorMode(shape_env=ShapeEnv()))
    if not isinstance(gm, GraphModule):
        raise PrecompileError(f"the saved graph is a {type(gm).__name__}, not a GraphModule")
    gm.recompile()
    return gm
