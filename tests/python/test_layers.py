"""The code's shape (tools/check_layers.py): no include or import circle, no layer of the C
core including one above it, no source file over the line limit. Also checks that the checker
can fail: a circle planted in a copy of a small tree is found."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import check_layers  # noqa: E402


def test_the_tree_has_no_circles_upward_includes_or_long_files():
    p = subprocess.run([sys.executable, str(REPO / "tools" / "check_layers.py")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_checker_finds_a_circle_and_an_upward_include(tmp_path, monkeypatch):
    src = tmp_path / "src"
    (src / "core").mkdir(parents=True)
    (src / "ops").mkdir()
    (tmp_path / "include").mkdir()
    (src / "core" / "a.h").write_text('#include "core/b.h"\n')
    (src / "core" / "b.h").write_text('#include "core/a.h"\n')
    (src / "core" / "c.c").write_text('#include "core/a.h"\n#include "ops/op.h"\n')
    (src / "ops" / "op.h").write_text("\n")
    monkeypatch.setattr(check_layers, "REPO", tmp_path)
    problems = check_layers.check_c()
    assert any("circle among modules" in p and "core/a" in p and "core/b" in p for p in problems), problems
    assert any("layer: src/core/c.c includes ops/op.h" in p for p in problems), problems


def test_the_checker_finds_an_import_circle(tmp_path, monkeypatch):
    pkg = tmp_path / "python" / "torchair"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from torchair.b import x\n")
    (pkg / "b.py").write_text("def f():\n    from torchair import a\n")
    monkeypatch.setattr(check_layers, "REPO", tmp_path)
    assert any("torchair.a" in p and "torchair.b" in p for p in check_layers.check_python())
