"""Integration tests use the twin fixtures of tests/support/twin.py (registered in tests/conftest.py)."""

from __future__ import annotations

from tests.support.twin import TWIN_CLOCK_SCALE, twin_client

__all__ = ["TWIN_CLOCK_SCALE", "twin_client"]
