"""Per-call overhead: a 30-op elementwise chain on a 16-element tensor, where
the work is nothing and the call path is everything. Eager, Inductor and
torchair in one process, interleaved; medians and ratios.

    python -m bench.overhead [--iters N] [--out NAME]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from bench.machine import cpu_info, now_iso, versions


def chain(x: torch.Tensor) -> torch.Tensor:
    for i in range(10):  # 3 ops per round: 30 ops
        x = torch.sigmoid(x * 1.01 + 0.1 * i)
    return x


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--modes", default="eager,inductor,torchair")
    p.add_argument("--out", default="overhead")
    args = p.parse_args()
    x = torch.randn(16)
    fns = {"eager": chain}
    for mode in args.modes.split(","):
        if mode != "eager":
            fns[mode] = torch.compile(chain, backend=mode)
    ref = chain(x)
    with torch.no_grad():
        for name, fn in fns.items():
            torch.testing.assert_close(fn(x), ref)
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(args.iters):
            for name, fn in fns.items():
                t = time.perf_counter_ns()
                fn(x)
                times[name].append((time.perf_counter_ns() - t) / 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "workload": "30-op elementwise chain, 16 elements",
        "median_us": med,
        "speedup_vs_eager": {k: med["eager"] / v for k, v in med.items()},
        "iters": args.iters,
        "machine": cpu_info(), "versions": versions(),
        "date": now_iso(),
    }
    for k, v in med.items():
        print(f"{k:10s} {v:8.2f} us/call   {med['eager'] / v:5.2f}x eager")
    out = Path(__file__).parent / "results" / f"{args.out}.json"
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
