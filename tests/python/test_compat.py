"""The TorchAir compatibility suite (tests/compat/): standalone scripts written the way
TorchAir's samples and LLM serving code that calls TorchAir are written, with "cpu" for
"npu". Each runs in its own process from an empty directory (so the installed torchair is
what loads) and must exit 0 with "COMPAT OK <name>" as its last line of output. Scripts that
fail because of a known torchair bug are strict xfails: they start passing, and fail here,
when the bug is fixed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

COMPAT = Path(__file__).resolve().parents[1] / "compat"
SCRIPTS = sorted(COMPAT.glob("[0-9][0-9]_*.py"))

# script name -> (the torchair bug it trips over, text its failure output must contain);
# tests/compat/README.md has the reproductions. A script that fails in some other way fails here.
XFAIL = {
}


class KnownBug(AssertionError):
    """A script failed the way its known torchair bug makes it fail."""


def _param(script: Path):
    marks = []
    if script.stem in XFAIL:
        marks.append(pytest.mark.xfail(strict=True, raises=KnownBug, reason=XFAIL[script.stem][0]))
    return pytest.param(script, id=script.stem, marks=marks)


def test_the_suite_is_complete():
    assert len(SCRIPTS) >= 22, [s.name for s in SCRIPTS]
    numbers = [int(s.name[:2]) for s in SCRIPTS]
    assert numbers == list(range(1, len(SCRIPTS) + 1)), "scripts are numbered 01, 02, ... without gaps"
    readme = (COMPAT / "README.md").read_text()
    listed = set(re.findall(r"`(\d\d_\w+\.py)`", readme))
    assert listed == {s.name for s in SCRIPTS}, "tests/compat/README.md lists every script, and only those"
    assert set(XFAIL) <= {s.stem for s in SCRIPTS}


@pytest.mark.parametrize("script", [_param(s) for s in SCRIPTS])
def test_compat_script(script: Path, tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "TORCHAIR_CACHE_DIR": str(tmp_path / "cache")},  # max-autotune's choices
    )
    output = f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"
    if proc.returncode != 0 and script.stem in XFAIL and XFAIL[script.stem][1] in proc.stdout + proc.stderr:
        raise KnownBug(f"{script.name}: {XFAIL[script.stem][0]}")
    assert proc.returncode == 0, f"{script.name} exited with {proc.returncode}\n{output}"
    lines = proc.stdout.strip().splitlines()
    assert lines and lines[-1] == f"COMPAT OK {script.stem}", f"{script.name} did not end with its OK line\n{output}"
