"""The machine's fp32 FMA peak and memory read bandwidth, measured by compiling and running
bench/peak_probe.c."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

PROBE_SRC = Path(__file__).with_name("peak_probe.c")


@dataclass
class Peak:
    isa: str = ""
    gflops_1thread: float | None = None
    gflops_nthreads: float | None = None
    threads: int = 1
    compiler: str = ""
    error: str | None = None
    # what torchair's own kernels run with (torchair._C.isa(): amx, avx512, ...)
    torchair_isa: str | None = None
    # memory read bandwidth, GB/s (1e9 bytes): the floor of LLM decode
    read_gbs_1thread: float | None = None
    read_gbs_nthreads: float | None = None

    def gflops(self, threads: int) -> float | None:
        """Peak for the given thread count (the 1-thread figure scaled if not measured)."""
        if threads == self.threads and self.gflops_nthreads:
            return self.gflops_nthreads
        if self.gflops_1thread:
            return self.gflops_1thread * threads
        return None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _parse(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def measure_peak(threads: int, seconds: float = 0.6) -> Peak:
    """Build the probe with ``cc -O2 -march=native`` in a temp dir and run it on 1 and ``threads`` threads."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return Peak(threads=threads, error="no C compiler (cc/gcc/clang) found")
    with tempfile.TemporaryDirectory(prefix="torchair-peak-") as tmp:
        exe = os.path.join(tmp, "peak_probe")
        build = [cc, "-O2", "-march=native", "-pthread", str(PROBE_SRC), "-o", exe]
        r = subprocess.run(build, check=False, capture_output=True, text=True)
        if r.returncode != 0:
            # -march=native is not known to every compiler; the portable build still gives a number.
            build = [cc, "-O2", "-pthread", str(PROBE_SRC), "-o", exe]
            r = subprocess.run(build, check=False, capture_output=True, text=True)
        if r.returncode != 0:
            return Peak(threads=threads, compiler=cc, error=f"probe build failed: {r.stderr.strip()[:500]}")
        out: dict[int, dict[str, str]] = {}
        for n in sorted({1, threads}):
            p = subprocess.run([exe, str(n), str(seconds)], check=False, capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                return Peak(threads=threads, compiler=" ".join(build), error=f"probe failed: {p.stderr.strip()}")
            out[n] = _parse(p.stdout)
    return Peak(
        isa=out[1].get("isa", "?"),
        gflops_1thread=float(out[1]["gflops"]),
        gflops_nthreads=float(out[threads]["gflops"]),
        read_gbs_1thread=float(out[1]["read_gbs"]) if "read_gbs" in out[1] else None,
        read_gbs_nthreads=float(out[threads]["read_gbs"]) if "read_gbs" in out[threads] else None,
        threads=threads,
        compiler=" ".join(build[:-3]),
        torchair_isa=_torchair_isa(),
    )


def _torchair_isa() -> str | None:
    try:
        import torchair

        return str(torchair._C.isa())
    except Exception:  # noqa: BLE001 - the probe's figures stand without it
        return None
