"""``torchair.configs.compiler_config.CompilerConfig``: TorchAir's import path for the config
object, which is ``torchair.CompilerConfig`` itself (one object, two names)."""

from __future__ import annotations

from torchair.config import CompilerConfig

__all__ = ["CompilerConfig"]
