"""The groups of TorchAir's ``CompilerConfig`` tree, with TorchAir's option names, defaults and
allowed values (``config.debug.graph_dump.type``, ``config.experimental_config.frozen_parameter``,
...). What each option does in torchair (built, a CPU equivalent, or NotBuiltError) is decided in
one place, ``torchair.configs.outcomes``; these classes only hold and validate the values.

Where torchair differs from TorchAir's own checks, on purpose: ``export`` and
``aclgraph_config`` are validated like every other group (TorchAir accepts any name there), and
``debug.fx_summary.path`` can be set (TorchAir's group has no ``path`` setter).
"""

from __future__ import annotations

import os
from typing import Any

from torchair.configs._option_base import (
    CallableValue,
    FileValue,
    IntListValue,
    IntRangeValue,
    MustExistedFileAddr,
    MustExistedPathValue,
    NpuBaseConfig,
    OptionValue,
    RegexValue,
    StrOptionValue,
)

_BOOL = [True, False]
_INT64_MAX = 2**63 - 1


class _PathGroup(NpuBaseConfig):
    """A group with a ``path`` that stores the real path of what it is given."""

    def __init__(self) -> None:
        super().__init__()
        self._fixed_attrs.append("path")

    @property
    def path(self) -> str:
        p = self._path.raw
        return "./" if p is None else p

    @path.setter
    def path(self, value: str) -> None:
        self._path.value = os.path.realpath(value)


class _Dump(_PathGroup):
    def __init__(self) -> None:
        self.type = OptionValue(None, ["txt", "pbtxt", "py", "dot", "svg"])
        self._path = OptionValue(None)
        super().__init__()


class _DataDump(_PathGroup):
    def __init__(self) -> None:
        self.type = OptionValue(None, ["npy"])
        self._path = OptionValue(None)
        self.filter = None  # a callable node -> node or None; any value, as in TorchAir
        super().__init__()
        self._fixed_attrs.append("filter")


class _FxSummary(_PathGroup):
    def __init__(self) -> None:
        self.type = OptionValue(None, ["csv"])
        self.skip_compile = OptionValue(True, _BOOL)
        self._path = OptionValue(None)
        super().__init__()


class _AclGraphDebugConfig(NpuBaseConfig):
    def __init__(self) -> None:
        self.disable_reinplace_inplaceable_ops_pass = OptionValue(False, _BOOL)
        self.disable_reinplace_input_mutated_ops_pass = OptionValue(False, _BOOL)
        self.disable_mempool_reuse_in_same_fx = OptionValue(False, _BOOL)
        self.enable_output_clone = OptionValue(False, _BOOL)
        self.static_capture_size_limit = IntRangeValue(64, 1, _INT64_MAX)
        self.clone_input = OptionValue(True, _BOOL)
        super().__init__()


class _DebugConfig(NpuBaseConfig):
    def __init__(self) -> None:
        self.graph_dump = _Dump()
        self.data_dump = _DataDump()
        self.fx_summary = _FxSummary()
        self.run_eagerly = OptionValue(False, _BOOL)
        self.aclgraph = _AclGraphDebugConfig()
        super().__init__()


class _ExportExperimental(NpuBaseConfig):
    def __init__(self) -> None:
        self.enable_record_nn_module_stack = OptionValue(False, _BOOL)
        self.auto_atc_config_generated = OptionValue(False, _BOOL)
        self.enable_lite_export = OptionValue(False, _BOOL)
        super().__init__()


class _ExportConfig(NpuBaseConfig):
    def __init__(self) -> None:
        self.export_mode = OptionValue(False, _BOOL)
        self.export_path_dir = OptionValue("./")
        self.export_name = OptionValue(None)
        self.weight_name = OptionValue(None)
        self.inputs_name = OptionValue(None)
        self.experimental = _ExportExperimental()
        super().__init__()


class _DataDumpConfig(NpuBaseConfig):
    def __init__(self) -> None:
        self.enable_dump = OptionValue(False, _BOOL)
        self.dump_path = MustExistedPathValue("./")
        self.dump_mode = OptionValue("all", ["input", "output", "all"])
        self.quant_dumpable = OptionValue(False, _BOOL)
        self.dump_step = RegexValue("", r"^(((\d+)|(\d+-{0,1}\d+))\|{0,1})*$", "0|1|2-5|6")
        self.dump_layer = RegexValue("", r'^[0-9a-zA-Z_" "/\\.]*$', "Mul_1 Add1 Conv2D_1")
        self.dump_data = OptionValue("tensor", ["tensor", "stats"])
        self.dump_config_path = MustExistedFileAddr(None)
        self.data_dump_stage = OptionValue("optimized", ["original", "optimized"])
        super().__init__()


class _FusionConfig(NpuBaseConfig):
    def __init__(self) -> None:
        self.fusion_switch_file = FileValue(None)
        super().__init__()


class _AclGraphExperimental(NpuBaseConfig):
    def __init__(self) -> None:
        self._aclnn_static_shape_kernel = OptionValue(False, _BOOL)
        self._aclnn_static_shape_kernel_build_dir = StrOptionValue(None)
        self._aclnn_static_shape_kernel_sym_value_range = IntListValue(None)
        self._aclnn_static_shape_kernel_sym_index = IntRangeValue(0, 0, _INT64_MAX)
        super().__init__()


class _ExperimentalConfig(NpuBaseConfig):
    def __init__(self) -> None:
        self.cc_parallel_enable = OptionValue(False, _BOOL)
        self.keep_inference_input_mutations = OptionValue(True, _BOOL)
        self.memory_efficiency = OptionValue(False, _BOOL)
        self.frozen_parameter = OptionValue(False, _BOOL)
        self.static_model_ops_lower_limit = IntRangeValue(None, -1, _INT64_MAX)
        self.jit_compile = OptionValue("auto", ["auto"])
        self.npu_fx_pass = OptionValue(False, _BOOL)
        self.aot_config_enable_joint_graph = OptionValue(False, _BOOL)
        self.aot_config_output_loss_index = OptionValue(0)
        self.topology_sorting_strategy = OptionValue("DFS", ["BFS", "DFS", "RDFS", "StableRDFS"])
        self.enable_ref_data = OptionValue(False, _BOOL)
        self.enable_view_optimize = OptionValue(True, _BOOL)
        self.remove_noop_ops = OptionValue(True, _BOOL)
        self.tiling_schedule_optimize = OptionValue(False, _BOOL)
        self.pattern_fusion_pass = OptionValue(True, _BOOL)
        self.aclgraph = _AclGraphExperimental()
        super().__init__()


class _InferenceConfig(NpuBaseConfig):
    def __init__(self) -> None:
        self.dynamic_gears_merge_policy = OptionValue("zip", ["zip", "product"])
        super().__init__()


class _GEConfig(NpuBaseConfig):
    def __init__(self) -> None:
        self.enable_single_stream = OptionValue(False, _BOOL)
        self.oo_level = OptionValue("O3", ["O1", "O3"])
        self.oo_constant_folding = OptionValue(None, [True, False, None])
        self.oo_dead_code_elimination = OptionValue(None, [True, False, None])
        self.export_compile_stat = OptionValue("2", ["0", "1", "2"])
        self.aicore_num = OptionValue(None)
        self.optimization_switch = OptionValue(None)
        super().__init__()


class _AoeConfig(NpuBaseConfig):
    def __init__(self) -> None:
        self.aoe_mode = OptionValue(None, ["2"])
        self.work_path = MustExistedPathValue("./")
        self.aoe_config_file = FileValue(None)
        super().__init__()


class _AclGraphConfig(NpuBaseConfig):
    def __init__(self) -> None:
        self.use_custom_pool = OptionValue(None)
        self.kernel_aot_optimization = OptionValue(False, _BOOL)
        self.kernel_aot_optimization_build_dir = OptionValue(None)
        super().__init__()


class TorchAirGroups(NpuBaseConfig):
    """The groups, as one node of the tree; ``CompilerConfig`` holds one and forwards its
    group names to it."""

    def __init__(self) -> None:
        self.debug = _DebugConfig()
        self.aoe_config = _AoeConfig()
        self.export = _ExportConfig()
        self.dump_config = _DataDumpConfig()
        self.fusion_config = _FusionConfig()
        self.experimental_config = _ExperimentalConfig()
        self.inference_config = _InferenceConfig()
        self.ge_config = _GEConfig()
        self.aclgraph_config = _AclGraphConfig()
        self.post_grad_custom_pre_pass = CallableValue(None)
        self.post_grad_custom_post_pass = CallableValue(None)
        super().__init__()


GROUP_NAMES: tuple[str, ...] = tuple(TorchAirGroups()._fixed_attrs)


def get_group(groups: TorchAirGroups, name: str) -> Any:
    return groups.__dict__[name]
