"""TorchAir's module-level names, each with its CPU meaning, and the table of every TorchAir name
outside the config tree with its outcome (the tree's own table is torchair.configs.outcomes);
``docs/torchair-api.md`` is generated from both (tools/gen_torchair_api.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torchair.config import CompilerConfig
from torchair.configs.outcomes import TREE, Outcome
from torchair.errors import NotBuiltError

__all__ = [
    "get_compiler",
    "dynamo_export",
    "use_internal_format_weight",
    "npu_format_cast_via_cpu",
    "register_fx_node_ge_converter",
    "patch_for_hcom",
    "API",
    "markdown",
]


def get_compiler(compiler_config: CompilerConfig | None = None) -> Callable[..., Any]:
    """TorchAir's FX compiler for ``aot_module_simplified``: ``compiler(gm, example_inputs)``
    compiles an ATen graph with torchair and returns the callable to run it."""
    from torchair.backend import _aten_compiler

    cfg = compiler_config or CompilerConfig()
    cfg.effective()

    def compiler(gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
        flat, _ = cfg.effective()
        return _aten_compiler(flat, "forward", None)(gm, example_inputs)

    return compiler


def dynamo_export(
    *args: Any,
    model: Any,
    export_path: str = "export_file",
    export_name: str = "export",
    dynamic: bool = False,
    config: Any = None,
    **kwargs: Any,
) -> None:
    """TorchAir's export, done by torchair.export: writes ``export_path/export_name.air``
    (the folder made if missing) from ``model(*args)``, with the given CompilerConfig's
    options; ``dynamic=True`` lets every axis of every input be dynamic where the model
    allows (torch.export's Dim.AUTO). Inputs given by keyword (``**kwargs``) are passed to
    the model by keyword, as torchair.export's ``kwargs=`` does: the file names them so."""
    import os

    from torchair.export.write import prepare, save

    os.makedirs(export_path, exist_ok=True)
    prepared = prepare(model, args, kwargs=kwargs or None, config=config, auto_dynamic=bool(dynamic))
    save(prepared, os.path.join(export_path, f"{export_name}.air"))


def use_internal_format_weight(model: Any) -> None:
    raise NotBuiltError(
        2,
        "unsupported",
        "use_internal_format_weight casts weights to NPU formats; torchair packs frozen weights into its kernels' "
        "layout when it compiles, and packing them in place ahead of time is not built",
    )


def npu_format_cast_via_cpu(*args: Any, **kwargs: Any) -> Any:
    raise NotBuiltError(2, "unsupported", "npu_format_cast_via_cpu makes NPU-private tensor formats, which the CPU has none of")


def register_fx_node_ge_converter(aten_op: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    raise NotBuiltError(
        2,
        "unsupported",
        f"register_fx_node_ge_converter({aten_op}) builds an Ascend GE graph for the op; torchair runs an op it "
        "lacks in eager, and torchair.register_lowering(op, fn), fn written in torch ops, teaches it new ones",
    )


def patch_for_hcom() -> None:
    """TorchAir patches torch.distributed's collectives so dynamo can capture them; torch 2.3.1
    and later capture them as functional collectives by themselves, so, as TorchAir does there,
    this only says so. Captured collectives run in eager between torchair's compiled subgraphs."""
    from torchair.core.utils import logger

    logger.warning("For versions 2.3.1 and above of PyTorch, there is no need to call patch_for_hcom anymore.")


API: dict[str, Outcome] = {
    "torchair.CompilerConfig": Outcome("built", "torchair's CompilerConfig: its own options and TorchAir's groups (the table above)"),
    "torchair.configs.compiler_config.CompilerConfig": Outcome("built", "the same object as torchair.CompilerConfig"),
    "torchair.get_npu_backend(compiler_config=, custom_decompositions=)": Outcome(
        "built", "the torchair backend with that config; custom_decompositions ({op: fn}) join torchair's decompositions"
    ),
    "torchair.get_compiler(compiler_config=)": Outcome("built", "torchair's ATen-graph compiler, for aot_module_simplified"),
    "torchair.register_replacement(search_fn, replace_fn, example_inputs, ...)": Outcome(
        "built", "the user's pattern is applied to every ATen graph before lowering (experimental_config.pattern_fusion_pass)"
    ),
    "torchair.patch_for_hcom()": Outcome(
        "cpu", "logs TorchAir's message for torch >= 2.3.1 (no patch needed); captured collectives run in eager between subgraphs"
    ),
    "torchair.dynamo_export(...)": Outcome(
        "cpu", "writes export_path/export_name.air with torchair.export (dynamic=True: every axis may be dynamic)"
    ),
    "torchair.use_internal_format_weight(model)": Outcome("not_built", "in-place ahead-of-time weight packing"),
    "torchair.npu_format_cast_via_cpu(...)": Outcome("not_built", "NPU-private tensor formats"),
    "torchair.register_fx_node_ge_converter(op)": Outcome(
        "not_built", "GE converters; torchair.register_lowering(op, fn), fn in torch ops, teaches torchair an op"
    ),
    "torchair.register_lowering(op, fn)": Outcome(
        "built",
        "fn, written in torch ops on the op's arguments, is traced to ATen and lowered with torchair's lowerings: "
        "a torch.library.custom_op compiles instead of falling back (docs/debugging.md)",
    ),
    "torchair.ge.*": Outcome("not_built", "Ascend GE graph building"),
    "torchair.logger, torchair.core.utils.logger": Outcome(
        "built", "the 'torchair' logger with TorchAir's EVENT level and warning_once; TNG_LOG_LEVEL (0-4) sets its level"
    ),
    "torchair.inference.set_dim_gears(t, {dim: gears})": Outcome(
        "cpu", "the dims are compiled as symbols over the gears' range: one compile serves every gear (TorchAir: one graph per gear)"
    ),
    "torchair.inference.cache_compile(...)": Outcome("not_built", "the compile cache (#35)"),
    "torchair.inference.readable_cache(...)": Outcome("not_built", "the compile cache (#35)"),
    "torchair.ops.npu_print(*args, summarize_size=3)": Outcome(
        "cpu", "prints from inside a compiled graph, in order, no graph break (an air::print op run in eager between subgraphs)"
    ),
    "torchair.ops.npu_fused_infer_attention_score(...)": Outcome(
        "cpu",
        "floating-point subset (BSH, BSND, BNSD; GQA; bool mask; scale) on torchair's fused attention, in graphs and in "
        "eager; quantized, paged, per-length, sparse modes and the LSE output are NotBuiltError",
    ),
    "torchair.ops.record(), torchair.ops.wait(tensors)": Outcome("cpu", "one stream: TorchAir's checks, nothing to order"),
    "torchair.ops.npu_create_tagged_event, npu_tagged_event_record/wait, npu_record_tagged_stream": Outcome(
        "not_built", "NPU events"
    ),
    "torchair.scope.npu_stream_switch(tag, priority), torchair.scope.npu_wait_tensor(t, dep)": Outcome(
        "cpu", "one stream runs the graph in program order: every wait is already met, nothing runs concurrently"
    ),
    "torchair.scope.super_kernel(scope, options)": Outcome("cpu", "a compiled graph is already one native call, no per-op launch"),
    "torchair.scope.op_never_timeout(enable)": Outcome("cpu", "CPU kernels have no execution timeout"),
    "torchair.scope.limit_core_num(aicore, vectorcore)": Outcome(
        "cpu",
        "met when the cap is at least torchair's thread count; a smaller cap needs per-op thread caps: NotBuiltError at "
        "compile time",
    ),
    "torchair.scope.profiler_trace(index, mode)": Outcome("not_built", "NPU profiler timestamps"),
    "torch.compile(..., mode='max-autotune')": Outcome(
        "built",
        "every step that more than one kernel can run (conv algorithms, GEMM packings, row kernels) is timed on this "
        "CPU at compile time and the fastest kept; choices cached in TORCHAIR_CACHE_DIR/autotune-v1.tsv by CPU and shapes",
    ),
    "torch.compile(..., mode='reduce-overhead')": Outcome(
        "cpu", "accepted: a compiled subgraph already runs as one C call with inputs bound by pointer"
    ),
}

_KIND = {"built": "built", "cpu": "CPU equivalent", "not_built": "NotBuiltError"}


def markdown() -> str:
    """docs/torchair-api.md: every TorchAir name and what it does in torchair."""
    from torchair.config import CompilerConfig as _Config

    defaults = {path[1:]: leaf.raw for path, leaf in _Config()._groups.leaves("")}
    lines = [
        "# TorchAir's API in torchair",
        "",
        "Generated by `python tools/gen_torchair_api.py` from `python/torchair/configs/outcomes.py` and",
        "`python/torchair/facade.py`; do not edit by hand. Scripts written for TorchAir run unchanged",
        "(with `cpu` for `npu`); each name has one of three outcomes:",
        "",
        "- **built**: it does on the CPU what it does on the NPU, through a torchair feature;",
        "- **CPU equivalent**: a documented CPU meaning, real and tested;",
        "- **NotBuiltError**: refused with the reason when a backend is made from a config that sets it",
        "  (config options) or when it is called (functions). A config option at its default is",
        "  always accepted.",
        "",
        "Values are validated when they are set, as TorchAir validates them (same exception types,",
        "same first line of the message).",
        "",
        "## The config tree (`config = torchair.CompilerConfig()`)",
        "",
        "| option | default | outcome | in torchair |",
        "|---|---|---|---|",
    ]
    for path, out in TREE.items():
        shown = path.replace("._path", ".path")
        lines.append(f"| `config.{shown}` | `{defaults.get(path)!r}` | {_KIND[out.kind]} | {out.what} |")
    lines += ["", "## Functions and modules", "", "| name | outcome | in torchair |", "|---|---|---|"]
    for name, out in API.items():
        lines.append(f"| `{name}` | {_KIND[out.kind]} | {out.what} |")
    counts = {k: sum(1 for o in list(TREE.values()) + list(API.values()) if o.kind == k) for k in _KIND}
    lines += ["", "Totals: " + ", ".join(f"{_KIND[k]} {n}" for k, n in counts.items()) + "."]
    return "\n".join(lines) + "\n"
