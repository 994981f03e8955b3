"""Training steps as a team that trains would time them (issue #34's targets): forward,
loss, backward and the optimizer's step, fp32 and under bf16 autocast, for eager,
Inductor and torchair.

    python -m bench.train_suite [--workloads resnet50,bert_base,...] [--precisions fp32,bf16]
                                [--modes torchair,inductor] [--steps N] [--quick] [--out NAME]

Each peer runs in a process of its own, alternating step by step with eager in that
process (the speedup is the ratio of the two medians, so drift between processes
cancels). Peak RSS comes from one more process per mode that runs only that mode
(build, compile, a few steps): ``ru_maxrss``. The torchair process also reports the
ops that ran in eager (the backend's fallback list, views left out) and the compile
time of the first step.

Loss: cross-entropy against fixed random labels for models that return logits
(ResNet-50, LLaMA), the mean square of the hidden states otherwise (BERT, GPT-2 return
them). Optimizers: SGD with momentum 0.9 for ResNet-50 (the article's example), AdamW
for the transformers; each mode trains its own copy of the same initial weights.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent

# name -> (zoo model, batch, seq or image size); the sizes
WORKLOADS: dict[str, tuple[str, int, int]] = {
    "resnet50": ("resnet50", 16, 224),
    "bert_base": ("bert_base", 8, 128),
    "gpt2": ("gpt2", 8, 128),
    "llama_small": ("llama_small", 8, 128),
}
QUICK: dict[str, tuple[str, int, int]] = {
    "resnet50": ("resnet50", 2, 64),
    "bert_base": ("bert_base", 1, 32),
    "gpt2": ("gpt2", 1, 32),
    "llama_small": ("llama_small", 1, 32),
}
# ops that run in eager for a reason other than being a view eager gives for free
EAGER_REASONS = ("no torchair lowering", "an output that torchair does not produce")


def _build(workload: str, quick: bool) -> tuple[Any, tuple[Any, ...], Any]:
    """(model in train mode, inputs, loss_fn(out) -> scalar)."""
    import torch
    import torch.nn.functional as F

    from bench.workloads import import_zoo

    name, batch, size = (QUICK if quick else WORKLOADS)[workload]
    zoo = import_zoo()
    model, args = zoo.build(name, batch=batch, seq=size, size=size)  # seq for text models, size for images
    model.train()
    g = torch.Generator().manual_seed(2)
    if name == "resnet50":
        labels = torch.randint(0, 1000, (batch,), generator=g)

        def loss_fn(out: Any) -> Any:
            return F.cross_entropy(out.float(), labels)
    elif name == "llama_small":
        ids = args[0]

        def loss_fn(out: Any) -> Any:  # next-token prediction on the inputs themselves
            return F.cross_entropy(out[:, :-1].float().flatten(0, 1), ids[:, 1:].flatten())
    else:
        def loss_fn(out: Any) -> Any:
            return out.float().square().mean()
    return model, args, loss_fn


def _optimizer(workload: str, params: Any) -> Any:
    import torch

    if workload == "resnet50":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-4)


def _stepper(model: Any, args: tuple[Any, ...], loss_fn: Any, opt: Any, precision: str) -> Any:
    import torch

    def step() -> float:
        t = time.perf_counter()
        nonlocal_loss.clear()
        opt.zero_grad(set_to_none=True)
        if precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(*args)
        else:
            out = model(*args)
        out = out if isinstance(out, torch.Tensor) else out[0]
        loss = loss_fn(out)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t
        nonlocal_loss.append(float(loss))
        return dt

    nonlocal_loss: list[float] = []
    step.last_loss = nonlocal_loss  # type: ignore[attr-defined]
    return step


def _compiled(mode: str, model: Any) -> tuple[Any, list[Any]]:
    import torch

    recorder: list[Any] = []
    if mode == "eager":
        return model, recorder
    if mode == "inductor":
        return torch.compile(model), recorder
    from torchair.backend import _backend
    from torchair.config import config_from

    config = config_from(None, None)
    return torch.compile(model, backend=lambda gm, ex: _backend(gm, ex, config, recorder)), recorder


def _eager_ops(recorder: list[Any]) -> dict[str, int]:
    ops: dict[str, int] = {}
    for g in recorder:
        for _, op, why in g.fallbacks:
            if why.startswith(EAGER_REASONS):
                ops[op] = ops.get(op, 0) + 1
    return ops


def run_ab(workload: str, mode: str, precision: str, steps: int, quick: bool) -> dict[str, Any]:
    """Eager and `mode` alternated step by step in this process; medians in ms."""
    import torch

    base, args, loss_fn = _build(workload, quick)
    eager_model, peer_model = base, copy.deepcopy(base)
    peer, recorder = _compiled(mode, peer_model)
    s_eager = _stepper(eager_model, args, loss_fn, _optimizer(workload, eager_model.parameters()), precision)
    s_peer = _stepper(peer, args, loss_fn, _optimizer(workload, peer_model.parameters()), precision)
    compile_s = s_peer()  # compiles forward and backward
    s_eager()  # both copies take the same number of steps, so their losses compare
    te, tp = [], []
    for _ in range(steps):
        te.append(s_eager())
        tp.append(s_peer())
    e, p = statistics.median(te) * 1e3, statistics.median(tp) * 1e3
    # both copies trained the same steps from the same weights: their losses should track
    # (dropout draws differ between them, so not bit for bit)
    losses = {"eager_last_loss": s_eager.last_loss[0], "peer_last_loss": s_peer.last_loss[0]}
    return {**losses, "workload": workload, "mode": mode, "precision": precision, "steps": steps,
            "eager_ms": round(e, 2), "peer_ms": round(p, 2), "speedup": round(e / p, 3),
            "first_step_s": round(compile_s, 2), "eager_ops": _eager_ops(recorder),
            "threads": torch.get_num_threads()}


def run_alone(workload: str, mode: str, precision: str, steps: int, quick: bool) -> dict[str, Any]:
    """Only `mode` in this process: its peak RSS (MiB) over build, compile and steps."""
    model, args, loss_fn = _build(workload, quick)
    peer, _ = _compiled(mode, model)
    step = _stepper(peer, args, loss_fn, _optimizer(workload, model.parameters()), precision)
    for _ in range(steps):
        step()
    return {"workload": workload, "mode": mode, "precision": precision,
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def _child(argv: list[str], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.train_suite", *argv]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    try:
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "argv": argv}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr or p.stdout)[-3000:], "argv": argv}
    return json.loads(lines[-1][len("RESULT "):])  # type: ignore[no-any-return]


def report(meta: dict[str, Any], ab: list[dict[str, Any]], alone: list[dict[str, Any]]) -> str:
    """The results as markdown: one row per workload and precision."""
    rss = {(r["workload"], r["precision"], r["mode"]): r.get("peak_rss_mib") for r in alone if "error" not in r}
    lines = [f"# Training steps: eager, Inductor and torchair\n",
             f"`{meta['command']}`: {meta['when']}, {meta['cpu']}, {meta['threads']} threads, torch {meta['torch']}, "
             f"commit {meta['commit']}. A step: zero_grad, forward (autocast for bf16), loss, backward, "
             f"optimizer step. Speedups are medians over {meta['steps']} steps, each peer alternated with eager "
             f"in a process of its own; peak RSS from a process running that mode alone.\n",
             "| workload | precision | eager ms | torchair ms | torchair x eager | Inductor x eager "
             "| peak RSS MiB eager / torchair / Inductor | torchair first step s | ops in eager (torchair) |",
             "|---|---|---:|---:|---:|---:|---|---:|---|"]
    keys = sorted({(r["workload"], r["precision"]) for r in ab if "error" not in r}, key=lambda k: (list(WORKLOADS).index(k[0]), k[1] != "fp32"))
    for w, prec in keys:
        t = next((r for r in ab if r.get("workload") == w and r.get("precision") == prec and r.get("mode") == "torchair"), None)
        i = next((r for r in ab if r.get("workload") == w and r.get("precision") == prec and r.get("mode") == "inductor"), None)
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(t["eager_ops"].items())) if t else ""
        mem = " / ".join(str(rss.get((w, prec, m), "-")) for m in ("eager", "torchair", "inductor"))
        lines.append(f"| {w} | {prec} | {t['eager_ms'] if t else '-'} | {t['peer_ms'] if t else '-'} "
                     f"| {str(t['speedup']) + 'x' if t else '-'} | {str(i['speedup']) + 'x' if i else '-'} | {mem} "
                     f"| {t['first_step_s'] if t else '-'} | {ops or 'none'} |")
    errors = [r for r in ab + alone if "error" in r]
    if errors:
        lines.append("\n## Errors\n")
        lines += [f"- `{' '.join(r['argv'])}`: {r['error'].strip().splitlines()[-1] if r['error'].strip() else ''}" for r in errors]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.train_suite", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--modes", default="torchair,inductor")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="small sizes, for the tests")
    ap.add_argument("--no-rss", action="store_true", help="skip the peak-RSS processes")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--ab", nargs=3, metavar=("WORKLOAD", "MODE", "PRECISION"), help=argparse.SUPPRESS)
    ap.add_argument("--alone", nargs=3, metavar=("WORKLOAD", "MODE", "PRECISION"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ab:
        print("RESULT " + json.dumps(run_ab(*args.ab, args.steps, args.quick)))
        return 0
    if args.alone:
        print("RESULT " + json.dumps(run_alone(*args.alone, min(args.steps, 3), args.quick)))
        return 0

    import torch

    from bench.machine import cpu_info, git_info, now_iso

    workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    common = ["--steps", str(args.steps)] + (["--quick"] if args.quick else [])
    ab, alone = [], []
    for w in workloads:
        for prec in args.precisions.split(","):
            for mode in args.modes.split(","):
                r = _child(["--ab", w, mode, prec, *common], args.timeout)
                print(json.dumps(r)[:600], flush=True)
                ab.append(r)
            if not args.no_rss:
                for mode in ["eager", *args.modes.split(",")]:
                    r = _child(["--alone", w, mode, prec, *common], args.timeout)
                    print(json.dumps(r)[:600], flush=True)
                    alone.append(r)
    meta = {"command": "python -m bench.train_suite " + " ".join(argv if argv is not None else sys.argv[1:]),
            "when": now_iso(), "cpu": cpu_info().get("model"), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "commit": (git_info().get("commit") or "?")[:10], "steps": args.steps}
    text = report(meta, ab, alone)
    print(text)
    if args.out:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{args.out}.md").write_text(text)
        (RESULTS / f"{args.out}.json").write_text(json.dumps({"meta": meta, "ab": ab, "alone": alone}, indent=1))
        print(f"wrote {RESULTS / (args.out + '.md')}")
    return 1 if any("error" in r for r in ab + alone) else 0


if __name__ == "__main__":
    sys.exit(main())
