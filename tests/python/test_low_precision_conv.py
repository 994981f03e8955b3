"""Convolutions in bf16 and fp16 (#32): a 16-bit CNN's convolutions read their 16-bit weights
(kernels/conv/conv_nhwc_lowp.c: in place for a 1x1, permuted once otherwise, batch norm folded
into a 16-bit weight), mixed_precision converts an fp32 CNN's conv weights once, and an
autocast region's conv takes the same kernels. The stem (3 input channels) and depthwise convs
keep small f32 weights (lowering/lowp.py). Results are checked with SPEC section 4's rule
(bench/accuracy.py) against eager in the same dtype and fp64."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bench.accuracy import check_accuracy
from tests.python._compile import compile_recording, fallbacks, kernel_steps, run_mixed_precision

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _bn(c):
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.2, 0.2)
    return bn


class Net(nn.Module):
    """A ResNet-like CNN: a stem, a bottleneck with a projection, a strided 3x3, a dilated one,
    a depthwise conv, a pool and a head; channel counts off the vector widths."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 7, 2, 3, bias=False), _bn(24), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.reduce = nn.Sequential(nn.Conv2d(24, 20, 1, bias=False), _bn(20), nn.ReLU())
        self.spatial = nn.Sequential(nn.Conv2d(20, 20, 3, 1, 1, bias=False), _bn(20), nn.ReLU())
        self.expand = nn.Sequential(nn.Conv2d(20, 72, 1, bias=False), _bn(72))
        self.project = nn.Sequential(nn.Conv2d(24, 72, 1, bias=False), _bn(72))
        self.down = nn.Conv2d(72, 40, 3, 2, 1)
        self.dilated = nn.Conv2d(40, 33, 3, 1, 2, dilation=2)
        self.depthwise = nn.Conv2d(33, 33, 3, 1, 1, groups=33)
        self.head = nn.Linear(33, 10)

    def forward(self, x):
        x = self.stem(x)
        y = torch.relu(self.expand(self.spatial(self.reduce(x))) + self.project(x))
        y = torch.nn.functional.hardswish(self.dilated(torch.relu(self.down(y))))
        y = self.depthwise(y).mean((2, 3))
        return self.head(y)


def _net(dtype):
    torch.manual_seed(0)
    return Net().eval().to(dtype)


def _conv_kernels(reports):
    return [k for op, k, _ in kernel_steps(reports, "inference") if op.startswith("conv2d")]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_a_16_bit_cnn_runs_its_convs_on_16_bit_weights(dtype):
    model = _net(dtype)
    model64 = _net(torch.float64)
    model64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    x = torch.randn(2, 3, 45, 37).to(dtype)
    compiled, reports = compile_recording(model)
    with torch.no_grad():
        out = compiled(x)
        ref, ref64 = model(x), model64(x.double())
    assert out.dtype == dtype
    assert not fallbacks(reports), fallbacks(reports)
    ok, detail = check_accuracy(out, ref, ref64)
    assert ok, detail
    kernels = _conv_kernels(reports)
    # 1x1 in place: reduce, expand, project; im2col: spatial, down, dilated; the stem and
    # the depthwise conv keep f32 weights
    assert kernels.count("conv2d_nhwc_lowp_1x1") == 3, kernels
    assert kernels.count("conv2d_nhwc_lowp_im2col") == 3, kernels
    assert len(kernels) == 8 and not any("lowp" in k for k in (kernels[0], kernels[-1])), kernels
    # the report says which steps ran on 16-bit weights
    assert "precision: 7 product(s) on 16-bit weights (conv2d_nhwc x6, linear x1)" in str(reports[0]), str(reports[0])


def test_a_bf16_cnn_holds_its_conv_weights_in_16_bits():
    """No f32 copy of a conv weight: what the graph holds (batch-norm-folded weights, which
    are new values, and the permuted copies) is 2 bytes a conv weight value, plus the small
    f32 weights (stem, depthwise, biases: up to 8 bytes a value, widened and packed)."""
    model = _net(torch.bfloat16)
    compiled, reports = compile_recording(model)
    with torch.no_grad():
        compiled(torch.randn(1, 3, 32, 32).to(torch.bfloat16))
    text = "\n".join(s.air_report for r in reports for s in r.subgraphs)
    held = sum(int(line.split("(")[1].split()[0]) for line in text.splitlines() if "weights held by the model:" in line)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    lowp = sum(m.weight.numel() for m in convs if m.groups == 1 and m.in_channels >= 16)
    small = sum(p.numel() for p in model.parameters()) - lowp
    assert 0 < held <= 2 * lowp + 8 * small + 4 * 1024, (held, lowp, small, text)
    assert held < 4 * lowp  # an f32 copy of the conv weights alone would be more


def test_mixed_precision_bf16_runs_an_fp32_cnn_on_bf16_conv_weights():
    model = _net(torch.float32)
    x = torch.randn(2, 3, 40, 40)
    out, reports, want, auto = run_mixed_precision(model, x)
    assert out.dtype == torch.float32
    assert not fallbacks(reports)
    kernels = _conv_kernels(reports)
    assert kernels.count("conv2d_nhwc_lowp_1x1") == 3 and kernels.count("conv2d_nhwc_lowp_im2col") == 3, kernels
    # 6 conv weights and the head converted once
    assert "7 f32 weight(s) read as 16-bit copies" in str(reports[0]), str(reports[0])
    err, auto_err = (out - want).abs().max().item(), (auto - want).abs().max().item()
    assert 0 < err <= 1.5 * auto_err + 1e-3, (err, auto_err)


class _AutocastConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 48, 3, padding=1)
        self.out = nn.Conv2d(48, 16, 1)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.relu(self.conv(x))
        return self.out(y.float())


@pytest.mark.parametrize("freezing", [True, False], ids=["frozen", "not-frozen"])
def test_autocast_region_runs_its_conv_on_bf16_weights(freezing):
    torch.manual_seed(0)
    model = _AutocastConv().eval()
    x = torch.randn(2, 32, 12, 10)
    compiled, reports = compile_recording(model, {"freezing": freezing})
    with torch.no_grad():
        out = compiled(x)
        want = model(x)
    assert out.dtype == want.dtype == torch.float32
    assert not fallbacks(reports)
    kernels = _conv_kernels(reports)
    assert kernels.count("conv2d_nhwc_lowp_im2col") == 1, kernels
    assert not any("lowp" in k for k in kernels if "1x1" in k), kernels  # the fp32 conv stays fp32
    assert torch.allclose(out, want, rtol=2e-2, atol=2e-2), (out - want).abs().max()
