"""bench/dynamic.py (#33): the stream of shapes it builds, the torchair_dynamic / torchair_static
ratios it derives, and a --quick run of the small workloads end to end (each mode in a process
of its own, JSON and Markdown written, every output checked against eager)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.dynamic import WORKLOADS, shape_key, stream, summarize_workload

REPO = Path(__file__).resolve().parents[2]


def test_stream_is_seeded_and_repeats_earlier_shapes():
    for spec in WORKLOADS.values():
        for shapes, repeats in ((spec["shapes"], spec["repeats"]), (spec["quick_shapes"], spec["quick_repeats"])):
            s = stream(shapes, repeats, 0, spec.get("tail", ()))
            assert s == stream(shapes, repeats, 0, spec.get("tail", ()))
            assert len(s) == len(shapes) + repeats + len(spec.get("tail", ()))
            assert s[0] == shapes[0] and sorted(set(s)) == sorted(set(shapes))
            assert [x for i, x in enumerate(s) if x not in s[:i]] == list(shapes)  # first occurrences in order
            assert all(a != b for a, b in zip(s, s[1:]))
    assert shape_key((8, 512)) == "8x512" and shape_key((4,)) == "4"


def test_cliff_is_dynamic_over_static_raw_and_against_each_process_eager():
    def res(mode, rows):
        return {"mode": mode, "errors": {}, "shapes": {k: {"ms": ms, "eager_ms": e, "ratio": ms / e, "allclose": True,
                                                          "max_abs_diff": 0.0} for k, (ms, e) in rows.items()}}

    sm = summarize_workload([res("torchair_static", {"1x8": (10.0, 20.0), "3x64": (30.0, 60.0)}),
                             res("torchair_dynamic", {"1x8": (12.0, 20.0), "3x64": (33.0, 66.0)})])
    assert sm["cliff"]["1x8"] == {"raw": 1.2, "vs_own_eager": 1.2}
    assert sm["cliff"]["3x64"] == {"raw": 1.1, "vs_own_eager": 1.0}
    assert sm["cliff_worst_raw"] == 1.2
    assert sm["modes"]["torchair_dynamic"]["worst_shape"] == "1x8"


def test_quick_run_small_workloads(tmp_path):
    """The quick mode end to end on the two small workloads with the torchair modes (Inductor's
    and ResNet-50's compiles take minutes: the full run measures them)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    cmd = [sys.executable, "-m", "bench.dynamic", "--quick", "--workloads", "nlp,bert",
           "--modes", "eager,torchair_static,torchair_dynamic", "--results-dir", str(tmp_path), "--out", "smoke"]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    data = json.loads((tmp_path / "smoke.json").read_text())
    md = (tmp_path / "smoke.md").read_text()
    assert data["meta"]["quick"] and data["meta"]["cpu"]["model"] and data["meta"]["git"]
    for w in ("nlp", "bert"):
        assert f"## {w}:" in md
        by = {r["mode"]: r for r in data["results"][w]}
        assert set(by) == {"eager", "torchair_static", "torchair_dynamic"}
        assert all("error" not in r and not r["errors"] for r in by.values())
        shapes = {shape_key(s) for s in WORKLOADS[w]["quick_shapes"]}
        for m in ("torchair_static", "torchair_dynamic"):
            assert set(by[m]["shapes"]) == shapes
            assert all(v["allclose"] and v["ratio"] > 0 for v in by[m]["shapes"].values()), by[m]["shapes"]
        # a graph per shape without dynamic_axes; one graph for the whole stream with them
        assert by["torchair_static"]["graphs"] == len(shapes)
        assert by["torchair_dynamic"]["graphs"] == 1 and by["torchair_dynamic"]["air_graphs"] == 1
        assert set(data["summary"][w]["cliff"]) == shapes
