"""Graphs whose parameters and buffers were compiled in as constants
(freezing), and the guard that keeps their results fresh: every call checks
that the frozen tensors are the ones compiled in, unchanged, and rebuilds
the subgraphs that hold one that changed."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.fx import GraphModule, Node

from torchair.config import CompilerConfig
from torchair.errors import TorchairError
from torchair.subgraph import AirSubgraph, CompileReport, SubgraphReport

# compiler.lower_subgraph: (submodule, its outer arguments, config, {outer
# node: tensor to freeze}) -> AirSubgraph; passed in, as compiler imports us
Lower = Callable[[GraphModule, Sequence[Any], CompilerConfig, dict[Node, torch.Tensor]], AirSubgraph]

# Set to False only to show that the freezing tests catch stale constants.
FREEZING_GUARD = True

# 8-byte samples per frozen tensor the guard compares each call, besides
# identity, version and data pointer: it costs ~15 us a call over ResNet-50's
# 161 tensors, and catches any write through .data that changes a sampled
# value (a weight sync rewrites every value; a write that touches only a few
# rows may miss all samples: write through the parameter itself, under
# torch.no_grad(), whose version counter the guard sees).
SAMPLES_PER_TENSOR = 8


def _bytes_of(t: torch.Tensor) -> memoryview:
    return memoryview(t.detach().reshape(-1).view(torch.uint8).numpy())


# Sets of frozen tensors one graph keeps compiled at once. dynamo compiles a
# module class's forward once and passes the parameters as arguments, so two
# instances of one model class share the graph, each with its own tensors:
# rebuilding on every switch cost ResNet-50 0.2 s a call. Past this many
# sets, the least recently used one (its packed weights too) is dropped.
MAX_TENSOR_SETS = 4


class _Overlay:
    """The fused module with other compiled subgraphs: its generated forward
    finds them as self.air_N; every other attribute is the module's."""

    def __init__(self, base: GraphModule, subgraphs: dict[str, AirSubgraph]) -> None:
        self._base = base
        self.__dict__.update(subgraphs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


class _TensorSet:
    """One set of frozen tensors and the compiled subgraphs that hold them as
    constants, with what the guard compares: identity, version and data
    pointer per tensor, and the bytes of those written without a version
    bump (batch-norm running statistics).

    The set holds its tensors weakly (the compiled models hold only their
    storage), so deleting the module frees its weights as it does in eager:
    when every tensor of the set is gone, the set releases its models. A
    tensor that dies alone (a parameter replaced by a new one) fails the
    guard like any other change, and the next call rebuilds."""

    def __init__(self, module: Any, holders: list[tuple[AirSubgraph, SubgraphReport, GraphModule, tuple[Any, ...]]],
                 tensors: Any, positions: Sequence[int], by_content: Sequence[int]) -> None:
        self.module = module  # what the fused forward runs as self
        self.holders = holders
        self.released = False
        self.watch(tensors, positions)
        # a non-contiguous tensor's flat view would be a copy: not compared
        self.by_content = [i for i in by_content if tensors[i].is_contiguous()]
        self.sampled = [i for i in positions if i not in set(by_content) and tensors[i].is_contiguous()]
        self.snapshot(tensors)

    def watch(self, tensors: Any, positions: Sequence[int]) -> None:
        """Takes tensors[i] for every position as the set's tensors."""
        me = weakref.ref(self)  # the callbacks must not keep the set alive

        def died(_: Any) -> None:
            s = me()
            if s is not None:
                s.tensor_died()

        # (position, weak reference, version, data pointer); the weak
        # reference in place of the tensor costs the guard 7%
        self.entries = [(i, weakref.ref(tensors[i], died), tensors[i]._version, tensors[i].data_ptr())
                        for i in positions]
        self.dead = 0  # entries whose tensor is gone

    def tensor_died(self) -> None:
        self.dead += 1
        if self.dead >= len(self.entries):
            self.release()

    def release(self) -> None:
        """Drops the compiled models: their packed weights and the storage of
        the tensors they borrowed. Called when every tensor of the set is
        gone, or when the set is evicted; a released set never runs again."""
        self.released = True
        for air, sub_report, _, _ in self.holders:
            if sub_report.model is air.model:
                sub_report.model = None
            air.model = None
            air.keep = None  # a compile-cache hit's bound weights (cache/entry.py)
        self.views, self.owners, self.parts, self.bytes = [], [], [], b""

    def snapshot(self, tensors: Any) -> None:
        """What the guard compares by value: the whole of every by_content
        tensor (small: batch-norm statistics), and SAMPLES_PER_TENSOR spread
        8-byte samples of every other one. Writes through ``param.data``
        (``param.data.copy_(w)``, the way weight loaders and RL weight sync
        update a served model) bump no version counter; any write that
        changes a sampled value is seen. views[k] belongs to position
        owners[k]."""
        # views of the storage (not of the tensor objects): they keep no
        # module alive
        self.views, self.owners = [], []
        for i in self.by_content:
            self.views.append(_bytes_of(tensors[i]))
            self.owners.append(i)
        for i in self.sampled:
            whole = _bytes_of(tensors[i])
            n = len(whole)
            if n <= 8 * SAMPLES_PER_TENSOR:
                self.views.append(whole)
                self.owners.append(i)
                continue
            for k in range(SAMPLES_PER_TENSOR):  # first and last 8 bytes, the rest evenly between
                at = (n - 8) * k // (SAMPLES_PER_TENSOR - 1) // 8 * 8
                self.views.append(whole[at:at + 8])
                self.owners.append(i)
        self.bytes = b"".join(self.views)
        self.parts = [bytes(v) for v in self.views]

    def changed_by_value(self) -> set[int]:
        """Positions whose compared bytes differ from the snapshot."""
        return {self.owners[k] for k, v in enumerate(self.views) if v != self.parts[k]}

    def unchanged(self, args: Sequence[Any]) -> bool:
        for i, r, v, p in self.entries:
            a = args[i]
            if r() is not a or a._version != v or a.data_ptr() != p:
                return False
        return not self.views or b"".join(self.views) == self.bytes

    def holds_any(self, args: Sequence[Any]) -> bool:
        return any(r() is args[i] for i, r, _, _ in self.entries)


class FrozenGraph:
    """A compiled graph some of whose arguments (parameters and buffers) are
    compiled into its subgraphs as constants. The caller still passes every
    argument; each call first checks, for every frozen argument, that it is
    the same tensor object with the same version counter and data pointer as
    when it was frozen. If one differs (updated in place, replaced,
    load_state_dict, ``.data =``), the subgraphs that hold it are rebuilt
    from the tensors passed before running, so results are never stale. When
    none of the frozen arguments is a tensor it was compiled for (another
    instance of the same model class), it compiles a further set of
    subgraphs for those tensors and keeps both (up to MAX_TENSOR_SETS).
    It holds the frozen tensors weakly: a set whose module is deleted is
    released, and its memory with it (see _TensorSet)."""

    def __init__(self, gm: GraphModule, report: CompileReport, frozen: dict[int, torch.Tensor],
                 subgraphs: list[tuple[AirSubgraph, SubgraphReport, GraphModule, tuple[Any, ...]]],
                 config: CompilerConfig, by_content: set[int], lower: Lower) -> None:
        self.gm = gm
        self._lower = lower
        self.report = report
        self.config = config
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self._pos = {placeholders[i]: i for i in frozen}
        self._users: dict[int, list[int]] = {}  # argument position -> subgraphs holding it
        for k, (air, _, _, _) in enumerate(subgraphs):
            for node in air.frozen:
                self._users.setdefault(self._pos[node], []).append(k)
        self._positions = sorted(self._users)
        self._by_content = sorted(i for i in by_content if i in self._users)
        if hasattr(gm, "real_recompile"):  # a lazy module's forward compiles itself on first call, via self(...)
            gm.real_recompile()
        self._code = type(gm).forward  # the generated code, to run with a set's module as self
        # most recently used first; sets[0] is the one the guard tries first
        self._sets = [_TensorSet(gm, subgraphs, frozen, self._positions, self._by_content)]
        # what a new set is compiled from (only air.frozen of the first
        # set's subgraphs is read: their models may be released) and what
        # the frozen arguments must look like
        self._template = list(subgraphs)
        self._expected = {i: (frozen[i].shape, frozen[i].dtype, frozen[i].device) for i in self._positions}
        # one rebuild at a time: threads that find the same change wait for
        # the first one's rebuild instead of each compiling the subgraphs again
        self._rebuild_lock = threading.Lock()

    @property
    def frozen_positions(self) -> list[int]:
        return list(self._positions)

    def unchanged(self, args: Sequence[Any]) -> bool:
        """The guard: every frozen argument is a tensor that was frozen (in
        the set last used), at the same version and data pointer."""
        sets = self._sets
        return bool(sets) and sets[0].unchanged(args)

    def forward(self, *args: Any) -> Any:
        self.report.calls += 1
        sets = self._sets
        s = sets[0] if sets else None
        if s is None or s.released or (FREEZING_GUARD and not s.unchanged(args)):
            with self._rebuild_lock:
                s = self._set_for(args)
        return self._code(s.module, *args)

    __call__ = forward

    def _set_for(self, args: Sequence[Any]) -> _TensorSet:
        sets = self._sets
        sets[:] = [s for s in sets if not s.released]  # their modules were deleted
        for k, s in enumerate(sets):  # compiled for these (or just rebuilt by another thread)
            if s.unchanged(args):
                sets.insert(0, sets.pop(k))
                return s
        self._check_types(args)
        for k, s in enumerate(sets):  # some of a set's tensors, changed or replaced
            if s.holds_any(args):
                self._rebuild(s, args)
                sets.insert(0, sets.pop(k))
                return s
        s = self._new_set(args)  # none of them: another instance of the model
        sets.insert(0, s)
        for old in sets[MAX_TENSOR_SETS:]:
            old.release()
        del sets[MAX_TENSOR_SETS:]
        return s

    def _check_types(self, args: Sequence[Any]) -> None:
        for i, (shape, dtype, device) in self._expected.items():
            a = args[i]
            if not isinstance(a, torch.Tensor) or a.shape != shape or a.dtype != dtype or a.device != device:
                raise TorchairError(
                    1, "invalid argument",
                    f"frozen argument {i} changed to {type(a).__name__} "
                    f"{tuple(getattr(a, 'shape', ()))} {getattr(a, 'dtype', '')}; expected {tuple(shape)} {dtype}",
                )

    def _lower_for(self, holder: tuple[AirSubgraph, SubgraphReport, GraphModule, tuple[Any, ...]],
                   args: Sequence[Any]) -> AirSubgraph:
        air, sub_report, sub, arg_nodes = holder
        new = self._lower(sub, arg_nodes, self.config, {n: args[self._pos[n]] for n in air.frozen})
        sub_report.model, sub_report.air_report = new.model, new.air_report  # the report shows the latest
        sub_report.converted = new.converted
        return new

    def _rebuild(self, s: _TensorSet, args: Sequence[Any]) -> None:
        """Compiles again, in place, the subgraphs of s that hold a changed tensor."""
        changed = {i for i, r, v, p in s.entries if r() is not args[i] or args[i]._version != v or args[i].data_ptr() != p}
        changed.update(s.changed_by_value())
        for k in sorted({k for i in changed for k in self._users[i]}):
            air = s.holders[k][0]
            new = self._lower_for(s.holders[k], args)
            air.model, air.tensor_args, air.size_args = new.model, new.tensor_args, new.size_args
            air.converted = new.converted
            air.single, air.air_report = new.single, new.air_report
            self.report.rebuilt_subgraphs += 1
        # only after every rebuild succeeded: a failed one is retried next call
        s.watch(args, self._positions)
        s.snapshot(args)
        self.report.rebuild_calls.append(self.report.calls)

    def _new_set(self, args: Sequence[Any]) -> _TensorSet:
        """Every frozen subgraph compiled for the tensors passed, beside the
        other sets: run through an overlay of the fused module."""
        holders = [(self._lower_for(h, args),) + h[1:] for h in self._template]
        overlay = _Overlay(self.gm, {h[1].name: h[0] for h in holders})
        self.report.tensor_sets += 1
        return _TensorSet(overlay, holders, args, self._positions, self._by_content)
