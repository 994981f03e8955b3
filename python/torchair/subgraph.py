"""What a compile leaves behind: ``AirSubgraph``, the callable that runs one
compiled subgraph in C, and the reports of a compile (``CompileReport``, one
``SubgraphReport`` per subgraph). Below both the compiler and frozen graphs,
which share them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Node


@dataclass
class SubgraphReport:
    name: str
    ops: list[str]
    compiled: bool
    reason: str = ""
    air_report: str = ""
    model: Any = field(default=None, repr=False, compare=False)  # the compiled torchair._C.Model
    # bytes of each f32 weight it reads as a 16-bit copy (lowering/lowp.py)
    converted: list[int] = field(default_factory=list)
    # weight_quantization (lowering/quant.py): (format, group, bytes held, fp32 bytes) per weight
    quantized: list[tuple[str, int, int, int]] = field(default_factory=list)

    @property
    def arena_bytes(self) -> int | None:
        """Arena bytes of this subgraph's last run in C (None if it runs in eager)."""
        return None if self.model is None else self.model.arena_bytes()


@dataclass
class CompileReport:
    """What one compile did: the subgraphs run in C (with their ops) and every
    op that fell back to eager, with the reason."""

    graph: str = "forward"
    subgraphs: list[SubgraphReport] = field(default_factory=list)
    fallbacks: list[tuple[str, str, str]] = field(default_factory=list)  # (node, op, reason)
    total_ops: int = 0
    freezing: str = "off"  # "on", or "off (why)"
    frozen_tensors: int = 0  # parameters/buffers lowered as constants
    frozen_bytes: int = 0
    calls: int = 0  # calls of a frozen graph (counted by its guard)
    rebuild_calls: list[int] = field(default_factory=list)  # the calls (1-based) that rebuilt subgraphs
    rebuilt_subgraphs: int = 0
    tensor_sets: int = 1  # sets of frozen tensors compiled for (model instances that called the graph)
    # an inference graph called without aot_autograd's runtime wrapper
    # (backend._direct_call), which had nothing to do for it
    direct_call: bool = False
    # input copies (running statistics) written back by one call at the end (torchair.write_back)
    write_backs: int = 0
    # torch's fp32 precision knobs when not the default (torchair.precision.describe)
    fp32_precision: str = ""

    @property
    def rebuilds(self) -> int:
        return len(self.rebuild_calls)

    @property
    def compiled_ops(self) -> int:
        return sum(len(s.ops) for s in self.subgraphs if s.compiled)

    def __str__(self) -> str:
        lines = [
            (
                f"torchair compile report ({self.graph} graph): {self.total_ops} ops, "
                f"{self.compiled_ops} in {sum(s.compiled for s in self.subgraphs)} compiled subgraph(s), "
                f"{len(self.fallbacks)} fallback op(s)"
            )
        ]
        if self.freezing == "on":
            line = (
                f"  freezing: on: {self.frozen_tensors} parameter/buffer tensor(s), "
                f"{self.frozen_bytes} bytes ({self.frozen_bytes / 2**20:.1f} MiB) frozen as constants; "
            )
            if self.rebuild_calls:
                shown = ", ".join(str(c) for c in self.rebuild_calls[:8]) + (", ..." if self.rebuilds > 8 else "")
                line += (
                    f"{self.rebuilds} rebuild(s) of {self.rebuilt_subgraphs} subgraph(s) after a frozen tensor "
                    f"changed (at call {shown} of {self.calls})"
                )
            else:
                line += f"no rebuild ({self.calls} call(s))"
            if self.tensor_sets > 1:
                line += f"; compiled for {self.tensor_sets} sets of frozen tensors (instances of the model)"
            lines.append(line)
        else:
            lines.append(f"  freezing: {self.freezing}; parameters and buffers are graph inputs")
        if self.fp32_precision:
            lines.append(f"  {self.fp32_precision}")
        for s in self.subgraphs:
            status = "compiled" if s.compiled else f"eager ({s.reason})"
            counts: dict[str, int] = {}
            for o in s.ops:
                counts[o] = counts.get(o, 0) + 1
            ops = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in counts.items())
            lines.append(f"  subgraph {s.name}: {len(s.ops)} ops, {status}: {ops}")
            if s.converted:
                total = sum(s.converted)
                lines.append(
                    f"    16-bit weights: {len(s.converted)} f32 weight(s) read as 16-bit copies, {total} bytes "
                    f"({total / 2**20:.1f} MiB), converted once and shared with other graphs of the same weights"
                )
            if s.quantized:
                held, f32 = sum(q[2] for q in s.quantized), sum(q[3] for q in s.quantized)
                kinds = sorted({f"{q[0]} group {q[1]}" for q in s.quantized})
                lines.append(
                    f"    quantized weights: {len(s.quantized)} linear weight(s) {', '.join(kinds)}: {held} bytes "
                    f"({held / 2**20:.1f} MiB) with their f16 scales, for {f32 / 2**20:.1f} MiB in fp32 "
                    f"({f32 / held:.2f}x smaller), quantized once and shared with other graphs of the same weights"
                )
            precision = _precision_line(s.air_report)
            if precision:
                lines.append(f"    {precision}")
            lines += [f"    {line}" for line in _autotune_lines(s.air_report)]
        if self.write_backs:
            lines.append(f"  write-back: {self.write_backs} graph input(s) updated in place by one call at the end")
        for node, op, reason in self.fallbacks:
            lines.append(f"  fallback {node}: {op}: {reason}")
        return "\n".join(lines)


# products whose precision the report names (kernels/matmul, conv, attention, gemm_q)
_PRODUCTS = ("mm", "bmm", "addmm", "linear", "linear_q", "sdpa", "conv2d", "conv2d_nhwc")


def _precision_line(air_report: str) -> str:
    """Which steps ran in which precision, from the C report's kernels per step, when any
    step reads or writes 16-bit floats or quantized weights: the products on 16-bit weights
    (kernels named lowp) by op, those on int8/int4 weights (linear_q), the products left in
    f32 by op, the casts at the graph's edges, and the rest, which compute in f32."""
    if "kernels per step:" not in air_report:
        return ""
    table = air_report[air_report.index("kernels per step:"):].splitlines()[1:]
    groups: dict[str, dict[str, int]] = {"16": {}, "q": {}, "f32": {}}
    casts = others = 0
    for row in table:
        parts = row.split()
        if len(parts) < 4 or not parts[0].isdigit():
            break
        op, kernel = parts[1], parts[2]
        if "lowp" in kernel:
            kind = "16"
        elif op == "linear_q":
            kind = "q"
        elif op in _PRODUCTS:
            kind = "f32"
        elif kernel.startswith("cast_half") or (op == "cast" and ("bf16[" in row or "f16[" in row)):
            casts += 1
            continue
        else:
            others += 1
            continue
        groups[kind][op] = groups[kind].get(op, 0) + 1
    if not groups["16"] and not groups["q"] and not casts:
        return ""

    def listed(g: dict[str, int]) -> str:
        return ", ".join(f"{op} x{n}" for op, n in g.items()) or "none"

    line = f"precision: {sum(groups['16'].values())} product(s) on 16-bit weights ({listed(groups['16'])}), f32 accumulation; "
    if groups["q"]:
        line += f"{sum(groups['q'].values())} on int8/int4 weights ({listed(groups['q'])}), f32 activations; "
    if groups["f32"]:
        line += f"{sum(groups['f32'].values())} in f32 ({listed(groups['f32'])}); "
    return line + f"{casts} cast(s) to or from 16 bits at the edges; {others} other step(s) compute in f32"


def _autotune_lines(air_report: str) -> list[str]:
    """The C report's autotune section (mode='max-autotune'): its summary and the steps whose
    kernel the timing changed."""
    lines = air_report.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("autotune:"):
            j = i + 1
            while j < len(lines) and lines[j].startswith("  step "):
                j += 1
            return [ln.strip() for ln in lines[i:j]]
    return []


class AirSubgraph:
    """Runs one compiled subgraph: one C call. Replaces a fused submodule.
    Arguments that are frozen (lowered as constants) or SymInts are dropped:
    tensor_args lists the positions passed to C. A SymInt that no tensor
    input has as a dim (size_args) goes in after them as the shape of an
    empty [0, n] tensor, which binds its symbol. A seeded graph takes a seed last."""

    def __init__(
        self,
        model: Any,
        tensor_args: list[int] | None,
        single: bool,
        report: str,
        frozen: list[Node] | None = None,
        size_args: list[int] | None = None,
        seeded: bool = False,
    ) -> None:
        self.model = model
        self.tensor_args = tensor_args
        self.size_args = size_args or []
        self.single = single
        self.air_report = report
        self.frozen = frozen or []  # the outer placeholders this subgraph holds as constants
        self.converted: list[int] = []  # see SubgraphReport.converted
        # the graph draws random numbers (dropout): a fresh seed from torch's default
        # generator goes in last on every call, so torch.manual_seed makes runs repeat.
        # One draw a call whatever the graph holds; a new tensor each time, as the
        # subgraph may run on several threads at once.
        self.seeded = seeded

    # a debug hook, hook(self, args) -> outputs, that calls self.call(args) (the data dump:
    # torchair.debug.dumps); None for a plain call
    debug: Any = None

    def __call__(self, *args: Any) -> Any:
        if self.debug is not None:
            return self.debug(self, args)
        return self.call(args)

    def call(self, args: tuple[Any, ...]) -> Any:
        if self.tensor_args is not None:
            sizes = [torch.empty((0, int(args[i]))) for i in self.size_args]
            args = tuple([args[i] for i in self.tensor_args] + sizes)
        if self.seeded:
            args = (*args, torch.empty((), dtype=torch.int64).random_())
        outs = self.model.run(args)
        return outs[0] if self.single else tuple(outs)
