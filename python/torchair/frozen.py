"""Graphs whose parameters and buffers were compiled in as constants
(freezing), and the guard that keeps their results fresh: every call checks
that the frozen tensors are the ones compiled in, unchanged, and rebuilds
the subgraphs that hold one that changed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.fx import GraphModule, Node

from torchair.config import CompilerConfig
from torchair.errors import TorchairError

if TYPE_CHECKING:
    from torchair.compiler import AirSubgraph, CompileReport, SubgraphReport

# compiler.lower_subgraph: (submodule, its outer arguments, config, {outer
# node: tensor to freeze}) -> AirSubgraph; passed in, as compiler imports us
Lower = Callable[[GraphModule, Sequence[Any], CompilerConfig, dict[Node, torch.Tensor]], "AirSubgraph"]

# Set to False only to show that the freezing tests catch stale constants.
FREEZING_GUARD = True


class FrozenGraph:
    """A compiled graph some of whose arguments (parameters and buffers) are
    compiled into its subgraphs as constants. The caller still passes every
    argument; each call first checks, for every frozen argument, that it is
    the same tensor object with the same version counter and data pointer as
    when it was frozen. If one differs (updated in place, replaced,
    load_state_dict, ``.data =``), the subgraphs that hold it are rebuilt
    from the tensors passed before running, so results are never stale."""

    def __init__(self, gm: GraphModule, report: CompileReport, frozen: dict[int, torch.Tensor],
                 subgraphs: list[tuple[AirSubgraph, SubgraphReport, GraphModule, tuple[Any, ...]]],
                 config: CompilerConfig, by_content: set[int], lower: Lower) -> None:
        self.gm = gm
        self._lower = lower
        self.report = report
        self.config = config
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self._pos = {placeholders[i]: i for i in frozen}
        self._subgraphs = subgraphs
        self._users: dict[int, list[int]] = {}  # argument position -> subgraphs holding it
        for k, (air, _, _, _) in enumerate(subgraphs):
            for node in air.frozen:
                self._users.setdefault(self._pos[node], []).append(k)
        self._entries = [(i, frozen[i], frozen[i]._version, frozen[i].data_ptr()) for i in sorted(self._users)]
        # tensors written without a version bump (batch-norm running stats):
        # their bytes are compared with a snapshot
        self._by_content = sorted(i for i in by_content if i in self._users and frozen[i].is_contiguous())
        self._snapshot(frozen)
        self._forward = gm.forward
        # one rebuild at a time: threads that find the same change wait for
        # the first one's rebuild instead of each compiling the subgraphs again
        self._rebuild_lock = threading.Lock()

    def _snapshot(self, tensors: Any) -> None:
        self._views = [memoryview(tensors[i].detach().reshape(-1).view(torch.uint8).numpy()) for i in self._by_content]
        self._bytes = b"".join(self._views)

    @property
    def frozen_positions(self) -> list[int]:
        return [e[0] for e in self._entries]

    def unchanged(self, args: Sequence[Any]) -> bool:
        """The guard: every frozen argument is the tensor that was frozen,
        at the same version and data pointer."""
        for i, t, v, p in self._entries:
            a = args[i]
            if a is not t or a._version != v or a.data_ptr() != p:
                return False
        return not self._views or b"".join(self._views) == self._bytes

    def forward(self, *args: Any) -> Any:
        self.report.calls += 1
        if FREEZING_GUARD and not self.unchanged(args):
            with self._rebuild_lock:
                if not self.unchanged(args):  # not already rebuilt by another thread
                    self._rebuild(args)
        return self._forward(*args)

    __call__ = forward

    def _rebuild(self, args: Sequence[Any]) -> None:
        changed: set[int] = set()
        entries = []
        for i, t, v, p in self._entries:
            a = args[i]
            if a is not t or a._version != v or a.data_ptr() != p:
                if not isinstance(a, torch.Tensor) or a.shape != t.shape or a.dtype != t.dtype or a.device != t.device:
                    raise TorchairError(
                        1, "invalid argument",
                        f"frozen argument {i} changed to {type(a).__name__} "
                        f"{tuple(getattr(a, 'shape', ()))} {getattr(a, 'dtype', '')}; expected {tuple(t.shape)} {t.dtype}",
                    )
                changed.add(i)
                entries.append((i, a, a._version, a.data_ptr()))
            else:
                entries.append((i, t, v, p))
        if b"".join(self._views) != self._bytes:
            changed.update(self._by_content)  # which one changed matters little: they are small
        tensors = {node: args[i] for node, i in self._pos.items()}
        for k in sorted({k for i in changed for k in self._users[i]}):
            air, sub_report, sub, arg_nodes = self._subgraphs[k]
            new = self._lower(sub, arg_nodes, self.config, {n: tensors[n] for n in air.frozen})
            air.model, air.tensor_args, air.single, air.air_report = new.model, new.tensor_args, new.single, new.air_report
            sub_report.model, sub_report.air_report = new.model, new.air_report
            self.report.rebuilt_subgraphs += 1
        # only after every rebuild succeeded: a failed one is retried next call
        self._entries = entries
        self._snapshot(args)
        self.report.rebuild_calls.append(self.report.calls)
