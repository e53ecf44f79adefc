"""cluster_create: every decision up front, then the six stages as one resumable operation."""

from __future__ import annotations

import dataclasses
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import InvalidInput, PreconditionFailed
from instantstart.manifests.network import plan_addresses
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.services.base.params import CreateParams, StorageSpecParams, stored
from instantstart.services.base.registry import activate_cluster, mirror_pipeline_stages, reach_cluster
from instantstart.services.cluster.eks_stage import ACCESS_DOC, EKS_STAGE, VPC_ID_DOC, new_tag, submit_pipeline
from instantstart.services.cluster.hyperpod_stage import HYPERPOD_STAGE, HyperPodCreateRequest, hyperpod_params
from instantstart.services.cluster.preflight import PlanCreateRequest, plan
from instantstart.services.cluster.verification import VERIFICATION_STAGE
from instantstart.services.dependencies.stage import DEPENDENCIES_STAGE
from instantstart.services.storage.s3_claims import STORAGE_STAGE
from instantstart.validation import AccessCidr, ClusterTag, Region, VpcCidr

STAGES = ("eks", "activate", "dependencies", "hyperpod", "storage", "verification")


class CreateClusterRequest(WireModel):
    """Every decision of a new cluster (the same choices as the step-by-step tools)."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Generated when absent.")
    region: Region | None = None
    vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$", description=VPC_ID_DOC)
    vpc_cidr: VpcCidr | None = None
    endpoint_public_access_cidrs: list[AccessCidr] | None = Field(default=None, max_length=40, description=ACCESS_DOC)
    kubernetes_version: str | None = Field(default=None, pattern=r"^1\.(2[89]|3[0-9])$")
    instance_type: str = Field(description="ml.* instance type of the accelerated group, e.g. ml.g6.4xlarge.")
    instance_count: int = Field(ge=0, le=6758)
    availability_zone: str = Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$")
    capacity_type: str = Field(default="OnDemand", pattern=r"^(OnDemand|Spot)$")
    training_plan_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:\d{12}:training-plan/[a-zA-Z0-9\-]+$"
    )
    ebs_volume_size: int = Field(default=500, ge=1, le=16384)
    on_start_deep_health_checks: bool = False
    storage_name: str = Field(default="s3-claim", pattern=r"^[a-z0-9]([-a-z0-9]{0,58}[a-z0-9])?$")


async def stage_activate(stage: StageContext) -> dict[str, Any]:
    """Make the new cluster active and prove its Kubernetes API answers an EKS token made here."""
    tag = stage.params_as(CreateParams).cluster_tag
    await activate_cluster(stage, tag)
    return await reach_cluster(stage, tag)


ACTIVATE_STAGE = StageSpec(
    "activate", stage_activate, max_attempts=6, timeout_seconds=300, backoff_seconds=2, backoff_max_seconds=20
)
# The claim on the bucket needs the EKS cluster and the CSI driver, not the HyperPod nodes: it is made while
# HyperPod creates them (once CreateCluster is accepted), so it is off the critical path.
STORAGE_ALONGSIDE_HYPERPOD = dataclasses.replace(STORAGE_STAGE, alongside_previous=True)
KINDS.register(
    OperationKind(
        name="cluster_create",
        params=CreateParams,
        stages=(
            EKS_STAGE,
            ACTIVATE_STAGE,
            DEPENDENCIES_STAGE,
            HYPERPOD_STAGE,
            STORAGE_ALONGSIDE_HYPERPOD,
            VERIFICATION_STAGE,
        ),
        mirror=mirror_pipeline_stages,
    )
)


def _refuse_blockers(ctx: CallContext, req: CreateClusterRequest, region: str) -> None:
    """Run the cluster_plan_create preflight; its blockers refuse the request (PreconditionFailed naming each
    blocker and its field) before anything is created. Blocking."""
    preflight = plan(
        ctx,
        PlanCreateRequest(
            region=region,
            vpc_id=req.vpc_id,
            instance_type=req.instance_type,
            instance_count=req.instance_count,
            availability_zone=req.availability_zone,
            training_plan_arn=req.training_plan_arn,
        ),
        region,
    )
    if preflight.blockers:
        first = preflight.blockers[0]
        raise PreconditionFailed(
            f"The preflight found {len(preflight.blockers)} blocker(s): "
            + "; ".join(b.message for b in preflight.blockers),
            hint=first.hint,
            details={
                "blockers": [b.model_dump(by_alias=True) for b in preflight.blockers],
                "fields": [{"field": b.field, "message": b.message} for b in preflight.blockers if b.field],
            },
        )


@operation(
    "cluster_create",
    destructive=False,
    idempotent=False,
    method="POST",
    path="/clusters",
    completion="cluster_get_status",
    example={
        "clusterTag": "full",
        "instanceType": "ml.g6.4xlarge",
        "instanceCount": 1,
        "availabilityZone": "us-west-2c",
    },
)
async def cluster_create(ctx: CallContext, req: CreateClusterRequest) -> OperationRef:
    """Create a whole cluster in one operation, all decisions given up front: EKS control plane → active
    cluster → dependencies → HyperPod cluster (node recovery Automatic, continuous provisioning) → S3
    storage claim → verification (nodes Ready, GPUs counted, storage bound). The cluster_plan_create
    preflight runs first and its blockers refuse the request before anything is created. Each stage is
    recorded separately; a failed stage never undoes earlier ones and operation_retry resumes from it."""
    if req.vpc_cidr and req.vpc_id:
        raise InvalidInput(
            "Invalid input: vpcCidr: give vpcCidr for a new VPC or vpcId to reuse one, not both",
            details={"fields": [{"field": "vpcCidr", "message": "conflicts with vpcId"}]},
        )
    if req.vpc_cidr:
        plan_addresses(req.vpc_cidr)
    region = req.region or ctx.app.settings.aws_region
    tag = req.cluster_tag or new_tag()
    hp = hyperpod_params(
        tag,
        region,
        HyperPodCreateRequest.model_validate(
            {
                "acceleratedInstanceType": req.instance_type,
                "acceleratedInstanceCount": req.instance_count,
                "availabilityZone": req.availability_zone,
                "acceleratedEBSVolumeSize": req.ebs_volume_size,
                "acceleratedTrainingPlanArn": req.training_plan_arn,
                "capacityType": req.capacity_type,
                "onStartDeepHealthChecks": req.on_start_deep_health_checks,
            }
        ),
    )
    if await ctx.app.runner.replay("cluster_create", ctx.idempotency_key, status_tool="cluster_get_status") is None:
        await to_thread.run_sync(_refuse_blockers, ctx, req, region)
    params = CreateParams(
        cluster_tag=tag,
        region=region,
        vpc_cidr=req.vpc_cidr,
        vpc_id=req.vpc_id,
        kubernetes_version=req.kubernetes_version,
        endpoint_public_access_cidrs=req.endpoint_public_access_cidrs,
        hyperpod=hp.hyperpod,
        storage=StorageSpecParams(name=req.storage_name),
    )
    return await submit_pipeline(ctx, "cluster_create", tag, region, stored(params), "cluster_get_status")
