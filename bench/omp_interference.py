"""How much torch's OpenMP workers, spinning after an eager op, take from
torchair's own thread pool on this machine: one BERT-sized mm (128x768x768,
weight as a parameter) compiled with torchair, timed alone and interleaved
with eager, medians of 200 calls. Run it twice to compare wait policies:

    python -m bench.omp_interference
    OMP_WAIT_POLICY=passive python -m bench.omp_interference
"""

from __future__ import annotations

import statistics
import time

import torch


def median_ms(fn, n: int = 200) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    a = torch.randn(128, 768)
    w = torch.nn.Parameter(torch.randn(768, 768))

    def f(x: torch.Tensor) -> torch.Tensor:
        return x @ w

    c = torch.compile(f, backend="torchair")
    with torch.no_grad():
        c(a), f(a)
        print(f"torchair alone {median_ms(lambda: c(a)):.3f} ms")
        print(f"eager alone    {median_ms(lambda: f(a)):.3f} ms")
        te, tt = [], []
        for _ in range(200):
            t = time.perf_counter()
            f(a)
            te.append(time.perf_counter() - t)
            t = time.perf_counter()
            c(a)
            tt.append(time.perf_counter() - t)
        print(f"interleaved: eager {statistics.median(te) * 1e3:.3f} ms, torchair {statistics.median(tt) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
