"""EKS managed node groups (scale, delete) and cluster_get_instance_groups: every group, for decisions."""

from __future__ import annotations

import contextlib
from typing import Any

from anyio import to_thread
from pydantic import Field, model_validator

from instantstart.aws import ec2_network, eks
from instantstart.aws.clients import AwsClients
from instantstart.aws.hyperpod import HyperPod
from instantstart.catalog import operation
from instantstart.catalog.base import NoInput, WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import InvalidInput, NotFound, ProviderError
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.facts import facts_of
from instantstart.services.base.hyperpod_groups import capacity_type, karpenter_groups, placement
from instantstart.services.base.registry import (
    ClusterParams,
    get_cluster,
    hyperpod_cluster_name,
    resolve_tag,
    submit_for_cluster,
)
from instantstart.validation import ClusterTag

NODEGROUP_TIMEOUT = 3600
NODEGROUP_NAME = r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,62}$"


class InstanceGroupInfo(WireModel):
    """One HyperPod instance group as a decision needs it."""

    name: str
    instance_type: str | None
    status: str | None
    current_count: int
    target_count: int
    capacity_type: str = Field(description="OnDemand, Spot or TrainingPlan (fixed for the life of the group).")
    training_plan_arn: str | None
    network_interface: str = Field(description="efa-only, efa, or default (fixed for the life of the group).")
    subnet_ids: list[str]
    availability_zones: list[str]
    dedicated_subnet: bool
    deep_health_checks: list[str]
    karpenter_managed: bool
    image_version_status: str | None


class NodeGroupInfo(WireModel):
    """One EKS managed node group (CPU system capacity)."""

    name: str
    status: str | None
    instance_types: list[str]
    min_size: int | None
    max_size: int | None
    desired_size: int | None
    subnet_ids: list[str]


class InstanceGroupsResult(WireModel):
    """Every HyperPod instance group (including count 0) and EKS managed node group of the cluster."""

    cluster_tag: str
    hyperpod_cluster: str | None
    hyperpod_status: str | None
    autoscaling: dict[str, Any] | None
    instance_groups: list[InstanceGroupInfo]
    node_groups: list[NodeGroupInfo]


def subnet_zones(aws: AwsClients, region: str, ids: list[str]) -> dict[str, str]:
    """Subnet id → AZ (blocking)."""
    if not ids:
        return {}
    return {s["SubnetId"]: s["AvailabilityZone"] for s in ec2_network.describe_subnets(aws, region, ids)}


def node_groups(aws: AwsClients, region: str, cluster: str) -> list[NodeGroupInfo]:
    """The EKS managed node groups of `cluster` ([] when the EKS cluster is gone; blocking)."""
    try:
        names = eks.list_nodegroups(aws, region, cluster)
    except NotFound:
        return []
    out = []
    for name in names:
        ng = eks.describe_nodegroup(aws, region, cluster, name)
        if ng is None:
            continue
        scaling = ng.get("scalingConfig") or {}
        out.append(
            NodeGroupInfo(
                name=name,
                status=ng.get("status"),
                instance_types=list(ng.get("instanceTypes") or []),
                min_size=scaling.get("minSize"),
                max_size=scaling.get("maxSize"),
                desired_size=scaling.get("desiredSize"),
                subnet_ids=list(ng.get("subnets") or []),
            )
        )
    return out


@operation("cluster_get_instance_groups", method="GET", path="/capacity/instance-groups", example={})
async def cluster_get_instance_groups(ctx: CallContext, req: NoInput) -> InstanceGroupsResult:
    """The active cluster's capacity for decisions: every HyperPod instance group including those at count
    0 (type, current/target counts, capacity type, training plan, EFA mode, subnets and AZs, whether a
    dedicated subnet was made for it, deep health checks, whether Karpenter manages it) and every EKS
    managed node group (sizes, status)."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, None)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    name = hyperpod_cluster_name(row)
    cluster = await blocking(HyperPod(ctx.app.aws, row.region).describe_cluster, name) or {}
    recorded = facts_of(row).group_records()
    managed = set(karpenter_groups(row))
    groups = cluster.get("InstanceGroups", [])
    subnets = sorted({s for g in groups for s in placement(g, cluster)})
    zones = await blocking(subnet_zones, ctx.app.aws, row.region, subnets)
    infos = []
    for g in groups:
        where = placement(g, cluster)
        infos.append(
            InstanceGroupInfo(
                name=g["InstanceGroupName"],
                instance_type=g.get("InstanceType"),
                status=g.get("Status"),
                current_count=int(g.get("CurrentCount", 0)),
                target_count=int(g.get("TargetCount", 0)),
                capacity_type=capacity_type(g),
                training_plan_arn=g.get("TrainingPlanArn"),
                network_interface=(g.get("NetworkInterface") or {}).get("InterfaceType", "default"),
                subnet_ids=where,
                availability_zones=sorted({zones[s] for s in where if s in zones}),
                dedicated_subnet=bool((recorded.get(g["InstanceGroupName"]) or {}).get("dedicatedSubnet")),
                deep_health_checks=list(g.get("OnStartDeepHealthChecks") or []),
                karpenter_managed=g["InstanceGroupName"] in managed,
                image_version_status=g.get("ImageVersionStatus"),
            )
        )
    return InstanceGroupsResult(
        cluster_tag=tag,
        hyperpod_cluster=name if cluster else None,
        hyperpod_status=cluster.get("ClusterStatus"),
        autoscaling=cluster.get("AutoScaling"),
        instance_groups=infos,
        node_groups=await blocking(node_groups, ctx.app.aws, row.region, row.eks_cluster_name),
    )


class NodeGroupScaleRequest(WireModel):
    """Sizes of an EKS managed node group (minSize ≤ desiredSize ≤ maxSize, maxSize ≥ 1)."""

    cluster_tag: ClusterTag | None = None
    name: str = Field(pattern=NODEGROUP_NAME, description="The EKS managed node group.")
    min_size: int = Field(ge=0, le=1000)
    max_size: int = Field(ge=1, le=1000)
    desired_size: int = Field(ge=0, le=1000)

    @model_validator(mode="after")
    def _ordered(self) -> NodeGroupScaleRequest:
        if not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError("desiredSize must lie between minSize and maxSize")
        return self


class NodeGroupDeleteRequest(WireModel):
    """The EKS managed node group to delete."""

    cluster_tag: ClusterTag | None = None
    node_group_name: str = Field(pattern=NODEGROUP_NAME)


class NodeGroupParams(ClusterParams):
    """Params of nodegroup_delete: the cluster, its EKS cluster and the managed node group."""

    eks_cluster: str
    name: str


class NodeGroupSizes(ParamsModel):
    """An EKS scalingConfig (stored camelCase, as EKS names it)."""

    min_size: int
    max_size: int
    desired_size: int


class NodeGroupScaleParams(NodeGroupParams):
    """Params of nodegroup_scale: the node group and the sizes it should have."""

    scaling: NodeGroupSizes


async def _submit(
    ctx: CallContext, tag: str | None, name: str, field: str, kind: str, scaling: NodeGroupSizes | None = None
) -> OperationRef:
    replayed = await ctx.app.runner.replay(kind, ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    resolved = await to_thread.run_sync(resolve_tag, ctx.app.db, tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, resolved)
    if await blocking(eks.describe_nodegroup, ctx.app.aws, row.region, row.eks_cluster_name, name) is None:
        raise NotFound(
            f"Invalid input: {field}: {row.eks_cluster_name} has no managed node group {name}",
            hint="cluster_get_instance_groups lists the node groups.",
            details={"fields": [{"field": field, "message": "no such node group"}]},
        )
    where = {"cluster_tag": resolved, "region": row.region, "eks_cluster": row.eks_cluster_name, "name": name}
    params = NodeGroupParams(**where) if scaling is None else NodeGroupScaleParams(**where, scaling=scaling)
    return await submit_for_cluster(
        ctx,
        kind,
        resolved,
        params,
        status_tool="operation_get",
        poll_after_seconds=20,
    )


@operation(
    "cluster_nodegroup_scale",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/capacity/nodegroups/scale",
    completion="operation_get",
    example={"name": "system", "minSize": 1, "maxSize": 3, "desiredSize": 2},
)
async def cluster_nodegroup_scale(ctx: CallContext, req: NodeGroupScaleRequest) -> OperationRef:
    """Resize an EKS managed node group (CPU system capacity): minSize ≤ desiredSize ≤ maxSize. Finished
    when the update is Successful and the node group ACTIVE at the new sizes."""
    sizes = NodeGroupSizes(min_size=req.min_size, max_size=req.max_size, desired_size=req.desired_size)
    return await _submit(ctx, req.cluster_tag, req.name, "name", "nodegroup_scale", scaling=sizes)


@operation(
    "cluster_nodegroup_delete",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/capacity/nodegroups/delete",
    completion="operation_get",
    example={"nodeGroupName": "system"},
)
async def cluster_nodegroup_delete(ctx: CallContext, req: NodeGroupDeleteRequest) -> OperationRef:
    """Delete an EKS managed node group (its nodes drain and terminate; system pods need somewhere else
    to run). Finished when the node group is gone."""
    if (req.node_group_name or "").startswith("hyperpod"):
        raise InvalidInput(
            f"Invalid input: nodeGroupName: {req.node_group_name} looks like HyperPod capacity",
            hint="Delete HyperPod instance groups with hyperpod_delete_instance_group.",
            details={"fields": [{"field": "nodeGroupName", "message": "not an EKS managed node group"}]},
        )
    return await _submit(ctx, req.cluster_tag, req.node_group_name, "nodeGroupName", "nodegroup_delete")


async def stage_nodegroup_scale(stage: StageContext) -> dict[str, Any]:
    """UpdateNodegroupConfig (only when the sizes differ) → ACTIVE at the new sizes."""
    p = stage.params_as(NodeGroupScaleParams)
    aws, region, cluster, name = stage.app.aws, p.region, p.eks_cluster, p.name
    want: dict[str, int] = p.scaling.model_dump(by_alias=True)
    ng = await blocking(eks.describe_nodegroup, aws, region, cluster, name)
    if ng is None:
        raise NotFound(f"Node group {name} does not exist.")
    if {k: (ng.get("scalingConfig") or {}).get(k) for k in want} != want:
        await stage.progress(f"UpdateNodegroupConfig {name}: {want}")
        await blocking(eks.scale_nodegroup, aws, region, cluster, name, want)

    async def active() -> tuple[bool, str]:
        now = await blocking(eks.describe_nodegroup, aws, region, cluster, name) or {}
        sizes = {k: (now.get("scalingConfig") or {}).get(k) for k in want}
        if now.get("status") in ("CREATE_FAILED", "DEGRADED"):
            issues = (now.get("health") or {}).get("issues") or []
            raise ProviderError(f"Node group {name} is {now.get('status')}: {issues}", retryable=False)
        return now.get("status") == "ACTIVE" and sizes == want, f"{name}: {now.get('status')} {sizes}"

    await wait_until(stage, active, limit_seconds=NODEGROUP_TIMEOUT, what=f"node group {name}")
    return {"nodeGroup": name, **want}


async def stage_nodegroup_delete(stage: StageContext) -> dict[str, Any]:
    """DeleteNodegroup (unless already deleting) → gone."""
    p = stage.params_as(NodeGroupParams)
    aws, region, cluster, name = stage.app.aws, p.region, p.eks_cluster, p.name
    ng = await blocking(eks.describe_nodegroup, aws, region, cluster, name)
    if ng is not None and ng.get("status") != "DELETING":
        await stage.progress(f"DeleteNodegroup {name}")
        with contextlib.suppress(NotFound):  # deleted meanwhile: what the stage waits for
            await blocking(eks.delete_nodegroup, aws, region, cluster, name)

    async def gone() -> tuple[bool, str]:
        now = await blocking(eks.describe_nodegroup, aws, region, cluster, name)
        return now is None, f"{name}: {(now or {}).get('status', 'deleted')}"

    await wait_until(stage, gone, limit_seconds=NODEGROUP_TIMEOUT, what=f"deletion of node group {name}")
    return {"nodeGroup": name, "deleted": True}


KINDS.register(
    OperationKind(
        name="nodegroup_scale", params=NodeGroupScaleParams, stages=(StageSpec("scale", stage_nodegroup_scale),)
    )
)
KINDS.register(
    OperationKind(
        name="nodegroup_delete", params=NodeGroupParams, stages=(StageSpec("delete", stage_nodegroup_delete),)
    )
)
