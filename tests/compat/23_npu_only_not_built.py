"""What a user porting a TorchAir script sees for the NPU-only parts of the API: each of these
must raise torchair.NotBuiltError (a NotImplementedError) with a reason that names the option
or function -- config options when the backend is made (get_npu_backend), functions when they
are called -- and never be accepted and ignored: aoe_config.aoe_mode "2",
export.export_mode, debug.graph_dump.type "pbtxt", npu_fx_pass, cc_parallel_enable,
memory_efficiency, the gear merge policy "product", aclgraph capture limits;
inference.cache_compile / readable_cache, use_internal_format_weight, npu_format_cast_via_cpu,
register_fx_node_ge_converter, torchair.ge, tagged events, and the quantized / paged / LSE
forms of npu_fused_infer_attention_score. Afterwards a default config still compiles and
matches eager."""

import os
import tempfile

import torch
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "23_npu_only_not_built"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

failures = []


def expect_not_built(what, fn, names):
    try:
        fn()
    except torchair.NotBuiltError as e:
        text = str(e)
        assert isinstance(e, NotImplementedError)
        reason = e.args[-1] if e.args else text
        if not all(n in text for n in names) or len(str(reason)) < 30:
            failures.append(f"{what}: the message does not name {names} with a reason: {text}")
        else:
            print(f"{what}: NotBuiltError: {str(reason)[:110]}")
    except Exception as e:  # noqa: BLE001
        failures.append(f"{what}: {type(e).__name__} instead of NotBuiltError: {e}")
    else:
        failures.append(f"{what}: accepted (it must raise NotBuiltError)")


def backend_with(**settings):
    def make():
        config = CompilerConfig()
        for path, value in settings.items():
            *groups, leaf = path.split("__")
            target = config
            for g in groups:
                target = getattr(target, g)
            setattr(target, leaf, value)
        torchair.get_npu_backend(compiler_config=config)

    return make


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).to(device).eval()
    x = torch.randn(4, 16, device=device)
    workdir = tempfile.mkdtemp()

    # config options: refused when the backend is made
    expect_not_built("aoe_config.aoe_mode='2'", backend_with(aoe_config__aoe_mode="2"), ["aoe_mode"])
    expect_not_built("export.export_mode=True", backend_with(export__export_mode=True, export__export_path_dir=workdir), ["export_mode"])
    expect_not_built("debug.graph_dump.type='pbtxt'", backend_with(debug__graph_dump__type="pbtxt"), ["graph_dump"])
    expect_not_built("npu_fx_pass=True", backend_with(experimental_config__npu_fx_pass=True), ["npu_fx_pass"])
    expect_not_built("cc_parallel_enable=True", backend_with(experimental_config__cc_parallel_enable=True), ["cc_parallel_enable"])
    expect_not_built("memory_efficiency=True", backend_with(experimental_config__memory_efficiency=True), ["memory_efficiency"])
    expect_not_built(
        "dynamic_gears_merge_policy='product'",
        backend_with(inference_config__dynamic_gears_merge_policy="product"),
        ["dynamic_gears_merge_policy"],
    )
    expect_not_built(
        "debug.aclgraph.static_capture_size_limit=8",
        backend_with(mode="reduce-overhead", debug__aclgraph__static_capture_size_limit=8),
        ["static_capture_size_limit"],
    )

    # functions: refused when called
    expect_not_built("inference.cache_compile", lambda: torchair.inference.cache_compile(model.forward, config=CompilerConfig()), ["cache_compile"])
    expect_not_built("inference.readable_cache", lambda: torchair.inference.readable_cache(os.path.join(workdir, "compiled_module")), ["readable_cache"])
    expect_not_built("use_internal_format_weight", lambda: torchair.use_internal_format_weight(model), ["use_internal_format_weight"])
    expect_not_built("npu_format_cast_via_cpu", lambda: torchair.npu_format_cast_via_cpu(x, 29), ["npu_format_cast_via_cpu"])
    expect_not_built(
        "register_fx_node_ge_converter",
        lambda: torchair.register_fx_node_ge_converter(torch.ops.aten.add.Tensor)(lambda *a, **k: None),
        ["register_fx_node_ge_converter"],
    )
    expect_not_built("torchair.ge.Const", lambda: torchair.ge.Const(1.0), ["GE"])
    expect_not_built("ops.npu_create_tagged_event", lambda: torchair.ops.npu_create_tagged_event("tag"), ["npu_create_tagged_event"])

    q = torch.randn(1, 4, 8, 16)
    k = v = torch.randn(1, 2, 32, 16)
    fias = torchair.ops.npu_fused_infer_attention_score
    expect_not_built(
        "npu_fused_infer_attention_score(block_table=...)",
        lambda: fias(q, k, v, num_heads=4, num_key_value_heads=2, input_layout="BNSD", block_table=torch.zeros(1, 4, dtype=torch.int32), block_size=8),
        ["block_table"],
    )
    expect_not_built(
        "npu_fused_infer_attention_score(antiquant_scale=...)",
        lambda: fias(q, k, v, num_heads=4, num_key_value_heads=2, input_layout="BNSD", antiquant_scale=torch.ones(2)),
        ["antiquant_scale"],
    )
    expect_not_built(
        "npu_fused_infer_attention_score(softmax_lse_flag=True)",
        lambda: fias(q, k, v, num_heads=4, num_key_value_heads=2, input_layout="BNSD", softmax_lse_flag=True),
        ["softmax_lse_flag"],
    )

    # TorchAir's own validation comes first: aoe_mode only allows "2"
    try:
        CompilerConfig().aoe_config.aoe_mode = "1"
    except ValueError:
        pass
    else:
        failures.append("aoe_mode='1' was accepted (TorchAir allows only '2')")

    assert not failures, "\n".join(failures)

    # nothing above left state behind: a default config compiles and matches eager
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=torchair.get_npu_backend(compiler_config=CompilerConfig()))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(REPORTS) == 1 and REPORTS[0].compiled_ops == REPORTS[0].total_ops, [str(r) for r in REPORTS]
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()
