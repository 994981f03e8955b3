"""Where and with what a benchmark ran: CPU, its relevant flags, versions, git commit."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
_RELEVANT = ("avx", "avx2", "fma", "f16c", "avx_vnni", "amx_bf16", "amx_tile", "amx_int8")


def cpu_info() -> dict[str, Any]:
    model, flags, physical = "", set(), set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    phys_id = core_id = ""
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key, val = key.strip(), val.strip()
        if key == "model name" and not model:
            model = val
        elif key in ("flags", "Features") and not flags:
            flags = set(val.split())
        elif key == "physical id":
            phys_id = val
        elif key == "core id":
            core_id = val
            physical.add((phys_id, core_id))
    relevant = sorted(f for f in flags if f in _RELEVANT or f.startswith("avx512"))
    return {
        "model": model or platform.processor() or platform.machine(),
        "arch": platform.machine(),
        "flags": relevant,
        "avx512": any(f.startswith("avx512") for f in flags),
        "logical_cpus": os.cpu_count(),
        "physical_cores": len(physical) or None,
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }


def _git(*args: str) -> str | None:
    try:
        r = subprocess.run(["git", *args], check=False, cwd=REPO, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def git_info() -> dict[str, Any]:
    status = _git("status", "--porcelain")
    return {"commit": _git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


def versions() -> dict[str, str | None]:
    import torch

    out: dict[str, str | None] = {"python": platform.python_version(), "torch": torch.__version__}
    for mod in ("transformers", "torchair"):
        try:
            m = __import__(mod)
            out[mod] = getattr(m, "__version__", "unknown")
        except Exception:  # noqa: BLE001 - absent or broken is itself the answer
            out[mod] = None
    return out


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
