"""The benchmark builds its peers as their users do (bench/modes.py) and keeps each
compiled mode in a process of its own (bench/isolate.py).

``inductor_freezing`` must really freeze: the test compiles a small conv net the way the
harness does, in a fresh process (the switch is global), and reads Inductor's counters
for folded and prepacked weights. The same net compiled the way this harness did until
2026-12-07 (freezing patched around ``compile_fx`` only) shows none: that is the negative
control, so the check can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import isolate
from bench.timing import Budget
from bench.workloads import select

REPO = Path(__file__).resolve().parents[2]

_CHILD = r"""
import json, sys, torch
from bench.modes import compile_mode, freezing_evidence
torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
    torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4),
).eval()
x = torch.randn(2, 3, 16, 16)
way = sys.argv[1]
with torch.no_grad():
    ref = net(x)
    if way == "harness":
        comp = compile_mode("inductor_freezing", net)
        with comp.first_call_ctx():
            out = comp.fn(x)
        notes, broken = comp.check()
    elif way == "harness-same-process":
        comp = compile_mode("inductor_freezing", net, same_process=True)
        with comp.first_call_ctx():
            out = comp.fn(x)
        notes, broken = comp.check()
    else:  # the old harness: the switch patched around compile_fx only
        import torch._inductor.config as ic
        from torch._inductor.compile_fx import compile_fx
        def backend(gm, ex):
            with ic.patch(freezing=True):
                return compile_fx(gm, ex)
        out = torch.compile(net, backend=backend)(x)
        notes, broken = [], None
    print("RESULT " + json.dumps({"evidence": freezing_evidence(), "broken": broken,
                                  "close": bool(torch.allclose(out, ref, rtol=1e-4, atol=1e-4))}))
"""


def _run(way: str, tmp_path: Path) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, way], cwd=REPO, capture_output=True, text=True, timeout=600, env=env
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])


@pytest.mark.parametrize("way", ["harness", "harness-same-process"])
def test_inductor_freezing_folds_and_prepacks_weights(way, tmp_path):
    r = _run(way, tmp_path)
    assert r["close"]
    assert r["broken"] is None
    # the batch norm folded into the conv, and the conv weights prepacked for oneDNN
    assert r["evidence"].get("binary_folding", 0) >= 1, r["evidence"]
    assert any("weight_pack" in k for k in r["evidence"]), r["evidence"]


def test_freezing_patched_around_compile_fx_does_not_freeze(tmp_path):
    """The negative control: the way the harness was broken shows no evidence."""
    r = _run("patched-around-compile_fx", tmp_path)
    assert r["close"]
    assert r["evidence"] == {}


def _child_result(mode: str, eager_ms: float, mode_ms: float) -> dict:
    return {
        "modes": {
            "eager": {"status": "ok", "median_ms": eager_ms, "speedup": 1.0, "notes": []},
            mode: {"status": "ok", "median_ms": mode_ms, "speedup": eager_ms / mode_ms, "notes": []},
        },
        "notes": [],
        "iters_budget": {},
    }


def test_isolated_speedups_use_the_eager_of_their_own_process(monkeypatch):
    jobs = []
    canned = {"inductor": (10.0, 5.0), "torchair": (12.0, 4.0)}

    def fake_child(job, timeout_s):
        jobs.append(job)
        (mode,) = [m for m in job["modes"] if m != "eager"]
        return _child_result(mode, *canned[mode])

    monkeypatch.setattr(isolate, "_run_child", fake_child)
    (w,) = select(["resnet50_b1"])
    r = isolate.run_workload_isolated(w, ["eager", "inductor", "torchair"], Budget(1, 1, 0.0), None, 2)
    assert [j["modes"] for j in jobs] == [["eager", "inductor"], ["eager", "torchair"]]
    assert r["modes"]["inductor"]["speedup"] == pytest.approx(2.0)
    assert r["modes"]["torchair"]["speedup"] == pytest.approx(3.0)
    assert r["modes"]["torchair"]["eager_median_ms"] == 12.0
    assert r["modes"]["eager"]["median_ms"] == pytest.approx(11.0)
    assert r["modes"]["eager"]["eager_spread"] == pytest.approx(0.2)


def test_isolated_child_failure_is_that_modes_error(monkeypatch):
    def fake_child(job, timeout_s):
        if "openvino" in job["modes"]:
            return {"error": "child process exit 1: ImportError: openvino"}
        return _child_result("torchair", 10.0, 5.0)

    monkeypatch.setattr(isolate, "_run_child", fake_child)
    (w,) = select(["resnet50_b1"])
    r = isolate.run_workload_isolated(w, ["eager", "openvino", "torchair"], Budget(1, 1, 0.0), None, 2)
    assert r["error"] is None
    assert r["modes"]["openvino"]["status"] == "error" and "openvino" in r["modes"]["openvino"]["error"]
    assert r["modes"]["torchair"]["speedup"] == pytest.approx(2.0)


_OV_CHILD = r"""
import json, torch
from bench.modes import compile_mode
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 5)).eval()
x = torch.randn(1, 3, 16, 16)
with torch.no_grad():
    ref = net(x)
    comp = compile_mode("openvino_f32", net)
    out = comp.fn(x)
    notes, broken = comp.check()
    print("RESULT " + json.dumps({"notes": comp.notes + notes, "broken": broken,
                                  "close": bool(torch.allclose(out, ref, rtol=1e-4, atol=1e-4))}))
"""


def test_openvino_mode_runs_openvino_itself(tmp_path):
    """The mode counts OpenVINO's own partition runs (its backend falls back to Inductor or
    PyTorch silently); f32 precision gives eager's answer."""
    p = subprocess.run(
        [sys.executable, "-c", _OV_CHILD], cwd=REPO, capture_output=True, text=True, timeout=600, env=dict(os.environ)
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stderr[-3000:]
    r = json.loads(lines[-1][len("RESULT ") :])
    assert r["broken"] is None, r
    assert r["close"], r
    assert any("OpenVINO ran 1 partition calls" in n for n in r["notes"]), r["notes"]
