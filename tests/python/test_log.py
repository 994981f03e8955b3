"""torchair's log levels (torchair.log): TORCHAIR_LOG=error|warning|info|debug, default
warning (a normal compile prints nothing); Python's "torchair" logger and its children;
libair's messages through its one callback on "torchair.c" at the same levels; an unknown
level is a warning naming the valid ones."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import torch

import torchair
from torchair import log as tlog

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_SCRIPT = """
import torch, torchair
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
with torch.no_grad():
    torch.compile(m, backend="torchair")(torch.randn(3, 8))
print("ran")
"""


def _run(level: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("TORCHAIR_LOG", None)
    env.pop("TNG_LOG_LEVEL", None)
    if level is not None:
        env["TORCHAIR_LOG"] = level
    # the torchair this test imported (the installed one in CI: the source tree has no _C)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(torchair.__file__)), REPO, env.get("PYTHONPATH", "")])
    env["PYTHONWARNINGS"] = "ignore"  # torch's own deprecation warnings are not torchair's
    return subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=600)


def _torchair_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "torchair" in line]


def test_default_is_warning_and_a_normal_compile_prints_nothing():
    p = _run(None)
    assert p.returncode == 0 and "ran" in p.stdout, p.stderr
    assert _torchair_lines(p.stderr) == [], p.stderr
    p = _run("warning")
    assert p.returncode == 0 and _torchair_lines(p.stderr) == [], p.stderr


def test_info_shows_each_compile_and_debug_adds_libairs_passes():
    info = _run("info")
    assert info.returncode == 0, info.stderr
    lines = _torchair_lines(info.stderr)
    assert any(line.startswith("[torchair.compile INFO] inference graph:") for line in lines), lines
    assert any(line.startswith("[torchair.c INFO] compiled ") for line in lines), lines
    assert not any("DEBUG" in line for line in lines), lines
    debug = _run("DEBUG")  # case does not matter
    lines = _torchair_lines(debug.stderr)
    assert any(line.startswith("[torchair.c DEBUG] pass simplify:") for line in lines), lines
    assert any(line.startswith("[torchair.c DEBUG] step 0:") for line in lines), lines
    error = _run("error")
    assert _torchair_lines(error.stderr) == []


def test_unknown_level_is_a_warning_naming_the_valid_ones():
    p = _run("verbose")
    assert p.returncode == 0, p.stderr
    assert "TORCHAIR_LOG='verbose' is not a level; the levels are error|warning|info|debug" in p.stderr


@pytest.fixture
def level_restored():
    root = logging.getLogger("torchair")
    before = root.level
    yield
    root.setLevel(before)
    tlog.sync_c_level()


def test_loggers_and_the_c_callback_in_process(caplog, level_restored):
    assert tlog.get_logger("c").parent is logging.getLogger("torchair") or tlog.get_logger("c").name == "torchair.c"
    torch._dynamo.reset()
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()).eval()
    tlog.set_level("debug")
    with caplog.at_level(logging.DEBUG, logger="torchair"), torch.no_grad():
        torch.compile(m, backend="torchair")(torch.randn(3, 8))
    c_records = [r for r in caplog.records if r.name == "torchair.c"]
    assert any(r.levelno == logging.DEBUG and r.getMessage().startswith("pass simplify:") for r in c_records)
    assert any(r.levelno == logging.INFO and r.getMessage().startswith("compiled ") for r in c_records)
    assert any(r.name == "torchair.compile" and r.levelno == logging.INFO for r in caplog.records)
    # back at warning: libair is asked for nothing below it, and nothing arrives
    caplog.clear()
    tlog.set_level("warning")
    torch._dynamo.reset()
    with caplog.at_level(logging.WARNING, logger="torchair"), torch.no_grad():
        torch.compile(m, backend="torchair")(torch.randn(5, 8))
    assert [r for r in caplog.records if r.name.startswith("torchair")] == []
    assert torchair._C.set_log_level(1) == 1
