"""Where a kernel-suite workload's time goes under torch.compile: the
compiled call against the compiled model alone. For each workload, in one
process and interleaved run by run (as the main harness times): eager, the
``torch.compile(backend="torchair")`` call, and ``model.run`` of the one
libair model that call runs (no dynamo, no aot_autograd wrapper, no guard).
Each mode is called twice per turn and the second call timed (timing.Budget
repeat=2): run by run, the call right after another mode's ran 0.06-0.6 ms
slower, and the mode right after eager would carry that. The difference
between the last two is then the per-call path; the ratio of eager to the
last is the kernel's own standing against PyTorch's.

    python -m bench.call_split [--workloads 'conv_*'] [--rounds 300] [--out NAME]

This is a diagnostic beside ``python -m bench``: the issue's targets are
measured through torch.compile, as a user calls it.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import torch

from bench.machine import cpu_info, load_average, now_iso, versions
from bench.timing import Budget, round_robin, summarize
from bench.workloads import select

RESULTS = Path(__file__).resolve().parent / "results"


def _one_model(reports: list[Any]) -> Any:
    """The single compiled libair model of a one-subgraph inference graph,
    or None if the graph split (then model.run alone is not the call)."""
    subs = [s for r in reports for s in r.subgraphs]
    if len(reports) != 1 or len(subs) != 1 or not subs[0].compiled or reports[0].fallbacks:
        return None
    return subs[0].model


def measure(name: str, build: Any, rounds: int) -> dict[str, Any]:
    from torchair.backend import _backend
    from torchair.config import CompilerConfig

    torch._dynamo.reset()
    model, inputs = build()
    reports: list[Any] = []
    compiled = torch.compile(model, backend=lambda gm, ex: _backend(gm, ex, CompilerConfig(), reports))
    with torch.no_grad():
        want = model(*inputs)
        got = compiled(*inputs)
        air = _one_model(reports)
        if air is None:
            return {"name": name, "error": "not one compiled subgraph: model.run alone is not the call"}
        # the model's inputs are the call's tensors minus the frozen ones
        args = tuple(x for x in inputs if isinstance(x, torch.Tensor))
        alone = air.run(args)[0]
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(alone, got, rtol=0, atol=0)
        fns = {"eager": lambda: model(*inputs), "compiled": lambda: compiled(*inputs), "run": lambda: air.run(args)}
        rr = round_robin(fns, Budget(min_rounds=rounds, max_rounds=rounds, seconds=0.0, warmup=3, repeat=2))
    if rr.errors:
        return {"name": name, "error": "; ".join(f"{k}: {v}" for k, v in rr.errors.items())}
    out: dict[str, Any] = {"name": name}
    for k, samples in rr.samples.items():
        st = summarize(samples)
        out[k] = {"median_ms": st.median_ms, "min_ms": st.min_ms, "p10_ms": st.p10_ms}
    return out


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 and not math.isnan(a) else "-"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| workload | eager ms | torch.compile call ms | model.run ms | call path ms | eager / call | eager / run |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['error']} | | | | | |")
            continue
        e, c, m = r["eager"]["median_ms"], r["compiled"]["median_ms"], r["run"]["median_ms"]
        lines.append(f"| {r['name']} | {e:.3f} | {c:.3f} | {m:.3f} | {c - m:.3f} | {_ratio(e, c)} | {_ratio(e, m)} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="kernels", help="names, globs or groups, comma-separated (default: kernels)")
    p.add_argument("--rounds", type=int, default=300, help="interleaved rounds per workload (default 300)")
    p.add_argument("--out", default=None, help="write bench/results/NAME.json and .md")
    args = p.parse_args()
    rows = []
    for w in select(args.workloads.split(",")):
        if w.kind != "kernel":
            continue
        rows.append(measure(w.name, w.build, args.rounds))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    md = (f"# torch.compile call against model.run\n\n{now_iso()}, {cpu_info().get('model')}, "
          f"{torch.get_num_threads()} threads, load average before: {load_average()}; "
          f"medians of {args.rounds} interleaved rounds, two calls per turn, the second timed.\n\n" + table(rows) + "\n")
    print(md)
    if args.out:
        RESULTS.mkdir(exist_ok=True)
        meta = {"when": now_iso(), "cpu": cpu_info(), "versions": versions(), "threads": torch.get_num_threads(),
                "rounds": args.rounds}
        (RESULTS / f"{args.out}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        (RESULTS / f"{args.out}.md").write_text(md)


if __name__ == "__main__":
    main()
