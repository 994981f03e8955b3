"""Input mutations of a graph written back in one call instead of one eager
``copy_`` each. aot_autograd keeps the mutation of an input that needs no
gradient (a BatchNorm's running_mean, running_var and num_batches_tracked in
training) in the graph, as ``copy_(input, new_value)`` at its end: ResNet-50's
forward had 159 of them, each a fallback to eager after the compiled pieces.
``gather`` replaces them by one ``write_back(inputs, new_values)`` node
(``torch._foreach_copy_``) just before the output, so the new values come out
of the compiled subgraphs and the buffers hold eager's values after the call."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten


def write_back(inputs: Sequence[torch.Tensor], values: Sequence[torch.Tensor]) -> None:
    """inputs[i].copy_(values[i]) for every i, in one foreach call."""
    torch._foreach_copy_(list(inputs), list(values))


def _simple_copy(n: Node, order: dict[Node, int]) -> bool:
    """copy_(placeholder, value) that nothing but the output uses, of the same
    shape and dtype (no broadcast or cast), after which nothing reads the
    placeholder."""
    if n.op != "call_function" or n.target is not aten.copy_.default or len(n.args) != 2 or n.kwargs:
        return False
    if any(u.op != "output" for u in n.users):
        return False
    dst, src = n.args
    if not isinstance(dst, Node) or dst.op != "placeholder" or not isinstance(src, Node):
        return False
    d, s = dst.meta.get("val"), src.meta.get("val")
    if not isinstance(d, torch.Tensor) or not isinstance(s, torch.Tensor):
        return False
    if d.dtype != s.dtype or tuple(d.shape) != tuple(s.shape) or d.device != s.device:
        return False
    return all(order[u] <= order[n] for u in dst.users)


def gather(gm: GraphModule) -> int:
    """Rewrites gm's simple input copies into one write_back node; returns how
    many it took."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    copies = [n for n in gm.graph.nodes if _simple_copy(n, order)]
    if not copies:
        return 0
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    with gm.graph.inserting_before(output):
        gm.graph.call_function(write_back, ([c.args[0] for c in copies], [c.args[1] for c in copies]))
    for c in copies:
        # an output that is the copy's result is the input itself (which
        # holds the new values once written back): its identity kept, as
        # aot_autograd returns a mutated input (StaticCache's counter)
        c.replace_all_uses_with(c.args[0])
        gm.graph.erase_node(c)
    gm.recompile()
    return len(copies)


def is_write_back(n: Node) -> bool:
    return n.op == "call_function" and n.target is write_back
