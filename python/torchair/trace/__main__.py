"""``python -m torchair.trace [model] [--batch N] [--runs N] [-o path]``: profiles a zoo model
with torchair and writes its Chrome/Perfetto trace (see ``torchair.trace``)."""

from __future__ import annotations

import argparse

from torchair.trace import write_trace


def main(argv: list[str] | None = None) -> int:
    import torch

    from torchair import zoo
    from torchair.report import profile

    p = argparse.ArgumentParser(prog="python -m torchair.trace", description=__doc__)
    p.add_argument("model", nargs="?", default="resnet50", help=f"a zoo model: {', '.join(zoo.MODELS)}")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("-o", "--output", default=None, help="default: <model>.trace.json")
    a = p.parse_args(argv)
    model, inputs = zoo.build(a.model, batch=a.batch)
    with torch.no_grad():
        report = profile(model, *inputs, runs=a.runs)
    path = write_trace(report, a.output or f"{a.model}.trace.json")
    print(f"wrote {path}: open it in https://ui.perfetto.dev or chrome://tracing")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
