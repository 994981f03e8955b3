"""The torch.compile backend. ``torch.compile(model, backend="torchair")``
finds ``torchair_backend`` through the ``torch_dynamo_backends`` entry point;
``get_npu_backend(compiler_config=...)`` builds one with a given config."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule

from torchair.compiler import CompileReport, compile_graph
from torchair.config import CompilerConfig, config_from
from torchair.configs.outcomes import Extras
from torchair.decompositions import torchair_decompositions

# Reports of the compiles made by backends that were given a recorder.
_Recorder = list[CompileReport]


def _frozen_candidates(gm: GraphModule, example_inputs: list[Any]) -> dict[int, weakref.ref]:
    """The dynamo graph's inputs that are parameters or buffers of the
    module: {input position: a weak reference to the real tensor} (the
    compiler closure that keeps these lives as long as the compiled code,
    and must not keep a deleted module's weights alive). With inline_inbuilt_nn_modules
    (always on in torch 2.13) dynamo passes them as inputs; its placeholder's
    grapharg names where each came from. Tensors the caller passes in are not
    candidates, even if they are Parameters."""
    from torch._dynamo.source import ParamBufferSource, is_from_unspecialized_param_buffer_source

    def from_module(source: Any) -> bool:
        while source is not None:
            if isinstance(source, ParamBufferSource):
                return True
            source = getattr(source, "base", None)
        return False

    out: dict[int, torch.Tensor] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return out
    for i, (node, value) in enumerate(zip(placeholders, example_inputs)):
        if type(value) not in (torch.Tensor, torch.nn.Parameter) or value.device.type != "cpu" or value.is_inference():
            # subclasses (fakes, wrappers), other devices and inference
            # tensors (no version counter to guard) stay inputs
            continue
        grapharg = node.meta.get("grapharg")
        source = getattr(grapharg, "source", None)
        if source is not None:
            if is_from_unspecialized_param_buffer_source(source) or from_module(source):
                out[i] = weakref.ref(value)
        elif isinstance(value, torch.nn.Parameter):
            out[i] = weakref.ref(value)
    return out


def _running_stats(gm: GraphModule, positions: Any) -> set[int]:
    """Which of these inputs are batch-norm running statistics (buffers named
    running_mean / running_var). A training-mode batch norm updates them in
    place without bumping their version counter, so the freezing guard
    compares their contents too."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = set()
    for i in positions:
        source = getattr(placeholders[i].meta.get("grapharg"), "source", None)
        name = getattr(source, "index", None)
        if not isinstance(name, str):
            name = getattr(source, "member", None)
        if name in ("running_mean", "running_var"):
            out.add(i)
    return out


def _map_to_aot(
    gm: GraphModule, example_inputs: list[Any], candidates: dict[int, weakref.ref], n_dynamo: int
) -> tuple[dict[int, torch.Tensor], str]:
    """Maps the dynamo-level candidates onto the aot (ATen) graph's
    placeholders. aot_autograd keeps dynamo's flat inputs in order for an
    inference graph unless it adds (effect tokens) or merges (duplicate or
    aliased inputs) some; then the mapping is not provably exact and nothing is
    frozen. Inputs the graph mutates, or that an output aliases, stay inputs.
    Every candidate's shape, stride and dtype must match the aot example."""
    from torch._guards import TracingContext

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != n_dynamo or len(example_inputs) != n_dynamo:
        return {}, f"off (aot_autograd changed the graph inputs: {n_dynamo} -> {len(placeholders)})"
    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    if meta is None:
        return {}, "off (no aot_autograd metadata to map parameters to graph inputs)"
    if len(meta.input_info) != n_dynamo:
        return {}, "off (aot_autograd metadata does not match the graph inputs)"
    static = set(meta.static_input_indices or ())
    keep = {o.base_idx for o in meta.output_info if getattr(o, "base_idx", None) is not None}
    out: dict[int, torch.Tensor] = {}
    for i, ref in candidates.items():
        real = ref()
        if real is None:  # gone before aot_autograd compiled (not seen: dynamo holds its inputs meanwhile)
            continue
        info = meta.input_info[i]
        if info.mutates_data or info.mutates_metadata or i in keep:
            continue
        fake = example_inputs[i]
        if isinstance(fake, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in (*fake.shape, *fake.stride())):
            continue  # a parameter with symbolic sizes stays an input
        if (
            i not in static
            or not isinstance(fake, torch.Tensor)
            or (tuple(fake.shape), tuple(fake.stride()), fake.dtype) != (tuple(real.shape), tuple(real.stride()), real.dtype)
        ):
            return {}, f"off (graph input {i} does not match the parameter it should be)"
        out[i] = real
    if not out:
        return {}, "off (no parameter or buffer among the graph inputs)"
    return out, "on"


@dataclass
class _Direct:
    """Left by the inference compiler for _backend: the compiled graph's
    forward (and its report), when aot_autograd's runtime wrapper around it
    has nothing to do but mark outputs' dynamic dims (marks: output index,
    dims)."""

    forward: Callable[..., Any] | None = None
    report: CompileReport | None = None
    marks: list[tuple[int, set[int]]] = field(default_factory=list)


def _direct_marks(gm: GraphModule, example_inputs: list[Any], n_dynamo: int) -> list[tuple[int, set[int]]] | None:
    """Whether aot_autograd's runtime wrapper around this inference graph
    would only pass the arguments through and the outputs back: dynamo's
    inputs are the graph's placeholders one for one (no effect tokens,
    merged duplicates or synthetic bases), no input is mutated outside the
    graph, no output aliases an input or another output, autocast is off
    and grad mode stays as it is. Then the dims the wrapper marks dynamic on
    each output (symbolic shapes: dynamo reads the marks when it traces
    what follows a graph break), [] for none; else (or with metadata this
    torch does not have) None, and the wrapper stays."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    try:
        simple = (
            meta is not None
            and len(placeholders) == n_dynamo == len(example_inputs) == len(meta.input_info)
            and meta.num_mutated_inp_runtime_indices == 0
            and meta.num_outputs_aliased == 0
            and meta.num_intermediate_bases == 0
            and meta.grad_enabled_mutation is None
            and not meta.tokens
            and not meta.is_rng_op_functionalized
            and not torch._C._is_any_autocast_enabled()
        )
        if not simple:
            return None
        marks = [(i, set(o.dynamic_dims)) for i, o in enumerate(meta.output_info) if o.dynamic_dims]
        if marks:
            from torch._functorch._aot_autograd.runtime_wrappers import mark_dynamo_propagated_dynamic_indices  # noqa: F401
        return marks
    except (AttributeError, ImportError):
        return None


def _aten_compiler(
    config: CompilerConfig,
    kind: str,
    recorder: _Recorder | None,
    candidates: dict[int, weakref.ref] | None = None,
    n_dynamo: int = 0,
    stats: set[int] = frozenset(),
    direct: _Direct | None = None,
) -> Callable[..., Any]:
    def compile_aten(gm: GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        from functorch.compile import make_boxed_func

        extras = getattr(config, "extras", None)
        eager = extras is not None and _tree_passes(gm, example_inputs, config, extras)
        dump = None
        if extras is not None and extras.debug.active:
            from torchair.debug.dumps import GraphDump

            dump = GraphDump(gm, kind, extras.debug)
        from torchair.precompile import current_capture

        capture = current_capture()  # torch's aot_compile is compiling (torchair.precompile)
        if capture is not None and kind != "inference":
            capture.refuse(f"a {kind} graph: only inference graphs are precompiled (aot_compile under torch.no_grad())")
        if eager or (dump is not None and dump.skip_compile):
            if capture is not None:
                capture.refuse("the graph runs in eager (debug.run_eagerly or a graph dump's skip_compile)")
            if dump is not None:
                dump.finish(None)
            return make_boxed_func(gm.forward)
        if config.freezing is False:
            freeze = ({}, "off (freezing=False)", set())
        elif kind != "inference":
            freeze = ({}, "off (the graph needs gradients: training)", set())
        else:
            frozen, note = _map_to_aot(gm, example_inputs, candidates or {}, n_dynamo)
            freeze = (frozen, note, {i for i in stats if i in frozen})
        if capture is not None and kind == "inference":
            capture.record(gm, *freeze)  # before the compile rewrites gm
        gm.meta["torchair_freeze"] = freeze
        try:
            from torchair.trace import span

            with span(f"torchair compile ({kind} graph)", nodes=len(gm.graph.nodes)):
                compiled, report = compile_graph(gm, config, kind)
        finally:
            if dump is not None:
                dump.options.current = None
        _log_compile(report)
        if dump is not None:
            dump.finish(report)
        if recorder is not None:
            recorder.append(report)
        marks = _direct_marks(gm, example_inputs, n_dynamo) if direct is not None else None
        if direct is not None and marks is not None:
            direct.forward, direct.report, direct.marks = compiled.forward, report, marks
        if capture is not None and kind == "inference" and marks != []:
            capture.refuse("aot_autograd's runtime wrapper has work to do for this graph (an input mutated, an output "
                           "aliasing an input or another output, symbolic output sizes, autocast or effect tokens)")
        return make_boxed_func(compiled.forward)

    return compile_aten


def _log_compile(report: CompileReport) -> None:
    """What a compile did, on torchair.compile: a line at info, each fallback at debug."""
    from torchair.log import get_logger

    log = get_logger("compile")
    if log.isEnabledFor(20):
        log.info(
            "%s graph: %d ops, %d compiled in %d subgraph(s), %d left to eager",
            report.graph, report.total_ops, report.compiled_ops, sum(s.compiled for s in report.subgraphs),
            len(report.fallbacks),
        )
        for node, op, reason in report.fallbacks:
            log.debug("eager %s (%s): %s", node, op, reason)


def _tree_passes(gm: GraphModule, example_inputs: list[Any], config: CompilerConfig, extras: Extras) -> bool:
    """What TorchAir's config tree asks of an ATen graph before torchair lowers it: the user's
    pre-pass, the registered replacements, the user's post-pass (in TorchAir's order).
    Returns True when the graph is to run in eager (``debug.run_eagerly``)."""
    if extras.pre_pass is not None:
        extras.pre_pass(gm, example_inputs, extras.user_config or config)
        gm.recompile()
    if extras.pattern_fusion:
        from torchair.patterns import apply_replacements

        apply_replacements(gm)
    if extras.post_pass is not None:
        extras.post_pass(gm, example_inputs, extras.user_config or config)
        gm.recompile()
    if extras.run_eagerly:
        import logging

        logging.getLogger("torchair").warning(
            "config.debug.run_eagerly is set: the captured graph runs in eager, not compiled"
        )
    return extras.run_eagerly


def _is_symbolic(gm: GraphModule, example_inputs: list[Any]) -> bool:
    """Whether the graph has symbolic sizes. Dynamo hands the backend real
    example inputs; the symbolic sizes are on its placeholders' fake values."""
    values = [n.meta.get("example_value", n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder"]
    for v in values + list(example_inputs):
        if isinstance(v, torch.SymInt):
            return True
        if isinstance(v, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in v.shape):
            return True
    return False


def _backend(
    gm: GraphModule,
    example_inputs: list[Any],
    config: CompilerConfig,
    recorder: _Recorder | None = None,
    custom_decompositions: dict[Any, Callable[..., Any]] | None = None,
    owner: Any = None,
) -> Callable[..., Any]:
    """owner: an object living as long as the compile (dynamic_axes tells its frames apart
    by it); None: the config passed. The result is checked on every call against torch's
    fp32 precision knobs it was compiled for (torchair.precision)."""
    from torchair import precision
    from torchair.precompile import precompiling

    if precompiling():
        return _precompile(gm, example_inputs, config, recorder, custom_decompositions, owner)
    setting = precision.current()
    compiled = _backend_at(gm, example_inputs, config, setting, recorder, custom_decompositions, owner)
    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs):
        # training: the weights are graph inputs, whose products the knobs do not change
        return compiled
    symbolic = config.dynamic_axes is not None or _is_symbolic(gm, example_inputs)

    from torch._guards import TracingContext, tracing

    # dynamo's tracing context (its fake mode, where aot_autograd leaves the metadata that
    # freezing maps parameters with), entered again to compile for another precision
    ctx = TracingContext.try_get()

    def recompile(args: list[Any]) -> Callable[..., Any]:
        with tracing(ctx):
            return _backend_at(gm, args, config, precision.current(), recorder, custom_decompositions, owner)

    return precision.guard_precision(compiled, setting, symbolic, recompile)


def _precompile(
    gm: GraphModule,
    example_inputs: list[Any],
    config: CompilerConfig,
    recorder: _Recorder | None,
    custom_decompositions: dict[Any, Callable[..., Any]] | None,
    owner: Any,
) -> Callable[..., Any]:
    """The backend under torch's aot_compile: the compile as usual, recorded
    (torchair.precompile), returned as a PrecompiledGraph that torch can save. What
    the saved form could not rebuild exactly is refused with the reason."""
    from torchair import precision
    from torchair.inference import gear_check
    from torchair.precompile import Capture, PrecompiledGraph, PrecompileError, capturing

    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs):
        raise PrecompileError("torchair precompiles inference graphs only: call aot_compile under torch.no_grad()")
    if config.dynamic_axes is not None or _is_symbolic(gm, example_inputs):
        raise PrecompileError("torchair does not precompile graphs with symbolic shapes (dynamic=False, no dynamic_axes)")
    if any(True for _ in gm.parameters()) or any(True for _ in gm.buffers()):
        raise PrecompileError("the captured graph holds parameters of its own (not passed as inputs)")
    if not all(type(x) in (torch.Tensor, torch.nn.Parameter, int, float, bool) for x in example_inputs):
        raise PrecompileError("an input is a tensor subclass or not a tensor or number")
    marker = object()
    if gear_check(example_inputs, marker) is not marker:  # type: ignore[arg-type]
        raise PrecompileError("inputs with dim gears (set_dim_gears) are not precompiled")
    setting = precision.current()
    capture = Capture()
    with capturing(capture):
        compiled = _backend_at(gm, example_inputs, config, setting, recorder, custom_decompositions, owner)
    if capture.problem is None and capture.graph is None:
        capture.refuse("no inference graph reached torchair's compiler")
    if capture.problem is not None:
        raise PrecompileError(f"cannot precompile this graph with torchair: {capture.problem}")
    return PrecompiledGraph.from_capture(capture, config, setting, compiled)


def _backend_at(
    gm: GraphModule,
    example_inputs: list[Any],
    config: CompilerConfig,
    setting: tuple[str, str],
    recorder: _Recorder | None = None,
    custom_decompositions: dict[Any, Callable[..., Any]] | None = None,
    owner: Any = None,
) -> Callable[..., Any]:
    given = config
    config, extras = config.effective()
    object.__setattr__(config, "fp32_precision", setting)
    if config.dynamic_axes is not None:
        from torchair import dynamic_axes

        # may have dynamo trace again
        plan = dynamic_axes.apply(gm, example_inputs, dynamic_axes.parse(config.dynamic_axes), owner or given)
        with dynamic_axes.size_oblivious(plan):
            compiled = _compile(gm, example_inputs, config, extras, recorder, custom_decompositions)
        return dynamic_axes.guard(compiled, plan)
    return _compile(gm, example_inputs, config, extras, recorder, custom_decompositions)


def _compile(
    gm: GraphModule,
    example_inputs: list[Any],
    config: CompilerConfig,
    extras: Extras,
    recorder: _Recorder | None,
    custom_decompositions: dict[Any, Callable[..., Any]] | None,
) -> Callable[..., Any]:
    from torch._dynamo.backends.common import aot_autograd

    if not config.enable_dynamic_shape and _is_symbolic(gm, example_inputs):
        from torchair.errors import NotBuiltError

        raise NotBuiltError(
            2, "unsupported", "the graph has symbolic shapes but enable_dynamic_shape=False; compile with dynamic=False"
        )
    from torchair import _C
    from torchair.scope import strip_scopes

    threads = _C.get_num_threads()
    strip_scopes(gm, min(threads, extras.num_threads) if extras.num_threads > 0 else threads)
    candidates = _frozen_candidates(gm, example_inputs) if config.freezing is not False else {}
    direct = _Direct()
    wrapped = aot_autograd(
        fw_compiler=_aten_compiler(config, "forward", recorder),
        bw_compiler=_aten_compiler(config, "backward", recorder),
        inference_compiler=_aten_compiler(
            config, "inference", recorder, candidates, len(example_inputs), _running_stats(gm, candidates), direct
        ),
        decompositions={**torchair_decompositions(), **(custom_decompositions or {})},
        keep_inference_input_mutations=extras.keep_inference_input_mutations,
    )(gm, example_inputs)
    # aot_autograd would prepend gm's own parameters; a tensor subclass
    # (a wrapper, a fake) is flattened or handled by its wrapper
    has_state = any(True for _ in gm.parameters()) or any(True for _ in gm.buffers())
    plain = all(type(x) in (torch.Tensor, torch.nn.Parameter, int, float, bool, torch.SymInt) for x in example_inputs)
    from torchair.inference import gear_check

    if direct.forward is None or has_state or not plain:
        return gear_check(example_inputs, wrapped)
    assert direct.report is not None
    direct.report.direct_call = True
    return gear_check(example_inputs, _direct_call(direct.forward, wrapped, direct.marks))


def _direct_call(
    forward: Callable[..., Any], wrapped: Callable[..., Any], marks: list[tuple[int, set[int]]]
) -> Callable[..., Any]:
    """The compiled inference graph called without aot_autograd's runtime
    wrapper, which _direct_marks found would only pass values through (and
    mark outputs' dynamic dims, done here the way the wrapper does): its
    Python layers cost 7-33 us a call once the graph's own work has evicted
    them from the caches (interleaved with eager: a 512^3 matmul 0.935 ->
    0.902 ms, 128 x 768 @ 768 x 768 0.564 -> 0.532, 256^3 0.154 -> 0.147,
    ResNet-50's fc at batch 1 0.240 -> 0.226). Grad mode is off during the
    call, as the wrapper has it. The first call still goes through the
    wrapper, whose first run checks custom ops' aliasing. (Dynamo wraps what
    a backend returns in torch._dynamo.disable itself.)"""
    first = [True]
    if marks:
        from torch._functorch._aot_autograd.runtime_wrappers import mark_dynamo_propagated_dynamic_indices as mark

    def call(*args: Any) -> Any:
        if first[0]:
            first[0] = False
            return wrapped(*args)
        if torch.is_grad_enabled():
            with torch.no_grad():
                outs = forward(*args)
        else:
            outs = forward(*args)
        for i, dims in marks:
            mark(outs[i], dims)
        return outs

    return call


def torchair_backend(gm: GraphModule, example_inputs: list[Any], *, options: dict[str, Any] | None = None, mode: str | None = None) -> Callable[..., Any]:
    """The backend behind ``backend="torchair"``; honours ``options`` and ``mode``."""
    return _backend(gm, example_inputs, config_from(options, mode), owner=_compile_call())


def _compile_call() -> Any:
    """torch's wrapper of the torch.compile call that is compiling (it passes options to its
    backend per compile, so the config is new each time; the wrapper lives as long as the
    compiled callable), or None when called otherwise."""
    import sys

    frame = sys._getframe(2)
    for _ in range(3):
        if frame is None:
            return None
        wrapper = frame.f_locals.get("self")
        if type(wrapper).__name__ == "_TorchCompileWrapper":
            return wrapper
        frame = frame.f_back
    return None


def get_npu_backend(
    *,
    compiler_config: CompilerConfig | None = None,
    custom_decompositions: dict[Any, Callable[..., Any]] | None = None,
    config: CompilerConfig | None = None,
) -> Callable[..., Any]:
    """A backend with the given config (the article's ``config=`` and TorchAir's
    ``compiler_config=`` are both accepted); ``custom_decompositions`` ({ATen op: function})
    join torchair's decomposition table, as in TorchAir. The config is checked now
    (NotBuiltError for what is not built) and read again at each compile."""
    cfg = compiler_config or config or CompilerConfig()
    if not isinstance(cfg, CompilerConfig):
        from torchair.errors import OptionError

        raise OptionError(1, "invalid argument", f"expected a torchair.CompilerConfig, got {type(cfg).__name__}")
    if custom_decompositions is not None and not isinstance(custom_decompositions, dict):
        from torchair.errors import OptionError

        raise OptionError(
            1, "invalid argument", f"custom_decompositions must be a dict, got {type(custom_decompositions).__name__}"
        )
    cfg.effective()
    return functools.partial(_backend, config=cfg, custom_decompositions=custom_decompositions)


get_backend = get_npu_backend
