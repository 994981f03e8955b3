"""The first call of a torchair-compiled model in a fresh process three ways: cold
(torch.compile, an empty compile-cache folder), and loaded from torch's precompile
files (torchair.precompile: ``aot_compile`` then ``save_compiled_function`` in one
process, ``load_compiled_function`` and the first call in another, with an empty
cache folder so only what the file carries is used). Median of --repeats fresh
processes each; the same result checked. Noisy: the machine is shared.

    python -m bench.precompile_warm resnet50 bert_base [--repeats 3]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
import torch, torchair
torch._dynamo.config.enable_aot_compile = True
how, name, path = sys.argv[1], sys.argv[2], sys.argv[3]
torch.manual_seed(0)  # the same weights in every process
if name in ("bert_base", "llama_small", "gpt2"):
    from torchair.zoo import hf
    model, make = hf.BUILDERS[name](); inputs = make(1, 128)
else:
    from torchair.zoo import build
    model, inputs = build(name)
model.eval()
out, extra = None, {}


def call(fn, args):
    # torch traced either the module's forward (bound: fn(x)) or its __call__ as a plain
    # function, whose saved signature then starts with self (fn(model, x))
    params = list(fn._artifacts.signature.parameters)
    return fn(model, *args) if params and params[0] == "self" else fn(*args)


with torch.no_grad():
    if how == "cold":
        compiled = torch.compile(model, backend="torchair", fullgraph=True)
        t = time.perf_counter()
        out = compiled(*inputs)
        first = time.perf_counter() - t
    elif how == "save":
        from torchair.precompile import serializable_guards  # BERT's activation functions' guards
        compiled = torch.compile(model, backend="torchair", fullgraph=True, options={"guard_filter_fn": serializable_guards})
        t = time.perf_counter()
        fn = compiled.forward.aot_compile((tuple(inputs), {}))
        first = time.perf_counter() - t
        t = time.perf_counter()
        fn.save_compiled_function(path, external_data={"model": model})
        extra["save_s"] = time.perf_counter() - t
        out = call(fn, inputs)
    else:
        import torchair.compiler as C
        import torchair.precompile.artifact as A
        parts = {"graph_unpickle_s": 0.0, "compile_graph_s": 0.0, "libair_compile_s": 0.0}
        def timed(mod, name, key):
            f = getattr(mod, name)
            def w(*a, **k):
                t = time.perf_counter()
                try:
                    return f(*a, **k)
                finally:
                    parts[key] += time.perf_counter() - t
            setattr(mod, name, w)
        timed(A, "load_graph", "graph_unpickle_s")
        timed(C, "_compile_graph", "compile_graph_s")
        timed(C, "compile_built", "libair_compile_s")
        t = time.perf_counter()
        with open(path, "rb") as f:
            fn = torch.compiler.load_compiled_function(f, external_data={"model": model})
        extra["load_s"] = time.perf_counter() - t
        out = call(fn, inputs)
        first = time.perf_counter() - t
        extra["entries_used"] = fn._artifacts.compiled_fn.entries_used
        extra.update(parts)
    t = time.perf_counter()
    compiled(*inputs) if how == "cold" else call(fn, inputs)
    second = time.perf_counter() - t
out = out[0] if isinstance(out, (tuple, list)) else out
out = getattr(out, "last_hidden_state", out)
print(json.dumps({"first_call_s": first, "second_call_s": second, **extra, "checksum": float(out.double().sum())}))
"""


def run(how: str, name: str, path: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="torchair-precompile-bench-") as folder:
        env = {**os.environ, "TORCHAIR_CACHE_DIR": folder, "TORCHAIR_CACHE": "1"}
        p = subprocess.run([sys.executable, "-c", CHILD, how, name, path], env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{how} {name} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    for name in args.models:
        with tempfile.TemporaryDirectory(prefix="torchair-precompile-") as d:
            path = os.path.join(d, name + ".pt2c")
            t = time.perf_counter()
            cold = [run("cold", name, path) for _ in range(args.repeats)]
            saved = run("save", name, path)
            loads = [run("load", name, path) for _ in range(args.repeats)]
            c = statistics.median(r["first_call_s"] for r in cold)
            w = statistics.median(r["first_call_s"] for r in loads)
            same = len({r["checksum"] for r in loads + [saved]}) == 1
            drift = abs(loads[0]["checksum"] - cold[0]["checksum"]) / max(abs(cold[0]["checksum"]), 1e-30)
            print(f"{name}: cold first call {c:.2f} s, loaded first call {w:.2f} s (loaded/cold {w / c:.0%}); "
                  f"loaded = saved bit for bit: {same}; output sum loaded vs cold torch.compile: {drift:.1e} relative")
            colds = ", ".join(f"{r['first_call_s']:.2f}" for r in cold)
            loaded = ", ".join(f"{r['first_call_s']:.2f} (load {r['load_s']:.2f})" for r in loads)
            print(f"  cold:   {colds} s")
            print(f"  loaded: {loaded} s; entries used {loads[0]['entries_used']}")
            for k in ("graph_unpickle_s", "compile_graph_s", "libair_compile_s"):
                print(f"    {k}: {statistics.median(r[k] for r in loads):.2f} s (median)")
            print(f"  aot_compile {saved['first_call_s']:.2f} s, save {saved['save_s']:.2f} s, "
                  f"file {os.path.getsize(path) / 1e6:.1f} MB; second call cold {cold[0]['second_call_s']:.3f} s, "
                  f"loaded {loads[0]['second_call_s']:.3f} s")
            print(f"  ({time.perf_counter() - t:.0f} s in all)")


if __name__ == "__main__":
    main()
