"""SPEC.md section 2: every option is validated by name and type, an option
whose feature is not built is refused (never ignored), and each built option
has a visible effect, shown through torchair.explain's report."""

from __future__ import annotations

import re

import pytest
import torch

import torchair
from _compile import compile_recording


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _chain(x: torch.Tensor) -> torch.Tensor:
    """18 elementwise ops in libair's op table, each making a new value."""
    for _ in range(6):
        x = torch.tanh(x) * 1.5 + 0.25
    return x


_CHAIN_OPS = 18


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)
    ).eval()


def _inner(exc: BaseException) -> BaseException:
    """The exception torchair raised, out of dynamo's BackendCompilerFailed."""
    assert isinstance(exc, torch._dynamo.exc.BackendCompilerFailed), type(exc)
    inner = exc.inner_exception
    assert inner is not None
    return inner


def _compile_error(fn, *inputs, **compile_kwargs) -> BaseException:
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        torch.compile(fn, backend="torchair", **compile_kwargs)(*inputs)
    inner = _inner(info.value)
    # the wrapped error's text is in dynamo's message too
    assert type(inner).__name__ in str(info.value)
    return inner


def _compiled(report):
    subs = [s for g in report.graphs for s in g.subgraphs if s.compiled]
    assert subs, "nothing was compiled:\n" + str(report)
    return subs


def _steps(air_report: str) -> int:
    m = re.search(r"steps: (\d+)", air_report)
    assert m, air_report
    return int(m.group(1))


# ---- unknown options and wrong types ----------------------------------------


def test_unknown_option_names_it_and_lists_the_valid_ones():
    inner = _compile_error(_chain, torch.randn(3), options={"fusion_treshold": 4})
    assert isinstance(inner, torchair.OptionError)
    msg = str(inner)
    assert "'fusion_treshold'" in msg
    for valid in torchair.valid_options():
        assert valid in msg
    assert "fusion_threshold" in msg


@pytest.mark.parametrize(
    "make",
    [
        lambda: torchair.CompilerConfig(fusion_treshold=4),
        lambda: setattr(torchair.CompilerConfig(), "fusion_treshold", 4),
        lambda: torchair.explain(_chain, torch.randn(3), options={"fusion_treshold": 4}),
    ],
    ids=["CompilerConfig", "setattr", "explain"],
)
def test_unknown_option_on_every_path(make):
    with pytest.raises(torchair.OptionError) as info:
        make()
    assert "fusion_treshold" in str(info.value) and "max_static_subgraph_ops" in str(info.value)


@pytest.mark.parametrize(
    "name, value",
    [
        ("fusion_threshold", "5"),
        ("fusion_threshold", 2.5),
        ("fusion_threshold", True),  # a bool is not an int here
        ("max_static_subgraph_ops", "10"),
        ("max_static_subgraph_ops", False),
        ("enable_operator_fusion", 1),
        ("enable_memory_optimization", "yes"),
        ("dynamic_graph_mode", None),
        ("enable_dynamic_shape", 0),
        ("mixed_precision", 16),
        ("dynamic_axes", ["x"]),
        ("freezing", "true"),
    ],
)
def test_wrong_type_names_the_option(name, value):
    inner = _compile_error(_chain, torch.randn(3), options={name: value})
    assert isinstance(inner, torchair.OptionError)
    assert repr(name) in str(inner)
    with pytest.raises(torchair.OptionError, match=re.escape(repr(name))):
        torchair.CompilerConfig(**{name: value})


@pytest.mark.parametrize(
    "name, value",
    [("fusion_threshold", 0), ("max_static_subgraph_ops", -3), ("mixed_precision", "int4"), ("mode", "fast"), ("weight_quantization", "int3")],
)
def test_wrong_value_is_refused(name, value):
    with pytest.raises(torchair.OptionError) as info:
        torchair.CompilerConfig(**{name: value})
    assert name in str(info.value)
    assert repr(value) in str(info.value) or str(value) in str(info.value)


def test_bad_mode_through_torch_compile():
    inner = _compile_error(_chain, torch.randn(3), mode="fastest")
    assert isinstance(inner, torchair.OptionError)
    assert "'fastest'" in str(inner) and "reduce-overhead" in str(inner)


# ---- weight_quantization (built: tests/python/test_quant.py tests what it does) ----------


@pytest.mark.parametrize("value", ["int8", "int4"])
def test_weight_quantization_is_accepted(value):
    x = torch.randn(3)
    out = torch.compile(_chain, backend="torchair", options={"weight_quantization": value})(x)
    torch.testing.assert_close(out, _chain(x))  # no linear: nothing quantized, nothing refused
    config = torchair.get_npu_backend_config()
    config.compiler_config.weight_quantization = value
    torchair.get_npu_backend(config=config)


@pytest.mark.parametrize("group", [-32, 16, 48, 33])
def test_weight_quantization_group_size_is_validated(group):
    with pytest.raises(torchair.OptionError, match="weight_quantization_group_size"):
        torchair.CompilerConfig(weight_quantization="int4", weight_quantization_group_size=group)
    with pytest.raises(torchair.OptionError, match="weight_quantization_group_size"):
        torchair.CompilerConfig(weight_quantization_group_size="32")


def test_weight_quantization_group_size_needs_weight_quantization():
    inner = _compile_error(_chain, torch.randn(3), options={"weight_quantization_group_size": 64})
    assert isinstance(inner, torchair.OptionError)
    assert "weight_quantization_group_size" in str(inner)


@pytest.mark.parametrize("value", [None, True, False])
def test_freezing_is_accepted(value):
    """freezing is built (tests/python/test_freezing.py tests what it does):
    None and True freeze the weights of an inference graph, False does not."""
    x = torch.randn(4, 16)
    model = _mlp()
    config = torchair.get_npu_backend_config()
    config.compiler_config.freezing = value
    with torch.no_grad():
        out = torch.compile(model, backend=torchair.get_npu_backend(config=config))(x)
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)
        torch._dynamo.reset()
        report = torchair.explain(model, x, options={"freezing": value})
    (graph,) = report.graphs
    if value is False:
        assert graph.freezing == "off (freezing=False)" and graph.frozen_tensors == 0, str(report)
    else:
        assert graph.freezing == "on" and graph.frozen_tensors == 6, str(report)


# ---- effects of the built options -------------------------------------------------


def test_max_static_subgraph_ops_splits_the_graph():
    x = torch.randn(8, 8)
    whole = torchair.explain(_chain, x)
    assert len(_compiled(whole)) == 1
    assert len(_compiled(whole)[0].ops) == _CHAIN_OPS
    for limit in (1, 4, 7):
        torch._dynamo.reset()
        report = torchair.explain(_chain, x, options={"max_static_subgraph_ops": limit})
        subs = _compiled(report)
        assert all(len(s.ops) <= limit for s in subs), str(report)
        assert len(subs) == -(-_CHAIN_OPS // limit), str(report)
        assert sum(len(s.ops) for s in subs) == _CHAIN_OPS
        assert report.fallbacks == []
        torch._dynamo.reset()
        out = torch.compile(_chain, backend="torchair", options={"max_static_subgraph_ops": limit})(x)
        torch.testing.assert_close(out, _chain(x))


def test_max_static_subgraph_ops_on_a_model():
    model, x = _mlp(), torch.randn(5, 16)
    with torch.no_grad():
        report = torchair.explain(model, x, options={"max_static_subgraph_ops": 2})
        subs = _compiled(report)
        assert len(subs) >= 3 and all(len(s.ops) <= 2 for s in subs), str(report)
        torch._dynamo.reset()
        out = torch.compile(model, backend="torchair", options={"max_static_subgraph_ops": 2})(x)
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)


def test_dynamic_graph_mode_runs_op_by_op():
    model, x = _mlp(), torch.randn(5, 16)
    with torch.no_grad():
        report = torchair.explain(model, x, options={"dynamic_graph_mode": True})
        subs = _compiled(report)
        assert all(len(s.ops) == 1 for s in subs), str(report)
        assert len(subs) == report.compiled_ops
        for s in subs:
            assert _steps(s.air_report) == 1
            assert "op by op" in s.air_report  # no passes run in this mode
        torch._dynamo.reset()
        compiled, reports = compile_recording(model, {"dynamic_graph_mode": True})
        out = compiled(x)
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)
    assert reports and all(len(s.ops) == 1 for r in reports for s in r.subgraphs)


def test_enable_memory_optimization_reuses_buffers():
    x = torch.randn(64, 64)
    value_bytes = x.numel() * x.element_size()
    arena = {}
    outs = {}
    for reuse in (True, False):
        # fusion off, so that every op keeps its own intermediate value
        options = {"enable_memory_optimization": reuse, "enable_operator_fusion": False}
        torch._dynamo.reset()
        report = torchair.explain(_chain, x, options=options)
        (sub,) = _compiled(report)
        assert sub.arena_bytes is not None
        arena[reuse] = sub.arena_bytes
        torch._dynamo.reset()
        outs[reuse] = torch.compile(_chain, backend="torchair", options=options)(x)
    # without reuse, each of the 17 intermediate values (the 18th is the
    # caller's output) has its own buffer; with reuse, far fewer
    assert arena[False] >= (_CHAIN_OPS - 1) * value_bytes, arena
    assert arena[True] <= arena[False] // 4, arena
    assert torch.equal(outs[True], outs[False])
    torch.testing.assert_close(outs[True], _chain(x))


def test_enable_operator_fusion():
    x = torch.randn(32, 16)
    steps = {}
    for fuse in (True, False):
        torch._dynamo.reset()
        report = torchair.explain(_chain, x, options={"enable_operator_fusion": fuse})
        (sub,) = _compiled(report)
        steps[fuse] = _steps(sub.air_report)
        torch._dynamo.reset()
        out = torch.compile(_chain, backend="torchair", options={"enable_operator_fusion": fuse})(x)
        torch.testing.assert_close(out, _chain(x))
    assert steps[False] == _CHAIN_OPS  # False keeps one kernel per op
    assert steps[True] < steps[False]  # the elementwise chain is fused


def test_fusion_threshold_bounds_fused_groups():
    x = torch.randn(32, 16)
    torch._dynamo.reset()
    report = torchair.explain(_chain, x, options={"fusion_threshold": 4})
    (sub,) = _compiled(report)
    groups = [int(n) for n in re.findall(r"fused group \d+ \((\d+) ops\)", sub.air_report)]
    assert groups and max(groups) <= 4, sub.air_report
    assert _steps(sub.air_report) >= -(-_CHAIN_OPS // 4)
    torch._dynamo.reset()
    out = torch.compile(_chain, backend="torchair", options={"fusion_threshold": 4})(x)
    torch.testing.assert_close(out, _chain(x))


def _scale(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 1.5 - 0.5


def test_enable_dynamic_shape_true_serves_every_size_with_one_compile():
    compiled, reports = compile_recording(_scale, dynamic=True)
    for n in (3, 5, 11, 2):  # (not 1: dynamo specializes sizes 0 and 1)
        x = torch.randn(n, 4)
        torch.testing.assert_close(compiled(x), _scale(x))
    assert len(reports) == 1
    assert reports[0].fallbacks == [], str(reports[0])


class _TokenMLP(torch.nn.Module):
    """Linears over [batch, tokens, features], as in a transformer block."""

    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x))) + x


def test_dynamic_batch_and_tokens_run_the_linears_in_torchair():
    # aot_autograd flattens [s0, s1, C] to [s0*s1, C] around each addmm and
    # views back to [s0, s1, C]: the addmm's subgraph has no input with a
    # bare s1 (the product binds a symbol of its own), and the view back
    # gets s0 and s1 from its SymInt arguments. Both used to fall back.
    model = _TokenMLP().eval()
    compiled, reports = compile_recording(model, dynamic=True)
    with torch.no_grad():
        for b, n in ((2, 5), (3, 7), (4, 2), (2, 9)):
            x = torch.randn(b, n, 32)
            torch.testing.assert_close(compiled(x), model(x))
    (r,) = reports
    falling = [op for _, op, _ in r.fallbacks if op.startswith("aten.")]
    assert falling == [], str(r)  # only the size arithmetic (a SymInt mul) stays in Python
    assert len(r.subgraphs) == 1 and r.subgraphs[0].compiled, str(r)


def test_enable_dynamic_shape_false_refuses_symbolic_shapes():
    inner = _compile_error(_scale, torch.randn(3, 4), dynamic=True, options={"enable_dynamic_shape": False})
    assert isinstance(inner, torchair.NotBuiltError)
    assert "enable_dynamic_shape" in str(inner)


def test_enable_dynamic_shape_false_with_static_compiles():
    compiled, reports = compile_recording(_scale, {"enable_dynamic_shape": False}, dynamic=False)
    for n in (3, 5):
        x = torch.randn(n, 4)
        torch.testing.assert_close(compiled(x), _scale(x))
    assert len(reports) == 2  # one static compile per size


def test_mode_reduce_overhead_option():
    model, x = _mlp(), torch.randn(5, 16)
    with torch.no_grad():
        report = torchair.explain(model, x, options={"mode": "reduce-overhead"})
        assert len(_compiled(report)) == 1 and report.fallbacks == [], str(report)
        torch._dynamo.reset()
        out = torch.compile(model, backend="torchair", options={"mode": "reduce-overhead"})(x)
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)


def test_explain_report_text():
    report = torchair.explain(_chain, torch.randn(4, 4), options={"max_static_subgraph_ops": 9})
    text = str(report)
    assert "torchair compile report" in text
    assert "2 compiled subgraph(s)" in text and "aten.tanh.default" in text


# ---- disabled_passes ---------------------------------------------------------

class _ConvBn(torch.nn.Module):
    """conv -> batch norm -> relu -> 3x3 conv: fold_batchnorm, fuse_epilogue
    and layout all have work here."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        # c2's 16 input channels make the region channels-last (a conv of
        # at most 8 stays NCHW in the implicit GEMM)
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.c2 = torch.nn.Conv2d(16, 8, 3, padding=1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c2(torch.relu(self.bn(self.c1(x))))


@pytest.mark.parametrize(
    "disabled, absent, present",
    [
        ((), ["batch_norm"], ["conv2d_nhwc", "permute"]),
        (["layout"], ["conv2d_nhwc", "batch_norm", "permute"], ["conv2d_im2col"]),
        (["fold_batchnorm"], [], ["batch_norm"]),
        (list(torchair.PASS_NAMES), ["conv2d_nhwc"], ["batch_norm", "relu"]),
    ],
)
def test_disabled_passes_skips_exactly_those(disabled, absent, present):
    model, x = _ConvBn().eval(), torch.randn(2, 3, 10, 9)
    with torch.no_grad():
        report = torchair.explain(model, x, options={"disabled_passes": disabled})
        (sub,) = _compiled(report)
        steps = sub.air_report.split("kernels per step:")[-1]
        for name in absent:
            assert name not in steps, (disabled, name, sub.air_report)
        for name in present:
            assert name in steps, (disabled, name, sub.air_report)
        for name in disabled:
            assert f"  {name}: off" in sub.air_report, sub.air_report
        torch._dynamo.reset()
        out = torch.compile(model, backend="torchair", options={"disabled_passes": disabled})(x)
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("value", [["layoutt"], ("simplify", "nope"), [3]])
def test_disabled_passes_unknown_name_lists_the_passes(value):
    with pytest.raises(torchair.OptionError) as info:
        torchair.CompilerConfig(disabled_passes=value)
    assert "disabled_passes" in str(info.value) and "fold_batchnorm" in str(info.value)
    inner = _compile_error(_chain, torch.randn(3), options={"disabled_passes": value})
    assert isinstance(inner, torchair.OptionError)


def test_disabled_passes_wrong_type():
    with pytest.raises(torchair.OptionError, match="disabled_passes"):
        torchair.CompilerConfig(disabled_passes="layout")
