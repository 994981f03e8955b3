"""The execution modes being compared, and how each one is compiled: as its users build it.

``eager``              the module itself
``inductor``           ``torch.compile(m)`` (Inductor, default options)
``inductor_freezing``  ``torch._inductor.config.freezing = True`` set before
                       ``torch.compile(m)``, called under ``torch.no_grad()``: what Inductor's
                       docs tell users to do. The setting must hold when dynamo *traces*, not
                       only when Inductor compiles: dynamo itself asks
                       ``torch._dynamo.utils.is_parameter_freezing()`` and, only if it is true,
                       installs the module's parameters as graph attributes that Inductor's
                       ``freeze()`` can fold and prepack. Patched around ``compile_fx`` alone
                       (this harness until 2026-12-07), or passed as
                       ``options={"freezing": True}``, the parameters reach Inductor as graph
                       inputs and nothing is frozen (docs/benchmarks.md). Each run checks
                       Inductor's counters for folded or prepacked weights
                       (``freezing_evidence``).
``torchair``           ``torch.compile(m, backend="torchair")``
``torchair_autotune``  ``torch.compile(m, backend="torchair", mode="max-autotune")``: kernels
                       timed at compile time (not in the default set; ``--modes`` names it).
                       Its choices are cached in ``TORCHAIR_CACHE_DIR``, which the bench points
                       at a fresh directory unless ``--warm-cache``, so the first call is a cold
                       tuning.
``openvino``           ``torch.compile(m, backend="openvino", options={"aot_autograd": True})``
                       after ``import openvino.torch``: OpenVINO's default precision, which is
                       bf16 inside on CPUs with AMX or AVX512-BF16 (the run records the
                       precision OpenVINO reports). Its default path fails with torch 2.13
                       (see _openvino); the run checks that OpenVINO itself ran the graph
                       (_OpenVinoWatch), not its silent fallbacks to Inductor or PyTorch.
``openvino_f32``       the same with ``"config": {"INFERENCE_PRECISION_HINT": "f32"}``

By default every compiled mode runs in a process of its own (bench/isolate.py); the global
freezing switch is then set in that process only. With ``--same-process`` all modes share
one process, and ``inductor_freezing`` sets the switch around its first call (where dynamo
traces and Inductor compiles) with a backend object of its own, so that it does not reuse
the unfrozen code of ``inductor`` or leave the switch on for later workloads.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

MODES: tuple[str, ...] = (
    "eager",
    "inductor",
    "inductor_freezing",
    "torchair",
    "torchair_autotune",
    "openvino",
    "openvino_f32",
)

# Modes whose arithmetic is not fp32 by design: their accuracy is measured and reported,
# but not judged by the fp32 rule (a bf16 result fails it by construction).
REDUCED_PRECISION_MODES: frozenset[str] = frozenset({"openvino"})


@dataclass
class Compiled:
    fn: Callable[..., Any]
    notes: list[str] = field(default_factory=list)
    # Entered around the first call, where dynamo traces and the backend compiles.
    first_call_ctx: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
    # Called after the first call: more notes (what the peer says it did), or an error
    # string when the mode demonstrably did not do what its name says.
    check: Callable[[], tuple[list[str], str | None]] | None = None


@contextlib.contextmanager
def _freezing_on() -> Iterator[None]:
    import torch._inductor.config as inductor_config

    with inductor_config.patch(freezing=True):
        yield


def _inductor_freezing_same_process_backend(gm: Any, example_inputs: Any) -> Any:
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


# Inductor counters that only move when freeze() folded constants or prepacked weights.
_FREEZING_COUNTERS = ("binary_folding", "weight_pack", "constant_fold", "freezing")


def freezing_evidence() -> dict[str, int]:
    """Inductor's counters that show frozen weights (folded or prepacked), nonzero ones only."""
    from torch._dynamo.utils import counters

    return {
        k: int(v) for k, v in counters["inductor"].items() if v and any(tag in k for tag in _FREEZING_COUNTERS)
    }


def _check_frozen() -> tuple[list[str], str | None]:
    ev = freezing_evidence()
    if not ev:
        return [], "inductor_freezing did not freeze: no folded or prepacked weight in Inductor's counters"
    return ["frozen: " + ", ".join(f"{k}={v}" for k, v in sorted(ev.items()))], None


def _inductor_freezing(model: Any, same_process: bool) -> Compiled:
    import torch

    torch._dynamo.utils.counters["inductor"].clear()
    if same_process:
        return Compiled(
            torch.compile(model, backend=_inductor_freezing_same_process_backend),
            ["same process: torch._inductor.config.freezing=True around the first call (trace and compile)"],
            first_call_ctx=_freezing_on,
            check=_check_frozen,
        )
    import torch._inductor.config as inductor_config

    inductor_config.freezing = True
    return Compiled(
        torch.compile(model),
        ["torch._inductor.config.freezing = True, then torch.compile(model), under no_grad"],
        check=_check_frozen,
    )


def _torchair(model: Any) -> Compiled:
    import torch

    try:
        return Compiled(torch.compile(model, backend="torchair"), ["backend found by name (entry point)"])
    except Exception as by_name:  # noqa: BLE001
        # Not installed as a package (no entry point yet): importing torchair may register it.
        try:
            importlib.import_module("torchair")
            fn = torch.compile(model, backend="torchair")
        except Exception:  # noqa: BLE001
            raise by_name from None
        return Compiled(fn, ["backend registered only after an explicit `import torchair`"])


class _OpenVinoWatch:
    """Counts what OpenVINO's torch.compile backend really ran. It has two silent ways out:
    a graph it fails to convert is handed to Inductor (``compile_fx``), and a partition
    that fails to run falls back to PyTorch for good. A run that took either is an error
    of the mode, not an OpenVINO figure."""

    def __init__(self) -> None:
        from openvino.frontend.pytorch.torchdynamo import backend, execute

        self.ran = self.failed = self.to_inductor = 0
        run, to_inductor = execute.openvino_execute, backend.compile_fx

        def counted_run(*a: Any, **k: Any) -> Any:
            try:
                out = run(*a, **k)
            except Exception:
                self.failed += 1
                raise
            self.ran += 1
            return out

        def counted_inductor(*a: Any, **k: Any) -> Any:
            self.to_inductor += 1
            return to_inductor(*a, **k)

        execute.openvino_execute = counted_run
        backend.compile_fx = counted_inductor
        self._execute = execute

    def check(self) -> tuple[list[str], str | None]:
        parts = getattr(self._execute, "max_openvino_partitions", None)
        notes = [f"OpenVINO ran {self.ran} partition calls in the first call ({parts} partitions compiled)"]
        if self.to_inductor:
            return notes, "OpenVINO failed to convert the graph and handed it to Inductor (compile_fx)"
        if self.failed:
            return notes, "an OpenVINO partition failed to run and fell back to PyTorch"
        if not self.ran:
            return notes, "OpenVINO ran no partition: the whole graph stayed in PyTorch"
        return notes, None


def _openvino(model: Any, f32: bool) -> Compiled:
    import torch

    try:
        import openvino
        import openvino.torch  # noqa: F401  registers the "openvino" backend
    except ImportError as e:
        raise RuntimeError(f"openvino is not installed (pip install openvino): {e}") from e
    hint = openvino.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")
    default_hint = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
    # "aot_autograd": its default path re-traces the graph with make_fx, which finds dynamo's
    # fake mode through the tracing context and makes size symbols that no input owns: with
    # torch 2.13 dynamo then fails building guards ("sources must not be empty for symbol
    # s24") on every zoo model but the smallest. Through aot_autograd it compiles.
    options: dict[str, Any] = {"device": "CPU", "aot_autograd": True}
    notes = [f"openvino {openvino.__version__}, options {{'aot_autograd': True}} (see bench/modes.py)"]
    if f32:
        options["config"] = {"INFERENCE_PRECISION_HINT": "f32"}
        notes.append(f"INFERENCE_PRECISION_HINT f32 (its default on this CPU: {default_hint})")
    else:
        notes.append(f"default precision on this CPU: {default_hint}")
    watch = _OpenVinoWatch()
    return Compiled(torch.compile(model, backend="openvino", options=options), notes, check=watch.check)


def compile_mode(mode: str, model: Any, same_process: bool = False) -> Compiled:
    """Wrap ``model`` for ``mode``. Compilation itself is lazy and happens in the first call."""
    import torch

    if mode == "eager":
        return Compiled(model)
    if mode == "inductor":
        return Compiled(torch.compile(model))
    if mode == "inductor_freezing":
        return _inductor_freezing(model, same_process)
    if mode == "torchair":
        return _torchair(model)
    if mode == "torchair_autotune":
        import torchair  # noqa: F401  (registers the backend when not installed as a package)

        return Compiled(torch.compile(model, backend="torchair", mode="max-autotune"))
    if mode in ("openvino", "openvino_f32"):
        return _openvino(model, f32=mode == "openvino_f32")
    raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
