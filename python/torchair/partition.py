"""Graph rewrites around partitioning: size nodes (SymInt arithmetic) and
where they go, views left to eager where a subgraph would copy, sums of
zero pads as cats, and the split of partitions into bounded runs."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.infra.partitioner import Partition

from torchair.lowering import _zero_pad_parts, meta

# Size arithmetic on SymInts (a dynamic graph's sym_size of a tensor, and
# the floordiv/sum that turn a length into the next layer's). Their users
# read sizes from the nodes' symbolic meta, never from these values, so a
# subgraph holds them without lowering them (see _size_nodes_follow_users).
_SIZE_OPS = {
    torch.ops.aten.sym_size.int,
    torch.ops.aten.sym_numel.default,
    operator.floordiv,
    operator.add,
    operator.sub,
    operator.mul,
    torch.sym_sum,
    math.ceil,
    math.floor,
}
# a size divided into a SymFloat, for the ceil or floor that takes it back
# (MobileViT's interpolate: math.ceil(h / 2))
_SIZE_FLOAT_OPS = {operator.truediv}


def is_size_node(node: Node) -> bool:
    if node.op != "call_function":
        return False
    val = meta(node)
    return (node.target in _SIZE_OPS and isinstance(val, torch.SymInt)) or (
        node.target in _SIZE_FLOAT_OPS and isinstance(val, torch.SymFloat))


# ops whose output is a view of a contiguous input in eager
_RESHAPES = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.reshape.default)


def _eager_views(gm: GraphModule, frozen_positions: Sequence[int]) -> set[Node]:
    """Transposes of graph inputs, and reshapes the graph returns, that eager
    gives as views, for free, where a subgraph would copy: returns the nodes
    to leave out of the partitions (adding a duplicate where a compute user
    still needs one). Training graphs only (see compiler._compile_graph).

    A training step's forward graph returns permute(W) of every linear's
    weight for the backward to use, and the backward transposes it back:
    compiled, both were weight-sized copies (BERT-base: 146 a step, most of
    the 93 ms its permutes took). Now the forward returns eager's view of W
    (its own linear still reads W through a compiled permute, which the
    GEMM folds), and the backward's permute of that view, contiguous again,
    is eager's too. Frozen inputs are constants inside the subgraphs, so
    their permutes fold at compile time and stay there; so does any permute
    of an input that only compiled code reads and that a view would not make
    contiguous (the subgraph would copy the view).

    Likewise a reshape that the graph returns: a subgraph output must own
    its memory, so a compiled reshape there was a copy (BERT-base's step
    returned 299 of them, 14 ms); in eager it is a view of the subgraph's
    own output."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    frozen = {placeholders[i] for i in frozen_positions if i < len(placeholders)}
    output = next((n for n in gm.graph.nodes if n.op == "output"), None)
    keep: set[Node] = set()
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in (torch.ops.aten.permute.default, *_RESHAPES):
            continue
        src, val = n.args[0], meta(n)
        if not isinstance(src, Node) or src in frozen or not isinstance(val, torch.Tensor):
            continue
        if n.target is torch.ops.aten.permute.default and src.op != "placeholder":
            continue
        if n.target in _RESHAPES and not (output in n.users and isinstance(meta(src), torch.Tensor)
                                          and meta(src).is_contiguous() and val.is_contiguous()):
            continue
        if output is not None and output in n.users:
            if len(n.users) == 1:
                keep.add(n)
                continue
            with gm.graph.inserting_after(n):
                view = gm.graph.call_function(n.target, n.args, dict(n.kwargs))
            view.meta = dict(n.meta)
            output.replace_input_with(n, view)
            keep.add(view)
        elif val.is_contiguous() and isinstance(meta(src), torch.Tensor) and not meta(src).is_contiguous():
            keep.add(n)
    if keep:
        gm.recompile()
    return keep


def _pads_to_cats(gm: GraphModule) -> None:
    """A sum of zero pads whose windows tile their dim (select_backward's,
    torchair.decompositions, over a qkv split) as an aten.cat in the graph,
    before partitioning, so that _permutes_through_cats can see it. (The
    lowering makes a cat of other sums of disjoint pads, gaps included.)"""
    changed = False
    for n in reversed(list(gm.graph.nodes)):
        if n.op != "call_function" or n.target != torch.ops.aten.add.Tensor or not n.users:
            continue
        out = meta(n)
        parts = _zero_pad_parts(n, out) if isinstance(out, torch.Tensor) else None
        if parts is None or len(parts[1]) < 2:
            continue
        d, windows = parts
        if not isinstance(out.shape[d], int) or any(not isinstance(meta(src).shape[d], int) for _, src in windows):
            continue  # (a symbolic extent: no guard on it from here)
        windows.sort(key=lambda w: w[0])
        at = 0
        for start, src in windows:
            at = at + meta(src).shape[d] if start == at else -1
        if at != out.shape[d]:
            continue  # a gap or an overlap: left to the lowering
        with gm.graph.inserting_before(n):
            cat = gm.graph.call_function(torch.ops.aten.cat.default, ([src for _, src in windows], d))
        cat.meta = dict(n.meta)
        n.replace_all_uses_with(cat)
        changed = True
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()


def _permutes_through_cats(gm: GraphModule) -> None:
    """permute(cat(xs, d), p) as cat([permute(x, p) for x], p.index(d)),
    where the permute is the cat's only user: the cat then writes the
    permuted layout itself. A ViT's qkv gradient (three [B, H, T, D] pieces
    that eager's attention backward leaves in [B, T, H, D] memory) was
    bound with three copies, joined, and permuted to [B, T, 3, H, D] for
    the weight gradient; each permuted piece is now eager's contiguous
    view (_views_out_to_eager) and the cat the one pass."""
    changed = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target != torch.ops.aten.permute.default:
            continue
        c, perm = n.args[0], list(n.args[1])
        if not (isinstance(c, Node) and c.op == "call_function" and c.target == torch.ops.aten.cat.default
                and len(c.users) == 1 and isinstance(meta(n), torch.Tensor)):
            continue
        rank = meta(n).dim()
        perm = [p % rank for p in perm]
        d = (c.args[1] if len(c.args) > 1 else c.kwargs.get("dim", 0)) % rank
        pieces = []
        with gm.graph.inserting_before(n):
            for x in c.args[0]:
                if not isinstance(x, Node) or not isinstance(meta(x), torch.Tensor) or meta(x).dim() != rank:
                    break
                v = gm.graph.call_function(torch.ops.aten.permute.default, (x, perm))
                v.meta = {"val": torch.ops.aten.permute.default(meta(x), perm)}
                pieces.append(v)
            else:
                joined = gm.graph.call_function(torch.ops.aten.cat.default, (pieces, perm.index(d)))
                joined.meta = dict(n.meta)
                n.replace_all_uses_with(joined)
                changed = True
                continue
        for v in pieces:  # a piece that is no tensor of the rank: as it was
            gm.graph.erase_node(v)
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()


def _one_user_per_size_node(gm: GraphModule) -> None:
    """Gives every size node one user, copying it for each further user
    (latest first, so a chain of them is copied whole)."""
    changed = False
    for n in reversed(list(gm.graph.nodes)):
        if not is_size_node(n) or len(n.users) < 2:
            continue
        for user in list(n.users)[1:]:
            with gm.graph.inserting_after(n):
                copy = gm.graph.call_function(n.target, n.args, dict(n.kwargs))
            copy.meta = dict(n.meta)
            user.replace_input_with(n, copy)
            changed = True
    if changed:
        gm.recompile()


def _size_nodes_follow_users(partitions: list[Partition]) -> list[Partition]:
    """Takes out of each partition the size nodes whose user is not in it
    (a subgraph returns tensors only; such a node runs in eager, on SymInts),
    and drops partitions left with size nodes only.

    A dynamic wav2vec2 takes sym_size of its first and last conv's output
    for the group norm and the projection's views; unsupported, each was an
    edge out of the partition and back in, and the cut left the convs
    between them in a subgraph with no bare input length: all seven fell
    back. With one user each (_one_user_per_size_node), a size node kept
    beside its user adds no edge."""
    out = []
    for p in partitions:
        changed = True
        while changed:
            changed = False
            for n in list(p.nodes):
                if is_size_node(n) and any(u not in p.nodes for u in n.users):
                    del p.nodes[n]
                    changed = True
        if any(not is_size_node(n) for n in p.nodes):
            out.append(p)
    return out


# ops whose result is always a view of their first argument in eager
_EAGER_VIEW_OPS = (
    torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.permute.default,
    torch.ops.aten.transpose.int, torch.ops.aten.t.default, torch.ops.aten.select.int,
    torch.ops.aten.slice.Tensor, torch.ops.aten.unsqueeze.default, torch.ops.aten.squeeze.dim,
    torch.ops.aten.squeeze.dims, torch.ops.aten.alias.default, torch.ops.aten.expand.default,
)


# views that raise when the strides do not allow them
_STRICT_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)


def _views_out_to_eager(gm: GraphModule, partitions: list[Partition]) -> list[Partition]:
    """Leaves to eager the views a partition would return: a subgraph output
    owns its memory, so a view there was a copy, where eager's is free.
    Training graphs only (see compiler._compile_graph).

    A view leaves its partition when its users outside it run in eager (or
    are the graph's output), or when it is contiguous (a subgraph that takes
    it gets it without a copy). Users inside keep the view inside, and a
    duplicate serves the outside ones. Views whose users have all left
    follow them, so a chain of views leaves whole. So does a view that
    makes a subgraph's input contiguous. ViT-Tiny's step copied
    the qkv projection into q, k and v for eager's attention (a permute of
    [B, T, 3, H, D] and three slices), its gradients back out of the
    attention's backward (a permute), and each activation the weight
    gradients read (a reshape to [tokens, features] returned beside the
    input gradient), and the attention's output twice on its way into the
    output projection (bound contiguous, then permuted)."""
    owner = {n: p for p in partitions for n in p.nodes}
    changed, moved = True, False
    while changed:
        changed = False
        for p in partitions:
            for n in reversed(list(p.nodes)):
                if n.target not in _EAGER_VIEW_OPS or not isinstance(meta(n), torch.Tensor):
                    continue
                root = n.args[0]
                # through views in p that only feed this one (an unsqueeze
                # before the permute): they follow it out
                while (owner.get(root) is p and root.target in _EAGER_VIEW_OPS and len(root.users) == 1
                       and isinstance(root.args[0], Node)):
                    root = root.args[0]
                if (owner.get(root) is not p and isinstance(meta(root), torch.Tensor)
                        and not meta(root).is_contiguous() and meta(n).is_contiguous()):
                    # a view that makes an input contiguous: the subgraph
                    # would copy the input to bind it, then copy it again
                    del p.nodes[n]
                    del owner[n]
                    changed = moved = True
                    continue
                outside = [u for u in n.users if owner.get(u) is not p]
                if not outside or (any(u in owner for u in outside) and not meta(n).is_contiguous()):
                    continue
                if any(owner.get(u) is p for u in n.users):
                    with gm.graph.inserting_after(n):
                        view = gm.graph.call_function(n.target, n.args, dict(n.kwargs))
                    view.meta = dict(n.meta)
                    for u in outside:
                        u.replace_input_with(n, view)
                else:
                    del p.nodes[n]
                    del owner[n]
                changed = moved = True
    if moved:
        # Eager now gets views with the layouts of the trace where it got
        # contiguous subgraph outputs, and the trace's layouts need not
        # hold: an eager op fed a subgraph's contiguous output where the
        # trace had a transposed one returns another layout (a small
        # LLaMA's attention output, viewed back to [B, T, C] through a
        # permute, failed). A reshape is the view where one exists and a
        # copy where none does, where view would raise.
        for n in gm.graph.nodes:
            if n.op == "call_function" and n not in owner and n.target in _STRICT_VIEWS:
                n.target = torch.ops.aten.reshape.default
    gm.recompile()
    return [p for p in partitions if any(not is_size_node(n) for n in p.nodes)]


def _split(partitions: list[Partition], order: dict[Node, int], limit: int) -> list[Partition]:
    """Splits each partition into runs of at most limit nodes in graph order.
    Consecutive runs of a convex partition are convex, so no cycle appears."""
    out: list[Partition] = []
    for p in partitions:
        nodes = sorted(p.nodes, key=order.__getitem__)
        for i in range(0, len(nodes), limit):
            out.append(Partition(id=len(out), nodes=nodes[i : i + limit]))
    return out
