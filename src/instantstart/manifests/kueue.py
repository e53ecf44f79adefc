"""Kueue objects of task governance: priority classes, and a namespace's LocalQueue on its own ClusterQueue."""

from __future__ import annotations

from typing import Any

from instantstart.manifests.labels import MANAGED_LABELS, NAMESPACE_NAME_LABEL

GROUP, VERSION = "kueue.x-k8s.io", "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
FLAVOR = "instantstart-default"
"""The ResourceFlavor of InstantStart's ClusterQueues: no node labels, so it stands for every node."""
ACCELERATORS = ("nvidia.com/gpu", "aws.amazon.com/neurondevice")
# Kueue admits a workload only when its ClusterQueue covers every resource the pods request (training pods ask
# cpu, memory, accelerators and EFA). Quotas above anything a cluster has: the queue orders and prioritizes, it
# does not cap, unless `accelerators` is given.
COVERED = ("cpu", "memory", *ACCELERATORS, "vpc.amazonaws.com/efa")
UNCAPPED = {"cpu": "1000000", "memory": "100000Ti", "nvidia.com/gpu": "100000",
            "aws.amazon.com/neurondevice": "100000", "vpc.amazonaws.com/efa": "100000"}


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(MANAGED_LABELS)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def priority_class(name: str, value: int, description: str = "") -> dict[str, Any]:
    """A WorkloadPriorityClass (cluster-scoped): jobs labelled kueue.x-k8s.io/priority-class=<name> get `value`."""
    body: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass", "metadata": _meta(name),
                            "value": value}
    if description:
        body["description"] = description
    return body


def resource_flavor() -> dict[str, Any]:
    """The ResourceFlavor every InstantStart ClusterQueue draws from (empty spec: any node)."""
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": _meta(FLAVOR), "spec": {}}


def cluster_queue_name(namespace: str, queue: str) -> str:
    """The ClusterQueue behind LocalQueue `queue` of `namespace` (one per LocalQueue, cluster-scoped)."""
    return f"instantstart-{namespace}-{queue}"[:253]


def cluster_queue(namespace: str, queue: str, accelerators: int | None) -> dict[str, Any]:
    """A ClusterQueue admitting workloads of `namespace` only, covering every resource a training pod asks; the
    accelerator quota is `accelerators` (None: uncapped)."""
    quotas = dict(UNCAPPED)
    if accelerators is not None:
        quotas.update({name: str(accelerators) for name in ACCELERATORS})
    return {
        "apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": _meta(cluster_queue_name(namespace, queue)),
        "spec": {
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{"coveredResources": list(COVERED), "flavors": [
                {"name": FLAVOR, "resources": [{"name": r, "nominalQuota": quotas[r]} for r in COVERED]}]}],
        },
    }


def local_queue(namespace: str, queue: str) -> dict[str, Any]:
    """The LocalQueue jobs name in queueName (label kueue.x-k8s.io/queue-name), on its ClusterQueue."""
    return {"apiVersion": API_VERSION, "kind": "LocalQueue", "metadata": _meta(queue, namespace),
            "spec": {"clusterQueue": cluster_queue_name(namespace, queue)}}
