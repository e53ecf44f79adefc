"""The one field allowlist through which an existing instance group is resubmitted to UpdateCluster."""

from __future__ import annotations

import copy
from typing import Any

# Fields of a ClusterInstanceGroupSpecification that a resubmission carries over from DescribeCluster.
# Anything else DescribeCluster reports (counts, statuses, image versions …) is read-only state.
ALLOWLIST = (
    "InstanceCount",
    "InstanceGroupName",
    "InstanceType",
    "LifeCycleConfig",
    "ExecutionRole",
    "ThreadsPerCore",
    "InstanceStorageConfigs",
    "OnStartDeepHealthChecks",
    "TrainingPlanArn",
    "OverrideVpcConfig",
    "ScheduledUpdateConfig",
    "ImageId",
    "CapacityRequirements",
    "NetworkInterface",
)
# Described shapes that differ from the request shape, kept so a resubmission never drops them:
# KubernetesConfig (Desired/Current labels and taints) and InstanceRequirements (flexible groups).
EXTRA = ("KubernetesConfig", "InstanceRequirements")


def resubmit_spec(described: dict[str, Any], *, count: int | None = None) -> dict[str, Any]:
    """A ClusterInstanceGroupSpecification for a group as DescribeCluster shows it: every allowlisted
    field copied, TargetCount as InstanceCount (or `count` when scaling), DesiredImageId as ImageId,
    Kubernetes labels/taints and flexible instance types in their request shape."""
    spec: dict[str, Any] = {}
    for key in ALLOWLIST:
        if key in described and described[key] is not None:
            spec[key] = copy.deepcopy(described[key])
    if count is not None:
        spec["InstanceCount"] = int(count)
    elif "TargetCount" in described:
        spec["InstanceCount"] = int(described["TargetCount"])
    else:
        spec.setdefault("InstanceCount", int(described.get("CurrentCount", 0) or 0))
    if "ImageId" not in spec and described.get("DesiredImageId"):
        spec["ImageId"] = described["DesiredImageId"]
    kube = described.get("KubernetesConfig")
    if isinstance(kube, dict):
        labels = kube.get("DesiredLabels", kube.get("CurrentLabels", kube.get("Labels")))
        taints = kube.get("DesiredTaints", kube.get("CurrentTaints", kube.get("Taints")))
        if labels is not None or taints is not None:
            spec["KubernetesConfig"] = {"Labels": copy.deepcopy(labels or {}), "Taints": copy.deepcopy(taints or [])}
    flexible = described.get("InstanceRequirements")
    if isinstance(flexible, dict) and "InstanceType" not in spec:
        types = flexible.get("DesiredInstanceTypes", flexible.get("InstanceTypes"))
        if types:
            spec["InstanceRequirements"] = {"InstanceTypes": list(types)}
    return spec
