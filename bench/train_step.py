"""One training step (forward, a loss, backward) of a zoo model in train mode,
eager against torchair, interleaved step by step in one process; then
torchair's time per kernel over its steps. Not part of the benchmark's
workloads (the issue asks for inference), but the number a team that trains
would look at first:

    python -m bench.train_step [model] [batch] [steps]

(default resnet50 4 5). Batch norm runs in training mode, so freezing is off
and the weights are graph inputs: the convs take the kernels for non-constant
weights, and training-mode batch norm and the backward convs run in eager
between compiled subgraphs (see the report's fallback lines).
"""

from __future__ import annotations

import statistics
import sys
import time

import torch


def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else "resnet50"
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    from bench.workloads import import_zoo
    from torchair.backend import _backend
    from torchair.config import config_from
    from torchair.report import format_profile, profile_rows

    zoo = import_zoo()
    m, args = zoo.build(model, batch=batch)
    m.train()
    config = config_from(None, None)
    recorder: list = []
    compiled = torch.compile(m, backend=lambda gm, ex: _backend(gm, ex, config, recorder))

    def step(fn) -> float:
        t = time.perf_counter()
        out = fn(*args)
        out = out if isinstance(out, torch.Tensor) else out[0]
        out.float().square().mean().backward()
        return time.perf_counter() - t

    for _ in range(2):  # compile, and first-touch both sides' memory
        step(compiled)
        step(m)
    for g in recorder:
        for sub in g.subgraphs:
            if sub.compiled and sub.model is not None:
                sub.model.profile_reset()
    te, tt = [], []
    for _ in range(steps):
        te.append(step(m))
        tt.append(step(compiled))
    print(format_profile(profile_rows(recorder)))
    e, c = statistics.median(te) * 1e3, statistics.median(tt) * 1e3
    print(f"{model} batch {batch}, {steps} steps: eager {e:.1f} ms, torchair {c:.1f} ms a step ({e / c:.2f}x eager)")


if __name__ == "__main__":
    main()
