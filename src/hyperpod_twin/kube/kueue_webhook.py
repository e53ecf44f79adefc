"""Kueue's job webhook, as the task governance add-on installs it: a HyperPodPyTorchJob created with a
`kueue.x-k8s.io/queue-name` label is suspended (spec.runPolicy.suspend) until Kueue admits its Workload.
Only while Kueue serves its CRDs (the add-on is installed); a job without the label runs as before
(manageJobsWithoutQueueName is false)."""

from __future__ import annotations

from typing import Any

from hyperpod_twin.kube.store import ObjectStore, ResourceType

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MANAGED_KINDS = {("sagemaker.amazonaws.com", "hyperpodpytorchjobs")}


def suspend_queued(store: ObjectStore, rtype: ResourceType, obj: dict[str, Any]) -> None:
    """Suspend a new job that names a queue, when Kueue is installed."""
    if rtype.key not in MANAGED_KINDS or store.find_type("kueue.x-k8s.io", "workloads") is None:
        return
    if QUEUE_LABEL not in ((obj.get("metadata") or {}).get("labels") or {}):
        return
    spec = obj.setdefault("spec", {})
    spec.setdefault("runPolicy", {})["suspend"] = True
