"""TorchAir's config tree under TorchAir's module names
(``from torchair.configs.compiler_config import CompilerConfig``)."""
