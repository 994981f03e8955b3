"""``air bench`` (the C runtime, no Python) against the ``torch.compile`` path on the same model
and machine (issue #35's target: within 5%). Each model is exported once with
``torchair.export``; then rounds alternate between ``air bench FILE`` (a process of its own) and a
Python child that holds ``torch.compile(model, backend="torchair")`` and ``torchair.load(FILE)``
and times them call by call. Ratios are of medians of the rounds' medians.

    python -m bench.air_vs_compile resnet50 bert_base [--rounds 5] [--iters 40] [--out NAME]"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from bench import machine

CHILD = r"""
import sys, time, json, statistics
import torch, torchair
name, path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(0)
if name in ("bert_base", "llama_small", "gpt2"):
    from torchair.zoo import hf
    model, make = hf.BUILDERS[name](); inputs = make(1, 128)
else:
    from torchair.zoo import vision
    model = getattr(vision, name)().eval(); inputs = (torch.randn(1, 3, 224, 224),)
model.eval()
with torch.no_grad():
    torchair.export(model, inputs, path)
    compiled = torch.compile(model, backend="torchair")
    loaded = torchair.load(path)
    for _ in range(5):
        compiled(*inputs); loaded(*inputs)
    print("ready", flush=True)
    for line in sys.stdin:
        iters = int(line)
        res = {}
        for label, fn in (("compile", compiled), ("load", loaded)):
            ts = []
            for _ in range(iters):
                t = time.perf_counter(); fn(*inputs); ts.append((time.perf_counter() - t) * 1e3)
            res[label] = statistics.median(ts)
        print(json.dumps(res), flush=True)
"""


def air_bench(air, path, iters, threads):
    out = subprocess.run([air, "bench", path, "--iters", str(iters), "--warmup", "5", "--threads", str(threads)],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"median ([0-9.]+) ms", out).group(1))


def run_model(name, air, rounds, iters, threads, tmp):
    path = os.path.join(tmp, f"{name}.air")
    env = dict(os.environ)
    child = subprocess.Popen([sys.executable, "-c", CHILD, name, path, str(threads)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout.readline().strip() == "ready", f"{name}: the Python child did not start"
    rows = []
    for _ in range(rounds):
        a = air_bench(air, path, iters, threads)
        child.stdin.write(f"{iters}\n"); child.stdin.flush()
        r = json.loads(child.stdout.readline())
        rows.append({"air_bench": a, **r})
    child.stdin.close(); child.wait()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    return {"model": name, "rounds": rows, "median_ms": med, "file_mb": os.path.getsize(path) / 1e6,
            "air_over_compile": med["air_bench"] / med["compile"], "load_over_compile": med["load"] / med["compile"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    air = os.environ.get("TORCHAIR_AIR_CLI") or shutil.which("air")
    if not air:
        sys.exit("air_vs_compile: the air CLI is not on PATH (pip install . puts it there)")
    cpu = machine.cpu_info()
    info = {"cpu": cpu, "git": machine.git_info(), "when": machine.now_iso(), "load_average": machine.load_average()}
    with tempfile.TemporaryDirectory(prefix="air-vs-compile-") as tmp:
        results = [run_model(m, air, a.rounds, a.iters, a.threads, tmp) for m in a.models]
    lines = [f"# air bench vs torch.compile", "",
             f"`python -m bench.air_vs_compile {' '.join(sys.argv[1:])}`: {info['when']}, {cpu.get('model', cpu)}, "
             f"{a.threads} threads, commit {info['git'].get('commit', '?')[:10]}, load average {info['load_average']}", "",
             "Rounds alternate: `air bench FILE` (C, no Python), then the Python child times the `torch.compile` "
             "path and `torchair.load(FILE)` call by call; each figure is the median of the rounds' medians.", "",
             "| model | air bench ms | torch.compile ms | torchair.load ms | air / compile | load / compile |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        m = r["median_ms"]
        lines.append(f"| {r['model']} | {m['air_bench']:.2f} | {m['compile']:.2f} | {m['load']:.2f} | "
                     f"{r['air_over_compile']:.3f} | {r['load_over_compile']:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        d = os.path.join(os.path.dirname(__file__), "results")
        open(os.path.join(d, a.out + ".md"), "w").write(text)
        json.dump({"machine": info, "results": results}, open(os.path.join(d, a.out + ".json"), "w"), indent=1)


if __name__ == "__main__":
    main()
