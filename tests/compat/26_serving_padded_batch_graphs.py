"""The serving pattern of LLM engines that run TorchAir graph mode with a fixed list of graph
batch sizes: each decode batch is padded up to the next graph size, the compiled decode step
(dynamic=False) keeps one graph per size, and only the real rows are returned. Requests of
3, 4, 5, 2 and 7 sequences are served by graphs of 4 and 8 rows (and 2); each real row must
match the eager model run on the unpadded batch, and dynamo must compile exactly one graph
per graph size used."""

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "26_serving_padded_batch_graphs"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

VOCAB, DIM = 128, 64
GRAPH_BATCH_SIZES = [2, 4, 8]


class TinyLM(nn.Module):
    """One decode step of a small model: embedding, RMS norm, SwiGLU MLP, tied LM head."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.norm = nn.Parameter(torch.ones(DIM))
        self.gate_up = nn.Linear(DIM, 256, bias=False)
        self.down = nn.Linear(128, DIM, bias=False)

    def forward(self, tokens, positions):
        x = self.embed(tokens) * (1 + positions[:, None].float() / 100)
        h = self.norm * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        gate, up = self.gate_up(h).chunk(2, dim=-1)
        x = x + self.down(F.silu(gate) * up)
        return x @ self.embed.weight.t()


class ModelRunner:
    def __init__(self, model):
        config = CompilerConfig()
        config.mode = "max-autotune"
        config.experimental_config.frozen_parameter = True
        self.model = model
        self.graph = torch.compile(model, dynamic=False, fullgraph=True, backend=torchair.get_npu_backend(compiler_config=config))

    def decode(self, tokens, positions):
        n = tokens.shape[0]
        size = next(s for s in GRAPH_BATCH_SIZES if s >= n)
        pad = size - n
        tokens = F.pad(tokens, (0, pad))  # padding rows: token 0 at position 0
        positions = F.pad(positions, (0, pad))
        return self.graph(tokens, positions)[:n]


def main():
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = TinyLM().to(device).eval()
    runner = ModelRunner(model)
    counters.clear()
    gen = torch.Generator().manual_seed(1)
    used = set()
    for n in (3, 4, 5, 2, 7, 3):
        tokens = torch.randint(0, VOCAB, (n,), generator=gen).to(device)
        positions = torch.randint(0, 50, (n,), generator=gen).to(device)
        with torch.inference_mode():  # as serving engines run their model
            got = runner.decode(tokens, positions)
            want = model(tokens, positions)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m: f"batch of {n}: {m}")
        used.add(next(s for s in GRAPH_BATCH_SIZES if s >= n))
    graphs = counters["stats"]["unique_graphs"]
    assert graphs == len(used), f"{graphs} graphs for graph sizes {sorted(used)}"
    assert len(REPORTS) == len(used) and all(r.compiled_ops == r.total_ops for r in REPORTS), [str(r) for r in REPORTS]
    print(f"graph sizes used: {sorted(used)}; " + " / ".join(str(r).splitlines()[0] for r in REPORTS[:1]))
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()
