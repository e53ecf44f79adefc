"""Decisions before anything is created: what this account can run where, and typed blockers and warnings."""

from __future__ import annotations

import dataclasses

from anyio import to_thread
from pydantic import Field

from instantstart.aws import ec2_network, hyperpod
from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import translate
from instantstart.aws.quotas import quota_values
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.errors import InstantStartError
from instantstart.operations.waiting import blocking
from instantstart.services.base import vpc_reuse
from instantstart.services.base.registry import RegionScope, scope_region
from instantstart.services.core.instance_types import InstanceType, catalog, lookup
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


def _in_use(aws: AwsClients, region: str) -> dict[str, int]:
    """Instances of each type in this Region's HyperPod clusters (target counts)."""
    used: dict[str, int] = {}
    for cluster in hyperpod.list_clusters(aws, region):
        for group in cluster.get("InstanceGroups", []):
            kind = group.get("InstanceType")
            if kind:
                used[kind] = used.get(kind, 0) + int(group.get("TargetCount", group.get("CurrentCount", 0)))
    return used


def available_instances(ctx: CallContext, region: str) -> AvailableInstancesResult:
    """Blocking: what the Region offers per AZ and the quota headroom of every known type."""
    aws = ctx.app.aws
    try:
        facts = catalog()
        offered = ec2_network.instance_type_offerings(aws, region, [f.ec2_name for f in facts.values()])
        quotas = quota_values(aws, region)
        used = _in_use(aws, region)
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


@dataclasses.dataclass
class _Preflight:
    """One preflight run: the request, what was checked, and the findings so far."""

    aws: AwsClients
    region: str
    req: PlanCreateRequest
    fact: InstanceType
    blockers: list[Finding] = dataclasses.field(default_factory=list)
    warnings: list[Finding] = dataclasses.field(default_factory=list)
    checked: list[str] = dataclasses.field(default_factory=list)

    def block(self, code: str, field_name: str, message: str, hint: str) -> None:
        self.blockers.append(Finding(code=code, field=field_name, message=message, hint=hint))

    def warn(self, code: str, field_name: str, message: str, hint: str) -> None:
        self.warnings.append(Finding(code=code, field=field_name, message=message, hint=hint))

    def zone_and_offering(self) -> None:
        """The AZ belongs to the Region and offers the instance type."""
        req, fact = self.req, self.fact
        names = [z["name"] for z in ec2_network.availability_zones(self.aws, self.region)]
        self.checked.append("availability zone")
        if req.availability_zone not in names:
            self.block(
                "AZ_NOT_IN_REGION",
                "availabilityZone",
                f"{req.availability_zone} is not an Availability Zone of {self.region}.",
                f"Choose one of {', '.join(names)}.",
            )
        offered = ec2_network.instance_type_offerings(self.aws, self.region, [fact.ec2_name]).get(fact.ec2_name, [])
        self.checked.append("instance type offering")
        if req.availability_zone in names and req.availability_zone not in offered:
            self.block(
                "NOT_OFFERED_IN_AZ",
                "availabilityZone",
                f"{fact.name} is not offered in {req.availability_zone}.",
                f"Offered in: {', '.join(offered) or 'no AZ of this Region'}.",
            )

    def quotas(self) -> None:
        """SageMaker cluster-usage headroom for the count; the VPC quota when a new VPC is made."""
        req, fact = self.req, self.fact
        quotas = quota_values(self.aws, self.region)
        used = _in_use(self.aws, self.region)
        self.checked.append("service quotas")
        quota = quotas.get(f"{fact.name} for cluster usage")
        if quota is not None and used.get(fact.name, 0) + req.instance_count > quota:
            self.block(
                "QUOTA_EXCEEDED",
                "instanceCount",
                f"{req.instance_count} x {fact.name} would exceed the quota of {quota:g} "
                f"({used.get(fact.name, 0)} already in use).",
                "Request an increase of the SageMaker quota "
                f"'{fact.name} for cluster usage' in Service Quotas, or ask for fewer.",
            )
        if not req.vpc_id:
            vpcs = ec2_network.vpc_count(self.aws, self.region)
            limit = quotas.get("VPCs per Region")
            self.checked.append("VPC quota")
            if limit is not None and vpcs + 1 > limit:
                self.block(
                    "VPC_QUOTA",
                    "vpcId",
                    f"{vpcs} VPCs exist and the quota is {limit:g}.",
                    "Reuse a VPC (vpcId) or raise 'VPCs per Region'.",
                )

    def training_plan(self) -> None:
        """A training plan's capacity zone against the chosen AZ, and its status."""
        req = self.req
        if not req.training_plan_arn:
            return
        described = hyperpod.describe_training_plan(self.aws, self.region, req.training_plan_arn)
        summaries = described.get("ReservedCapacitySummaries", [])
        plan_zones = sorted({r.get("AvailabilityZone") for r in summaries if r.get("AvailabilityZone")})
        self.checked.append("training plan zone")
        if plan_zones and req.availability_zone not in plan_zones:
            self.block(
                "TRAINING_PLAN_AZ",
                "availabilityZone",
                f"The training plan's capacity is in {', '.join(plan_zones)}, not {req.availability_zone}.",
                f"Use availabilityZone {plan_zones[0]}.",
            )
        if described.get("Status") not in ("Active", "Scheduled"):
            self.warn(
                "TRAINING_PLAN_STATUS",
                "trainingPlanArn",
                f"The training plan is {described.get('Status')}.",
                "Nodes launch only while the plan is Active.",
            )

    def compute_subnet(self) -> None:
        """A given compute subnet: free addresses for the nodes and their pods, and its AZ."""
        req = self.req
        if not req.compute_subnet_id:
            return
        subnet = ec2_network.describe_subnets(self.aws, self.region, [req.compute_subnet_id])[0]
        self.checked.append("free addresses")
        free = int(subnet.get("AvailableIpAddressCount", 0))
        # Each node takes its own address plus addresses for its pods (VPC CNI); 32 per node is a floor.
        need = req.instance_count * 32
        if free < need:
            self.block(
                "SUBNET_TOO_SMALL",
                "computeSubnetId",
                f"{req.compute_subnet_id} has {free} free addresses; {need} are needed.",
                "Leave computeSubnetId out to get a /20 compute subnet.",
            )
        if subnet.get("AvailabilityZone") != req.availability_zone:
            self.block(
                "SUBNET_AZ",
                "computeSubnetId",
                f"{req.compute_subnet_id} is in {subnet.get('AvailabilityZone')}.",
                f"Choose a subnet in {req.availability_zone}.",
            )

    def reused_vpc(self) -> None:
        """A given vpcId: in the Region, available, DNS support and hostnames on, room for the cluster's subnets."""
        if not self.req.vpc_id:
            return
        self.checked.append("reused VPC")
        why = vpc_reuse.problem(self.aws, self.region, self.req.vpc_id)
        if why is not None:
            self.block(why.code, "vpcId", why.message, why.hint)

    def accelerator(self) -> None:
        """A type without GPU or Trainium is allowed, with a warning."""
        if self.fact.gpus == 0 and self.fact.neuron == 0:
            self.warn(
                "NO_ACCELERATOR",
                "instanceType",
                f"{self.fact.name} has no GPU or Trainium device.",
                "Use an accelerated type for training and inference.",
            )


def plan(ctx: CallContext, req: PlanCreateRequest, region: str) -> PlanCreateResult:
    """Blocking: every check, collecting blockers and warnings instead of stopping at the first."""
    run = _Preflight(aws=ctx.app.aws, region=region, req=req, fact=lookup(req.instance_type))
    try:
        run.zone_and_offering()
        run.quotas()
        run.training_plan()
        run.compute_subnet()
        run.reused_vpc()
        run.accelerator()
    except InstantStartError:
        raise
    except Exception as exc:
        raise translate(exc, "run the creation preflight") from exc
    return PlanCreateResult(ok=not run.blockers, blockers=run.blockers, warnings=run.warnings, checked=run.checked)


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
    a given compute subnet, the VPC quota for a new VPC; a given vpcId exists in the Region, has DNS support and
    DNS hostnames on and room for the cluster's subnets. Returns typed blockers and warnings with hints;
    ok is true when nothing blocks. Changes nothing."""
    region = req.region or ctx.app.settings.aws_region
    return await to_thread.run_sync(plan, ctx, req, region)
