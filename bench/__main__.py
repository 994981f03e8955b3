"""``python -m bench``: benchmark torchair against eager, Inductor and OpenVINO. See bench/README.md.

Exit status: 0 all good; 1 a mode that ran gave a wrong answer; 2 the harness could not
measure (a workload failed to build, or eager failed); 3 with --strict, a mode failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import machine
from .modes import MODES
from .report import oneline
from .timing import Budget
from .workloads import DEFAULT_SELECTION, QUICK_SELECTION, select


def _default_threads() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick", action="store_true", help="seconds-long smoke run: tiny GEMM, one conv, ResNet-50 b1; eager+torchair"
    )
    p.add_argument(
        "--workloads",
        type=_csv,
        help="comma list of names, groups (models, extra, kernels, gemms, convs, all) or globs",
    )
    p.add_argument(
        "--modes", type=_csv, help=f"comma list from {','.join(MODES)} (eager is always run: it is the reference)"
    )
    p.add_argument("--iters", type=int, help="timed runs per mode (fixed); default: adaptive per workload")
    p.add_argument(
        "--threads", type=int, default=_default_threads(), help="torch.set_num_threads (default: CPUs available)"
    )
    p.add_argument("--out", help="results name: bench/results/NAME.{json,md,png} (default: quick, or run-DATE)")
    p.add_argument(
        "--memory", action="store_true", help="also measure peak RSS of each model per mode in a fresh subprocess"
    )
    p.add_argument(
        "--warm-cache",
        action="store_true",
        help="keep Inductor's and torchair's autotune caches (default: fresh ones, so first-call times are cold compiles)",
    )
    p.add_argument(
        "--max-minutes",
        type=float,
        default=15.0,
        help="past 80%% of this, remaining workloads run their minimum rounds only (0: no limit)",
    )
    p.add_argument("--strict", action="store_true", help="also exit non-zero if any mode failed to compile or run")
    p.add_argument(
        "--pairs",
        action="store_true",
        help="modes take turns two calls at a time and only the second is timed (default: run by run)",
    )
    p.add_argument(
        "--same-process",
        action="store_true",
        help="all modes in this one process (default: each compiled mode in a child process of its own,"
        " interleaved there with eager)",
    )
    a = p.parse_args(argv)
    if a.modes:
        bad = [m for m in a.modes if m not in MODES]
        if bad:
            p.error(f"unknown mode(s) {bad}; known: {', '.join(MODES)}")
    if a.iters is not None and a.iters < 1:
        p.error("--iters must be >= 1")
    if a.threads < 1:
        p.error("--threads must be >= 1")
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    cache_tmp = None
    if not args.warm_cache:
        cache_tmp = tempfile.TemporaryDirectory(prefix="torchair-bench-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_tmp.name
        os.environ["TORCHAIR_CACHE_DIR"] = cache_tmp.name  # max-autotune's choices: tuned cold

    import torch

    from . import report
    from .memory import measure_memory
    from .peak import measure_peak
    from .isolate import run_workload_isolated
    from .runner import run_workload

    torch.set_num_threads(args.threads)
    torch._dynamo.config.recompile_limit = max(64, torch._dynamo.config.recompile_limit)
    workloads = select(args.workloads or list(QUICK_SELECTION if args.quick else DEFAULT_SELECTION))
    name = args.out or ("quick" if args.quick else "run-" + datetime.datetime.now().strftime("%Y%m%d-%H%M"))
    load_start = machine.load_average()

    peak = None
    if any(w.kind == "kernel" for w in workloads):
        peak = measure_peak(args.threads, seconds=0.15 if args.quick else 0.6)
        _log(
            f"fp32 FMA peak ({peak.isa}): {peak.gflops_1thread} GFLOP/s x1, {peak.gflops_nthreads} x{args.threads}"
            + (f" [{peak.error}]" if peak.error else "")
        )

    all_modes: list[str] = []
    results_w: list[dict[str, Any]] = []
    for w in workloads:
        if args.modes:
            modes = ["eager"] + [m for m in args.modes if m != "eager"]
        elif args.quick:
            modes = ["eager", "torchair"]
        else:
            modes = list(w.default_modes)
        all_modes += [m for m in modes if m not in all_modes]
        if args.iters is not None:
            budget = Budget(args.iters, args.iters, 0.0, warmup=0 if args.quick else 1)
        elif args.quick:
            budget = Budget(2, 2, 0.0, warmup=0)
        else:
            budget = w.budget
        over_time = args.max_minutes > 0 and time.perf_counter() - started > 0.8 * 60 * args.max_minutes
        if over_time and args.iters is None:
            budget = Budget(min(budget.min_rounds, 3), min(budget.min_rounds, 3), 0.0, warmup=budget.warmup)
        t0 = time.perf_counter()
        if args.pairs:
            budget = dataclasses.replace(budget, repeat=2)
        if args.same_process:
            r = run_workload(w, modes, budget, peak, args.threads, same_process=True)
        else:
            r = run_workload_isolated(w, modes, budget, peak, args.threads)
        if over_time and args.iters is None:
            r["notes"].append(f"time limit (--max-minutes {args.max_minutes:g}) nearly used: minimum rounds only")
        if args.memory and w.kind == "model" and not r.get("error"):
            for mode in modes:
                if mode in r["modes"]:
                    r["modes"][mode]["memory"] = measure_memory(
                        w.name,
                        mode,
                        iters=1 if args.quick else 3,
                        threads=args.threads,
                        fresh_cache=not args.warm_cache,
                    )
        r["wall_s"] = time.perf_counter() - t0
        results_w.append(r)
        _log_workload(r)

    results: dict[str, Any] = {
        "name": name,
        "command": "python -m bench " + " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:])),
        "date": machine.now_iso(),
        "git": machine.git_info(),
        "machine": machine.cpu_info(),
        "threads": args.threads,
        "versions": machine.versions(),
        "inductor_cache": "warm (user's cache)" if args.warm_cache else "cold (fresh temp dir per run)",
        "quick": args.quick,
        "turns": "pairs (two calls per turn, the second timed)" if args.pairs else "run by run",
        "isolation": "one process for all modes"
        if args.same_process
        else "a process per compiled mode, interleaved there with eager",
        "memory": args.memory,
        "modes": all_modes,
        "peak": peak.to_json() if peak else None,
        "load_start": load_start,
        "load_end": machine.load_average(),
        "workloads": results_w,
        "notes": [],
    }
    results["wall_s"] = time.perf_counter() - started
    paths = report.write(results, refresh_latest=not args.quick)
    print(report.markdown(results, None))
    print(
        "wrote " + ", ".join(str(p.relative_to(Path.cwd())) if p.is_relative_to(Path.cwd()) else str(p) for p in paths)
    )
    if cache_tmp is not None:
        cache_tmp.cleanup()
    return _exit_status(results_w, args.strict)


def _exit_status(results_w: list[dict[str, Any]], strict: bool) -> int:
    statuses = [e.get("status") for w in results_w for e in w["modes"].values()]
    if "wrong" in statuses:
        return 1
    if any(w.get("error") for w in results_w):
        return 2
    if strict and "error" in statuses:
        return 3
    return 0


def _log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def _log_workload(r: dict[str, Any]) -> None:
    if r.get("error"):
        _log(f"{r['name']}: {oneline(r['error'])}")
        return
    for mode, e in r["modes"].items():
        if e["status"] == "error":
            _log(f"{r['name']:<28} {mode:<18} ERROR {oneline(e.get('error') or '', 200)}")
            continue
        extra = f" {e['gflops']:.1f} GFLOP/s" if e.get("gflops") else ""
        _log(
            f"{r['name']:<28} {mode:<18} median {e.get('median_ms', float('nan')):9.3f} ms  "
            f"x{e.get('speedup', float('nan')):.2f}  first {e.get('first_call_s', float('nan')):.2f} s{extra}  "
            f"{_accuracy_word(e)}"
        )


def _accuracy_word(e: dict[str, Any]) -> str:
    if e.get("accuracy_judged") is False:
        return "lower precision, not judged: " + e.get("accuracy", "")[:160]
    return "ok" if e.get("accuracy_ok") else "WRONG: " + e.get("accuracy", "")[:200]


if __name__ == "__main__":
    sys.exit(main())
