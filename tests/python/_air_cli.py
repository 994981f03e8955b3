"""Where the tests find the `air` CLI: $TORCHAIR_AIR_CLI, else the one `pip install` put in
this interpreter's scripts folder (found even where PATH lacks it, as under pyenv before a
rehash), else `air` on PATH. Only a binary that answers `air version` with libair's banner
counts (another program called air does not). air_run: one `air run` of a file on numpy
arrays, its outputs read back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig


def air_binary() -> str | None:
    scripts = os.path.join(sysconfig.get_path("scripts"), "air")
    for cand in (os.environ.get("TORCHAIR_AIR_CLI"), scripts, shutil.which("air")):
        if not cand or not os.path.exists(cand) and os.sep in cand:
            continue
        try:
            out = subprocess.run([cand, "version"], capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.startswith("libair"):
            return cand
    return None


def air_run(path: str, arrays: list, folder) -> list:
    """`air run path --input a0.npy ... --output-dir folder/out`, the arrays saved in
    folder as a0.npy, a1.npy, ... (the file's input order); its outputs as torch tensors."""
    import numpy as np
    import torch

    cmd = [air_binary(), "run", str(path)]
    for i, a in enumerate(arrays):
        np.save(os.path.join(folder, f"a{i}.npy"), a)
        cmd += ["--input", os.path.join(folder, f"a{i}.npy")]
    out = os.path.join(folder, "out")
    subprocess.run(cmd + ["--output-dir", out], check=True, timeout=300)
    n = len([f for f in os.listdir(out) if f.startswith("out") and f.endswith(".npy")])
    return [torch.from_numpy(np.load(os.path.join(out, f"out{i}.npy"))) for i in range(n)]
