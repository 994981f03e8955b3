"""From an ATen FX graph (after aot_autograd) to a runnable module: find the
nodes libair supports, partition them into subgraphs with eager fallback
between, lower each subgraph through the lowering table, compile it in C, and
swap it in. A call then runs one C call per compiled subgraph."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase

from torchair import _C
from torchair.config import CompilerConfig
from torchair.errors import TorchairError, Unsupported
from torchair.frozen import FrozenGraph
from torchair.lowering import AVAILABLE_OUTPUTS, LOWERINGS, Lowerer, _zero_pad_parts, meta

# Ops that move no data; a subgraph made only of these is not worth a C call.
_VIEW_OPS = {
    "torch.ops.aten.view.default",
    "torch.ops.aten._unsafe_view.default",
    "torch.ops.aten.reshape.default",
    "torch.ops.aten.unsqueeze.default",
    "torch.ops.aten.squeeze.dim",
    "torch.ops.aten.squeeze.dims",
    "torch.ops.aten.alias.default",
    "torch.ops.aten.detach.default",
    "_operator.getitem",
}


def op_name(node: Node) -> str:
    t = node.target
    return str(t) if isinstance(t, torch._ops.OpOverload) else getattr(t, "__name__", str(t))


@dataclass
class SubgraphReport:
    name: str
    ops: list[str]
    compiled: bool
    reason: str = ""
    air_report: str = ""
    model: Any = field(default=None, repr=False, compare=False)  # the compiled torchair._C.Model

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

    @property
    def rebuilds(self) -> int:
        return len(self.rebuild_calls)

    @property
    def compiled_ops(self) -> int:
        return sum(len(s.ops) for s in self.subgraphs if s.compiled)

    def __str__(self) -> str:
        lines = [
            f"torchair compile report ({self.graph} graph): {self.total_ops} ops, "
            f"{self.compiled_ops} in {sum(s.compiled for s in self.subgraphs)} compiled subgraph(s), "
            f"{len(self.fallbacks)} fallback op(s)"
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
        for s in self.subgraphs:
            status = "compiled" if s.compiled else f"eager ({s.reason})"
            counts: dict[str, int] = {}
            for o in s.ops:
                counts[o] = counts.get(o, 0) + 1
            ops = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in counts.items())
            lines.append(f"  subgraph {s.name}: {len(s.ops)} ops, {status}: {ops}")
        for node, op, reason in self.fallbacks:
            lines.append(f"  fallback {node}: {op}: {reason}")
        return "\n".join(lines)


# Size arithmetic on SymInts (a dynamic graph's sym_size of a tensor, and
# the floordiv/sum that turn a length into the next layer's). Their users
# read sizes from the nodes' symbolic meta, never from these values, so a
# subgraph holds them without lowering them (see _size_nodes_follow_users).
_SIZE_OPS = {
    torch.ops.aten.sym_size.int,
    torch.ops.aten.sym_numel.default,
    operator.floordiv,
    operator.add,
    operator.sub,
    operator.mul,
    torch.sym_sum,
    math.ceil,
    math.floor,
}
# a size divided into a SymFloat, for the ceil or floor that takes it back
# (MobileViT's interpolate: math.ceil(h / 2))
_SIZE_FLOAT_OPS = {operator.truediv}


def is_size_node(node: Node) -> bool:
    if node.op != "call_function":
        return False
    val = meta(node)
    return (node.target in _SIZE_OPS and isinstance(val, torch.SymInt)) or (
        node.target in _SIZE_FLOAT_OPS and isinstance(val, torch.SymFloat))


def check_node(node: Node) -> str | None:
    """None if libair can run node, else the reason it cannot."""
    if is_size_node(node):
        return None
    fn = LOWERINGS.get(node.target)
    if fn is None:
        return "no torchair lowering for this op"
    val = meta(node)
    if isinstance(val, (tuple, list)):
        available = AVAILABLE_OUTPUTS.get(node.target, frozenset(range(len(val))))
        for user in node.users:
            if user.target is not operator.getitem or user.args[1] not in available:
                return "an output that torchair does not produce is used"
    elif not isinstance(val, torch.Tensor):
        return "does not produce a tensor"
    if node.target is operator.getitem:
        src = node.args[0]
        if not isinstance(src, Node) or check_node(src) is not None:
            return "its source runs in eager"
        return None
    L = Lowerer()
    try:
        for inp in node.all_input_nodes:
            v = meta(inp)
            if isinstance(v, torch.Tensor):
                L.add_input(inp)
            elif isinstance(v, torch.SymInt):
                L.add_size_input(v, inp.name)  # as lower_subgraph does
            else:
                return f"input {inp.name} is not a tensor"
        fn(L, node)
    except Unsupported as e:
        return str(e)
    except TorchairError as e:
        return e.args[2] if len(e.args) > 2 else str(e)
    return None


class _Support(OperatorSupportBase):
    def __init__(self, reasons: dict[Node, str], eager_views: set[Node] | None = None) -> None:
        self.reasons = reasons
        self.eager_views = eager_views or set()

    def is_node_supported(self, submodules: Any, node: Node) -> bool:
        if node.op != "call_function":
            return False
        if node in self.eager_views:
            self.reasons[node] = EAGER_VIEW_REASON
            return False
        reason = check_node(node)
        if reason is not None:
            self.reasons[node] = reason
            return False
        return True


EAGER_VIEW_REASON = "a view that eager gives without a copy, left to it"

# ops whose output is a view of a contiguous input in eager
_RESHAPES = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.reshape.default)


def _eager_views(gm: GraphModule, frozen_positions: Sequence[int]) -> set[Node]:
    """Transposes of graph inputs, and reshapes the graph returns, that eager
    gives as views, for free, where a subgraph would copy: returns the nodes
    to leave out of the partitions (adding a duplicate where a compute user
    still needs one). Training graphs only (see _compile_graph).

    A training step's forward graph returns permute(W) of every linear's
    weight for the backward to use, and the backward transposes it back:
    compiled, both were weight-sized copies (BERT-base: 146 a step, most of
    the 93 ms its permutes took). Now the forward returns eager's view of W
    (its own linear still reads W through a compiled permute, which the
    GEMM folds), and the backward's permute of that view, contiguous again,
    is eager's too. Frozen inputs are constants inside the subgraphs, so
    their permutes fold at compile time and stay there; so does any permute
    of an input that only compiled code reads and that a view would not make
    contiguous (the subgraph would copy the view).

    Likewise a reshape that the graph returns: a subgraph output must own
    its memory, so a compiled reshape there was a copy (BERT-base's step
    returned 299 of them, 14 ms); in eager it is a view of the subgraph's
    own output."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    frozen = {placeholders[i] for i in frozen_positions if i < len(placeholders)}
    output = next((n for n in gm.graph.nodes if n.op == "output"), None)
    keep: set[Node] = set()
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in (torch.ops.aten.permute.default, *_RESHAPES):
            continue
        src, val = n.args[0], meta(n)
        if not isinstance(src, Node) or src in frozen or not isinstance(val, torch.Tensor):
            continue
        if n.target is torch.ops.aten.permute.default and src.op != "placeholder":
            continue
        if n.target in _RESHAPES and not (output in n.users and isinstance(meta(src), torch.Tensor)
                                          and meta(src).is_contiguous() and val.is_contiguous()):
            continue
        if output is not None and output in n.users:
            if len(n.users) == 1:
                keep.add(n)
                continue
            with gm.graph.inserting_after(n):
                view = gm.graph.call_function(n.target, n.args, dict(n.kwargs))
            view.meta = dict(n.meta)
            output.replace_input_with(n, view)
            keep.add(view)
        elif val.is_contiguous() and isinstance(meta(src), torch.Tensor) and not meta(src).is_contiguous():
            keep.add(n)
    if keep:
        gm.recompile()
    return keep


def _pads_to_cats(gm: GraphModule) -> None:
    """A sum of zero pads whose windows tile their dim (select_backward's,
    torchair.decompositions, over a qkv split) as an aten.cat in the graph,
    before partitioning, so that _permutes_through_cats can see it. (The
    lowering makes a cat of other sums of disjoint pads, gaps included.)"""
    changed = False
    for n in reversed(list(gm.graph.nodes)):
        if n.op != "call_function" or n.target != torch.ops.aten.add.Tensor or not n.users:
            continue
        out = meta(n)
        parts = _zero_pad_parts(n, out) if isinstance(out, torch.Tensor) else None
        if parts is None or len(parts[1]) < 2:
            continue
        d, windows = parts
        if not isinstance(out.shape[d], int) or any(not isinstance(meta(src).shape[d], int) for _, src in windows):
            continue  # (a symbolic extent: no guard on it from here)
        windows.sort(key=lambda w: w[0])
        at = 0
        for start, src in windows:
            at = at + meta(src).shape[d] if start == at else -1
        if at != out.shape[d]:
            continue  # a gap or an overlap: left to the lowering
        with gm.graph.inserting_before(n):
            cat = gm.graph.call_function(torch.ops.aten.cat.default, ([src for _, src in windows], d))
        cat.meta = dict(n.meta)
        n.replace_all_uses_with(cat)
        changed = True
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()


def _permutes_through_cats(gm: GraphModule) -> None:
    """permute(cat(xs, d), p) as cat([permute(x, p) for x], p.index(d)),
    where the permute is the cat's only user: the cat then writes the
    permuted layout itself. A ViT's qkv gradient (three [B, H, T, D] pieces
    that eager's attention backward leaves in [B, T, H, D] memory) was
    bound with three copies, joined, and permuted to [B, T, 3, H, D] for
    the weight gradient; each permuted piece is now eager's contiguous
    view (_views_out_to_eager) and the cat the one pass."""
    changed = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target != torch.ops.aten.permute.default:
            continue
        c, perm = n.args[0], list(n.args[1])
        if not (isinstance(c, Node) and c.op == "call_function" and c.target == torch.ops.aten.cat.default
                and len(c.users) == 1 and isinstance(meta(n), torch.Tensor)):
            continue
        rank = meta(n).dim()
        perm = [p % rank for p in perm]
        d = (c.args[1] if len(c.args) > 1 else c.kwargs.get("dim", 0)) % rank
        pieces = []
        with gm.graph.inserting_before(n):
            for x in c.args[0]:
                if not isinstance(x, Node) or not isinstance(meta(x), torch.Tensor) or meta(x).dim() != rank:
                    break
                v = gm.graph.call_function(torch.ops.aten.permute.default, (x, perm))
                v.meta = {"val": torch.ops.aten.permute.default(meta(x), perm)}
                pieces.append(v)
            else:
                joined = gm.graph.call_function(torch.ops.aten.cat.default, (pieces, perm.index(d)))
                joined.meta = dict(n.meta)
                n.replace_all_uses_with(joined)
                changed = True
                continue
        for v in pieces:  # a piece that is no tensor of the rank: as it was
            gm.graph.erase_node(v)
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()


def _one_user_per_size_node(gm: GraphModule) -> None:
    """Gives every size node one user, copying it for each further user
    (latest first, so a chain of them is copied whole)."""
    changed = False
    for n in reversed(list(gm.graph.nodes)):
        if not is_size_node(n) or len(n.users) < 2:
            continue
        for user in list(n.users)[1:]:
            with gm.graph.inserting_after(n):
                copy = gm.graph.call_function(n.target, n.args, dict(n.kwargs))
            copy.meta = dict(n.meta)
            user.replace_input_with(n, copy)
            changed = True
    if changed:
        gm.recompile()


def _size_nodes_follow_users(partitions: list[Partition]) -> list[Partition]:
    """Takes out of each partition the size nodes whose user is not in it
    (a subgraph returns tensors only; such a node runs in eager, on SymInts),
    and drops partitions left with size nodes only.

    A dynamic wav2vec2 takes sym_size of its first and last conv's output
    for the group norm and the projection's views; unsupported, each was an
    edge out of the partition and back in, and the cut left the convs
    between them in a subgraph with no bare input length: all seven fell
    back. With one user each (_one_user_per_size_node), a size node kept
    beside its user adds no edge."""
    out = []
    for p in partitions:
        changed = True
        while changed:
            changed = False
            for n in list(p.nodes):
                if is_size_node(n) and any(u not in p.nodes for u in n.users):
                    del p.nodes[n]
                    changed = True
        if any(not is_size_node(n) for n in p.nodes):
            out.append(p)
    return out


# ops whose result is always a view of their first argument in eager
_EAGER_VIEW_OPS = (
    torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.permute.default,
    torch.ops.aten.transpose.int, torch.ops.aten.t.default, torch.ops.aten.select.int,
    torch.ops.aten.slice.Tensor, torch.ops.aten.unsqueeze.default, torch.ops.aten.squeeze.dim,
    torch.ops.aten.squeeze.dims, torch.ops.aten.alias.default, torch.ops.aten.expand.default,
)


# views that raise when the strides do not allow them
_STRICT_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)


def _views_out_to_eager(gm: GraphModule, partitions: list[Partition]) -> list[Partition]:
    """Leaves to eager the views a partition would return: a subgraph output
    owns its memory, so a view there was a copy, where eager's is free.
    Training graphs only (see _compile_graph).

    A view leaves its partition when its users outside it run in eager (or
    are the graph's output), or when it is contiguous (a subgraph that takes
    it gets it without a copy). Users inside keep the view inside, and a
    duplicate serves the outside ones. Views whose users have all left
    follow them, so a chain of views leaves whole. So does a view that
    makes a subgraph's input contiguous. ViT-Tiny's step copied
    the qkv projection into q, k and v for eager's attention (a permute of
    [B, T, 3, H, D] and three slices), its gradients back out of the
    attention's backward (a permute), and each activation the weight
    gradients read (a reshape to [tokens, features] returned beside the
    input gradient), and the attention's output twice on its way into the
    output projection (bound contiguous, then permuted)."""
    owner = {n: p for p in partitions for n in p.nodes}
    changed, moved = True, False
    while changed:
        changed = False
        for p in partitions:
            for n in reversed(list(p.nodes)):
                if n.target not in _EAGER_VIEW_OPS or not isinstance(meta(n), torch.Tensor):
                    continue
                src = root = n.args[0]
                # through views in p that only feed this one (an unsqueeze
                # before the permute): they follow it out
                while (owner.get(root) is p and root.target in _EAGER_VIEW_OPS and len(root.users) == 1
                       and isinstance(root.args[0], Node)):
                    root = root.args[0]
                if (owner.get(root) is not p and isinstance(meta(root), torch.Tensor)
                        and not meta(root).is_contiguous() and meta(n).is_contiguous()):
                    # a view that makes an input contiguous: the subgraph
                    # would copy the input to bind it, then copy it again
                    del p.nodes[n]
                    del owner[n]
                    changed = moved = True
                    continue
                outside = [u for u in n.users if owner.get(u) is not p]
                if not outside or (any(u in owner for u in outside) and not meta(n).is_contiguous()):
                    continue
                if any(owner.get(u) is p for u in n.users):
                    with gm.graph.inserting_after(n):
                        view = gm.graph.call_function(n.target, n.args, dict(n.kwargs))
                    view.meta = dict(n.meta)
                    for u in outside:
                        u.replace_input_with(n, view)
                else:
                    del p.nodes[n]
                    del owner[n]
                changed = moved = True
    if moved:
        # Eager now gets views with the layouts of the trace where it got
        # contiguous subgraph outputs, and the trace's layouts need not
        # hold: an eager op fed a subgraph's contiguous output where the
        # trace had a transposed one returns another layout (a small
        # LLaMA's attention output, viewed back to [B, T, C] through a
        # permute, failed). A reshape is the view where one exists and a
        # copy where none does, where view would raise.
        for n in gm.graph.nodes:
            if n.op == "call_function" and n not in owner and n.target in _STRICT_VIEWS:
                n.target = torch.ops.aten.reshape.default
    gm.recompile()
    return [p for p in partitions if any(not is_size_node(n) for n in p.nodes)]


def _split(partitions: list[Partition], order: dict[Node, int], limit: int) -> list[Partition]:
    """Splits each partition into runs of at most limit nodes in graph order.
    Consecutive runs of a convex partition are convex, so no cycle appears."""
    out: list[Partition] = []
    for p in partitions:
        nodes = sorted(p.nodes, key=order.__getitem__)
        for i in range(0, len(nodes), limit):
            out.append(Partition(id=len(out), nodes=nodes[i : i + limit]))
    return out


def _compile_flags(config: CompilerConfig) -> int:
    flags = 0
    if not config.enable_operator_fusion:
        flags |= _C.COMPILE_NO_FUSION
    if not config.enable_memory_optimization:
        flags |= _C.COMPILE_NO_MEMORY_REUSE
    if config.dynamic_graph_mode:
        flags |= _C.COMPILE_OP_BY_OP
    return flags


def _disabled_passes(config: CompilerConfig) -> int:
    bits = 0
    for name in config.disabled_passes:
        bits |= _C.PASSES[name]
    return bits


class AirSubgraph:
    """Runs one compiled subgraph: one C call. Replaces a fused submodule.
    Arguments that are frozen (lowered as constants) or SymInts are dropped:
    tensor_args lists the positions passed to C. A SymInt that no tensor
    input has as a dim (size_args) goes in after them as the shape of an
    empty [0, n] tensor, which binds its symbol."""

    def __init__(
        self,
        model: Any,
        tensor_args: list[int] | None,
        single: bool,
        report: str,
        frozen: list[Node] | None = None,
        size_args: list[int] | None = None,
    ) -> None:
        self.model = model
        self.tensor_args = tensor_args
        self.size_args = size_args or []
        self.single = single
        self.air_report = report
        self.frozen = frozen or []  # the outer placeholders this subgraph holds as constants

    def __call__(self, *args: Any) -> Any:
        if self.tensor_args is not None:
            sizes = [torch.empty((0, int(args[i]))) for i in self.size_args]
            args = tuple([args[i] for i in self.tensor_args] + sizes)
        outs = self.model.run(args)
        return outs[0] if self.single else tuple(outs)


def lower_subgraph(
    sub: GraphModule, arg_nodes: Sequence[Any], config: CompilerConfig, frozen: dict[Node, torch.Tensor] | None = None
) -> AirSubgraph:
    """Lowers a fused submodule; arg_nodes are the outer graph's arguments
    (whose meta gives the types of the submodule's placeholders). An argument
    in frozen is lowered as a borrowed constant (no copy) of the given tensor
    instead of an input."""
    L = Lowerer()
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    tensor_args: list[int] = []
    in_dtypes: list[torch.dtype] = []
    frozen_used: list[Node] = []
    # first pass binds symbols from every tensor input, so that a SymInt
    # placeholder can be expressed whatever the argument order
    for i, (ph, outer) in enumerate(zip(placeholders, arg_nodes)):
        val = meta(outer)
        if frozen and outer in frozen:
            ph.meta["val"] = val
            L.env[ph] = L.add_constant(frozen[outer])
            frozen_used.append(outer)
        elif isinstance(val, torch.Tensor):
            ph.meta["val"] = val
            L.add_input(ph)
            tensor_args.append(i)
            in_dtypes.append(val.dtype)
        elif isinstance(val, torch.SymInt):
            ph.meta["val"] = val
        else:
            raise Unsupported(f"subgraph input {ph.name} is a {type(val).__name__}")
    # sizes that no tensor input has as a dim: a subgraph that starts after
    # a flattening view ([s0*s1, C]) and views back to [s0, s1, C]
    size_args: list[int] = []
    for i, ph in enumerate(placeholders):
        val = ph.meta.get("val")
        if i not in tensor_args and isinstance(val, torch.SymInt) and L.add_size_input(val, ph.name):
            size_args.append(i)
            in_dtypes.append(torch.float32)
    out_node = None
    for n in sub.graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "output":
            out_node = n
            continue
        if n.op == "get_attr":
            t = getattr(sub, n.target)
            if not isinstance(t, torch.Tensor):
                raise Unsupported(f"attribute {n.target} is not a tensor")
            L.env[n] = L.add_constant(t)
            continue
        if is_size_node(n):  # its users take sizes from meta
            continue
        L.env[n] = LOWERINGS[n.target](L, n)
    assert out_node is not None
    result = out_node.args[0]
    single = not isinstance(result, (tuple, list))
    results = [result] if single else list(result)
    outs = [L.value(r) for r in results]
    out_dtypes = [meta(r).dtype for r in results]
    L.g.outputs(outs)
    model = L.g.compile(
        in_dtypes, out_dtypes, _empty, flags=_compile_flags(config), num_threads=0,
        fusion_threshold=config.fusion_threshold or 0,
        disabled_passes=_disabled_passes(config),
    )
    all_tensors = len(tensor_args) == len(placeholders)
    return AirSubgraph(model, None if all_tensors else tensor_args, single, model.report(), frozen_used, size_args)


# Outputs from this size on come from libair's output pool (src/python/
# output_pool.h): pages kept mapped between calls instead of page-faulted
# afresh after the heap was trimmed. Smaller ones did not fault.
POOLED_OUTPUT_BYTES = 1 << 20


def _empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < POOLED_OUTPUT_BYTES:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(_C.output_block(nbytes), dtype=dtype).view(shape)


def compile_graph(gm: GraphModule, config: CompilerConfig, graph_kind: str = "forward") -> tuple[Any, CompileReport]:
    """Partitions gm, compiles the supported parts, returns the new module
    (a FrozenGraph when parameters were frozen: see gm.meta["torchair_freeze"])."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # aot_autograd calls compilers under fake mode; constants we create
    # (scalars, folded weights) must be real tensors
    with unset_fake_temporarily():
        return _compile_graph(gm, config, graph_kind)


def _compile_graph(gm: GraphModule, config: CompilerConfig, graph_kind: str) -> tuple[Any, CompileReport]:
    report = CompileReport(graph=graph_kind)
    # set by the backend: {argument position: the real tensor to freeze}, and
    # "on" or why freezing is off for this graph
    # (popped: gm outlives the compile, and must not keep the tensors alive)
    frozen_args, report.freezing, by_content = gm.meta.pop("torchair_freeze", ({}, "off", set()))
    # (training graphs only: an inference graph that returns a transpose of
    # its input is rare, and its op is then what the caller wants compiled)
    if graph_kind in ("forward", "backward"):
        _pads_to_cats(gm)
        _permutes_through_cats(gm)
    eager_views = _eager_views(gm, list(frozen_args)) if graph_kind in ("forward", "backward") else set()
    report.total_ops = sum(1 for n in gm.graph.nodes if n.op == "call_function" and not is_size_node(n))
    _one_user_per_size_node(gm)
    reasons: dict[Node, str] = {}
    support = _Support(reasons, eager_views)
    partitioner = CapabilityBasedPartitioner(
        gm, support, allows_single_node_partition=True, non_compute_ops=list(_VIEW_OPS)
    )
    partitions = partitioner.propose_partitions()
    limit = 1 if config.dynamic_graph_mode else config.max_static_subgraph_ops
    if limit is not None:
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        partitions = _split(partitions, order, limit)
    partitions = _size_nodes_follow_users(partitions)
    if graph_kind in ("forward", "backward"):
        partitions = _views_out_to_eager(gm, partitions)
    in_partition = {n for p in partitions for n in p.nodes}
    for n in gm.graph.nodes:
        if n.op == "call_function" and n not in in_partition and not is_size_node(n):
            reason = reasons.get(n) or check_node(n) or "kept in eager beside unsupported neighbours"
            report.fallbacks.append((n.name, op_name(n), reason))
    if not partitions:
        return gm, report
    part_ops = {}
    fused = partitioner.fuse_partitions(partitions, prefix="air_") if hasattr(partitioner, "fuse_partitions") else None
    if fused is None:
        from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

        fused = fuse_by_partitions(gm, [{n: None for n in p.nodes} for p in partitions], prefix="air_")
    placeholders = [n for n in fused.graph.nodes if n.op == "placeholder"]
    frozen = {placeholders[i]: t for i, t in frozen_args.items()}
    holders = []  # (AirSubgraph, its report, submodule, args) of subgraphs holding frozen tensors
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith("air_"):
            continue
        sub = getattr(fused, node.target)
        ops = [op_name(n) for n in sub.graph.nodes if n.op == "call_function" and not is_size_node(n)]
        part_ops[node.target] = ops
        try:
            try:
                compiled = lower_subgraph(sub, node.args, config, frozen)
            except (Unsupported, TorchairError):
                if not any(a in frozen for a in node.args):
                    raise
                # the same subgraph with its weights as inputs may still compile
                compiled = lower_subgraph(sub, node.args, config)
        except (Unsupported, TorchairError) as e:
            reason = str(e) if isinstance(e, Unsupported) else (e.args[2] if len(e.args) > 2 else str(e))
            report.subgraphs.append(SubgraphReport(node.target, ops, False, reason))
            for n in sub.graph.nodes:
                if n.op == "call_function":
                    report.fallbacks.append((n.name, op_name(n), f"its subgraph failed to compile: {reason}"))
            continue
        # a plain callable in place of the submodule: the generated code
        # calls self.air_N(...), which finds it in the instance dict
        del fused._modules[node.target]
        fused.__dict__[node.target] = compiled
        sub_report = SubgraphReport(node.target, ops, True, "", compiled.air_report, compiled.model)
        report.subgraphs.append(sub_report)
        if compiled.frozen:
            holders.append((compiled, sub_report, sub, tuple(node.args)))
    fused.recompile()
    if not holders:
        if report.freezing == "on":
            report.freezing = "off (no compiled subgraph uses a parameter or buffer)"
        return fused, report
    used = {n for h in holders for n in h[0].frozen}
    report.frozen_tensors = len(used)
    report.frozen_bytes = sum(frozen[n].numel() * frozen[n].element_size() for n in used)
    return FrozenGraph(fused, report, frozen_args, holders, config, by_content, lower_subgraph), report
