"""TorchAir's debug options on torchair (torchair.debug.dumps): each one does what it says.
graph_dump writes one file per compiled graph (txt with the report, a .py that runs and
gives the graph's results, DOT, SVG through Graphviz or a clear error without it);
fx_summary writes one CSV row per op with its outcome, and with skip_compile runs in eager;
run_eagerly compiles nothing; data_dump / dump_config save each compiled subgraph's inputs
and outputs for the chosen calls, and the saved outputs are the model's."""

from __future__ import annotations

import csv
import glob
import os
import runpy
import stat
import subprocess
import sys

import numpy as np
import pytest
import torch

import torchair
from torchair import CompilerConfig


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()


def _run(config: CompilerConfig, x: torch.Tensor, calls: int = 1, model=None) -> torch.Tensor:
    model = model or _net()
    fn = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=config))
    with torch.no_grad():
        for _ in range(calls):
            out = fn(x)
    return out


def _compiles(monkeypatch) -> list[int]:
    import torchair.compiler as compiler

    calls: list[int] = []
    real = compiler.compile_graph
    monkeypatch.setattr("torchair.backend.compile_graph", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


# ---- graph_dump ------------------------------------------------------------------------


def test_graph_dump_txt_has_the_graph_and_the_report(tmp_path):
    c = CompilerConfig()
    c.debug.graph_dump.type = "txt"
    c.debug.graph_dump.path = str(tmp_path)
    _run(c, torch.randn(3, 8))
    files = glob.glob(str(tmp_path / "torchair_graph*_inference_pid*.txt"))
    assert len(files) == 1, os.listdir(tmp_path)
    text = open(files[0]).read()
    assert "torch.ops.aten.addmm.default" in text and "torch.ops.aten.relu.default" in text
    assert "torchair compile report (inference graph)" in text


def test_graph_dump_py_runs_and_gives_the_graphs_results(tmp_path):
    c = CompilerConfig()
    c.debug.graph_dump.type = "py"
    c.debug.graph_dump.path = str(tmp_path)
    x = torch.randn(3, 8)
    model = _net()
    out = _run(c, x, model=model)
    (path,) = glob.glob(str(tmp_path / "torchair_graph*.py"))
    # as a script: runs on random inputs of the graph's shapes
    p = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "(3, 4)" in p.stdout
    # as a module: the same graph, so the model's parameters and x give the model's result
    mod = runpy.run_path(path)
    gm = mod["load_constants"](mod["GraphModule"]())
    inputs = mod["make_inputs"]()
    args = []
    params = [p.detach() for p in model.parameters()]
    for t in inputs:  # the graph's inputs: the parameters (in some order) and x, matched by shape
        match = next((p for p in params if p.shape == t.shape), None)
        if match is not None:
            params.remove(match)
            args.append(match)
        else:
            assert t.shape == x.shape
            args.append(x)
    got = gm(*args)
    got = got[0] if isinstance(got, (tuple, list)) else got
    torch.testing.assert_close(got, out)


def test_graph_dump_dot_marks_eager_ops(tmp_path, monkeypatch):
    import torchair.compiler as compiler

    real = compiler.check_node
    # relu left to eager: the DOT colours it as such, with the reason
    monkeypatch.setattr(
        compiler, "check_node", lambda n: "test: relu stays in eager" if "relu" in str(n.target) else real(n)
    )
    c = CompilerConfig()
    c.debug.graph_dump.type = "dot"
    c.debug.graph_dump.path = str(tmp_path)
    _run(c, torch.randn(3, 8))
    (path,) = glob.glob(str(tmp_path / "torchair_graph*.dot"))
    text = open(path).read()
    assert text.startswith('digraph "graph') and text.rstrip().endswith("}")
    relu = next(line for line in text.splitlines() if line.strip().startswith('"relu" ['))
    assert "#f5b971" in relu and "test: relu stays in eager" in relu
    addmm = next(line for line in text.splitlines() if line.strip().startswith('"addmm" ['))
    assert "#9fd89f" in addmm
    assert '"relu" -> ' in text


def test_graph_dump_svg_needs_graphviz(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    c = CompilerConfig()
    c.debug.graph_dump.type = "svg"
    with pytest.raises(torchair.OptionError, match="needs Graphviz's dot on PATH"):
        torchair.get_npu_backend(compiler_config=c)
    # a stand-in dot (writes its input as the "SVG"): the SVG is made from the DOT
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dot"
    fake.write_text('#!/bin/sh\n# dot -Tsvg IN -o OUT\n/bin/cp "$2" "$4"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    out = tmp_path / "dumps"
    c.debug.graph_dump.path = str(out)  # made when the first file is written
    _run(c, torch.randn(3, 8))
    (svg,) = glob.glob(str(out / "*.svg"))
    assert open(svg).read().startswith("digraph")


def test_graph_dump_pbtxt_is_not_built():
    c = CompilerConfig()
    c.debug.graph_dump.type = "pbtxt"
    with pytest.raises(torchair.NotBuiltError, match="pbtxt is Ascend GE's graph"):
        torchair.get_npu_backend(compiler_config=c)


def test_graph_dump_bad_type_is_refused():
    c = CompilerConfig()
    with pytest.raises(ValueError, match="not in optional list"):
        c.debug.graph_dump.type = "png"


def test_graph_dump_writes_one_file_per_graph_for_training(tmp_path):
    c = CompilerConfig()
    c.debug.graph_dump.type = "txt"
    c.debug.graph_dump.path = str(tmp_path)
    model = _net().train()
    fn = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=c))
    fn(torch.randn(3, 8)).sum().backward()
    names = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "*.txt")))
    assert len(names) == 2 and "_forward_" in names[0] + names[1] and "_backward_" in names[0] + names[1], names


# ---- fx_summary ------------------------------------------------------------------------


def _rows(path: str) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_fx_summary_csv_one_row_per_op_and_skip_compile_runs_eager(tmp_path, monkeypatch):
    import torchair.compiler as compiler

    real = compiler.check_node
    monkeypatch.setattr(compiler, "check_node", lambda n: "test: no relu" if "relu" in str(n.target) else real(n))
    calls = _compiles(monkeypatch)
    c = CompilerConfig()
    c.debug.fx_summary.type = "csv"
    c.debug.fx_summary.path = str(tmp_path)
    x = torch.randn(3, 8)
    torch.testing.assert_close(_run(c, x), _net()(x))
    assert calls == []  # skip_compile (the default, as in TorchAir): the graph ran in eager
    (path,) = glob.glob(str(tmp_path / "torchair_fx_summary_graph*_inference_pid*.csv"))
    rows = _rows(path)
    assert list(rows[0]) == ["aten_op", "count", "status", "reason", "dtype"]
    by_op = {r["aten_op"]: r for r in rows}
    assert by_op["aten.addmm.default"]["count"] == "2" and by_op["aten.addmm.default"]["status"] == "compiled"
    assert by_op["aten.relu.default"]["status"] == "eager" and by_op["aten.relu.default"]["reason"] == "test: no relu"
    assert {r["dtype"] for r in rows} == {"float32"}


def test_fx_summary_without_skip_compile_reports_the_real_compile(tmp_path, monkeypatch):
    calls = _compiles(monkeypatch)
    c = CompilerConfig()
    c.debug.fx_summary.type = "csv"
    c.debug.fx_summary.path = str(tmp_path)
    c.debug.fx_summary.skip_compile = False
    x = torch.randn(3, 8)
    torch.testing.assert_close(_run(c, x), _net()(x))
    assert calls
    (path,) = glob.glob(str(tmp_path / "*.csv"))
    rows = _rows(path)
    assert sum(int(r["count"]) for r in rows) >= 3
    assert all(r["status"] == "compiled" for r in rows if r["aten_op"] in ("aten.addmm.default", "aten.relu.default"))


# ---- run_eagerly -----------------------------------------------------------------------


def test_run_eagerly_runs_the_captured_graph_in_eager(monkeypatch):
    calls = _compiles(monkeypatch)
    c = CompilerConfig()
    c.debug.run_eagerly = True
    x = torch.randn(3, 8)
    torch.testing.assert_close(_run(c, x), _net()(x))
    assert calls == []


# ---- data dump -------------------------------------------------------------------------


def test_dump_config_saves_inputs_and_outputs_of_the_chosen_calls(tmp_path):
    c = CompilerConfig()
    c.dump_config.enable_dump = True
    c.dump_config.dump_path = str(tmp_path)
    c.dump_config.dump_step = "1|3-4"
    model = _net()
    fn = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=c))
    xs = [torch.randn(3, 8) for _ in range(6)]
    with torch.no_grad():
        outs = [fn(x) for x in xs]
    (graph,) = glob.glob(str(tmp_path / "torchair_dump" / "graph*_inference"))
    (sub,) = glob.glob(os.path.join(graph, "air_*"))
    assert sorted(os.listdir(sub)) == ["call1", "call3", "call4"]
    for k in (1, 3, 4):
        out = np.load(os.path.join(sub, f"call{k}", "output0.npy"))
        np.testing.assert_allclose(out, outs[k].numpy(), rtol=0, atol=0)
        ins = [np.load(p) for p in glob.glob(os.path.join(sub, f"call{k}", "input*.npy"))]
        assert any(i.shape == (3, 8) and np.array_equal(i, xs[k].numpy()) for i in ins)


def test_dump_config_mode_layer_and_stats(tmp_path):
    c = CompilerConfig()
    c.dump_config.enable_dump = True
    c.dump_config.dump_path = str(tmp_path)
    c.dump_config.dump_mode = "output"
    c.dump_config.dump_data = "stats"
    c.dump_config.dump_layer = "relu"
    _run(c, torch.randn(3, 8))
    (call,) = glob.glob(str(tmp_path / "torchair_dump" / "*" / "air_*" / "call0"))
    assert os.listdir(call) == ["stats.csv"]
    rows = _rows(os.path.join(call, "stats.csv"))
    assert [r["tensor"] for r in rows] == ["output0"] and rows[0]["shape"] == "[3, 4]"
    # a layer no subgraph has: nothing dumped
    torch._dynamo.reset()
    c.dump_config.dump_layer = "conv2d"
    os.makedirs(tmp_path / "none")
    c.dump_config.dump_path = str(tmp_path / "none")
    _run(c, torch.randn(3, 8))
    assert not os.path.exists(tmp_path / "none" / "torchair_dump")


def test_debug_data_dump_npy_with_filter(tmp_path):
    c = CompilerConfig()
    c.debug.data_dump.type = "npy"
    c.debug.data_dump.path = str(tmp_path)
    x = torch.randn(3, 8)
    out = _run(c, x, calls=2)
    calls = sorted(os.listdir(glob.glob(str(tmp_path / "torchair_dump" / "*" / "air_*"))[0]))
    assert calls == ["call0", "call1"]
    np.testing.assert_array_equal(
        np.load(glob.glob(str(tmp_path / "torchair_dump" / "*" / "air_*" / "call1" / "output0.npy"))[0]), out.numpy()
    )
    torch._dynamo.reset()
    c2 = CompilerConfig()
    c2.debug.data_dump.type = "npy"
    c2.debug.data_dump.path = str(tmp_path / "f")
    c2.debug.data_dump.filter = lambda node: None  # no op chosen
    _run(c2, x)
    assert not os.path.exists(tmp_path / "f")
