"""LLM inference benchmark (#32): a LLaMA-architecture model from a transformers config with
random weights, run through transformers' own ``generate`` with the forward compiled, in
fp32 and bf16, by eager, Inductor (bf16, freezing as its docs say) and torchair.

    python -m bench.llm --config tiny --out llm-DATE-CPU         # TinyLlama-1.1B shape
    python -m bench.llm --config 160m --modes eager_bf16,torchair_bf16

Each mode runs in a process of its own (``--one MODE`` is the child) and reports:
- prefill: the median time of one forward over P prompt tokens (cache on, as generate does);
- decode: ms per token, from ``generate`` with T and with 1 new token (greedy, the same
  prompt), (t_T - t_1) / (T - 1), medians of interleaved runs; tokens/s; and its roofline %:
  the bytes of weights a token reads (every 2-D weight but the input embedding, of which it
  reads one row) over the machine's read bandwidth (bench/peak_probe.c, all threads), divided
  by the measured time;
- the greedy tokens and the prefill's last logits, which the parent compares with eager fp32
  (cosine) and eager bf16 (token agreement);
- peak RSS of the process (ru_maxrss, compile included) and RSS after the model was built.
Ratios are taken against eager bf16 from its own process; absolute times drift between
processes here, so each result records the load average with it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"

CONFIGS: dict[str, dict[str, Any]] = {
    # TinyLlama-1.1B's shape
    "tiny": dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                 num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048),
    # ~160M parameters, for quick runs
    "160m": dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                 num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=2048),
    # a few MB: for tests of this script
    "test": dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256),
}

MODES = ("eager_fp32", "eager_bf16", "inductor_bf16", "torchair_bf16", "torchair_mixed")
# fp32 models compiled by torchair as they are, and with weight_quantization (#40): not in the
# default set; ask for them with --modes
EXTRA_MODES = ("torchair_fp32", "torchair_int8", "torchair_int4")
_FP32_MODES = ("eager_fp32", "torchair_mixed", "torchair_fp32", "torchair_int8", "torchair_int4")


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _build(config: str, dtype: Any) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(**CONFIGS[config], torch_dtype=dtype)
    # built in its dtype (a bf16 model built in fp32 first would set the
    # process's peak RSS at twice its weights, whatever runs it after)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default)
    # small weights keep the random model's logits in a sane range
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    return model.to(dtype).eval()


def _decode_bytes(model: Any, matrix_bytes: int | None = None) -> int:
    """Weight bytes one decoded token reads: every parameter but the input embedding table,
    of which it reads one row (a tied head reads it whole, once). matrix_bytes: the bytes a
    value of every other 2-D weight takes as the mode reads it (2 under mixed_precision)."""
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight

    def size(p: Any) -> int:
        return p.numel() * (matrix_bytes if matrix_bytes and p.dim() == 2 and p is not emb else p.element_size())

    total = sum(size(p) for p in model.parameters())
    if head.data_ptr() != emb.data_ptr():
        total -= emb.numel() * emb.element_size() - emb.shape[1] * emb.element_size()
    return total


def _compile(mode: str, model: Any) -> Any:
    import torch

    if mode.startswith("eager"):
        return model
    if mode == "inductor_bf16":
        torch._inductor.config.freezing = True  # before tracing: see bench/modes.py
        model.forward = torch.compile(model.forward)
    elif mode == "torchair_bf16":
        model.forward = torch.compile(model.forward, backend="torchair")
    elif mode == "torchair_mixed":
        model.forward = torch.compile(model.forward, backend="torchair", options={"mixed_precision": "bf16"})
    elif mode == "torchair_fp32":
        model.forward = torch.compile(model.forward, backend="torchair")
    elif mode in ("torchair_int8", "torchair_int4"):
        model.forward = torch.compile(model.forward, backend="torchair",
                                      options={"weight_quantization": mode.rsplit("_", 1)[1]})
    return model


def _quant_decode_bytes(model: Any, fmt: str) -> int:
    """_decode_bytes for weight_quantization's format (lowering/quant.py's defaults): every
    linear's q (K rounded up to its groups) and f16 scales; the rest as stored."""
    from torch import nn

    from torchair.lowering.quant import group_for

    total = _decode_bytes(model)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            n, k = m.weight.shape
            g = group_for(fmt, None, k)
            ng = -(-k // g)
            total += n * ng * g * (1 if fmt == "int8" else 0.5) + 2 * n * ng - m.weight.numel() * m.weight.element_size()
    return int(total)


def _median_time(fn: Any, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_one(mode: str, config: str, prefills: list[int], new_tokens: int, reps: int, out_dir: str) -> dict[str, Any]:
    import torch

    dtype = torch.float32 if mode in _FP32_MODES else torch.bfloat16
    t0 = time.perf_counter()
    model = _build(config, dtype)
    build_s = time.perf_counter() - t0
    rss_model = _rss_mib()
    if mode in ("torchair_int8", "torchair_int4"):
        decode_bytes = _quant_decode_bytes(model, mode.rsplit("_", 1)[1])
    else:
        decode_bytes = _decode_bytes(model, 2 if mode == "torchair_mixed" else None)
    model = _compile(mode, model)
    vocab = CONFIGS[config]["vocab_size"]
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, vocab, (1, max(prefills)), generator=gen)
    res: dict[str, Any] = {"mode": mode, "dtype": str(dtype), "build_s": round(build_s, 2),
                           "rss_after_build_mib": round(rss_model, 1), "decode_weight_bytes": decode_bytes}
    with torch.no_grad():
        t = time.perf_counter()
        first = model(prompt[:, : prefills[0]], use_cache=True)
        res["first_call_s"] = round(time.perf_counter() - t, 3)
        torch.save(first.logits[0, -1].float(), os.path.join(out_dir, f"{mode}.logits.pt"))
        res["prefill_ms"] = {}
        for p in prefills:
            ids = prompt[:, :p]
            model(ids, use_cache=True)  # compile / warm this size
            res["prefill_ms"][str(p)] = round(1e3 * _median_time(lambda: model(ids, use_cache=True), reps), 2)
        ids = prompt[:, : prefills[0]]
        kw = dict(do_sample=False, pad_token_id=0)
        tokens = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **kw)
        res["tokens"] = tokens[0, ids.shape[1]:].tolist()
        model.generate(ids, max_new_tokens=1, **kw)
        full, one = [], []
        for _ in range(reps):  # interleaved
            t = time.perf_counter()
            model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **kw)
            full.append(time.perf_counter() - t)
            t = time.perf_counter()
            model.generate(ids, max_new_tokens=1, **kw)
            one.append(time.perf_counter() - t)
    per_token = (statistics.median(full) - statistics.median(one)) / (new_tokens - 1)
    res["decode_ms_per_token"] = round(1e3 * per_token, 3)
    res["decode_tokens_per_s"] = round(1.0 / per_token, 2) if per_token > 0 else None
    res["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if mode != "eager_fp32" and mode != "eager_bf16":
        from torch._dynamo.utils import counters

        res["graphs_compiled"] = int(counters["stats"]["unique_graphs"])
    return res


def _child(mode: str, args: argparse.Namespace, out_dir: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.llm", "--one", mode, "--config", args.config, "--prefill",
           ",".join(map(str, args.prefill)), "--new-tokens", str(args.new_tokens), "--reps", str(args.reps),
           "--tmp", out_dir]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        return {"mode": mode, "error": (p.stderr or p.stdout)[-3000:]}
    return json.loads(lines[-1][len("RESULT "):])


def _compare(results: list[dict[str, Any]], out_dir: str) -> None:
    import torch

    by = {r["mode"]: r for r in results if "error" not in r}
    ref_path = os.path.join(out_dir, "eager_fp32.logits.pt")
    ref = torch.load(ref_path) if os.path.exists(ref_path) else None
    base = by.get("eager_bf16")
    for r in by.values():
        path = os.path.join(out_dir, f"{r['mode']}.logits.pt")
        if ref is not None and os.path.exists(path):
            r["logits_cosine_vs_fp32"] = round(float(torch.nn.functional.cosine_similarity(torch.load(path), ref, dim=0)), 5)
        if base is not None:
            a, b = r["tokens"], base["tokens"]
            r["tokens_agree_with_eager_bf16"] = round(sum(x == y for x, y in zip(a, b)) / len(b), 3)
            r["prefill_speedup_vs_eager_bf16"] = {p: round(base["prefill_ms"][p] / t, 3) for p, t in r["prefill_ms"].items()}
            r["decode_speedup_vs_eager_bf16"] = round(base["decode_ms_per_token"] / r["decode_ms_per_token"], 3)


def _markdown(meta: dict[str, Any], results: list[dict[str, Any]]) -> str:
    bw = meta["peak"].get("read_gbs_nthreads")
    lines = [f"# LLM inference, config `{meta['config']}` ({meta['params_m']:.0f}M parameters)", "",
             f"CPU: {meta['cpu']['model']} ({meta['cpu']['logical_cpus']} CPUs), read bandwidth {bw} GB/s "
             f"(bench/peak_probe.c), torch {meta['versions']['torch']}, transformers {meta['versions']['transformers']}, "
             f"commit {meta['git']['commit'][:10] if meta['git']['commit'] else '?'}, {meta['date']}", "",
             f"Command: `{meta['command']}`", "",
             "| mode | prefill ms | x eager bf16 | decode ms/token | tokens/s | roofline % | x eager bf16 | "
             "peak RSS MiB | logits cos vs fp32 | tokens = eager bf16 | graphs |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['mode']} | failed: {r['error'].strip().splitlines()[-1][:120]} |" + " |" * 9)
            continue
        pre = ", ".join(f"{p}: {t}" for p, t in r["prefill_ms"].items())
        sp = ", ".join(f"{v}" for v in r.get("prefill_speedup_vs_eager_bf16", {}).values())
        floor = r["decode_weight_bytes"] / (bw * 1e9) if bw else None
        roof = f"{100 * floor / (r['decode_ms_per_token'] / 1e3):.0f}" if floor and r["decode_ms_per_token"] > 0 else "?"
        lines.append(f"| {r['mode']} | {pre} | {sp} | {r['decode_ms_per_token']} | {r['decode_tokens_per_s']} | {roof} | "
                     f"{r.get('decode_speedup_vs_eager_bf16', '')} | {r['peak_rss_mib']} | {r.get('logits_cosine_vs_fp32', '')} | "
                     f"{r.get('tokens_agree_with_eager_bf16', '')} | {r.get('graphs_compiled', '')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.llm", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="160m")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--prefill", default="128,512", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None, help="name for bench/results/<name>.{md,json}")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.new_tokens < 2:
        ap.error("--new-tokens must be at least 2")
    if args.one:
        print("RESULT " + json.dumps(run_one(args.one, args.config, args.prefill, args.new_tokens, args.reps, args.tmp)))
        return 0
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES + EXTRA_MODES]
    if unknown:
        ap.error(f"unknown mode(s) {unknown}; modes: {', '.join(MODES + EXTRA_MODES)}")
    from bench.machine import cpu_info, git_info, load_average, now_iso, versions
    from bench.peak import measure_peak

    peak = measure_peak(os.cpu_count() or 1)
    with tempfile.TemporaryDirectory(prefix="torchair-llm-") as out_dir:
        results = []
        for m in modes:
            r = _child(m, args, out_dir)
            r["load_average_after"] = load_average()
            results.append(r)
            print(json.dumps({k: v for k, v in r.items() if k != "tokens"}), flush=True)
        _compare(results, out_dir)
    import torch  # noqa: F401  (versions() reads it)

    cfg = CONFIGS[args.config]
    h, i, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    kv = h * cfg["num_key_value_heads"] // cfg["num_attention_heads"]
    params = n * (2 * h * h + 2 * h * kv + 3 * h * i) + 2 * cfg["vocab_size"] * h
    meta = {"config": args.config, "params_m": params / 1e6, "cpu": cpu_info(), "peak": peak.to_json(),
            "versions": versions(), "git": git_info(), "date": now_iso(),
            "command": "python -m bench.llm " + " ".join(argv if argv is not None else sys.argv[1:])}
    text = _markdown(meta, results)
    print(text)
    if args.out:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{args.out}.md").write_text(text)
        (RESULTS / f"{args.out}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
