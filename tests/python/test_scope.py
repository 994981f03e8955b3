"""torchair.scope: TorchAir's scopes trace into the graph as air::scope_enter/scope_exit
pairs (no graph break), are checked and removed before lowering, and keep eager's results;
what has no CPU meaning is NotBuiltError at compile time."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchair
from torchair.scope import limit_core_num, npu_stream_switch, npu_wait_tensor, op_never_timeout, profiler_trace, strip_scopes, super_kernel

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class Scoped(nn.Module):
    def __init__(self, cap: int = 1024):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(16, 32)
        self.cap = cap

    def forward(self, x):
        h = self.a(x)
        with super_kernel("s", ""), npu_stream_switch("side", 1):
            x2 = npu_wait_tensor(x, h)
            with limit_core_num(self.cap, self.cap), op_never_timeout(True):
                g = F.gelu(self.b(x2))
        return h * g


def _compile_counting(model, monkeypatch):
    seen = []
    real = torchair.scope.strip_scopes

    def spy(gm, threads):
        enters = [n for n in gm.graph.nodes if n.target in (torch.ops.air.scope_enter, torch.ops.air.scope_enter.default)]
        n = real(gm, threads)
        seen.append((len(enters), n, [m for m in gm.graph.nodes if "scope" in str(m.target)]))
        return n

    monkeypatch.setattr(torchair.scope, "strip_scopes", spy)
    return torch.compile(model, backend="torchair", fullgraph=True), seen


def test_scopes_trace_into_one_graph_and_are_removed(monkeypatch):
    torch.manual_seed(0)
    model, x = Scoped().eval(), torch.randn(5, 16)
    compiled, seen = _compile_counting(model, monkeypatch)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    assert seen == [(4, 4, [])], seen  # four scopes entered in the dynamo graph, all removed


def test_scopes_run_in_eager_and_under_training():
    torch.manual_seed(0)
    model, x = Scoped(), torch.randn(5, 16, requires_grad=True)
    compiled = torch.compile(model, backend="torchair", fullgraph=True)
    compiled(x).sum().backward()
    got = x.grad.clone()
    x.grad = None
    model(x).sum().backward()
    torch.testing.assert_close(got, x.grad, rtol=1e-5, atol=1e-5)


def test_a_core_cap_below_the_thread_count_is_not_built():
    threads = torchair.get_num_threads()
    model = Scoped(cap=max(threads - 1, 0)).eval()
    if threads < 2:
        pytest.skip("needs a pool of at least 2 threads for a cap below it")
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info, torch.no_grad():
        torch.compile(model, backend="torchair", fullgraph=True)(torch.randn(5, 16))
    assert isinstance(info.value.inner_exception, torchair.NotBuiltError)
    assert "caps its ops below torchair's" in str(info.value.inner_exception)


def test_profiler_trace_is_not_built_and_checks_its_mode():
    with pytest.raises(ValueError, match="profiler_trace mode"):
        profiler_trace("i", "middle")

    def f(x):
        with profiler_trace("i", "both"):
            return x + 1

    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        torch.compile(f, backend="torchair", fullgraph=True)(torch.randn(3))
    assert isinstance(info.value.inner_exception, torchair.NotBuiltError)
    assert "NPU profiler" in str(info.value.inner_exception)


def test_bad_arguments():
    with pytest.raises(TypeError, match="must be bool"):
        op_never_timeout(1)
    with pytest.raises(TypeError, match="two tensors"):
        npu_wait_tensor(torch.ones(1), 3)


def test_unpaired_scopes_are_an_error():
    def graph(*targets):
        g = torch.fx.Graph()
        x = g.placeholder("x")
        for t in targets:
            g.call_function(t, (["_user_stream_label"], ["s"]) if t is torch.ops.air.scope_enter.default else ())
        g.output(x)
        return torch.fx.GraphModule(nn.Module(), g)

    with pytest.raises(RuntimeError, match="without a scope_exit"):
        strip_scopes(graph(torch.ops.air.scope_enter.default), 2)
    with pytest.raises(RuntimeError, match="without a scope_enter"):
        strip_scopes(graph(torch.ops.air.scope_exit.default), 2)
    gm = graph(torch.ops.air.scope_enter.default, torch.ops.air.scope_exit.default)
    assert strip_scopes(gm, 2) == 1 and len(list(gm.graph.nodes)) == 2
