"""Fixtures for simulator tests at controller level: a bootstrapped store, its control plane, a paused clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hyperpod_twin.clock import TwinClock
from hyperpod_twin.events import EventBus
from hyperpod_twin.kube.controllers import ControlPlane
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.store import ObjectStore
from hyperpod_twin.kube.types import bootstrap
from hyperpod_twin.sim.plugin import build_simulator
from tests.support.sim import ARN, SimCluster


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    """A fresh cluster: built-in types, control plane (CRDs, GC), and a started simulator."""
    store = ObjectStore()
    bootstrap(store)
    control = ControlPlane(store)
    clock = TwinClock(scale=0.0)  # frozen: only advance() moves time
    bus = EventBus()
    runtime = ClusterRuntime("sim-test", ARN, store)
    sim = build_simulator(runtime, clock, bus)
    sim.start()
    yield SimCluster(sim, clock, bus)
    sim.stop()
    control.close()
