"""Precompiling with torch's own API: a torchair-compiled function saved to a file
and loaded in another process without dynamo tracing, aot_autograd or (on the
same build and CPU) torchair's lowering:

    compiled = torch.compile(model, backend="torchair", fullgraph=True)
    with torch.no_grad():
        fn = compiled.forward.aot_compile(((x,), {}))
    fn.save_compiled_function("model.pt2c")
    # another process, the same model class built again:
    fn = torch.compiler.load_compiled_function(open("model.pt2c", "rb"))
    out = fn(model, x)

(torch._dynamo.config.enable_aot_compile must be on.) api.py does all of it in two
calls: ``torchair.precompile.save(model, (x,), path)`` and
``fn = torchair.precompile.load(model, path)``; ``fn(x)``. Under aot_compile the
backend returns a PrecompiledGraph (artifact.py): the inference ATen graph that
aot_autograd made (after torchair's decompositions and the user's passes), which
arguments are frozen parameters, the options, and the compile cache's entries
for its subgraphs (.air bytes with the weights as externals). Loading keeps
these; the first call binds the parameters it is passed and compiles the
graph, the subgraphs from their entries. capture.py: what the backend records
while it compiles for aot_compile. docs/export.md, "Precompiling"."""

from __future__ import annotations

from torchair.precompile.api import load, save, serializable_guards
from torchair.precompile.artifact import PrecompiledGraph
from torchair.precompile.capture import Capture, PrecompileError, PrecompileWarning, capturing, current_capture, precompiling

__all__ = ["save", "load", "serializable_guards", "PrecompiledGraph", "Capture", "PrecompileError", "PrecompileWarning", "capturing", "current_capture",
           "precompiling"]
