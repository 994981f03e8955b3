"""Dynamic shapes as TorchAir scripts ask for them: torch.compile(..., dynamic=True) with
torch._dynamo.mark_dynamic on the batch and sequence dims of a GPT-style causal LM's
input_ids (full-sequence scoring, as in a prefill server that takes any prompt length).
One compile must serve every size (dynamo's unique_graphs == 1 after counters.clear());
logits are checked against eager at each (batch, seq)."""

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "10_dynamic_mark_dynamic"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

VOCAB, HIDDEN, HEADS, LAYERS, MAX_POS = 128, 64, 4, 1, 64


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.c_attn = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.c_proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.proj = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(HIDDEN, dim=-1)
        q, k, v = (t.view(b, s, HEADS, HIDDEN // HEADS).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(a.transpose(1, 2).reshape(b, s, HIDDEN))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(MAX_POS, HIDDEN)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # tied lm head


def main():
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = GPT().to(device).eval()
    config = CompilerConfig()
    config.mode = "max-autotune"
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    compiled = torch.compile(model, dynamic=True, fullgraph=True, backend=npu_backend)

    counters.clear()
    sizes = [(2, 7), (3, 19), (2, 33), (5, 12), (4, 50)]
    for batch, seq in sizes:
        ids = torch.randint(0, VOCAB, (batch, seq), device=device)
        torch._dynamo.mark_dynamic(ids, 0)
        torch._dynamo.mark_dynamic(ids, 1)
        with torch.no_grad():
            want = model(ids)
            got = compiled(ids)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m: f"{batch}x{seq}: {m}")

    graphs = counters["stats"]["unique_graphs"]
    assert graphs == 1, f"dynamic=True should compile once for every size, dynamo compiled {graphs} graphs"
    assert len(REPORTS) == 1, [str(r) for r in REPORTS]
    assert REPORTS[0].compiled_ops > 0.9 * REPORTS[0].total_ops, str(REPORTS[0])
    print(str(REPORTS[0]).splitlines()[0])
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()
