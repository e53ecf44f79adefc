"""Pod sizing from the instance-type catalog: accelerators, EFA, and the cpu/memory a node gives after reservations."""

from __future__ import annotations

from instantstart.errors import InvalidInput
from instantstart.manifests.resources import PodResources
from instantstart.services.core.instance_types import InstanceType


def _refuse(field: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(f"Invalid input: {field}: {message}", hint=hint,
                        details={"fields": [{"field": field, "message": message}]})


def cpu_reservation(vcpus: int) -> float:
    """Cores kept for the kubelet, system daemons and the node's agents: 0.1 static, then 30 % of the first core,
    15 % of the second, 10 % of the third and fourth, 6 % of each further one (the table the HyperPod CLI sizes
    pods with; sagemaker-hyperpod's quota_allocation_util)."""
    reserved = 0.1 + (0.3 if vcpus >= 1 else 0.0) + (0.15 if vcpus >= 2 else 0.0)
    reserved += 0.1 * min(2, max(0, vcpus - 2))
    return reserved + 0.06 * max(0, vcpus - 4)


def memory_reservation(memory_gib: int) -> float:
    """GiB kept back: 0.5 static, then 30 % of the first 4 GiB, 25 % of the next 4, 20 % of the next 8, 17 % of the
    next 112 and 7 % of the rest (the same table)."""
    reserved, left = 0.5, float(memory_gib)
    for size, rate in ((4, 0.3), (4, 0.25), (8, 0.2), (112, 0.17)):
        part = min(size, left)
        reserved += part * rate
        left -= part
    return reserved + max(left, 0.0) * 0.07


def pod_cpu_limit(t: InstanceType) -> int:
    """Whole cores one pod may request on a node of type `t`."""
    return int(t.vcpus - cpu_reservation(t.vcpus))


def pod_memory_limit_gib(t: InstanceType) -> int:
    """Whole GiB one pod may request on a node of type `t`."""
    return int(t.memory_gib - memory_reservation(t.memory_gib))


def accelerators(t: InstanceType, asked: int | None, field: str = "gpusPerNode") -> int:
    """The accelerators (GPUs or Neuron devices) each pod requests: `asked`, or all of the type's; more than a
    node has is refused naming both numbers."""
    if asked is None:
        return t.accelerators
    if asked > t.accelerators:
        have = t.accelerators
        raise _refuse(field, f"{asked} {t.accelerator_word} per node, but {t.name} has {have}",
                      f"Set {field} to at most {have}, or pick an instance type with more {t.accelerator_word}.")
    return asked


def pod_resources(t: InstanceType, *, accelerators_per_pod: int, nodes: int, efa: bool | None = None,
                  vcpu: float | None = None, memory_gib: float | None = None,
                  beside: tuple[float, float] = (0.0, 0.0)) -> PodResources:
    """One pod's requests on a node of type `t`.

    cpu and memory default to the pod's share of the node (its share of the accelerators; all of the node for a
    CPU type; one accelerator's share when an accelerated type's pod asks for none), capped at what a node gives
    pods after reservations; an explicit `vcpu`/`memory_gib` above that cap is refused naming both numbers.
    EFA: multi-node pods on an EFA type get the node's interfaces (a partial-node pod its proportional share, at
    least one), single-node pods none (their collectives never leave the node, and the interfaces stay free for a
    neighbour); `efa=False` turns it off, `efa=True` on a type without EFA is refused. `beside` (cores, GiB) is
    kept free for another pod that must fit on the same node (a Ray head)."""
    total = t.accelerators
    share = (accelerators_per_pod / total if accelerators_per_pod else 1 / total) if total else 1.0
    cpu_cap = max(int(pod_cpu_limit(t) - beside[0]), 0)
    mem_cap = max(int(pod_memory_limit_gib(t) - beside[1]), 0)
    if vcpu is not None and vcpu > cpu_cap:
        raise _refuse("vcpu", f"{vcpu:g} vCPUs per pod, but a {t.name} node gives pods at most {cpu_cap} of its "
                      f"{t.vcpus} (the rest is reserved for the kubelet and system daemons)",
                      f"Set vcpu to at most {cpu_cap}, or leave it out to get the pod's share of the node.")
    if memory_gib is not None and memory_gib > mem_cap:
        raise _refuse("memoryGiB", f"{memory_gib:g} GiB per pod, but a {t.name} node gives pods at most {mem_cap} "
                      f"of its {t.memory_gib} GiB (the rest is reserved for the kubelet and system daemons)",
                      f"Set memoryGiB to at most {mem_cap}, or leave it out to get the pod's share of the node.")
    if efa and not t.efa:
        raise _refuse("efa", f"{t.name} has no EFA interfaces",
                      "Leave efa out (or false) on this type, or pick an EFA type (p4d, p5, trn1, trn2, g5.8xlarge+).")
    cores = vcpu if vcpu is not None else min(share * t.vcpus, cpu_cap)
    gib = memory_gib if memory_gib is not None else min(share * t.memory_gib, mem_cap)
    wants_efa = (nodes > 1) if efa is None else efa
    interfaces = 0
    if wants_efa and t.efa:
        whole = not total or accelerators_per_pod >= total
        interfaces = t.efa if whole else max(1, t.efa * accelerators_per_pod // total)
    return PodResources(
        gpus=accelerators_per_pod if t.gpus else 0, neuron=accelerators_per_pod if t.neuron else 0,
        efa=interfaces, cpu_milli=int(cores * 1000), memory_mib=int(gib * 1024), efa_rdma=t.efa_rdma,
    )
