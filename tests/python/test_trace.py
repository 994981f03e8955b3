"""Chrome/Perfetto traces (torchair.trace): the profile report's write_trace gives valid
trace-event JSON that loads, every event well-formed (ph, ts, dur, pid, tid, name), one
complete event per kernel step per run on the thread that ran it (with shapes, bytes, and
FLOPs for the products), the compile phases as spans, libair's passes among them; and
``python -m torchair.trace`` writes one for a zoo model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
import torch

import torchair.report
from torchair import zoo
import torchair

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _load(path) -> list[dict]:
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    for e in events:
        assert {"ph", "pid", "tid", "name"} <= set(e), e
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)), e
            assert e["ts"] >= 0 and e["dur"] >= 0, e
        else:
            assert e["ph"] == "M", e
    return events


def _check_every_step(report, events, runs: int) -> None:
    """Each compiled subgraph's every kernel step appears once per run."""
    kernels = [e for e in events if e.get("cat") == "kernel"]
    checked = 0
    for g in report.graphs:
        for sub in g.subgraphs:
            if not sub.compiled:
                continue
            rows = sub.model.profile()
            for step, (kernel, op, _, _) in enumerate(rows):
                if kernel == "alias":
                    continue
                mine = [e for e in kernels if e["args"]["subgraph"] == sub.name and e["args"]["step"] == step]
                assert len(mine) == runs, (sub.name, step, kernel, len(mine))
                assert all(e["name"] == kernel and e["args"]["op"] == op for e in mine)
                checked += 1
    assert checked and checked * runs == len(kernels)


def test_resnet50_trace_loads_and_has_every_kernel_of_every_run(tmp_path):
    model, inputs = zoo.build("resnet50")
    with torch.no_grad():
        report = torchair.report.profile(model, *inputs, runs=2)
    path = report.write_trace(tmp_path / "r50.json")
    events = _load(path)
    _check_every_step(report, events, runs=2)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    main = threading.main_thread().native_id
    assert {e["tid"] for e in kernels} == {main}
    conv = next(e for e in kernels if e["args"]["op"].startswith("conv2d"))
    assert conv["args"]["flops"] > 0 and conv["args"]["bytes"] > 0 and conv["args"]["inputs"][0].startswith("f32[1, ")
    names = {e["name"] for e in events if e.get("cat") in ("compile", "libair")}
    assert {"dynamo", "aot_autograd", "torchair compile (inference graph)", "partition", "pass simplify",
            "kernel selection", "memory plan"} <= names, names
    assert any(n.startswith("lower air_") for n in names)
    # each run's kernels lie inside that run's span
    runs = [e for e in events if e.get("cat") == "run" and e["name"].startswith("run ")]
    assert len(runs) == 2
    for r in runs:
        inside = [e for e in kernels if r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] + 1e-3]
        assert len(inside) == len(kernels) // 2


def test_kernels_are_on_the_thread_that_ran_them(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).eval()
    x = torch.randn(4, 32)
    out = {}

    def work():
        with torch.no_grad():
            out["report"] = torchair.report.profile(model, x, runs=3)
        out["tid"] = threading.get_native_id()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    report = out["report"]
    events = _load(report.write_trace(tmp_path / "t.json"))
    _check_every_step(report, events, runs=3)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert {e["tid"] for e in kernels} == {out["tid"]} != {threading.main_thread().native_id}
    linear = next(e for e in kernels if e["args"]["op"] == "linear")
    assert linear["args"]["flops"] in (2 * 4 * 64 * 32, 2 * 4 * 8 * 64)
    thread_names = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert any(e["tid"] == out["tid"] for e in thread_names)


def test_python_m_torchair_trace_writes_a_trace(tmp_path):
    env = dict(os.environ)
    # the torchair this test imported (the installed one in CI: the source tree has no _C)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(torchair.__file__)), REPO, env.get("PYTHONPATH", "")])
    out = tmp_path / "mb.json"
    p = subprocess.run(
        [sys.executable, "-m", "torchair.trace", "mobilenet_v2", "--runs", "1", "-o", str(out)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert "RuntimeWarning" not in p.stderr
    events = _load(out)
    assert sum(e.get("cat") == "kernel" for e in events) > 20
