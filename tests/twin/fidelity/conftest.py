"""Fixtures for the fidelity suite: an AWS-only twin per module, clock nearly paused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hyperpod_twin.twin import Twin, TwinConfig


class AwsOnlyTwin(Twin):
    """The AWS side alone (no Kubernetes servers, no simulator)."""

    PLUGINS = ()


@pytest.fixture(scope="module")
def aws_twin() -> Iterator[Twin]:
    """A started AWS-only twin; tests advance its clock explicitly."""
    t = AwsOnlyTwin(TwinConfig(clock_scale=0.001)).start()
    try:
        yield t
    finally:
        t.stop()
