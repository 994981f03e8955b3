"""mode = "reduce-overhead" (TorchAir's aclgraph capture-and-replay mode for decode), as LLM
serving code sets it: config.mode = "reduce-overhead" with debug.aclgraph.clone_input = False
and enable_output_clone = True, a one-layer decoder step with a static KV cache updated in
place (slicing assignment at a tensor position via index_copy_), compiled once with
dynamic=False and replayed for every decode step. Each step's output and the caches are checked
against eager, outputs of earlier steps must stay intact (no replay overwrites them), and
torch.compile(mode="reduce-overhead") with backend="torchair" is accepted too."""

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "22_reduce_overhead_decode"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

DIM, HEADS, MAX_SEQ = 64, 4, 16


class DecodeStep(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.o = nn.Linear(DIM, DIM, bias=False)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.SiLU(), nn.Linear(4 * DIM, DIM))
        self.norm = nn.LayerNorm(DIM)

    def forward(self, x, position, k_cache, v_cache):
        """x [B, 1, DIM]; position [1]; caches [B, HEADS, MAX_SEQ, DIM // HEADS] (updated in place)."""
        b = x.shape[0]
        q, k, v = self.qkv(self.norm(x)).view(b, 1, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        k_cache.index_copy_(2, position, k)
        v_cache.index_copy_(2, position, v)
        visible = torch.arange(MAX_SEQ, device=x.device) <= position  # [MAX_SEQ]
        a = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=visible[None, None, None, :])
        x = x + self.o(a.transpose(1, 2).reshape(b, 1, DIM))
        return x + self.mlp(x)


def decode(step_fn, x0, steps):
    shape = (x0.shape[0], HEADS, MAX_SEQ, DIM // HEADS)
    k_cache, v_cache = torch.zeros(shape, device=device), torch.zeros(shape, device=device)
    outs, x = [], x0
    for pos in range(steps):
        x = step_fn(x, torch.tensor([pos], device=device), k_cache, v_cache)
        outs.append(x)
    return outs, k_cache, v_cache


def main():
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = DecodeStep().to(device).eval()
    x0 = torch.randn(3, 1, DIM, device=device)

    config = CompilerConfig()
    config.mode = "reduce-overhead"
    config.debug.aclgraph.clone_input = False
    config.debug.aclgraph.enable_output_clone = True
    config.experimental_config.frozen_parameter = True
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=npu_backend)

    counters.clear()
    with torch.no_grad():
        want, want_k, want_v = decode(model, x0, 10)
        got, got_k, got_v = decode(compiled, x0, 10)
    snapshot = [g.clone() for g in got]
    for step, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4, msg=lambda m: f"step {step}: {m}")
    torch.testing.assert_close(got_k, want_k, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got_v, want_v, rtol=1e-4, atol=1e-4)
    assert len({g.data_ptr() for g in got}) == len(got), "a replay reused an output buffer the caller holds"
    for g, s in zip(got, snapshot):
        assert torch.equal(g, s)
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    assert len(REPORTS) == 1 and REPORTS[0].compiled_ops > 0.8 * REPORTS[0].total_ops, [str(r) for r in REPORTS]
    print("config.mode='reduce-overhead':", str(REPORTS[0]).splitlines()[0])

    # the torch.compile spelling of the mode, with the registered backend name
    torch._dynamo.reset()
    REPORTS.clear()
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend="torchair", mode="reduce-overhead")
    with torch.no_grad():
        got, _, _ = decode(compiled, x0, 4)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    assert len(REPORTS) == 1 and REPORTS[0].compiled_ops > 0, [str(r) for r in REPORTS]
    print("torch.compile(mode='reduce-overhead'):", str(REPORTS[0]).splitlines()[0])
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()
