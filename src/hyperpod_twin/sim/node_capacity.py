"""A HyperPod node's shape: its Kubernetes name, capacity and allocatable by instance type, label-safe text."""

from __future__ import annotations

import re

from hyperpod_twin.aws import instance_types
from hyperpod_twin.sim import kobj

MAX_PODS = 110  # kubelet default; EKS's ENI-based max-pods is larger on big types, never the limit here


def label_value(text: str) -> str:
    """Free text made a valid label value (≤63 chars of [A-Za-z0-9_.-], alphanumeric at both ends)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.-")
    return cleaned[:63].rstrip("_.-")


def node_name(instance_id: str) -> str:
    """Kubernetes Node name of a HyperPod instance (`hyperpod-i-…`)."""
    return f"hyperpod-{instance_id}"


def capacity_of(instance_type: str) -> dict[str, str]:
    """Node capacity by `ml.*` instance type: cpu, memory, pods and the extended device resources."""
    itype = instance_types.get(instance_type)
    if itype is None:
        return {"cpu": "2", "memory": f"{8 * 1024 * 1024}Ki", "pods": str(MAX_PODS), "ephemeral-storage": _EPHEMERAL}
    cap = {
        "cpu": str(itype.vcpus),
        "memory": f"{itype.memory_gib * 1024 * 1024}Ki",
        "pods": str(MAX_PODS),
        "ephemeral-storage": _EPHEMERAL,
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    if itype.gpus:
        cap["nvidia.com/gpu"] = str(itype.gpus)
    if itype.efa:
        cap["vpc.amazonaws.com/efa"] = str(itype.efa)
    if itype.neuron_devices:
        cores_per_device = 2 if "trn1" in instance_type else 8
        cap["aws.amazon.com/neuron"] = str(itype.neuron_devices)
        cap["aws.amazon.com/neurondevice"] = str(itype.neuron_devices)
        cap["aws.amazon.com/neuroncore"] = str(itype.neuron_devices * cores_per_device)
    return cap


_EPHEMERAL = f"{500 * 1024 * 1024}Ki"


def allocatable_of(capacity: dict[str, str]) -> dict[str, str]:
    """What the kubelet leaves for pods after system reservations (EKS-style: some cpu and memory)."""
    alloc = dict(capacity)
    cpu = kobj.quantity(capacity["cpu"])
    mem_kib = kobj.quantity(capacity["memory"]) / 1024
    reserved_cpu = 0.06 + 0.01 * max(cpu - 1, 0) / 4  # a few percent, like EKS's bootstrap reservation
    alloc["cpu"] = f"{int((cpu - reserved_cpu) * 1000)}m"
    alloc["memory"] = f"{int(mem_kib - min(mem_kib * 0.08, 6 * 1024 * 1024))}Ki"
    return alloc
