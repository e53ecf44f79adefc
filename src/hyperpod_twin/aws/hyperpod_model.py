"""HyperPod cluster, instance group and node records, and their DescribeCluster/DescribeClusterNode shapes."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from typing import Any

# Node statuses that count towards an instance group's CurrentCount.
COUNTED = ("Running", "SystemUpdating")
# Statuses of a node that is on its way out.
LEAVING = ("ShuttingDown",)

DEFAULT_IMAGE_RELEASE = "2025.11.05"
LATEST_IMAGE_RELEASE = "2026.01.15"
IMAGE_RELEASES = (DEFAULT_IMAGE_RELEASE, LATEST_IMAGE_RELEASE)  # the releases UpdateClusterSoftware can install


@dataclass
class Node:
    """One HyperPod node (an EC2 instance HyperPod manages)."""

    instance_id: str
    logical_id: str
    group: str
    instance_type: str
    availability_zone: str
    availability_zone_id: str
    subnet_id: str
    private_ip: str
    launch_time: float
    status: str = "Pending"
    message: str = ""
    threads_per_core: int = 1
    capacity_type: str = "OnDemand"
    image_release: str = DEFAULT_IMAGE_RELEASE
    last_software_update: float | None = None
    version: int = 0  # bumped on every transition so stale scheduled callbacks do nothing
    health_status: str = "Schedulable"
    # Continuous provisioning: the node exists (NodeLogicalId) before EC2 has given it an instance; until
    # this twin time it is listed only with IncludeNodeLogicalIds, without InstanceId.
    instance_assigned_at: float = 0.0

    def has_instance(self, now: float) -> bool:
        """Whether EC2 has launched the node's instance (it has an InstanceId to show)."""
        return now >= self.instance_assigned_at

    def hostname(self, region: str) -> str:
        """EC2 private DNS name (`ip-a-b-c-d.<region>.compute.internal`)."""
        return "ip-" + self.private_ip.replace(".", "-") + f".{region}.compute.internal"


@dataclass
class InstanceGroup:
    """An instance group: the submitted specification plus its live state."""

    spec: dict[str, Any]
    target: int
    status: str = "Creating"
    min_count: int = 0
    previous_target: int = 0
    software_update_status: str | None = None
    image_release: str = DEFAULT_IMAGE_RELEASE
    desired_image_release: str = DEFAULT_IMAGE_RELEASE
    scaling: bool = False
    failure: str | None = None

    @property
    def name(self) -> str:
        """InstanceGroupName."""
        return str(self.spec["InstanceGroupName"])


@dataclass
class Cluster:
    """A HyperPod cluster record."""

    name: str
    arn: str
    region: str
    creation_time: float
    vpc_config: dict[str, Any]
    orchestrator: dict[str, Any]
    status: str = "Creating"
    failure_message: str | None = None
    node_recovery: str = "Automatic"
    provisioning_mode: str | None = None
    tiered_storage: dict[str, Any] | None = None
    autoscaling: dict[str, Any] | None = None
    cluster_role: str | None = None
    tags: list[dict[str, str]] = field(default_factory=list)
    groups: dict[str, InstanceGroup] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    version: int = 0
    setup_done: bool = True
    rollout: Any = None  # the rolling software update under way (hyperpod_rolling.Rollout)

    @property
    def eks_arn(self) -> str | None:
        """The orchestrating EKS cluster's ARN."""
        eks = self.orchestrator.get("Eks") or {}
        arn = eks.get("ClusterArn")
        return str(arn) if arn else None

    @property
    def continuous(self) -> bool:
        """NodeProvisioningMode == Continuous."""
        return self.provisioning_mode == "Continuous"

    def group_nodes(self, group: str) -> list[Node]:
        """Nodes of one group, oldest first."""
        return sorted(
            (n for n in self.nodes.values() if n.group == group), key=lambda n: (n.launch_time, n.instance_id)
        )

    def current_count(self, group: str) -> int:
        """Nodes of a group that are up (Running or SystemUpdating)."""
        return sum(1 for n in self.nodes.values() if n.group == group and n.status in COUNTED)

    def live_count(self, group: str) -> int:
        """Nodes of a group that exist and are not shutting down."""
        return sum(1 for n in self.nodes.values() if n.group == group and n.status not in LEAVING)

    def add_event(
        self,
        now: float,
        description: str,
        *,
        level: str = "Info",
        resource_type: str = "Cluster",
        group: str | None = None,
        instance_id: str | None = None,
        operation_id: str | None = None,
    ) -> None:
        """Record an entry for ListClusterEvents."""
        event: dict[str, Any] = {
            "EventId": str(uuid.uuid4()),
            "ClusterArn": self.arn,
            "ClusterName": self.name,
            "ResourceType": resource_type,
            "EventTime": now,
            "Description": description,
            "EventLevel": level,
        }
        if group:
            event["InstanceGroupName"] = group
        if instance_id:
            event["InstanceId"] = instance_id
        if operation_id:
            event["OperationId"] = operation_id
        self.events.append(event)


def _kubernetes_config(kube: dict[str, Any]) -> dict[str, Any]:
    """Current/Desired labels and taints; HyperPod applies the desired ones at once in the twin."""
    labels, taints = dict(kube.get("Labels") or {}), list(kube.get("Taints") or [])
    return {
        "CurrentLabels": labels,
        "DesiredLabels": dict(labels),
        "CurrentTaints": taints,
        "DesiredTaints": list(taints),
    }


def node_details(cluster: Cluster, node: Node) -> dict[str, Any]:
    """DescribeClusterNode.NodeDetails for `node` (also the payload of `hyperpod.node.changed`)."""
    group = cluster.groups.get(node.group)
    spec = group.spec if group else {}
    status: dict[str, Any] = {"Status": node.status}
    if node.message:
        status["Message"] = node.message
    out: dict[str, Any] = {
        "InstanceGroupName": node.group,
        "InstanceId": node.instance_id,
        "NodeLogicalId": node.logical_id,
        "InstanceStatus": status,
        "InstanceType": node.instance_type,
        "LaunchTime": node.launch_time,
        "ThreadsPerCore": node.threads_per_core,
        "PrivatePrimaryIp": node.private_ip,
        "PrivateDnsHostname": node.hostname(cluster.region),
        "Placement": {
            "AvailabilityZone": node.availability_zone,
            "AvailabilityZoneId": node.availability_zone_id,
        },
        "CurrentImageReleaseVersion": node.image_release,
        "DesiredImageReleaseVersion": group.desired_image_release if group else node.image_release,
        "ImageVersionStatus": "UpToDate" if node.image_release == LATEST_IMAGE_RELEASE else "UpdateAvailable",
        "CapacityType": node.capacity_type,
        "SubnetId": node.subnet_id,
    }
    if node.last_software_update is not None:
        out["LastSoftwareUpdateTime"] = node.last_software_update
    for key in ("LifeCycleConfig", "OverrideVpcConfig", "InstanceStorageConfigs", "NetworkInterface"):
        if key in spec:
            out[key] = copy.deepcopy(spec[key])
    out["KubernetesConfig"] = _kubernetes_config(spec.get("KubernetesConfig") or {})
    return out


_INSTANCE_KEYS = ("InstanceId", "PrivatePrimaryIp", "PrivateDnsHostname", "SubnetId")


def without_instance(entry: dict[str, Any]) -> dict[str, Any]:
    """A node summary/details entry as AWS shows a node still provisioning: no instance, so no InstanceId,
    IP or DNS name (the NodeLogicalId identifies it)."""
    return {k: v for k, v in entry.items() if k not in _INSTANCE_KEYS}


def node_summary(cluster: Cluster, node: Node) -> dict[str, Any]:
    """ListClusterNodes.ClusterNodeSummaries entry."""
    status: dict[str, Any] = {"Status": node.status}
    if node.message:
        status["Message"] = node.message
    out: dict[str, Any] = {
        "InstanceGroupName": node.group,
        "InstanceId": node.instance_id,
        "NodeLogicalId": node.logical_id,
        "InstanceType": node.instance_type,
        "LaunchTime": node.launch_time,
        "InstanceStatus": status,
        "PrivateDnsHostname": node.hostname(cluster.region),
        "CurrentImageReleaseVersion": node.image_release,
        "ImageVersionStatus": "UpToDate" if node.image_release == LATEST_IMAGE_RELEASE else "UpdateAvailable",
    }
    if node.last_software_update is not None:
        out["LastSoftwareUpdateTime"] = node.last_software_update
    return out


def group_details(cluster: Cluster, group: InstanceGroup) -> dict[str, Any]:
    """DescribeCluster.InstanceGroups entry."""
    spec = group.spec
    out: dict[str, Any] = {
        "InstanceGroupName": group.name,
        "CurrentCount": cluster.current_count(group.name),
        "TargetCount": group.target,
        "MinCount": group.min_count,
        "Status": group.status,
        "ThreadsPerCore": spec.get("ThreadsPerCore", 1),
        "ExecutionRole": spec.get("ExecutionRole"),
        "CurrentImageReleaseVersion": group.image_release,
        "DesiredImageReleaseVersion": group.desired_image_release,
        "ImageVersionStatus": "UpToDate" if group.image_release == LATEST_IMAGE_RELEASE else "UpdateAvailable",
    }
    if "InstanceType" in spec:
        out["InstanceType"] = spec["InstanceType"]
        out["InstanceTypeDetails"] = [
            {
                "InstanceType": spec["InstanceType"],
                "CurrentCount": out["CurrentCount"],
                "ThreadsPerCore": spec.get("ThreadsPerCore", 1),
            }
        ]
    if "InstanceRequirements" in spec:
        types = list(spec["InstanceRequirements"].get("InstanceTypes", []))
        current = sorted({n.instance_type for n in cluster.nodes.values() if n.group == group.name})
        out["InstanceRequirements"] = {"DesiredInstanceTypes": types, "CurrentInstanceTypes": current}
    for key in (
        "LifeCycleConfig",
        "InstanceStorageConfigs",
        "OnStartDeepHealthChecks",
        "TrainingPlanArn",
        "OverrideVpcConfig",
        "ScheduledUpdateConfig",
        "CapacityRequirements",
        "NetworkInterface",
        "ImageId",
        "AutoPatchConfig",
    ):
        if key in spec:
            out[key] = copy.deepcopy(spec[key])
    if "ImageId" in spec:
        out["CurrentImageId"] = out["DesiredImageId"] = spec["ImageId"]
        del out["ImageId"]
    if group.scaling:
        out["ActiveOperations"] = {"Scaling": 1}
    if group.software_update_status:
        out["SoftwareUpdateStatus"] = group.software_update_status
    kube = spec.get("KubernetesConfig")
    if kube is not None:
        out["KubernetesConfig"] = _kubernetes_config(kube)
    return out


def cluster_details(cluster: Cluster) -> dict[str, Any]:
    """DescribeCluster response."""
    out: dict[str, Any] = {
        "ClusterArn": cluster.arn,
        "ClusterName": cluster.name,
        "ClusterStatus": cluster.status,
        "CreationTime": cluster.creation_time,
        "InstanceGroups": [group_details(cluster, g) for g in cluster.groups.values()],
        "VpcConfig": copy.deepcopy(cluster.vpc_config),
        "Orchestrator": copy.deepcopy(cluster.orchestrator),
        "NodeRecovery": cluster.node_recovery,
    }
    if cluster.failure_message:
        out["FailureMessage"] = cluster.failure_message
    if cluster.provisioning_mode:
        out["NodeProvisioningMode"] = cluster.provisioning_mode
    if cluster.tiered_storage is not None:
        out["TieredStorageConfig"] = copy.deepcopy(cluster.tiered_storage)
    if cluster.autoscaling is not None:
        out["AutoScaling"] = copy.deepcopy(cluster.autoscaling)
    if cluster.cluster_role:
        out["ClusterRole"] = cluster.cluster_role
    return out


def spec_for_event(group: InstanceGroup | None) -> dict[str, Any] | None:
    """The instance group specification as published on the bus (labels, taints, type …)."""
    return copy.deepcopy(group.spec) if group else None
