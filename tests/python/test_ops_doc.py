"""docs/ops.md is what scripts/gen_ops_doc.py makes from the lowering table and the OpInfo
sweep's record (the sweep itself runs in tests/python/test_ops_opinfo.py); every op the sweep
claims maps to a lowered ATen op, and every lowered op is listed."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import gen_ops_doc  # noqa: E402
import torchair


def test_committed_ops_doc_is_current():
    env = dict(os.environ)
    # the torchair this test imported (the installed one in CI: the source tree has no _C)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(torchair.__file__)), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gen_ops_doc.py"), "--check"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr


def test_every_swept_op_is_a_lowered_op_and_every_lowered_op_is_listed():
    import torchair  # noqa: F401
    from torchair.lowering.core import LOWERINGS

    claimed, record = gen_ops_doc._sweep()
    assert set(claimed) == set(record)  # the record covers the sweep
    packets = {str(k).split(".")[1] for k in LOWERINGS if str(k).count(".") == 2}
    for name in claimed:
        for aten in gen_ops_doc.OPINFO_TO_ATEN.get(name, [name.split(".")[-1]]):
            assert aten in packets, (name, aten)
    text = open(os.path.join(REPO, "docs", "ops.md")).read()
    for k in LOWERINGS:
        module = getattr(LOWERINGS[k], "__module__", "")
        if str(k).count(".") == 2 and module.startswith("torchair.lowering.") and module != "torchair.lowering.user":
            ns, packet, _ = str(k).split(".")
            assert f"| `{ns}.{packet}` |" in text, k
