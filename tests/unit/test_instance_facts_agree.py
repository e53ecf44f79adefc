"""The twin's nodes advertise what the control plane sizes pods from: one set of facts on both sides."""

from __future__ import annotations

from hyperpod_twin.aws import instance_types as twin_types
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.nodes import allocatable_of, capacity_of
from instantstart.services.core import sizing
from instantstart.services.core.instance_types import catalog


def test_every_catalog_type_has_the_same_hardware_in_the_twin_and_its_whole_node_pod_fits() -> None:
    for name, t in catalog().items():
        twin = twin_types.get(name)
        assert twin is not None, f"the twin has no {name}"
        assert (twin.gpus, twin.neuron_devices, twin.efa, twin.vcpus, twin.memory_gib) == (
            t.gpus, t.neuron, t.efa, t.vcpus, t.memory_gib), name
        alloc = allocatable_of(capacity_of(name))
        pod = sizing.pod_resources(t, accelerators_per_pod=t.accelerators, nodes=2)
        for resource, value in pod.requests().items():
            assert kobj.quantity(value) <= kobj.quantity(alloc.get(resource, "0")), (name, resource, value, alloc)
