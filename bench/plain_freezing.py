"""A plain user script for Inductor with freezing, to check the harness against.

``python -m bench.plain_freezing [MODEL] [BATCH] [ROUNDS]`` does what Inductor's docs tell a
user to do, in a fresh process and nothing else: build the model, set
``torch._inductor.config.freezing = True``, ``torch.compile(model)``, run under
``torch.no_grad()``, then time eager and the compiled model in turn. It prints the medians,
the ratio, and Inductor's freezing counters. The harness's ``inductor_freezing`` ratio for the
same workload should agree with it within the run-to-run noise.
"""

from __future__ import annotations

import statistics
import sys
import time


def main(argv: list[str]) -> int:
    model_name = argv[0] if argv else "resnet50"
    batch = int(argv[1]) if len(argv) > 1 else 1
    rounds = int(argv[2]) if len(argv) > 2 else 30
    import torch
    import torch._inductor.config as inductor_config

    from .modes import freezing_evidence
    from .workloads import import_zoo

    torch.set_num_threads(len(__import__("os").sched_getaffinity(0)))
    with torch.no_grad():
        model, inputs = import_zoo().build(model_name, batch=batch)
        inductor_config.freezing = True
        compiled = torch.compile(model)
        compiled(*inputs)
        model(*inputs)
        eager_ms, comp_ms = [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            model(*inputs)
            eager_ms.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            compiled(*inputs)
            comp_ms.append((time.perf_counter() - t0) * 1e3)
    e, c = statistics.median(eager_ms), statistics.median(comp_ms)
    print(f"{model_name} b{batch}: eager {e:.2f} ms, inductor+freezing {c:.2f} ms, {e / c:.2f}x; "
          f"frozen: {freezing_evidence()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
