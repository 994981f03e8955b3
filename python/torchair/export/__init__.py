"""torchair.export and torchair.load: a model as one .air file, run without
Python by libair (the ``air`` CLI, the C API) or from Python by load.

trace.py: the model as one ATen graph (torch.export). lower.py: that graph as
one libair graph (the torch.compile path's lowering). meta.py: the metadata
written beside it. write.py: export(). loaded.py: load() and its callable."""

from __future__ import annotations

from torchair.export.loaded import LoadedModel, load
from torchair.export.trace import ExportError
from torchair.export.write import export

__all__ = ["export", "load", "LoadedModel", "ExportError"]
