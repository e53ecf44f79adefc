"""The EKS stage of cluster creation: network, IAM, the EKS control plane, access; and its status tools."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws import ec2_network
from instantstart.aws import eks as eks_api
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import InvalidInput
from instantstart.kube.client import preload_in_background
from instantstart.manifests import iam_policies as pol
from instantstart.manifests.network import AddressPlan, validate_plan
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base import iam as iam_svc
from instantstart.services.base import network as net
from instantstart.services.base import vpc_reuse
from instantstart.services.base.nat_wait import wait_nat
from instantstart.services.base.params import AddressPlanParams, EksParams, stored
from instantstart.services.base.registry import (
    RegionScope,
    default_hyperpod_name,
    get_cluster,
    insert_cluster,
    mirror_pipeline_stages,
    record_details,
    resolve_tag,
    scope_region,
    submit_for_cluster,
)
from instantstart.services.base.stage_status import StageStatus, stage_status
from instantstart.services.cluster import eks_control_plane as eks_svc
from instantstart.services.cluster.eks_steps import access_and_oidc, active_check, ensure_execution_role, foundations
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow, utcnow
from instantstart.validation import AccessCidr, ClusterTag, ComputeSubnetCidr, Region, SubnetCidr, VpcCidr

EKS_TIMEOUT = 45 * 60
VPC_ID_DOC = (
    "Reuse this VPC (not with vpcCidr): in the Region, DNS support and DNS hostnames on, room for a /20 and four"
    " small subnets. The cluster adds only its own tagged subnets, routes, NAT gateway, security group (and an"
    " internet gateway if none is attached) and never changes the VPC's own resources."
)
ACCESS_DOC = (
    "Who may reach the public Kubernetes API endpoint (the private endpoint is always on). Default: the"
    " INSTANTSTART_EKS_PUBLIC_ACCESS_CIDRS setting; an empty list makes the endpoint private only."
)


class CreateEksRequest(WireModel):
    """Start the EKS stage. Addresses are chosen to avoid the Region's VPCs unless vpcCidr is given."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Generated when absent.")
    region: Region | None = None
    vpc_cidr: VpcCidr | None = None
    endpoint_public_access_cidrs: list[AccessCidr] | None = Field(default=None, max_length=40, description=ACCESS_DOC)
    vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$", description=VPC_ID_DOC)
    kubernetes_version: str | None = Field(default=None, pattern=r"^1\.(2[89]|3[0-9])$")


class CreateEksWithCidrRequest(WireModel):
    """Start the EKS stage with every address given explicitly (validated before anything is created)."""

    cluster_tag: ClusterTag
    region: Region
    vpc_cidr: VpcCidr
    public_subnet1_cidr: SubnetCidr
    public_subnet2_cidr: SubnetCidr
    eks_private_subnet1_cidr: SubnetCidr
    eks_private_subnet2_cidr: SubnetCidr
    hyper_pod_private_subnet_cidr: ComputeSubnetCidr
    endpoint_public_access_cidrs: list[AccessCidr] | None = Field(default=None, max_length=40, description=ACCESS_DOC)
    vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    kubernetes_version: str | None = Field(default=None, pattern=r"^1\.(2[89]|3[0-9])$")


class StatusRequest(WireModel):
    """Which cluster (the active one when absent)."""

    cluster_tag: ClusterTag | None = None


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
        hyperpod_cluster_name=default_hyperpod_name(tag),
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
    """Network (VPC, subnets, security group) and IAM → EKS control plane, waited for while the routes out of
    the subnets, the execution role and the caller are made → NAT gateway available → access entry and OIDC."""
    p = stage.params_as(EksParams)
    tag, region = p.cluster_tag, p.region
    app = stage.app
    n = net.NetCtx(aws=app.aws, db=app.db, cluster_tag=tag, operation_id=stage.operation_id, region=region)
    common = {"cluster_tag": tag, "operation_id": stage.operation_id, "region": region}
    name = eks_svc.eks_cluster_name(tag)
    # The execution role needs the VPC and the bucket (its policy is scoped to them) and is not needed before
    # the HyperPod stage: it is made while the EKS control plane is created.
    network, bucket, account, eks_role = await foundations(stage, p, n, name, common)
    scope = pol.Scope(account, region, tag, name, bucket, network["vpcId"])
    version = p.kubernetes_version or app.settings.kubernetes_version
    await stage.progress(f"EKS control plane {name} (Kubernetes {version}): creating")
    await blocking(
        eks_svc.ensure_cluster,
        app.aws,
        app.db,
        name=name,
        version=version,
        role_arn=eks_role,
        subnet_ids=network["eksSubnetIds"],
        security_group_id=network["securityGroupId"],
        public_access_cidrs=public_access_cidrs(p.endpoint_public_access_cidrs, app.settings.eks_public_access_cidrs),
        **common,
    )

    # What the later stages use, loaded while the control plane is created instead of on their critical path.
    preload_in_background()

    async def egress() -> None:
        # Internet and NAT gateways, routes, the S3 endpoint: not needed by CreateCluster, so made meanwhile (no
        # progress message: the stage keeps saying what it waits for, the EKS control plane).
        network.update(await blocking(net.ensure_egress, n, network))
        await record_details(stage, tag, network=network)

    _, _, exec_role, principal = await asyncio.gather(
        wait_until(stage, active_check(stage, region, name), limit_seconds=EKS_TIMEOUT, what=f"EKS cluster {name}"),
        egress(),
        ensure_execution_role(stage, scope, common),
        blocking(iam_svc.caller_principal, app.aws, region),
    )
    await wait_nat(stage, region, str(network["natGatewayId"]))
    cluster, oidc = await access_and_oidc(stage, region, name, principal, common)
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
    await record_details(stage, tag, **outputs)
    return outputs


EKS_STAGE = StageSpec("eks", stage_eks, max_attempts=5, timeout_seconds=EKS_TIMEOUT + 600, backoff_seconds=5)
KINDS.register(
    OperationKind(name="cluster_create_eks", params=EksParams, stages=(EKS_STAGE,), mirror=mirror_pipeline_stages)
)


def public_access_cidrs(given: list[str] | None, default: list[str]) -> list[str]:
    """The CIDRs allowed to the public API endpoint: the request's, else the setting (empty = private only)."""
    return list(given if given is not None else default)


def _plan_params(req: CreateEksWithCidrRequest) -> AddressPlanParams:
    plan = AddressPlan(
        vpc=req.vpc_cidr,
        public=(req.public_subnet1_cidr, req.public_subnet2_cidr),
        eks_private=(req.eks_private_subnet1_cidr, req.eks_private_subnet2_cidr),
        compute=req.hyper_pod_private_subnet_cidr,
    )
    validate_plan(plan)
    return AddressPlanParams(
        vpc=plan.vpc, public=list(plan.public), eks_private=list(plan.eks_private), compute=plan.compute
    )


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
    if req.vpc_id:  # refused before anything is recorded: not in the Region, DNS off, no room
        await blocking(vpc_reuse.require_reusable, ctx.app.aws, region, req.vpc_id, tag)
    params = EksParams(
        cluster_tag=tag,
        region=region,
        vpc_cidr=req.vpc_cidr,
        vpc_id=req.vpc_id,
        kubernetes_version=req.kubernetes_version,
        endpoint_public_access_cidrs=req.endpoint_public_access_cidrs,
    )
    return await submit_pipeline(
        ctx, "cluster_create_eks", tag, region, stored(params), "cluster_get_eks_creation_status"
    )


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
    params = EksParams(
        cluster_tag=req.cluster_tag,
        region=req.region,
        vpc_cidr=req.vpc_cidr,
        vpc_id=req.vpc_id,
        kubernetes_version=req.kubernetes_version,
        endpoint_public_access_cidrs=req.endpoint_public_access_cidrs,
        plan=plan,
    )
    return await submit_pipeline(
        ctx, "cluster_create_eks", req.cluster_tag, req.region, stored(params), "cluster_get_eks_creation_status"
    )


@operation("cluster_get_eks_creation_status", method="GET", path="/clusters/eks-status", example={})
async def cluster_get_eks_creation_status(ctx: CallContext, req: StatusRequest) -> StageStatus:
    """The EKS stage of a cluster (the active one when clusterTag is absent): state (IN_PROGRESS,
    SUCCEEDED, FAILED …), the current step's message, elapsed time, the error with a hint, and what EKS
    reports for the control plane right now. Poll with wait_seconds(30) until terminal is true."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)

    async def look() -> str | None:
        async def fetch() -> str | None:
            cluster = await blocking(eks_api.describe_cluster, ctx.app.aws, row.region, row.eks_cluster_name)
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
        return await blocking(ec2_network.availability_zones, ctx.app.aws, region)

    zones = await ctx.app.cache.get(f"azs:{region}", fetch)
    return ZonesResult(region=region, availability_zones=zones)


