"""The compile cache's cold and warm starts: the first call of a compiled model in a
fresh process, with an empty cache folder (cold) and again with the folder the cold
run filled (warm), and how that first call splits between dynamo,
aot_autograd, torchair's lowering, libair's passes, kernel selection (weight packing)
and memory plan, and the first run (the second call, for scale). Noisy: one process each, no repeats.

    python -m bench.cache_warm resnet50 bert_base [--dir /tmp/cache]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, sys, time
import torch, torchair
import torchair.backend as B
import torchair.compiler as C
acc = {"backend": 0.0, "lowering": 0.0, "libair_compile": 0.0, "torchair_compile_graph": 0.0, "first_run": 0.0,
       "libair_passes": 0.0, "libair_kernels": 0.0, "libair_memory_plan": 0.0}
def wrap(mod, name, key):
    f = getattr(mod, name)
    def w(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            acc[key] += time.perf_counter() - t
    setattr(mod, name, w)
wrap(C, "build_subgraph", "lowering")
wrap(C, "_compile_graph", "torchair_compile_graph")
compile_built = C.compile_built
def timed_compile(*a, **k):
    t = time.perf_counter()
    model = compile_built(*a, **k)
    acc["libair_compile"] += time.perf_counter() - t
    for phase, _, dt in model.compile_phases():
        key = {"kernel selection": "libair_kernels", "memory plan": "libair_memory_plan"}.get(phase, "libair_passes")
        acc[key] += dt / 1e9
    return model
C.compile_built = timed_compile
backend = B._backend
def timed_backend(*a, **k):
    t = time.perf_counter()
    fn = backend(*a, **k)
    acc["backend"] += time.perf_counter() - t
    first = [True]
    def call(*args):
        if not first[0]:
            return fn(*args)
        first[0] = False
        t = time.perf_counter()
        try:
            return fn(*args)
        finally:
            acc["first_run"] += time.perf_counter() - t
    return call
B._backend = timed_backend
name = sys.argv[1]
torch.manual_seed(0)  # the same weights in both processes, so their results can be compared
if name in ("bert_base", "llama_small", "gpt2"):
    from torchair.zoo import hf
    model, make = hf.BUILDERS[name](); inputs = make(1, 128)
else:
    from torchair.zoo import build
    model, inputs = build(name)
model.eval()
compiled = torch.compile(model, backend="torchair")
t = time.perf_counter()
with torch.no_grad():
    out = compiled(*inputs)
first = time.perf_counter() - t
t = time.perf_counter()
with torch.no_grad():
    compiled(*inputs)
second = time.perf_counter() - t
out = out[0] if isinstance(out, tuple) else out
print(json.dumps({"first_call_s": first, "second_call_s": second, **acc, "checksum": float(out.double().sum())}))
"""

# the first call's parts: dynamo (tracing, guards, bytecode) is the first call less the
# backend and the first run; aot_autograd (with torchair's decompositions) is the backend
# less torchair's compile of the ATen graph; that compile is torchair's lowering, libair's
# compile (its passes, kernel selection with weight packing, memory plan) and the rest
# (partitioning, the compile cache's keys, freezing's bookkeeping); libair_other is libair's
# compile outside the phases it times
PARTS = ("dynamo", "aot_autograd", "torchair_other", "lowering", "libair_passes", "libair_kernels",
         "libair_memory_plan", "libair_other", "first_run")


def split(r: dict) -> dict:
    out = dict(r)
    out["dynamo"] = r["first_call_s"] - r["backend"] - r["first_run"]
    out["aot_autograd"] = r["backend"] - r["torchair_compile_graph"]
    out["torchair_other"] = r["torchair_compile_graph"] - r["lowering"] - r["libair_compile"]
    out["libair_other"] = r["libair_compile"] - r["libair_passes"] - r["libair_kernels"] - r["libair_memory_plan"]
    return out


def run(name: str, folder: str) -> dict:
    env = {**os.environ, "TORCHAIR_CACHE_DIR": folder, "TORCHAIR_CACHE": "1"}
    p = subprocess.run([sys.executable, "-c", CHILD, name], env=env, capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    for name in args.models:
        with tempfile.TemporaryDirectory(prefix="torchair-cache-bench-") as folder:
            t = time.perf_counter()
            cold = run(name, folder)
            warm = run(name, folder)
            ratio = warm["first_call_s"] / cold["first_call_s"]
            print(f"{name}: cold {cold['first_call_s']:.2f} s, warm {warm['first_call_s']:.2f} s "
                  f"(warm/cold {ratio:.0%}); same result: {cold['checksum'] == warm['checksum']}")
            cold, warm = split(cold), split(warm)
            for k in PARTS:
                print(f"  {k:>20}: cold {cold[k]:.3f} s ({cold[k] / cold['first_call_s']:.0%}), warm {warm[k]:.3f} s")
            print(f"  {'second call':>20}: cold {cold['second_call_s']:.3f} s, warm {warm['second_call_s']:.3f} s")
            print(f"  (two processes, {time.perf_counter() - t:.0f} s with model building and imports)")


if __name__ == "__main__":
    main()
