"""SageMaker HyperPod request bodies: instance groups and CreateCluster, built from validated decisions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")


@dataclass(frozen=True)
class GroupDecision:
    """Everything decided about one instance group at creation (capacity type and EFA mode are final)."""

    name: str
    instance_type: str
    count: int
    execution_role: str
    lifecycle_uri: str
    ebs_gb: int = 500
    threads_per_core: int = 1
    training_plan_arn: str | None = None
    capacity_type: str = "OnDemand"  # OnDemand | Spot (a training plan is reserved capacity)
    efa_only: bool = False
    deep_health_checks: tuple[str, ...] = ()
    subnet_id: str | None = None  # per-group placement (OverrideVpcConfig)
    security_group_id: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


def instance_group(d: GroupDecision) -> dict[str, Any]:
    """A ClusterInstanceGroupSpecification for CreateCluster / UpdateCluster."""
    spec: dict[str, Any] = {
        "InstanceGroupName": d.name,
        "InstanceType": d.instance_type,
        "InstanceCount": d.count,
        "ExecutionRole": d.execution_role,
        "ThreadsPerCore": d.threads_per_core,
        "LifeCycleConfig": {"SourceS3Uri": d.lifecycle_uri, "OnCreate": "on_create.sh"},
        "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": d.ebs_gb}}],
    }
    if d.training_plan_arn:
        spec["TrainingPlanArn"] = d.training_plan_arn
    elif d.capacity_type == "Spot":
        spec["CapacityRequirements"] = {"Spot": {}}
    else:
        spec["CapacityRequirements"] = {"OnDemand": {}}
    if d.efa_only:
        spec["NetworkInterface"] = {"InterfaceType": "efa-only"}
    if d.deep_health_checks:
        spec["OnStartDeepHealthChecks"] = list(d.deep_health_checks)
    if d.subnet_id and d.security_group_id:
        spec["OverrideVpcConfig"] = {"SecurityGroupIds": [d.security_group_id], "Subnets": [d.subnet_id]}
    if d.labels:
        spec["KubernetesConfig"] = {"Labels": dict(d.labels)}
    return spec


def create_cluster_request(
    *,
    name: str,
    eks_cluster_arn: str,
    security_group_id: str,
    subnet_id: str,
    groups: list[dict[str, Any]],
    tags: list[dict[str, str]],
) -> dict[str, Any]:
    """CreateCluster on EKS with automatic node recovery and continuous provisioning."""
    return {
        "ClusterName": name,
        "Orchestrator": {"Eks": {"ClusterArn": eks_cluster_arn}},
        "VpcConfig": {"SecurityGroupIds": [security_group_id], "Subnets": [subnet_id]},
        "InstanceGroups": groups,
        "NodeRecovery": "Automatic",
        "NodeProvisioningMode": "Continuous",
        "Tags": tags,
    }


LIFECYCLE_SCRIPT = """#!/bin/bash
# InstantStart lifecycle script for HyperPod EKS nodes (runs as root while the node is provisioned).
# HyperPod joins the node to the cluster itself; this script only prepares local storage.
set -euo pipefail
LOG=/var/log/provision/provisioning.log
mkdir -p "$(dirname "$LOG")"
exec >>"$LOG" 2>&1
echo "instantstart on_create: start $(date -Is)"
# Put container images and kubelet state on the large secondary volume when it is mounted.
for mount in /opt/sagemaker /opt/dlami/nvme; do
  for _ in $(seq 1 60); do mountpoint -q "$mount" && break; sleep 2; done
  if mountpoint -q "$mount"; then
    mkdir -p "$mount/containerd" "$mount/kubelet"
    echo "instantstart on_create: using $mount for containerd and kubelet data"
    break
  fi
done
echo "instantstart on_create: done $(date -Is)"
"""
