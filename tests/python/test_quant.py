"""Weight-only quantization (#40 item 3): options={'weight_quantization': 'int8'|'int4'} quantizes
the frozen weights of an fp32 model's linears once, group-wise with f16 scales, and runs them on
libair's linear_q (kernels/gemm_q): checked against the same model with its weights replaced by
their dequantized values (the quantization error taken out, so only f32 summation order is
left), on the decode (M <= 8) and prefill paths, K not a multiple of the group, N odd; then a
small LLaMA's logits against fp32 (cosine >= 0.99 int8, >= 0.98 int4), greedy generate against
the fp32 model, and the bytes the report counts."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.python._compile import compile_recording, fallbacks, kernel_steps
from torchair.lowering.quant import group_for, quantize

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
FORMATS = ["int8", "int4"]


def _dequantized(w: torch.Tensor, fmt: str, group: int | None) -> torch.Tensor:
    """What linear_q computes with: q * s, from torchair's own quantizer."""
    bits = 8 if fmt == "int8" else 4
    n, k = w.shape
    g = group_for(fmt, group, k)
    q, s = quantize(w, bits, g)
    if bits == 4:
        blocks = q.view(n, -1, 16)
        lo, hi = (blocks & 15).to(torch.int8) - 8, (blocks >> 4).to(torch.int8) - 8
        q = torch.cat([lo, hi], dim=-1).reshape(n, -1)
    deq = q.float().view(n, -1, g) * s.float().unsqueeze(-1)
    return deq.reshape(n, -1)[:, :k]


def _with_dequantized_weights(model: nn.Module, fmt: str, group: int | None) -> nn.Module:
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for m in ref.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_(_dequantized(m.weight, fmt, group))
    return ref


class _MLP(nn.Module):
    """K = 96 and 161 (not multiples of 32 or 64), N odd, with and without bias."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(96, 161)
        self.b = nn.Linear(161, 41, bias=False)
        self.c = nn.Linear(41, 7)

    def forward(self, x):
        return self.c(F.silu(self.b(torch.relu(self.a(x)))))


@pytest.mark.parametrize("group", [None, 64], ids=["default_group", "group64"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rows", [(1,), (3, 1), (2, 37)], ids=["decode1", "decode3", "prefill74"])
def test_linears_run_quantized_and_match_the_dequantized_model(fmt, group, rows):
    torch.manual_seed(0)
    model = _MLP().eval()
    options = {"weight_quantization": fmt}
    if group is not None:
        options["weight_quantization_group_size"] = group
    x = torch.randn(*rows, 96)
    compiled, reports = compile_recording(model, options)
    with torch.no_grad():
        out = compiled(x)
        want = _with_dequantized_weights(model, fmt, group)(x)
        fp32 = model(x)
    assert not fallbacks(reports), fallbacks(reports)
    kernels = [(op, k) for op, k, _ in kernel_steps(reports, "inference") if op.startswith("linear")]
    assert [op for op, _ in kernels] == ["linear_q"] * 3, kernels
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    assert (out - fp32).abs().max() > 1e-4  # the weights really were quantized
    text = str(reports[0])
    assert f"quantized weights: 3 linear weight(s) {fmt}" in text, text


def test_k_per_channel_int8_and_bf16_model():
    """int8's default group is the whole row; a bf16 model's weights quantize too (from their
    16-bit values) and its output keeps bf16."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(64, 33), nn.GELU(), nn.Linear(33, 16)).eval()
    x = torch.randn(5, 64)
    compiled, reports = compile_recording(model, {"weight_quantization": "int8"})
    with torch.no_grad():
        out = compiled(x)
        want = _with_dequantized_weights(model, "int8", None)(x)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    assert "group 64" in str(reports[0]) and "group 64" in str(reports[0])  # 33 columns: one group of 64
    model16 = copy.deepcopy(model).to(torch.bfloat16)
    compiled, reports = compile_recording(model16, {"weight_quantization": "int4"})
    with torch.no_grad():
        out = compiled(x.to(torch.bfloat16))
    assert out.dtype == torch.bfloat16 and not fallbacks(reports)
    assert [op for op, _, _ in kernel_steps(reports, "inference") if op.startswith("linear")] == ["linear_q"] * 2


def test_weights_as_inputs_are_not_quantized():
    """freezing=False: the weights are graph inputs, nothing is quantized (results are fp32's)."""
    torch.manual_seed(2)
    model, x = _MLP().eval(), torch.randn(2, 96)
    compiled, reports = compile_recording(model, {"weight_quantization": "int4", "freezing": False})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    assert "linear_q" not in [op for op, _, _ in kernel_steps(reports, "inference")]


def test_a_changed_weight_is_quantized_again():
    torch.manual_seed(3)
    model, x = _MLP().eval(), torch.randn(1, 96)
    compiled, _ = compile_recording(model, {"weight_quantization": "int8"})
    with torch.no_grad():
        compiled(x)
        model.a.weight.mul_(2.0)
        out = compiled(x)
        want = _with_dequantized_weights(model, "int8", None)(x)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


def _llama():
    from torchair.zoo.hf import llama_small

    torch.manual_seed(0)
    model, inputs = llama_small()
    return model.hf, inputs


@pytest.mark.parametrize("fmt, min_cos, ratio", [("int8", 0.99, 4.0), ("int4", 0.98, 7.0)])
def test_llama_logits_and_greedy_generate(fmt, min_cos, ratio):
    """The small LLaMA of zoo/hf.py: logits' cosine to fp32, the weight bytes held (about 1/4 and
    1/8 of fp32 with the scales), and greedy tokens of a whole generate against the fp32 model's
    (they part where two logits are closer than the quantization moves them)."""
    from torch._dynamo.utils import counters

    model, _ = _llama()
    model.config.use_cache = True
    ids = torch.randint(0, 1000, (1, 16), generator=torch.Generator().manual_seed(4))
    deq = _with_dequantized_weights(model, fmt, None)
    with torch.no_grad():
        ref = model(ids).logits
        want = model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)
        want_deq = deq.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)
        top2 = ref[0].topk(2, dim=-1).values
        gap = (top2[:, 0] - top2[:, 1]).median().item()
        moved = (deq(ids).logits - ref).abs().median().item()
        fwd = model.forward
        backend_options = {"weight_quantization": fmt}
        compiled, reports = compile_recording(fwd, backend_options)
        model.forward = compiled
        counters.clear()
        got = model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)
        graphs = counters["stats"]["unique_graphs"]
        logits = model(ids).logits
    assert graphs <= 3, graphs
    cos = F.cosine_similarity(logits.flatten(), ref.flatten(), dim=0).item()
    agree = (got[0, 16:] == want[0, 16:]).float().mean().item()
    first_diff = next((i for i in range(16) if got[0, 16 + i] != want[0, 16 + i]), 16)
    r = reports[0]
    held = sum(b for s in r.subgraphs for _, _, b, _ in getattr(s, "quantized", []))
    fp32 = sum(f for s in r.subgraphs for _, _, _, f in getattr(s, "quantized", []))
    agree_deq = (got[0, 16:] == want_deq[0, 16:]).float().mean().item()
    print(f"{fmt}: logits cosine vs fp32 {cos:.5f}; greedy tokens agree with fp32's {agree:.0%} (first difference "
          f"at new token {first_diff}; random weights: fp32's median top-2 logit gap {gap:.4f}, the quantization "
          f"moves a logit by {moved:.4f}), with eager on the dequantized weights {agree_deq:.0%}; weights {held} "
          f"bytes for {fp32} fp32 bytes ({fp32 / held:.2f}x smaller)")
    assert got[0, 16] == want_deq[0, 16]  # the kernels compute what the quantized weights say
    assert cos >= min_cos, cos
    assert held > 0 and ratio * 0.95 <= fp32 / held <= 8.0, (held, fp32)
    assert not [f for f in fallbacks(reports) if "linear" in f[1] or "mm" in f[1]], fallbacks(reports)
