from __future__ import annotations

from typing import Iterator

import pytest

from .hub import Hub


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    """One hub per test module (each test registers its own principals)."""
    h = Hub().start()
    yield h
    h.stop()
