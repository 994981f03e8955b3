"""Fixtures shared by the Python tests."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch

# The compile cache (and max-autotune's choices) go to a folder of this test
# session, never to the user's ~/.cache/torchair or TORCHAIR_CACHE_DIR: set
# before any test compiles. Tests of the cache itself point it at their own tmp_path.
os.environ["TORCHAIR_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchair-test-cache-")


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches emptied before and after the test, so each test
    compiles its own graphs. Files that want it for every test set
    ``pytestmark = pytest.mark.usefixtures("fresh_dynamo")``."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
