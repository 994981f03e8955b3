"""Dynamic shapes benchmark (#33): a stream of mixed input shapes through each mode, counting
the graphs compiled over the stream and their compile time, and timing every shape against
eager in the same process.

    python -m bench.dynamic --out dynamic-DATE-CPU          # BERT-base, the article's NLP model, ResNet-50
    python -m bench.dynamic --quick --workloads nlp --modes eager,torchair_dynamic

Workloads (random weights, CPU, nothing downloaded):
- ``bert``: transformers' BertModel from BertConfig() (``--quick``: 2 layers), input_ids and a
  padded attention_mask, (batch, seq) from 1x8 to 8x512;
- ``nlp``: the article's MyNLPModel (embedding 32000x512, 6 TransformerEncoderLayers of 512,
  8 heads, 2048), batch 1 and 3 x seq 32..512;
- ``resnet50``: torchair.zoo's ResNet-50 at 224x224, batch 1..32.
Each stream is the workload's distinct shapes in order with repeats of earlier shapes put
in at seeded places (``stream()``); the first shape has batch 1, which dynamo's
``dynamic=True`` specializes.

Modes, each (per workload) in a process of its own (``--one MODE --workload W`` is the child),
all under ``torch.no_grad()``:
``eager``; ``inductor_dynamic`` ``torch.compile(m, dynamic=True)``; ``torchair_static``
``torch.compile(m, backend="torchair", dynamic=False)``, a graph per shape;
``torchair_dynamic`` ``options={"dynamic_axes": ...}`` with the workload's axes declared;
``torchair_dynamic_true`` ``torch.compile(m, backend="torchair", dynamic=True)``.
Dynamo's ``recompile_limit`` is raised from 8 to 64 in every process, so that
``torchair_static`` can keep a graph per shape (with the default, the 9th BERT shape would
run in eager).

The child runs the stream once: every step's first-call time, the graphs dynamo holds after
it, the output checked against eager's at that shape (max abs diff, ``allclose`` with
rtol=atol=1e-3). Then for each distinct shape eager and the mode take turns
(bench/timing.round_robin) for at least ``--reps`` rounds (3), then until ``--seconds`` (1)
per shape have gone;
ratio = the mode's median / eager's median in that process (eager = 1, < 1 is faster). Its
last timed output is checked again. Compile seconds: dynamo's own measure (the sum of
``_compile.compile_inner``, tracing and backend), and the first-call overhead (each shape's
first call in the stream minus its median, summed over first occurrences). Graphs:
``counters['stats']['unique_graphs']`` (dynamo graphs handed to the backend), and for
torchair the ATen graphs it compiled (``torchair.backend.compile_graph`` calls, counted by a
wrapper in the child) with the ops its partitioner left to eager.

The parent also gives, per shape, torchair_dynamic's median over torchair_static's (the
"cliff", target <= 1.10). From the two modes' processes this is a quotient across processes,
given raw and as the quotient of their ratios to the eager of their own process; eager's own
time moves by 10-20% from one process to another here, so a further process
(``--one torchair_ab``, ``--no-ab`` skips it) compiles both on two copies of the model over
the same stream and times them taking turns call by call: the cliff within one process.

Before each process the parent waits (``--wait-quiet``) for the CPUs to be idle, and it
measures how much CPU time other processes took while the child ran (/proc/stat); a mode
whose process had more than 10% beside it runs again (``--retry-busy``) and the quieter run
is kept. The report flags any that stayed busy.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.dynamic_report import ATOL, BUSY_PCT, RECOMPILE_LIMIT, RTOL, markdown, shape_key, summarize_workload, text_of

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"

MODES = ("eager", "inductor_dynamic", "torchair_static", "torchair_dynamic", "torchair_dynamic_true")

# distinct shapes in stream order, and how many repeats of earlier shapes join them
WORKLOADS: dict[str, dict[str, Any]] = {
    "bert": {
        "title": "BERT-base (transformers BertModel, BertConfig() defaults), input_ids + padded attention_mask, (batch, seq)",
        "shapes": [(1, 8), (1, 32), (3, 64), (1, 128), (2, 200), (8, 128), (4, 384), (1, 512), (8, 512)],
        "repeats": 4,
        "quick_title": "BERT (BertConfig(num_hidden_layers=2)), input_ids + padded attention_mask, (batch, seq)",
        "quick_shapes": [(1, 8), (3, 64), (1, 128), (2, 40)],
        "quick_repeats": 1,
        "axes": {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
    },
    "nlp": {
        "title": "the article's MyNLPModel: Embedding(32000, 512) + 6 x TransformerEncoderLayer(512, 8, 2048), (batch, seq)",
        "shapes": [(1, 32), (1, 64), (3, 32), (1, 128), (3, 64), (3, 128), (1, 512), (3, 512)],
        "repeats": 3,
        "quick_shapes": [(1, 32), (3, 64), (1, 128)],
        "quick_repeats": 1,
        "axes": {"input_ids": {0: "batch_size", 1: "seq_len"}},
    },
    "resnet50": {
        "title": "ResNet-50 (torchair.zoo), 224x224, (batch,)",
        "shapes": [(1,), (2,), (4,), (8,), (3,), (16,), (32,)],
        "repeats": 0,
        "tail": [(1,)],  # repeats put at the end of the stream
        "quick_shapes": [(1,), (2,), (3,)],
        "quick_repeats": 0,
        "axes": None,  # {<forward's first parameter>: {0: "batch"}}, found with inspect
    },
}




def stream(shapes: list[tuple[int, ...]], repeats: int, seed: int = 0, tail: list[tuple[int, ...]] = ()) -> list[tuple[int, ...]]:
    """The distinct shapes in order, with ``repeats`` repeats of earlier shapes, each put in
    at a seeded place after its shape's first occurrence (never two of one shape in a row),
    then ``tail``."""
    rng = random.Random(seed)
    out = list(shapes)
    for _ in range(repeats):
        for _attempt in range(100):
            i = rng.randrange(1, len(shapes))  # a repeat of one of shapes[:i], after shapes[i - 1]
            shape = rng.choice(shapes[:i])
            at = out.index(shapes[i - 1]) + 1 + rng.randrange(0, 2)
            at = min(at, len(out))
            if out[at - 1] != shape and (at == len(out) or out[at] != shape):
                out.insert(at, shape)
                break
    return out + [tuple(t) for t in tail]


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------------- child


def _build(workload: str, quick: bool) -> tuple[Any, Any, dict[str, Any] | None]:
    """(model, make_inputs(shape) -> (args, kwargs), dynamic_axes)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    if workload == "bert":
        from transformers import BertConfig, BertModel

        cfg = BertConfig(num_hidden_layers=2) if quick else BertConfig()
        model = BertModel(cfg).eval()

        def inputs(shape: tuple[int, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
            b, s = shape
            g = torch.Generator().manual_seed(1000 * b + s)
            ids = torch.randint(0, cfg.vocab_size, (b, s), generator=g)
            mask = torch.ones(b, s, dtype=torch.long)
            for r in range(1, b):  # row r padded at the end: a batch of different lengths
                mask[r, max(1, s - r * max(1, s // (2 * b))):] = 0
            return (), {"input_ids": ids, "attention_mask": mask}

        return model, inputs, WORKLOADS["bert"]["axes"]
    if workload == "nlp":

        class MyNLPModel(nn.Module):  # the article's model, as written there
            def __init__(self) -> None:
                super().__init__()
                self.embedding = nn.Embedding(32000, 512)
                layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
                self.transformer = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)

            def forward(self, input_ids: Any) -> Any:
                return self.transformer(self.embedding(input_ids))

        model = MyNLPModel().eval()

        def inputs(shape: tuple[int, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
            b, s = shape
            g = torch.Generator().manual_seed(1000 * b + s)
            return (torch.randint(0, 32000, (b, s), generator=g),), {}

        return model, inputs, WORKLOADS["nlp"]["axes"]
    if workload == "resnet50":
        import inspect

        import torchair.zoo

        model, _ = torchair.zoo.build("resnet50", batch=1)
        model.eval()
        first = next(iter(inspect.signature(model.forward).parameters))

        def inputs(shape: tuple[int, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
            g = torch.Generator().manual_seed(1000 + shape[0])
            return (torch.randn(shape[0], 3, 224, 224, generator=g),), {}

        return model, inputs, {first: {0: "batch"}}
    raise KeyError(workload)


def _compile(mode: str, model: Any, axes: dict[str, Any] | None) -> tuple[Any, str]:
    import torch

    if mode == "eager":
        return model, "the module itself"
    if mode == "inductor_dynamic":
        return torch.compile(model, dynamic=True), "torch.compile(model, dynamic=True)"
    if mode == "torchair_static":
        return torch.compile(model, backend="torchair", dynamic=False), 'torch.compile(model, backend="torchair", dynamic=False)'
    if mode == "torchair_dynamic":
        opts = {"dynamic_axes": axes}
        how = f'torch.compile(model, backend="torchair", options={opts!r})'
        return torch.compile(model, backend="torchair", options=opts), how
    if mode == "torchair_dynamic_true":
        return torch.compile(model, backend="torchair", dynamic=True), 'torch.compile(model, backend="torchair", dynamic=True)'
    raise KeyError(mode)


def _tensors(out: Any) -> list[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):  # HF ModelOutput too
        return [t for v in out.values() for t in _tensors(v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in _tensors(v)]
    return []


def compare(out: Any, ref: Any) -> tuple[float, bool]:
    """(max abs diff over every tensor, all allclose with rtol=atol=1e-3)."""
    import torch

    a, b = _tensors(out), _tensors(ref)
    if len(a) != len(b) or not a:
        return math.inf, False
    diff, ok = 0.0, True
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return math.inf, False
        x, y = x.detach().float(), y.detach().float()
        diff = max(diff, float((x - y).abs().max()) if x.numel() else 0.0)
        ok = ok and bool(torch.allclose(x, y, rtol=RTOL, atol=ATOL))
    return diff, ok


class _AirCounter:
    """Counts the ATen graphs torchair compiles (torchair.backend.compile_graph) and the ops
    its partitioner left to eager, by wrapping the function backend.py calls."""

    def __init__(self) -> None:
        self.graphs = 0
        self.fallback_ops: dict[str, int] = {}
        self.ok = False
        try:
            import torchair.backend as tb
        except ImportError:
            return
        inner = getattr(tb, "compile_graph", None)
        if inner is None:
            return

        def counted(*a: Any, **k: Any) -> Any:
            res = inner(*a, **k)
            self.graphs += 1
            report = res[1] if isinstance(res, tuple) and len(res) == 2 else None
            for f in getattr(report, "fallbacks", None) or ():
                op = str(f[0]) if isinstance(f, (tuple, list)) and f else str(f)
                self.fallback_ops[op] = self.fallback_ops.get(op, 0) + 1
            return res

        tb.compile_graph = counted
        self.ok = True


def run_one(mode: str, workload: str, quick: bool, reps: int, seconds: float, seed: int) -> dict[str, Any]:
    import torch
    import torch._dynamo

    from bench.timing import Budget, round_robin, summarize

    torch._dynamo.config.recompile_limit = RECOMPILE_LIMIT
    from torch._dynamo.utils import compilation_time_metrics, counters

    air = _AirCounter() if mode.startswith("torchair") else None
    spec = WORKLOADS[workload]
    shapes = [tuple(s) for s in spec["quick_shapes" if quick else "shapes"]]
    steps = stream(shapes, spec["quick_repeats" if quick else "repeats"], seed, spec.get("tail", ()))
    res: dict[str, Any] = {"mode": mode, "workload": workload, "threads": torch.get_num_threads(),
                           "stream": [], "shapes": {}, "errors": {}}
    t0 = time.perf_counter()
    model, make_inputs, axes = _build(workload, quick)
    res["build_s"] = round(time.perf_counter() - t0, 2)
    if mode == "torchair_dynamic":
        res["dynamic_axes"] = {k: {str(a): v for a, v in d.items()} for k, d in axes.items()}
    fn, how = _compile(mode, model, axes)
    res["how"] = how
    inputs = {s: make_inputs(s) for s in shapes}
    refs: dict[tuple[int, ...], Any] = {}
    checks: dict[tuple[int, ...], list[tuple[float, bool]]] = {s: [] for s in shapes}
    failed: set[tuple[int, ...]] = set()

    def graphs() -> int:
        return int(counters["stats"]["unique_graphs"])

    with torch.no_grad():
        for i, s in enumerate(steps):
            args, kwargs = inputs[s]
            first = s not in refs
            before = graphs()
            step: dict[str, Any] = {"shape": list(s), "first": first}
            try:
                t = time.perf_counter()
                out = fn(*args, **kwargs)
                step["first_call_s"] = round(time.perf_counter() - t, 4)
            except Exception as e:  # noqa: BLE001 - a failing shape is a result
                msg = f"{type(e).__name__}: {e}"
                step["error"] = msg[:2000]
                res["errors"].setdefault(shape_key(s), msg[:2000])
                failed.add(s)
                out = None
            if first:
                t = time.perf_counter()
                refs[s] = model(*args, **kwargs) if mode != "eager" else out
                step["eager_first_call_s"] = round(time.perf_counter() - t, 4) if mode != "eager" else step.get("first_call_s")
            if out is not None and mode != "eager":
                d, ok = compare(out, refs[s])
                checks[s].append((d, ok))
                step["max_abs_diff"], step["allclose"] = d, ok
            step["graphs_after"] = graphs()
            step["new_graphs"] = step["graphs_after"] - before
            if air is not None:
                step["air_graphs_after"] = air.graphs
            res["stream"].append(step)
            print(f"[{workload}/{mode}] step {i} {shape_key(s)}: {step.get('first_call_s')} s, graphs {step['graphs_after']}"
                  + (f", error {step['error'][:200]}" if "error" in step else ""), file=sys.stderr, flush=True)
        refs.clear()  # the timed outputs are checked against eager's of the same round

        budget = Budget(min_rounds=reps, max_rounds=max(reps, 50), seconds=seconds, warmup=0)
        for s in shapes:
            args, kwargs = inputs[s]
            if mode == "eager":
                fns = {"eager": lambda a=args, k=kwargs: model(*a, **k)}
            elif s in failed:
                continue
            else:
                fns = {"eager": lambda a=args, k=kwargs: model(*a, **k), "mode": lambda a=args, k=kwargs: fn(*a, **k)}
            before = graphs()
            rr = round_robin(fns, budget)
            e = summarize(rr.samples["eager"])
            row: dict[str, Any] = {"eager_ms": round(e.median_ms, 3), "eager_p10_ms": round(e.p10_ms, 3),
                                   "eager_p90_ms": round(e.p90_ms, 3), "rounds": e.n}
            if mode != "eager":
                if "mode" in rr.errors:
                    res["errors"].setdefault(shape_key(s), rr.errors["mode"])
                    row["error"] = rr.errors["mode"]
                else:
                    m = summarize(rr.samples["mode"])
                    row.update(ms=round(m.median_ms, 3), p10_ms=round(m.p10_ms, 3), p90_ms=round(m.p90_ms, 3),
                               ratio=round(m.median_ms / e.median_ms, 4))
                    d, ok = compare(rr.last_outputs["mode"], rr.last_outputs["eager"])
                    checks[s].append((d, ok))
                row["graphs_added_while_timing"] = graphs() - before
            else:
                row.update(ms=row["eager_ms"], ratio=1.0)
            if checks[s]:
                row["max_abs_diff"] = max(d for d, _ in checks[s])
                row["allclose"] = all(ok for _, ok in checks[s])
                row["checks"] = len(checks[s])
            res["shapes"][shape_key(s)] = row
            print(f"[{workload}/{mode}] {shape_key(s)}: {row}", file=sys.stderr, flush=True)

    # compile time: first-call overhead of each shape's first occurrence over its median
    overhead = 0.0
    for st in res["stream"]:
        row = res["shapes"].get(shape_key(st["shape"]), {})
        if st["first"] and "first_call_s" in st and "ms" in row:
            st["overhead_s"] = round(max(0.0, st["first_call_s"] - row["ms"] / 1e3), 4)
            overhead += st["overhead_s"]
        elif "first_call_s" in st and "ms" in row:
            st["overhead_s"] = round(st["first_call_s"] - row["ms"] / 1e3, 4)
    res["compile_s_first_call"] = round(overhead, 3) if mode != "eager" else 0.0
    res["compile_s_dynamo"] = round(sum(compilation_time_metrics.get("_compile.compile_inner", [])), 3)
    res["graphs"] = graphs()
    res["frames_ok"] = int(counters["frames"]["ok"])
    res["graph_breaks"] = {k: int(v) for k, v in counters["graph_break"].items()}
    res["recompile_steps"] = [shape_key(st["shape"]) + ("" if st["first"] else " (repeat)")
                              for i, st in enumerate(res["stream"]) if st["new_graphs"] and i > 0]
    if air is not None:
        res["air_graphs"] = air.graphs if air.ok else None
        res["air_fallback_ops"] = air.fallback_ops
    res["peak_rss_mib"] = round(_rss_mib(), 1)
    return res


def run_ab(workload: str, quick: bool, reps: int, seconds: float, seed: int) -> dict[str, Any]:
    """torchair_static and torchair_dynamic in one process, on two copies of the model, taking
    turns call by call at each shape after the stream has compiled them: the cliff without
    the drift between processes (the two modes' own processes give it only through eager)."""
    import copy

    import torch
    import torch._dynamo

    from bench.timing import Budget, round_robin, summarize

    torch._dynamo.config.recompile_limit = RECOMPILE_LIMIT
    spec = WORKLOADS[workload]
    shapes = [tuple(s) for s in spec["quick_shapes" if quick else "shapes"]]
    steps = stream(shapes, spec["quick_repeats" if quick else "repeats"], seed, spec.get("tail", ()))
    model, make_inputs, axes = _build(workload, quick)
    other = copy.deepcopy(model)
    fns = {"static": _compile("torchair_static", model, axes)[0], "dynamic": _compile("torchair_dynamic", other, axes)[0]}
    inputs = {s: make_inputs(s) for s in shapes}
    res: dict[str, Any] = {"mode": "torchair_ab", "workload": workload, "shapes": {}, "errors": {}}
    budget = Budget(min_rounds=reps, max_rounds=max(reps, 50), seconds=seconds, warmup=0)
    with torch.no_grad():
        for s in steps:  # compiles as the modes' own processes do
            args, kwargs = inputs[s]
            for name, fn in fns.items():
                try:
                    fn(*args, **kwargs)
                except Exception as e:  # noqa: BLE001
                    res["errors"].setdefault(f"{name} {shape_key(s)}", f"{type(e).__name__}: {e}"[:2000])
        for s in shapes:
            args, kwargs = inputs[s]
            rr = round_robin({k: (lambda f=f, a=args, k=kwargs: f(*a, **k)) for k, f in fns.items()}, budget)
            if rr.errors or not all(rr.samples.values()):
                res["errors"].setdefault(shape_key(s), "; ".join(f"{k}: {v}" for k, v in rr.errors.items()) or "no samples")
                continue
            st, dy = summarize(rr.samples["static"]), summarize(rr.samples["dynamic"])
            d, ok = compare(rr.last_outputs["dynamic"], rr.last_outputs["static"])
            res["shapes"][shape_key(s)] = {"static_ms": round(st.median_ms, 3), "dynamic_ms": round(dy.median_ms, 3),
                                           "ratio": round(dy.median_ms / st.median_ms, 4), "rounds": st.n,
                                           "max_abs_diff_dynamic_vs_static": d, "allclose": ok}
            print(f"[{workload}/ab] {shape_key(s)}: {res['shapes'][shape_key(s)]}", file=sys.stderr, flush=True)
    res["peak_rss_mib"] = round(_rss_mib(), 1)
    return res


# --------------------------------------------------------------------------------- parent


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v[:8]) - idle, sum(v[:8])


def _others_cpu(before: tuple[int, int] | None, after: tuple[int, int] | None, own_s: float) -> float | None:
    """Percent of the machine's CPU time that other processes than the child took while it ran."""
    if not before or not after or after[1] <= before[1]:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    busy_s, total_s = (after[0] - before[0]) / hz, (after[1] - before[1]) / hz
    return round(100 * max(0.0, busy_s - own_s) / total_s, 1)


def wait_quiet(max_wait_s: float, busy_pct: float = 10.0, window_s: float = 3.0) -> float:
    """Waits (up to max_wait_s) until the machine's CPUs were less than busy_pct busy over a
    window of window_s; returns the seconds waited."""
    t0 = time.perf_counter()
    while True:
        a = _cpu_jiffies()
        time.sleep(window_s)
        b = _cpu_jiffies()
        if a is None or b is None or b[1] <= a[1] or 100 * (b[0] - a[0]) / (b[1] - a[1]) < busy_pct:
            break
        if time.perf_counter() - t0 >= max_wait_s:
            break
    return round(time.perf_counter() - t0, 1)


def _child(mode: str, workload: str, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.dynamic", "--one", mode, "--workload", workload, "--reps", str(args.reps),
           "--seconds", str(args.seconds), "--seed", str(args.seed)] + (["--quick"] if args.quick else [])
    t = time.perf_counter()
    j0, ru0 = _cpu_jiffies(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired as e:
        return {"mode": mode, "workload": workload, "error": f"timed out after {args.timeout} s",
                "stderr_tail": text_of(e.stderr)[-3000:]}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        return {"mode": mode, "workload": workload, "error": (p.stderr or p.stdout)[-3000:]}
    r = json.loads(lines[-1][len("RESULT "):])
    r["process_s"] = round(time.perf_counter() - t, 1)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    r["others_cpu_pct"] = _others_cpu(j0, _cpu_jiffies(), own)
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.dynamic", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--quick", action="store_true", help="fewer shapes, 2-layer BERT, 1 round per shape")
    ap.add_argument("--reps", type=int, default=None, help="rounds per shape at least (default 3, --quick 1)")
    ap.add_argument("--seconds", type=float, default=None, help="time per shape after --reps rounds (default 1, --quick 0)")
    ap.add_argument("--seed", type=int, default=0, help="where the repeats go in each stream")
    ap.add_argument("--wait-quiet", type=float, default=None,
                    help="before each process, wait up to this many seconds for the CPUs to be idle (default 300, --quick 0)")
    ap.add_argument("--retry-busy", type=int, default=None,
                    help=f"run a mode's process again (up to N times) when other processes took more than {BUSY_PCT:g}%% "
                         "of the CPUs while it ran; the quietest run is kept (default 1, --quick 0)")
    ap.add_argument("--ab", action=argparse.BooleanOptionalAction, default=None,
                    help="also time torchair_static and torchair_dynamic taking turns in one process (default: on, --quick off)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds a child may take")
    ap.add_argument("--out", default=None, help="name for <results-dir>/<name>.{md,json}")
    ap.add_argument("--results-dir", default=str(RESULTS), help=argparse.SUPPRESS)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--workload", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    if args.seconds is None:
        args.seconds = 0.0 if args.quick else 1.0
    if args.wait_quiet is None:
        args.wait_quiet = 0.0 if args.quick else 300.0
    if args.ab is None:
        args.ab = not args.quick
    if args.retry_busy is None:
        args.retry_busy = 0 if args.quick else 1
    if args.one == "torchair_ab":
        print("RESULT " + json.dumps(run_ab(args.workload, args.quick, args.reps, args.seconds, args.seed)))
        return 0
    if args.one:
        print("RESULT " + json.dumps(run_one(args.one, args.workload, args.quick, args.reps, args.seconds, args.seed)))
        return 0
    workloads = [w for w in args.workloads.split(",") if w]
    modes = [m for m in args.modes.split(",") if m]
    bad = [w for w in workloads if w not in WORKLOADS] + [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown {bad}; workloads: {', '.join(WORKLOADS)}; modes: {', '.join(MODES)}")
    if "eager" not in modes:
        modes.insert(0, "eager")
    from bench.machine import cpu_info, git_info, load_average, now_iso, versions

    start, la0 = time.perf_counter(), load_average()
    results: dict[str, list[dict[str, Any]]] = {}
    ab: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="torchair-dynamic-") as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TORCHAIR_CACHE_DIR=cache)  # cold compiles
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        for w in workloads:
            results[w] = []
            for m in modes:
                tries = []
                for _ in range(1 + max(0, args.retry_busy)):
                    waited = wait_quiet(args.wait_quiet) if args.wait_quiet > 0 else 0.0
                    r = _child(m, w, args, env)
                    r["waited_for_quiet_s"] = waited
                    r["load_average_after"] = load_average()
                    tries.append(r)
                    if "error" in r or (r.get("others_cpu_pct") or 0.0) <= BUSY_PCT:
                        break
                # the run with the least other work beside it
                r = min(tries, key=lambda x: x.get("others_cpu_pct") or 0.0)
                if len(tries) > 1:
                    r["others_cpu_pct_of_tries"] = [x.get("others_cpu_pct") for x in tries]
                results[w].append(r)
                brief = {k: r.get(k) for k in ("workload", "mode", "graphs", "air_graphs", "compile_s_dynamo",
                                                "compile_s_first_call", "recompile_steps", "process_s", "error")}
                print(json.dumps(brief)[:2000], flush=True)
            if args.ab and "torchair_static" in modes and "torchair_dynamic" in modes:
                waited = wait_quiet(args.wait_quiet) if args.wait_quiet > 0 else 0.0
                r = _child("torchair_ab", w, args, env)
                r["waited_for_quiet_s"] = waited
                ab[w] = r
                brief = {k: r.get(k) for k in ("workload", "mode", "shapes", "error", "others_cpu_pct")}
                print(json.dumps(brief)[:2000], flush=True)
    summary = {w: summarize_workload(rs, ab.get(w)) for w, rs in results.items()}
    import torch

    meta = {"cpu": cpu_info(), "versions": versions(), "git": git_info(), "date": now_iso(),
            "threads": torch.get_num_threads(), "quick": args.quick, "reps": args.reps, "seconds": args.seconds,
            "ab": args.ab, "seed": args.seed, "wait_quiet_s": args.wait_quiet, "retry_busy": args.retry_busy,
            "recompile_limit": RECOMPILE_LIMIT, "rtol": RTOL, "atol": ATOL,
            "command": "python -m bench.dynamic " + " ".join(argv if argv is not None else sys.argv[1:]),
            "took_s": round(time.perf_counter() - start, 1), "load_average_start": la0, "load_average_end": load_average()}
    text = markdown(meta, results, summary, WORKLOADS, ab)
    print(text)
    if args.out:
        d = Path(args.results_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{args.out}.md").write_text(text)
        (d / f"{args.out}.json").write_text(json.dumps({"meta": meta, "summary": summary, "results": results, "ab": ab},
                                                         indent=1))
    bad_run = any("error" in r or r.get("errors") for rs in [*results.values(), list(ab.values())] for r in rs)
    wrong = any(s["wrong_shapes"] for sm in summary.values() for s in sm["modes"].values())
    return 1 if bad_run or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
