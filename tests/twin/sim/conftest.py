"""Fixtures for simulator tests at controller level: a bootstrapped store, its control plane, a paused clock."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from hyperpod_twin.clock import TwinClock
from hyperpod_twin.events import EventBus
from hyperpod_twin.kube.controllers import ControlPlane
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.store import ObjectStore
from hyperpod_twin.kube.types import bootstrap
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.nodes import NodeController
from hyperpod_twin.sim.plugin import build_simulator

ARN = "arn:aws:eks:us-west-2:111122223333:cluster/sim-test"


@dataclass
class SimCluster:
    """One simulated cluster driven through its store, with twin time under the test's control."""

    sim: ClusterSim
    clock: TwinClock
    bus: EventBus

    @property
    def store(self) -> ObjectStore:
        return self.sim.runtime.store

    def add_node(
        self, instance_id: str, instance_type: str = "ml.g5.12xlarge", group: str = "gpu", **extra: Any
    ) -> None:
        """Publish a Running HyperPod instance to the node controller (as the plugin does)."""
        node = {
            "InstanceId": instance_id,
            "InstanceGroupName": group,
            "InstanceType": instance_type,
            "InstanceStatus": {"Status": extra.pop("status", "Running")},
            "Placement": {"AvailabilityZone": "us-west-2a", "AvailabilityZoneId": "usw2-az1"},
            **extra,
        }
        controller: NodeController = self.sim.controller(NodeController)
        self.sim.run(lambda: controller.instance_changed("hp-test", node))

    def create(self, group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create an object as an API client would (store write → controllers react)."""
        rtype = self.store.find_type(group, plural)
        assert rtype is not None, (group, plural)
        created: dict[str, Any] = self.store.create(rtype, obj)
        return created

    def get(self, group: str, plural: str, name: str, namespace: str = "default") -> dict[str, Any]:
        rtype = self.store.find_type(group, plural)
        assert rtype is not None
        obj: dict[str, Any] = self.store.get(rtype, namespace, name)
        return obj

    def list(self, group: str, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        rtype = self.store.find_type(group, plural)
        assert rtype is not None
        items, _ = self.store.list(rtype, namespace)
        result: list[dict[str, Any]] = items
        return result

    def advance(self, seconds: float, step: float = 0.5) -> None:
        """Move twin time on in small steps so chained timers (start → ready → exit) all fire."""
        remaining = seconds
        while remaining > 0:
            self.clock.advance(min(step, remaining))
            remaining -= step


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


def pod_spec(gpus: int = 0, **extra: Any) -> dict[str, Any]:
    """A one-container pod spec requesting `gpus` GPUs."""
    resources = {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}} if gpus else {}
    return {"containers": [{"name": "main", "image": "busybox:1.36", "resources": resources}], **extra}
