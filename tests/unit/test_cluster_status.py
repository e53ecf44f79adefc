"""Pure parts of cluster_get_status: node readiness and schedulability, GPU requests of pods, dependency health."""

from __future__ import annotations

from typing import Any

from instantstart.services.base.facts import ClusterFacts
from instantstart.services.base.status_model import dependency_health
from instantstart.services.base.status_reads import node_summary, pod_request


def node(labels: dict[str, str], *, ready: bool = True, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False, gpus: str | None = "1") -> dict[str, Any]:
    alloc = {"cpu": "15890m", **({"nvidia.com/gpu": gpus} if gpus is not None else {})}
    return {
        "metadata": {"name": "hyperpod-i-0abc", "labels": labels},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}], "allocatable": alloc},
    }


HP = {
    "node.kubernetes.io/instance-type": "ml.g6.4xlarge",
    "sagemaker.amazonaws.com/instance-group-name": "accelerated",
    "sagemaker.amazonaws.com/cluster-name": "hp-cluster-demo",
    "sagemaker.amazonaws.com/node-health-status": "Schedulable",
    "topology.kubernetes.io/zone": "us-west-2c",
}
HEALTH_TAINT = {"key": "sagemaker.amazonaws.com/node-health-status", "value": "Unschedulable", "effect": "NoSchedule"}


def test_a_healthy_hyperpod_node_is_ready_and_schedulable() -> None:
    s = node_summary(node(HP))
    assert s["ready"] and s["schedulable"] and s["gpuAllocatable"] == 1
    assert (s["instanceType"], s["instanceGroup"], s["zone"]) == ("ml.g6.4xlarge", "accelerated", "us-west-2c")
    assert s["deepHealthCheck"] is None and s["taints"] == []


def test_deep_health_check_in_progress_is_not_schedulable() -> None:
    labels = {**HP, "sagemaker.amazonaws.com/node-health-status": "Unschedulable",
              "sagemaker.amazonaws.com/deep-health-check-status": "InProgress"}
    s = node_summary(node(labels, taints=[HEALTH_TAINT]))
    assert s["ready"] and not s["schedulable"]
    assert s["deepHealthCheck"] == "InProgress"
    assert s["taints"] == ["sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule"]


def test_cordoned_not_ready_and_pending_replacement_nodes() -> None:
    assert not node_summary(node(HP, unschedulable=True))["schedulable"]
    assert not node_summary(node(HP, ready=False))["ready"]
    replace = {**HP, "sagemaker.amazonaws.com/node-health-status": "UnschedulablePendingReplacement"}
    assert not node_summary(node(replace))["schedulable"]
    # A user's own taint (from the instance group's KubernetesConfig) does not make the node unusable.
    own = node_summary(node(HP, taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}]))
    assert own["schedulable"] and own["taints"] == ["team=a:NoSchedule"]
    assert node_summary(node(HP, gpus=None))["gpuAllocatable"] == 0


def test_pod_gpu_request_counts_limits_and_init_containers() -> None:
    def c(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
        return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}}

    assert pod_request({"containers": [c(limits={"nvidia.com/gpu": "2"})]}, "nvidia.com/gpu") == 2
    assert pod_request({"containers": [c(requests={"nvidia.com/gpu": "1"}), c()]}, "nvidia.com/gpu") == 1
    both = {"containers": [c(limits={"nvidia.com/gpu": "1"}), c(limits={"nvidia.com/gpu": "1"})],
            "initContainers": [c(limits={"nvidia.com/gpu": "4"})]}
    assert pod_request(both, "nvidia.com/gpu") == 4
    assert pod_request({"containers": [c(requests={"cpu": "1"})]}, "nvidia.com/gpu") == 0


def test_dependency_health_reads_what_the_dependencies_stage_records() -> None:
    assert dependency_health(ClusterFacts()) == (False, [])
    recorded = {"dependencies": {
        "metrics-server": {"status": "ACTIVE", "message": "ready"},
        "mountpoint-s3-csi": {"status": "DEGRADED", "message": "add-on health issue"},
        "hyperpod-dependencies": {"status": "FAILED", "message": "helm install timed out"},
        "pod-identity": "BLOCKED",
    }}
    found, deps = dependency_health(ClusterFacts.model_validate(recorded))
    assert found
    health = {d.name: (d.healthy, d.status) for d in deps}
    assert health == {"metrics-server": (True, "ACTIVE"), "mountpoint-s3-csi": (True, "DEGRADED"),
                      "hyperpod-dependencies": (False, "FAILED"), "pod-identity": (False, "BLOCKED")}
    assert next(d for d in deps if d.name == "hyperpod-dependencies").message == "helm install timed out"
    older = [{"name": "a", "healthy": True}, {"name": "b", "ready": False}]
    listed = dependency_health(ClusterFacts(dependencies=older))
    assert [(d.name, d.healthy) for d in listed[1]] == [("a", True), ("b", False)]
