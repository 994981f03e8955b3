"""What every compatibility script shares: ``REPORTS``, torchair's report of every graph it
compiles while the script runs (the hook tests/python/test_api.py's ``reports`` fixture uses),
so a script can check that torchair compiled something and did not just fall back to eager.
Importing this module installs the hook; a TorchAir user's script would not have it."""

import torchair.backend

REPORTS = []
_compile_graph = torchair.backend.compile_graph


def _recording_compile_graph(*args, **kwargs):
    compiled, report = _compile_graph(*args, **kwargs)
    REPORTS.append(report)
    return compiled, report


torchair.backend.compile_graph = _recording_compile_graph
