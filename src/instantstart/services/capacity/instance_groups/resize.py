"""hyperpod_scale_instance_group and hyperpod_delete_instance_group: one group, through the allowlist."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws.hyperpod import HyperPod
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import NotFound, PreconditionFailed
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.facts import facts_of
from instantstart.services.base.hyperpod_groups import (
    GROUP_NAME,
    GROUP_TIMEOUT,
    capacity_type,
    described,
    find_group,
    karpenter_groups,
    seen_events,
    wait_group,
)
from instantstart.services.base.lifecycle import approved_scripts, verify_groups
from instantstart.services.base.registry import (
    ClusterParams,
    get_cluster,
    hyperpod_cluster_name,
    record_facts,
    resolve_tag,
    submit_for_cluster,
)
from instantstart.services.capacity.group_allowlist import resubmit_spec
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag


class ScaleGroupRequest(WireModel):
    """A group and the count it should have."""

    cluster_tag: ClusterTag | None = None
    name: str = Field(pattern=GROUP_NAME, max_length=63, description="The instance group.")
    target_count: int = Field(ge=0, le=6758)


class DeleteGroupRequest(WireModel):
    """The group to delete."""

    cluster_tag: ClusterTag | None = None
    instance_group_name: str = Field(pattern=GROUP_NAME, max_length=63)


class GroupParams(ClusterParams):
    """Params of instance_group_delete: the cluster and the group's name."""

    name: str


class GroupScaleParams(GroupParams):
    """Params of instance_group_scale: the cluster, the group and the count it should have."""

    target_count: int


async def existing_group(ctx: CallContext, row: ClusterRow, name: str, field: str) -> dict[str, Any]:
    """The described group, or NotFound naming the groups there are."""
    cluster = await described(ctx.app, row)
    found = find_group(cluster, name)
    if found is None:
        names = ", ".join(g["InstanceGroupName"] for g in cluster.get("InstanceGroups", [])) or "none"
        raise NotFound(
            f"Invalid input: {field}: instance group {name} does not exist in {hyperpod_cluster_name(row)} "
            f"(groups: {names})",
            details={"fields": [{"field": field, "message": "no such instance group"}]},
        )
    return found


@operation(
    "hyperpod_scale_instance_group",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/capacity/instance-groups/scale",
    completion="operation_get",
    example={"name": "gpu-b", "targetCount": 2},
)
async def hyperpod_scale_instance_group(ctx: CallContext, req: ScaleGroupRequest) -> OperationRef:
    """Set an instance group's count (0 keeps the group). The group is resubmitted to UpdateCluster
    through one explicit field allowlist (type, lifecycle, role, threads, storage, deep health checks,
    training plan, subnets, scheduled update, image, capacity type, network interface; TargetCount
    becomes InstanceCount), so scaling never resets health-check or EFA settings; only this group is
    sent. Refused for groups HyperPod-managed Karpenter scales (it would undo the change)."""
    replayed = await ctx.app.runner.replay("instance_group_scale", ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    if req.name in karpenter_groups(row):
        raise PreconditionFailed(
            f"Instance group {req.name} is scaled by HyperPod-managed Karpenter.",
            hint="Let pending pods and consolidation size it, or take it out of Karpenter first "
            "(karpenter_uninstall, or karpenter_install with other instanceGroups).",
        )
    await existing_group(ctx, row, req.name, "name")
    params = GroupScaleParams(cluster_tag=tag, region=row.region, name=req.name, target_count=req.target_count)
    return await submit_for_cluster(
        ctx, "instance_group_scale", tag, params, status_tool="operation_get", poll_after_seconds=20
    )


async def stage_scale(stage: StageContext) -> dict[str, Any]:
    """Describe → allowlisted spec with the new count → UpdateCluster (only this group) → count reached."""
    p = stage.params_as(GroupScaleParams)
    name, target = p.name, p.target_count
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    sm = HyperPod(stage.app.aws, p.region)
    cluster_name = hyperpod_cluster_name(row)
    cluster = await blocking(sm.describe_cluster, cluster_name) or {}
    found = find_group(cluster, name)
    if found is None:
        raise NotFound(f"Instance group {name} does not exist in {cluster_name}.")
    seen = await seen_events(sm, cluster_name, name)
    if int(found.get("TargetCount", -1)) != target:
        spec = resubmit_spec(found, count=target)
        await blocking(verify_groups, stage.app.aws, p.region, [spec], approved=approved_scripts(facts_of(row)))
        await stage.progress(f"UpdateCluster {cluster_name}: {name} {found.get('TargetCount')} -> {target}")
        await blocking(
            sm.update_cluster, f"scale instance group {name}", ClusterName=cluster_name, InstanceGroups=[spec]
        )
    after = await wait_group(stage, sm, cluster_name, name, target, seen)
    return {
        "instanceGroupName": name,
        "currentCount": after.get("CurrentCount", 0),
        "targetCount": after.get("TargetCount", 0),
        "deepHealthChecks": after.get("OnStartDeepHealthChecks", []),
        "networkInterface": (after.get("NetworkInterface") or {}).get("InterfaceType", "default"),
        "capacityType": capacity_type(after),
    }


@operation(
    "hyperpod_delete_instance_group",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/capacity/instance-groups/delete",
    completion="operation_get",
    example={"instanceGroupName": "gpu-b"},
)
async def hyperpod_delete_instance_group(ctx: CallContext, req: DeleteGroupRequest) -> OperationRef:
    """Delete an instance group (its nodes are terminated; instance volumes are lost) with UpdateCluster's
    InstanceGroupsToDelete. A dedicated subnet made for it (newSubnet) is kept for a successor; the cluster's
    last group and Karpenter-managed groups are refused (cluster_delete; karpenter_uninstall first)."""
    replayed = await ctx.app.runner.replay("instance_group_delete", ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    name = req.instance_group_name
    if name in karpenter_groups(row):
        raise PreconditionFailed(
            f"Instance group {name} is managed by HyperPod-managed Karpenter.",
            hint="Disable Karpenter for it first (karpenter_uninstall).",
        )
    cluster = await described(ctx.app, row)
    await existing_group(ctx, row, name, "instanceGroupName")
    if len(cluster.get("InstanceGroups", [])) == 1:
        raise PreconditionFailed(
            f"{name} is the only instance group of {hyperpod_cluster_name(row)}.",
            hint="Delete the whole cluster with cluster_delete, or add another group first.",
        )
    params = GroupParams(cluster_tag=tag, region=row.region, name=name)
    return await submit_for_cluster(
        ctx, "instance_group_delete", tag, params, status_tool="operation_get", poll_after_seconds=20
    )


async def stage_delete_group(stage: StageContext) -> dict[str, Any]:
    """UpdateCluster(InstanceGroupsToDelete) → the group is gone; its dedicated subnet stays."""
    p = stage.params_as(GroupParams)
    name = p.name
    app = stage.app
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    sm = HyperPod(app.aws, p.region)
    cluster_name = hyperpod_cluster_name(row)
    cluster = await blocking(sm.describe_cluster, cluster_name) or {}
    found = find_group(cluster, name)
    if found is not None and found.get("Status") != "Deleting":
        await stage.progress(f"UpdateCluster {cluster_name}: delete {name}")
        await blocking(
            sm.update_cluster, f"delete instance group {name}", ClusterName=cluster_name, InstanceGroupsToDelete=[name]
        )

    async def gone() -> tuple[bool, str]:
        latest = await blocking(sm.describe_cluster, cluster_name)
        now = find_group(latest or {}, name)
        if now is None:
            return True, f"{name} deleted"
        return False, f"{name}: {now.get('Status')} ({now.get('CurrentCount', 0)} node(s) left)"

    await wait_until(stage, gone, limit_seconds=GROUP_TIMEOUT, what=f"deletion of instance group {name}")
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    groups = facts_of(row).group_records()
    kept = groups.pop(name, None) or {}
    await blocking(record_facts, app.db, p.cluster_tag, instance_groups=groups)
    out: dict[str, Any] = {"instanceGroupName": name, "deleted": True}
    if kept.get("dedicatedSubnet"):
        out["keptSubnetId"] = kept.get("subnetId")
        out["note"] = "The dedicated subnet is kept; a group added with the same name and newSubnet reuses it."
    return out


KINDS.register(
    OperationKind(
        name="instance_group_scale",
        params=GroupScaleParams,
        stages=(
            StageSpec("scale", stage_scale, max_attempts=3, timeout_seconds=GROUP_TIMEOUT + 600, backoff_seconds=5),
        ),
    )
)
KINDS.register(
    OperationKind(
        name="instance_group_delete",
        params=GroupParams,
        stages=(
            StageSpec("delete", stage_delete_group, max_attempts=3, timeout_seconds=GROUP_TIMEOUT, backoff_seconds=5),
        ),
    )
)
