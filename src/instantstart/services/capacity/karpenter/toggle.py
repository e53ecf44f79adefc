"""karpenter_install and karpenter_uninstall: the validated toggle and the stages of its two kinds."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.errors import InvalidInput, PreconditionFailed
from instantstart.manifests import karpenter as karpenter_manifests
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.services.base.facts import facts_of
from instantstart.services.base.hyperpod_groups import GROUP_NAME, described, find_group
from instantstart.services.base.registry import ClusterParams, get_cluster, resolve_tag, submit_for_cluster
from instantstart.services.capacity.karpenter.autoscaling import stage_autoscaling, stage_remove_autoscaling
from instantstart.services.capacity.karpenter.nodepool import stage_nodepool, stage_remove_nodepool
from instantstart.services.capacity.karpenter.role import stage_remove_role, stage_role
from instantstart.services.capacity.karpenter.state import (
    WAIT,
    KarpenterEnableParams,
    KarpenterSettingsParams,
    state_of,
)
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

GroupName = Annotated[str, Field(pattern=GROUP_NAME, max_length=63)]
DURATION = r"^(Never|[0-9]+(s|m|h))$"


class KarpenterRequest(WireModel):
    """Which instance groups Karpenter scales and how idle capacity is consolidated."""

    cluster_tag: ClusterTag | None = None
    instance_groups: list[GroupName] | None = Field(
        default=None,
        max_length=karpenter_manifests.MAX_GROUPS,
        description="Groups to autoscale (default: every eligible group at count 0). They must be at count 0, "
        "without a training plan or deep health checks.",
    )
    consolidation_policy: Literal["WhenEmptyOrUnderutilized", "WhenEmpty"] = "WhenEmptyOrUnderutilized"
    consolidate_after: str = Field(default="60s", pattern=DURATION, description="Idle time before a node goes.")
    budget_nodes: str = Field(default="10%", pattern=r"^([0-9]+%|[0-9]+)$", description="Disruption budget.")
    gpu_limit: int | None = Field(default=None, ge=0, le=100000, description="Most GPUs the NodePool may hold.")


class ClusterOnly(WireModel):
    """Which cluster (the active one when absent)."""

    cluster_tag: ClusterTag | None = None


def eligible(
    cluster: dict[str, Any], wanted: list[str] | None, managed: frozenset[str] = frozenset()
) -> tuple[list[str], list[str]]:
    """The groups Karpenter may manage and the instance types they use; InvalidInput/PreconditionFailed
    with the reason for a cluster or group that cannot be autoscaled. Groups Karpenter already manages
    (`managed`) may have nodes."""
    if cluster.get("NodeProvisioningMode") != "Continuous":
        raise PreconditionFailed(
            f"HyperPod cluster {cluster.get('ClusterName')} does not use continuous provisioning; managed Karpenter "
            "requires NodeProvisioningMode Continuous.",
            hint="Create the cluster with hyperpod_create (continuous by default); it cannot be switched in place.",
        )
    groups = cluster.get("InstanceGroups", [])
    if wanted is None:
        wanted = [g["InstanceGroupName"] for g in groups if not _why_not(g, g["InstanceGroupName"] in managed)]
        if not wanted:
            raise PreconditionFailed(
                "No instance group can be autoscaled: Karpenter groups start at count 0, without a training plan "
                "or deep health checks.",
                hint="Add one with hyperpod_add_instance_group (instanceCount 0), then run karpenter_install.",
            )
    types = []
    for name in wanted:
        group = find_group(cluster, name)
        if group is None:
            raise InvalidInput(
                f"Invalid input: instanceGroups: {name} is not an instance group of {cluster.get('ClusterName')}",
                details={"fields": [{"field": "instanceGroups", "message": f"unknown group {name}"}]},
            )
        reason = _why_not(group, name in managed)
        if reason:
            raise InvalidInput(
                f"Invalid input: instanceGroups: {name} cannot be autoscaled: {reason}",
                hint="Choose another group, or add one at count 0 with hyperpod_add_instance_group.",
                details={"fields": [{"field": "instanceGroups", "message": reason}]},
            )
        types.append(str(group.get("InstanceType", "")))
    return list(wanted), types


def _why_not(group: dict[str, Any], managed: bool = False) -> str:
    if group.get("TrainingPlanArn"):
        return "it uses a training plan (reserved capacity is not autoscaled)"
    if group.get("OnStartDeepHealthChecks"):
        return "it runs on-start deep health checks"
    if int(group.get("TargetCount", 0)) != 0 and not managed:
        return f"it has {group.get('TargetCount')} node(s); Karpenter groups start at 0 (scale it to 0 first)"
    return ""


@operation(
    "karpenter_install",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/capacity/karpenter",
    completion="karpenter_get_status",
    example={"instanceGroups": ["auto-a"], "consolidateAfter": "60s"},
)
async def karpenter_install(ctx: CallContext, req: KarpenterRequest) -> OperationRef:
    """Enable HyperPod-managed Karpenter on the active cluster (a validated toggle). Requires continuous
    provisioning (refused with the reason otherwise); the chosen instance groups (default: every eligible
    one) must be at count 0, without a training plan or deep health checks. Creates the autoscaling IAM
    role, enables cluster autoscaling (UpdateCluster AutoScaling Karpenter), then a HyperpodNodeClass and
    a NodePool: pending pods scale a group up; idle nodes are consolidated back toward zero
    (consolidationPolicy, consolidateAfter, budgetNodes). Node recovery and health monitoring stay on.
    karpenter_uninstall removes exactly what this created, in reverse order."""
    replayed = await ctx.app.runner.replay("karpenter_enable", ctx.idempotency_key, status_tool="karpenter_get_status")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    params = await enable_params(ctx, row, req)
    return await submit_for_cluster(
        ctx, "karpenter_enable", tag, params, status_tool="karpenter_get_status", poll_after_seconds=15
    )


@operation(
    "karpenter_uninstall",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/capacity/karpenter/uninstall",
    completion="karpenter_get_status",
    example={},
)
async def karpenter_uninstall(ctx: CallContext, req: ClusterOnly) -> OperationRef:
    """Disable HyperPod-managed Karpenter: removes exactly what karpenter_install created, in reverse
    order (NodePool, HyperpodNodeClass, cluster autoscaling, the IAM role); groups keep their current
    counts and are scaled by hand again."""
    replayed = await ctx.app.runner.replay("karpenter_disable", ctx.idempotency_key, status_tool="karpenter_get_status")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    if not facts_of(row).karpenter:
        raise PreconditionFailed(f"Karpenter was never enabled on {tag} by InstantStart.", hint="Nothing to remove.")
    return await submit_for_cluster(
        ctx,
        "karpenter_disable",
        tag,
        ClusterParams(cluster_tag=tag, region=row.region),
        status_tool="karpenter_get_status",
        poll_after_seconds=15,
    )


async def enable_params(ctx: CallContext, row: ClusterRow, req: KarpenterRequest) -> KarpenterEnableParams:
    """Validate the toggle against the cluster as it is now; the params of karpenter_enable.
    (The `karpenter` key of hyperpod_update_advanced_features reuses this with the same kinds.)"""
    cluster = await described(ctx.app, row)
    state = state_of(row)
    managed = frozenset(state.get("instanceGroups") or []) if state.get("enabled") else frozenset()
    groups, types = eligible(cluster, req.instance_groups, managed)
    settings = KarpenterSettingsParams(
        instance_groups=groups,
        instance_types=types,
        consolidation_policy=req.consolidation_policy,
        consolidate_after=req.consolidate_after,
        budget_nodes=req.budget_nodes,
        gpu_limit=req.gpu_limit,
    )
    return KarpenterEnableParams(cluster_tag=row.tag, region=row.region, settings=settings)


# Stage names are part of the interface: stage_autoscaling reads the "role" stage's outputs.
ENABLE_STAGES = (
    StageSpec("role", stage_role, max_attempts=3),
    StageSpec("autoscaling", stage_autoscaling, max_attempts=3, timeout_seconds=WAIT + 300),
    StageSpec("nodepool", stage_nodepool, max_attempts=3, timeout_seconds=2 * WAIT + 300),
)
DISABLE_STAGES = (
    StageSpec("nodepool", stage_remove_nodepool, max_attempts=3, timeout_seconds=2 * WAIT + 300),
    StageSpec("autoscaling", stage_remove_autoscaling, max_attempts=3, timeout_seconds=WAIT + 300),
    StageSpec("role", stage_remove_role, max_attempts=3),
)
KINDS.register(OperationKind(name="karpenter_enable", params=KarpenterEnableParams, stages=ENABLE_STAGES))
KINDS.register(OperationKind(name="karpenter_disable", params=ClusterParams, stages=DISABLE_STAGES))
