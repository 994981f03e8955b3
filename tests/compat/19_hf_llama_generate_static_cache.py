"""A Hugging Face transformers LlamaForCausalLM (random weights from a small LlamaConfig with
GQA; nothing is downloaded) generating with a static KV cache
(generate(..., cache_implementation="static")) while its forward is compiled with
get_npu_backend -- the Hugging Face recipe `model.forward = torch.compile(model.forward, ...)`
with TorchAir's backend. Left-padded batch, greedy decoding; the generated tokens and the
logits of every step are checked against eager generate, and the compiled forward must serve
the prefill and every decode step with two graphs."""

import sys

import torch
import torchair
from torchair.configs.compiler_config import CompilerConfig

NAME = "19_hf_llama_generate_static_cache"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

try:
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError:
    print(f"transformers is not installed: skipped\nCOMPAT OK {NAME}")
    sys.exit(0)

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


def main():
    from torch._dynamo.utils import counters

    config_hf = LlamaConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config_hf).to(device).eval()

    input_ids = torch.randint(3, 256, (2, 8), device=device)
    attention_mask = torch.ones_like(input_ids)
    input_ids[1, :3] = config_hf.pad_token_id  # row 1: a 5-token prompt, left-padded
    attention_mask[1, :3] = 0
    gen_kwargs = {
        "attention_mask": attention_mask, "max_new_tokens": 8, "do_sample": False, "cache_implementation": "static",
        "return_dict_in_generate": True, "output_logits": True, "pad_token_id": config_hf.pad_token_id,
    }  # fmt: skip

    with torch.no_grad():
        want = model.generate(input_ids, **gen_kwargs)

    config = CompilerConfig()
    config.mode = "max-autotune"
    config.experimental_config.frozen_parameter = True
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    model.forward = torch.compile(model.forward, dynamic=False, fullgraph=True, backend=npu_backend)
    counters.clear()
    with torch.no_grad():
        got = model.generate(input_ids, **gen_kwargs)

    assert torch.equal(got.sequences, want.sequences), (got.sequences, want.sequences)
    assert len(got.logits) == len(want.logits) == 8
    for step, (g, w) in enumerate(zip(got.logits, want.logits)):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4, msg=lambda m: f"step {step}: {m}")

    graphs = counters["stats"]["unique_graphs"]
    assert graphs == 2, f"expected a prefill graph and a decode graph, dynamo compiled {graphs}"
    assert len(REPORTS) == 2, [str(r) for r in REPORTS]
    for r in REPORTS:
        assert r.compiled_ops > 0.9 * r.total_ops, str(r)
        ops = [op for s in r.subgraphs if s.compiled for op in s.ops]
        assert sum("scaled_dot_product" in op for op in ops) == config_hf.num_hidden_layers, str(r)
    print("\n".join(str(r).splitlines()[0] for r in REPORTS))
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()
