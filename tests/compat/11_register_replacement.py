"""torchair.register_replacement as TorchAir users register their own graph rewrites: two
patterns torchair does not rewrite itself, taken from hand-written model code -- a softmax
spelled out as exp(x - max) / sum(exp(x - max)) and SiLU spelled as x * sigmoid(x) -- are
replaced by torch.softmax and F.silu before lowering. Checked: the result matches eager,
the ATen graph torchair lowers has the replacements (seen by a post_grad_custom_post_pass and
in the ops torchair compiled), and with experimental_config.pattern_fusion_pass = False the
hand-written forms stay."""

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "11_register_replacement"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


def manual_softmax(x):
    e = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))
    return e / torch.sum(e, dim=-1, keepdim=True)


def fused_softmax(x):
    return torch.softmax(x, dim=-1)


def manual_silu(x):
    return x * torch.sigmoid(x)


def fused_silu(x):
    return F.silu(x)


class HandWrittenAttention(nn.Module):
    """Attention and a gated MLP written the long way, as some model code does."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.o = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, 128)
        self.up = nn.Linear(dim, 128)
        self.down = nn.Linear(128, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        probs = manual_softmax(q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5)
        x = x + self.o((probs @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.down(manual_silu(self.gate(x)) * self.up(x))


def graph_ops(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def main():
    example = [torch.randn(2, 4, 8, 8, device=device)]
    torchair.register_replacement(search_fn=manual_softmax, replace_fn=fused_softmax, example_inputs=example)
    torchair.register_replacement(search_fn=manual_silu, replace_fn=fused_silu, example_inputs=[torch.randn(2, 8, 128)])

    torch.manual_seed(0)
    model = HandWrittenAttention().to(device).eval()
    x = torch.randn(2, 8, 64, device=device)
    with torch.no_grad():
        want = model(x)

    def compile_and_run(pattern_fusion_pass):
        seen = []
        config = CompilerConfig()
        config.mode = "max-autotune"
        config.experimental_config.pattern_fusion_pass = pattern_fusion_pass
        config.post_grad_custom_post_pass = lambda gm, example_inputs, cfg: seen.append(graph_ops(gm))
        npu_backend = torchair.get_npu_backend(compiler_config=config)
        torch._dynamo.reset()
        REPORTS.clear()
        with torch.no_grad():
            got = torch.compile(model, dynamic=False, fullgraph=True, backend=npu_backend)(x)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert len(seen) == 1 and len(REPORTS) == 1, (seen, REPORTS)
        compiled = [op for s in REPORTS[0].subgraphs if s.compiled for op in s.ops]
        return seen[0], compiled, REPORTS[0]

    ops, compiled, report = compile_and_run(True)
    assert "aten._softmax.default" in ops and "aten.exp.default" not in ops, ops
    assert "aten.silu.default" in ops and "aten.sigmoid.default" not in ops, ops
    assert "aten._softmax.default" in compiled and "aten.silu.default" in compiled, str(report)
    assert report.compiled_ops == report.total_ops, str(report)
    print("with the patterns:", str(report).splitlines()[0])

    ops, compiled, report = compile_and_run(False)
    assert "aten.exp.default" in ops and "aten.sigmoid.default" in ops, ops
    assert "aten._softmax.default" not in ops and "aten.silu.default" not in ops, ops
    print("pattern_fusion_pass=False:", str(report).splitlines()[0])
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()
