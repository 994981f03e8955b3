"""What a torch.compile backend cannot get below: peak and steady resident memory at batch 1
for eager, dynamo with a no-op backend (returns the captured graph as it is), aot_autograd
with eager kernels (``aot_eager``) and torchair, each in a fresh process. The gap between
eager and the no-op backend is dynamo's own (its imports, its trace state, and a 32 MiB buffer
it writes once per compile to flush the cache before timing the guards: torch/_dynamo/guards.py,
``profile_guard_manager``); what torchair adds is the gap between its row and aot_eager's.

    python -m bench.memory_floor [resnet50 bert_base] [--out NAME]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from bench import machine

MODES = ("eager", "dynamo_noop", "aot_eager", "torchair")

CHILD = r"""
import json, sys
def st(k):
    for l in open("/proc/self/status"):
        if l.startswith(k): return int(l.split()[1]) / 1024
import torch
torch.set_num_threads(int(sys.argv[3]))
r = {"import_torch": st("VmRSS:")}
name, mode = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
if name in ("bert_base", "gpt2", "llama_small"):
    from torchair.zoo import hf
    model, make = hf.BUILDERS[name](); inputs = make(1, 128)
else:
    from torchair.zoo import vision
    model = getattr(vision, name)(); inputs = (torch.randn(1, 3, 224, 224),)
model.eval()
r["built"] = st("VmRSS:")
if mode == "eager":
    m = model
elif mode == "dynamo_noop":
    m = torch.compile(model, backend=lambda gm, example_inputs: gm.forward)
elif mode == "aot_eager":
    m = torch.compile(model, backend="aot_eager")
else:
    import torchair
    m = torch.compile(model, backend="torchair")
with torch.no_grad():
    for i in range(10):
        m(*inputs)
r["steady"] = st("VmRSS:"); r["peak"] = st("VmHWM:")
print(json.dumps({k: round(v, 1) for k, v in r.items()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=["resnet50", "bert_base"])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = []
    for name in a.models:
        for mode in MODES:
            p = subprocess.run([sys.executable, "-c", CHILD, name, mode, str(a.threads)], capture_output=True, text=True)
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            r = json.loads(lines[-1]) if p.returncode == 0 and lines else {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
            rows.append({"model": name, "mode": mode, **r})
            print(name, mode, r, flush=True)
    cpu = machine.cpu_info()
    text = ["# Memory floor of torch.compile at batch 1", "",
            f"`python -m bench.memory_floor {' '.join(sys.argv[1:])}`: {machine.now_iso()}, {cpu.get('model')}, "
            f"{a.threads} threads, commit {machine.git_info().get('commit', '?')[:10]}. A fresh process per row; "
            "MiB from /proc/self/status (VmRSS after import and build, after 10 calls; VmHWM for the peak).", "",
            "| model | mode | after build | steady (after 10 calls) | peak | peak - eager's peak |", "|---|---|---:|---:|---:|---:|"]
    for name in a.models:
        eager = next((r for r in rows if r["model"] == name and r["mode"] == "eager" and "peak" in r), None)
        for r in rows:
            if r["model"] != name:
                continue
            if "peak" not in r:
                text.append(f"| {name} | {r['mode']} | error: {r.get('error')} | | | |")
                continue
            d = f"{r['peak'] - eager['peak']:+.0f}" if eager else "?"
            text.append(f"| {name} | {r['mode']} | {r['built']:.0f} | {r['steady']:.0f} | {r['peak']:.0f} | {d} |")
    out = "\n".join(text) + "\n"
    print(out)
    if a.out:
        d = os.path.join(os.path.dirname(__file__), "results")
        open(os.path.join(d, a.out + ".md"), "w").write(out)
        json.dump({"cpu": cpu, "rows": rows}, open(os.path.join(d, a.out + ".json"), "w"), indent=1)


if __name__ == "__main__":
    main()
