"""Training-mode batch norm compiled: forward with the batch's statistics and
the running statistics' update, its backward, and ReLU's backward run in
libair (batch_norm_train, batch_norm_backward, threshold_backward), and the
new running_mean, running_var and num_batches_tracked are written back into
the module's buffers (torchair.write_back). A small CNN trained for 3 steps
with SGD, compiled and eager from the same weights: the outputs, gradients,
weights and buffers agree (SPEC section 4: allclose, else RMSE against an
fp64 eager run at most 2x eager fp32's), and none of the four ops falls back."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from _compile import compile_recording, fallbacks, kernel_steps

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

TRAIN_OPS = {
    "aten._native_batch_norm_legit_functional.default",
    "aten.native_batch_norm_backward.default",
    "aten.threshold_backward.default",
    "aten.copy_.default",
}


class Net(nn.Module):
    """Odd channel counts (5, 7) and maps whose sizes are no vector multiple."""

    def __init__(self, affine: bool = True, momentum: float | None = 0.1) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 5, 3, padding=1)
        self.b1 = nn.BatchNorm2d(5, affine=affine, momentum=momentum)
        self.c2 = nn.Conv2d(5, 7, 3, stride=2, padding=1)
        self.b2 = nn.BatchNorm2d(7, affine=affine, momentum=momentum)
        self.fc = nn.Linear(7, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.b1(self.c1(x)))
        x = torch.relu(self.b2(self.c2(x)))
        return self.fc(x.mean((2, 3)))


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).square().mean().sqrt())


def _close(ours: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor, what: str) -> None:
    """SPEC section 4: allclose at 1e-3, else RMSE against fp64 at most 2x eager fp32's (+ tol/10)."""
    if torch.allclose(ours.detach(), eager.detach(), rtol=1e-3, atol=1e-5):
        return
    assert _rmse(ours, exact) <= 2 * _rmse(eager, exact) + 1e-4, (what, _rmse(ours, exact), _rmse(eager, exact))


def _train(model: nn.Module, x: torch.Tensor, steps: int = 3, channels_last: bool = False, options=None):
    """Trains model compiled, a copy in eager, and an fp64 copy in eager, step by
    step, checking each step; returns (compiled model, model, eager, reports)."""
    eager, exact = copy.deepcopy(model), copy.deepcopy(model).double()
    if channels_last:
        for m in (model, eager, exact):
            m.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    models = (model, eager, exact)
    for m in models:
        m.train()
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in models]
    compiled, reports = compile_recording(model, options)
    runs = (compiled, eager, exact)
    for step in range(steps):
        outs = []
        for f, m, opt, inp in zip(runs, models, opts, (x, x, x.double())):
            opt.zero_grad()
            out = f(inp)
            out.square().mean().backward()
            outs.append(out)
        _close(*outs, f"output, step {step}")
        for (name, p), q, e in zip(model.named_parameters(), eager.parameters(), exact.parameters()):
            _close(p.grad, q.grad, e.grad, f"grad of {name}, step {step}")
        for opt in opts:
            opt.step()
        for (name, b), c, e in zip(model.named_buffers(), eager.buffers(), exact.buffers()):
            if b.dtype == torch.int64:
                assert torch.equal(b, c), (name, b, c)  # num_batches_tracked
            else:
                _close(b, c, e, f"buffer {name}, step {step}")
    return compiled, model, eager, exact, reports


def _bn_fallbacks(reports) -> list:
    return [f for f in fallbacks(reports) if f[1] in TRAIN_OPS]


@pytest.mark.parametrize("affine", [True, False])
def test_train_steps_match_eager(affine):
    torch.manual_seed(0)
    x = torch.randn(3, 3, 11, 13) * 2 + 0.5
    _, model, eager, _, reports = _train(Net(affine=affine), x)
    assert _bn_fallbacks(reports) == []
    assert int(model.b1.num_batches_tracked) == 3
    assert any(r.write_backs for r in reports if r.graph == "forward")
    kinds = {r.graph for r in reports if any(s.compiled for s in r.subgraphs)}
    assert {"forward", "backward"} <= kinds
    # each relu's backward is folded into the batch norm backward before it
    ops = [s[0] for s in kernel_steps(reports, "backward")]
    assert ops.count("batch_norm_backward") == 2 and "threshold_backward" not in ops, ops
    # and each relu into the batch norm forward before it
    ops = [s[0] for s in kernel_steps(reports, "forward")]
    assert ops.count("batch_norm_train") == 2 and "relu" not in ops, ops


def test_channels_last_input():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 9, 10)
    _, _, _, _, reports = _train(Net(), x, channels_last=True)
    assert _bn_fallbacks(reports) == []


def test_momentum_none_cumulative_average():
    """momentum=None: the factor is 1 / num_batches_tracked, read from the
    buffer in Python; whatever runs where, the results are eager's."""
    torch.manual_seed(2)
    x = torch.randn(2, 3, 8, 8)
    _, model, eager, _, _ = _train(Net(momentum=None), x)
    assert torch.equal(model.b2.num_batches_tracked, eager.b2.num_batches_tracked)


def test_eval_after_training():
    torch.manual_seed(3)
    x = torch.randn(2, 3, 11, 13)
    compiled, model, eager, _, _ = _train(Net(), x, steps=2)
    model.eval()
    eager.eval()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), eager(x), rtol=1e-4, atol=1e-5)
    # the eval forward leaves the buffers alone
    for b, c in zip(model.buffers(), eager.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-6)


def test_float64_matches_eager_tightly():
    """In f64 (the reference kernels) the formulas are eager's to rounding."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.Conv2d(3, 6, 3), nn.BatchNorm2d(6), nn.ReLU()).double().train()
    eager = copy.deepcopy(model)
    x = torch.randn(2, 3, 7, 9, dtype=torch.float64, requires_grad=True)
    xe = x.detach().clone().requires_grad_()
    compiled, reports = compile_recording(model)
    out, want = compiled(x), eager(xe)
    g = torch.randn_like(want)
    out.backward(g)
    want.backward(g)
    torch.testing.assert_close(out, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(x.grad, xe.grad, rtol=1e-9, atol=1e-12)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-9, atol=1e-12, msg=name)
    for b, c in zip(model.buffers(), eager.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-12, atol=1e-14)
    assert _bn_fallbacks(reports) == []


def test_batchnorm1d_rows():
    """BatchNorm1d over [N, C] (planes of one element: the reference kernels)."""
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(6, 9), nn.BatchNorm1d(9), nn.ReLU(), nn.Linear(9, 2))
    _, _, _, _, reports = _train(model, torch.randn(16, 6))
    assert _bn_fallbacks(reports) == []


def test_relu_backward_alone():
    """A ReLU with no batch norm before it: threshold_backward runs as its own kernel."""
    torch.manual_seed(6)
    model = nn.Sequential(nn.Linear(6, 40), nn.ReLU(), nn.Linear(40, 2))
    _, _, _, _, reports = _train(model, torch.randn(33, 6))
    assert _bn_fallbacks(reports) == []
    assert "threshold_backward" in [s[0] for s in kernel_steps(reports, "backward")]


def test_train_mode_forward_without_grad():
    """train() under no_grad: an inference graph that still updates the running
    statistics; its copies are written back as in training."""
    torch.manual_seed(7)
    model = Net().train()
    eager = copy.deepcopy(model)
    compiled, reports = compile_recording(model)
    x = torch.randn(2, 3, 10, 9)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(compiled(x), eager(x), rtol=1e-4, atol=1e-5)
    for (name, b), c in zip(model.named_buffers(), eager.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-6, msg=name)
    assert _bn_fallbacks(reports) == []


@pytest.mark.parametrize("norm", ["no_running_stats", "instance_norm"])
def test_batch_statistics_only(norm):
    """Batch norm without running statistics, and InstanceNorm (a batch norm
    over [1, N*C, ...]): their backward is batch_norm_backward too."""
    torch.manual_seed(8)
    layer = nn.BatchNorm2d(5, track_running_stats=False) if norm == "no_running_stats" else nn.InstanceNorm2d(5, affine=True)
    model = nn.Sequential(nn.Conv2d(3, 5, 3), layer, nn.ReLU(), nn.Conv2d(5, 2, 1))
    _, _, _, _, reports = _train(model, torch.randn(3, 3, 12, 11))
    assert _bn_fallbacks(reports) == []
    assert "batch_norm_backward" in [s[0] for s in kernel_steps(reports, "backward")]


def test_autocast_bf16():
    """Under autocast bf16 the batch norm takes bf16 activations with f32
    parameters and statistics: compiled (f32 inside) its errors against fp64
    are at most 3x eager autocast's (SPEC section 4 for bf16), and it runs in libair."""
    torch.manual_seed(9)
    model = Net().train()
    eager, exact = copy.deepcopy(model), copy.deepcopy(model).double()
    compiled, reports = compile_recording(model)
    x = torch.randn(4, 3, 16, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outs = [compiled(x), eager(x)]
    outs.append(exact(x.double()))
    for o in outs:
        o.double().square().mean().backward()
    assert _rmse(outs[0], outs[2]) <= 3 * _rmse(outs[1], outs[2]) + 1e-4
    for (name, p), q, e in zip(model.named_parameters(), eager.parameters(), exact.parameters()):
        if name in ("c1.bias", "c2.bias"):  # a batch norm follows: their exact gradient is 0
            continue
        assert _rmse(p.grad, e.grad) <= 3 * _rmse(q.grad, e.grad) + 1e-5, name
    for (name, b), c, e in zip(model.named_buffers(), eager.buffers(), exact.buffers()):
        if b.is_floating_point():
            assert _rmse(b, e) <= 3 * _rmse(c, e) + 1e-6, name
        else:
            assert torch.equal(b, c), name
    assert _bn_fallbacks(reports) == []


@pytest.mark.parametrize("options", [{"dynamic_graph_mode": True}, {"max_static_subgraph_ops": 2}])
def test_split_graphs(options):
    """Op by op, or in pieces of two: a relu or relu backward in another piece
    than its batch norm is not fused, and the results stay eager's. (A
    multi-output op cut off from its getitems falls back in these modes, as
    every such op does: _split cuts by count.)"""
    torch.manual_seed(10)
    _, _, _, _, reports = _train(Net(), torch.randn(2, 3, 9, 9), steps=2, options=options)
    assert any(r.write_backs for r in reports)
