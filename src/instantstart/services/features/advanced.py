"""HyperPod advanced features as an explicit diff: one dependency-aware toggle per managed capability."""

from __future__ import annotations

import asyncio
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.services.base.registry import ClusterParams, get_cluster, resolve_tag, submit_for_cluster
from instantstart.services.capacity.karpenter.status import KarpenterStatus, karpenter_get_status
from instantstart.services.capacity.karpenter.toggle import (
    DURATION,
    ClusterOnly,
    GroupName,
    KarpenterRequest,
    enable_params,
)
from instantstart.services.dependencies.stage import require_eks_ready
from instantstart.services.features.governance import GovernanceToggle
from instantstart.services.features.grafana import check_adoptable
from instantstart.services.features.karpenter import KEY as KARPENTER
from instantstart.services.features.orchestrate import (
    KIND,
    InferenceToggle,
    ObservabilityToggle,
    TieredToggle,
    Toggle,
    refuse_breaking_disables,
    validate_keys,
)
from instantstart.services.features.specs import ORDER
from instantstart.services.features.status import FeatureView, feature_view
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

STATUS_TOOL = "hyperpod_get_advanced_features"


class KarpenterFeature(WireModel):
    """The `karpenter` key: on (with the NodePool's consolidation settings) or off."""

    enabled: bool
    instance_groups: list[GroupName] | None = Field(default=None, max_length=10)
    consolidation_policy: str = Field(default="WhenEmptyOrUnderutilized",
                                      pattern=r"^(WhenEmptyOrUnderutilized|WhenEmpty)$")
    consolidate_after: str = Field(default="60s", pattern=DURATION)
    budget_nodes: str = Field(default="10%", pattern=r"^([0-9]+%|[0-9]+)$")
    gpu_limit: int | None = Field(default=None, ge=0, le=100000)


class UpdateFeaturesRequest(WireModel):
    """Only the keys present are reconciled; a key left out is never touched."""

    cluster_tag: ClusterTag | None = None
    karpenter: KarpenterFeature | None = Field(default=None, description="HyperPod-managed Karpenter.")
    cert_manager: Toggle | None = Field(default=None, description="cert-manager EKS add-on.")
    fsx_csi_driver: Toggle | None = Field(default=None, description="FSx for Lustre CSI add-on + its role.")
    training_operator: Toggle | None = Field(default=None, description="HyperPod training operator add-on (+ "
                                             "cert-manager, Pod Identity agent, its role and association).")
    inference_operator: InferenceToggle | None = Field(default=None, description="HyperPod inference operator "
                                                       "add-on (+ S3/FSx CSI, metrics-server, cert-manager, its "
                                                       "execution role with OIDC trust).")
    tiered_storage: TieredToggle | None = Field(default=None, description="Managed tiered checkpointing "
                                                "(TieredStorageConfig + the IRSA chain of checkpointing pods).")
    kuberay_operator: Toggle | None = Field(default=None, description="KubeRay operator (helm, pinned chart).")
    observability: ObservabilityToggle | None = Field(default=None, description="HyperPod observability add-on "
                                                      "(configured with the AMP workspace, metrics levels, logging) + "
                                                      "AMP workspace + the collector's remote-write role; optionally "
                                                      "an Amazon Managed Grafana workspace (adopted by "
                                                      "grafanaWorkspaceId, or created with grafana: true).")
    keda: Toggle | None = Field(default=None, description="KEDA (helm, pinned chart): what "
                                "inference_autoscaling_apply needs.")
    task_governance: GovernanceToggle | None = Field(
        default=None, description="HyperPod task governance EKS add-on (installs Kueue: queueName/priority of "
        "training jobs), with the Kueue WorkloadPriorityClasses (priorityClasses) and LocalQueues (queues, each on "
        "its own ClusterQueue) to create.")


class AdvancedFeatures(WireModel):
    """Every advanced feature's actual state (read from AWS and Kubernetes)."""

    cluster_tag: str
    karpenter: KarpenterStatus
    cert_manager: FeatureView
    fsx_csi_driver: FeatureView
    training_operator: FeatureView
    inference_operator: FeatureView
    tiered_storage: FeatureView
    kuberay_operator: FeatureView
    observability: FeatureView
    keda: FeatureView
    task_governance: FeatureView


@operation(
    "hyperpod_update_advanced_features",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/capacity/advanced-features",
    completion=STATUS_TOOL,
    example={"tieredStorage": {"enabled": True, "configMode": "default"}, "trainingOperator": {"enabled": True}},
)
async def hyperpod_update_advanced_features(ctx: CallContext, req: UpdateFeaturesRequest) -> OperationRef:
    """Reconcile advanced features as an explicit diff: only the keys present change, each is a no-op when the
    cluster already matches. Keys: trainingOperator, inferenceOperator {tlsCertificateBucket?}, tieredStorage
    {configMode default|custom, percentage 20..100}, kuberayOperator, keda, taskGovernance {priorityClasses
    [{name, value}], queues [{name, namespace, accelerators?}]: Kueue objects jobs name}, certManager,
    fsxCsiDriver, observability
    {logging, grafanaWorkspaceId (adopt an ACTIVE Amazon Managed Grafana workspace, checked now) | grafana true
    (create one) / false (delete ours)} (each {enabled}), and karpenter {enabled, instanceGroups,
    consolidationPolicy, consolidateAfter, budgetNodes, gpuLimit} (validated against the cluster first; alone it
    runs as karpenter_enable/karpenter_disable, with other keys as the last stage of the same operation).
    Prerequisites come along and are recorded with who installed them; disabling removes only what that feature
    installed and nobody else uses; disabling what an enabled feature needs is refused (CONFLICT naming it). One
    operation, one stage per feature in dependency order; a failed feature does not stop the independent ones,
    those that need it end BLOCKED naming it. The result lists each feature's desired, actual, action and, on
    failure, code, message and hint."""
    for kind in (KIND, "karpenter_enable", "karpenter_disable"):
        replayed = await ctx.app.runner.replay(kind, ctx.idempotency_key, status_tool=STATUS_TOOL)
        if replayed is not None:
            return replayed
    wanted = {
        key: value.model_dump(by_alias=True, exclude_none=True)
        for key in ORDER
        if (value := getattr(req, _attr(key))) is not None
    }
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    if req.karpenter is not None and not wanted:
        return await _karpenter(ctx, tag, row, req.karpenter)
    if req.karpenter is not None:  # with other keys: one diff, karpenter is one more feature stage
        wanted[KARPENTER] = await _karpenter_settings(ctx, tag, row, req.karpenter)
    validate_keys(wanted)
    require_eks_ready(row)
    await refuse_breaking_disables(ctx.app, row, wanted)
    adopt = (wanted.get("observability") or {}).get("grafanaWorkspaceId")
    if adopt:
        await to_thread.run_sync(check_adoptable, ctx.app.aws, row.region, adopt)
    params = {"clusterTag": tag, "region": row.region, "features": wanted}
    return await submit_for_cluster(ctx, KIND, tag, params, status_tool=STATUS_TOOL, poll_after_seconds=10)


def _attr(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


def _karpenter_request(tag: str, feature: KarpenterFeature) -> KarpenterRequest:
    return KarpenterRequest(
        cluster_tag=tag,
        instance_groups=feature.instance_groups,
        consolidation_policy=feature.consolidation_policy,  # type: ignore[arg-type]
        consolidate_after=feature.consolidate_after,
        budget_nodes=feature.budget_nodes,
        gpu_limit=feature.gpu_limit,
    )


async def _karpenter_settings(ctx: CallContext, tag: str, row: ClusterRow, feature: KarpenterFeature
                              ) -> dict[str, Any]:
    """The karpenter key validated against the cluster now (groups eligible, continuous provisioning), as
    stored in an advanced-features request."""
    if not feature.enabled:
        return {"enabled": False}
    params = await enable_params(ctx, row, _karpenter_request(tag, feature))
    return {"enabled": True, "settings": params.settings.model_dump(mode="json", by_alias=True)}


async def _karpenter(ctx: CallContext, tag: str, row: ClusterRow, feature: KarpenterFeature) -> OperationRef:
    params: ParamsModel
    if feature.enabled:
        kind, params = "karpenter_enable", await enable_params(ctx, row, _karpenter_request(tag, feature))
    else:
        kind, params = "karpenter_disable", ClusterParams(cluster_tag=tag, region=row.region)
    return await submit_for_cluster(ctx, kind, tag, params, status_tool=STATUS_TOOL, poll_after_seconds=15)


@operation(STATUS_TOOL, method="GET", path="/capacity/advanced-features", example={})
async def hyperpod_get_advanced_features(ctx: CallContext, req: ClusterOnly) -> AdvancedFeatures:
    """Every advanced feature of a cluster (default: the active one) as AWS and Kubernetes have it now: enabled,
    state, the add-on or release, CRDs served and controllers Ready, IAM roles and associations, owners of shared
    dependencies, the last request's result; tieredStorage lists each IRSA link (clusterConfig, oidcProvider,
    role, trust, policy, serviceAccount, annotation) ok or broken and why; observability the AMP workspace's
    remote-write and query URLs and the Grafana workspace (id, status, https URL, whether InstantStart created
    it); karpenter as karpenter_get_status."""
    status = await karpenter_get_status(ctx, req)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, status.cluster_tag)
    views = await asyncio.gather(*(feature_view(ctx.app, row, key) for key in ORDER))
    return AdvancedFeatures(cluster_tag=status.cluster_tag, karpenter=status,
                            **{_attr(v.key): v for v in views})
