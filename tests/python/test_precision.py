"""torch's fp32 precision knobs honoured for fp32 models (#40 item 1, torchair/precision.py):
'highest' keeps every product fp32, bit for bit; 'high' is fp32 too (no tf32 on a CPU, and three
bf16 passes would be slower than fp32); 'medium' (or torch.backends.mkldnn.matmul.fp32_precision
= 'bf16') runs frozen linears on bf16 copies with f32 accumulation, and convolutions unless
torch.backends.mkldnn.conv.fp32_precision keeps them fp32; results within SPEC section 4's bf16
rule (RMSE against fp64 at most 3x eager's under autocast bf16). A change of the knobs that dynamo
does not guard ('high' <-> 'medium', the mkldnn knobs) is checked by torchair on every call."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.accuracy import check_accuracy
from tests.python._compile import compile_recording, fallbacks, kernel_steps

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture(autouse=True)
def _restore_precision():
    yield
    torch.backends.mkldnn.conv.fp32_precision = "none"
    torch.set_float32_matmul_precision("highest")


class _Net(nn.Module):
    """A convolution of 16 input channels (the 16-bit conv path's minimum), an MLP and attention."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 3, padding=1)
        self.a = nn.Linear(32, 96)
        self.b = nn.Linear(96, 32)
        self.qkv = nn.Linear(32, 96)

    def forward(self, x):
        h = torch.relu(self.conv(x)).flatten(2).transpose(1, 2)  # [B, 64, 32]
        h = h + self.b(F.gelu(self.a(h)))
        q, k, v = self.qkv(h).view(h.shape[0], -1, 3, 4, 8).unbind(2)
        att = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return h + att.transpose(1, 2).reshape(h.shape)


def _net():
    torch.manual_seed(0)
    return _Net().eval()


X = torch.randn(2, 16, 8, 8, generator=torch.Generator().manual_seed(1))


def _run(model, x=X, options=None):
    compiled, reports = compile_recording(model, options)
    with torch.no_grad():
        out = compiled(x)
    assert not fallbacks(reports), fallbacks(reports)
    return out, reports, compiled


def _kinds(reports):
    return {(op, k) for op, k, _ in kernel_steps(reports, "inference") if op in ("linear", "conv2d_nhwc", "conv2d", "sdpa", "mm", "addmm")}


def test_highest_is_unchanged_bit_for_bit_and_high_is_fp32():
    model = _net()
    out, reports, _ = _run(model)
    assert not any("lowp" in k for _, k in _kinds(reports)), _kinds(reports)
    assert "fp32 precision" not in str(reports[0])
    torch.set_float32_matmul_precision("highest")
    torch._dynamo.reset()
    again, _, _ = _run(model)
    assert torch.equal(out, again)
    torch.set_float32_matmul_precision("high")
    torch._dynamo.reset()
    high, reports, _ = _run(model)
    assert torch.equal(out, high)  # 'high' computes fp32: the same kernels
    assert "linears fp32 (tf32 asked" in str(reports[0]), str(reports[0])


def test_medium_runs_linears_and_convs_in_bf16_within_the_bf16_tolerance():
    model = _net()
    highest, _, _ = _run(model)
    torch._dynamo.reset()
    torch.set_float32_matmul_precision("medium")
    out, reports, _ = _run(model)
    kinds = _kinds(reports)
    assert ("linear", "linear_lowp_weight") in kinds, kinds
    assert any(op == "conv2d_nhwc" and "lowp" in k for op, k in kinds), kinds
    assert ("sdpa", "sdpa_lowp") not in kinds  # attention stays f32: no bf16 activation kernels yet
    text = str(reports[0])
    assert "fp32 precision: linears bf16 (one pass, f32 accumulation), convolutions bf16" in text, text
    assert "precision: 4 product(s) on 16-bit weights (conv2d_nhwc x1, linear x3)" in text, text
    assert "in f32 (sdpa x1)" in text, text
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            auto = model(X).float()
        ref64 = model.double()(X.double())
    ok, detail = check_accuracy(out, auto, ref64, multiplier=3)
    assert ok, detail
    assert (out - highest).abs().max() > 1e-3  # measurably not fp32
    model.float()


def test_mkldnn_knobs_directly_and_conv_kept_fp32():
    model = _net()
    torch.backends.mkldnn.matmul.fp32_precision = "bf16"
    torch.backends.mkldnn.conv.fp32_precision = "ieee"
    _, reports, _ = _run(model)
    kinds = _kinds(reports)
    assert ("linear", "linear_lowp_weight") in kinds, kinds
    assert not any(op.startswith("conv") and "lowp" in k for op, k in kinds), kinds
    assert "convolutions fp32" in str(reports[0])


def test_switch_between_high_and_medium_compiles_again():
    """dynamo guards 'highest' against the others (allow_tf32) but not 'high' against 'medium':
    torchair's own check compiles the graph again for the new setting, and keeps both."""
    model = _net()
    torch.set_float32_matmul_precision("high")
    high, reports, compiled = _run(model)
    torch.set_float32_matmul_precision("medium")
    with torch.no_grad():
        medium = compiled(X)
    assert len(reports) == 2 and any("lowp" in k for _, k in _kinds(reports[1:])), len(reports)
    assert (medium - high).abs().max() > 1e-3
    torch.set_float32_matmul_precision("high")
    with torch.no_grad():
        assert torch.equal(compiled(X), high)
    assert len(reports) == 2  # the 'high' graph was kept


def test_a_change_under_symbolic_shapes_is_refused():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).eval()
    torch.set_float32_matmul_precision("high")
    compiled, _ = compile_recording(model, dynamic=True)
    with torch.no_grad():
        compiled(torch.randn(3, 32))
        torch.set_float32_matmul_precision("medium")
        with pytest.raises(Exception, match="torch._dynamo.reset"):
            compiled(torch.randn(5, 32))


def test_mixed_precision_option_wins():
    model = _net()
    torch.set_float32_matmul_precision("medium")
    _, reports, _ = _run(model, options={"mixed_precision": "fp16"})
    assert "fp32 precision" not in str(reports[0])
