"""``torchair.core``: TorchAir's module path for its logger (``torchair.core.utils.logger``)."""
