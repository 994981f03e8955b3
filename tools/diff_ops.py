"""Finds the first ATen node whose torchair lowering disagrees with eager.

Captures a zoo model's ATen graph (as torchair's backend sees it), runs it in
eager to get every intermediate value, then lowers and runs each supported
node alone through libair on those same values and compares.

    python tools/diff_ops.py bert_base [--all]
"""

from __future__ import annotations

import argparse
import operator

import torch
from torch.fx import GraphModule, Interpreter

from torchair import _C
from torchair.compiler import check_node, op_name
from torchair.decompositions import torchair_decompositions
from torchair.lowering import LOWERINGS, Lowerer, meta
from torchair.zoo import build


def capture(model, inputs) -> tuple[GraphModule, list]:
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def fw(gm, ex):
        def run(*args):
            graphs.append((gm, list(args)))  # the real flat arguments
            return gm(*args)

        return run

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=aot_autograd(fw_compiler=fw, decompositions=torchair_decompositions()))(*inputs)
    return graphs[0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--all", action="store_true")
    args = p.parse_args()
    model, inputs = build(args.model)
    gm, flat = capture(model, inputs)
    values: dict = {}

    class Rec(Interpreter):
        def run_node(self, n):
            r = super().run_node(n)
            values[n] = r
            return r

    with torch.no_grad():
        Rec(gm).run(*flat)
    bad = 0
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem or check_node(n) is not None:
            continue
        L = Lowerer()
        ins = []
        for inp in n.all_input_nodes:
            if isinstance(values.get(inp), torch.Tensor):
                L.add_input(inp)
                ins.append(values[inp].contiguous())
        out = LOWERINGS[n.target](L, n)
        ref = values[n]
        if isinstance(out, tuple):
            pairs = [(o, r) for o, r in zip(out, ref) if o is not None]
        else:
            pairs = [(out, ref)]
        L.g.outputs([o for o, _ in pairs])
        m = L.g.compile([t.dtype for t in ins], [r.dtype for _, r in pairs], lambda s, d: torch.empty(s, dtype=d))
        got = m.run(ins)
        for g, (_, r) in zip(got, pairs):
            err = (g.double() - r.double()).abs().max().item() if r.numel() else 0.0
            if g.shape != r.shape or not (err <= 1e-3 or (g.dtype == torch.bool and torch.equal(g, r))):
                bad += 1
                print(f"MISMATCH {n.name} {op_name(n)} shape {tuple(g.shape)} vs {tuple(r.shape)} err {err}")
                print("   args:", [(getattr(a, 'name', a), tuple(meta(a).shape) if hasattr(meta(a), 'shape') else None) for a in n.args])
                if not args.all:
                    return
    print("mismatches:", bad)


if __name__ == "__main__":
    main()
