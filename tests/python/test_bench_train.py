"""bench/train_suite.py (#34): a --quick run of one small workload end to end (torchair in a
process of its own alternated with eager, the optimizer stepping both copies), and the report
it writes from the children's results."""

from __future__ import annotations

import json
import math

from bench.train_suite import main, report


def test_report_rows_and_errors():
    meta = {"command": "x", "when": "now", "cpu": "cpu", "threads": 2, "torch": "2.13", "commit": "abc", "steps": 3}
    ab = [{"workload": "resnet50", "mode": "torchair", "precision": "fp32", "eager_ms": 10.0, "peer_ms": 5.0,
           "speedup": 2.0, "first_step_s": 1.5, "eager_ops": {"aten.foo.default": 2}},
          {"workload": "resnet50", "mode": "inductor", "precision": "fp32", "speedup": 1.5},
          {"error": "Traceback\nRuntimeError: boom", "argv": ["--ab", "gpt2", "torchair", "bf16"]}]
    alone = [{"workload": "resnet50", "mode": m, "precision": "fp32", "peak_rss_mib": r}
             for m, r in (("eager", 100.0), ("torchair", 90.0))]
    text = report(meta, ab, alone)
    assert "| resnet50 | fp32 | 10.0 | 5.0 | 2.0x | 1.5x | 100.0 / 90.0 / - | 1.5 | aten.foo.default x2 |" in text
    assert "RuntimeError: boom" in text and "gpt2 torchair bf16" in text


def test_quick_run_trains_with_torchair(tmp_path, monkeypatch, capsys):
    import bench.train_suite as suite

    monkeypatch.setattr(suite, "RESULTS", tmp_path)
    rc = main(["--quick", "--workloads", "llama_small", "--precisions", "fp32", "--modes", "torchair",
               "--steps", "2", "--no-rss", "--out", "t"])
    assert rc == 0, capsys.readouterr().out
    data = json.loads((tmp_path / "t.json").read_text())
    (r,) = data["ab"]
    assert r["mode"] == "torchair" and r["eager_ms"] > 0 and r["peer_ms"] > 0
    assert math.isclose(r["speedup"], r["eager_ms"] / r["peer_ms"], rel_tol=0.01)
    # same weights, same batches, same optimizer: after 4 steps the losses agree closely
    assert math.isfinite(r["peer_last_loss"])
    assert abs(r["peer_last_loss"] - r["eager_last_loss"]) <= 1e-3 * abs(r["eager_last_loss"]) + 1e-4
    assert "| llama_small | fp32 |" in (tmp_path / "t.md").read_text()


def test_unknown_workload_is_an_error(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["--workloads", "nope"])
    assert "unknown workloads" in capsys.readouterr().err
