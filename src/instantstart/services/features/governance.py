"""The taskGovernance feature's own Kueue objects: its priority classes and namespaces' queues, applied once Kueue
serves its CRDs (objects of the same name InstantStart did not create are refused, never taken over)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from instantstart.catalog.base import WireModel
from instantstart.context import AppContext
from instantstart.errors import NotFound, PreconditionFailed
from instantstart.kube import core_kinds
from instantstart.kube.apply import apply_object, read_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.manifests import kueue
from instantstart.store.models import ClusterRow
from instantstart.validation import KubeName


class PriorityClass(WireModel):
    """A Kueue WorkloadPriorityClass: jobs submitted with `priority: <name>` are admitted (and preempt) by value."""

    name: KubeName
    value: int = Field(ge=-1_000_000_000, le=1_000_000_000, description="Higher is admitted first.")
    description: str = Field(default="", max_length=256)


class Queue(WireModel):
    """A LocalQueue in `namespace` (what a job's queueName names), on a ClusterQueue of its own."""

    name: KubeName
    namespace: KubeName = "default"
    accelerators: int | None = Field(default=None, ge=0, le=100000, description="The queue's quota of GPUs "
                                     "(Neuron devices on trn) in all; default: uncapped (the queue orders, "
                                     "prioritizes and preempts by priority class without limiting).")


class GovernanceToggle(WireModel):
    """HyperPod task governance (the add-on installs Kueue) and the Kueue objects jobs name."""

    enabled: bool
    priority_classes: list[PriorityClass] = Field(default_factory=list, max_length=16, description="Kueue "
                                                  "WorkloadPriorityClasses to create (a job's `priority`).")
    queues: list[Queue] = Field(default_factory=list, max_length=16, description="LocalQueues to create (a job's "
                                "`queueName`), each on a ClusterQueue admitting its namespace only.")

    @model_validator(mode="after")
    def _consistent(self) -> GovernanceToggle:
        if not self.enabled and (self.priority_classes or self.queues):
            raise ValueError("priorityClasses and queues need enabled: true (disabling removes Kueue with them)")
        names = [p.name for p in self.priority_classes]
        queues = [(q.namespace, q.name) for q in self.queues]
        if len(set(names)) != len(names) or len(set(queues)) != len(queues):
            raise ValueError("each priority class name, and each queue name within a namespace, may appear once")
        return self


def _apply(api: Api, body: dict[str, Any]) -> bool:
    """Apply one object; whether it changed (created, or a new resourceVersion)."""
    what = f"{body['kind']} {body['metadata'].get('namespace', '')}/{body['metadata']['name']}".replace(" /", " ")
    before = kube_call(f"read {what}", read_object, api, body)
    after = kube_call(f"apply {what}", apply_object, api, body)
    version = (before or {}).get("metadata", {}).get("resourceVersion")
    return before is None or version != (after.get("metadata") or {}).get("resourceVersion")


def apply_governance(app: AppContext, row: ClusterRow, settings: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Blocking: the priority classes and queues `settings` ask for; (what exists, what was written)."""
    wanted = GovernanceToggle.model_validate(settings)
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    for i, queue in enumerate(wanted.queues):
        try:
            kube_call(f"read namespace {queue.namespace}", core_kinds.read_namespace, api, queue.namespace)
        except NotFound:
            raise PreconditionFailed(
                f"taskGovernance.queues[{i}].namespace: namespace {queue.namespace} does not exist on cluster "
                f"{row.tag}.", hint="Create the namespace first, or name an existing one.") from None
    wrote: list[str] = []
    for pc in wanted.priority_classes:
        if _apply(api, kueue.priority_class(pc.name, pc.value, pc.description)):
            wrote.append(f"WorkloadPriorityClass/{pc.name}")
    if wanted.queues and _apply(api, kueue.resource_flavor()):
        wrote.append(f"ResourceFlavor/{kueue.FLAVOR}")
    for queue in wanted.queues:
        if _apply(api, kueue.cluster_queue(queue.namespace, queue.name, queue.accelerators)):
            wrote.append(f"ClusterQueue/{kueue.cluster_queue_name(queue.namespace, queue.name)}")
        if _apply(api, kueue.local_queue(queue.namespace, queue.name)):
            wrote.append(f"LocalQueue/{queue.namespace}/{queue.name}")
    actual = {"priorityClasses": [p.name for p in wanted.priority_classes],
              "queues": [{"namespace": q.namespace, "name": q.name,
                          "clusterQueue": kueue.cluster_queue_name(q.namespace, q.name)} for q in wanted.queues]}
    return actual, wrote
