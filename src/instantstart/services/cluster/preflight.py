"""Decisions before anything is created: what this account can run where, and typed blockers and warnings."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws.errors import translate
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.errors import InstantStartError
from instantstart.services.cluster import network as net
from instantstart.services.core.instance_types import catalog, lookup
from instantstart.services.core.registry import RegionScope, scope_region
from instantstart.services.core.stages import blocking
from instantstart.validation import ClusterTag, Region


class InstanceAvailability(WireModel):
    """One instance type: its accelerators, where it is offered, and quota headroom for HyperPod."""

    instance_type: str
    gpus: int
    neuron_devices: int
    accelerator: str | None
    vcpus: int
    memory_gib: int
    efa_interfaces: int
    efa_only_eligible: bool
    availability_zones: list[str]
    quota: float | None = Field(description="SageMaker '<type> for cluster usage' quota (None: unknown).")
    in_use: int
    headroom: float | None


class AvailableInstancesResult(WireModel):
    """Instance types this account and Region can run, per AZ, with quota headroom."""

    region: str
    instances: list[InstanceAvailability]


class Finding(WireModel):
    """A blocker (creation would fail) or a warning (it may fail or cost more), with what to do."""

    code: str
    message: str
    hint: str
    field: str | None = None


class PlanCreateRequest(WireModel):
    """The decisions a cluster creation would make."""

    cluster_tag: ClusterTag | None = None
    region: Region | None = None
    vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    instance_type: str = Field(description="ml.* instance type of the accelerated group.")
    instance_count: int = Field(ge=0, le=6758)
    availability_zone: str = Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$")
    training_plan_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:\d{12}:training-plan/[a-zA-Z0-9\-]+$"
    )
    compute_subnet_id: str | None = Field(default=None, pattern=r"^subnet-[0-9a-f]{8,17}$")


class PlanCreateResult(WireModel):
    """Whether creation can go ahead, and why not."""

    ok: bool
    blockers: list[Finding]
    warnings: list[Finding]
    checked: list[str]


def _quotas(sq: Any) -> dict[str, float]:
    names: dict[str, float] = {}
    for service in ("sagemaker", "vpc", "ec2"):
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"ServiceCode": service, "MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            page = sq.list_service_quotas(**kwargs)
            for quota in page.get("Quotas", []):
                names[quota["QuotaName"]] = float(quota["Value"])
            token = page.get("NextToken")
            if not token:
                break
    return names


def _in_use(sm: Any) -> dict[str, int]:
    """Instances of each type in this Region's HyperPod clusters (target counts)."""
    used: dict[str, int] = {}
    for summary in sm.list_clusters(MaxResults=100).get("ClusterSummaries", []):
        cluster = sm.describe_cluster(ClusterName=summary["ClusterName"])
        for group in cluster.get("InstanceGroups", []):
            kind = group.get("InstanceType")
            if kind:
                used[kind] = used.get(kind, 0) + int(group.get("TargetCount", group.get("CurrentCount", 0)))
    return used


def _offered(ec2: Any, names: list[str]) -> dict[str, list[str]]:
    """EC2 instance type (no ml. prefix) → AZs offering it."""
    offered: dict[str, list[str]] = {}
    paginator = ec2.get_paginator("describe_instance_type_offerings")
    for page in paginator.paginate(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": names}]
    ):
        for offer in page.get("InstanceTypeOfferings", []):
            offered.setdefault(offer["InstanceType"], []).append(offer["Location"])
    return {k: sorted(v) for k, v in offered.items()}


def available_instances(ctx: CallContext, region: str) -> AvailableInstancesResult:
    """Blocking: what the Region offers per AZ and the quota headroom of every known type."""
    aws = ctx.app.aws
    try:
        facts = catalog()
        offered = _offered(aws.client("ec2", region), [f.ec2_name for f in facts.values()])
        quotas = _quotas(aws.client("service-quotas", region))
        used = _in_use(aws.client("sagemaker", region))
    except InstantStartError:
        raise
    except Exception as exc:
        raise translate(exc, "look up instance offerings and quotas") from exc
    items = []
    for name, fact in facts.items():
        zones = offered.get(fact.ec2_name, [])
        quota = quotas.get(f"{name} for cluster usage")
        in_use = used.get(name, 0)
        items.append(
            InstanceAvailability(
                instance_type=name,
                gpus=fact.gpus,
                neuron_devices=fact.neuron,
                accelerator=fact.accelerator,
                vcpus=fact.vcpus,
                memory_gib=fact.memory_gib,
                efa_interfaces=fact.efa,
                efa_only_eligible=fact.efa_only_eligible,
                availability_zones=zones,
                quota=quota,
                in_use=in_use,
                headroom=None if quota is None else quota - in_use,
            )
        )
    return AvailableInstancesResult(region=region, instances=items)


@operation("cluster_get_available_instances", method="GET", path="/instances", example={})
async def cluster_get_available_instances(ctx: CallContext, req: RegionScope) -> AvailableInstancesResult:
    """HyperPod instance types this account can run in the Region of `region`, else of the cluster
    (clusterTag, else the cluster being created, else the active one), else the server's: accelerators,
    vCPUs, memory, EFA, the AZs that offer each type, and the SageMaker cluster-usage quota in use."""
    region = await to_thread.run_sync(scope_region, ctx.app.db, req, ctx.app.settings.aws_region)

    async def fetch() -> AvailableInstancesResult:
        return await blocking(available_instances, ctx, region)

    result: AvailableInstancesResult = await ctx.app.cache.get(f"instances:{region}", fetch)
    return result


def plan(ctx: CallContext, req: PlanCreateRequest, region: str) -> PlanCreateResult:
    """Blocking: every check, collecting blockers and warnings instead of stopping at the first."""
    blockers: list[Finding] = []
    warnings: list[Finding] = []
    checked: list[str] = []
    fact = lookup(req.instance_type)
    aws = ctx.app.aws
    try:
        zones = net.availability_zones(aws.client("ec2", region))
        checked.append("availability zone")
        names = [z["name"] for z in zones]
        if req.availability_zone not in names:
            blockers.append(
                Finding(
                    code="AZ_NOT_IN_REGION",
                    field="availabilityZone",
                    message=f"{req.availability_zone} is not an Availability Zone of {region}.",
                    hint=f"Choose one of {', '.join(names)}.",
                )
            )
        offered = _offered(aws.client("ec2", region), [fact.ec2_name]).get(fact.ec2_name, [])
        checked.append("instance type offering")
        if req.availability_zone in names and req.availability_zone not in offered:
            blockers.append(
                Finding(
                    code="NOT_OFFERED_IN_AZ",
                    field="availabilityZone",
                    message=f"{fact.name} is not offered in {req.availability_zone}.",
                    hint=f"Offered in: {', '.join(offered) or 'no AZ of this Region'}.",
                )
            )
        quotas = _quotas(aws.client("service-quotas", region))
        used = _in_use(aws.client("sagemaker", region))
        checked.append("service quotas")
        quota = quotas.get(f"{fact.name} for cluster usage")
        if quota is not None and used.get(fact.name, 0) + req.instance_count > quota:
            blockers.append(
                Finding(
                    code="QUOTA_EXCEEDED",
                    field="instanceCount",
                    message=f"{req.instance_count} x {fact.name} would exceed the quota of {quota:g} "
                    f"({used.get(fact.name, 0)} already in use).",
                    hint="Request an increase of the SageMaker quota "
                    f"'{fact.name} for cluster usage' in Service Quotas, or ask for fewer.",
                )
            )
        if not req.vpc_id:
            vpcs = len(aws.client("ec2", region).describe_vpcs()["Vpcs"])
            limit = quotas.get("VPCs per Region")
            checked.append("VPC quota")
            if limit is not None and vpcs + 1 > limit:
                blockers.append(
                    Finding(
                        code="VPC_QUOTA",
                        field="vpcId",
                        message=f"{vpcs} VPCs exist and the quota is {limit:g}.",
                        hint="Reuse a VPC (vpcId) or raise 'VPCs per Region'.",
                    )
                )
        if req.training_plan_arn:
            described = aws.client("sagemaker", region).describe_training_plan(TrainingPlanName=req.training_plan_arn)
            plan_zones = sorted(
                {
                    r.get("AvailabilityZone")
                    for r in described.get("ReservedCapacitySummaries", [])
                    if r.get("AvailabilityZone")
                }
            )
            checked.append("training plan zone")
            if plan_zones and req.availability_zone not in plan_zones:
                blockers.append(
                    Finding(
                        code="TRAINING_PLAN_AZ",
                        field="availabilityZone",
                        message=f"The training plan's capacity is in {', '.join(plan_zones)}, "
                        f"not {req.availability_zone}.",
                        hint=f"Use availabilityZone {plan_zones[0]}.",
                    )
                )
            if described.get("Status") not in ("Active", "Scheduled"):
                warnings.append(
                    Finding(
                        code="TRAINING_PLAN_STATUS",
                        field="trainingPlanArn",
                        message=f"The training plan is {described.get('Status')}.",
                        hint="Nodes launch only while the plan is Active.",
                    )
                )
        if req.compute_subnet_id:
            subnet = aws.client("ec2", region).describe_subnets(SubnetIds=[req.compute_subnet_id])["Subnets"][0]
            checked.append("free addresses")
            free = int(subnet.get("AvailableIpAddressCount", 0))
            # Each node takes its own address plus addresses for its pods (VPC CNI); 32 per node is a floor.
            need = req.instance_count * 32
            if free < need:
                blockers.append(
                    Finding(
                        code="SUBNET_TOO_SMALL",
                        field="computeSubnetId",
                        message=f"{req.compute_subnet_id} has {free} free addresses; {need} are needed.",
                        hint="Leave computeSubnetId out to get a /20 compute subnet.",
                    )
                )
            if subnet.get("AvailabilityZone") != req.availability_zone:
                blockers.append(
                    Finding(
                        code="SUBNET_AZ",
                        field="computeSubnetId",
                        message=f"{req.compute_subnet_id} is in {subnet.get('AvailabilityZone')}.",
                        hint=f"Choose a subnet in {req.availability_zone}.",
                    )
                )
        if fact.gpus == 0 and fact.neuron == 0:
            warnings.append(
                Finding(
                    code="NO_ACCELERATOR",
                    field="instanceType",
                    message=f"{fact.name} has no GPU or Trainium device.",
                    hint="Use an accelerated type for training and inference.",
                )
            )
    except InstantStartError:
        raise
    except Exception as exc:
        raise translate(exc, "run the creation preflight") from exc
    return PlanCreateResult(ok=not blockers, blockers=blockers, warnings=warnings, checked=checked)


@operation(
    "cluster_plan_create",
    method="POST",
    path="/clusters/plan",
    mutating=False,
    example={"instanceType": "ml.g6.4xlarge", "instanceCount": 1, "availabilityZone": "us-west-2c"},
)
async def cluster_plan_create(ctx: CallContext, req: PlanCreateRequest) -> PlanCreateResult:
    """Preflight before anything is created: the AZ belongs to the Region and offers the instance type,
    SageMaker quota headroom for the count, a training plan's zone against the chosen AZ, free addresses in
    a given compute subnet, the VPC quota for a new VPC. Returns typed blockers and warnings with hints;
    ok is true when nothing blocks. Changes nothing."""
    region = req.region or ctx.app.settings.aws_region
    return await to_thread.run_sync(plan, ctx, req, region)
