"""Kubernetes reads behind the cluster status: nodes summarised, accelerators requested, storage claims."""

from __future__ import annotations

from typing import Any

from instantstart.kube import core_kinds, wire
from instantstart.kube.calls import kube_call
from instantstart.kube.gateway import Api
from instantstart.manifests.labels import HEALTH_LABEL, INSTANCE_TYPE_LABEL, LABEL_MANAGED, MANAGER
from instantstart.manifests.storage import DEFAULT_NAMESPACE

DHC_LABEL = "sagemaker.amazonaws.com/deep-health-check-status"
FAULT_LABEL = "sagemaker.amazonaws.com/fault-reasons"
GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
HP_CLUSTER_LABEL = "sagemaker.amazonaws.com/cluster-name"
GPU = "nvidia.com/gpu"
NEURON = "aws.amazon.com/neurondevice"


# -- what the status is built from (each read is one call per cache interval) ---------------------------


def node_summary(node: dict[str, Any]) -> dict[str, Any]:
    """A Node (a plain dict) as the status summarises it: readiness, schedulability, HyperPod health, GPUs."""
    md, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    labels = md.get("labels") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    taints = [
        f"{t.get('key')}{'=' + str(t['value']) if t.get('value') else ''}:{t.get('effect')}"
        for t in spec.get("taints") or []
    ]
    blocking_taints = [
        t
        for t in spec.get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
        and (t.get("key") == HEALTH_LABEL or str(t.get("key", "")).startswith("node.kubernetes.io/"))
    ]
    health = labels.get(HEALTH_LABEL)
    schedulable = not spec.get("unschedulable") and not blocking_taints and health in (None, "Schedulable")
    alloc = status.get("allocatable") or {}
    return {
        "name": md.get("name", ""),
        "instanceType": labels.get(INSTANCE_TYPE_LABEL) or labels.get("beta.kubernetes.io/instance-type") or "unknown",
        "instanceGroup": labels.get(GROUP_LABEL),
        "hyperpodCluster": labels.get(HP_CLUSTER_LABEL),
        "zone": labels.get("topology.kubernetes.io/zone"),
        "ready": ready,
        "schedulable": schedulable,
        "healthStatus": health,
        "deepHealthCheck": labels.get(DHC_LABEL),
        "faultReasons": labels.get(FAULT_LABEL),
        "taints": taints,
        "gpuAllocatable": _count(alloc.get(GPU)),
        "neuronAllocatable": _count(alloc.get(NEURON)),
    }


def _count(value: Any) -> int:
    """An extended-resource quantity (whole devices) as an int; absent or malformed is 0."""
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def pod_request(spec: dict[str, Any], resource: str) -> int:
    """A pod's effective request of an extended resource: max(sum of containers, largest init container).
    An extended resource's request defaults to its limit."""

    def of(container: dict[str, Any]) -> int:
        res = container.get("resources") or {}
        return _count((res.get("requests") or {}).get(resource) or (res.get("limits") or {}).get(resource))

    main = sum(of(c) for c in spec.get("containers") or [])
    init = max((of(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def read_nodes(api: Api) -> list[dict[str, Any]]:
    """Every Node, summarised (blocking)."""
    result = kube_call("list nodes", core_kinds.list_nodes, api)
    return [node_summary(n) for n in wire.items(result)]


def read_allocations(api: Api) -> dict[str, dict[str, int]]:
    """Accelerators requested by non-terminated pods bound to each node: {node: {gpu, neuron}} (blocking)."""
    result = kube_call(
        "list pods",
        core_kinds.list_pods, api, None,
        field_selector="status.phase!=Succeeded,status.phase!=Failed",
    )
    used: dict[str, dict[str, int]] = {}
    for pod in wire.items(result):
        spec = wire.spec(pod)
        node = spec.get("nodeName")
        if not node or wire.phase(pod) in ("Succeeded", "Failed"):
            continue
        slot = used.setdefault(node, {"gpu": 0, "neuron": 0})
        slot["gpu"] += pod_request(spec, GPU)
        slot["neuron"] += pod_request(spec, NEURON)
    return used


def read_claims(api: Api) -> list[dict[str, Any]]:
    """Every PersistentVolumeClaim with its phase and volume (blocking)."""
    result = kube_call("list persistent volume claims", core_kinds.list_claims, api)
    claims = []
    for body in wire.items(result):
        md, spec = wire.metadata(body), wire.spec(body)
        phase = wire.status(body).get("phase", "Pending")
        claims.append(
            {
                "namespace": md.get("namespace", DEFAULT_NAMESPACE),
                "name": md.get("name", ""),
                "phase": phase,
                "bound": phase == "Bound",
                "volumeName": spec.get("volumeName") or None,
                "storageClassName": spec.get("storageClassName"),
                "managed": (md.get("labels") or {}).get(LABEL_MANAGED) == MANAGER,
            }
        )
    return claims
