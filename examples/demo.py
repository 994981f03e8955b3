"""The main demo: ResNet-50 and BERT-base, eager vs torchair, side by side.

For each model: the compiled output's max error against eager and whether it
passes SPEC.md section 4, and median latencies from interleaved runs.

    python examples/demo.py [--iters N] [--models resnet50,bert_base]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

from torchair.zoo import build


def max_error(a, b) -> float:
    if isinstance(a, torch.Tensor):
        return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
    return max(max_error(x, y) for x, y in zip(a, b))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--models", default="resnet50,bert_base")
    args = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, for bench.accuracy
    try:
        from bench.accuracy import check_accuracy
    except ImportError:  # run from outside the repository
        check_accuracy = None
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name in args.models.split(","):
        model, inputs = build(name)
        with torch.no_grad():
            ref = model(*inputs)
            t0 = time.perf_counter()
            compiled = torch.compile(model, backend="torchair")
            out = compiled(*inputs)
            first = time.perf_counter() - t0
            eager_t, air_t = [], []
            for _ in range(args.iters):  # interleaved, so load hits both alike
                t = time.perf_counter()
                model(*inputs)
                eager_t.append(time.perf_counter() - t)
                t = time.perf_counter()
                compiled(*inputs)
                air_t.append(time.perf_counter() - t)
            verdict = ""
            if check_accuracy is not None:
                ref64 = copy.deepcopy(model).double()(*(x.double() if x.is_floating_point() else x for x in inputs))
                ok, detail = check_accuracy(out, ref, ref64)
                verdict = "PASS" if ok else f"FAIL ({detail})"
        e, a = statistics.median(eager_t) * 1e3, statistics.median(air_t) * 1e3
        print(
            f"{name:10s} max |torchair - eager| = {max_error(out, ref):.2e} {verdict}\n"
            f"{'':10s} eager {e:8.2f} ms   torchair {a:8.2f} ms   speedup {e / a:5.2f}x   "
            f"(first call incl. compile {first:.2f} s)"
        )


if __name__ == "__main__":
    main()
