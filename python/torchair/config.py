"""Compiler options (SPEC.md section 2): ``CompilerConfig`` keeps the original
TorchAir names, validates every option by name and type, and refuses an option
whose feature is not built yet instead of ignoring it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchair.configs.groups import GROUP_NAMES, TorchAirGroups
from torchair.configs.outcomes import Extras, apply_tree
from torchair.errors import OptionError


@dataclass(frozen=True)
class _Option:
    default: Any
    types: tuple[type, ...]
    doc: str


_OPTIONS: dict[str, _Option] = {
    "enable_operator_fusion": _Option(True, (bool,), "fusion passes; False keeps one kernel per op"),
    "enable_memory_optimization": _Option(
        True,
        (bool,),
        "static memory plan with buffer reuse, big convolutions re-packing their weights per call; "
        "False gives each value its own buffer and packs every weight once",
    ),
    "weights_in_place": _Option(
        False,
        (bool,),
        "convolutions with few output pixels read the module's weight in place instead of holding a packed "
        "copy (ResNet-50 b1: 104 -> 32 MiB of weights held, peak RSS 698 -> 635 MB, but 23% slower on Zen 4); needs "
        "enable_memory_optimization",
    ),
    "fusion_threshold": _Option(None, (int, type(None)), "largest number of ops in one fused group"),
    "max_static_subgraph_ops": _Option(
        None, (int, type(None)), "largest number of ops in one compiled subgraph; larger graphs are split"
    ),
    "mixed_precision": _Option(None, (str, type(None)), "'bf16' or 'fp16' weights and matmul/conv"),
    "dynamic_axes": _Option(
        None,
        (dict, type(None)),
        "{argument: {axis: 'name' or ('name', min, max)}}: those axes of the forward's arguments are symbols "
        "from the first compile",
    ),
    "enable_dynamic_shape": _Option(True, (bool,), "accept symbolic shapes from dynamic=True / mark_dynamic"),
    "dynamic_graph_mode": _Option(False, (bool,), "run the captured graph op by op through the runtime"),
    "freezing": _Option(
        None,
        (bool, type(None)),
        "None/True: in graphs compiled without grad (inference), parameters and buffers are constants "
        "(folding, prepacking), guarded each call and rebuilt when changed; False keeps them as inputs",
    ),
    "mode": _Option(None, (str, type(None)), "'reduce-overhead' or 'max-autotune'"),
    "weight_quantization": _Option(
        None, (str, type(None)), "'int8' or 'int4': linear weights quantized group-wise when frozen"
    ),
    "weight_quantization_group_size": _Option(
        None,
        (int, type(None)),
        "values per scale under weight_quantization: a positive multiple of 32, or 0 for one group per row; "
        "None: 32 for int4 (llama.cpp's Q4_0), per-row for int8 (torchao's Int8WeightOnlyConfig)",
    ),
    "disabled_passes": _Option(
        (),
        (tuple, list),
        "names of graph passes to skip (torchair.PASS_NAMES), e.g. ['layout']; the others still run",
    ),
}

_MODES = (None, "default", "reduce-overhead", "max-autotune")


def _pass_names(value: tuple[Any, ...] | list[Any]) -> tuple[str, ...]:
    from torchair._C import PASSES

    for p in value:
        if p not in PASSES:
            raise OptionError(
                1,
                "invalid argument",
                f"option 'disabled_passes': unknown pass {p!r}; the passes are {', '.join(PASSES)}",
            )
    return tuple(value)


def valid_options() -> list[str]:
    return sorted(_OPTIONS)


class CompilerConfig:
    """The options of one torchair backend. Attribute names are the option
    names; setting an unknown attribute or a value of the wrong type raises
    ``OptionError`` naming the option and listing the valid ones.

    It is also TorchAir's ``CompilerConfig`` (``torchair.configs.compiler_config``): its
    groups (``config.debug``, ``config.experimental_config``, ...; torchair.configs.groups)
    hold TorchAir's options, validated as TorchAir validates them, and what each does here
    is torchair.configs.outcomes's table, applied by ``effective()``."""

    def __init__(self, **options: Any) -> None:
        object.__setattr__(self, "_groups", TorchAirGroups())
        for name, opt in _OPTIONS.items():
            object.__setattr__(self, name, opt.default)
        for name, value in options.items():
            setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # only reached for names that are not plain attributes: TorchAir's groups
        if name in GROUP_NAMES:
            return self.__dict__["_groups"].__dict__[name]
        raise AttributeError(f"'CompilerConfig' object has no attribute {name!r}")

    # The article's form: config.compiler_config.max_static_subgraph_ops = 10
    @property
    def compiler_config(self) -> CompilerConfig:
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        if name in GROUP_NAMES:
            setattr(self._groups, name, value)
            return
        opt = _OPTIONS.get(name)
        if opt is None:
            raise OptionError(
                2,
                "invalid argument",
                f"unknown torchair option {name!r}; valid options: {', '.join(valid_options())}; "
                f"TorchAir's groups: {', '.join(GROUP_NAMES)}",
            )
        # bool is an int in Python; an int option must not silently take True
        if not isinstance(value, opt.types) or (isinstance(value, bool) and bool not in opt.types):
            names = " or ".join("None" if t is type(None) else t.__name__ for t in opt.types)
            raise OptionError(
                1, "invalid argument", f"option {name!r} must be {names}, got {type(value).__name__} {value!r}"
            )
        if name in ("fusion_threshold", "max_static_subgraph_ops") and value is not None and value < 1:
            raise OptionError(1, "invalid argument", f"option {name!r} must be at least 1, got {value}")
        if name == "mode" and value not in _MODES:
            from torchair.configs._option_base import TreeOptionError

            # TorchAir's message (its config.mode is a leaf of its tree); "default" and None are torchair's too
            raise TreeOptionError(
                1,
                "invalid argument",
                f"Value {value!r} (type: {type(value)}) not in optional list ['max-autotune', 'reduce-overhead'] "
                f"(torchair option 'mode'; None and 'default' are accepted too)",
            )
        if name == "disabled_passes":
            value = _pass_names(value)
        if name == "dynamic_axes" and value is not None:
            from torchair.dynamic_axes import parse

            parse(value)  # a DynamicAxesError (an OptionError) names what is wrong
        if name == "mixed_precision" and value not in (None, "bf16", "fp16"):
            raise OptionError(1, "invalid argument", f"mixed_precision must be 'bf16' or 'fp16', got {value!r}")
        if name == "weight_quantization" and value not in (None, "int8", "int4"):
            raise OptionError(1, "invalid argument", f"weight_quantization must be 'int8' or 'int4', got {value!r}")
        if name == "weight_quantization_group_size" and value is not None and (value < 0 or value % 32):
            raise OptionError(
                1,
                "invalid argument",
                f"weight_quantization_group_size must be 0 (per row) or a positive multiple of 32, got {value}",
            )
        object.__setattr__(self, name, value)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _OPTIONS}

    def check_built(self) -> None:
        """Refuses options whose feature is not built yet (never ignores them)."""
        if self.dynamic_axes is not None and not self.enable_dynamic_shape:
            raise OptionError(
                1, "invalid argument", "dynamic_axes makes axes symbolic, which enable_dynamic_shape=False refuses"
            )
        if self.weight_quantization_group_size is not None and self.weight_quantization is None:
            raise OptionError(
                1, "invalid argument", "weight_quantization_group_size is set but weight_quantization is not"
            )

    def effective(self) -> tuple[CompilerConfig, Extras]:
        """The flat options a compile uses, with TorchAir's groups applied, and what only the
        groups ask for; NotBuiltError for anything not built (the flat options' or a group's)."""
        self.check_built()
        flat = CompilerConfig(**self.as_dict())
        extras = Extras(user_config=self)
        apply_tree(self._groups, flat, extras)
        # debug.data_dump.filter is a plain attribute in TorchAir's tree (any value), not a leaf
        extras.debug.data_dump.filter = getattr(self._groups.debug.data_dump, "filter", None)
        flat.check_built()
        object.__setattr__(flat, "extras", extras)
        return flat, extras

    def __repr__(self) -> str:
        return f"CompilerConfig({', '.join(f'{k}={v!r}' for k, v in self.as_dict().items())})"


def get_npu_backend_config() -> CompilerConfig:
    return CompilerConfig()


def config_from(options: dict[str, Any] | None, mode: str | None) -> CompilerConfig:
    config = CompilerConfig()
    if options is not None:
        if not isinstance(options, dict):
            raise OptionError(1, "invalid argument", f"options must be a dict, got {type(options).__name__}")
        for name, value in options.items():
            setattr(config, name, value)
    if mode is not None:
        config.mode = mode
    return config
