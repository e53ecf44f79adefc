"""The twin's nodes advertise what the control plane sizes pods from: one set of facts on both sides."""

from __future__ import annotations

from hyperpod_twin.aws import instance_types as twin_types
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.node_capacity import allocatable_of, capacity_of
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


def test_a_ray_worker_and_its_head_fit_one_node_of_every_type() -> None:
    from instantstart.manifests import ray_job as ray_job_manifests

    for name, t in catalog().items():
        alloc = allocatable_of(capacity_of(name))
        worker = sizing.pod_resources(t, accelerators_per_pod=t.accelerators, nodes=1,
                                      beside=(ray_job_manifests.HEAD_CPU, ray_job_manifests.HEAD_MEMORY_GIB))
        cpu = worker.cpu_milli / 1000 + ray_job_manifests.HEAD_CPU
        memory = worker.memory_mib * 2**20 + ray_job_manifests.HEAD_MEMORY_GIB * 2**30
        if (
            t.vcpus > ray_job_manifests.HEAD_CPU + 1 and t.memory_gib > ray_job_manifests.HEAD_MEMORY_GIB + 2
        ):  # a type a Ray cluster can use
            assert cpu <= kobj.quantity(alloc["cpu"]) and memory <= kobj.quantity(alloc["memory"]), name
    p5 = sizing.pod_resources(catalog()["ml.p5.48xlarge"], accelerators_per_pod=8, nodes=2,
                              beside=(ray_job_manifests.HEAD_CPU, ray_job_manifests.HEAD_MEMORY_GIB))
    assert (p5.gpus, p5.efa, p5.cpu_milli, p5.memory_mib) == (8, 32, 177000, 1882 * 1024)


def test_the_download_job_avoids_trainium_nodes_as_well_as_gpu_nodes() -> None:
    from hyperpod_twin.sim.node_capacity import capacity_of as twin_capacity
    from instantstart.services.storage.models import accelerated_types

    def node(itype: str, capacity: dict[str, str] | None = None) -> dict[str, object]:
        return {"metadata": {"labels": {"node.kubernetes.io/instance-type": itype}},
                "status": {"capacity": twin_capacity(itype) if capacity is None else capacity}}

    nodes = [node("ml.g6.4xlarge"), node("ml.trn1.32xlarge"), node("ml.m5.xlarge"),
             node("ml.trn2.48xlarge", {"cpu": "192"}),  # devices not advertised yet: the catalog knows
             node("ml.custom.unknown", {"aws.amazon.com/neurondevice": "2"})]
    assert accelerated_types(nodes) == ["ml.custom.unknown", "ml.g6.4xlarge", "ml.trn1.32xlarge", "ml.trn2.48xlarge"]
