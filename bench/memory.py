"""Peak memory per mode, each mode in a fresh subprocess (``--memory``).

The child imports torch, builds the model (weights included in the figure), compiles
and runs it, then reports its peak resident set (``VmHWM``; ``ru_maxrss`` where /proc is missing). It also
reports the RSS after ``import torch`` and after building the model, so a reader can
tell the mode's own cost from the interpreter's and the weights'.

Child usage: ``python -m bench.memory WORKLOAD MODE ITERS THREADS`` -> one JSON line.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _rss_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _maxrss_mb() -> float:
    """Peak RSS of this process. VmHWM first: ru_maxrss of a process started by
    fork+exec from a large parent includes the parent's RSS at the fork (Linux keeps
    the old mm's high-water mark across exec), which made every mode report the
    bench process's own size."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1024.0 * 1024.0) if sys.platform == "darwin" else r / 1024.0  # bytes on macOS, KiB on Linux


def measure_memory(
    workload: str, mode: str, iters: int, threads: int, fresh_cache: bool = True, timeout_s: float = 900.0
) -> dict[str, Any]:
    """Run one workload in one mode in a fresh interpreter and return its memory figures.

    With ``fresh_cache`` the child gets an empty Inductor cache, so it compiles cold as a
    first-time user would (a cache hit skips work and memory).
    """
    cmd = [sys.executable, "-m", "bench.memory", workload, mode, str(iters), str(threads)]
    env = os.environ.copy()
    with tempfile.TemporaryDirectory(prefix="torchair-bench-mem-") as tmp:
        if fresh_cache:
            env["TORCHINDUCTOR_CACHE_DIR"] = tmp
        try:
            p = subprocess.run(cmd, check=False, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"memory subprocess timed out after {timeout_s:.0f} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"memory subprocess exit {p.returncode}: {tail}"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def _child(workload: str, mode: str, iters: int, threads: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(threads)
    out: dict[str, Any] = {"rss_after_import_mb": _rss_mb()}
    from .modes import compile_mode
    from .workloads import select

    (w,) = select([workload])
    with torch.no_grad():
        model, inputs = w.build()
        out["rss_after_build_mb"] = _rss_mb()
        try:
            comp = compile_mode(mode, model)
            with comp.first_call_ctx():
                comp.fn(*inputs)
            for _ in range(iters):
                comp.fn(*inputs)
        except Exception as e:  # noqa: BLE001
            out["error"] = f"{type(e).__name__}: {e}"[:1000]
    out["peak_rss_mb"] = _maxrss_mb()
    return out


if __name__ == "__main__":
    name, mode_, n_iters, n_threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(_child(name, mode_, n_iters, n_threads)), flush=True)
