"""config.post_grad_custom_pre_pass / post_grad_custom_post_pass: users' FX passes on the
ATen graph, as TorchAir runs them: fn(gm, example_inputs, config), the pre-pass before
torchair's own work, the registered replacements (torchair.register_replacement) between
them, the post-pass last before lowering. The pre-pass here rewrites the graph in place
(relu -> clamp_min(x, 0), as a user's pass would replace an op the backend lacks) and the
post-pass checks what it gets; the rewrite must reach torchair's compiled ops and the result
must match eager."""

import torch
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "13_post_grad_custom_passes"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend
aten = torch.ops.aten

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

log = []


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def relu_to_clamp_min(gm, example_inputs, config):
    """A pre-pass: every aten.relu becomes aten.clamp_min(x, 0)."""
    log.append(("pre", list(targets(gm)), len(example_inputs)))
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target == aten.relu.default:
            with gm.graph.inserting_after(node):
                new = gm.graph.call_function(aten.clamp_min.default, (node.args[0], 0.0))
            new.meta.update(node.meta)
            node.replace_all_uses_with(new)
            gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()


def inspect_post(gm, example_inputs, config):
    log.append(("post", list(targets(gm)), len(example_inputs)))


def manual_silu(x):
    return x * torch.sigmoid(x)


def silu(x):
    return torch.nn.functional.silu(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.b = nn.Linear(64, 64)
        self.c = nn.Linear(64, 16)

    def forward(self, x):
        h = torch.relu(self.a(x))
        h = self.b(h)
        return self.c(h * torch.sigmoid(h))


def main():
    torchair.register_replacement(manual_silu, silu, [torch.randn(8, 64)])
    torch.manual_seed(0)
    model = Net().to(device).eval()
    x = torch.randn(8, 32, device=device)

    config = CompilerConfig()
    config.mode = "max-autotune"
    config.experimental_config.frozen_parameter = True
    config.post_grad_custom_pre_pass = relu_to_clamp_min
    config.post_grad_custom_post_pass = inspect_post
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=npu_backend)
    with torch.no_grad():
        want = model(x)
        got = compiled(x)
        got2 = compiled(x + 1)
        want2 = model(x + 1)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got2, want2, rtol=1e-4, atol=1e-4)

    assert [entry[0] for entry in log] == ["pre", "post"], log  # once each, pre first
    (_, pre_ops, pre_n), (_, post_ops, post_n) = log
    # the pre-pass sees the ATen graph before the replacements, the post-pass after them
    assert aten.relu.default in pre_ops and aten.sigmoid.default in pre_ops, pre_ops
    assert aten.relu.default not in post_ops and aten.clamp_min.default in post_ops, post_ops
    assert aten.silu.default in post_ops and aten.sigmoid.default not in post_ops, post_ops
    assert pre_n == post_n > 0
    # torchair compiled the rewritten graph
    assert len(REPORTS) == 1, [str(r) for r in REPORTS]
    compiled_ops = [op for s in REPORTS[0].subgraphs if s.compiled for op in s.ops]
    assert "aten.clamp_min.default" in compiled_ops and "aten.relu.default" not in compiled_ops, str(REPORTS[0])
    assert REPORTS[0].compiled_ops == REPORTS[0].total_ops, str(REPORTS[0])
    print(str(REPORTS[0]).splitlines()[0])

    # TorchAir's CallableValue: anything but a callable or None is a TypeError
    try:
        config.post_grad_custom_post_pass = "not a function"
    except TypeError as e:
        print("refused:", str(e).splitlines()[0][:100])
    else:
        raise AssertionError("a str was accepted as post_grad_custom_post_pass")
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()
