"""Fixtures shared by the Python tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches emptied before and after the test, so each test
    compiles its own graphs. Files that want it for every test set
    ``pytestmark = pytest.mark.usefixtures("fresh_dynamo")``."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
