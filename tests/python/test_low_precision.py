"""bf16 and fp16 (#32): models in 16-bit floats compile onto libair with their weights read in
place (no f32 copy), compute in f32 between the products, and return their own dtype;
mixed_precision runs an fp32 model's linears on 16-bit weights converted once. Results are
checked with SPEC section 4's rule (bench/accuracy.py: RMSE against fp64 at most 3x eager's in
the same 16-bit dtype)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.accuracy import check_accuracy
from tests.python._compile import compile_recording, fallbacks, kernel_steps, run_mixed_precision

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
LOW = [torch.bfloat16, torch.float16]


class Block(nn.Module):
    """A transformer MLP block: norm, gated linears, residual."""

    def __init__(self, d=96, h=160):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.gate = nn.Linear(d, h, bias=False)
        self.up = nn.Linear(d, h)
        self.down = nn.Linear(h, d)

    def forward(self, x):
        y = self.norm(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


def _model(dtype):
    torch.manual_seed(0)
    return nn.Sequential(Block(), Block(), nn.Linear(96, 40)).eval().to(dtype)


def _check(out, model_lp, model64, x):
    with torch.no_grad():
        ref = model_lp(x)
        ref64 = model64(x.double())
    ok, detail = check_accuracy(out, ref, ref64)
    assert ok, detail
    return detail


@pytest.mark.parametrize("dtype", LOW, ids=["bf16", "fp16"])
def test_a_16_bit_model_compiles_whole_and_matches_eager(dtype):
    model = _model(dtype)
    model64 = _model(torch.float64)
    model64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    x = torch.randn(3, 7, 96).to(dtype)
    compiled, reports = compile_recording(model)
    with torch.no_grad():
        out = compiled(x)
    assert out.dtype == dtype
    assert not fallbacks(reports), fallbacks(reports)
    _check(out, model, model64, x)
    linears = [s for s in kernel_steps(reports, "inference") if s[0] == "linear"]
    assert len(linears) == 7 and all(k == "linear_lowp_weight" for _, k, _ in linears), linears


@pytest.mark.parametrize("dtype", LOW, ids=["bf16", "fp16"])
def test_weights_are_read_in_place(dtype):
    """No f32 (or any) copy of a 16-bit weight: the compiled graphs hold no weight bytes of
    their own beyond small widened vectors (norm weights, biases)."""
    model = _model(dtype)
    compiled, reports = compile_recording(model)
    with torch.no_grad():
        compiled(torch.randn(2, 96).to(dtype))
    text = "\n".join(s.air_report for r in reports for s in r.subgraphs)
    held = [int(line.split("(")[1].split()[0]) for line in text.splitlines() if "weights held by the model:" in line]
    big = sum(p.numel() for p in model.parameters() if p.dim() == 2)
    assert held and sum(held) < big, text  # fewer bytes held than the 2-D weights have elements


def test_mixed_precision_bf16_on_an_fp32_model():
    model = _model(torch.float32)
    x = torch.randn(5, 96)
    out, reports, want, auto = run_mixed_precision(model, x)
    assert out.dtype == torch.float32
    assert not fallbacks(reports)
    # the report counts the bf16 copies: 2 bytes a weight value
    weights = sum(p.numel() for p in model.parameters() if p.dim() == 2)
    assert f"7 f32 weight(s) read as 16-bit copies, {2 * weights} bytes" in str(reports[0]), str(reports[0])
    linears = [s for s in kernel_steps(reports, "inference") if s[0] == "linear"]
    assert linears and all(k == "linear_lowp_weight" for _, k, _ in linears), linears
    # closer to fp32 than autocast's bf16 run is (activations stay f32 between products)
    err, auto_err = (out - want).abs().max().item(), (auto - want).abs().max().item()
    assert err <= 1.5 * auto_err + 1e-3, (err, auto_err)
    assert err > 0  # the products did run in bf16


def test_mixed_precision_value_is_checked():
    with pytest.raises(Exception, match="mixed_precision must be 'bf16' or 'fp16'"):
        torch.compile(_model(torch.float32), backend="torchair", options={"mixed_precision": "int8"})(torch.randn(2, 96))


@pytest.mark.parametrize("dtype", LOW, ids=["bf16", "fp16"])
def test_embedding_attention_and_tied_head(dtype):
    """A GPT-style stack in 16 bits: embedding table gathered in place, attention in f32,
    the head tied to the embedding (one 16-bit tensor read by gather and by linear)."""

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(300, 64)
            self.attn = nn.MultiheadAttention(64, 4, batch_first=True)
            self.norm = nn.LayerNorm(64)
            self.head = nn.Linear(64, 300, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, ids):
            h = self.emb(ids)
            a, _ = self.attn(h, h, h, need_weights=False, is_causal=False)
            return self.head(self.norm(h + a))

    torch.manual_seed(0)
    model = Tiny().eval().to(dtype)
    model64 = Tiny().eval().double()
    model64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    ids = torch.randint(0, 300, (2, 11))
    compiled, reports = compile_recording(model)
    with torch.no_grad():
        out = compiled(ids)
        ref, ref64 = model(ids), model64(ids)
    assert out.dtype == dtype
    ok, detail = check_accuracy(out, ref, ref64)
    assert ok, detail
    cos = F.cosine_similarity(out.double().flatten(), ref64.flatten(), dim=0).item()
    assert cos > 0.99, cos


def test_bf16_nan_and_inf_propagate_like_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(40, 24), nn.ReLU(), nn.Linear(24, 8)).eval().to(torch.bfloat16)
    x = torch.randn(4, 40).to(torch.bfloat16)
    x[1, 3] = float("nan")
    x[2, 5] = float("inf")
    compiled, _ = compile_recording(model)
    with torch.no_grad():
        out, ref = compiled(x), model(x)
    assert torch.equal(torch.isnan(out), torch.isnan(ref))
    assert torch.equal(torch.isinf(out), torch.isinf(ref))
    finite = torch.isfinite(ref)
    torch.testing.assert_close(out[finite].float(), ref[finite].float(), rtol=3e-2, atol=3e-2)


def _llama(dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=500, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval().to(dtype)


@pytest.mark.parametrize("dtype", LOW, ids=["bf16", "fp16"])
def test_llama_generate_in_16_bits(dtype):
    """transformers' generate with the compiled forward, dynamic KV cache: at most 3 graphs for
    the whole generate, logits as close to fp32 as eager's own, greedy tokens compared with
    eager in the same dtype (they may part where two logits are within rounding: torchair keeps
    activations in f32 between products, eager rounds them to 16 bits after every op)."""
    from torch._dynamo.utils import counters

    model = _llama(dtype)
    model32 = _llama(torch.float32)
    model32.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    ids = torch.randint(0, 500, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=0)
        eager_logits = model(ids).logits.float()
        ref = model32(ids).logits
        model.forward = torch.compile(model.forward, backend="torchair")
        counters.clear()
        got = model.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=0)
        graphs = counters["stats"]["unique_graphs"]
        logits = model(ids).logits
    assert logits.dtype == dtype
    assert graphs <= 3, graphs
    cos = F.cosine_similarity(logits.float().flatten(), ref.flatten(), dim=0).item()
    eager_cos = F.cosine_similarity(eager_logits.flatten(), ref.flatten(), dim=0).item()
    assert cos >= 0.99 and cos >= eager_cos - 1e-3, (cos, eager_cos)
    agree = (got[0, 12:] == want[0, 12:]).float().mean().item()
    print(f"{dtype}: logits cosine vs fp32 {cos:.5f} (eager {eager_cos:.5f}); greedy tokens agree {agree:.0%}")
    assert got[0, 12] == want[0, 12]  # the first new token comes from logits this close


def test_llama_mixed_precision_prefill():
    model = _llama(torch.float32)
    ids = torch.randint(0, 500, (2, 16), generator=torch.Generator().manual_seed(2))
    compiled = torch.compile(model, backend="torchair", options={"mixed_precision": "bf16"})
    with torch.no_grad():
        out, ref = compiled(ids).logits, model(ids).logits
    assert out.dtype == torch.float32
    cos = F.cosine_similarity(out.flatten(), ref.flatten(), dim=0).item()
    assert 0.99 <= cos < 1.0, cos


class _Autocast(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 128)
        self.b = nn.Linear(128, 32)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = torch.relu(self.a(x))
        return self.b(h.float())


@pytest.mark.parametrize("freezing", [True, False], ids=["frozen", "weights_as_inputs"])
def test_autocast_region_runs_its_linear_in_bf16(freezing):
    """The linear inside torch.autocast takes the bf16 kernel (its weight converted once when
    frozen, on every call otherwise, as autocast does); the one after it stays f32."""
    torch.manual_seed(0)
    model, x = _Autocast().eval(), torch.randn(4, 64)
    compiled, reports = compile_recording(model, {"freezing": freezing})
    with torch.no_grad():
        out, auto = compiled(x), model(x)
        model.a.float()
        fp32 = model.b(torch.relu(model.a(x)))
    assert out.dtype == torch.float32 and not fallbacks(reports)
    kernels = [k for op, k, _ in kernel_steps(reports, "inference") if op == "linear"]
    assert kernels[0] == "linear_lowp_weight" and kernels[1] != "linear_lowp_weight", kernels
    err, auto_err = (out - fp32).abs().max().item(), (auto - fp32).abs().max().item()
    assert 0 < err <= 1.5 * auto_err, (err, auto_err)


def test_converted_weights_are_shared_between_graphs_and_never_stale():
    """mixed_precision's 16-bit copy of a weight is made once for all graphs of the model (a
    generate compiles 3), and made again after the weight changes, also through .data."""
    from torchair.lowering.lowp import shared_conversion

    w = torch.randn(64, 32)
    a = shared_conversion(w, torch.bfloat16)
    assert shared_conversion(w, torch.bfloat16) is a
    assert shared_conversion(w, torch.float16) is not a
    w.data.mul_(2)  # no version bump
    b = shared_conversion(w, torch.bfloat16)
    assert b is not a and torch.equal(b, w.to(torch.bfloat16))
    with torch.no_grad():
        w.add_(1)
    c = shared_conversion(w, torch.bfloat16)
    assert c is not b and torch.equal(c, w.to(torch.bfloat16))

    model = _model(torch.float32)
    compiled, reports = compile_recording(model, {"mixed_precision": "bf16"}, dynamic=False)
    with torch.no_grad():
        compiled(torch.randn(2, 96))
        compiled(torch.randn(3, 5, 96))  # a second graph
        model[2].weight.data.copy_(torch.randn_like(model[2].weight))  # a weight sync
        x = torch.randn(2, 96)
        got, want = compiled(x), model(x)
    assert len(reports) == 2
    err = (got - want).abs().max().item()
    assert err < 0.05 * want.abs().max().item(), err  # the new weight, in bf16


def test_lm_head_stores_its_logits_in_16_bits():
    """narrow_outputs: the head's linear writes the bf16 logits itself (no f32 copy of them,
    no cast step), and the answer is the same as with the pass off."""
    model = _llama(torch.bfloat16)
    ids = torch.randint(0, 500, (1, 40), generator=torch.Generator().manual_seed(3))
    compiled, reports = compile_recording(model)
    plain, plain_reports = compile_recording(model, {"disabled_passes": ["narrow_outputs"]})
    with torch.no_grad():
        got, base = compiled(ids).logits, plain(ids).logits
    steps, plain_steps = kernel_steps(reports, "inference"), kernel_steps(plain_reports, "inference")
    assert [s for s in steps if s[0] == "linear" and s[2].startswith("bf16[")] == [("linear", "linear_lowp_weight", "bf16[1,")]
    assert not [s for s in plain_steps if s[0] == "linear" and s[2].startswith("bf16[")]
    assert sum(s[0] == "cast" for s in plain_steps) == sum(s[0] == "cast" for s in steps) + 1
    assert torch.equal(got, base)
