"""One training step (forward, a loss, backward) of a zoo model in train mode,
eager against torchair, interleaved step by step in one process; then
torchair's time per kernel over its steps. Not part of the benchmark's
workloads (the issue asks for inference), but the number a team that trains
would look at first:

    python -m bench.train_step [model] [batch] [steps]
    python -m bench.train_step --all [--out NAME]

(default resnet50 4 5). ``--all`` runs the set below (ResNet-50, ViT-Tiny,
a small LLaMA, GPT-2 and BERT-base) and, with ``--out``, writes
``bench/results/NAME.md`` with the machine and every model's profile.
Batch norm runs in training mode, so freezing is off and the weights are
graph inputs: the convs take the kernels for non-constant weights, and
training-mode batch norm, attention's backward and other ops without a
torchair kernel run in eager between compiled subgraphs (see the report's
fallback lines). GPT-2 and BERT-base keep their dropout (train mode), so
their steps draw random masks in both modes.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"

# (model, batch, steps) for --all
ALL = (("resnet50", 4, 5), ("vit_tiny", 8, 8), ("llama_small", 2, 10), ("gpt2", 2, 5), ("bert_base", 2, 4))


def measure(model: str, batch: int, steps: int) -> tuple[str, float, float]:
    """(torchair's profile table, eager ms, torchair ms) a step: medians over
    steps, eager and torchair alternated step by step."""
    from bench.workloads import import_zoo
    from torchair.backend import _backend
    from torchair.config import config_from
    from torchair.report import format_profile, profile_rows

    torch._dynamo.reset()
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
    return format_profile(profile_rows(recorder)), statistics.median(te) * 1e3, statistics.median(tt) * 1e3


def summary(model: str, batch: int, steps: int, e: float, c: float) -> str:
    return f"{model} batch {batch}, {steps} steps: eager {e:.1f} ms, torchair {c:.1f} ms a step ({e / c:.2f}x eager)"


def run_all(out: str | None) -> None:
    from bench.machine import cpu_info, load_average, now_iso, versions

    head = (f"# Training steps, eager against torchair\n\n"
            f"`python -m bench.train_step --all --out {out}`: {now_iso()}, {cpu_info().get('model')}, "
            f"{torch.get_num_threads()} threads, torch {versions().get('torch')}, load average before: "
            f"{load_average()}. One step: forward in train mode, loss = mean(out^2), backward; medians, "
            f"eager and torchair alternated step by step.\n")
    lines, details = ["| model | batch | eager ms | torchair ms | speedup |", "|---|---:|---:|---:|---:|"], []
    for model, batch, steps in ALL:
        table, e, c = measure(model, batch, steps)
        print(table)
        print(summary(model, batch, steps, e, c), flush=True)
        lines.append(f"| {model} | {batch} | {e:.1f} | {c:.1f} | {e / c:.2f}x |")
        details.append(f"## {model}, batch {batch}: torchair's kernels, ms a step\n\n```\n{table}\n```\n")
    if out:
        RESULTS.mkdir(exist_ok=True)
        text = head + "\n" + "\n".join(lines) + "\n\n" + "\n".join(details)
        (RESULTS / f"{out}.md").write_text(text)
        print(f"wrote {RESULTS / (out + '.md')}")


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] == "--all":
        run_all(argv[argv.index("--out") + 1] if "--out" in argv[:-1] else None)
        return
    model = argv[0] if len(argv) > 0 else "resnet50"
    batch = int(argv[1]) if len(argv) > 1 else 4
    steps = int(argv[2]) if len(argv) > 2 else 5
    table, e, c = measure(model, batch, steps)
    print(table)
    print(summary(model, batch, steps, e, c))


if __name__ == "__main__":
    main()
