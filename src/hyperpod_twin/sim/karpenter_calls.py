"""What Karpenter asks HyperPod for: UpdateCluster group specs, made as the cluster's autoscaling role."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hyperpod_twin.role_usage import role_documents, use
from hyperpod_twin.sim.kobj import Obj

# Fields of DescribeCluster's group details that UpdateCluster takes back unchanged.
_SPEC_FIELDS = (
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
    "CapacityRequirements",
    "NetworkInterface",
    "ImageId",
)


def group_spec(details: Obj, count: int) -> Obj:
    """An UpdateCluster InstanceGroups entry for a group as DescribeCluster shows it, with a new count."""
    spec = {k: copy.deepcopy(details[k]) for k in _SPEC_FIELDS if k in details}
    spec["InstanceCount"] = count
    kube = details.get("KubernetesConfig") or {}
    labels = kube.get("DesiredLabels", kube.get("CurrentLabels"))
    taints = kube.get("DesiredTaints", kube.get("CurrentTaints"))
    if labels is not None or taints is not None:
        spec["KubernetesConfig"] = {"Labels": labels or {}, "Taints": taints or []}
    return spec


def update_group(client: Any, *, cluster_name: str, spec: Obj) -> Any:
    """UpdateCluster with one instance group's new spec."""
    return client.update_cluster(ClusterName=cluster_name, InstanceGroups=[spec])


# HyperPod adds and removes the nodes Karpenter asks for as the cluster's ClusterRole (the autoscaling role);
# the twin scales a group up through UpdateCluster's TargetCount where HyperPod calls BatchAddClusterNodes.
SCALING_ACTIONS = {
    "update_cluster": "sagemaker:BatchAddClusterNodes",
    "batch_delete_cluster_nodes": "sagemaker:BatchDeleteClusterNodes",
}


def as_cluster_role(factory: Callable[[str], Any], role: str, cluster_arn: str, action: str) -> None:
    """Raise PermissionError unless the cluster's ClusterRole may perform `action` on the cluster (recorded as
    the role's use)."""
    decision = use(role_documents(factory("iam"), role), role, action, cluster_arn)
    if decision != "Allow":
        raise PermissionError(f"AccessDenied: {role} is not authorized to perform {action} on {cluster_arn} "
                              f"({decision})")
