"""Where the tests find the `air` CLI: $TORCHAIR_AIR_CLI, else the one `pip install` put in
this interpreter's scripts folder (found even where PATH lacks it, as under pyenv before a
rehash), else `air` on PATH. Only a binary that answers `air version` with libair's banner
counts (another program called air does not)."""

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
