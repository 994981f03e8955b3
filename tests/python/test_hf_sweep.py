"""bench.hf_sweep runs: one small model through the sweep's own checks (so the tool cannot rot
unnoticed), and its exit status says when a model is wrong."""

from __future__ import annotations

import pytest

import bench.hf_sweep as sweep

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def test_sweep_checks_a_model_against_eager():
    desc, build = sweep._models()["qwen2"]
    row = sweep.run_one("qwen2", build, rounds=2)
    assert row["accuracy"] == "ok", row
    assert row["fallbacks"] == [], row
    assert row["eager_ms"] > 0 and row["torchair_ms"] > 0
    # the second size (fewer tokens) recompiles with symbolic sizes, still whole
    assert row["dynamic"] == "1 recompile(s), 0 fallback op(s)", row


def test_sweep_exit_status_reports_a_wrong_model(monkeypatch):
    wrong = {"name": "qwen2", "accuracy": "BAD: max abs diff 1", "fallbacks": [], "first_call_s": 0.0,
             "eager_ms": 1.0, "torchair_ms": 1.0, "speedup": 1.0, "dynamic": "1 recompile(s), 0 fallback op(s)"}
    monkeypatch.setattr(sweep, "run_one", lambda name, build, rounds: dict(wrong))
    assert sweep.main(["qwen2"]) == 1
    monkeypatch.setattr(sweep, "run_one", lambda name, build, rounds: dict(wrong, accuracy="ok"))
    assert sweep.main(["qwen2"]) == 0
