"""The SPEC section 4 accuracy rule, as one reusable function.

A compiled result passes if it is ``allclose`` (rtol=atol=tol) to eager fp32;
failing that, if its RMSE against an fp64 eager run is at most ``multiplier``
times eager fp32's own RMSE against fp64, plus ``tol / 10`` (multiplier 2, or
3 for bf16/fp16 results). Integer and boolean tensors must match exactly.
The rule is applied to every tensor in a nested output (tuples, lists, dicts,
dataclasses, Hugging Face ``ModelOutput``).

Importing this module costs nothing: torch is imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["check_accuracy", "flatten_output"]


class _Mismatch(Exception):
    """A structural difference between two outputs (type, keys, length, shape)."""


def _is_tensor(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def _children(x: Any) -> list[tuple[str, Any]] | None:
    """Named children of a container, or None for a leaf."""
    if _is_tensor(x):
        return None
    # ModelOutput is an OrderedDict subclass (None fields are left out), so the
    # Mapping branch covers it; dataclasses that are not mappings come next.
    if isinstance(x, Mapping):
        return [(f".{k}" if isinstance(k, str) else f"[{k!r}]", v) for k, v in x.items()]
    if isinstance(x, (tuple, list)):
        return [(f"[{i}]", v) for i, v in enumerate(x)]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [(f".{f.name}", getattr(x, f.name)) for f in dataclasses.fields(x)]
    return None


def flatten_output(x: Any, path: str = "out") -> Iterator[tuple[str, Any]]:
    """Yield ``(path, leaf)`` for every leaf of a nested output."""
    kids = _children(x)
    if kids is None:
        yield path, x
        return
    for name, v in kids:
        yield from flatten_output(v, path + name)


def _zip_leaves(out: Any, ref: Any, path: str = "out") -> Iterator[tuple[str, Any, Any]]:
    """Walk two nested outputs in step; raise _Mismatch where their structure differs."""
    ko, kr = _children(out), _children(ref)
    if ko is None or kr is None:
        if (ko is None) != (kr is None):
            raise _Mismatch(f"{path}: {type(out).__name__} vs reference {type(ref).__name__}")
        yield path, out, ref
        return
    names_o, names_r = [n for n, _ in ko], [n for n, _ in kr]
    if names_o != names_r:
        raise _Mismatch(f"{path}: fields {names_o} vs reference {names_r}")
    for (name, vo), (_, vr) in zip(ko, kr, strict=True):
        yield from _zip_leaves(vo, vr, path + name)


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    import torch

    d = a.to(torch.float64) - b.to(torch.float64)
    return math.sqrt(float(torch.mean(d * d))) if d.numel() else 0.0


def _check_tensor(
    path: str,
    out: torch.Tensor,
    ref32: torch.Tensor,
    ref64: torch.Tensor | None,
    tol: float,
    multiplier: float | None,
) -> tuple[bool, str]:
    import torch

    if out.shape != ref32.shape:
        return False, f"{path}: shape {tuple(out.shape)} vs reference {tuple(ref32.shape)}"
    if out.dtype != ref32.dtype:
        return False, f"{path}: dtype {out.dtype} vs reference {ref32.dtype}"
    if out.device != ref32.device:
        return False, f"{path}: device {out.device} vs reference {ref32.device}"
    if out.numel() == 0:
        return True, f"{path}: empty"
    if not (out.is_floating_point() or out.is_complex()):
        if torch.equal(out, ref32):
            return True, f"{path}: exact"
        n_bad = int((out != ref32).sum())
        return False, f"{path}: {n_bad}/{out.numel()} integer/bool elements differ"
    if out.is_complex():
        out, ref32 = torch.view_as_real(out), torch.view_as_real(ref32)
        ref64 = torch.view_as_real(ref64) if ref64 is not None and ref64.is_complex() else ref64

    o64, r64 = out.detach().to(torch.float64), ref32.detach().to(torch.float64)
    if torch.allclose(o64, r64, rtol=tol, atol=tol, equal_nan=True):
        return True, f"{path}: allclose"
    max_abs = float((o64 - r64).abs().nan_to_num(nan=math.inf).max())
    if ref64 is None:
        return False, f"{path}: not allclose (max abs diff {max_abs:.3g}) and no fp64 reference"
    if tuple(ref64.shape) != tuple(out.shape):
        return False, f"{path}: fp64 reference shape {tuple(ref64.shape)} vs {tuple(out.shape)}"
    f64 = ref64.detach().to(torch.float64)
    # Non-finite values must sit where the fp64 run has the same ones; RMSE is over the rest.
    finite = torch.isfinite(f64)
    same_nonfinite = torch.equal(o64[~finite].nan_to_num(nan=0.0), f64[~finite].nan_to_num(nan=0.0)) and bool(
        torch.isnan(o64[~finite]).eq(torch.isnan(f64[~finite])).all()
    )
    if not same_nonfinite or not bool(torch.isfinite(o64[finite]).all()):
        return False, f"{path}: NaN/Inf where the fp64 reference differs (max abs diff {max_abs:.3g})"
    if multiplier is None:
        multiplier = 3.0 if out.dtype in (torch.float16, torch.bfloat16) else 2.0
    res_err = _rmse(o64[finite], f64[finite])
    ref_err = _rmse(r64[finite], f64[finite])
    bound = multiplier * ref_err + tol / 10.0
    ok = res_err <= bound
    verdict = "<=" if ok else ">"
    return ok, (
        f"{path}: not allclose (max abs diff {max_abs:.3g}); "
        f"rmse vs fp64 {res_err:.3g} {verdict} {multiplier:g}*{ref_err:.3g}+{tol / 10:.3g}"
    )


def _check_leaf(path: str, out: Any, ref32: Any, ref64: Any, tol: float, multiplier: float | None) -> tuple[bool, str]:
    if _is_tensor(out) and _is_tensor(ref32):
        return _check_tensor(path, out, ref32, ref64 if _is_tensor(ref64) else None, tol, multiplier)
    if _is_tensor(out) or _is_tensor(ref32):
        return False, f"{path}: {type(out).__name__} vs reference {type(ref32).__name__}"
    if isinstance(out, float) and isinstance(ref32, float):
        ok = math.isclose(out, ref32, rel_tol=tol, abs_tol=tol) or (math.isnan(out) and math.isnan(ref32))
        return ok, f"{path}: {out!r} vs {ref32!r}"
    return out == ref32, f"{path}: {out!r} vs {ref32!r}"


def check_accuracy(
    out: Any,
    ref_fp32: Any,
    ref_fp64: Any = None,
    tol: float = 1e-3,
    multiplier: float | None = None,
) -> tuple[bool, str]:
    """Check ``out`` against eager fp32 (``ref_fp32``) and eager fp64 (``ref_fp64``) per SPEC section 4.

    ``ref_fp64`` may be None (then only ``allclose`` can pass) and must otherwise have the same
    structure as ``ref_fp32``. ``multiplier`` overrides the RMSE factor (default 2, or 3 when the
    result is bf16/fp16; pass 3 for a fp32 result computed with ``mixed_precision``).
    Returns ``(ok, detail)``; ``detail`` names the first failing tensor, or summarises a pass.
    """
    try:
        pairs = list(_zip_leaves(out, ref_fp32))
        refs64: list[Any] = [None] * len(pairs)
        if ref_fp64 is not None:
            refs64 = [r64 for _, r64, _ in _zip_leaves(ref_fp64, ref_fp32, "ref64")]
    except _Mismatch as e:
        return False, f"structure differs: {e}"
    if not pairs:
        return True, "no outputs"
    n_allclose = n_rmse = 0
    rmse_notes: list[str] = []
    for (path, o, r), r64 in zip(pairs, refs64, strict=True):
        ok, detail = _check_leaf(path, o, r, r64, tol, multiplier)
        if not ok:
            return False, detail
        if "rmse" in detail:
            n_rmse += 1
            rmse_notes.append(detail)
        else:
            n_allclose += 1
    summary = f"{len(pairs)} leaves: {n_allclose} allclose/exact"
    if n_rmse:
        summary += f", {n_rmse} passed on fp64 RMSE ({rmse_notes[0]})"
    return True, summary
