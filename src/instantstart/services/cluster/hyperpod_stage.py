"""The HyperPod stage: lifecycle script, compute subnet, CreateCluster (recovery on, continuous), InService."""

from __future__ import annotations

import asyncio
from typing import Any

from anyio import to_thread
from pydantic import AliasChoices, Field

from instantstart.aws import hyperpod as hp_api
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import CapacityUnavailable, PreconditionFailed, ProviderError
from instantstart.manifests.hyperpod import (
    DEEP_HEALTH_CHECKS,
    GroupDecision,
    create_cluster_request,
    instance_group,
)
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base import network as net
from instantstart.services.base.facts import ClusterFacts, facts_of
from instantstart.services.base.hyperpod_reads import CAPACITY_WORDS, cached_describe, capacity_events
from instantstart.services.base.lifecycle import ensure_lifecycle, lifecycle_key
from instantstart.services.base.params import HyperPodGroupParams, HyperPodParams, stored
from instantstart.services.base.registry import (
    get_cluster,
    hyperpod_cluster_name,
    mirror_pipeline_stages,
    record_details,
    resolve_tag,
    submit_for_cluster,
)
from instantstart.services.base.stage_status import StageStatus, stage_status
from instantstart.services.base.zones import validate_zone
from instantstart.services.core.installation import installation_id, refuse_foreign
from instantstart.services.core.instance_types import lookup
from instantstart.services.core.ledger import TAG_CLUSTER, aws_tags, record
from instantstart.services.core.training_plans import PlanPlacement, reconcile_plan_zone
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

HYPERPOD_TIMEOUT = 3 * 3600


def _alias(*names: str) -> Any:
    return AliasChoices(*names)


class HyperPodCreateRequest(WireModel):
    """The decision-grade parameters of the first accelerated instance group (camelCase or the legacy
    PascalCase names)."""

    cluster_tag: ClusterTag | None = Field(default=None, description="The cluster (default: the active one).")
    hyper_pod_tag: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$",
        validation_alias=_alias("hyperPodTag", "initInstanceGroupTag", "hyper_pod_tag"),
        description="Names the first instance group (accelerated-<tag>); defaults to the cluster tag.",
    )
    accelerated_instance_type: str = Field(
        validation_alias=_alias("acceleratedInstanceType", "AcceleratedInstanceType", "accelerated_instance_type"),
        description="An ml.* instance type, e.g. ml.g6.4xlarge.",
    )
    accelerated_instance_count: int = Field(
        ge=0,
        le=6758,
        validation_alias=_alias("acceleratedInstanceCount", "AcceleratedInstanceCount", "accelerated_instance_count"),
    )
    availability_zone: str = Field(
        pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$",
        validation_alias=_alias("availabilityZone", "AvailabilityZone", "availability_zone"),
    )
    accelerated_ebs_volume_size: int = Field(
        default=500,
        ge=1,
        le=16384,
        validation_alias=_alias(
            "acceleratedEBSVolumeSize",
            "AcceleratedEBSVolumeSize",
            "acceleratedEbsVolumeSize",
            "accelerated_ebs_volume_size",
        ),
    )
    accelerated_training_plan_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:\d{12}:training-plan/[a-zA-Z0-9\-]+$",
        validation_alias=_alias(
            "acceleratedTrainingPlanArn", "AcceleratedTrainingPlanArn", "accelerated_training_plan_arn"
        ),
    )
    compute_subnet_id: str | None = Field(
        default=None,
        pattern=r"^subnet-[0-9a-f]{8,17}$",
        validation_alias=_alias("computeSubnetId", "ComputeSubnetId", "compute_subnet_id"),
    )
    capacity_type: str = Field(
        default="OnDemand",
        pattern=r"^(OnDemand|Spot)$",
        validation_alias=_alias("capacityType", "CapacityType", "capacity_type"),
        description="OnDemand or Spot; fixed for the life of the group.",
    )
    on_start_deep_health_checks: bool = Field(
        default=False,
        validation_alias=_alias("onStartDeepHealthChecks", "on_start_deep_health_checks"),
        description="Run InstanceStress and InstanceConnectivity before nodes take work.",
    )
    strict_availability_zone: bool = Field(
        default=False,
        validation_alias=_alias("strictAvailabilityZone", "strict_availability_zone"),
        description="Refuse instead of moving to a training plan's AZ when they differ.",
    )


def group_name(tag: str) -> str:
    """The first accelerated group's name."""
    return f"accelerated-{tag}"


def hyperpod_params(tag: str, region: str, req: HyperPodCreateRequest) -> HyperPodParams:
    """The persisted parameters of the HyperPod stage (also embedded in cluster_create)."""
    facts = lookup(req.accelerated_instance_type, "acceleratedInstanceType")
    group = HyperPodGroupParams(
        group_name=group_name(req.hyper_pod_tag or tag),
        instance_type=facts.name,
        count=req.accelerated_instance_count,
        availability_zone=req.availability_zone,
        ebs_gb=req.accelerated_ebs_volume_size,
        training_plan_arn=req.accelerated_training_plan_arn,
        subnet_id=req.compute_subnet_id,
        capacity_type=req.capacity_type,
        threads_per_core=facts.threads_per_core,
        deep_health_checks=list(DEEP_HEALTH_CHECKS) if req.on_start_deep_health_checks else [],
    )
    return HyperPodParams(cluster_tag=tag, region=region, hyperpod=group)


def _eks_facts(row: ClusterRow) -> ClusterFacts:
    """What the EKS stage recorded; PreconditionFailed until it has finished."""
    facts = facts_of(row)
    if (row.stages or {}).get("eks") != "SUCCEEDED" or not facts.eks_cluster_arn:
        raise PreconditionFailed(
            f"The EKS stage of {row.tag} has not finished.",
            hint="Run cluster_create_eks and wait for it (cluster_get_eks_creation_status).",
        )
    return facts


async def _compute_subnet(stage: StageContext, p: HyperPodParams, facts: ClusterFacts) -> dict[str, Any]:
    """The compute subnet of the group's AZ (given, shared, or new), recorded on the cluster."""
    app, hp = stage.app, p.hyperpod
    n = net.NetCtx(aws=app.aws, db=app.db, cluster_tag=p.cluster_tag, operation_id=stage.operation_id, region=p.region)
    await stage.progress(f"compute subnet in {hp.availability_zone}")
    subnet: dict[str, Any] = await blocking(
        net.ensure_compute_subnet,
        n,
        vpc_id=facts.need("vpc_id"),
        az=hp.availability_zone,
        subnet_id=hp.subnet_id,
        nat_gateway_id=facts.nat_gateway_id,
        s3_endpoint_id=facts.s3_endpoint_id,
        min_free=hp.count + 8,
        preferred_cidr=facts.compute_subnet_cidr,
    )
    await record_details(stage, p.cluster_tag, compute_subnets={hp.availability_zone: subnet["subnetId"]})
    return subnet


async def _create_cluster(
    stage: StageContext, p: HyperPodParams, name: str, facts: ClusterFacts, subnet_id: str
) -> None:
    """CreateCluster with the one accelerated group, ledgered."""
    app, hp, tag = stage.app, p.hyperpod, p.cluster_tag
    bucket = facts.need("bucket")
    group = GroupDecision(
        name=hp.group_name,
        instance_type=hp.instance_type,
        count=hp.count,
        execution_role=facts.need("execution_role_arn"),
        lifecycle_uri=await blocking(ensure_lifecycle, app.aws, p.region, bucket, tag),
        ebs_gb=hp.ebs_gb,
        threads_per_core=hp.threads_per_core,
        training_plan_arn=hp.training_plan_arn,
        capacity_type=hp.capacity_type,
        deep_health_checks=tuple(hp.deep_health_checks),
    )
    request = create_cluster_request(
        name=name,
        eks_cluster_arn=facts.need("eks_cluster_arn"),
        security_group_id=facts.need("security_group_id"),
        subnet_id=subnet_id,
        groups=[instance_group(group)],
        tags=aws_tags(tag, stage.operation_id, installation=await blocking(installation_id, app.db)),
    )
    await stage.progress(f"CreateCluster {name}: {hp.count} x {hp.instance_type} in {hp.availability_zone}")
    arn = await blocking(hp_api.create_cluster, app.aws, p.region, request)
    await blocking(
        record,
        app.db,
        cluster_tag=tag,
        operation_id=stage.operation_id,
        resource_type="sagemaker:cluster",
        resource_id=name,
        region=p.region,
        details={"arn": arn},
    )


async def _wait_in_service(stage: StageContext, p: HyperPodParams, name: str, seen: set[Any]) -> None:
    """Until InService with every group at its target; a new capacity event fails with CAPACITY_UNAVAILABLE."""
    app, hp, region = stage.app, p.hyperpod, p.region

    async def in_service() -> tuple[bool, str]:
        # Both reads at once: a check (and so the end of the wait) costs one round trip, not two.
        cluster, events = await asyncio.gather(
            blocking(hp_api.describe_cluster, app.aws, region, name),
            blocking(capacity_events, app.aws, region, name),
            return_exceptions=True,
        )
        if isinstance(cluster, BaseException):
            raise cluster
        if cluster is None:
            raise ProviderError(f"HyperPod cluster {name} disappeared.", retryable=False)
        if isinstance(events, BaseException):
            raise events
        status = cluster["ClusterStatus"]
        groups = cluster.get("InstanceGroups", [])
        counts = ", ".join(
            f"{g['InstanceGroupName']} {g.get('CurrentCount', 0)}/{g.get('TargetCount', 0)}" for g in groups
        )
        fresh = [e for e in events if e.get("EventId") not in seen]
        failure = cluster.get("FailureMessage") or ""
        if fresh or (status in ("Failed", "RollingBack") and any(w in failure.lower() for w in CAPACITY_WORDS)):
            reason = fresh[0]["Description"] if fresh else failure
            raise CapacityUnavailable(
                f"HyperPod could not get capacity for {hp.instance_type} in {hp.availability_zone}: {reason}",
                hint="Try another Availability Zone or instance type, use a training plan, or "
                "wait and run operation_retry (the EKS stage stays done).",
            )
        if status in ("Failed", "RollingBack"):
            raise ProviderError(
                f"HyperPod cluster {name} is {status}: {failure}",
                hint="Read the message, fix the cause, then operation_retry.",
                retryable=False,
            )
        done = status == "InService" and all(g.get("CurrentCount", 0) >= g.get("TargetCount", 0) for g in groups)
        return done, f"HyperPod {name}: {status} ({counts})"

    await wait_until(stage, in_service, limit_seconds=HYPERPOD_TIMEOUT, what=f"HyperPod cluster {name}")


async def stage_hyperpod(stage: StageContext) -> dict[str, Any]:
    """Lifecycle script → compute subnet → CreateCluster → InService with every node up."""
    p = stage.params_as(HyperPodParams)
    tag, region, app = p.cluster_tag, p.region, stage.app
    row = await blocking(get_cluster, app.db, tag)
    facts = _eks_facts(row)
    bucket = facts.need("bucket")
    name = hyperpod_cluster_name(row)

    async def lifecycle() -> None:
        await blocking(ensure_lifecycle, app.aws, region, bucket, tag)
        await stage.progress(f"lifecycle script: s3://{bucket}/{lifecycle_key(tag)} (uploaded, checksum verified)")

    # Independent of each other: made side by side (CreateCluster verifies the script once more just before).
    _, subnet, existing = await asyncio.gather(
        lifecycle(), _compute_subnet(stage, p, facts), blocking(hp_api.describe_cluster, app.aws, region, name)
    )
    seen = {e.get("EventId") for e in await blocking(capacity_events, app.aws, region, name)} if existing else set()
    if existing is None:
        await _create_cluster(stage, p, name, facts, subnet["subnetId"])
    else:
        tags = await blocking(hp_api.cluster_tags, app.aws, region, str(existing["ClusterArn"]))
        mine = await blocking(installation_id, app.db)
        refuse_foreign("HyperPod cluster", name, {TAG_CLUSTER: "", **tags}, tag, mine)
    await _wait_in_service(stage, p, name, seen)
    cluster = await blocking(hp_api.describe_cluster, app.aws, region, name) or {}
    outputs = {
        "hyperpodClusterName": name,
        "hyperpodClusterArn": cluster.get("ClusterArn"),
        "computeSubnetId": subnet["subnetId"],
        "instanceGroup": p.hyperpod.group_name,
    }
    await record_details(stage, tag, **outputs)
    return outputs


HYPERPOD_STAGE = StageSpec(
    "hyperpod", stage_hyperpod, max_attempts=3, timeout_seconds=HYPERPOD_TIMEOUT + 600, backoff_seconds=5
)
KINDS.register(
    OperationKind(
        name="hyperpod_create", params=HyperPodParams, stages=(HYPERPOD_STAGE,), mirror=mirror_pipeline_stages
    )
)


@operation(
    "hyperpod_create",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/clusters/hyperpod",
    completion="hyperpod_get_creation_status",
    example={
        "acceleratedInstanceType": "ml.g6.4xlarge",
        "acceleratedInstanceCount": 1,
        "availabilityZone": "us-west-2c",
    },
)
async def hyperpod_create(ctx: CallContext, req: HyperPodCreateRequest) -> OperationRef:
    """Create the HyperPod cluster hp-cluster-<tag> on the active cluster's EKS control plane (its EKS stage
    must have finished): one accelerated instance group (type, count, EBS size, optional training plan,
    optional deep health checks) in a compute subnet of the chosen AZ, with node recovery Automatic and
    continuous provisioning. Capacity type (OnDemand, Spot) is fixed for the life of the group. A training
    plan pins capacity to its AZ: a different availabilityZone is replaced by the plan's (the operation's
    params carry the note) unless strictAvailabilityZone or computeSubnetId insists, which is refused before
    anything is written. A capacity shortage fails with CAPACITY_UNAVAILABLE; operation_retry resumes."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    if (row.stages or {}).get("eks") != "SUCCEEDED":
        raise PreconditionFailed(
            f"The EKS stage of {tag} has not finished.",
            hint="Wait for cluster_get_eks_creation_status to report SUCCEEDED.",
        )
    await validate_zone(ctx, row.region, req.availability_zone)
    want = PlanPlacement(
        plan_arn=req.accelerated_training_plan_arn,
        availability_zone=req.availability_zone,
        instance_type=lookup(req.accelerated_instance_type, "acceleratedInstanceType").name,
        strict=req.strict_availability_zone,
        subnet_given=req.compute_subnet_id is not None,
        type_field="acceleratedInstanceType",
    )
    zone, notes = await reconcile_plan_zone(ctx.app, row.region, want)
    params = hyperpod_params(tag, row.region, req.model_copy(update={"availability_zone": zone}))
    params = params.model_copy(update={"hyperpod": params.hyperpod.model_copy(update={"notes": notes})})
    return await submit_for_cluster(
        ctx, "hyperpod_create", tag, stored(params), status_tool="hyperpod_get_creation_status", poll_after_seconds=30
    )


class HyperPodStatusRequest(WireModel):
    """Which cluster (the active one when absent)."""

    cluster_tag: ClusterTag | None = None


@operation("hyperpod_get_creation_status", method="GET", path="/clusters/hyperpod-status", example={})
async def hyperpod_get_creation_status(ctx: CallContext, req: HyperPodStatusRequest) -> StageStatus:
    """The HyperPod stage of a cluster: never a bare null — state SUCCEEDED (InService), FAILED (with the
    reason and a hint) or IN_PROGRESS (with the current step and node counts), plus what SageMaker reports
    right now. Poll with wait_seconds(30) until terminal is true."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    name = hyperpod_cluster_name(row)

    async def look() -> str | None:
        cluster = await cached_describe(ctx.app, row.region, name)
        return str(cluster["ClusterStatus"]) if cluster else "NOT_FOUND"

    return await stage_status(ctx, tag, "hyperpod", ("hyperpod_create", "cluster_create"), look)
