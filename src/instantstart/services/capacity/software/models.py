"""The request of a software update and its plan, as the faces show them; the API's DeploymentConfig shape, with
camelCase names, and the batch arithmetic the plan and the progress share."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.operations.params import ParamsModel
from instantstart.validation import ClusterTag

CLUSTER_ARN = r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:\d{12}:cluster/[a-z0-9]+$"
GROUP_NAME = r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$"


class CapacitySize(WireModel):
    """CapacitySizeConfig: how many nodes at a time, as a count or a percentage of the group."""

    type: Literal["INSTANCE_COUNT", "CAPACITY_PERCENTAGE"] = Field(
        description="INSTANCE_COUNT (value nodes) or CAPACITY_PERCENTAGE (value % of the group's nodes)."
    )
    value: int = Field(ge=1, description="Nodes, or a percentage (1-100).")


class RollingPolicy(WireModel):
    """RollingUpdatePolicy: the batch size of the update and of a roll back (all at once when absent)."""

    maximum_batch_size: CapacitySize
    rollback_maximum_batch_size: CapacitySize | None = None


class AlarmRef(WireModel):
    """A CloudWatch alarm HyperPod watches during and between batches; ALARM rolls the group back."""

    alarm_name: str = Field(min_length=1, max_length=255, pattern=r"\S")


class DeploymentConfig(WireModel):
    """UpdateClusterSoftware's DeploymentConfig: batches, the wait between them, the alarms that roll back."""

    rolling_update_policy: RollingPolicy | None = None
    wait_interval_in_seconds: int | None = Field(default=None, ge=0, le=3600)
    auto_rollback_configuration: list[AlarmRef] | None = Field(default=None, min_length=1, max_length=10)


class GroupTarget(WireModel):
    """One instance group to update, optionally to a given HyperPod release (default: the latest)."""

    instance_group_name: str = Field(min_length=1, max_length=63, pattern=GROUP_NAME)
    image_release_version: str | None = Field(default=None, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")


class SoftwareRequest(WireModel):
    """Which cluster (clusterArn, clusterTag, or the active one), which groups (all when absent), and how to roll
    the update through them (deploymentConfig; all nodes of a group at once when absent)."""

    cluster_arn: str | None = Field(default=None, pattern=CLUSTER_ARN)
    cluster_tag: ClusterTag | None = None
    instance_groups: list[GroupTarget] | None = Field(default=None, min_length=1, max_length=100)
    deployment_config: DeploymentConfig | None = None


class SoftwareParams(ParamsModel):
    """Params of hyperpod_software_update: the cluster, and the API's InstanceGroups and DeploymentConfig as
    the request gave them (absent: every group, all at once)."""

    cluster_tag: str
    region: str
    instance_groups: list[dict[str, Any]] | None = None
    deployment_config: dict[str, Any] | None = None


def api_request(req: SoftwareRequest) -> dict[str, Any]:
    """The InstanceGroups and DeploymentConfig of UpdateClusterSoftware (PascalCase), only what was given."""
    out: dict[str, Any] = {}
    if req.instance_groups:
        out["InstanceGroups"] = [_pascal(g.model_dump(exclude_none=True)) for g in req.instance_groups]
    if req.deployment_config is not None:
        out["DeploymentConfig"] = _pascal(req.deployment_config.model_dump(exclude_none=True))
    return out


def _pascal(value: Any) -> Any:
    if isinstance(value, dict):
        return {_key(k): (v if k == "type" else _pascal(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_pascal(v) for v in value]
    return value


def _key(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def batch_size(config: dict[str, Any] | None, total: int) -> int:
    """Nodes per batch for a CapacitySizeConfig over `total` nodes: INSTANCE_COUNT as given, CAPACITY_PERCENTAGE
    rounded down (never more nodes unavailable than the percentage), at least 1; all at once without one."""
    if not config or total <= 0:
        return max(total, 1)
    value = int(config["Value"])
    if config["Type"] == "CAPACITY_PERCENTAGE":
        value = math.floor(total * value / 100)
    return max(1, min(value, total))


def batches(nodes: list[str], config: dict[str, Any] | None) -> list[list[str]]:
    """The nodes (in update order) cut into batches of batch_size."""
    size = batch_size(config, len(nodes))
    return [nodes[i : i + size] for i in range(0, len(nodes), size)]


class BatchPlan(WireModel):
    """One batch: its nodes and what runs on them that the update interrupts (pods are evicted)."""

    number: int
    nodes: list[str]
    jobs: list[str] = Field(description="Training jobs with a running pod on the batch: Kind namespace/name.")
    model_servers: list[str] = Field(description="Model servers with a pod on the batch: namespace/name.")
    other_pods: int = Field(description="Other pods evicted (DaemonSet pods stay).")


class GroupPlan(WireModel):
    """One instance group's update: releases, batch sizes, batches."""

    instance_group: str
    nodes: int
    current_release: str | None
    target_release: str = Field(description="The requested release, or 'latest' (the newest HyperPod release).")
    image_version_status: str | None
    batch_size: int
    rollback_batch_size: int
    batches: list[BatchPlan]


class UpdatePlan(WireModel):
    """What hyperpod_update_software with the same arguments would do, batch by batch (changes nothing)."""

    cluster_tag: str
    hyperpod_cluster: str
    wait_interval_seconds: int
    alarms: list[str]
    groups: list[GroupPlan]
    interrupted_jobs: list[str]
    interrupted_model_servers: list[str]
    notes: list[str]
