"""The `air` CLI's .npy files against numpy's: inputs written by numpy (every
dtype air has, format versions 1.0, 2.0 and 3.0) run through `air run` and
come back, read by numpy, equal to the same computation in numpy; bf16
models take float32 files and give float32 files; what air refuses
(Fortran order, big-endian) is an error naming the input.

The binary is $TORCHAIR_AIR_CLI, else `air` on PATH (pip install puts it
there); the test is skipped when neither is torchair's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.python._air_cli import air_binary
from torchair import _C


AIR = air_binary()
pytestmark = pytest.mark.skipif(AIR is None, reason="no torchair `air` binary (set TORCHAIR_AIR_CLI)")
if not hasattr(_C.Graph, "save"):
    pytestmark = pytest.mark.skip(reason="this torchair._C cannot save .air files")

# numpy dtype -> air dtype code; x + x for numbers, logical_not for bools
DTYPES = {
    "<f4": _C.F32,
    "<f8": _C.F64,
    "<f2": _C.F16,
    "<i8": _C.I64,
    "<i4": _C.I32,
    "<i2": _C.I16,
    "|i1": _C.I8,
    "|u1": _C.U8,
    "|b1": _C.BOOL,
}


def _save_model(path: Path, code: int, dims: list, op: str) -> None:
    g = _C.Graph()
    x = g.input(code, dims, "x")
    if code == _C.F16:  # no f16 add: widen, add (exact for x + x), narrow
        (w,) = g.node("cast", [x], {"dtype": _C.F32})
        (s,) = g.node("add", [w, w])
        (y,) = g.node("cast", [s], {"dtype": _C.F16})
    else:
        (y,) = g.node(op, [x] if op == "logical_not" else [x, x])
    g.outputs([y])
    g.save(str(path))


def _run(tmp_path: Path, model: Path, *inputs: Path) -> subprocess.CompletedProcess:
    args = [AIR, "run", str(model), "--output-dir", str(tmp_path / "out")]
    for p in inputs:
        args += ["--input", str(p)]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def _write(path: Path, a: np.ndarray, version: tuple[int, int]) -> None:
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=version)


@pytest.mark.parametrize("descr", list(DTYPES))
@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_round_trip_every_dtype_and_version(tmp_path, descr, version):
    dt = np.dtype(descr)
    rng = np.random.default_rng(0)
    if dt.kind == "b":
        x = rng.integers(0, 2, size=(3, 5)).astype(dt)
        want = ~x
    elif dt.kind == "f":
        x = rng.standard_normal((3, 5)).astype(dt)
        want = x + x
    else:
        x = rng.integers(-50 if dt.kind == "i" else 0, 50, size=(3, 5)).astype(dt)
        want = x + x
    g_dims = [3, 5]
    _save_model(tmp_path / "m.air", DTYPES[descr], g_dims, "logical_not" if dt.kind == "b" else "add")
    _write(tmp_path / "x.npy", x, version)
    r = _run(tmp_path, tmp_path / "m.air", tmp_path / "x.npy")
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "out0.npy")
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


def test_symbolic_dims_scalars_and_empty(tmp_path):
    g = _C.Graph()
    n = g.symbol("n")
    x = g.input(_C.F32, [n, 2], "x")
    (y,) = g.node("add", [x, x])
    g.outputs([y])
    g.save(str(tmp_path / "m.air"))
    for rows in (0, 1, 7):
        x = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
        np.save(tmp_path / "x.npy", x)
        r = _run(tmp_path, tmp_path / "m.air", tmp_path / "x.npy")
        assert r.returncode == 0, r.stderr
        assert np.array_equal(np.load(tmp_path / "out" / "out0.npy"), x + x)


def test_bf16_model_takes_and_gives_float32(tmp_path):
    g = _C.Graph()
    x = g.input(_C.BF16, [4], "h")
    (w,) = g.node("cast", [x], {"dtype": _C.F32})
    (y,) = g.node("add", [w, w])
    g.outputs([y])
    g.save(str(tmp_path / "m.air"))
    # 1 + 2^-9 rounds to 1 in bf16, 1 + 3*2^-9 to 1 + 2^-7 (nearest even)
    x = np.array([1 + 2**-9, 1 + 3 * 2**-9, -2.5, 0.0], dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    r = _run(tmp_path, tmp_path / "m.air", tmp_path / "x.npy")
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "out0.npy")
    assert np.array_equal(got, 2 * np.array([1.0, 1 + 2**-7, -2.5, 0.0], dtype=np.float32))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: np.asfortranarray(np.ones((3, 5), np.float32)), "fortran_order"),
        (lambda: np.ones((3, 5), ">f4"), "big-endian"),
        (lambda: np.ones((3, 5), np.float64), "dtype f64 given"),
        (lambda: np.ones((3, 4), np.float32), "dim 1 is 4"),
        (lambda: np.ones((3, 5), np.uint32), "not one air has"),
    ],
)
def test_refused_inputs_name_the_input(tmp_path, make, message):
    _save_model(tmp_path / "m.air", _C.F32, [3, 5], "add")
    np.save(tmp_path / "x.npy", make())
    r = _run(tmp_path, tmp_path / "m.air", tmp_path / "x.npy")
    assert r.returncode == 1
    assert "input 'x'" in r.stderr and message in r.stderr, r.stderr
