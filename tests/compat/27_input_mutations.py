"""In-place updates of graph inputs with experimental_config.keep_inference_input_mutations
True (TorchAir's default: the mutation stays in the graph) and False (applied after it), as
LLM code updates caches and counters it passes in: index_copy_ into a cache, slicing
assignment into a buffer, add_ on a step counter, and an output computed from the updated
cache. Outputs and every mutated input are checked against eager after each of several
calls, for both settings."""

import torch
import torchair
from torchair.configs.compiler_config import CompilerConfig

NAME = "27_input_mutations"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


def update(x, position, cache, buffer, steps):
    """x [B, D]; position [1]; cache [B, T, D]; buffer [B, 4, D]; steps [1] (int64)."""
    cache.index_copy_(1, position, (x * 2).unsqueeze(1))
    buffer[:, 1:3] = torch.tanh(x).unsqueeze(1)
    steps.add_(1)
    return cache.sum(1) + buffer.mean(1) * steps.float()


def state():
    return [torch.zeros(2, 6, 8, device=device), torch.ones(2, 4, 8, device=device), torch.zeros(1, dtype=torch.int64, device=device)]


def main():
    torch.manual_seed(0)
    xs = [torch.randn(2, 8, device=device) for _ in range(4)]
    for keep in (True, False):
        config = CompilerConfig()
        config.mode = "max-autotune"
        config.experimental_config.keep_inference_input_mutations = keep
        torch._dynamo.reset()
        REPORTS.clear()
        compiled = torch.compile(update, dynamic=False, fullgraph=True, backend=torchair.get_npu_backend(compiler_config=config))
        want_state, got_state = state(), state()
        for i, x in enumerate(xs):
            position = torch.tensor([i], device=device)
            want = update(x, position, *want_state)
            got = compiled(x, position, *got_state)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m: f"keep={keep} call {i}: {m}")
            for name, g, w in zip(("cache", "buffer", "steps"), got_state, want_state):
                torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4, msg=lambda m: f"keep={keep} call {i} {name}: {m}")
        assert len(REPORTS) == 1 and REPORTS[0].compiled_ops > 0, [str(r) for r in REPORTS]
        print(f"keep_inference_input_mutations={keep}: {str(REPORTS[0]).splitlines()[0]}")
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()
