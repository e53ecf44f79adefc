"""Fixtures for the twin's AWS side: one Twin per module (no Kubernetes plugins), paused clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hyperpod_twin.twin import Twin, TwinConfig


class AwsOnlyTwin(Twin):
    """The AWS side alone: these tests answer `eks.cluster.activating` themselves where they need to."""

    PLUGINS = ()


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    """A started twin whose clock barely moves on its own; tests advance it through /_twin/clock."""
    t = AwsOnlyTwin(TwinConfig(clock_scale=0.001)).start()
    try:
        yield t
    finally:
        t.stop()
