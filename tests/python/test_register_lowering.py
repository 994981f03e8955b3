"""torchair.register_lowering(op, fn): a user's torch.library.custom_op, lowered through fn
(written in torch ops, traced to ATen), compiles with its neighbours instead of falling back,
matches eager (forward, and in a training step with its autograd formula); an fn torchair
cannot lower leaves the op in eager with a reason naming what in fn is unsupported."""

from __future__ import annotations

import pytest
import torch

import torchair
from torchair.lowering.core import LOWERINGS
from torchair.lowering.user import USER_LOWERINGS


@torch.library.custom_op("torchair_test::scaled_gelu", mutates_args=())
def scaled_gelu(x: torch.Tensor, w: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.nn.functional.gelu(x @ w) * scale


@scaled_gelu.register_fake
def _(x, w, scale):
    return x.new_empty(x.shape[0], w.shape[1])


@torch.library.custom_op("torchair_test::sorted_rows", mutates_args=())
def sorted_rows(x: torch.Tensor) -> torch.Tensor:
    return torch.sort(x, dim=-1).values


@sorted_rows.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("torchair_test::shifted", mutates_args=())
def shifted(x: torch.Tensor) -> torch.Tensor:
    return x - x.amax(dim=-1, keepdim=True)


@shifted.register_fake
def _(x):
    return torch.empty_like(x)


class Net(torch.nn.Module):
    def __init__(self, op) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(8, 16) * 0.3)
        self.lin = torch.nn.Linear(16, 4)
        self.op = op

    def forward(self, x):
        h = torch.relu(x)
        h = self.op(h, self.w) if self.op is scaled_gelu_call else self.op(h @ self.w)
        return self.lin(h)


def scaled_gelu_call(x, w):
    return torch.ops.torchair_test.scaled_gelu(x, w, 0.5)


@pytest.fixture(autouse=True)
def _clean():
    saved = dict(LOWERINGS)
    torch._dynamo.reset()
    yield
    LOWERINGS.clear()
    LOWERINGS.update(saved)
    USER_LOWERINGS.clear()
    torch._dynamo.reset()


def _fallback_ops(report) -> set[str]:
    return {op for _, op, _ in report.fallbacks}


def test_custom_op_falls_back_without_a_lowering_and_compiles_with_one():
    model, x = Net(scaled_gelu_call).eval(), torch.randn(5, 8)
    before = torchair.explain(model, x)
    assert "torchair_test.scaled_gelu.default" in _fallback_ops(before)
    torchair.register_lowering(scaled_gelu, lambda x, w, scale: torch.nn.functional.gelu(x @ w) * scale)
    torch._dynamo.reset()
    after = torchair.explain(model, x)
    assert after.fallbacks == []
    (sub,) = after.graphs[0].subgraphs
    assert "torchair_test.scaled_gelu.default" in sub.ops and sub.compiled
    with torch.no_grad():
        torch._dynamo.reset()
        out = torch.compile(model, backend="torchair")(x)
        torch.testing.assert_close(out, model(x))


def test_decorator_form_and_a_training_step_match_eager():
    scaled_gelu.register_autograd(_backward, setup_context=_setup)

    @torchair.register_lowering(torch.ops.torchair_test.scaled_gelu)
    def _lower(x, w, scale):
        return torch.nn.functional.gelu(x @ w) * scale

    model = Net(scaled_gelu_call).train()
    ref = Net(scaled_gelu_call).train()
    x = torch.randn(5, 8)
    report = torchair.explain(model, x)
    assert "torchair_test.scaled_gelu.default" not in _fallback_ops(report)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="torchair")
    compiled(x).square().sum().backward()
    ref(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)


def _setup(ctx, inputs, output):
    x, w, scale = inputs
    ctx.save_for_backward(x, w)
    ctx.scale = scale


def _backward(ctx, g):
    x, w = ctx.saved_tensors
    z = x @ w
    dgelu = 0.5 * (1 + torch.erf(z * 0.7071067811865476)) + z * torch.exp(-0.5 * z * z) * 0.3989422804014327
    gz = g * ctx.scale * dgelu
    return gz @ w.t(), x.t() @ gz, None


def test_an_unsupported_op_in_fn_is_named_in_the_fallback_reason():
    torchair.register_lowering(sorted_rows, lambda x: torch.sort(x, dim=-1).values)
    model, x = Net(lambda h: torch.ops.torchair_test.sorted_rows(h)).eval(), torch.randn(5, 8)
    report = torchair.explain(model, x)
    reasons = {op: why for _, op, why in report.fallbacks}
    why = reasons["torchair_test.sorted_rows.default"]
    assert why.startswith("register_lowering(torchair_test.sorted_rows.default): fn uses aten.sort"), why
    assert "no lowering" in why
    with torch.no_grad():  # still right: the op runs in eager
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(model, backend="torchair")(x), model(x))


def test_an_fn_that_cannot_be_traced_says_so():
    torchair.register_lowering(shifted, lambda x: x - float(x.amax()))  # .item(): data-dependent
    model, x = Net(lambda h: torch.ops.torchair_test.shifted(h)).eval(), torch.randn(5, 8)
    report = torchair.explain(model, x)
    why = {op: w for _, op, w in report.fallbacks}["torchair_test.shifted.default"]
    assert "fn could not be traced to ATen ops" in why, why
    # a good fn for the same op compiles it
    torchair.register_lowering(shifted, lambda x: x - x.amax(dim=-1, keepdim=True))
    torch._dynamo.reset()
    assert "torchair_test.shifted.default" not in _fallback_ops(torchair.explain(model, x))
    with torch.no_grad():
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(model, backend="torchair")(x), model(x))


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="must be a torch op"):
        torchair.register_lowering("torchair_test::scaled_gelu", lambda x: x)
    with pytest.raises(TypeError, match="fn must be callable"):
        torchair.register_lowering(scaled_gelu, 3)
