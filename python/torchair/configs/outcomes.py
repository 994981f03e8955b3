"""What every option of TorchAir's config tree does in torchair: the one table behind the
facade (DESIGN.md: "TorchAir's names are a facade"). Each leaf has one of three outcomes:

- ``built``: it does on the CPU what it does on the NPU, through a torchair feature;
- ``cpu``: a documented CPU equivalent, real and tested;
- ``not_built``: NotBuiltError with the reason, raised when a backend is made from a config
  that sets the leaf to anything but its default (defaults are always accepted).

``apply_tree`` turns a config's groups into changes of the flat options and of
``Extras`` (what only the tree can ask for), or raises; ``docs/torchair-api.md`` is generated
from this table (tools/gen_torchair_api.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchair.debug.options import DebugOptions
from torchair.errors import NotBuiltError, OptionError

# Passes whose work is fusion: what TorchAir's oo_level "O1" turns off (its O1 keeps shape
# inference, constant folding and dead code elimination, which torchair's simplify does).
FUSION_PASSES: tuple[str, ...] = (
    "fuse_attention",
    "fuse_activation",
    "fuse_rms_norm",
    "fuse_rope",
    "fuse_epilogue",
    "fuse_elementwise",
)


@dataclass
class Extras:
    """What the tree asks of the compile beyond the flat options."""

    keep_inference_input_mutations: bool = True
    run_eagerly: bool = False
    pattern_fusion: bool = True
    min_partition_ops: int | None = None
    num_threads: int = 0  # 0: the process's pool
    pre_pass: Callable[..., Any] | None = None
    post_pass: Callable[..., Any] | None = None
    # TorchAir's debug options (torchair.debug.options)
    debug: DebugOptions = field(default_factory=DebugOptions)
    applied: list[str] = field(default_factory=list)  # "path=value: what it did", for the report
    # the user's own config object: what TorchAir hands to the custom passes
    user_config: Any = None


@dataclass(frozen=True)
class Outcome:
    kind: str  # "built", "cpu" or "not_built"
    what: str  # what it does in torchair, or why it is not built
    # applies a non-default value: (value, flat config, extras); may raise for some values
    apply: Callable[[Any, Any, Extras], None] | None = None


def _not_built(path: str, value: Any, why: str) -> NotBuiltError:
    return NotBuiltError(2, "unsupported", f"config.{path}={value!r} is not built in this torchair: {why}")


def _disable(flat: Any, names: list[str]) -> None:
    flat.disabled_passes = tuple(dict.fromkeys(list(flat.disabled_passes) + names))


def _set_attr(name: str) -> Callable[[Any, Any, Extras], None]:
    def apply(value: Any, flat: Any, extras: Extras) -> None:
        setattr(extras, name, value)

    return apply


def _aicore_num(value: Any, flat: Any, extras: Extras) -> None:
    import os

    first = str(value).split("|")[0].strip()
    if not first.isdigit() or int(first) < 1:
        raise OptionError(
            1, "invalid argument", f"config.ge_config.aicore_num={value!r}: expected 'N' or 'N|M' with N a positive core count"
        )
    extras.num_threads = min(int(first), os.cpu_count() or 1)


def _frozen_parameter(value: Any, flat: Any, extras: Extras) -> None:
    if value:
        if flat.freezing is False:
            raise OptionError(
                1,
                "invalid argument",
                "config.experimental_config.frozen_parameter=True contradicts freezing=False",
            )
        flat.freezing = True


def _lower_limit(value: Any, flat: Any, extras: Extras) -> None:
    if value == -1:
        flat.dynamic_graph_mode = True
    else:
        extras.min_partition_ops = int(value)


def _view_optimize(value: Any, flat: Any, extras: Extras) -> None:
    if not value:
        _disable(flat, ["attention_views"])


def _oo_level(value: Any, flat: Any, extras: Extras) -> None:
    if value == "O1":
        _disable(flat, list(FUSION_PASSES))


def _pass_switches(path: str, switches: dict[str, str], flat: Any) -> None:
    """{pass name: "on"/"off"} onto disabled_passes; names torchair does not have are refused."""
    from torchair._C import PASSES

    off: list[str] = []
    unknown = []
    for name, state in switches.items():
        if name == "ALL":
            if state == "off":
                off += list(FUSION_PASSES)
            continue
        if name not in PASSES:
            unknown.append(name)
        elif state == "off":
            off.append(name)
    if unknown:
        raise _not_built(
            path, switches, f"no torchair pass is named {', '.join(unknown)} (torchair's passes: {', '.join(PASSES)})"
        )
    on = {n for n, s in switches.items() if s == "on"}
    flat.disabled_passes = tuple(dict.fromkeys([p for p in flat.disabled_passes if p not in on] + off))


def _optimization_switch(value: Any, flat: Any, extras: Extras) -> None:
    switches = {}
    for item in str(value).split(";"):
        if not item.strip():
            continue
        name, _, state = item.partition(":")
        if state.strip() not in ("on", "off"):
            raise OptionError(1, "invalid argument", f"optimization_switch entry {item!r} is not 'Pass:on' or 'Pass:off'")
        switches[name.strip()] = state.strip()
    _pass_switches("ge_config.optimization_switch", switches, flat)


def _fusion_switch_file(value: Any, flat: Any, extras: Extras) -> None:
    try:
        with open(value) as f:
            doc = json.load(f)
        groups = doc["Switch"]
        switches = {k: v for g in ("GraphFusion", "UBFusion") for k, v in (groups.get(g) or {}).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise OptionError(
            1, "invalid argument", f"fusion_config.fusion_switch_file {value!r}: not a fusion switch file ({e})"
        ) from e
    _pass_switches("fusion_config.fusion_switch_file", switches, flat)


def _only(allowed: tuple[Any, ...], why: str) -> Callable[[Any, Any, Extras], None]:
    """Values in ``allowed`` hold on the CPU as they are; others are not built."""

    def apply(value: Any, flat: Any, extras: Extras) -> None:
        if value not in allowed:
            raise NotBuiltError(2, "unsupported", why.format(value=value))

    return apply




def _debug_apply(path: str) -> Callable[[Any, Any, Extras], None]:
    from torchair.debug.options import APPLY

    return APPLY[path]

_EXPORT = "export to a file is the deployment issue (#35: torchair.export and the .air format)"
_ACLGRAPH = "aclgraph captures NPU kernels into graphs; torchair's CPU runtime has no kernel graphs to capture"
_USED_WITH = "used only together with {}; on its own it changes nothing, in TorchAir either"

TREE: dict[str, Outcome] = {
    # debug
    "debug.graph_dump.type": Outcome(
        "built",
        "each ATen graph torchair compiles is written to graph_dump.path, one file per graph named "
        "torchair_graph<N>_<kind>_pid<P>.<ext>: 'txt' (the graph and its compile report), 'py' (a runnable FX "
        "file with random inputs), 'dot', 'svg' (needs Graphviz's dot; else OptionError); 'pbtxt' is NotBuiltError",
        _debug_apply("debug.graph_dump.type"),
    ),
    "debug.graph_dump._path": Outcome("built", "the folder of the graph dumps (made if missing)", _debug_apply("debug.graph_dump._path")),
    "debug.data_dump.type": Outcome(
        "built",
        "'npy': the inputs and outputs of each compiled subgraph at every call, as .npy under "
        "data_dump.path/torchair_dump/<graph>/<subgraph>/call<K>/; data_dump.filter(node) returning None for "
        "every op of a subgraph leaves it out",
        _debug_apply("debug.data_dump.type"),
    ),
    "debug.data_dump._path": Outcome("built", _USED_WITH.format("debug.data_dump.type"), _debug_apply("debug.data_dump._path")),
    "debug.fx_summary.type": Outcome(
        "built",
        "'csv': each ATen graph's ops as torchair_fx_summary_graph<N>_<kind>_pid<P>.csv in fx_summary.path, one row "
        "per op, dtype and outcome (aten_op, count, status compiled/eager, reason, dtype)",
        _debug_apply("debug.fx_summary.type"),
    ),
    "debug.fx_summary.skip_compile": Outcome(
        "built",
        "True (TorchAir's default): after the CSV is written the graph runs in eager, not compiled; the status "
        "column says what torchair would compile. False: compiled, and the CSV says what was",
        _debug_apply("debug.fx_summary.skip_compile"),
    ),
    "debug.fx_summary._path": Outcome("built", "the folder of the CSVs (made if missing)", _debug_apply("debug.fx_summary._path")),
    "debug.run_eagerly": Outcome(
        "built", "the captured ATen graph runs in eager PyTorch instead of being compiled", _set_attr("run_eagerly")
    ),
    "debug.aclgraph.disable_reinplace_inplaceable_ops_pass": Outcome("not_built", _ACLGRAPH),
    "debug.aclgraph.disable_reinplace_input_mutated_ops_pass": Outcome("not_built", _ACLGRAPH),
    "debug.aclgraph.disable_mempool_reuse_in_same_fx": Outcome("not_built", _ACLGRAPH),
    "debug.aclgraph.enable_output_clone": Outcome(
        "cpu",
        "True holds on the CPU as is: every call's outputs are fresh tensors, never a buffer the next call overwrites",
        _only((True,), "config.debug.aclgraph.enable_output_clone={value!r}: outputs are always fresh tensors"),
    ),
    "debug.aclgraph.static_capture_size_limit": Outcome("not_built", _ACLGRAPH),
    "debug.aclgraph.clone_input": Outcome(
        "cpu",
        "False holds on the CPU as is: inputs are bound by pointer on every call, never copied into static buffers",
        _only((False,), "config.debug.aclgraph.clone_input={value!r}"),
    ),
    # aoe
    "aoe_config.aoe_mode": Outcome("not_built", "AOE tunes CANN kernels on an Ascend NPU; torchair's kernel choice on the CPU is mode='max-autotune'"),
    "aoe_config.work_path": Outcome("built", _USED_WITH.format("aoe_config.aoe_mode")),
    "aoe_config.aoe_config_file": Outcome("built", _USED_WITH.format("aoe_config.aoe_mode")),
    # export
    **{
        f"export.{k}": Outcome("not_built", _EXPORT)
        for k in (
            "export_mode",
            "export_path_dir",
            "export_name",
            "weight_name",
            "inputs_name",
            "experimental.enable_record_nn_module_stack",
            "experimental.auto_atc_config_generated",
            "experimental.enable_lite_export",
        )
    },
    # dump_config: the runtime data dump
    "dump_config.enable_dump": Outcome(
        "built",
        "True: the inputs and outputs of each compiled subgraph as .npy under dump_path/torchair_dump/, for the "
        "calls in dump_step ('0|2-5', from 0; '' every call), the subgraphs holding an op or node named in "
        "dump_layer ('' all), inputs, outputs or both (dump_mode); dump_data='stats' writes stats.csv instead",
        _debug_apply("dump_config.enable_dump"),
    ),
    **{
        f"dump_config.{k}": Outcome("built", _USED_WITH.format("dump_config.enable_dump"), _debug_apply(f"dump_config.{k}"))
        for k in ("dump_path", "dump_mode", "dump_step", "dump_layer", "dump_data")
    },
    **{
        f"dump_config.{k}": Outcome("built", _USED_WITH.format("dump_config.enable_dump") + "; the CPU's dump has one stage and no quantized ops")
        for k in ("quant_dumpable", "data_dump_stage")
    },
    "dump_config.dump_config_path": Outcome("not_built", "acl.json dump configs drive the NPU's dump and overflow detection"),
    # fusion
    "fusion_config.fusion_switch_file": Outcome(
        "cpu",
        "the JSON's GraphFusion/UBFusion switches for torchair's own passes (torchair.PASS_NAMES) become "
        "disabled_passes; \"ALL\": \"off\" turns off every fusion pass; a name torchair has no pass for is NotBuiltError",
        _fusion_switch_file,
    ),
    # experimental
    "experimental_config.cc_parallel_enable": Outcome("not_built", "no collective runs inside a compiled graph on the CPU"),
    "experimental_config.keep_inference_input_mutations": Outcome(
        "built", "passed to aot_autograd as keep_inference_input_mutations", _set_attr("keep_inference_input_mutations")
    ),
    "experimental_config.memory_efficiency": Outcome("not_built", "one shared activation arena for all graphs is not built"),
    "experimental_config.frozen_parameter": Outcome(
        "built",
        "True: parameters and buffers are frozen (freezing=True: constants, folded and packed, guarded every call); "
        "torchair freezes inference graphs by default already",
        _frozen_parameter,
    ),
    "experimental_config.static_model_ops_lower_limit": Outcome(
        "cpu",
        "N: supported stretches of fewer than N ops are left to eager instead of being compiled; -1: every op "
        "runs alone (dynamic_graph_mode)",
        _lower_limit,
    ),
    "experimental_config.jit_compile": Outcome("built", "only 'auto' exists: torchair's kernels are prebuilt"),
    "experimental_config.npu_fx_pass": Outcome("not_built", "Inductor's joint-graph passes are not run on torchair's graphs"),
    "experimental_config.aot_config_enable_joint_graph": Outcome(
        "not_built", "torchair compiles forward and backward as aot_autograd partitions them"
    ),
    "experimental_config.aot_config_output_loss_index": Outcome("not_built", "used only with the joint graph"),
    "experimental_config.topology_sorting_strategy": Outcome(
        "cpu",
        "DFS and StableRDFS: torchair runs ops in the captured graph's order, which both keep; BFS and RDFS are NotBuiltError",
        _only(("DFS", "StableRDFS"), "config.experimental_config.topology_sorting_strategy={value!r}: torchair has no scheduler that reorders ops"),
    ),
    "experimental_config.enable_ref_data": Outcome("not_built", "in-place updates of graph inputs written through RefData"),
    "experimental_config.enable_view_optimize": Outcome(
        "cpu", "False: torchair's view rewrite (the attention_views pass) is off", _view_optimize
    ),
    "experimental_config.remove_noop_ops": Outcome(
        "not_built", "False: torchair's simplify pass always removes no-op ops; there is no switch for that alone"
    ),
    "experimental_config.tiling_schedule_optimize": Outcome("not_built", "tiling sink moves tiling to the NPU's AI CPU"),
    "experimental_config.pattern_fusion_pass": Outcome(
        "built",
        "patterns registered with torchair.register_replacement are applied to the ATen graph before lowering; "
        "False skips them",
        _set_attr("pattern_fusion"),
    ),
    **{
        f"experimental_config.aclgraph.{k}": Outcome("not_built", _ACLGRAPH)
        for k in (
            "_aclnn_static_shape_kernel",
            "_aclnn_static_shape_kernel_build_dir",
            "_aclnn_static_shape_kernel_sym_value_range",
            "_aclnn_static_shape_kernel_sym_index",
        )
    },
    # inference
    "inference_config.dynamic_gears_merge_policy": Outcome(
        "cpu",
        "'zip' (the default): gears from set_dim_gears are compiled as symbolic sizes, which serve every "
        "combination; 'product' is NotBuiltError until per-gear plans exist (#33)",
        _only(("zip",), "config.inference_config.dynamic_gears_merge_policy={value!r}: per-gear plans are the dynamic-shapes issue (#33)"),
    ),
    # ge
    "ge_config.enable_single_stream": Outcome(
        "cpu", "True holds on the CPU as is: torchair runs a graph's steps one at a time, in order", _only((True,), "")
    ),
    "ge_config.oo_level": Outcome("built", "'O1': the fusion passes are off; 'O3' (default): every pass", _oo_level),
    "ge_config.oo_constant_folding": Outcome(
        "built",
        "True holds: simplify folds constants; False is NotBuiltError (folding cannot be switched off alone)",
        _only((True,), "config.ge_config.oo_constant_folding={value!r}: simplify always folds constants"),
    ),
    "ge_config.oo_dead_code_elimination": Outcome(
        "built",
        "True holds: simplify drops dead nodes; False is NotBuiltError",
        _only((True,), "config.ge_config.oo_dead_code_elimination={value!r}: simplify always drops dead nodes"),
    ),
    "ge_config.export_compile_stat": Outcome(
        "cpu",
        "torchair writes no fusion_result.json: '0' (never) is what it does; the default '2' is accepted and writes "
        "nothing (the compile report, torchair.explain, lists each pass's work instead); '1' is NotBuiltError",
        _only(("0",), "config.ge_config.export_compile_stat={value!r}: fusion_result.json is not written"),
    ),
    "ge_config.aicore_num": Outcome(
        "cpu",
        "'cube|vector' core counts: the first becomes the graph's thread count (its own pool of that many "
        "threads, at most the CPUs present)",
        _aicore_num,
    ),
    "ge_config.optimization_switch": Outcome(
        "cpu",
        "'Pass:on;Pass:off' for torchair's own passes (torchair.PASS_NAMES) becomes disabled_passes; other names are NotBuiltError",
        _optimization_switch,
    ),
    # aclgraph_config
    "aclgraph_config.use_custom_pool": Outcome("not_built", _ACLGRAPH),
    "aclgraph_config.kernel_aot_optimization": Outcome("not_built", _ACLGRAPH),
    "aclgraph_config.kernel_aot_optimization_build_dir": Outcome("not_built", _ACLGRAPH),
    # custom passes
    "post_grad_custom_pre_pass": Outcome(
        "built", "called as fn(gm, example_inputs, config) on each ATen graph before torchair's own work", _set_attr("pre_pass")
    ),
    "post_grad_custom_post_pass": Outcome(
        "built", "called as fn(gm, example_inputs, config) after the registered replacements, before lowering", _set_attr("post_pass")
    ),
}


def apply_tree(groups: Any, flat: Any, extras: Extras) -> None:
    """Applies every leaf of ``groups`` that is not at its default, or raises."""
    for path, leaf in groups.leaves(""):
        path = path[1:]
        if leaf.is_default():
            continue
        outcome = TREE.get(path)
        if outcome is None:  # a leaf without an entry is a bug in this table, not the user's
            raise NotBuiltError(2, "unsupported", f"config.{path}: torchair has no outcome for this option")
        value = leaf.raw
        if outcome.kind == "not_built":
            raise _not_built(path, value, outcome.what)
        if outcome.apply is not None:
            outcome.apply(value, flat, extras)
        extras.applied.append(f"{path}={value!r}")
