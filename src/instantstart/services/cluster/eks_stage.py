"""The EKS stage of cluster creation: network, IAM, the EKS control plane, access; and its status tools."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.errors import InvalidInput
from instantstart.manifests.network import AddressPlan, validate_plan
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.runner import StageContext
from instantstart.services.cluster import eks_control_plane as eks_svc
from instantstart.services.cluster import iam as iam_svc
from instantstart.services.cluster import network as net
from instantstart.services.core.registry import (
    RegionScope,
    cluster_target,
    get_cluster,
    insert_cluster,
    resolve_tag,
    scope_region,
    submit_for_cluster,
)
from instantstart.services.core.stages import blocking, mark, project_bucket, wait_until
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow, utcnow
from instantstart.validation import ClusterTag, Region

EKS_TIMEOUT = 45 * 60


def hyperpod_cluster_name(tag: str) -> str:
    """`hp-cluster-<tag>`."""
    return f"hp-cluster-{tag}"


class CreateEksRequest(WireModel):
    """Start the EKS stage. Addresses are chosen to avoid the Region's VPCs unless vpcCidr is given."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Generated when absent.")
    region: Region | None = None
    vpc_cidr: str | None = Field(default=None, description="CIDR of a new VPC (/16-/18), e.g. 10.1.0.0/16.")
    vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$", description="Reuse this VPC.")
    kubernetes_version: str | None = Field(default=None, pattern=r"^1\.(2[89]|3[0-9])$")


class CreateEksWithCidrRequest(WireModel):
    """Start the EKS stage with every address given explicitly (validated before anything is created)."""

    cluster_tag: ClusterTag
    region: Region
    vpc_cidr: str
    public_subnet1_cidr: str
    public_subnet2_cidr: str
    eks_private_subnet1_cidr: str
    eks_private_subnet2_cidr: str
    hyper_pod_private_subnet_cidr: str
    vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    kubernetes_version: str | None = Field(default=None, pattern=r"^1\.(2[89]|3[0-9])$")


class StatusRequest(WireModel):
    """Which cluster (the active one when absent)."""

    cluster_tag: ClusterTag | None = None


class StageStatus(WireModel):
    """Where a cluster's creation stage stands; never an ambiguous null."""

    cluster_tag: str
    stage: str
    state: str = Field(description="NOT_STARTED, IN_PROGRESS, SUCCEEDED, FAILED or CANCELLED")
    terminal: bool
    operation_id: str | None
    message: str
    elapsed_seconds: float
    error: dict[str, Any] | None
    resource_status: str | None = Field(description="What AWS reports for the resource right now.")
    details: dict[str, Any]


class ZonesResult(WireModel):
    """Availability Zones of the Region with their IDs."""

    region: str
    availability_zones: list[dict[str, str]]


def new_tag() -> str:
    """A generated cluster tag."""
    return "is-" + secrets.token_hex(3)


def register_cluster(db: Database, tag: str, region: str, details: dict[str, Any]) -> None:
    """Insert the cluster row; a tag in use is a Conflict."""
    now = utcnow()
    row = ClusterRow(
        tag=tag,
        region=region,
        eks_cluster_name=eks_svc.eks_cluster_name(tag),
        hyperpod_cluster_name=hyperpod_cluster_name(tag),
        imported=False,
        stages={"eks": "PENDING"},
        details=details,
        created_at=now,
        updated_at=now,
    )
    insert_cluster(db, row, hint="Choose another clusterTag, or continue with the existing cluster (cluster_list_all).")


async def submit_pipeline(
    ctx: CallContext, kind: str, tag: str, region: str, params: dict[str, Any], status_tool: str
) -> OperationRef:
    """Record the cluster (if new) and the operation; an idempotent retry returns the same operation."""
    replayed = await ctx.app.runner.replay(kind, ctx.idempotency_key, status_tool=status_tool, poll_after_seconds=30)
    if replayed is not None:
        return replayed
    await to_thread.run_sync(register_cluster, ctx.app.db, tag, region, {"requested": params})
    return await submit_for_cluster(ctx, kind, tag, params, status_tool=status_tool, poll_after_seconds=30)


async def stage_eks(stage: StageContext) -> dict[str, Any]:
    """Network → IAM → EKS control plane (waited for) → access entry and OIDC provider."""
    p = stage.params
    tag, region = p["clusterTag"], p["region"]
    app = stage.app
    await mark(stage, tag, "eks", "RUNNING")
    ec2 = app.aws.client("ec2", region)
    n = net.NetCtx(ec2=ec2, db=app.db, cluster_tag=tag, operation_id=stage.operation_id, region=region)
    plan = AddressPlan(**p["plan"]) if p.get("plan") else None
    await stage.progress("network: VPC, subnets, internet and NAT gateways, routes, S3 endpoint, security group")
    network = await blocking(net.ensure_network, n, vpc_id=p.get("vpcId"), plan=plan, vpc_cidr=p.get("vpcCidr"))
    await mark(stage, tag, "eks", "RUNNING", network=network)
    await stage.progress("IAM: EKS cluster role and HyperPod execution role")
    bucket = await blocking(project_bucket, stage, region, tag)
    iam = app.aws.client("iam", region)
    common = {"cluster_tag": tag, "operation_id": stage.operation_id, "region": region}
    eks_role = await blocking(
        iam_svc.ensure_role,
        iam,
        app.db,
        name=f"instantstart-{tag}-eks",
        service="eks.amazonaws.com",
        managed=[iam_svc.EKS_CLUSTER_POLICY],
        description="EKS control plane of an InstantStart cluster",
        **common,
    )
    exec_role = await blocking(
        iam_svc.ensure_role,
        iam,
        app.db,
        name=f"instantstart-{tag}-hyperpod",
        service="sagemaker.amazonaws.com",
        managed=[iam_svc.HYPERPOD_INSTANCE_POLICY],
        inline=iam_svc.execution_inline_policy(bucket),
        description="HyperPod instance groups of an InstantStart cluster",
        **common,
    )
    name = eks_svc.eks_cluster_name(tag)
    eks = app.aws.client("eks", region)
    version = p.get("kubernetesVersion") or app.settings.kubernetes_version
    await stage.progress(f"EKS control plane {name} (Kubernetes {version}): creating")
    await blocking(
        eks_svc.ensure_cluster,
        eks,
        app.db,
        name=name,
        version=version,
        role_arn=eks_role,
        subnet_ids=network["eksSubnetIds"],
        security_group_id=network["securityGroupId"],
        **common,
    )

    async def active() -> tuple[bool, str]:
        cluster = await blocking(eks_svc.describe, eks, name)
        status = (cluster or {}).get("status", "MISSING")
        if status in ("FAILED", "DELETING", "MISSING"):
            from instantstart.operations.kinds import PermanentError

            raise PermanentError(
                f"EKS cluster {name} is {status}.",
                code="PROVIDER_ERROR",
                hint="Delete the cluster and create it again.",
            )
        return status == "ACTIVE", f"EKS control plane {name}: {status}"

    await wait_until(stage, active, limit_seconds=EKS_TIMEOUT, what=f"EKS cluster {name}")
    cluster = await blocking(eks_svc.describe, eks, name) or {}
    principal = await blocking(iam_svc.caller_principal, app.aws.client("sts", region))
    await stage.progress("access entry for the control plane and the cluster's OIDC provider")
    await blocking(eks_svc.ensure_admin_access, eks, name=name, principal_arn=principal)
    issuer = cluster.get("identity", {}).get("oidc", {}).get("issuer")
    oidc = await blocking(iam_svc.ensure_oidc_provider, iam, app.db, issuer=issuer, **common) if issuer else None
    outputs = {
        "eksClusterName": name,
        "eksClusterArn": cluster.get("arn"),
        "kubernetesVersion": version,
        "eksRoleArn": eks_role,
        "executionRoleArn": exec_role,
        "oidcProviderArn": oidc,
        "bucket": bucket,
        "controlPlanePrincipal": principal,
        **network,
    }
    await mark(stage, tag, "eks", "SUCCEEDED", **outputs)
    return outputs


EKS_STAGE = StageSpec("eks", stage_eks, max_attempts=5, timeout_seconds=EKS_TIMEOUT + 600, backoff_seconds=5)
KINDS.register(OperationKind(name="cluster_create_eks", stages=(EKS_STAGE,)))


def _plan_params(req: CreateEksWithCidrRequest) -> dict[str, Any]:
    plan = AddressPlan(
        vpc=req.vpc_cidr,
        public=(req.public_subnet1_cidr, req.public_subnet2_cidr),
        eks_private=(req.eks_private_subnet1_cidr, req.eks_private_subnet2_cidr),
        compute=req.hyper_pod_private_subnet_cidr,
    )
    validate_plan(plan)
    return {
        "vpc": plan.vpc,
        "public": list(plan.public),
        "eks_private": list(plan.eks_private),
        "compute": plan.compute,
    }


@operation(
    "cluster_create_eks",
    destructive=False,
    idempotent=False,
    method="POST",
    path="/clusters/eks",
    completion="cluster_get_eks_creation_status",
    example={"clusterTag": "faces", "region": "us-west-2", "vpcCidr": "10.77.0.0/16"},
)
async def cluster_create_eks(ctx: CallContext, req: CreateEksRequest) -> OperationRef:
    """Start the EKS stage of a new cluster: VPC (new, addresses chosen to avoid the Region's VPCs, or
    vpcId reused), two public and two EKS control-plane subnets in two AZs, internet and NAT gateways,
    routes, S3 gateway endpoint, a self-referencing security group, least-privilege IAM roles, the
    EKS cluster eks-cluster-<tag> (API authentication mode, access for this control plane) and its OIDC
    provider. Takes 10-15 minutes on AWS. clusterTag is generated when absent and must be unused."""
    if req.vpc_cidr and req.vpc_id:
        raise InvalidInput(
            "Invalid input: vpcCidr: give vpcCidr for a new VPC or vpcId to reuse one, not both",
            details={"fields": [{"field": "vpcCidr", "message": "conflicts with vpcId"}]},
        )
    if req.vpc_cidr:
        from instantstart.manifests.network import plan_addresses

        plan_addresses(req.vpc_cidr)  # validates size and syntax with a field-named error
    tag = req.cluster_tag or new_tag()
    region = req.region or ctx.app.settings.aws_region
    params = {
        "clusterTag": tag,
        "region": region,
        "vpcCidr": req.vpc_cidr,
        "vpcId": req.vpc_id,
        "kubernetesVersion": req.kubernetes_version,
    }
    return await submit_pipeline(ctx, "cluster_create_eks", tag, region, params, "cluster_get_eks_creation_status")


@operation(
    "cluster_create_eks_with_cidr",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/clusters/eks-with-cidr",
    completion="cluster_get_eks_creation_status",
    example={
        "clusterTag": "faces2",
        "region": "us-west-2",
        "vpcCidr": "10.78.0.0/16",
        "publicSubnet1Cidr": "10.78.0.0/24",
        "publicSubnet2Cidr": "10.78.1.0/24",
        "eksPrivateSubnet1Cidr": "10.78.2.0/24",
        "eksPrivateSubnet2Cidr": "10.78.3.0/24",
        "hyperPodPrivateSubnetCidr": "10.78.16.0/20",
    },
)
async def cluster_create_eks_with_cidr(ctx: CallContext, req: CreateEksWithCidrRequest) -> OperationRef:
    """As cluster_create_eks, with every CIDR explicit: all subnets must lie inside vpcCidr, none may
    overlap, and the HyperPod compute subnet must be /20 or larger. Refused before anything is created."""
    plan = _plan_params(req)
    params = {
        "clusterTag": req.cluster_tag,
        "region": req.region,
        "vpcCidr": req.vpc_cidr,
        "vpcId": req.vpc_id,
        "kubernetesVersion": req.kubernetes_version,
        "plan": plan,
    }
    return await submit_pipeline(
        ctx, "cluster_create_eks", req.cluster_tag, req.region, params, "cluster_get_eks_creation_status"
    )


async def stage_status(
    ctx: CallContext, tag: str, stage_name: str, kinds: tuple[str, ...], resource: Any = None
) -> StageStatus:
    """The latest operation running `stage_name` for the cluster, plus a fresh (cached) look at the resource."""
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    ops = []
    for kind in kinds:
        found, _ = await blocking(ctx.app.runner.store.list_operations, target=cluster_target(tag), kind=kind, limit=1)
        ops.extend(found)
    ops.sort(key=lambda o: o.created_at, reverse=True)
    current = resource() if resource else None
    resource_status = await current if current is not None else None
    if not ops:
        state = (row.stages or {}).get(stage_name, "NOT_STARTED")
        return StageStatus(
            cluster_tag=tag,
            stage=stage_name,
            state=_state(state),
            terminal=state != "RUNNING",
            operation_id=None,
            message="no operation has run this stage",
            elapsed_seconds=0.0,
            error=None,
            resource_status=resource_status,
            details=row.details or {},
        )
    op = ops[0]
    stage = next((s for s in op.stages if s.name == stage_name), op.stages[0])
    state = _state(stage.status.value)
    started = stage.started_at or op.created_at
    ended = stage.finished_at or (op.finished_at if op.status.value in ("FAILED", "CANCELLED") else None)
    elapsed = ((ended or utcnow()) - started).total_seconds() if isinstance(started, datetime) else 0.0
    return StageStatus(
        cluster_tag=tag,
        stage=stage_name,
        state=state,
        terminal=state in ("SUCCEEDED", "FAILED", "CANCELLED"),
        operation_id=op.operation_id,
        message=stage.message or op.status.value,
        elapsed_seconds=round(elapsed, 1),
        error=op.error.model_dump(by_alias=True) if op.error and state != "SUCCEEDED" else None,
        resource_status=resource_status,
        details=row.details or {},
    )


def _state(status: str) -> str:
    return {"PENDING": "IN_PROGRESS", "RUNNING": "IN_PROGRESS"}.get(status, status)


@operation("cluster_get_eks_creation_status", method="GET", path="/clusters/eks-status", example={})
async def cluster_get_eks_creation_status(ctx: CallContext, req: StatusRequest) -> StageStatus:
    """The EKS stage of a cluster (the active one when clusterTag is absent): state (IN_PROGRESS,
    SUCCEEDED, FAILED …), the current step's message, elapsed time, the error with a hint, and what EKS
    reports for the control plane right now. Poll with wait_seconds(30) until terminal is true."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)

    async def look() -> str | None:
        async def fetch() -> str | None:
            cluster = await blocking(eks_svc.describe, ctx.app.aws.client("eks", row.region), row.eks_cluster_name)
            return cluster.get("status") if cluster else "NOT_FOUND"

        value: str | None = await ctx.app.cache.get(f"eks:{row.region}:{row.eks_cluster_name}", fetch)
        return value

    return await stage_status(ctx, tag, "eks", ("cluster_create_eks", "cluster_create"), look)


@operation("cluster_get_availability_zones", method="GET", path="/availability-zones", example={})
async def cluster_get_availability_zones(ctx: CallContext, req: RegionScope) -> ZonesResult:
    """Availability Zone names with their AZ IDs in the Region of `region`, else of the cluster (clusterTag,
    else the cluster being created, else the active one), else the server's (AZ names differ between
    accounts; IDs do not, which matters for training plans and capacity reservations)."""
    region = await to_thread.run_sync(scope_region, ctx.app.db, req, ctx.app.settings.aws_region)

    async def fetch() -> list[dict[str, str]]:
        return await blocking(net.availability_zones, ctx.app.aws.client("ec2", region))

    zones = await ctx.app.cache.get(f"azs:{region}", fetch)
    return ZonesResult(region=region, availability_zones=zones)
