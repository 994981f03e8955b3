"""Interleaved (round-robin) timing of several callables, and latency statistics.

Modes are timed run by run in turn (eager, inductor, ..., eager, inductor, ...)
so that a slow spell on a shared machine hits every mode alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Stats:
    n: int
    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float


def percentile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of an already sorted list."""
    if not sorted_xs:
        return float("nan")
    pos = (len(sorted_xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summarize(samples_s: list[float]) -> Stats:
    xs = sorted(s * 1e3 for s in samples_s)
    return Stats(
        n=len(xs),
        median_ms=percentile(xs, 50),
        p10_ms=percentile(xs, 10),
        p90_ms=percentile(xs, 90),
        min_ms=xs[0] if xs else float("nan"),
    )


@dataclass
class Budget:
    """How many rounds to run: at least ``min_rounds``; then stop at ``max_rounds`` or after ``seconds``."""

    min_rounds: int
    max_rounds: int
    seconds: float
    warmup: int = 1
    # calls per turn, of which only the last is timed: 1 is run by run; 2
    # times each mode right after a call of its own, not right after another
    # mode's (see round_robin)
    repeat: int = 1


@dataclass
class RoundRobinResult:
    samples: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    last_outputs: dict[str, object] = field(default_factory=dict)


def round_robin(fns: dict[str, Callable[[], object]], budget: Budget) -> RoundRobinResult:
    """Time each callable once per round, in turn. A callable that raises leaves the rotation.

    With budget.repeat > 1 each turn calls the mode that many times and times
    the last call only. Run by run, every call follows another mode's, and
    on this machine the first call after a switch ran 0.06-0.6 ms slower, in
    both directions (eager after torchair and torchair after eager, ResNet-50
    conv shapes): a cost of alternating that neither mode has when it runs on
    its own."""
    res = RoundRobinResult(samples={k: [] for k in fns})
    live = dict(fns)

    def call(name: str) -> float | None:
        try:
            t0 = time.perf_counter()
            out = live[name]()
            dt = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 - a failing mode is a result, not a crash
            res.errors[name] = f"during timed runs: {type(e).__name__}: {e}"
            del live[name]
            return None
        res.last_outputs[name] = out
        return dt

    for _ in range(budget.warmup):
        for name in list(live):
            call(name)
    start = time.perf_counter()
    rounds = 0
    while live and rounds < budget.max_rounds:
        if rounds >= budget.min_rounds and time.perf_counter() - start >= budget.seconds:
            break
        for name in list(live):
            for _ in range(budget.repeat - 1):
                if name in live:
                    call(name)
            dt = call(name) if name in live else None
            if dt is not None:
                res.samples[name].append(dt)
        rounds += 1
    return res
