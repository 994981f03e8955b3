"""Attention through torchair: F.scaled_dot_product_attention (masks of every
broadcast, bool masks, causal, scale, L != S, odd head dims, rows with every
key masked) and eager-attention transformers models (BERT, GPT-2, LLaMA with
grouped-query heads), whose decomposed attention the fuse_attention pass turns
into one sdpa node. Compiled results match eager under SPEC.md section 4, and
the compile report shows the sdpa kernel ran."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _compile import compile_recording, fallbacks
from bench.accuracy import check_accuracy


def _air_reports(reports) -> str:
    return "\n".join(s.air_report for r in reports for s in r.subgraphs if s.compiled)


def _double(xs):
    return tuple(x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs)


def _check(fn, args, *, fused_blocks: int | None = None):
    with torch.no_grad():
        ref32 = fn(*args)
        ref64 = fn(*_double(args))
        torch._dynamo.reset()  # the cases share code objects: no automatic dynamic shapes
        compiled, reports = compile_recording(fn, dynamic=False)
        out = compiled(*args)
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)
    air = _air_reports(reports)
    assert "sdpa" in air, air
    if fused_blocks is not None:
        assert f"fuse_attention: {fused_blocks} attention block(s) became sdpa" in air, air
    ok, detail = check_accuracy(out, ref32, ref64)
    assert ok, detail
    return out, ref32


SDPA_CASES = [
    # (B, H, L, S, E, Ev, mask kind, causal, scale)
    (1, 12, 128, 128, 64, 64, None, False, None),
    (2, 4, 7, 129, 80, 80, "float_ls", False, None),
    (2, 3, 129, 3, 65, 7, "float_b11s", False, 0.3),
    (1, 2, 33, 33, 1, 1, "float_bhls", False, None),
    (2, 2, 17, 17, 32, 32, None, True, None),
    (1, 4, 100, 64, 128, 128, "bool_bhls", False, None),
    (1, 1, 1, 1, 64, 64, None, False, None),
    (1, 2, 3, 5, 7, 7, "bool_ls", False, 1.5),
]


def _mask(kind, B, H, L, S, gen):
    if kind is None:
        return None
    if kind.startswith("bool"):
        shape = (L, S) if kind == "bool_ls" else (B, H, L, S)
        return torch.rand(shape, generator=gen) > 0.3
    shape = {"float_ls": (L, S), "float_b11s": (B, 1, 1, S), "float_bhls": (B, H, L, S)}[kind]
    m = torch.randn(shape, generator=gen)
    return m.masked_fill(torch.rand(shape, generator=gen) < 0.2, float("-inf"))


@pytest.mark.parametrize("case", SDPA_CASES, ids=lambda c: "x".join(str(v) for v in c))
def test_sdpa_matches_eager(case):
    B, H, L, S, E, Ev, kind, causal, scale = case
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(B, H, L, E, generator=gen), torch.randn(B, H, S, E, generator=gen)
    v = torch.randn(B, H, S, Ev, generator=gen)
    mask = _mask(kind, B, H, L, S, gen)
    if mask is not None:

        def fn(q, k, v, m):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=scale)

        _check(fn, (q, k, v, mask))
    else:

        def fn(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        _check(fn, (q, k, v))


def test_sdpa_fully_masked_rows_match_eager():
    """Rows with every key masked: eager's CPU kernel gives 0 there, and so do we."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 9, 16, generator=gen) for _ in range(3))
    bmask = torch.rand(9, 9, generator=gen) > 0.5
    bmask[3] = False
    fmask = torch.zeros(9, 9).masked_fill(~bmask, float("-inf"))
    for m in (bmask, fmask):

        def fn(q, k, v, m):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

        out, ref = _check(fn, (q, k, v, m))
        assert torch.equal(out[:, :, 3], ref[:, :, 3])


class DecomposedAttention(nn.Module):
    """softmax(q k^T / sqrt(d) + mask) v written out, as eager attention in transformers does."""

    def forward(self, q, k, v, mask):
        w = torch.matmul(q, k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
        w = w + mask
        return torch.matmul(torch.softmax(w, dim=-1), v)


def test_decomposed_attention_fuses_and_keeps_nan_rows():
    """The pass fires; a row of -inf everywhere is NaN, as eager's softmax gives."""
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 3, 11, 24, generator=gen) for _ in range(3))
    mask = torch.zeros(2, 1, 11, 11)
    mask[0, 0, 4] = float("-inf")
    mask[1, 0, :, 7:] = float("-inf")
    out, ref = _check(DecomposedAttention(), (q, k, v, mask), fused_blocks=1)
    assert torch.isnan(ref[0, :, 4]).all() and torch.isnan(out[0, :, 4]).all()


def _hf_model(name):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if name == "bert":
        m = transformers.BertModel(transformers.BertConfig(num_hidden_layers=2, attn_implementation="eager"))
    elif name == "gpt2":
        m = transformers.GPT2Model(transformers.GPT2Config(n_layer=2, attn_implementation="eager", use_cache=False))
    else:
        cfg = transformers.LlamaConfig(
            hidden_size=256,
            intermediate_size=512,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=1000,
            attn_implementation="eager",
            use_cache=False,
        )
        m = transformers.LlamaForCausalLM(cfg)
    return m.eval()


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_eager_attention_model_fuses_and_matches(name):
    model = _hf_model(name)
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 1000, (2, 37), generator=gen)
    mask = torch.ones(2, 37, dtype=torch.int64)
    mask[0, 29:] = 0  # right padding on one row
    if name == "llama":

        def run(m, ids, mask):
            return m(input_ids=ids, attention_mask=mask, use_cache=False).logits

    else:

        def run(m, ids, mask):
            return m(input_ids=ids, attention_mask=mask).last_hidden_state

    with torch.no_grad():
        ref32 = run(model, ids, mask)
        ref64 = run(copy.deepcopy(model).double(), ids, mask)
        torch._dynamo.reset()
        compiled, reports = compile_recording(lambda ids, mask: run(model, ids, mask), dynamic=False)
        out = compiled(ids, mask)
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)
    air = _air_reports(reports)
    assert "fuse_attention: 2 attention block(s) became sdpa" in air, air
    assert "sdpa_flash" in air, air
    ok, detail = check_accuracy(out, ref32, ref64)
    assert ok, detail
