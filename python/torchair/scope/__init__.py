"""``torchair.scope``: TorchAir's scopes, which tag the ops traced inside them (an
``air::scope_enter`` / ``air::scope_exit`` pair in the graph, as in TorchAir), and
``npu_wait_tensor``. What each means on the CPU, where a compiled graph is one native call
on one stream (``docs/torchair-api.md`` has the table):

- ``npu_stream_switch``, ``npu_wait_tensor``: run ops on another NPU stream / after another
  tensor is ready. One stream runs everything in program order, so every wait is already
  satisfied and results are eager's; nothing runs concurrently.
- ``super_kernel``: fuses the scope's NPU kernels into one launch. A compiled graph is already
  one call with no per-op launch.
- ``op_never_timeout``: CPU kernels have no execution timeout.
- ``limit_core_num(aicore, vectorcore)``: the ops in the scope use at most that many
  threads. Met when the cap is at least torchair's thread count; a smaller cap would need
  per-op thread caps, which are not built (NotBuiltError at compile time naming the cap).
- ``profiler_trace``: NPU profiler timestamps: NotBuiltError.

The backend checks the pairs (TorchAir's RuntimeError when unpaired) and removes them before
lowering (``strip_scopes``)."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule

from torchair.errors import NotBuiltError

__all__ = ["npu_stream_switch", "npu_wait_tensor", "super_kernel", "limit_core_num", "op_never_timeout", "profiler_trace"]

_lib = torch.library.Library("air", "FRAGMENT")
_lib.define("scope_enter(str[] keys, str[] values) -> ()")
_lib.define("scope_exit() -> ()")


def _enter_impl(keys: list[str], values: list[str]) -> None:
    return None


def _exit_impl() -> None:
    return None


_lib.impl("scope_enter", _enter_impl, "CompositeExplicitAutograd")
_lib.impl("scope_exit", _exit_impl, "CompositeExplicitAutograd")
torch.library.register_fake("air::scope_enter")(_enter_impl)
torch.library.register_fake("air::scope_exit")(_exit_impl)
_ENTER, _EXIT = torch.ops.air.scope_enter.default, torch.ops.air.scope_exit.default
torch.fx.node.has_side_effect(_ENTER)
torch.fx.node.has_side_effect(_EXIT)


class _Scope:
    def __init__(self, attrs: list[tuple[str, str]]) -> None:
        self.attrs = attrs

    def __enter__(self) -> None:
        torch.ops.air.scope_enter([k for k, _ in self.attrs], [v for _, v in self.attrs])

    def __exit__(self, *args: Any) -> None:
        torch.ops.air.scope_exit()


def npu_stream_switch(stream_tag: str, stream_priority: int = 0) -> _Scope:
    return _Scope([("_user_stream_label", stream_tag), ("_user_stream_priority", str(stream_priority))])


def super_kernel(scope: str, options: str = "") -> _Scope:
    return _Scope([("_super_kernel_scope", "" if scope is None else scope), ("_super_kernel_options", options)])


def limit_core_num(op_aicore_num: int, op_vectorcore_num: int) -> _Scope:
    return _Scope([("_op_aicore_num", str(op_aicore_num)), ("_op_vectorcore_num", str(op_vectorcore_num))])


def op_never_timeout(enable: bool = True) -> _Scope:
    if not isinstance(enable, bool):
        raise TypeError(f"op_never_timeout() argument 'enable' must be bool, but got {type(enable).__name__}.")
    return _Scope([("_op_exec_never_timeout", str(enable))])


def profiler_trace(index: str, mode: str) -> _Scope:
    if mode not in ("begin", "end", "both"):
        raise ValueError(f"profiler_trace mode must be 'begin', 'end' or 'both', got {mode!r}")
    return _Scope([("_profiler_trace_index", index), ("_profiler_trace_pos", mode)])


def npu_wait_tensor(self: torch.Tensor, dependency: torch.Tensor) -> torch.Tensor:
    """Returns ``self`` once ``dependency`` is computed: on one stream, program order already
    guarantees it."""
    if not isinstance(self, torch.Tensor) or not isinstance(dependency, torch.Tensor):
        raise TypeError("npu_wait_tensor() expects two tensors")
    return self


def strip_scopes(gm: GraphModule, num_threads: int) -> int:
    """Checks that every scope_enter has its scope_exit (TorchAir's RuntimeError otherwise),
    raises NotBuiltError for what has no CPU meaning (see the module's text), and removes the
    pairs from gm. Returns the number of scopes removed."""
    open_scopes: list[dict[str, str]] = []
    found = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in (_ENTER, _EXIT, torch.ops.air.scope_enter, torch.ops.air.scope_exit):
            continue
        found.append(node)
        if node.target in (_EXIT, torch.ops.air.scope_exit):
            if not open_scopes:
                raise RuntimeError(f"scope_exit without a scope_enter in the graph (node {node.name})")
            open_scopes.pop()
            continue
        attrs = dict(zip(node.args[0], node.args[1]))
        open_scopes.append(attrs)
        if "_profiler_trace_index" in attrs:
            raise NotBuiltError(2, "unsupported", "torchair.scope.profiler_trace tags ops for the NPU profiler; the CPU runtime has none")
        if "_op_aicore_num" in attrs:
            cap = min(int(attrs["_op_aicore_num"]), int(attrs["_op_vectorcore_num"]))
            if cap < num_threads:
                raise NotBuiltError(
                    2, "unsupported",
                    f"torchair.scope.limit_core_num({attrs['_op_aicore_num']}, {attrs['_op_vectorcore_num']}) caps its ops "
                    f"below torchair's {num_threads} threads; per-op thread caps are not built (a graph-wide cap: "
                    "ge_config.aicore_num or torchair.set_num_threads)",
                )
    if open_scopes:
        raise RuntimeError(f"{len(open_scopes)} scope_enter without a scope_exit in the graph")
    for node in reversed(found):
        gm.graph.erase_node(node)
    if found:
        gm.recompile()
    return len(found) // 2
