"""HyperPod advanced features as an explicit diff; so far the `karpenter` key (managed autoscaling)."""

from __future__ import annotations

from typing import Literal

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.errors import InvalidInput
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.services.capacity.karpenter.status import KarpenterStatus, karpenter_get_status
from instantstart.services.capacity.karpenter.toggle import (
    DURATION,
    ClusterOnly,
    GroupName,
    KarpenterRequest,
    enable_params,
)
from instantstart.services.core.registry import ClusterParams, get_cluster, resolve_tag, submit_for_cluster
from instantstart.validation import ClusterTag


class KarpenterFeature(WireModel):
    """The `karpenter` key: on (with the NodePool's consolidation settings) or off."""

    enabled: bool
    instance_groups: list[GroupName] | None = Field(default=None, max_length=10)
    consolidation_policy: Literal["WhenEmptyOrUnderutilized", "WhenEmpty"] = "WhenEmptyOrUnderutilized"
    consolidate_after: str = Field(default="60s", pattern=DURATION)
    budget_nodes: str = Field(default="10%", pattern=r"^([0-9]+%|[0-9]+)$")
    gpu_limit: int | None = Field(default=None, ge=0, le=100000)


class UpdateFeaturesRequest(WireModel):
    """Only the keys present are reconciled."""

    cluster_tag: ClusterTag | None = None
    karpenter: KarpenterFeature | None = Field(default=None, description="HyperPod-managed Karpenter.")


class AdvancedFeatures(WireModel):
    """The state of each advanced feature this control plane reconciles."""

    cluster_tag: str
    karpenter: KarpenterStatus


@operation(
    "hyperpod_update_advanced_features",
    method="POST",
    path="/capacity/advanced-features",
    completion="hyperpod_get_advanced_features",
    example={"karpenter": {"enabled": True, "consolidateAfter": "60s"}},
)
async def hyperpod_update_advanced_features(ctx: CallContext, req: UpdateFeaturesRequest) -> OperationRef:
    """Reconcile advanced features as an explicit diff: only the keys present change. Supported key:
    `karpenter` {enabled, instanceGroups, consolidationPolicy, consolidateAfter, budgetNodes, gpuLimit} —
    enabling is karpenter_install's validated toggle (continuous provisioning required; groups at count 0
    without training plans or deep health checks); disabling removes exactly what enabling created, in
    reverse order (nothing to remove is a no-op)."""
    for kind in ("karpenter_enable", "karpenter_disable"):
        replayed = await ctx.app.runner.replay(kind, ctx.idempotency_key, status_tool="hyperpod_get_advanced_features")
        if replayed is not None:
            return replayed
    if req.karpenter is None:
        raise InvalidInput(
            "Invalid input: karpenter: no feature key given; nothing to reconcile",
            details={"fields": [{"field": "karpenter", "message": "required (the only supported key)"}]},
        )
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    feature = req.karpenter
    params: ParamsModel
    if feature.enabled:
        wanted = KarpenterRequest(
            cluster_tag=tag,
            instance_groups=feature.instance_groups,
            consolidation_policy=feature.consolidation_policy,
            consolidate_after=feature.consolidate_after,
            budget_nodes=feature.budget_nodes,
            gpu_limit=feature.gpu_limit,
        )
        kind, params = "karpenter_enable", await enable_params(ctx, row, wanted)
    else:
        kind, params = "karpenter_disable", ClusterParams(cluster_tag=tag, region=row.region)
    return await submit_for_cluster(
        ctx, kind, tag, params, status_tool="hyperpod_get_advanced_features", poll_after_seconds=15
    )


@operation("hyperpod_get_advanced_features", method="GET", path="/capacity/advanced-features", example={})
async def hyperpod_get_advanced_features(ctx: CallContext, req: ClusterOnly) -> AdvancedFeatures:
    """The state of each reconciled advanced feature of a cluster (default: the active one). `karpenter`:
    ENABLED, DISABLED, IN_PROGRESS, FAILED or NOT_STARTED with terminal, cluster autoscaling, NodePool and
    node class readiness, managed groups' counts and settings — as karpenter_get_status."""
    status = await karpenter_get_status(ctx, req)
    return AdvancedFeatures(cluster_tag=status.cluster_tag, karpenter=status)
