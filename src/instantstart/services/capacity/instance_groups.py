"""HyperPod instance groups: add (one create-time decision), scale and delete through the allowlist, list."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws.errors import translate
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import Conflict, InvalidInput, NotFound, PreconditionFailed
from instantstart.manifests.hyperpod import DEEP_HEALTH_CHECKS, GroupDecision, instance_group
from instantstart.operations.kinds import KINDS, OperationKind, PermanentError, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.runner import StageContext
from instantstart.services.capacity.group_allowlist import resubmit_spec
from instantstart.services.cluster import network as net
from instantstart.services.cluster.hyperpod_stage import CAPACITY_WORDS, describe_hyperpod, validate_zone
from instantstart.services.core.instance_types import InstanceType, lookup
from instantstart.services.core.registry import get_cluster, resolve_tag, submit_for_cluster, update_cluster
from instantstart.services.core.stages import blocking, wait_until
from instantstart.services.core.training_plans import PlanPlacement, reconcile_plan_zone
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

GROUP_TIMEOUT = 3 * 3600
GROUP_NAME = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
AZ = r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$"
PLAN_ARN = r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:\d{12}:training-plan/[a-zA-Z0-9\-]+$"
NEEDED_DETAILS = ("vpcId", "securityGroupId", "executionRoleArn", "bucket")
IMMUTABLE_NOTE = "Capacity type and network interface mode are fixed for the life of the group."


def field_error(field: str, message: str, hint: str | None = None) -> InvalidInput:
    """InvalidInput naming one field."""
    return InvalidInput(
        f"Invalid input: {field}: {message}", hint=hint, details={"fields": [{"field": field, "message": message}]}
    )


def hyperpod_name(row: ClusterRow) -> str:
    """The HyperPod cluster name of a cluster row."""
    return row.hyperpod_cluster_name or f"hp-cluster-{row.tag}"


def capacity_type(group: dict[str, Any]) -> str:
    """OnDemand, Spot or TrainingPlan, from a described (or requested) group."""
    if group.get("TrainingPlanArn"):
        return "TrainingPlan"
    return "Spot" if "Spot" in (group.get("CapacityRequirements") or {}) else "OnDemand"


def find_group(cluster: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The described group named `name`."""
    return next((g for g in cluster.get("InstanceGroups", []) if g.get("InstanceGroupName") == name), None)


async def described(app: AppContext, row: ClusterRow) -> dict[str, Any]:
    """DescribeCluster of the row's HyperPod cluster; PreconditionFailed when there is none."""
    cluster = await blocking(describe_hyperpod, app.aws.client("sagemaker", row.region), hyperpod_name(row))
    if cluster is None:
        raise PreconditionFailed(
            f"Cluster {row.tag} has no HyperPod cluster {hyperpod_name(row)}.",
            hint="Create it first (hyperpod_create or cluster_create).",
        )
    return cluster


def group_events(sm: Any, cluster: str, group: str) -> list[dict[str, Any]]:
    """Error events of one group that report a capacity shortage."""
    try:
        events = sm.list_cluster_events(ClusterName=cluster, InstanceGroupName=group, MaxResults=100)["Events"]
    except Exception:
        return []
    return [
        e
        for e in events
        if e.get("EventLevel") == "Error" and any(w in (e.get("Description") or "").lower() for w in CAPACITY_WORDS)
    ]


def karpenter_groups(row: ClusterRow) -> list[str]:
    """Instance groups HyperPod-managed Karpenter manages on this cluster (as recorded by karpenter_install)."""
    state = (row.details or {}).get("karpenter") or {}
    return list(state.get("instanceGroups") or []) if state.get("enabled") else []


# -- add ------------------------------------------------------------------------------------------------------


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
    missing = [k for k in NEEDED_DETAILS if not (row.details or {}).get(k)]
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
            f"Instance group {req.instance_group_name} already exists in {hyperpod_name(row)}.",
            hint="Scale it with hyperpod_scale_instance_group, or choose another name.",
        )
    az, notes = await reconcile_zone(ctx, row, req, facts.name)
    kind = "TrainingPlan" if req.training_plan_arn else ("Spot" if req.is_spot else "OnDemand")
    if req.is_spot:
        notes.append("Spot capacity can be reclaimed at short notice: use it for checkpointed, fault-tolerant work.")
    params = {
        "clusterTag": tag,
        "region": row.region,
        "group": {
            "name": req.instance_group_name,
            "instanceType": facts.name,
            "count": req.instance_count,
            "availabilityZone": az,
            "ebsGb": req.volume_size,
            "trainingPlanArn": req.training_plan_arn,
            "capacityType": kind,
            "efaOnly": req.efa_only,
            "newSubnet": req.new_subnet,
            "subnetId": req.subnet_id,
            "threadsPerCore": facts.threads_per_core,
            "deepHealthChecks": list(DEEP_HEALTH_CHECKS) if req.on_start_deep_health_checks else [],
            "notes": notes,
        },
    }
    return await submit_for_cluster(
        ctx, "instance_group_add", tag, params, status_tool="operation_get", poll_after_seconds=20
    )


async def seen_events(sm: Any, cluster: str, group: str) -> set[Any]:
    """Ids of the group's capacity events so far (taken before a change, so only new ones count)."""
    return {e.get("EventId") for e in await blocking(group_events, sm, cluster, group)}


async def wait_group(
    stage: StageContext, sm: Any, cluster: str, group: str, want: int | None, seen: set[Any]
) -> dict[str, Any]:
    """Until the group is InService with CurrentCount at its target (or `want`); a capacity event not in
    `seen` fails the stage with CAPACITY_UNAVAILABLE."""

    async def settled() -> tuple[bool, str]:
        details = await blocking(describe_hyperpod, sm, cluster)
        found = find_group(details or {}, group)
        if found is None:
            raise PermanentError(f"Instance group {group} disappeared from {cluster}.", code="PROVIDER_ERROR")
        fresh = [e for e in await blocking(group_events, sm, cluster, group) if e.get("EventId") not in seen]
        if fresh:
            raise PermanentError(
                f"HyperPod could not get capacity for {group}: {fresh[0].get('Description')}",
                code="CAPACITY_UNAVAILABLE",
                hint="HyperPod keeps retrying in continuous mode; wait and operation_retry, or use another "
                "AZ, instance type, Spot or a training plan.",
            )
        if found.get("Status") == "Failed":
            raise PermanentError(
                f"Instance group {group} failed: {(details or {}).get('FailureMessage', '')}", code="PROVIDER_ERROR"
            )
        target = int(found.get("TargetCount", 0)) if want is None else want
        current = int(found.get("CurrentCount", 0))
        done = found.get("Status") == "InService" and current == target and int(found.get("TargetCount", 0)) == target
        return done, f"{group}: {found.get('Status')} {current}/{target}"

    await wait_until(stage, settled, limit_seconds=GROUP_TIMEOUT, what=f"instance group {group}")
    latest = await blocking(describe_hyperpod, sm, cluster)
    return find_group(latest or {}, group) or {}


def placement(found: dict[str, Any], cluster: dict[str, Any]) -> list[str]:
    """The subnets a described group runs in (its override, else the cluster's)."""
    override = (found.get("OverrideVpcConfig") or {}).get("Subnets")
    return list(override or (cluster.get("VpcConfig") or {}).get("Subnets") or [])


async def stage_add(stage: StageContext) -> dict[str, Any]:
    """Subnet through ensure_compute_subnet → UpdateCluster with only the new group → InService at count."""
    tag, region, g = stage.params["clusterTag"], stage.params["region"], stage.params["group"]
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    details = row.details or {}
    for note in g["notes"]:
        await stage.progress(note)
    n = net.NetCtx(
        ec2=app.aws.client("ec2", region), db=app.db, cluster_tag=tag, operation_id=stage.operation_id, region=region
    )
    az = g["availabilityZone"]
    await stage.progress(f"subnet in {az}" + (" (dedicated)" if g["newSubnet"] else ""))
    subnet = await blocking(
        net.ensure_compute_subnet,
        n,
        vpc_id=details["vpcId"],
        az=az,
        subnet_id=g.get("subnetId"),
        nat_gateway_id=details.get("natGatewayId"),
        s3_endpoint_id=details.get("s3EndpointId"),
        dedicated=bool(g["newSubnet"]),
        dedicated_name=g["name"],
        min_free=int(g["count"]) + 8,
    )
    sm = app.aws.client("sagemaker", region)
    name = hyperpod_name(row)
    cluster = await blocking(describe_hyperpod, sm, name)
    if cluster is None:
        raise PermanentError(f"HyperPod cluster {name} does not exist.", code="PRECONDITION_FAILED")
    seen = await seen_events(sm, name, g["name"])
    if find_group(cluster, g["name"]) is None:
        decision = GroupDecision(
            name=g["name"],
            instance_type=g["instanceType"],
            count=int(g["count"]),
            execution_role=details["executionRoleArn"],
            lifecycle_uri=f"s3://{details['bucket']}/instantstart/{tag}/lifecycle/",
            ebs_gb=int(g["ebsGb"]),
            threads_per_core=int(g["threadsPerCore"]),
            training_plan_arn=g.get("trainingPlanArn"),
            capacity_type="Spot" if g["capacityType"] == "Spot" else "OnDemand",
            efa_only=bool(g["efaOnly"]),
            deep_health_checks=tuple(g["deepHealthChecks"]),
            subnet_id=subnet["subnetId"],
            security_group_id=details["securityGroupId"],
        )
        await stage.progress(f"UpdateCluster {name}: add {g['name']} ({g['count']} x {g['instanceType']} in {az})")
        try:
            await blocking(sm.update_cluster, ClusterName=name, InstanceGroups=[instance_group(decision)])
        except Exception as exc:
            raise translate(exc, f"add instance group {g['name']} to {name}") from exc
    found = await wait_group(stage, sm, name, g["name"], None, seen)
    groups = dict(details.get("instanceGroups") or {})
    groups[g["name"]] = {
        "subnetId": subnet["subnetId"],
        "dedicatedSubnet": bool(g["newSubnet"]),
        "availabilityZone": az,
    }
    await blocking(update_cluster, app.db, tag, details={"instanceGroups": groups})
    return {
        "instanceGroupName": g["name"],
        "capacityType": capacity_type(found),
        "networkInterface": (found.get("NetworkInterface") or {}).get("InterfaceType", "default"),
        "availabilityZone": az,
        "subnetId": subnet["subnetId"],
        "dedicatedSubnet": bool(g["newSubnet"]),
        "currentCount": found.get("CurrentCount", 0),
        "deepHealthChecks": found.get("OnStartDeepHealthChecks", []),
        "notes": [*g["notes"], IMMUTABLE_NOTE],
    }


KINDS.register(
    OperationKind(
        name="instance_group_add",
        stages=(StageSpec("add", stage_add, max_attempts=3, timeout_seconds=GROUP_TIMEOUT + 600, backoff_seconds=5),),
    )
)


# -- scale and delete -----------------------------------------------------------------------------------------


class ScaleGroupRequest(WireModel):
    """A group and the count it should have."""

    cluster_tag: ClusterTag | None = None
    name: str = Field(pattern=GROUP_NAME, max_length=63, description="The instance group.")
    target_count: int = Field(ge=0, le=6758)


class DeleteGroupRequest(WireModel):
    """The group to delete."""

    cluster_tag: ClusterTag | None = None
    instance_group_name: str = Field(pattern=GROUP_NAME, max_length=63)


async def existing_group(ctx: CallContext, row: ClusterRow, name: str, field: str) -> dict[str, Any]:
    """The described group, or NotFound naming the groups there are."""
    cluster = await described(ctx.app, row)
    found = find_group(cluster, name)
    if found is None:
        names = ", ".join(g["InstanceGroupName"] for g in cluster.get("InstanceGroups", [])) or "none"
        raise NotFound(
            f"Invalid input: {field}: instance group {name} does not exist in {hyperpod_name(row)} (groups: {names})",
            details={"fields": [{"field": field, "message": "no such instance group"}]},
        )
    return found


@operation(
    "hyperpod_scale_instance_group",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/capacity/instance-groups/scale",
    completion="operation_get",
    example={"name": "gpu-b", "targetCount": 2},
)
async def hyperpod_scale_instance_group(ctx: CallContext, req: ScaleGroupRequest) -> OperationRef:
    """Set an instance group's count (0 keeps the group). The group is resubmitted to UpdateCluster
    through one explicit field allowlist (type, lifecycle, role, threads, storage, deep health checks,
    training plan, subnets, scheduled update, image, capacity type, network interface; TargetCount
    becomes InstanceCount), so scaling never resets health-check or EFA settings; only this group is
    sent. Refused for groups HyperPod-managed Karpenter scales (it would undo the change)."""
    replayed = await ctx.app.runner.replay("instance_group_scale", ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    if req.name in karpenter_groups(row):
        raise PreconditionFailed(
            f"Instance group {req.name} is scaled by HyperPod-managed Karpenter.",
            hint="Let pending pods and consolidation size it, or take it out of Karpenter first "
            "(karpenter_uninstall, or karpenter_install with other instanceGroups).",
        )
    await existing_group(ctx, row, req.name, "name")
    params = {"clusterTag": tag, "region": row.region, "name": req.name, "targetCount": req.target_count}
    return await submit_for_cluster(
        ctx, "instance_group_scale", tag, params, status_tool="operation_get", poll_after_seconds=20
    )


async def stage_scale(stage: StageContext) -> dict[str, Any]:
    """Describe → allowlisted spec with the new count → UpdateCluster (only this group) → count reached."""
    tag, region, name, target = (stage.params[k] for k in ("clusterTag", "region", "name", "targetCount"))
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    sm = app.aws.client("sagemaker", region)
    cluster_name = hyperpod_name(row)
    cluster = await blocking(describe_hyperpod, sm, cluster_name) or {}
    found = find_group(cluster, name)
    if found is None:
        raise PermanentError(f"Instance group {name} does not exist in {cluster_name}.", code="NOT_FOUND")
    seen = await seen_events(sm, cluster_name, name)
    if int(found.get("TargetCount", -1)) != int(target):
        spec = resubmit_spec(found, count=int(target))
        await stage.progress(f"UpdateCluster {cluster_name}: {name} {found.get('TargetCount')} -> {target}")
        try:
            await blocking(sm.update_cluster, ClusterName=cluster_name, InstanceGroups=[spec])
        except Exception as exc:
            raise translate(exc, f"scale instance group {name}") from exc
    after = await wait_group(stage, sm, cluster_name, name, int(target), seen)
    return {
        "instanceGroupName": name,
        "currentCount": after.get("CurrentCount", 0),
        "targetCount": after.get("TargetCount", 0),
        "deepHealthChecks": after.get("OnStartDeepHealthChecks", []),
        "networkInterface": (after.get("NetworkInterface") or {}).get("InterfaceType", "default"),
        "capacityType": capacity_type(after),
    }


@operation(
    "hyperpod_delete_instance_group",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/capacity/instance-groups/delete",
    completion="operation_get",
    example={"instanceGroupName": "gpu-b"},
)
async def hyperpod_delete_instance_group(ctx: CallContext, req: DeleteGroupRequest) -> OperationRef:
    """Delete an instance group (its nodes are terminated; instance volumes are lost) with UpdateCluster's
    InstanceGroupsToDelete. A dedicated subnet made for it (newSubnet) is kept for a successor; the cluster's
    last group and Karpenter-managed groups are refused (cluster_delete; karpenter_uninstall first)."""
    replayed = await ctx.app.runner.replay("instance_group_delete", ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    name = req.instance_group_name
    if name in karpenter_groups(row):
        raise PreconditionFailed(
            f"Instance group {name} is managed by HyperPod-managed Karpenter.",
            hint="Disable Karpenter for it first (karpenter_uninstall).",
        )
    cluster = await described(ctx.app, row)
    await existing_group(ctx, row, name, "instanceGroupName")
    if len(cluster.get("InstanceGroups", [])) == 1:
        raise PreconditionFailed(
            f"{name} is the only instance group of {hyperpod_name(row)}.",
            hint="Delete the whole cluster with cluster_delete, or add another group first.",
        )
    params = {"clusterTag": tag, "region": row.region, "name": name}
    return await submit_for_cluster(
        ctx, "instance_group_delete", tag, params, status_tool="operation_get", poll_after_seconds=20
    )


async def stage_delete_group(stage: StageContext) -> dict[str, Any]:
    """UpdateCluster(InstanceGroupsToDelete) → the group is gone; its dedicated subnet stays."""
    tag, region, name = stage.params["clusterTag"], stage.params["region"], stage.params["name"]
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    sm = app.aws.client("sagemaker", region)
    cluster_name = hyperpod_name(row)
    cluster = await blocking(describe_hyperpod, sm, cluster_name) or {}
    found = find_group(cluster, name)
    if found is not None and found.get("Status") != "Deleting":
        await stage.progress(f"UpdateCluster {cluster_name}: delete {name}")
        try:
            await blocking(sm.update_cluster, ClusterName=cluster_name, InstanceGroupsToDelete=[name])
        except Exception as exc:
            raise translate(exc, f"delete instance group {name}") from exc

    async def gone() -> tuple[bool, str]:
        latest = await blocking(describe_hyperpod, sm, cluster_name)
        now = find_group(latest or {}, name)
        if now is None:
            return True, f"{name} deleted"
        return False, f"{name}: {now.get('Status')} ({now.get('CurrentCount', 0)} node(s) left)"

    await wait_until(stage, gone, limit_seconds=GROUP_TIMEOUT, what=f"deletion of instance group {name}")
    row = await blocking(get_cluster, app.db, tag)
    groups = dict((row.details or {}).get("instanceGroups") or {})
    kept = groups.pop(name, None) or {}
    await blocking(update_cluster, app.db, tag, details={"instanceGroups": groups})
    out: dict[str, Any] = {"instanceGroupName": name, "deleted": True}
    if kept.get("dedicatedSubnet"):
        out["keptSubnetId"] = kept.get("subnetId")
        out["note"] = "The dedicated subnet is kept; a group added with the same name and newSubnet reuses it."
    return out


KINDS.register(
    OperationKind(
        name="instance_group_scale",
        stages=(
            StageSpec("scale", stage_scale, max_attempts=3, timeout_seconds=GROUP_TIMEOUT + 600, backoff_seconds=5),
        ),
    )
)
KINDS.register(
    OperationKind(
        name="instance_group_delete",
        stages=(
            StageSpec("delete", stage_delete_group, max_attempts=3, timeout_seconds=GROUP_TIMEOUT, backoff_seconds=5),
        ),
    )
)
