"""A training job and its pods from the cluster's watches: the job by key, its pods through the pod-label index."""

from __future__ import annotations

from typing import Any

from instantstart.kube.informers import Informer
from instantstart.manifests import ray_job as ray_job_manifests
from instantstart.manifests import training as training_manifests
from instantstart.services.base.watch.state import PodState
from instantstart.services.training.models import JobPod

# The job kinds, then the pods (the pods watch is part of the answer's freshness).
JOB_STATUS_KINDS = ("hyperpodpytorchjobs", "rayjobs", "pods")


def job_pods(pods: Informer, job: dict[str, Any]) -> list[JobPod]:
    """The watched pods of `job` (a pruned HyperPodPyTorchJob or RayJob): found by the labels the operators put on
    them, in O(the job's pods). A RayJob's: its Ray cluster's head and workers, then the submitter's pod."""
    meta = job["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    if job.get("kind") == ray_job_manifests.KIND:
        cluster = (job.get("status") or {}).get("rayClusterName")
        selectors = ([(ray_job_manifests.CLUSTER_LABEL, cluster)] if cluster else []) + [
            (ray_job_manifests.SUBMITTER_LABEL, name)
        ]
    else:
        selectors = [(training_manifests.POD_JOB_LABEL, name)]
    state: PodState = pods.derived
    keys = list(dict.fromkeys(k for label, value in selectors for k in state.labels.pods(namespace, label, value)))
    return [JobPod(name=p["name"], node=p["node"], phase=p["phase"], restarts=p["restarts"]) for p in pods.pick(keys)]


def job_in_watches(name: str, namespace: str, infs: list[Informer]) -> tuple[dict[str, Any], list[JobPod]] | None:
    """(the job as its watch keeps it, its pods) when the watches hold the job, else None (informers in
    JOB_STATUS_KINDS order)."""
    pytorch, ray, pods = infs
    key = f"{namespace}/{name}"
    for inf in (pytorch, ray):
        found = inf.pick([key])
        if found:
            return found[0], job_pods(pods, found[0])
    return None
