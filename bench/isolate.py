"""Each compiled mode in a process of its own, interleaved there with eager.

Runtimes distort each other when they share a process: their worker threads keep
spinning after a call, global switches (Inductor's freezing) stay set, allocators keep
their state. On a Sapphire Rapids machine torchair's ResNet-50 b1 read 1.15x instead
of 1.83x after Inductor and OpenVINO had run in the same process. So by default the
harness starts one child per (workload, compiled mode); the child times eager and that
mode in turn (bench/runner.py), and the mode's speedup is taken against the eager of its
own process. Eager's median from every child is kept, and its spread across processes
is reported.

Child usage: ``python -m bench.isolate JOB_JSON`` -> the runner's result as one JSON line.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from .peak import Peak
from .timing import Budget
from .workloads import Workload

REPO = Path(__file__).resolve().parent.parent
CHILD_TIMEOUT_S = 1800.0
_MARK = "BENCH-RESULT "


def _run_child(job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.isolate", json.dumps(job)]
    try:
        p = subprocess.run(
            cmd, check=False, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, env=os.environ.copy()
        )
    except subprocess.TimeoutExpired:
        return {"error": f"child process timed out after {timeout_s:.0f} s"}
    lines = [ln[len(_MARK) :] for ln in p.stdout.splitlines() if ln.startswith(_MARK)]
    if p.returncode != 0 or not lines:
        tail = " / ".join((p.stderr.strip().splitlines() or ["(no output)"])[-3:])
        return {"error": f"child process exit {p.returncode}: {tail[-1500:]}"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def _budget_json(b: Budget) -> dict[str, Any]:
    return {
        "min_rounds": b.min_rounds,
        "max_rounds": b.max_rounds,
        "seconds": b.seconds,
        "warmup": b.warmup,
        "repeat": b.repeat,
    }


def run_workload_isolated(
    w: Workload, modes: list[str], budget: Budget, peak: Peak | None, threads: int
) -> dict[str, Any]:
    """One child per compiled mode (one for eager alone if no other mode is asked for)."""
    compiled = [m for m in modes if m != "eager"]
    res: dict[str, Any] = {
        "name": w.name,
        "kind": w.kind,
        "desc": w.desc,
        "flops": w.flops,
        "shape": w.extra or None,
        "modes": {},
        "error": None,
        "notes": [],
        "isolation": "process per mode",
    }
    eager_runs: list[dict[str, Any]] = []
    for mode in compiled or ["eager"]:
        job = {
            "workload": w.name,
            "modes": ["eager"] if mode == "eager" else ["eager", mode],
            "budget": _budget_json(budget),
            "threads": threads,
        }
        child = _run_child(job, CHILD_TIMEOUT_S)
        if child.get("error") and not child.get("modes"):
            # The child could not measure at all: eager failed to build or run, or it died.
            if mode == "eager" or "build" in child["error"] or "eager run" in child["error"]:
                res["error"] = child["error"]
                return res
            res["modes"][mode] = {"status": "error", "error": child["error"], "notes": []}
            continue
        for note in child.get("notes", []):
            if note not in res["notes"]:
                res["notes"].append(note)
        e_eager = child["modes"].get("eager", {})
        if e_eager.get("median_ms"):
            eager_runs.append({**e_eager, "process_of": mode})
        if mode != "eager":
            entry = child["modes"].get(mode) or {"status": "error", "error": "child returned no entry", "notes": []}
            entry["eager_median_ms"] = e_eager.get("median_ms")
            res["modes"][mode] = entry
        res["iters_budget"] = child.get("iters_budget")
    if not eager_runs:
        res["error"] = "eager was not timed in any process"
        return res
    medians = [e["median_ms"] for e in eager_runs]
    eager = dict(eager_runs[0])
    eager.pop("process_of", None)
    eager.update(
        median_ms=statistics.median(medians),
        eager_processes=[{"with": e["process_of"], "median_ms": e["median_ms"]} for e in eager_runs],
        eager_spread=(max(medians) / min(medians) - 1.0) if len(medians) > 1 else 0.0,
        speedup=1.0,
    )
    res["modes"] = {"eager": eager, **res["modes"]}
    peak_gflops = peak.gflops(threads) if peak else None
    for entry in res["modes"].values():
        med = entry.get("median_ms")
        if med and w.flops:
            entry["gflops"] = w.flops / (med * 1e-3) / 1e9
            if peak_gflops:
                entry["frac_peak"] = entry["gflops"] / peak_gflops
    return res


def _child(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from .runner import run_workload
    from .workloads import select

    torch.set_num_threads(int(job["threads"]))
    torch._dynamo.config.recompile_limit = max(64, torch._dynamo.config.recompile_limit)
    (w,) = select([job["workload"]])
    b = job["budget"]
    budget = Budget(b["min_rounds"], b["max_rounds"], b["seconds"], warmup=b["warmup"], repeat=b["repeat"])
    return run_workload(w, job["modes"], budget, None, int(job["threads"]), same_process=False)


if __name__ == "__main__":
    out = _child(json.loads(sys.argv[1]))
    print(_MARK + json.dumps(out, default=str), flush=True)
