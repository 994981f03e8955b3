"""``python -m bench.hf_sweep [names] [--out NAME]``: many Hugging Face architectures through torchair.

Each model is built from a ``transformers`` config with random weights (no downloads; small
configs where the default is large), run in eval mode under ``no_grad``, and checked three ways:

* accuracy: every tensor output against eager fp32 and fp64 under SPEC.md section 4
  (``bench.accuracy.check_accuracy``);
* fallbacks: the ops that ran in eager, with torchair's reason;
* speed: the median of 15 eager and 15 torchair calls, taken in turn (a quick look, not the
  benchmark: the harness in ``python -m bench`` is what the README's figures come from);
* a second input size (fewer tokens, a smaller image, longer audio): dynamo then recompiles
  with symbolic sizes, and that graph's fallbacks and accuracy are reported too.

The point is breadth: a model family the zoo does not cover shows here first whether it compiles
whole, stays correct and runs faster. Results go to ``bench/results/NAME.md`` with the machine.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.accuracy import check_accuracy
from bench.machine import cpu_info, git_info, now_iso
from bench.timing import Budget, round_robin

RESULTS = Path(__file__).resolve().parent / "results"


def _tokens(batch: int, seq: int, vocab: int = 1000) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(1))


def _image(batch: int, size: int = 224) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(1))


def _models() -> dict[str, tuple[str, Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]]]]:
    import transformers as T

    small_lm = dict(vocab_size=1000, hidden_size=256, num_hidden_layers=2, num_attention_heads=8)
    return {
        "distilbert": ("DistilBERT, default config, 128 tokens",
                       lambda: (T.DistilBertModel(T.DistilBertConfig(vocab_size=1000)), (_tokens(1, 128),))),
        "roberta": ("RoBERTa-base, 128 tokens",
                    lambda: (T.RobertaModel(T.RobertaConfig(vocab_size=1000)), (_tokens(1, 128),))),
        "electra": ("ELECTRA (small default), 128 tokens",
                    lambda: (T.ElectraModel(T.ElectraConfig(vocab_size=1000)), (_tokens(1, 128),))),
        "t5_encoder": ("T5 encoder, d_model 512, 4 layers, 128 tokens", lambda: (T.T5EncoderModel(T.T5Config(
            vocab_size=1000, d_model=512, num_layers=4, num_heads=8, d_ff=2048)), (_tokens(1, 128),))),
        "bart": ("BART, d_model 256, 2+2 layers, 64 tokens", lambda: (T.BartModel(T.BartConfig(
            vocab_size=1000, d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024)), (_tokens(1, 64),))),
        "mistral": ("Mistral, hidden 256, 2 layers, GQA 8/2, 64 tokens", lambda: (T.MistralModel(T.MistralConfig(
            intermediate_size=688, num_key_value_heads=2, **small_lm)), (_tokens(1, 64),))),
        "qwen2": ("Qwen2, hidden 256, 2 layers, GQA 8/2, 64 tokens", lambda: (T.Qwen2Model(T.Qwen2Config(
            intermediate_size=688, num_key_value_heads=2, **small_lm)), (_tokens(1, 64),))),
        "gpt_neox": ("GPT-NeoX, hidden 256, 2 layers, 64 tokens", lambda: (T.GPTNeoXModel(T.GPTNeoXConfig(
            intermediate_size=1024, **small_lm)), (_tokens(1, 64),))),
        "phi": ("Phi, hidden 256, 2 layers, 64 tokens",
                lambda: (T.PhiModel(T.PhiConfig(intermediate_size=1024, **small_lm)), (_tokens(1, 64),))),
        "deberta_v2": ("DeBERTa-v2, hidden 256, 2 layers, 64 tokens", lambda: (T.DebertaV2Model(T.DebertaV2Config(
            vocab_size=1000, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=1024)), (_tokens(1, 64),))),
        "clip_text": ("CLIP text encoder, default config, 77 tokens",
                      lambda: (T.CLIPTextModel(T.CLIPTextConfig(vocab_size=1000)), (_tokens(1, 77),))),
        "vit": ("ViT, hidden 192, 4 layers, 224x224", lambda: (T.ViTModel(T.ViTConfig(
            hidden_size=192, num_hidden_layers=4, num_attention_heads=3, intermediate_size=768)), (_image(1),))),
        "convnext": ("ConvNeXt, depths 1-1-2-1, widths 48-384, 224x224", lambda: (T.ConvNextModel(T.ConvNextConfig(
            depths=[1, 1, 2, 1], hidden_sizes=[48, 96, 192, 384])), (_image(1),))),
        "swin": ("Swin, embed 48, depths 1-1-2-1, 224x224", lambda: (T.SwinModel(T.SwinConfig(
            embed_dim=48, depths=[1, 1, 2, 1], num_heads=[2, 4, 8, 16])), (_image(1),))),
        "resnet_hf": ("ResNet-50 (transformers' ResNetModel), 224x224",
                      lambda: (T.ResNetModel(T.ResNetConfig()), (_image(1),))),
        "segformer": ("SegFormer (b0 default), 256x256",
                      lambda: (T.SegformerModel(T.SegformerConfig()), (_image(1, 256),))),
        "mobilevit": ("MobileViT (small default), 256x256",
                      lambda: (T.MobileViTModel(T.MobileViTConfig()), (_image(1, 256),))),
        "whisper_encoder": ("Whisper encoder, d_model 256, 2 layers, 30 s of log-mel", lambda: (T.WhisperModel(
            T.WhisperConfig(d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                            decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024)).encoder,
            (torch.randn(1, 80, 3000, generator=torch.Generator().manual_seed(1)),))),
        "wav2vec2": ("wav2vec2 (base config, 4 layers), 1 s of audio", lambda: (T.Wav2Vec2Model(T.Wav2Vec2Config(
            num_hidden_layers=4)), (torch.randn(1, 16000, generator=torch.Generator().manual_seed(1)),))),
    }


# models whose input size is fixed by the architecture (Whisper takes 3000 frames)
_FIXED_SIZE = {"whisper_encoder"}


def _other_size(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """The same inputs at another size: 3/4 of the tokens, a 192-pixel image, 1.5x the audio."""
    g = torch.Generator().manual_seed(2)
    out = []
    for x in inputs:
        if not x.is_floating_point():
            out.append(torch.randint(0, 1000, (x.shape[0], x.shape[1] * 3 // 4), generator=g))
        elif x.dim() == 4:
            out.append(torch.randn(x.shape[0], x.shape[1], 192, 192, generator=g))
        else:
            out.append(torch.randn(*x.shape[:-1], x.shape[-1] * 3 // 2, generator=g))
    return tuple(out)


def _tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, (tuple, list)):
        return [t for x in out for t in _tensors(x)]
    if isinstance(out, dict):
        return [t for x in out.values() for t in _tensors(x)]
    return []


def run_one(name: str, build: Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]], rounds: int) -> dict[str, Any]:
    from torchair.backend import _backend
    from torchair.config import config_from

    torch._dynamo.reset()
    torch.manual_seed(0)
    model, inputs = build()
    model.eval()
    reports: list[Any] = []
    config = config_from(None, None)
    compiled = torch.compile(model, backend=lambda gm, ex: _backend(gm, ex, config, reports))
    with torch.no_grad():
        ref32 = _tensors(model(*inputs))
        doubled = tuple(x.double() if x.is_floating_point() else x for x in inputs)
        ref64 = _tensors(copy.deepcopy(model).double()(*doubled))
        t = time.perf_counter()
        out = _tensors(compiled(*inputs))
        first = time.perf_counter() - t
        bad = [detail for ok, detail in (check_accuracy(o, a, b) for o, a, b in zip(out, ref32, ref64)) if not ok]
        if len(out) != len(ref32):
            bad.append(f"{len(out)} outputs, eager gave {len(ref32)}")
        timed = round_robin({"eager": lambda: model(*inputs), "torchair": lambda: compiled(*inputs)},
                            Budget(min_rounds=rounds, max_rounds=rounds, seconds=0.0, warmup=0))
        if timed.errors:
            raise RuntimeError("; ".join(f"{k}: {v}" for k, v in timed.errors.items()))
        # (after the timing: the recompiled graph also serves the first size from then on)
        dynamic = "fixed size"
        other = _other_size(inputs)
        try:
            want32 = _tensors(model(*other))
        except Exception as e:  # eager's own limit (ViT's position table is for 224x224)
            want32, dynamic = None, f"eager refuses it ({type(e).__name__})"
        if name not in _FIXED_SIZE and want32 is not None:
            seen = len(reports)
            got = _tensors(compiled(*other))
            want64 = _tensors(copy.deepcopy(model).double()(*(x.double() if x.is_floating_point() else x
                                                                for x in other)))
            wrong = [d for ok, d in (check_accuracy(o, a, b) for o, a, b in zip(got, want32, want64)) if not ok]
            if wrong:
                bad.append("at the second size: " + "; ".join(wrong))
            later = reports[seen:]
            n_fb = sum(len(r.fallbacks) for r in later)
            dynamic = f"{len(later)} recompile(s), {n_fb} fallback op(s)" + (
                ": " + ", ".join(sorted({op for r in later for (_, op, _) in r.fallbacks})) if n_fb else "")
    fallbacks = sorted({f"{op}: {reason}" for r in reports[:1] for (_, op, reason) in r.fallbacks})
    e, a = statistics.median(timed.samples["eager"]), statistics.median(timed.samples["torchair"])
    return {"name": name, "accuracy": "ok" if not bad else "BAD: " + "; ".join(bad)[:300],
            "fallbacks": fallbacks, "first_call_s": first, "eager_ms": 1e3 * e, "torchair_ms": 1e3 * a,
            "speedup": e / a, "dynamic": dynamic}


def main(argv: list[str] | None = None) -> int:
    models = _models()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="?", default=",".join(models), help="comma list (default: all)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", default=None, help="write bench/results/OUT.md")
    args = parser.parse_args(argv)
    rows = []
    for name in args.names.split(","):
        desc, build = models[name]
        try:
            r = run_one(name, build, args.rounds)
        except Exception as e:  # a model that cannot even run is a finding, not the end of the sweep
            r = {"name": name, "accuracy": f"ERROR {type(e).__name__}: {str(e)[:200]}", "fallbacks": [],
                 "first_call_s": float("nan"), "eager_ms": float("nan"), "torchair_ms": float("nan"),
                 "speedup": float("nan"), "dynamic": "-"}
        r["desc"] = desc
        rows.append(r)
        print(f"{name}: accuracy {r['accuracy']}, {len(r['fallbacks'])} fallback op kinds, eager "
              f"{r['eager_ms']:.2f} ms, torchair {r['torchair_ms']:.2f} ms, {r['speedup']:.2f}x; second size: "
              f"{r['dynamic']}", flush=True)
    if args.out:
        cpu, git = cpu_info(), git_info()
        lines = [f"# Hugging Face sweep: {args.out}", "",
                 f"`python -m bench.hf_sweep --out {args.out}` at {now_iso()}, commit {git.get('commit', '?')}; "
                 f"{cpu['model']} ({', '.join(cpu['flags'])}), {torch.get_num_threads()} threads, torch "
                 f"{torch.__version__}; medians of {args.rounds} calls each, eager and torchair in turn.", "",
                 "| model | config | accuracy | eager ms | torchair ms | speedup | fallbacks | second size |",
                 "|---|---|---|---:|---:|---:|---|---|"]
        for r in rows:
            fb = "<br>".join(r["fallbacks"]) if r["fallbacks"] else "none"
            lines.append(f"| {r['name']} | {r['desc']} | {r['accuracy']} | {r['eager_ms']:.2f} "
                         f"| {r['torchair_ms']:.2f} | {r['speedup']:.2f}x | {fb} | {r['dynamic']} |")
        (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
        print(f"wrote {RESULTS / (args.out + '.md')}")
    return 0 if all(r["accuracy"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
