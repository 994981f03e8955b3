"""The compile cache's cold and warm starts: the first call of a compiled model in a
fresh process, with an empty cache folder (cold) and again with the folder the cold
run filled (warm), and how that first call splits between dynamo + aot_autograd,
torchair's lowering and libair's compile (the second call, for scale: one run). Noisy: one process each, no repeats.

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
import torchair.compiler as C
acc = {"lowering": 0.0, "libair_compile": 0.0, "torchair_compile_graph": 0.0}
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
wrap(C, "compile_built", "libair_compile")
wrap(C, "_compile_graph", "torchair_compile_graph")
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
            for k in ("lowering", "libair_compile", "torchair_compile_graph", "second_call_s"):
                print(f"  {k}: cold {cold[k]:.2f} s, warm {warm[k]:.2f} s")
            print(f"  (two processes, {time.perf_counter() - t:.0f} s with model building and imports)")


if __name__ == "__main__":
    main()
