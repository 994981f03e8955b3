"""Op census: which ATen ops reach torchair, with which arguments.

For each zoo model (eval, no_grad) this compiles the model with a recording aot_autograd
backend using ``torchair_decompositions()`` and records every ``call_function`` node of the
forward ATen graph(s). It also records a ResNet-50 training step (forward and backward
graphs) and BERT-base under ``dynamic=True`` at two sequence lengths.

    PYTHONPATH=python python tools/op_census.py [--models a,b] [--out docs/op-census.md] [--json f]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.utils import counters
from torch._functorch.aot_autograd import make_boxed_func
from torchair import zoo
from torchair.decompositions import torchair_decompositions

DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "b8",
}
# int-list args of these ops are shapes: summarised as their length, not their values.
SHAPE_OPS = {"view", "_unsafe_view", "reshape", "expand", "full", "empty", "zeros", "ones", "new_zeros", "new_empty"}
HEAVY = {"convolution", "addmm", "mm", "bmm", "_scaled_dot_product_flash_attention_for_cpu", "embedding"}
# keyword args that carry no information on CPU
NOISE = {("layout", "torch.strided"), ("pin_memory", "False"), ("device", "cpu")}


def op_name(target: Any) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return str(target)  # aten.convolution.default
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"
    module = getattr(target, "__module__", "?").lstrip("_")  # _operator -> operator
    return f"{module}.{getattr(target, '__name__', repr(target))}"


def fmt_val(v: Any, shapes: bool) -> str:
    if isinstance(v, torch.Tensor):
        dt = DTYPES.get(v.dtype, str(v.dtype))
        return f"{dt}{list(v.shape)}" if shapes else f"{dt}[{v.dim()}d]"
    if isinstance(v, torch.SymInt | torch.SymFloat | torch.SymBool):
        return f"Sym({v.node.expr})" if shapes else "Sym"
    if isinstance(v, tuple | list):
        return "(" + ", ".join(fmt_val(x, shapes) for x in v) + ")"
    return repr(v)


def fmt_arg(a: Any, shape_op: bool, shapes: bool) -> str:
    if isinstance(a, fx.Node):
        return fmt_val(a.meta.get("val"), shapes) if "val" in a.meta else f"%{a.name}"
    if isinstance(a, list | tuple):
        if shape_op and not shapes and all(isinstance(x, int | fx.Node) for x in a):
            nsym = sum(isinstance(x, fx.Node) for x in a)
            return f"[{len(a)} ints{f', {nsym} sym' if nsym else ''}]"
        return "[" + ", ".join(fmt_arg(x, shape_op, shapes) for x in a) + "]"
    if isinstance(a, float):
        return f"{a:.4g}"
    if isinstance(a, torch.dtype):
        return DTYPES.get(a, str(a))
    if isinstance(a, torch.device):
        return a.type
    return str(a)


def node_pattern(n: fx.Node, shapes: bool = False) -> str:
    short = op_name(n.target).split(".")[1] if "." in op_name(n.target) else ""
    shape_op = short in SHAPE_OPS
    parts = [fmt_arg(a, shape_op, shapes) for a in n.args]
    w = {"convolution": 1, "convolution_backward": 2}.get(short)
    if w is not None and not shapes:  # the kernel size matters: show it with the weight
        kernel = n.args[w].meta["val"].shape[2:]
        parts[w] += "k=" + "x".join(str(k) for k in kernel)
    for k, v in n.kwargs.items():
        s = fmt_arg(v, shape_op, shapes)
        if (k, s) not in NOISE:
            parts.append(f"{k}={s}")
    out = fmt_val(n.meta["val"], shapes) if "val" in n.meta else "?"
    return f"({', '.join(parts)}) -> {out}"


def has_sym(n: fx.Node) -> bool:
    def sym(a: Any) -> bool:
        if isinstance(a, fx.Node):
            return isinstance(a.meta.get("val"), torch.SymInt | torch.SymFloat | torch.SymBool)
        if isinstance(a, list | tuple):
            return any(sym(x) for x in a)
        return isinstance(a, torch.SymInt)

    return any(sym(a) for a in (*n.args, *n.kwargs.values()))


@dataclass
class OpStats:
    count: int = 0
    models: set[str] = field(default_factory=set)
    patterns: Counter[str] = field(default_factory=Counter)
    pattern_models: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    example: str = ""


@dataclass
class GraphRecord:
    kind: str  # forward | backward | inference
    graph: fx.Graph
    placeholders: int


class Recorder:
    """An aot_autograd backend that keeps the ATen graphs and runs them unchanged."""

    def __init__(self) -> None:
        self.graphs: list[GraphRecord] = []

    def _compiler(self, kind: str) -> Callable[[fx.GraphModule, list[Any]], Callable[..., Any]]:
        def compile_fn(gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
            self.graphs.append(GraphRecord(kind, gm.graph, len(example_inputs)))
            return make_boxed_func(gm.forward)

        return compile_fn

    def backend(self) -> Callable[..., Any]:
        return aot_autograd(
            fw_compiler=self._compiler("forward"),
            bw_compiler=self._compiler("backward"),
            inference_compiler=self._compiler("inference"),
            decompositions=torchair_decompositions(),
        )


def census(graphs: Iterable[tuple[str, fx.Graph]], table: dict[str, OpStats]) -> None:
    for model, g in graphs:
        for n in g.nodes:
            if n.op != "call_function":
                continue
            st = table.setdefault(op_name(n.target), OpStats())
            st.count += 1
            st.models.add(model)
            pat = node_pattern(n)
            st.patterns[pat] += 1
            st.pattern_models[pat].add(model)
            if not st.example and op_name(n.target).split(".")[1] in HEAVY:
                st.example = node_pattern(n, shapes=True)


@dataclass
class Run:
    name: str
    graphs: list[GraphRecord]
    seconds: float
    breaks: dict[str, int]


def run_compiled(name: str, fn: Callable[..., Any], calls: list[tuple[Any, ...]], dynamic: bool | None = None) -> Run:
    torch._dynamo.reset()
    counters.clear()
    rec = Recorder()
    compiled = torch.compile(fn, backend=rec.backend(), dynamic=dynamic)
    t = time.time()
    for args in calls:
        out = compiled(*args)
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.backward()
    breaks = {k: v for k, v in counters["graph_break"].items()}
    return Run(name, rec.graphs, time.time() - t, breaks)


def inference_runs(models: list[str]) -> list[Run]:
    runs = []
    for name in models:
        model, inputs = zoo.build(name)
        with torch.no_grad():
            runs.append(run_compiled(name, model, [inputs]))
        print(f"{name}: {len(runs[-1].graphs)} graph(s), {runs[-1].seconds:.1f}s", flush=True)
    return runs


def training_run() -> Run:
    torch.manual_seed(0)
    model = zoo.resnet50(num_classes=10).train()
    x, y = torch.randn(2, 3, 64, 64), torch.tensor([1, 7])

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(x), y)

    run = run_compiled("resnet50-train", step, [(x, y)])
    print(f"resnet50 training: {[g.kind for g in run.graphs]}, {run.seconds:.1f}s", flush=True)
    return run


def dynamic_run() -> Run:
    model, _ = zoo.build("bert_base")
    calls = [zoo.example_inputs("bert_base", batch=2, seq=s) for s in (64, 96)]
    with torch.no_grad():
        run = run_compiled("bert_base-dynamic", model, calls, dynamic=True)
    print(f"bert dynamic: {len(run.graphs)} graph(s), {run.seconds:.1f}s", flush=True)
    return run


# ------------------------------------------------------------------------------ markdown


def md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def op_table(table: dict[str, OpStats], all_models: list[str], show_models: bool = True) -> list[str]:
    head = (
        "| op | models | count | arg patterns `(args) -> result` (×count) |"
        if show_models
        else "| op | count | arg patterns |"
    )
    lines = [head, "|---|---|---|---|" if show_models else "|---|---|---|"]
    for op in sorted(table, key=lambda o: (not o.startswith("aten."), o)):
        st = table[op]
        pats = []
        for pat, c in st.patterns.most_common():
            pm = st.pattern_models[pat]
            who = "" if not show_models or pm == st.models else f" [{', '.join(m for m in all_models if m in pm)}]"
            pats.append(f"`{md_escape(pat)}` ×{c}{who}")
        if st.example:
            pats.append(f"e.g. `{md_escape(st.example)}`")
        models = "all" if set(all_models) <= st.models else ", ".join(m for m in all_models if m in st.models)
        cells = [f"`{op}`", models] if show_models else [f"`{op}`"]
        lines.append("| " + " | ".join([*cells, str(st.count), "<br>".join(pats)]) + " |")
    return lines


def sym_section(run: Run) -> list[str]:
    lines = []
    for i, gr in enumerate(run.graphs):
        ph = [f"`{n.name}: {fmt_val(n.meta.get('val'), True)}`" for n in gr.graph.nodes if n.op == "placeholder"]
        sym_ph = [p for p in ph if "Sym(" in p]
        lines.append(
            f"- graph {i} ({gr.kind}): {len(ph)} placeholders; SymInt placeholders: {', '.join(sym_ph) or 'none'}"
        )
    lines.append("")
    lines.append("Nodes that compute or consume symbolic values (first graph), with symbolic shapes shown:")
    lines.append("")
    lines.append("| op | count | example |")
    lines.append("|---|---|---|")
    seen: dict[str, list[Any]] = {}
    for n in run.graphs[0].graph.nodes:
        if n.op != "call_function":
            continue
        val = n.meta.get("val")
        produces = isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool)
        if produces or has_sym(n):
            entry = seen.setdefault(op_name(n.target), [0, node_pattern(n, shapes=True)])
            entry[0] += 1
    for op, (c, ex) in sorted(seen.items()):
        lines.append(f"| `{op}` | {c} | `{md_escape(ex)}` |")
    return lines


def dynamic_diff(dyn: Run, static: Run | None) -> list[str]:
    if static is None:
        return []
    ops_dyn = Counter(op_name(n.target) for g in dyn.graphs for n in g.graph.nodes if n.op == "call_function")
    ops_static = Counter(op_name(n.target) for g in static.graphs for n in g.graph.nodes if n.op == "call_function")
    diff = [
        f"`{op}` {ops_static[op]} -> {ops_dyn[op]}"
        for op in sorted(ops_dyn | ops_static)
        if ops_dyn[op] != ops_static[op]
    ]
    return ["", "Op counts that differ from the static bert_base graph: " + ("; ".join(diff) or "none") + "."]


def write_markdown(path: str, inf: list[Run], train: Run | None, dyn: Run | None) -> None:
    models = [r.name for r in inf]
    table: dict[str, OpStats] = {}
    census(((r.name, g.graph) for r in inf for g in r.graphs), table)
    out = [
        "# Op census",
        "",
        f"Generated by `tools/op_census.py` (torch {torch.__version__}). Graphs are the ATen graphs that",
        "aot_autograd hands to the backend with `torchair_decompositions()` (python/torchair/decompositions.py).",
        "Inference: `model.eval()`, `torch.no_grad()`, batch 1, 224x224 images, sequence 128",
        "(BERT/GPT-2 get an attention mask with padding zeros). Parameters and buffers are graph inputs",
        "(placeholders), not constants.",
        "",
        "Arg notation: `f32[4d]` = float32 tensor of rank 4, `b8` = bool, `i64` = int64; shape lists of",
        "view/expand/full-like ops are shown as `[k ints]`; `Sym` = SymInt. Keyword args `layout=strided`,",
        "`pin_memory=False`, `device=cpu` are omitted. `e.g.` gives one full-shape example for heavy ops.",
        "",
        "## Models",
        "",
        "| model | graphs | call_function nodes | distinct ops | compile s | graph breaks |",
        "|---|---|---|---|---|---|",
    ]
    for r in inf:
        nodes = [n for g in r.graphs for n in g.graph.nodes if n.op == "call_function"]
        distinct = len({op_name(n.target) for n in nodes})
        brk = "; ".join(f"{k} ×{v}" for k, v in r.breaks.items()) or "none"
        out.append(f"| {r.name} | {len(r.graphs)} | {len(nodes)} | {distinct} | {r.seconds:.1f} | {md_escape(brk)} |")
    out += ["", "## Inference ops (forward graphs of all models)", "", f"{len(table)} distinct targets.", ""]
    out += op_table(table, models)
    if train is not None:
        for kind in ("forward", "backward"):
            t: dict[str, OpStats] = {}
            census(((kind, g.graph) for g in train.graphs if g.kind == kind), t)
            out += ["", f"## ResNet-50 training step, {kind} graph (batch 2, 64x64, cross_entropy loss)", ""]
            out += op_table(t, [kind], show_models=False)
    if dyn is not None:
        t = {}
        census(((dyn.name, g.graph) for g in dyn.graphs), t)
        out += ["", "## Dynamic shapes: bert_base, `dynamic=True`, batch 2, seq 64 then 96", ""]
        out += [f"{len(dyn.graphs)} graph(s) compiled for the two calls.", ""]
        out += sym_section(dyn)
        out += dynamic_diff(dyn, next((r for r in inf if r.name == "bert_base"), None))
    out += ["", NOTES.strip()]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def dump_json(path: str, runs: list[Run]) -> None:
    data = {}
    for r in runs:
        data[r.name] = [
            {
                "kind": g.kind,
                "nodes": [
                    [op_name(n.target), node_pattern(n, shapes=True)] for n in g.graph.nodes if n.op == "call_function"
                ],
            }
            for g in r.graphs
        ]
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


NOTES = """
## Notes and pitfalls (torch 2.13.0, transformers 5.24, CPU)

- **No graph breaks, one graph per model**, for all six models, including the HF models with
  `attn_implementation="sdpa"`. No `torch.ops.higher_order.*` nodes, no `aten.sym_size` nodes, no
  `copy_`/in-place ops in any graph. Parameters and buffers arrive as placeholders (inputs).
- **Multi-output ops are followed by `operator.getitem`**: `_native_batch_norm_legit_no_training`
  (3 outputs, only [0] used), `native_layer_norm` (3, only [0] in inference), SDPA (2: out,
  logsumexp; only [0] used), `max_pool2d_with_indices` (values, int64 indices; only [0] in inference),
  `split_with_sizes` (GPT-2's qkv split). The runtime must support tuple-valued nodes.
- **SDPA survives as one op**, `aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p=0,
  is_causal=False, *, attn_mask=None, scale=None)`; `aten.scaled_dot_product_attention` never appears
  (it is CompositeImplicitAutograd and is lowered by the dispatcher before the decomposition table is
  consulted). Removing the flash op from the table is what keeps it whole: with PyTorch's core table it
  becomes the math path (mul by sqrt(scale) on q and k, bmm, add mask, `_softmax`, an `eq -inf` /
  `logical_not` / `any` / `where` guard for fully-masked rows, bmm). All HF models pass a **float
  additive 4-D mask** `[B, 1, S, S]` (built as `where(bool_mask, 0.0, -inf)` from 0-d `scalar_tensor`s)
  and `scale=0.125` with `is_causal=False` -- even Llama without a padding mask gets a materialised
  causal mask, never `is_causal=True`. ViT passes no mask and no scale. A boolean mask handed straight to
  `F.scaled_dot_product_attention` is also converted with `where` in the graph. q/k/v are
  non-contiguous permuted views (`[B, S, H, D]` permuted to `[B, H, S, D]`); GQA (Llama, 2 kv heads)
  is expanded by HF's `repeat_kv` before SDPA (`unsqueeze`/`expand`/`clone(contiguous)`/`view` on 5-d).
- **HF mask construction is a sizeable integer/boolean subgraph**: `arange`, `add(i64, 0)`, chains of
  `unsqueeze`, `full([], True, b8)` (0-d), `ge`/`le`/`eq`/`ne`, `bitwise_and`, `index.Tensor` with
  broadcast int64 index tensors (an advanced-indexing gather that builds `[B,1,S,S]` from a `[B,S]`
  padding mask or position ids), `_to_copy(i64 -> b8)`, `expand`, `where`. Llama also has
  `slice`/`sub`/`cat` on int64 position ids and `cumsum(b8, -1) -> i64` (packed-sequence detection).
  For Llama (no mask input) this whole subgraph depends only on shapes: constant-foldable. BERT's
  `token_type_ids` come from a buffer via `slice` + `expand` + `gather(i64)`.
- **Views carry -1**: `view(x, [1, 128, -1, 64])`, `expand(x, [1, -1])`. `slice.Tensor` ends can be
  `9223372036854775807` (INT64_MAX, i.e. "to the end") and negative dims (-1) appear.
- **Eval-mode dropout becomes `aten.clone`** (BERT and GPT-2 x30, MobileNetV2's classifier x1):
  pure copies the runtime should elide. `aten.alias` also appears (Llama inference, and ~100 in the
  ResNet training backward): a no-op view.
- **Activations**: ResNet `relu`; MobileNetV2 ReLU6 is `hardtanh(x, 0, 6)`; ViT/BERT `gelu` (erf,
  `approximate='none'`); GPT-2's `gelu_new` is written in Python, so it arrives decomposed
  (`mul 0.5`, `pow 3`, `mul 0.04471`, `add`, `mul 0.7979`, `tanh`, `add 1`, `mul`) -- a pattern to
  match into `gelu(approximate='tanh')`; Llama `silu`. BERT pooler uses `tanh` on `[B, 768]`.
- **Norms**: `native_layer_norm` over the last dim only (eps 1e-12 BERT, 1e-5 GPT-2, 1e-6 ViT). Llama
  RMSNorm is decomposed by HF's Python: `pow(x, 2)`, `mean([-1], keepdim)`, `add eps`, `rsqrt`, `mul`,
  `mul weight` -- a pattern to fuse. Rotary embedding: `_to_copy(i64->f32)`, `mul`, `cat`, `cos`,
  `sin`, `slice` halves, `neg`, `cat`, `mul`, `add`.
- **Linear layers**: `addmm(bias, x2d, permute(w, [1, 0]))` with a `view` to 2-D before and back to 3-D
  after; bias-free linears (all of Llama, incl. lm_head) are `mm`. The weight transpose is a `permute`
  of a parameter: fold it at compile time (prepack). GPT-2's Conv1D is `addmm` without the permute.
  No `bmm` and no `baddbmm` in any inference graph (attention is inside SDPA).
- **Pooling**: `adaptive_avg_pool2d((1, 1))` arrives as `mean.dim(x, [-1, -2], keepdim=True)`, not as a
  pooling op; `max_pool2d` as `max_pool2d_with_indices` (kernel 3, stride 2, padding 1).
- **Convolutions**: all NCHW fp32, no bias except ViT's patch embed (k16 s16); groups == channels for
  MobileNetV2's depthwise 3x3 (groups 32..960, stride 1 or 2).
- **Training (ResNet-50)**: forward uses `_native_batch_norm_legit_functional` (5 outputs: out,
  save_mean, save_invstd, new running_mean, new running_var) plus `add(num_batches_tracked, 1)` on a 0-d
  int64; the updated buffers are extra graph *outputs* and aot_autograd's runtime wrapper copies them
  back -- there is no `copy_` in the graph. Backward ops are kept whole by our table:
  `convolution_backward` (output_mask `[True, True, False]`, `[False, True, False]` for the stem),
  `native_batch_norm_backward`, `threshold_backward` (relu), `max_pool2d_with_indices_backward`,
  `_log_softmax_backward_data`, `nll_loss_backward`; mean's backward is `expand` + `div.Scalar`.
  A ViT training step (checked by hand, not in this file) adds `native_layer_norm_backward`,
  `gelu_backward`, `_scaled_dot_product_flash_attention_for_cpu_backward`, `sum.dim_IntList`, and
  `select`'s backward decomposed to `full`/`arange`/`eq`/`where`.
- **Dynamic shapes**: with `dynamic=True` one graph serves both sequence lengths (no recompile). Sizes
  arrive as leading SymInt placeholders (e.g. `s43` = batch, `s53` = seq; the names change from run to
  run), not as `sym_size` nodes; the only SymInt arithmetic node is `operator.mul` (batch*seq, for the
  2-D views around `addmm`). SymInts appear as arguments of `view` (204 of them), `expand` (mixed
  with -1), `arange` (end) and `slice` (end). The dynamic graph also has no-op full slices
  (`slice(x, 0, 0, INT64_MAX)`) that the static graph folds away. With batch 1, Dynamo specialises the
  batch dimension to 1 (0/1 specialisation), so only `seq` would be symbolic; we use batch 2.
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(zoo.MODELS), help="comma-separated zoo model names")
    p.add_argument("--out", default="docs/op-census.md")
    p.add_argument("--json", default="", help="also dump every node (full shapes) as JSON")
    p.add_argument("--no-train", action="store_true")
    p.add_argument("--no-dynamic", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(2)
    inf = inference_runs([m for m in args.models.split(",") if m])
    train = None if args.no_train else training_run()
    dyn = None if args.no_dynamic else dynamic_run()
    write_markdown(args.out, inf, train, dyn)
    if args.json:
        dump_json(args.json, [*inf, *(r for r in (train, dyn) if r is not None)])
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
