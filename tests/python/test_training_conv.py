"""The convolution's backward compiled (aten.convolution_backward lowered to
libair's conv2d_backward_input / conv2d_backward_weight and a sum for the
bias): a small CNN with every kind of conv the forward supports (bias,
stride, padding, dilation, groups, depthwise, 1x1, 1-d) trained one step
compiled and in eager from the same weights, the gradients of the input and
of every parameter judged against an fp64 eager run (SPEC section 4: within
2x eager fp32's own error), and convolution_backward no longer among the
fallbacks. Then output_mask honoured (only the gradients asked for) and
transposed convolutions still falling back."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from _compile import compile_recording, fallbacks, kernel_steps

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 12, 5, stride=2, padding=2)  # bias, strided, 5x5
        self.bn = nn.BatchNorm2d(12)
        self.grouped = nn.Conv2d(12, 16, 3, padding=1, groups=2, bias=False)
        self.depthwise = nn.Conv2d(16, 16, 3, stride=2, padding=2, dilation=2, groups=16)
        self.pointwise = nn.Conv2d(16, 20, 1)
        self.down = nn.Conv2d(20, 24, 1, stride=2, bias=False)
        self.wide = nn.Conv2d(24, 8, (3, 2), padding=(1, 0), dilation=(1, 2))
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.stem(x)))
        x = torch.tanh(self.grouped(x))
        x = self.depthwise(x) * 0.5
        x = torch.sigmoid(self.pointwise(x))
        x = self.down(x)
        x = self.wide(x)
        return self.head(x.mean(dim=(2, 3)))


class Conv1dNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(4, 6, 3, stride=2, padding=1)
        self.b = nn.Conv1d(6, 6, 5, padding=4, dilation=2, groups=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.tanh(self.a(x)))


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def _grads(fn, model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    out = fn(x)
    out.double().square().mean().backward()
    return {"input": x.grad, **{n: p.grad for n, p in model.named_parameters()}}


def _check_step(model: nn.Module, x: torch.Tensor) -> list:
    """One step compiled, in eager fp32 and in eager fp64 from the same
    weights; every gradient within 2x eager fp32's error against fp64.
    Returns the compile reports."""
    ref = copy.deepcopy(model)
    exact = copy.deepcopy(model).double()
    compiled_model = copy.deepcopy(model)
    compiled, reports = compile_recording(compiled_model)
    xs = [x.clone().requires_grad_(True), x.clone().requires_grad_(True), x.double().requires_grad_(True)]
    got = _grads(compiled, compiled_model, xs[0])
    want = _grads(ref, ref, xs[1])
    exact_g = _grads(exact, exact, xs[2])
    for name in exact_g:
        ours, eager = _rel_err(got[name], exact_g[name]), _rel_err(want[name], exact_g[name])
        assert ours <= 2 * eager + 1e-6, (name, ours, eager)
    return reports


def _fallback_ops(reports: list) -> set[str]:
    return {f[1] for f in fallbacks(reports)}


def test_small_cnn_step_matches_fp64():
    torch.manual_seed(0)
    model = SmallCNN().eval()  # batch norm in eval: its running stats, no batch statistics
    x = torch.randn(3, 3, 29, 27)
    reports = _check_step(model, x)
    assert "aten.convolution_backward.default" not in _fallback_ops(reports)
    kernels = {k for _, k, _ in kernel_steps(reports, "backward")}
    assert {"conv2d_backward_input_gemm", "conv2d_backward_weight_gemm"} <= kernels, kernels


def test_conv1d_step_matches_fp64():
    torch.manual_seed(1)
    x = torch.randn(2, 4, 37)
    reports = _check_step(Conv1dNet(), x)
    assert "aten.convolution_backward.default" not in _fallback_ops(reports)


def test_train_mode_batch_norm_model():
    """In train mode batch norm may run in eager; the convs' backward still compiles."""
    torch.manual_seed(2)
    model = SmallCNN().train()
    reports = _check_step(model, torch.randn(4, 3, 21, 22))
    assert "aten.convolution_backward.default" not in _fallback_ops(reports)


def test_output_mask_only_weight_gradient():
    """A first conv whose input needs no gradient: output_mask [False, True, True],
    the input's gradient neither computed nor returned."""
    torch.manual_seed(3)
    conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
    ref = copy.deepcopy(conv)
    compiled, reports = compile_recording(conv)
    x = torch.randn(2, 3, 17, 15)
    compiled(x).square().sum().backward()
    ref(x).square().sum().backward()
    torch.testing.assert_close(conv.weight.grad, ref.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(conv.bias.grad, ref.bias.grad, rtol=1e-4, atol=1e-4)
    assert "aten.convolution_backward.default" not in _fallback_ops(reports)
    steps = kernel_steps(reports, "backward")
    assert not any(op == "conv2d_backward_input" for op, _, _ in steps), steps


def test_output_mask_only_input_gradient():
    """Frozen weights (no bias): only the input's gradient."""
    torch.manual_seed(4)
    conv = nn.Conv2d(6, 4, 3, padding=1, bias=False).requires_grad_(False)
    compiled, reports = compile_recording(conv)
    x = torch.randn(2, 6, 9, 10, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    compiled(x).square().sum().backward()
    conv(x2).square().sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-4)
    steps = kernel_steps(reports, "backward")
    assert any(op == "conv2d_backward_input" for op, _, _ in steps), steps
    assert not any(op == "conv2d_backward_weight" for op, _, _ in steps), steps


def test_transposed_conv_backward_falls_back():
    torch.manual_seed(5)
    model = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1)
    compiled, reports = compile_recording(model)
    x = torch.randn(2, 4, 7, 7, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    compiled(x).square().sum().backward()
    ref = copy.deepcopy(model)
    ref.zero_grad()
    ref(x2).square().sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-4)
    assert "aten.convolution_backward.default" in _fallback_ops(reports)


@pytest.mark.parametrize("pool, shape", [
    (nn.MaxPool2d(3, stride=2, padding=1), (2, 5, 17, 16)),  # ResNet's, overlapping windows
    (nn.MaxPool2d((2, 3), stride=(2, 1), padding=(1, 1), dilation=(2, 1), ceil_mode=True), (2, 3, 11, 9)),
    (nn.MaxPool2d(2), (4, 9, 8)),  # unbatched [C, H, W]
])
def test_max_pool_backward_compiled(pool, shape):
    """max_pool2d_with_indices with its indices and its backward in libair: the
    gradient scattered to the argmax positions, exactly eager's (ties included:
    the input repeats values so that windows tie)."""
    torch.manual_seed(6)
    x = torch.randint(-4, 5, shape).float()  # many ties
    conv = nn.Conv2d(shape[-3], shape[-3], 1) if len(shape) == 4 else nn.Identity()

    def f(t):
        return pool(conv(t)).sin()

    compiled, reports = compile_recording(f)
    a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya = compiled(a)
    yb = f(b)
    torch.testing.assert_close(ya, yb)
    ya.square().sum().backward()
    yb.square().sum().backward()
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-5)
    fell = _fallback_ops(reports)
    assert "aten.max_pool2d_with_indices.default" not in fell, fell
    assert "aten.max_pool2d_with_indices_backward.default" not in fell, fell
    ops = {op for op, _, _ in kernel_steps(reports, "forward")} | {op for op, _, _ in kernel_steps(reports, "backward")}
    assert {"max_pool2d_indices", "max_pool2d_backward"} <= ops, ops


def test_max_pool_inference_keeps_plain_kernel():
    """Without autograd the indices are unused: the plain max_pool2d runs."""
    pool = nn.MaxPool2d(3, stride=2, padding=1)
    compiled, reports = compile_recording(pool)
    x = torch.randn(2, 4, 13, 12)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), pool(x))
    ops = {op for op, _, _ in kernel_steps(reports, "inference")}
    assert "max_pool2d" in ops and "max_pool2d_indices" not in ops, ops


def test_float64_conv_backward():
    """f64 runs the reference kernels (the GEMM ones are f32): eager's f64 gradients to 1e-12."""
    torch.manual_seed(7)
    conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2).double()
    ref = copy.deepcopy(conv)
    compiled, reports = compile_recording(conv)
    x = torch.randn(2, 4, 9, 8, dtype=torch.float64, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    compiled(x).sin().sum().backward()
    ref(x2).sin().sum().backward()
    for got, want in ((x.grad, x2.grad), (conv.weight.grad, ref.weight.grad), (conv.bias.grad, ref.bias.grad)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert "aten.convolution_backward.default" not in _fallback_ops(reports)
