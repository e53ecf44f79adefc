"""EKS managed node groups (scale, delete) and cluster_get_instance_groups: every group, for decisions."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from pydantic import Field, model_validator

from instantstart.aws.errors import error_code, translate
from instantstart.catalog import operation
from instantstart.catalog.base import NoInput, WireModel
from instantstart.context import CallContext
from instantstart.errors import InvalidInput, NotFound
from instantstart.operations.kinds import KINDS, OperationKind, PermanentError, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.runner import StageContext
from instantstart.services.capacity.instance_groups import capacity_type, hyperpod_name, karpenter_groups, placement
from instantstart.services.cluster.hyperpod_stage import describe_hyperpod
from instantstart.services.core.registry import get_cluster, resolve_tag, submit_for_cluster
from instantstart.services.core.stages import blocking, wait_until
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


def subnet_zones(ec2: Any, ids: list[str]) -> dict[str, str]:
    """Subnet id → AZ (blocking)."""
    if not ids:
        return {}
    try:
        subnets = ec2.describe_subnets(SubnetIds=ids)["Subnets"]
    except Exception as exc:
        raise translate(exc, "describe subnets") from exc
    return {s["SubnetId"]: s["AvailabilityZone"] for s in subnets}


def node_groups(eks: Any, cluster: str) -> list[NodeGroupInfo]:
    """The EKS managed node groups of `cluster` (blocking)."""
    try:
        names = eks.list_nodegroups(clusterName=cluster).get("nodegroups", [])
        out = []
        for name in names:
            ng = eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
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
    except Exception as exc:
        if error_code(exc) in ("ResourceNotFoundException",):
            return []
        raise translate(exc, f"list node groups of {cluster}") from exc


@operation("cluster_get_instance_groups", method="GET", path="/capacity/instance-groups", example={})
async def cluster_get_instance_groups(ctx: CallContext, req: NoInput) -> InstanceGroupsResult:
    """The active cluster's capacity for decisions: every HyperPod instance group including those at count
    0 (type, current/target counts, capacity type, training plan, EFA mode, subnets and AZs, whether a
    dedicated subnet was made for it, deep health checks, whether Karpenter manages it) and every EKS
    managed node group (sizes, status)."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, None)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    sm = ctx.app.aws.client("sagemaker", row.region)
    name = hyperpod_name(row)
    cluster = await blocking(describe_hyperpod, sm, name) or {}
    recorded = (row.details or {}).get("instanceGroups") or {}
    managed = set(karpenter_groups(row))
    groups = cluster.get("InstanceGroups", [])
    subnets = sorted({s for g in groups for s in placement(g, cluster)})
    zones = await blocking(subnet_zones, ctx.app.aws.client("ec2", row.region), subnets)
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
    eks = ctx.app.aws.client("eks", row.region)
    return InstanceGroupsResult(
        cluster_tag=tag,
        hyperpod_cluster=name if cluster else None,
        hyperpod_status=cluster.get("ClusterStatus"),
        autoscaling=cluster.get("AutoScaling"),
        instance_groups=infos,
        node_groups=await blocking(node_groups, eks, row.eks_cluster_name),
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


def describe_nodegroup(eks: Any, cluster: str, name: str) -> dict[str, Any] | None:
    """DescribeNodegroup, or None when it does not exist (blocking)."""
    try:
        ng: dict[str, Any] = eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
        return ng
    except Exception as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return None
        raise translate(exc, f"describe node group {name}") from exc


async def _submit(ctx: CallContext, tag: str | None, name: str, field: str, kind: str, **extra: Any) -> OperationRef:
    replayed = await ctx.app.runner.replay(kind, ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    resolved = await to_thread.run_sync(resolve_tag, ctx.app.db, tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, resolved)
    eks = ctx.app.aws.client("eks", row.region)
    if await blocking(describe_nodegroup, eks, row.eks_cluster_name, name) is None:
        raise NotFound(
            f"Invalid input: {field}: {row.eks_cluster_name} has no managed node group {name}",
            hint="cluster_get_instance_groups lists the node groups.",
            details={"fields": [{"field": field, "message": "no such node group"}]},
        )
    return await submit_for_cluster(
        ctx,
        kind,
        resolved,
        {"clusterTag": resolved, "region": row.region, "eksCluster": row.eks_cluster_name, "name": name, **extra},
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
    sizes = {"minSize": req.min_size, "maxSize": req.max_size, "desiredSize": req.desired_size}
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
    p = stage.params
    eks = stage.app.aws.client("eks", p["region"])
    cluster, name, want = p["eksCluster"], p["name"], p["scaling"]
    ng = await blocking(describe_nodegroup, eks, cluster, name)
    if ng is None:
        raise PermanentError(f"Node group {name} does not exist.", code="NOT_FOUND")
    if {k: (ng.get("scalingConfig") or {}).get(k) for k in want} != want:
        await stage.progress(f"UpdateNodegroupConfig {name}: {want}")
        try:
            await blocking(eks.update_nodegroup_config, clusterName=cluster, nodegroupName=name, scalingConfig=want)
        except Exception as exc:
            raise translate(exc, f"scale node group {name}") from exc

    async def active() -> tuple[bool, str]:
        now = await blocking(describe_nodegroup, eks, cluster, name) or {}
        sizes = {k: (now.get("scalingConfig") or {}).get(k) for k in want}
        if now.get("status") in ("CREATE_FAILED", "DEGRADED"):
            issues = (now.get("health") or {}).get("issues") or []
            raise PermanentError(f"Node group {name} is {now.get('status')}: {issues}", code="PROVIDER_ERROR")
        return now.get("status") == "ACTIVE" and sizes == want, f"{name}: {now.get('status')} {sizes}"

    await wait_until(stage, active, limit_seconds=NODEGROUP_TIMEOUT, what=f"node group {name}")
    return {"nodeGroup": name, **want}


async def stage_nodegroup_delete(stage: StageContext) -> dict[str, Any]:
    """DeleteNodegroup (unless already deleting) → gone."""
    p = stage.params
    eks = stage.app.aws.client("eks", p["region"])
    cluster, name = p["eksCluster"], p["name"]
    ng = await blocking(describe_nodegroup, eks, cluster, name)
    if ng is not None and ng.get("status") != "DELETING":
        await stage.progress(f"DeleteNodegroup {name}")
        try:
            await blocking(eks.delete_nodegroup, clusterName=cluster, nodegroupName=name)
        except Exception as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise translate(exc, f"delete node group {name}") from exc

    async def gone() -> tuple[bool, str]:
        now = await blocking(describe_nodegroup, eks, cluster, name)
        return now is None, f"{name}: {(now or {}).get('status', 'deleted')}"

    await wait_until(stage, gone, limit_seconds=NODEGROUP_TIMEOUT, what=f"deletion of node group {name}")
    return {"nodeGroup": name, "deleted": True}


KINDS.register(OperationKind(name="nodegroup_scale", stages=(StageSpec("scale", stage_nodegroup_scale),)))
KINDS.register(OperationKind(name="nodegroup_delete", stages=(StageSpec("delete", stage_nodegroup_delete),)))
