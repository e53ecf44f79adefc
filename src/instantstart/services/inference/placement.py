"""Where a model server may run: GPU instance types only, and enough free GPUs on one node per replica."""

from __future__ import annotations

from dataclasses import dataclass

from instantstart.errors import InvalidInput, PreconditionFailed
from instantstart.manifests.resources import PodResources
from instantstart.services.base.status_model import ClusterStatus
from instantstart.services.core import sizing
from instantstart.services.core.instance_types import catalog


@dataclass(frozen=True)
class Placement:
    """The instance types a deployment is pinned to and how many of its replicas fit now."""

    instance_types: list[str]
    fits: int


def check_types(requested: list[str] | None, gpu_count: int) -> list[str] | None:
    """Validate requested instance types: known, with GPUs, with at least `gpu_count` GPUs per node."""
    if not requested:
        return None
    known = catalog()
    problems = []
    for name in requested:
        facts = known.get(name)
        if facts is None:
            problems.append(f"{name} is not a known instance type")
        elif facts.gpus == 0:
            problems.append(f"{name} has no NVIDIA GPU (CPU-only or Trainium): model servers never run there")
        elif facts.gpus < gpu_count:
            problems.append(f"{name} has {facts.gpus} GPU(s) per node, fewer than gpuCount {gpu_count}")
    if problems:
        gpu_types = sorted(n for n, f in known.items() if f.gpus >= gpu_count)
        raise InvalidInput(
            "Invalid input: instanceTypes: " + "; ".join(problems) + ".",
            hint=f"Use GPU instance types with at least {gpu_count} GPU(s), e.g. {', '.join(gpu_types[:6])}.",
            details={"fields": [{"field": "instanceTypes", "message": "; ".join(problems)}]},
        )
    return list(dict.fromkeys(requested))


def server_resources(types: list[str], gpu_count: int) -> PodResources:
    """A model-server replica's requests: its GPUs, and the cpu/memory its share of the GPUs gives on the smallest
    of the types it may land on (so it fits any of them); one node, so no EFA."""
    known = catalog()
    sized = [sizing.pod_resources(known[t], accelerators_per_pod=gpu_count, nodes=1) for t in types if t in known]
    if not sized:
        return PodResources(gpus=gpu_count)
    return PodResources(gpus=gpu_count, cpu_milli=min(s.cpu_milli for s in sized),
                        memory_mib=min(s.memory_mib for s in sized))


def endpoint_cpu_memory(instance_type: str, gpu_count: int, cpu: str | None,
                        memory: str | None) -> tuple[str | None, str | None]:
    """An InferenceEndpointConfig worker's cpu/memory requests: the caller's, else its GPUs' share of the node after
    reservations (as training pods and model servers are sized); left unset when the type is unknown or too small
    (lint names that)."""
    facts = catalog().get(instance_type)
    if facts is None or not facts.gpus or gpu_count > facts.gpus:
        return cpu, memory
    sized = sizing.pod_resources(facts, accelerators_per_pod=gpu_count, nodes=1).requests()
    return cpu or sized.get("cpu"), memory or sized.get("memory")


def free_gpus_text(status: ClusterStatus) -> str:
    """Where GPUs are free, in cluster_get_status's numbers: `ml.g6.4xlarge: 1 of 2 free`."""
    parts = [f"{a.instance_type}: {a.gpu_available} of {a.gpu_total} free" for a in status.accelerators if a.gpu_total]
    return "; ".join(parts) if parts else "no GPU nodes in the cluster"


def place(status: ClusterStatus, requested: list[str] | None, gpu_count: int, replicas: int) -> Placement:
    """Pick the GPU types to pin to and check that every replica finds a Ready, schedulable node with
    `gpu_count` unrequested GPUs; PreconditionFailed names where GPUs are free otherwise."""
    known = catalog()
    eligible = {
        n.instance_type
        for n in status.nodes
        if n.gpus >= gpu_count and (known.get(n.instance_type) is None or known[n.instance_type].gpus > 0)
    }
    types = sorted(set(requested) if requested else eligible)
    if not types:
        raise PreconditionFailed(
            f"No node of this cluster has {gpu_count} GPU(s); GPUs: {free_gpus_text(status)}.",
            hint="Add an instance group of a GPU type with enough GPUs per node (hyperpod_add_instance_group), "
            "or lower gpuCount.",
            details={"gpuCount": gpu_count},
        )
    fits = sum(
        max(n.gpus - n.gpus_allocated, 0) // gpu_count
        for n in status.nodes
        if n.instance_type in types and n.ready and n.schedulable
    )
    if fits < replicas:
        raise PreconditionFailed(
            f"{fits} of {replicas} replica(s) with {gpu_count} GPU(s) each fit on {', '.join(types)} now; "
            f"GPUs: {free_gpus_text(status)}.",
            hint="Lower replicas or gpuCount, pick instance types where GPUs are free, free GPUs "
            "(inference_undeploy), or add capacity.",
            details={"gpuCount": gpu_count, "replicas": replicas, "fits": fits, "instanceTypes": types},
        )
    return Placement(instance_types=types, fits=fits)
