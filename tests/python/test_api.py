"""The user-facing API of SPEC.md section 1: backend="torchair" through the
entry point (without import torchair), the config-object API with the
original TorchAir names (and the article's form), options/mode passed by
torch.compile, and errors that are torchair exceptions carrying libair's
message."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import torchair
import torchair.backend
from torchair import _C


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture
def reports(monkeypatch):
    """Every CompileReport made by any torchair backend during the test
    (a spy on the compile_graph that backend.py calls)."""
    made = []
    real = torchair.backend.compile_graph

    def spy(gm, config, kind="forward"):
        out = real(gm, config, kind)
        made.append(out[1])
        return out

    monkeypatch.setattr(torchair.backend, "compile_graph", spy)
    return made


@pytest.fixture
def configs(monkeypatch):
    """Every CompilerConfig that backend="torchair" builds from torch.compile's options/mode."""
    made = []
    real = torchair.backend.config_from

    def spy(options, mode):
        cfg = real(options, mode)
        made.append(cfg)
        return cfg

    monkeypatch.setattr(torchair.backend, "config_from", spy)
    return made


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
        torch.nn.Linear(32, 32), torch.nn.SiLU(), torch.nn.Linear(32, 8),
    ).eval()


def _chain(x: torch.Tensor) -> torch.Tensor:
    """24 elementwise ops, all of them in libair's op table."""
    for _ in range(8):
        x = torch.tanh(x) * 1.5 + 0.25
    return x


def _compiled_subgraphs(reports):
    subs = [s for r in reports for s in r.subgraphs if s.compiled]
    assert subs, "torchair compiled no subgraph:\n" + "\n".join(map(str, reports))
    return subs


# ---- backend="torchair" without import torchair ---------------------------

_NO_IMPORT = textwrap.dedent(
    """
    import sys
    import torch
    assert 'torchair' not in sys.modules, 'import torch must not import torchair'
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(5, 8)
    with torch.no_grad():
        ref = m(x)
        compiled = torch.compile(m, backend="torchair")
        out = compiled(x)
    assert 'torchair' in sys.modules, 'the entry point did not load torchair'
    import torchair.backend
    from torch._dynamo.backends.registry import lookup_backend
    assert lookup_backend("torchair") is torchair.backend.torchair_backend
    torch.testing.assert_close(out, ref)
    print("TORCHAIR-ENTRY-POINT-OK")
    """
)


def test_backend_string_works_without_import_torchair(tmp_path):
    # run from an empty directory so that the installed package is what loads
    proc = subprocess.run(
        [sys.executable, "-c", _NO_IMPORT], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TORCHAIR-ENTRY-POINT-OK" in proc.stdout


def test_entry_point_is_registered():
    from importlib.metadata import entry_points

    eps = {ep.name: ep.value for ep in entry_points(group="torch_dynamo_backends")}
    assert eps.get("torchair") == "torchair.backend:torchair_backend"
    assert "torchair" in torch._dynamo.list_backends(exclude_tags=())


# ---- the config-object API --------------------------------------------------


def test_get_npu_backend_with_compiler_config(reports):
    model, x = _mlp(), torch.randn(4, 16)
    config = torchair.CompilerConfig()
    backend = torchair.get_npu_backend(compiler_config=config)
    with torch.no_grad():
        out = torch.compile(model, backend=backend)(x)
        ref = model(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert sum(s.compiled for r in reports for s in r.subgraphs) >= 1


def test_get_backend_is_an_alias():
    assert torchair.get_backend is torchair.get_npu_backend
    x = torch.randn(6, 7)
    out = torch.compile(_chain, backend=torchair.get_backend())(x)
    torch.testing.assert_close(out, _chain(x))


def test_article_config_form(reports):
    # the article, with 'npu' -> 'cpu':
    config = torchair.get_npu_backend_config()
    config.compiler_config.max_static_subgraph_ops = 10
    model = torch.compile(_chain, backend=torchair.get_npu_backend(config=config))
    x = torch.randn(3, 5)
    torch.testing.assert_close(model(x), _chain(x))
    subs = _compiled_subgraphs(reports)
    assert max(len(s.ops) for s in subs) <= 10
    assert len(subs) >= 3  # 24 ops in pieces of at most 10


def test_config_object_validates_like_options():
    config = torchair.get_npu_backend_config()
    assert isinstance(config, torchair.CompilerConfig)
    assert config.compiler_config is config
    with pytest.raises(torchair.OptionError, match="max_static_subgraph_op"):
        config.compiler_config.max_static_subgraph_op = 10  # a typo is an error, not ignored
    with pytest.raises(torchair.OptionError):
        torchair.get_npu_backend(config={"max_static_subgraph_ops": 10})


def test_config_with_bad_option_combination_is_refused_at_get_npu_backend():
    config = torchair.CompilerConfig(weight_quantization_group_size=64)  # without weight_quantization
    with pytest.raises(torchair.OptionError, match="weight_quantization"):
        torchair.get_npu_backend(compiler_config=config)


# ---- options= and mode= through torch.compile -------------------------------


def test_options_reach_the_backend(reports, configs):
    x = torch.randn(4, 4)
    out = torch.compile(_chain, backend="torchair", options={"max_static_subgraph_ops": 3})(x)
    torch.testing.assert_close(out, _chain(x))
    assert configs and all(c.max_static_subgraph_ops == 3 for c in configs)
    subs = _compiled_subgraphs(reports)
    assert max(len(s.ops) for s in subs) <= 3
    assert len(subs) >= 8


def test_bad_option_through_torch_compile_is_an_option_error():
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        torch.compile(_chain, backend="torchair", options={"max_static_subgraphs": 3})(torch.randn(2))
    inner = info.value.inner_exception
    assert isinstance(inner, torchair.OptionError)
    assert "max_static_subgraphs" in str(inner)


def test_mode_reduce_overhead_is_honoured(reports, configs):
    model, x = _mlp(), torch.randn(4, 16)
    with torch.no_grad():
        compiled = torch.compile(model, backend="torchair", mode="reduce-overhead")
        first, second = compiled(x), compiled(x + 1)
        ref1, ref2 = model(x), model(x + 1)
    torch.testing.assert_close(first, ref1, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(second, ref2, rtol=1e-4, atol=1e-5)
    assert configs and all(c.mode == "reduce-overhead" for c in configs)
    assert len(reports) == 1  # the second call reuses the compiled graph
    # the whole graph is in C: one compiled subgraph, so one C call per run
    assert reports[0].fallbacks == [], str(reports[0])
    assert len(_compiled_subgraphs(reports)) == 1


def test_mode_is_passed_on(monkeypatch, tmp_path):
    # torch.compile's mode reaches torchair: max-autotune tunes (its report says so)
    monkeypatch.setenv("TORCHAIR_CACHE_DIR", str(tmp_path))
    x = torch.randn(3)
    report = torchair.explain(_chain, x, options={"mode": "max-autotune"})
    assert "autotune:" in str(report)
    torch.testing.assert_close(torch.compile(_chain, backend="torchair", mode="max-autotune")(x), _chain(x))


# ---- errors -------------------------------------------------------------------


def test_exception_hierarchy():
    assert torchair.TorchairError is _C.Error
    assert issubclass(torchair.TorchairError, RuntimeError)
    assert issubclass(torchair.OptionError, torchair.TorchairError)
    assert issubclass(torchair.OptionError, ValueError)
    assert issubclass(torchair.NotBuiltError, torchair.TorchairError)
    assert issubclass(torchair.NotBuiltError, NotImplementedError)


def test_c_errors_carry_status_and_message():
    with pytest.raises(torchair.TorchairError) as info:
        _C.Graph().node("nope", [])
    code, name, message = info.value.args
    assert isinstance(code, int) and code != 0
    assert name == "unsupported"
    assert "unknown op 'nope'" in message


def test_c_error_names_the_problem_in_graph_building():
    g = _C.Graph()
    a = g.input(_C.F32, [2, 3], "a")
    b = g.input(_C.F32, [4, 5], "b")
    with pytest.raises(torchair.TorchairError) as info:
        g.node("add", [a, b])
    code, name, message = info.value.args
    assert name == "shape mismatch"
    assert "add" in message
    with pytest.raises(torchair.TorchairError) as info:
        g.node("relu", [12345])
    assert "relu" in info.value.args[2] and "input 0" in info.value.args[2]
    with pytest.raises(torchair.TorchairError) as info:
        g.node("clamp", [a], {"no_such_attr": 1})
    assert "no_such_attr" in info.value.args[2]


def test_public_names():
    for name in torchair.__all__:
        assert hasattr(torchair, name), name
    assert "fusion_threshold" in torchair.valid_options()
    torchair.set_num_threads(torchair.get_num_threads())
    assert torchair.get_num_threads() >= 1
