"""The twin's Priority admission and kube-scheduler preemption: priorityClassName resolves to spec.priority and
preemptionPolicy (an unknown class is forbidden); a pod that fits nowhere preempts the fewest lower-priority pods
on one node (DisruptionTarget, Preempted event, graceful delete), holds that node while they terminate, and binds
there; a pod with preemptionPolicy Never, or of no higher priority, preempts nothing."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_twin.kube.priority import admit_priority
from hyperpod_twin.kube.status import ApiError
from hyperpod_twin.sim.kobj import RUN_SECONDS
from tests.support.sim import SimCluster, pod_spec

LOW = {"metadata": {"name": "background"}, "value": -10, "preemptionPolicy": "Never", "globalDefault": False}


def _pod(name: str, gpus: int, priority: int, **extra: Any) -> dict[str, Any]:
    """A pod as the API server stores it after Priority admission."""
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {**pod_spec(gpus), "priority": priority, "preemptionPolicy": "PreemptLowerPriority", **extra}}


def test_priority_admission(cluster: SimCluster) -> None:
    cluster.create("scheduling.k8s.io", "priorityclasses", LOW)
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"priorityClassName": "background"}}
    admit_priority(cluster.store, pod)
    assert pod["spec"]["priority"] == -10 and pod["spec"]["preemptionPolicy"] == "Never"
    plain: dict[str, Any] = {"metadata": {"name": "q"}, "spec": {}}
    admit_priority(cluster.store, plain)
    assert plain["spec"]["priority"] == 0 and plain["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    critical: dict[str, Any] = {"metadata": {"name": "c"}, "spec": {"priorityClassName": "system-cluster-critical"}}
    admit_priority(cluster.store, critical)
    assert critical["spec"]["priority"] == 2000000000
    with pytest.raises(ApiError) as refused:
        admit_priority(cluster.store, {"metadata": {"name": "x"}, "spec": {"priorityClassName": "nope"}})
    assert refused.value.code == 403 and "no PriorityClass with name nope was found" in str(refused.value)


def test_a_pod_that_fits_nowhere_preempts_lower_priority_pods(cluster: SimCluster) -> None:
    cluster.add_node("i-0ddddddddddddddd1")  # 4 GPUs
    cluster.create("scheduling.k8s.io", "priorityclasses", LOW)
    job_template = {"metadata": {"annotations": {RUN_SECONDS: "3600"}},
                    "spec": {**pod_spec(3), "priorityClassName": "background", "restartPolicy": "Never",
                             "terminationGracePeriodSeconds": 10}}
    cluster.create("batch", "jobs", {"metadata": {"name": "dl", "namespace": "default"},
                                     "spec": {"backoffLimit": 3, "template": job_template}})
    cluster.advance(5)
    [victim] = [p for p in cluster.list("", "pods", "default") if p["status"]["phase"] == "Running"]
    assert victim["spec"]["priority"] == -10 and victim["spec"]["preemptionPolicy"] == "Never"  # admitted

    # Same priority with no room: nothing is preempted.
    cluster.create("", "pods", _pod("peer", 2, -10))
    cluster.advance(3)
    assert not cluster.get("", "pods", victim["metadata"]["name"])["metadata"].get("deletionTimestamp")
    # A higher priority that never preempts: still nothing.
    cluster.create("", "pods", _pod("polite", 2, 100, preemptionPolicy="Never"))
    cluster.advance(3)
    assert not cluster.get("", "pods", victim["metadata"]["name"])["metadata"].get("deletionTimestamp")

    # Priority 0 needing 2 GPUs: the background pod is preempted, gracefully.
    cluster.create("", "pods", _pod("trainer", 2, 0))
    cluster.advance(1)
    gone = cluster.get("", "pods", victim["metadata"]["name"])
    assert gone["metadata"]["deletionTimestamp"] and gone["metadata"]["deletionGracePeriodSeconds"] == 10
    target = next(c for c in gone["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert target["reason"] == "PreemptionByScheduler"
    trainer = cluster.get("", "pods", "trainer")
    assert trainer["status"]["nominatedNodeName"] == "hyperpod-i-0ddddddddddddddd1"
    assert not trainer["spec"].get("nodeName")  # it waits for the victim to go
    events = [e for e in cluster.list("", "events", "default") if e["reason"] == "Preempted"]
    assert events and events[0]["message"] == (
        f"Preempted by pod {trainer['metadata']['uid']} on node hyperpod-i-0ddddddddddddddd1")
    cluster.advance(15)
    assert cluster.get("", "pods", "trainer")["status"]["phase"] == "Running"
    # The freed room went to the preemptor first (it held the node), then to the one that never preempts.
    assert cluster.get("", "pods", "polite")["status"]["phase"] == "Running"
    retry = [p for p in cluster.list("", "pods", "default")
             if p["metadata"].get("labels", {}).get("job-name") == "dl"]
    assert retry and all(not p["spec"].get("nodeName") for p in retry)  # the background retry waits
    assert cluster.get("", "pods", "peer")["spec"].get("nodeName") is None
