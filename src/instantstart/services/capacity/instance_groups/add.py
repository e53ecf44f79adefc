"""hyperpod_add_instance_group: one create-time decision (type, count, placement, capacity type, EFA mode)."""

from __future__ import annotations

from typing import Any, Literal

from anyio import to_thread
from pydantic import Field

from instantstart.aws.hyperpod import HyperPod
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import Conflict, PreconditionFailed
from instantstart.manifests.hyperpod import DEEP_HEALTH_CHECKS, GroupDecision, instance_group
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking
from instantstart.services.base import network as net
from instantstart.services.base.facts import ClusterFacts, facts_of
from instantstart.services.base.hyperpod_groups import (
    GROUP_NAME,
    GROUP_TIMEOUT,
    capacity_type,
    described,
    field_error,
    find_group,
    seen_events,
    wait_group,
)
from instantstart.services.base.lifecycle import ensure_lifecycle, lifecycle_uri
from instantstart.services.base.registry import (
    get_cluster,
    hyperpod_cluster_name,
    record_facts,
    resolve_tag,
    submit_for_cluster,
)
from instantstart.services.base.zones import validate_zone
from instantstart.services.core.instance_types import InstanceType, lookup
from instantstart.services.core.training_plans import PlanPlacement, reconcile_plan_zone
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

AZ = r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$"
PLAN_ARN = r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:\d{12}:training-plan/[a-zA-Z0-9\-]+$"
NEEDED_FACTS = ("vpc_id", "security_group_id", "execution_role_arn", "bucket")
IMMUTABLE_NOTE = "Capacity type and network interface mode are fixed for the life of the group."


class AddGroupRequest(WireModel):
    """One create-time decision: type, count, placement, capacity type and network interface mode."""

    cluster_tag: ClusterTag | None = Field(default=None, description="The cluster (default: the active one).")
    instance_group_name: str = Field(pattern=GROUP_NAME, max_length=63)
    instance_type: str = Field(min_length=3, max_length=40, description="An ml.* type, e.g. ml.p5.48xlarge.")
    instance_count: int = Field(ge=0, le=6758)
    availability_zone: str = Field(pattern=AZ)
    volume_size: int = Field(default=500, ge=1, le=16384, description="Secondary EBS volume (GB).")
    training_plan_arn: str | None = Field(default=None, pattern=PLAN_ARN)
    is_spot: bool = Field(default=False, description="Spot capacity (fault-tolerant work only); fixed for life.")
    efa_only: bool = Field(default=False, description="EFA-only interfaces (multi-card types); fixed for life.")
    new_subnet: bool = Field(default=False, description="A dedicated subnet that outlives the group.")
    subnet_id: str | None = Field(default=None, pattern=r"^subnet-[0-9a-f]{8,17}$")
    on_start_deep_health_checks: bool | None = Field(
        default=None, description="InstanceStress and InstanceConnectivity before nodes take work."
    )
    strict_availability_zone: bool = Field(
        default=False, description="Refuse instead of moving to a training plan's AZ when they differ."
    )


class NewGroup(ParamsModel):
    """The decided group, as stored in instance_group_add's params under `group`."""

    name: str
    instance_type: str
    count: int
    availability_zone: str
    ebs_gb: int
    training_plan_arn: str | None = None
    capacity_type: Literal["OnDemand", "Spot", "TrainingPlan"] = "OnDemand"
    efa_only: bool = False
    new_subnet: bool = False
    subnet_id: str | None = None
    threads_per_core: int = 1
    deep_health_checks: list[str] = []
    notes: list[str] = []


class GroupAddParams(ParamsModel):
    """Params of instance_group_add: the cluster and the decided group."""

    cluster_tag: str
    region: str
    group: NewGroup


def check_decision(req: AddGroupRequest, facts: InstanceType) -> None:
    """Everything that can be refused without asking AWS."""
    if req.efa_only and not facts.efa_only_eligible:
        raise field_error(
            "efaOnly",
            f"{facts.name} does not support EFA-only interfaces (it is not a multi-network-card EFA type)",
            hint="Use a type such as ml.p5.48xlarge, ml.p5en.48xlarge or ml.p6-b200.48xlarge, or drop efaOnly.",
        )
    if req.is_spot and req.training_plan_arn:
        raise field_error("isSpot", "Spot and a training plan are different capacity types; choose one")
    if req.new_subnet and req.subnet_id:
        raise field_error("newSubnet", "newSubnet and subnetId are exclusive; choose one")
    if req.on_start_deep_health_checks and not facts.accelerated:
        raise field_error("onStartDeepHealthChecks", f"deep health checks need an accelerated type, not {facts.name}")


async def reconcile_zone(ctx: CallContext, row: ClusterRow, req: AddGroupRequest, itype: str) -> tuple[str, list[str]]:
    """The AZ the group goes to and what was decided about it (a training plan pins capacity to its AZ)."""
    want = PlanPlacement(
        plan_arn=req.training_plan_arn,
        availability_zone=req.availability_zone,
        instance_type=itype,
        strict=req.strict_availability_zone,
        subnet_given=req.subnet_id is not None,
    )
    return await reconcile_plan_zone(ctx.app, row.region, want)


@operation(
    "hyperpod_add_instance_group",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/capacity/instance-groups",
    completion="operation_get",
    example={
        "instanceGroupName": "gpu-b",
        "instanceType": "ml.g6.4xlarge",
        "instanceCount": 1,
        "availabilityZone": "us-west-2c",
    },
)
async def hyperpod_add_instance_group(ctx: CallContext, req: AddGroupRequest) -> OperationRef:
    """Add an instance group to the active cluster's HyperPod cluster as one create-time decision.
    Capacity type (OnDemand; Spot with isSpot; or a SageMaker training plan) and network interface mode
    (efaOnly, only for multi-network-card EFA types such as p5/p5e/p5en/p6-b200 — others are refused)
    are fixed for the life of the group. A training plan pins capacity to its AZ: a different requested
    AZ is replaced by the plan's (the result says so) unless strictAvailabilityZone or a subnetId insists,
    which is refused. Placement: subnetId; else the shared per-AZ compute subnet; newSubnet makes a
    dedicated subnet that outlives the group so a successor can reuse it. Node recovery stays Automatic;
    onStartDeepHealthChecks runs InstanceStress and InstanceConnectivity. UpdateCluster receives only the
    new group. The operation's result states capacityType, networkInterface, zone and notes."""
    replayed = await ctx.app.runner.replay("instance_group_add", ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    facts = lookup(req.instance_type, "instanceType")
    check_decision(req, facts)
    missing = facts_of(row).missing(*NEEDED_FACTS)
    if missing:
        raise PreconditionFailed(
            f"Cluster {tag} has no recorded {', '.join(missing)} (it was imported or its EKS stage did not finish).",
            hint="Groups are added to clusters this control plane created; for an imported cluster use the "
            "SageMaker console or CLI.",
        )
    await validate_zone(ctx, row.region, req.availability_zone)
    cluster = await described(ctx.app, row)
    if find_group(cluster, req.instance_group_name) is not None:
        raise Conflict(
            f"Instance group {req.instance_group_name} already exists in {hyperpod_cluster_name(row)}.",
            hint="Scale it with hyperpod_scale_instance_group, or choose another name.",
        )
    az, notes = await reconcile_zone(ctx, row, req, facts.name)
    kind: Literal["OnDemand", "Spot", "TrainingPlan"] = (
        "TrainingPlan" if req.training_plan_arn else ("Spot" if req.is_spot else "OnDemand")
    )
    if req.is_spot:
        notes.append("Spot capacity can be reclaimed at short notice: use it for checkpointed, fault-tolerant work.")
    group = NewGroup(
        name=req.instance_group_name,
        instance_type=facts.name,
        count=req.instance_count,
        availability_zone=az,
        ebs_gb=req.volume_size,
        training_plan_arn=req.training_plan_arn,
        capacity_type=kind,
        efa_only=req.efa_only,
        new_subnet=req.new_subnet,
        subnet_id=req.subnet_id,
        threads_per_core=facts.threads_per_core,
        deep_health_checks=list(DEEP_HEALTH_CHECKS) if req.on_start_deep_health_checks else [],
        notes=notes,
    )
    params = GroupAddParams(cluster_tag=tag, region=row.region, group=group)
    return await submit_for_cluster(
        ctx, "instance_group_add", tag, params, status_tool="operation_get", poll_after_seconds=20
    )


async def ensure_subnet(stage: StageContext, p: GroupAddParams, facts: ClusterFacts) -> dict[str, Any]:
    """The group's subnet through ensure_compute_subnet (given, shared per AZ, or dedicated)."""
    g = p.group
    n = net.NetCtx(
        aws=stage.app.aws,
        db=stage.app.db,
        cluster_tag=p.cluster_tag,
        operation_id=stage.operation_id,
        region=p.region,
    )
    await stage.progress(f"subnet in {g.availability_zone}" + (" (dedicated)" if g.new_subnet else ""))
    return await blocking(
        net.ensure_compute_subnet,
        n,
        vpc_id=facts.need("vpc_id"),
        az=g.availability_zone,
        subnet_id=g.subnet_id,
        nat_gateway_id=facts.nat_gateway_id,
        s3_endpoint_id=facts.s3_endpoint_id,
        dedicated=g.new_subnet,
        dedicated_name=g.name,
        min_free=g.count + 8,
    )


def decision(p: GroupAddParams, facts: ClusterFacts, subnet_id: str) -> GroupDecision:
    """The manifests' GroupDecision of the stored group, in the recorded subnet, role and bucket."""
    g = p.group
    return GroupDecision(
        name=g.name,
        instance_type=g.instance_type,
        count=g.count,
        execution_role=facts.need("execution_role_arn"),
        lifecycle_uri=lifecycle_uri(facts.need("bucket"), p.cluster_tag),
        ebs_gb=g.ebs_gb,
        threads_per_core=g.threads_per_core,
        training_plan_arn=g.training_plan_arn,
        capacity_type="Spot" if g.capacity_type == "Spot" else "OnDemand",
        efa_only=g.efa_only,
        deep_health_checks=tuple(g.deep_health_checks),
        subnet_id=subnet_id,
        security_group_id=facts.need("security_group_id"),
    )


async def stage_add(stage: StageContext) -> dict[str, Any]:
    """Subnet through ensure_compute_subnet → UpdateCluster with only the new group → InService at count."""
    p = stage.params_as(GroupAddParams)
    g = p.group
    app = stage.app
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    facts = facts_of(row)
    for note in g.notes:
        await stage.progress(note)
    subnet = await ensure_subnet(stage, p, facts)
    sm = HyperPod(app.aws, p.region)
    name = hyperpod_cluster_name(row)
    cluster = await blocking(sm.describe_cluster, name)
    if cluster is None:
        raise PreconditionFailed(f"HyperPod cluster {name} does not exist.")
    seen = await seen_events(sm, name, g.name)
    if find_group(cluster, g.name) is None:
        await blocking(ensure_lifecycle, app.aws, p.region, facts.need("bucket"), p.cluster_tag)
        spec = instance_group(decision(p, facts, subnet["subnetId"]))
        where = f"{g.count} x {g.instance_type} in {g.availability_zone}"
        await stage.progress(f"UpdateCluster {name}: add {g.name} ({where})")
        await blocking(
            sm.update_cluster, f"add instance group {g.name} to {name}", ClusterName=name, InstanceGroups=[spec]
        )
    found = await wait_group(stage, sm, name, g.name, None, seen)
    groups = facts.group_records()
    groups[g.name] = {
        "subnetId": subnet["subnetId"],
        "dedicatedSubnet": g.new_subnet,
        "availabilityZone": g.availability_zone,
    }
    await blocking(record_facts, app.db, p.cluster_tag, instance_groups=groups)
    return {
        "instanceGroupName": g.name,
        "capacityType": capacity_type(found),
        "networkInterface": (found.get("NetworkInterface") or {}).get("InterfaceType", "default"),
        "availabilityZone": g.availability_zone,
        "subnetId": subnet["subnetId"],
        "dedicatedSubnet": g.new_subnet,
        "currentCount": found.get("CurrentCount", 0),
        "deepHealthChecks": found.get("OnStartDeepHealthChecks", []),
        "notes": [*g.notes, IMMUTABLE_NOTE],
    }


KINDS.register(
    OperationKind(
        name="instance_group_add",
        params=GroupAddParams,
        stages=(StageSpec("add", stage_add, max_attempts=3, timeout_seconds=GROUP_TIMEOUT + 600, backoff_seconds=5),),
    )
)
