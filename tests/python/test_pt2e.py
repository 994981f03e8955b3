"""PT2E static int8 (#40 item 2): a model quantized by torchao's prepare_pt2e / convert_pt2e with
X86InductorQuantizer compiles through torchair with no fallback, its linears on libair's
linear_u8s8 (u8 x s8, s32 sums, kernels/gemm_q/gemm_u8s8.h) and its quantizes on `quantize`.

Exactness, and why it is not total: a quantize alone equals torch's bit for bit (the same f32
product, round half to even, clamp). A fused dq -> linear -> relu -> q computes the product
exactly in integers and dequantizes once, where eager sums dequantized f32 products, so the
f32 value before the final rounding differs by f32 noise and a value within that noise of a
rounding boundary can land one step away: u8 results are within one step everywhere and equal
almost everywhere (checked). Model outputs are compared against eager's quantized model with
a tolerance of the final layer's f32 noise plus what one-step flips of its inputs can move."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.python._compile import compile_recording, fallbacks, kernel_steps

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

xiq = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402

qd = torch.ops.quantized_decomposed


def _pt2e(model: nn.Module, x: torch.Tensor, calib: list[torch.Tensor]) -> nn.Module:
    q = xiq.X86InductorQuantizer()
    q.set_global(xiq.get_default_x86_inductor_quantization_config())
    with torch.no_grad():
        m = prepare_pt2e(torch.export.export(model.eval(), (x,)).module(), q)
        for c in calib:
            m(c)
        return convert_pt2e(m)


class MLP(nn.Module):
    def __init__(self, k: int = 67, h: int = 101, n: int = 13) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(k, h), nn.Linear(h, h, bias=False), nn.Linear(h, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 7 * 7, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def _steps(reports):
    return [op for op, _, _ in kernel_steps(reports, "inference")]


@pytest.mark.parametrize("model_cls,shape", [(MLP, (5, 67)), (CNN, (3, 3, 7, 7))])
def test_pt2e_model_compiles_without_fallback_and_matches_eager(model_cls, shape):
    torch.manual_seed(0)
    model = model_cls()
    calib = [torch.randn(*shape) for _ in range(4)]
    qm = _pt2e(model, calib[0], calib)
    compiled, reports = compile_recording(qm)
    with torch.no_grad():
        for i in range(3):
            x = torch.randn(*shape) * (1.0 + i)  # the last ones saturate the input's u8 range
            got, want = compiled(x), qm(x)
            # one step of the last linear's input moves an output by at most its weight row's
            # largest |w|; a few such flips, against outputs of order 1
            scale = want.abs().max().item()
            diff = (got - want).abs()
            assert diff.max().item() <= 0.05 * scale + 1e-5, (diff.max().item(), scale)
            assert (diff <= 1e-4 * scale + 1e-6).float().mean().item() >= 0.9
    assert fallbacks(reports) == []
    steps = _steps(reports)
    n_linear = sum(isinstance(m, nn.Linear) for m in model.modules())
    assert steps.count("linear_u8s8") == n_linear, steps
    n_conv = sum(isinstance(m, nn.Conv2d) for m in model.modules())
    assert steps.count("conv2d_u8s8") == n_conv, steps
    assert "quantize" in steps


class QLinear(nn.Module):
    """dq(q(x)) -> linear(dq_per_channel(W)) [-> relu] -> q, written with the decomposed ops as
    convert_pt2e writes them; the weight, its scales and zero points frozen buffers."""

    def __init__(self, k: int, n: int, relu: bool, x_zp: int, out: tuple[float, int] | None) -> None:
        super().__init__()
        w = torch.randn(n, k)
        ws = w.abs().amax(1) / 127
        self.register_buffer("wq", torch.clamp(torch.round(w / ws[:, None]), -128, 127).to(torch.int8))
        self.register_buffer("ws", ws)
        self.register_buffer("wz", torch.zeros(n, dtype=torch.int64))
        self.register_buffer("b", torch.randn(n) * 0.1)
        self.relu, self.x_zp, self.out = relu, x_zp, out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xq = qd.quantize_per_tensor.default(x, 0.02, self.x_zp, 0, 255, torch.uint8)
        xd = qd.dequantize_per_tensor.default(xq, 0.02, self.x_zp, 0, 255, torch.uint8)
        wd = qd.dequantize_per_channel.default(self.wq, self.ws, self.wz, 0, -128, 127, torch.int8)
        y = torch.nn.functional.linear(xd, wd, self.b)
        if self.relu:
            y = torch.relu(y)
        if self.out is not None:
            y = qd.quantize_per_tensor.default(y, self.out[0], self.out[1], 0, 255, torch.uint8)
        return y


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("x_zp", [0, 128, 255])
@pytest.mark.parametrize("out", [None, (0.05, 100), (0.002, 7)])  # the last saturates
def test_fused_int8_linear_against_eager(relu, x_zp, out):
    torch.ao.quantization.fx._decomposed  # noqa: B018 (the ops are registered)
    torch.manual_seed(1)
    m = QLinear(259, 37, relu, x_zp, out).eval()
    compiled, reports = compile_recording(m)
    with torch.no_grad():
        x = torch.randn(3, 11, 259) * 2  # 3-D: the product sees the flattened rows
        got, want = compiled(x), m(x)
    assert fallbacks(reports) == []
    steps = _steps(reports)
    assert "linear_u8s8" in steps
    assert steps.count("quantize") == 1, steps  # the output's quantize is the product's epilogue
    assert got.dtype == want.dtype and got.shape == want.shape
    if out is None:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    else:
        d = (got.int() - want.int()).abs()
        assert d.max().item() <= 1  # one step where eager's f32 sum rounds the other way
        assert (d == 0).float().mean().item() >= 0.99
        if out[0] < 0.01:
            assert (want == 255).any() and (got == 255).any()


def test_quantize_equals_torch_bit_for_bit():
    torch.ao.quantization.fx._decomposed  # noqa: B018

    def f(x):
        a = qd.quantize_per_tensor.default(x, 0.1, 3, 0, 255, torch.uint8)
        b = qd.quantize_per_tensor.default(x, 0.25, 0, -128, 127, torch.int8)
        return a, b

    # exact halves after the product (0.25 * k + 0.125 over 0.25), and values past both bounds
    x = torch.cat([torch.arange(-300, 300) * 0.25 + 0.125, torch.randn(1001) * 30]).reshape(1, -1)
    compiled, reports = compile_recording(f)
    got, want = compiled(x), f(x)
    assert fallbacks(reports) == []
    assert "quantize" in _steps(reports)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and torch.equal(g, w)


class QConv(nn.Module):
    """dq(q(x)) -> conv2d(dq_per_channel(W)) [-> relu] [-> q], as convert_pt2e writes it."""

    def __init__(self, c: int, o: int, k: int, stride: int, padding: int, dilation: int, relu: bool,
                 out: tuple[float, int] | None) -> None:
        super().__init__()
        w = torch.randn(o, c, k, k)
        ws = w.abs().amax((1, 2, 3)) / 127
        self.register_buffer("wq", torch.clamp(torch.round(w / ws[:, None, None, None]), -128, 127).to(torch.int8))
        self.register_buffer("ws", ws)
        self.register_buffer("wz", torch.zeros(o, dtype=torch.int64))
        self.register_buffer("b", torch.randn(o) * 0.1)
        self.args = (stride, padding, dilation)
        self.relu, self.out = relu, out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xq = qd.quantize_per_tensor.default(x, 0.03, 77, 0, 255, torch.uint8)
        xd = qd.dequantize_per_tensor.default(xq, 0.03, 77, 0, 255, torch.uint8)
        wd = qd.dequantize_per_channel.default(self.wq, self.ws, self.wz, 0, -128, 127, torch.int8)
        s, p, d = self.args
        y = torch.nn.functional.conv2d(xd, wd, self.b, s, p, d)
        if self.relu:
            y = torch.relu(y)
        if self.out is not None:
            y = qd.quantize_per_tensor.default(y, self.out[0], self.out[1], 0, 255, torch.uint8)
        return y


@pytest.mark.parametrize("k,stride,padding,dilation", [(3, 1, 1, 1), (3, 2, 0, 1), (1, 1, 0, 1), (1, 2, 0, 1), (5, 2, 3, 2)])
@pytest.mark.parametrize("relu,out", [(True, (0.05, 0)), (False, None)])
def test_int8_conv_against_eager(k, stride, padding, dilation, relu, out):
    torch.ao.quantization.fx._decomposed  # noqa: B018
    torch.manual_seed(2)
    m = QConv(5, 19, k, stride, padding, dilation, relu, out).eval()
    compiled, reports = compile_recording(m)
    with torch.no_grad():
        x = torch.randn(2, 5, 13, 11) * 2  # padded taps read the zero point 77
        got, want = compiled(x), m(x)
    assert fallbacks(reports) == []
    steps = _steps(reports)
    assert "conv2d_u8s8" in steps, steps
    assert got.dtype == want.dtype and got.shape == want.shape
    if out is None:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    else:
        assert steps.count("quantize") == 1, steps
        d = (got.int() - want.int()).abs()
        assert d.max().item() <= 1
        assert (d == 0).float().mean().item() >= 0.99
