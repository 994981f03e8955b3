"""The compile cache (SPEC section 3.8): compiled inference subgraphs kept on
disk between processes, so a warm start skips torchair's lowering.

key.py: what an entry is keyed by. store.py: the folder, atomic writes,
warnings. entry.py: saving a subgraph's libair graph (weights as external
constants) and loading it back bound to the live module's tensors.
TORCHAIR_CACHE_DIR (default ~/.cache/torchair) holds it; TORCHAIR_CACHE=0
turns it off."""

from __future__ import annotations

from torchair.cache.entry import Lookup, lookup
from torchair.cache.store import CacheWarning, enabled, root

__all__ = ["lookup", "Lookup", "CacheWarning", "enabled", "root"]
