"""ge_config.oo_level = "O1" and ge_config.optimization_switch, as TorchAir users turn graph
optimizations down to debug accuracy or compile time: a LLaMA-style block (RMSNorm, rotary
embedding, attention, SwiGLU MLP) compiled three times -- default (O3), O1 (fusion passes
off) and O3 with "fuse_rms_norm:off;fuse_rope:off" -- each checked against eager, and each
compile's pass log (torchair's report of the compiled subgraph) must show the passes on or off
as asked."""

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "02_ge_config_oo_level_switches"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

DIM, HEADS, SEQ = 64, 4, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.Parameter(torch.ones(DIM) + 0.1 * torch.randn(DIM))
        self.norm2 = nn.Parameter(torch.ones(DIM) + 0.1 * torch.randn(DIM))
        self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.o = nn.Linear(DIM, DIM, bias=False)
        self.gate = nn.Linear(DIM, 128, bias=False)
        self.up = nn.Linear(DIM, 128, bias=False)
        self.down = nn.Linear(128, DIM, bias=False)
        hd = DIM // HEADS
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        emb = torch.outer(torch.arange(SEQ).float(), inv).repeat(1, 2)
        self.register_buffer("cos", emb.cos()[None, None], persistent=False)  # [1, 1, S, D]
        self.register_buffer("sin", emb.sin()[None, None], persistent=False)

    @staticmethod
    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    def rope(self, x):  # Hugging Face's rotate_half
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return x * self.cos + torch.cat((-x2, x1), -1) * self.sin

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.rms(x, self.norm1)).view(b, s, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(self.rope(q), self.rope(k), v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, DIM))
        h = self.rms(x, self.norm2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def passes_of(report):
    """{pass: on/off} from the compiled subgraphs' pass logs."""
    state = {}
    for sub in report.subgraphs:
        if not sub.compiled:
            continue
        for line in sub.air_report.splitlines():
            line = line.strip()
            for name in torchair.PASS_NAMES:
                if line.startswith(name + ":"):
                    off = line == f"{name}: off"
                    state[name] = "off" if off or state.get(name) == "off" else "on"
    return state


def run(model, x, want, config):
    torch._dynamo.reset()
    REPORTS.clear()
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=torchair.get_npu_backend(compiler_config=config))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), want, rtol=1e-4, atol=1e-4)
    assert len(REPORTS) == 1 and REPORTS[0].compiled_ops == REPORTS[0].total_ops, [str(r) for r in REPORTS]
    return passes_of(REPORTS[0])


def main():
    torch.manual_seed(0)
    model = Block().to(device).eval()
    x = torch.randn(2, SEQ, DIM, device=device)
    with torch.no_grad():
        want = model(x)
    fusion = {"fuse_attention", "fuse_activation", "fuse_rms_norm", "fuse_rope", "fuse_epilogue", "fuse_elementwise"}

    config = CompilerConfig()
    config.mode = "max-autotune"
    config.ge_config.oo_level = "O3"
    default = run(model, x, want, config)
    assert all(default[p] == "on" for p in fusion), default
    log = REPORTS[0].subgraphs[0].air_report
    # the passes that O1 and the switch turn off have work to do in this block
    assert "fuse_rms_norm: 2 RMS norm(s) with a weight" in log, log
    assert "fuse_rope: 2 rotary embedding(s)" in log, log

    config = CompilerConfig()
    config.mode = "max-autotune"
    config.ge_config.oo_level = "O1"
    o1 = run(model, x, want, config)
    assert all(o1[p] == "off" for p in fusion), o1
    assert o1["simplify"] == "on" and o1["layout"] == "on", o1

    config = CompilerConfig()
    config.mode = "max-autotune"
    config.ge_config.optimization_switch = "fuse_rms_norm:off;fuse_rope:off;fuse_attention:on"
    switched = run(model, x, want, config)
    assert switched["fuse_rms_norm"] == "off" and switched["fuse_rope"] == "off", switched
    assert all(switched[p] == "on" for p in fusion - {"fuse_rms_norm", "fuse_rope"}), switched

    print("O3:", default)
    print("O1:", o1)
    print("switch:", switched)
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()
