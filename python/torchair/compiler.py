"""From an ATen FX graph (after aot_autograd) to a runnable module: find the
nodes libair supports, partition them into subgraphs with eager fallback
between, lower each subgraph through the lowering table, compile it in C, and
swap it in. A call then runs one C call per compiled subgraph.

The graph rewrites before and after partitioning are in ``partition``; what
a compile produces (``AirSubgraph``, the reports) in ``subgraph``."""

from __future__ import annotations

import math
import operator
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from torchair import _C
from torchair.config import CompilerConfig
from torchair.errors import TorchairError, Unsupported
from torchair.frozen import FrozenGraph
from torchair.lowering import AVAILABLE_OUTPUTS, Lowerer, lowering_for, meta
from torchair.lowering.core import LOW_PRECISION, storage_dtype
from torchair.partition import (
    _eager_views,
    _one_user_per_size_node,
    _pads_to_cats,
    _permutes_through_cats,
    _size_nodes_follow_users,
    _split,
    _views_out_to_eager,
    is_size_node,
)
from torchair.subgraph import AirSubgraph, CompileReport, SubgraphReport
from torchair.trace import add_c_phases
from torchair.trace import span as trace_span
from torchair.write_back import gather as gather_write_backs
from torchair.write_back import is_write_back

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


def check_node(node: Node) -> str | None:
    """None if libair can run node, else the reason it cannot."""
    if is_size_node(node):
        return None
    fn = lowering_for(node.target)
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
            elif isinstance(v, torch.SymFloat) and is_size_node(inp):
                # a ratio of sizes (interpolate's scale): its sizes as lower_subgraph binds them
                for a in inp.args:
                    if isinstance(meta(a), torch.SymInt):
                        L.add_size_input(meta(a), a.name)
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


def _compile_flags(config: CompilerConfig) -> int:
    flags = 0
    if not config.enable_operator_fusion:
        flags |= _C.COMPILE_NO_FUSION
    if not config.enable_memory_optimization:
        flags |= _C.COMPILE_NO_MEMORY_REUSE
    if config.dynamic_graph_mode:
        flags |= _C.COMPILE_OP_BY_OP
    if config.mode == "max-autotune":
        flags |= _C.COMPILE_AUTOTUNE
    if config.weights_in_place:
        flags |= _C.COMPILE_WEIGHTS_IN_PLACE
    return flags


def autotune_cache_path() -> str | None:
    """Where mode='max-autotune' remembers its kernel choices: ``autotune-v1.tsv`` in
    ``TORCHAIR_CACHE_DIR`` (default ``~/.cache/torchair``); None when ``TORCHAIR_CACHE=0``
    or the directory cannot be made (the choices are then timed at every compile)."""
    if os.environ.get("TORCHAIR_CACHE", "1") == "0":
        return None
    root = os.environ.get("TORCHAIR_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "torchair")
    try:
        os.makedirs(root, exist_ok=True)
    except OSError:
        return None
    return os.path.join(root, "autotune-v1.tsv")


def _disabled_passes(config: CompilerConfig) -> int:
    bits = 0
    for name in config.disabled_passes:
        bits |= _C.PASSES[name]
    return bits


@dataclass
class BuiltGraph:
    """A subgraph lowered into a libair graph, not yet compiled (build_subgraph):
    what lower_subgraph compiles, and what torchair.export saves."""

    lowerer: Lowerer
    in_dtypes: list[torch.dtype]
    out_dtypes: list[torch.dtype]
    tensor_args: list[int]  # placeholder positions passed as tensors
    size_args: list[int]  # SymInt placeholders passed as empty [0, n] tensors
    single: bool  # the subgraph returns one tensor, not a tuple
    frozen_used: list[Node]
    seeded: bool  # a seed goes in last (dropout)
    n_placeholders: int
    frozen_values: list[int]  # the constants of frozen_used, in its order (the compile cache's externals)

    @property
    def graph(self) -> Any:
        return self.lowerer.g


def lower_subgraph(
    sub: GraphModule,
    arg_nodes: Sequence[Any],
    config: CompilerConfig,
    frozen: dict[Node, torch.Tensor] | None = None,
    cacheable: bool = False,
) -> AirSubgraph:
    """Lowers a fused submodule; arg_nodes are the outer graph's arguments
    (whose meta gives the types of the submodule's placeholders). An argument
    in frozen is lowered as a borrowed constant (no copy) of the given tensor
    instead of an input. cacheable: look the subgraph up in the compile cache
    (torchair.cache: inference graphs) and save it there after a miss."""
    found = None
    if cacheable:
        from torchair.cache import lookup

        found = lookup(sub, arg_nodes, config, frozen, compile_built)
        if found is not None and found.hit is not None:
            add_c_phases(found.hit.model, "")
            return _with_debug(found.hit, sub, config)
    b = build_subgraph(sub, arg_nodes, config, frozen)
    if found is not None:
        found.serialize(b)
    with trace_span("libair compile", nodes=len(sub.graph.nodes)):
        model = compile_built(b, config)
    add_c_phases(model, "")
    if found is not None:
        found.write()
    all_tensors = len(b.tensor_args) == b.n_placeholders
    air = AirSubgraph(model, None if all_tensors else b.tensor_args, b.single, model.report(), b.frozen_used,
                      b.size_args, b.seeded)
    air.converted = list(b.lowerer.converted)
    air.quantized = list(getattr(b.lowerer, "quantized", []))
    return _with_debug(air, sub, config)


def _with_debug(air: AirSubgraph, sub: GraphModule, config: CompilerConfig) -> AirSubgraph:
    """The debug tree's hooks on a compiled subgraph (torchair.debug): its FX
    source kept for graph dumps, the data dump's per-call hook."""
    debug = getattr(getattr(config, "extras", None), "debug", None)
    if debug is not None:
        if debug.keep_sources:
            air.source = sub
        if debug.current is not None and debug.data_dump.enabled:
            air.debug = debug.current.data_hook(sub)
    return air


def compile_built(b: BuiltGraph, config: CompilerConfig) -> Any:
    """The C compile of a built graph with the options' flags: a torchair._C.Model."""
    return b.graph.compile(
        b.in_dtypes, b.out_dtypes, _empty, flags=_compile_flags(config),
        num_threads=getattr(getattr(config, "extras", None), "num_threads", 0),
        fusion_threshold=config.fusion_threshold or 0,
        disabled_passes=_disabled_passes(config),
        autotune_cache=autotune_cache_path() if config.mode == "max-autotune" else None,
    )


def build_subgraph(
    sub: GraphModule,
    arg_nodes: Sequence[Any],
    config: CompilerConfig,
    frozen: dict[Node, torch.Tensor] | None = None,
    symbol_names: dict[Any, str] | None = None,
    lazy_frozen: bool = False,
) -> BuiltGraph:
    """The lowering half of lower_subgraph: the libair graph of a submodule and
    how to call it. symbol_names ({sympy symbol: name}) names the graph's
    symbolic dims (torchair.export: the user's dynamic_axes names).
    lazy_frozen: an f32 frozen tensor becomes a constant of the graph only when
    an op reads it as f32 (torchair.export: under mixed_precision the products
    read 16-bit copies, and a saved file would otherwise hold both)."""
    L = Lowerer()
    for sym, name in (symbol_names or {}).items():
        L.symbols[sym] = L.g.symbol(name)
    L.mixed_precision = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(config.mixed_precision or "")
    L.weight_quantization = config.weight_quantization
    if L.mixed_precision is None:
        from torchair.precision import low_dtypes

        # torch.set_float32_matmul_precision('medium') and the mkldnn knobs (torchair.precision)
        L.precision_low = low_dtypes(getattr(config, "fp32_precision", ("ieee", "ieee")))
    L.weight_quantization_group = config.weight_quantization_group_size
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    tensor_args: list[int] = []
    in_dtypes: list[torch.dtype] = []
    frozen_used: list[Node] = []
    frozen_values: list[int] = []
    # first pass binds symbols from every tensor input, so that a SymInt
    # placeholder can be expressed whatever the argument order
    for i, (ph, outer) in enumerate(zip(placeholders, arg_nodes)):
        val = meta(outer)
        if frozen and outer in frozen:
            ph.meta["val"] = val
            t = frozen[outer]
            if lazy_frozen and t.dtype == torch.float32:
                L.const_tensors[ph] = t
                L.lazy[ph] = lambda t=t: L.add_constant(t)
            else:
                L.bind_constant(ph, t)
            frozen_used.append(outer)
            frozen_values.append(L.raw.get(ph, L.env.get(ph)))
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
            L.bind_constant(n, t)
            continue
        if is_size_node(n):  # its users take sizes from meta
            continue
        if n in L.env:  # lowered by an earlier node's lowering, which fused it (a batch norm's relu)
            continue
        lowering = lowering_for(n.target)
        assert lowering is not None
        L.bind(n, lowering(L, n))
    assert out_node is not None
    # a graph with dropout reads a seed, the last input (lowering/backward.py: seed_of)
    seeded = getattr(L, "seed_value", None) is not None
    if seeded:
        in_dtypes.append(torch.int64)
    result = out_node.args[0]
    single = not isinstance(result, (tuple, list))
    results = [result] if single else list(result)
    outs = [L.value(r) for r in results]  # Unsupported for one that is not a single tensor
    out_dtypes = [meta(r).dtype for r in results]
    # 16-bit outputs are computed in f32 (lowering/core.py: LOW_PRECISION),
    # except those a lowering kept in their own dtype (Lowerer.raw)
    outs = [L.raw[r] if dt in LOW_PRECISION and r in L.raw else _stored(L, v, dt)
            for r, v, dt in zip(results, outs, out_dtypes)]
    L.g.outputs(outs)
    return BuiltGraph(L, in_dtypes, out_dtypes, tensor_args, size_args, single, frozen_used, seeded, len(placeholders),
                      frozen_values)


def _stored(L: Lowerer, v: Any, dtype: torch.dtype) -> Any:
    """An f32-computed value in the dtype an output stores."""
    return L.node("cast", [v], {"dtype": storage_dtype(dtype)}) if dtype in LOW_PRECISION else v


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


def _drop_short(partitions: list[Any], least: int | None, reasons: dict[Node, str]) -> list[Any]:
    """Leaves partitions of fewer than ``least`` ops to eager (TorchAir's
    experimental_config.static_model_ops_lower_limit), saying why."""
    if not least:
        return partitions
    kept = []
    for p in partitions:
        ops = [n for n in p.nodes if n.op == "call_function" and not is_size_node(n)]
        if len(ops) >= least:
            kept.append(p)
            continue
        for n in ops:
            reasons[n] = f"its stretch of {len(ops)} ops is shorter than static_model_ops_lower_limit={least}"
    return kept


def _drop_metadata_asserts(gm: GraphModule) -> None:
    """Removes torch.export's ``_assert_tensor_metadata`` checks (an exported PT2E model has
    them): each asserts the dtype and device of a value of this graph, which tracing fixed
    (inputs: dynamo's guards), so they can never fail here; left in, each was a fallback."""
    dead = [n for n in gm.graph.nodes
            if n.op == "call_function" and n.target is torch.ops.aten._assert_tensor_metadata.default and not n.users]
    for n in dead:
        gm.graph.erase_node(n)
    if dead:
        gm.recompile()


def _compile_graph(gm: GraphModule, config: CompilerConfig, graph_kind: str) -> tuple[Any, CompileReport]:
    from torchair.log import sync_c_level

    sync_c_level()  # libair's messages at the level torchair's logger has now
    report = CompileReport(graph=graph_kind)
    setting = getattr(config, "fp32_precision", ("ieee", "ieee"))
    if config.mixed_precision is None and setting != ("ieee", "ieee"):
        from torchair.precision import describe

        report.fp32_precision = describe(setting)
    # set by the backend: {argument position: the real tensor to freeze}, and
    # "on" or why freezing is off for this graph
    # (popped: gm outlives the compile, and must not keep the tensors alive)
    frozen_args, report.freezing, by_content = gm.meta.pop("torchair_freeze", ({}, "off", set()))
    # (training graphs only: an inference graph that returns a transpose of
    # its input is rare, and its op is then what the caller wants compiled)
    if graph_kind in ("forward", "backward"):
        _pads_to_cats(gm)
        _permutes_through_cats(gm)
    # the running statistics' copy_ into their buffers: one call at the end
    report.write_backs = gather_write_backs(gm)
    _drop_metadata_asserts(gm)
    eager_views = _eager_views(gm, list(frozen_args)) if graph_kind in ("forward", "backward") else set()
    report.total_ops = sum(1 for n in gm.graph.nodes if n.op == "call_function" and not is_size_node(n))
    _one_user_per_size_node(gm)
    reasons: dict[Node, str] = {}
    support = _Support(reasons, eager_views)
    partitioner = CapabilityBasedPartitioner(
        gm, support, allows_single_node_partition=True, non_compute_ops=list(_VIEW_OPS)
    )
    with trace_span("partition", ops=report.total_ops):
        partitions = partitioner.propose_partitions()
    limit = 1 if config.dynamic_graph_mode else config.max_static_subgraph_ops
    if limit is not None:
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        partitions = _split(partitions, order, limit)
    partitions = _size_nodes_follow_users(partitions)
    partitions = _drop_short(partitions, getattr(getattr(config, "extras", None), "min_partition_ops", None), reasons)
    if graph_kind in ("forward", "backward"):
        partitions = _views_out_to_eager(gm, partitions)
    in_partition = {n for p in partitions for n in p.nodes}
    for n in gm.graph.nodes:
        if n.op == "call_function" and n not in in_partition and not is_size_node(n) and not is_write_back(n):
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
                with trace_span(f"lower {node.target}", ops=len(ops)):
                    compiled = lower_subgraph(sub, node.args, config, frozen, cacheable=graph_kind == "inference")
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
        sub_report = SubgraphReport(node.target, ops, True, "", compiled.air_report, compiled.model, compiled.converted)
        sub_report.quantized = getattr(compiled, "quantized", [])
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
