"""Task governance pass-through: Kueue queue, priority class and topology, checked against the cluster first."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.context import AppContext
from instantstart.errors import NotFound, PreconditionFailed
from instantstart.kube import custom_objects
from instantstart.kube.calls import kube_api, kube_call
from instantstart.manifests import training as training_manifests
from instantstart.services.training.checks import field_error
from instantstart.store.models import ClusterRow

KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta1"
TASK_GOVERNANCE_ADDON = "amazon-sagemaker-hyperpod-taskgovernance"


class Topology(WireModel):
    """Topology-aware scheduling: keep the job's pods within one domain of `level` (Kueue podset annotation)."""

    mode: Literal["preferred", "required"] = Field(default="preferred",
                                                  description="preferred: best effort; required: wait for it.")
    level: str = Field(max_length=64, description="The EC2 topology label of the domain: "
                       + ", ".join(training_manifests.TOPOLOGY_LEVELS) + ".")


def scheduling(
    queue: str | None, priority: str | None, topology: Topology | None
) -> training_manifests.Scheduling | None:
    """The Kueue labels and annotation to render, or None when the user set none."""
    if queue is None and priority is None and topology is None:
        return None
    if topology is not None and topology.level not in training_manifests.TOPOLOGY_LEVELS:
        raise field_error(
            "topology.level",
            f"{topology.level!r} is not a topology label HyperPod schedules by",
            f"Use one of {', '.join(training_manifests.TOPOLOGY_LEVELS)} (network-node-layer-1 is the widest).",
        )
    return training_manifests.Scheduling(queue=queue, priority=priority,
                        topology=(topology.mode, topology.level) if topology else None)


def _names(items: Any) -> list[str]:
    return sorted(str((i.get("metadata") or {}).get("name")) for i in items.get("items") or [])


def check_scheduling(
    app: AppContext, row: ClusterRow, namespace: str, chosen: training_manifests.Scheduling | None
) -> None:
    """Blocking: the LocalQueue exists in the job's namespace and the WorkloadPriorityClass exists (Kueue is
    installed by the task governance add-on); each refusal names what exists."""
    if chosen is None or (chosen.queue is None and chosen.priority is None):
        return
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    try:
        queues = kube_call("list Kueue LocalQueues", custom_objects.list_custom, api, KUEUE_GROUP,
                           KUEUE_VERSION, "localqueues", namespace)
        classes = kube_call("list Kueue WorkloadPriorityClasses", custom_objects.list_custom, api, KUEUE_GROUP,
                            KUEUE_VERSION, "workloadpriorityclasses", None)
    except NotFound:
        raise PreconditionFailed(
            f"queueName/priority need HyperPod task governance (Kueue), which is not installed on cluster {row.tag}.",
            hint=f"Enable task governance (the EKS add-on {TASK_GOVERNANCE_ADDON}) with "
            '{"taskGovernance": {"enabled": true}} in hyperpod_update_advanced_features (with priorityClasses and '
            "queues to create them), or leave queueName and priority out.",
        ) from None
    if chosen.queue is not None and chosen.queue not in _names(queues):
        have = _names(queues)
        raise field_error("queueName", f"no LocalQueue {chosen.queue!r} in namespace {namespace}",
                          f"Queues in {namespace}: {', '.join(have) or 'none'}. Create one with "
                          f'hyperpod_update_advanced_features {{"taskGovernance": {{"enabled": true, "queues": '
                          f'[{{"name": "{chosen.queue}", "namespace": "{namespace}"}}]}}}}.')
    if chosen.priority is not None and chosen.priority not in _names(classes):
        have = _names(classes)
        raise field_error("priority", f"no WorkloadPriorityClass {chosen.priority!r}",
                          f"Priority classes: {', '.join(have) or 'none'}. Create one with taskGovernance."
                          f'priorityClasses [{{"name": "{chosen.priority}", "value": 100}}].')
