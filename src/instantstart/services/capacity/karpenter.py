"""HyperPod-managed Karpenter: a validated toggle (role, cluster autoscaling, node class + NodePool) and its status."""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from anyio import to_thread
from kubernetes import client as k8s
from pydantic import Field

from instantstart.aws.errors import error_code, translate
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import InvalidInput, PreconditionFailed
from instantstart.manifests import karpenter as m
from instantstart.operations.kinds import KINDS, OperationKind, PermanentError, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.runner import StageContext
from instantstart.services.capacity.instance_groups import GROUP_NAME, described, find_group, hyperpod_name
from instantstart.services.cluster import iam as iam_svc
from instantstart.services.cluster.hyperpod_stage import describe_hyperpod
from instantstart.services.cluster.status import kube_api, kube_call
from instantstart.services.core.ledger import mark_deleted, resources_of
from instantstart.services.core.registry import (
    cluster_target,
    get_cluster,
    resolve_tag,
    submit_for_cluster,
    update_cluster,
)
from instantstart.services.core.stages import blocking, wait_until
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

WAIT = 1800
GroupName = Annotated[str, Field(pattern=GROUP_NAME, max_length=63)]
DURATION = r"^(Never|[0-9]+(s|m|h))$"


class KarpenterRequest(WireModel):
    """Which instance groups Karpenter scales and how idle capacity is consolidated."""

    cluster_tag: ClusterTag | None = None
    instance_groups: list[GroupName] | None = Field(
        default=None,
        max_length=m.MAX_GROUPS,
        description="Groups to autoscale (default: every eligible group at count 0). They must be at count 0, "
        "without a training plan or deep health checks.",
    )
    consolidation_policy: Literal["WhenEmptyOrUnderutilized", "WhenEmpty"] = "WhenEmptyOrUnderutilized"
    consolidate_after: str = Field(default="60s", pattern=DURATION, description="Idle time before a node goes.")
    budget_nodes: str = Field(default="10%", pattern=r"^([0-9]+%|[0-9]+)$", description="Disruption budget.")
    gpu_limit: int | None = Field(default=None, ge=0, le=100000, description="Most GPUs the NodePool may hold.")


class ClusterOnly(WireModel):
    """Which cluster (the active one when absent)."""

    cluster_tag: ClusterTag | None = None


def eligible(
    cluster: dict[str, Any], wanted: list[str] | None, managed: frozenset[str] = frozenset()
) -> tuple[list[str], list[str]]:
    """The groups Karpenter may manage and the instance types they use; InvalidInput/PreconditionFailed
    with the reason for a cluster or group that cannot be autoscaled. Groups Karpenter already manages
    (`managed`) may have nodes."""
    if cluster.get("NodeProvisioningMode") != "Continuous":
        raise PreconditionFailed(
            f"HyperPod cluster {cluster.get('ClusterName')} does not use continuous provisioning; managed Karpenter "
            "requires NodeProvisioningMode Continuous.",
            hint="Create the cluster with hyperpod_create (continuous by default); it cannot be switched in place.",
        )
    groups = cluster.get("InstanceGroups", [])
    if wanted is None:
        wanted = [g["InstanceGroupName"] for g in groups if not _why_not(g, g["InstanceGroupName"] in managed)]
        if not wanted:
            raise PreconditionFailed(
                "No instance group can be autoscaled: Karpenter groups start at count 0, without a training plan "
                "or deep health checks.",
                hint="Add one with hyperpod_add_instance_group (instanceCount 0), then run karpenter_install.",
            )
    types = []
    for name in wanted:
        group = find_group(cluster, name)
        if group is None:
            raise InvalidInput(
                f"Invalid input: instanceGroups: {name} is not an instance group of {cluster.get('ClusterName')}",
                details={"fields": [{"field": "instanceGroups", "message": f"unknown group {name}"}]},
            )
        reason = _why_not(group, name in managed)
        if reason:
            raise InvalidInput(
                f"Invalid input: instanceGroups: {name} cannot be autoscaled: {reason}",
                hint="Choose another group, or add one at count 0 with hyperpod_add_instance_group.",
                details={"fields": [{"field": "instanceGroups", "message": reason}]},
            )
        types.append(str(group.get("InstanceType", "")))
    return list(wanted), types


def _why_not(group: dict[str, Any], managed: bool = False) -> str:
    if group.get("TrainingPlanArn"):
        return "it uses a training plan (reserved capacity is not autoscaled)"
    if group.get("OnStartDeepHealthChecks"):
        return "it runs on-start deep health checks"
    if int(group.get("TargetCount", 0)) != 0 and not managed:
        return f"it has {group.get('TargetCount')} node(s); Karpenter groups start at 0 (scale it to 0 first)"
    return ""


@operation(
    "karpenter_install",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/capacity/karpenter",
    completion="karpenter_get_status",
    example={"instanceGroups": ["auto-a"], "consolidateAfter": "60s"},
)
async def karpenter_install(ctx: CallContext, req: KarpenterRequest) -> OperationRef:
    """Enable HyperPod-managed Karpenter on the active cluster (a validated toggle). Requires continuous
    provisioning (refused with the reason otherwise); the chosen instance groups (default: every eligible
    one) must be at count 0, without a training plan or deep health checks. Creates the autoscaling IAM
    role, enables cluster autoscaling (UpdateCluster AutoScaling Karpenter), then a HyperpodNodeClass and
    a NodePool: pending pods scale a group up; idle nodes are consolidated back toward zero
    (consolidationPolicy, consolidateAfter, budgetNodes). Node recovery and health monitoring stay on.
    karpenter_uninstall removes exactly what this created, in reverse order."""
    replayed = await ctx.app.runner.replay("karpenter_enable", ctx.idempotency_key, status_tool="karpenter_get_status")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    params = await enable_params(ctx, row, req)
    return await submit_for_cluster(
        ctx, "karpenter_enable", tag, params, status_tool="karpenter_get_status", poll_after_seconds=15
    )


@operation(
    "karpenter_uninstall",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/capacity/karpenter/uninstall",
    completion="karpenter_get_status",
    example={},
)
async def karpenter_uninstall(ctx: CallContext, req: ClusterOnly) -> OperationRef:
    """Disable HyperPod-managed Karpenter: removes exactly what karpenter_install created, in reverse
    order (NodePool, HyperpodNodeClass, cluster autoscaling, the IAM role); groups keep their current
    counts and are scaled by hand again."""
    replayed = await ctx.app.runner.replay("karpenter_disable", ctx.idempotency_key, status_tool="karpenter_get_status")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    if not (row.details or {}).get("karpenter"):
        raise PreconditionFailed(f"Karpenter was never enabled on {tag} by InstantStart.", hint="Nothing to remove.")
    return await submit_for_cluster(
        ctx,
        "karpenter_disable",
        tag,
        {"clusterTag": tag, "region": row.region},
        status_tool="karpenter_get_status",
        poll_after_seconds=15,
    )


async def enable_params(ctx: CallContext, row: ClusterRow, req: KarpenterRequest) -> dict[str, Any]:
    """Validate the toggle against the cluster as it is now; the persisted parameters of ENABLE_STAGES.
    (The `karpenter` key of hyperpod_update_advanced_features reuses this with ENABLE_STAGES/DISABLE_STAGES.)"""
    cluster = await described(ctx.app, row)
    state = state_of(row)
    managed = frozenset(state.get("instanceGroups") or []) if state.get("enabled") else frozenset()
    groups, types = eligible(cluster, req.instance_groups, managed)
    settings = {
        "instanceGroups": groups,
        "instanceTypes": types,
        "consolidationPolicy": req.consolidation_policy,
        "consolidateAfter": req.consolidate_after,
        "budgetNodes": req.budget_nodes,
        "gpuLimit": req.gpu_limit,
    }
    return {"clusterTag": row.tag, "region": row.region, "settings": settings}


# -- enable ----------------------------------------------------------------------------------------------------


def state_of(row: ClusterRow) -> dict[str, Any]:
    """What the toggle recorded on the cluster row."""
    return dict((row.details or {}).get("karpenter") or {})


async def record_state(app: AppContext, tag: str, **values: Any) -> None:
    """Merge into the recorded Karpenter state."""
    row = await blocking(get_cluster, app.db, tag)
    await blocking(update_cluster, app.db, tag, details={"karpenter": {**state_of(row), **values}})


def role_exists(iam: Any, name: str) -> bool:
    """Whether the IAM role exists (blocking)."""
    try:
        iam.get_role(RoleName=name)
        return True
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return False
        raise translate(exc, f"look up IAM role {name}") from exc


async def stage_role(stage: StageContext) -> dict[str, Any]:
    """The autoscaling role HyperPod assumes (trust hyperpod.sagemaker.amazonaws.com; add/delete nodes)."""
    tag, region = stage.params["clusterTag"], stage.params["region"]
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    cluster = await described(app, row)
    account = str(cluster["ClusterArn"]).split(":")[4]
    name = m.role_name(tag)
    iam = app.aws.client("iam", region)
    created = not await blocking(role_exists, iam, name) or bool(state_of(row).get("roleCreated"))
    arn = await blocking(
        iam_svc.ensure_role,
        iam,
        app.db,
        cluster_tag=tag,
        operation_id=stage.operation_id,
        region=region,
        name=name,
        service=m.AUTOSCALING_TRUST,
        managed=[],
        inline=m.autoscaling_policy(region, account),
        description="HyperPod-managed Karpenter adds and removes nodes",
    )
    await record_state(app, tag, enabled=False, roleName=name, roleArn=arn, roleCreated=created)
    return {"roleName": name, "roleArn": arn, "created": created}


async def stage_autoscaling(stage: StageContext) -> dict[str, Any]:
    """UpdateCluster: ClusterRole + AutoScaling Karpenter (unless already on), until AutoScaling is InService."""
    tag, region = stage.params["clusterTag"], stage.params["region"]
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    sm = app.aws.client("sagemaker", region)
    name = hyperpod_name(row)
    cluster = await described(app, row)
    auto = cluster.get("AutoScaling") or {}
    ours = bool(state_of(row).get("autoscalingEnabled"))
    if auto.get("Mode") != "Enable":
        await stage.progress(f"UpdateCluster {name}: AutoScaling Karpenter")
        try:
            await blocking(
                sm.update_cluster,
                ClusterName=name,
                ClusterRole=stage.outputs["role"]["roleArn"],
                AutoScaling={"Mode": "Enable", "AutoScalerType": "Karpenter"},
            )
        except Exception as exc:
            raise translate(exc, f"enable autoscaling on {name}") from exc
        ours = True
    await record_state(app, tag, autoscalingEnabled=ours)
    await wait_autoscaling(stage, sm, name, "Enable")
    return {"autoscaling": "Enable", "enabledHere": ours}


async def wait_autoscaling(stage: StageContext, sm: Any, name: str, mode: str) -> None:
    """Until DescribeCluster's AutoScaling has `mode` and Status InService (Failed is permanent)."""

    async def ready() -> tuple[bool, str]:
        auto = (await blocking(describe_hyperpod, sm, name) or {}).get("AutoScaling") or {}
        if auto.get("Status") == "Failed":
            raise PermanentError(
                f"Autoscaling on {name} failed: {auto.get('FailureMessage', '')}", code="PROVIDER_ERROR"
            )
        done = auto.get("Mode") == mode and auto.get("Status") == "InService"
        return done, f"autoscaling {auto.get('Mode', '-')}: {auto.get('Status', '-')}"

    await wait_until(stage, ready, limit_seconds=WAIT, what=f"autoscaling on {name}")


def _custom(api: k8s.ApiClient) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api)


def read_object(api: k8s.ApiClient, group: str, plural: str, name: str) -> dict[str, Any] | None:
    """A cluster-scoped custom object, or None (blocking)."""
    try:
        return cast(dict[str, Any], _custom(api).get_cluster_custom_object(group, m.VERSION, plural, name))
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def ensure_object(api: k8s.ApiClient, group: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
    """Look first; create, or replace the spec when it differs (blocking)."""
    name = body["metadata"]["name"]
    found = read_object(api, group, plural, name)
    if found is None:
        return cast(dict[str, Any], _custom(api).create_cluster_custom_object(group, m.VERSION, plural, body))
    if found.get("spec") == body["spec"]:
        return found
    body = {**body, "metadata": {**body["metadata"], **_version(found)}}
    return cast(dict[str, Any], _custom(api).replace_cluster_custom_object(group, m.VERSION, plural, name, body))


def _version(found: dict[str, Any]) -> dict[str, Any]:
    version = (found.get("metadata") or {}).get("resourceVersion")
    return {"resourceVersion": version} if version else {}


def crds_served(api: k8s.ApiClient) -> bool:
    """Whether the NodePool and HyperpodNodeClass CRDs are installed (blocking)."""
    ext = k8s.ApiextensionsV1Api(api)
    for crd in (f"{m.NODEPOOL_PLURAL}.{m.NODEPOOL_GROUP}", f"{m.NODECLASS_PLURAL}.{m.NODECLASS_GROUP}"):
        try:
            ext.read_custom_resource_definition(crd)
        except k8s.ApiException as exc:
            if exc.status == 404:
                return False
            raise
    return True


def ready(obj: dict[str, Any] | None) -> tuple[bool, str]:
    """A Karpenter object's Ready condition (and its message)."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True", str(c.get("message") or c.get("reason") or "")
    return False, "no Ready condition yet"


def settings_of(params: dict[str, Any]) -> m.KarpenterSettings:
    """The NodePool decisions from the persisted parameters."""
    s = params["settings"]
    return m.KarpenterSettings(
        instance_groups=tuple(s["instanceGroups"]),
        instance_types=tuple(t for t in s["instanceTypes"] if t),
        consolidation_policy=s["consolidationPolicy"],
        consolidate_after=s["consolidateAfter"],
        budget_nodes=s["budgetNodes"],
        gpu_limit=s.get("gpuLimit"),
    )


async def stage_nodepool(stage: StageContext) -> dict[str, Any]:
    """Once the Karpenter CRDs are served: the HyperpodNodeClass and NodePool, until both are Ready."""
    tag = stage.params["clusterTag"]
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    api = await blocking(kube_api, app, row)
    s = settings_of(stage.params)

    async def crds() -> tuple[bool, str]:
        served = await blocking(kube_call, "read Karpenter CRDs", crds_served, api)
        return served, "Karpenter CRDs served" if served else "waiting for the Karpenter CRDs"

    await wait_until(stage, crds, limit_seconds=WAIT, what="the Karpenter CRDs")
    await blocking(
        kube_call, "apply HyperpodNodeClass", ensure_object, api, m.NODECLASS_GROUP, m.NODECLASS_PLURAL, m.node_class(s)
    )
    await record_state(app, tag, nodeClass=s.name)
    await blocking(kube_call, "apply NodePool", ensure_object, api, m.NODEPOOL_GROUP, m.NODEPOOL_PLURAL, m.node_pool(s))
    await record_state(app, tag, nodePool=s.name)

    async def pool_ready() -> tuple[bool, str]:
        pool = await blocking(kube_call, "read NodePool", read_object, api, m.NODEPOOL_GROUP, m.NODEPOOL_PLURAL, s.name)
        ok, why = ready(pool)
        return ok, f"NodePool {s.name}: {'Ready' if ok else why}"

    await wait_until(stage, pool_ready, limit_seconds=WAIT, what=f"NodePool {s.name}")
    await record_state(
        app, tag, enabled=True, instanceGroups=list(s.instance_groups), settings=stage.params["settings"]
    )
    return {"nodeClass": s.name, "nodePool": s.name, "instanceGroups": list(s.instance_groups)}


# -- disable ---------------------------------------------------------------------------------------------------


def delete_object(api: k8s.ApiClient, group: str, plural: str, name: str) -> None:
    """Delete a cluster-scoped custom object; absent is fine (blocking)."""
    try:
        _custom(api).delete_cluster_custom_object(group, m.VERSION, plural, name)
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise


async def stage_remove_nodepool(stage: StageContext) -> dict[str, Any]:
    """Delete the NodePool, then the HyperpodNodeClass, each until gone (only those the toggle made)."""
    tag = stage.params["clusterTag"]
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    state = state_of(row)
    await record_state(app, tag, enabled=False)
    api = await blocking(kube_api, app, row)
    removed = []
    for key, group, plural in (
        ("nodePool", m.NODEPOOL_GROUP, m.NODEPOOL_PLURAL),
        ("nodeClass", m.NODECLASS_GROUP, m.NODECLASS_PLURAL),
    ):
        name = state.get(key)
        if not name:
            continue
        await stage.progress(f"deleting {key} {name}")
        await blocking(kube_call, f"delete {key} {name}", delete_object, api, group, plural, name)

        async def gone(g: str = group, p: str = plural, n: str = str(name)) -> tuple[bool, str]:
            left = await blocking(kube_call, f"read {n}", read_object, api, g, p, n)
            return left is None, f"waiting for {n} to go"

        await wait_until(stage, gone, limit_seconds=WAIT, what=f"deletion of {name}")
        removed.append(f"{key}/{name}")
        await record_state(app, tag, **{key: None})
    return {"removed": removed}


async def stage_remove_autoscaling(stage: StageContext) -> dict[str, Any]:
    """Disable cluster autoscaling, if the toggle enabled it."""
    tag, region = stage.params["clusterTag"], stage.params["region"]
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    if not state_of(row).get("autoscalingEnabled"):
        return {"autoscaling": "left as found"}
    sm = app.aws.client("sagemaker", region)
    name = hyperpod_name(row)
    auto = (await blocking(describe_hyperpod, sm, name) or {}).get("AutoScaling") or {}
    if auto.get("Mode") == "Enable":
        await stage.progress(f"UpdateCluster {name}: AutoScaling Disable")
        try:
            await blocking(
                sm.update_cluster, ClusterName=name, AutoScaling={"Mode": "Disable", "AutoScalerType": "Karpenter"}
            )
        except Exception as exc:
            raise translate(exc, f"disable autoscaling on {name}") from exc
    await wait_autoscaling(stage, sm, name, "Disable")
    await record_state(app, tag, autoscalingEnabled=False)
    return {"autoscaling": "Disable"}


def delete_role(app: AppContext, tag: str, region: str, name: str) -> None:
    """Delete the autoscaling role (policies first) and mark its ledger row deleted (blocking)."""
    iam = app.aws.client("iam", region)
    try:
        for policy in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
            iam.detach_role_policy(RoleName=name, PolicyArn=policy["PolicyArn"])
        for inline in iam.list_role_policies(RoleName=name)["PolicyNames"]:
            iam.delete_role_policy(RoleName=name, PolicyName=inline)
        iam.delete_role(RoleName=name)
    except Exception as exc:
        if error_code(exc) != "NoSuchEntity":
            raise translate(exc, f"delete IAM role {name}") from exc
    for res in resources_of(app.db, tag):
        if res.resource_type == "iam:role" and res.resource_id == name:
            mark_deleted(app.db, res.id)


async def stage_remove_role(stage: StageContext) -> dict[str, Any]:
    """Delete the autoscaling role, if the toggle created it; then forget the toggle's state."""
    tag, region = stage.params["clusterTag"], stage.params["region"]
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    state = state_of(row)
    out: dict[str, Any] = {"role": "left as found"}
    if state.get("roleCreated") and state.get("roleName"):
        await blocking(delete_role, app, tag, region, state["roleName"])
        out = {"role": f"deleted {state['roleName']}"}
    await blocking(update_cluster, app.db, tag, details={"karpenter": {"enabled": False, "removed": True}})
    return out


# Stage names are part of the interface: stage_autoscaling reads the "role" stage's outputs.
ENABLE_STAGES = (
    StageSpec("role", stage_role, max_attempts=3),
    StageSpec("autoscaling", stage_autoscaling, max_attempts=3, timeout_seconds=WAIT + 300),
    StageSpec("nodepool", stage_nodepool, max_attempts=3, timeout_seconds=2 * WAIT + 300),
)
DISABLE_STAGES = (
    StageSpec("nodepool", stage_remove_nodepool, max_attempts=3, timeout_seconds=2 * WAIT + 300),
    StageSpec("autoscaling", stage_remove_autoscaling, max_attempts=3, timeout_seconds=WAIT + 300),
    StageSpec("role", stage_remove_role, max_attempts=3),
)
KINDS.register(OperationKind(name="karpenter_enable", stages=ENABLE_STAGES))
KINDS.register(OperationKind(name="karpenter_disable", stages=DISABLE_STAGES))


# -- status ----------------------------------------------------------------------------------------------------


class KarpenterStatus(WireModel):
    """Where managed Karpenter stands on a cluster; never a bare null."""

    cluster_tag: str
    state: str = Field(description="ENABLED, DISABLED, IN_PROGRESS, FAILED or NOT_STARTED")
    terminal: bool
    enabled: bool
    message: str
    operation_id: str | None
    error: dict[str, Any] | None
    autoscaling: dict[str, Any] | None = Field(description="DescribeCluster.AutoScaling right now.")
    node_pool: dict[str, Any] | None
    node_class: dict[str, Any] | None
    instance_groups: list[dict[str, Any]]
    settings: dict[str, Any] | None


def kube_view(app: AppContext, row: ClusterRow, state: dict[str, Any]) -> tuple[dict[str, Any] | None, ...]:
    """The NodePool and node class as Kubernetes has them (blocking)."""
    if not state.get("nodePool") and not state.get("nodeClass"):
        return None, None
    api = kube_api(app, row)
    out: list[dict[str, Any] | None] = []
    for key, group, plural in (
        ("nodePool", m.NODEPOOL_GROUP, m.NODEPOOL_PLURAL),
        ("nodeClass", m.NODECLASS_GROUP, m.NODECLASS_PLURAL),
    ):
        name = state.get(key)
        obj = kube_call(f"read {key}", read_object, api, group, plural, name) if name else None
        if obj is None:
            out.append(None)
            continue
        ok, why = ready(obj)
        status = obj.get("status") or {}
        out.append(
            {
                "name": name,
                "ready": ok,
                "message": why,
                "nodes": status.get("nodes"),
                "resources": status.get("resources"),
                "spec": obj.get("spec"),
            }
        )
    return out[0], out[1]


@operation("karpenter_get_status", method="GET", path="/capacity/karpenter-status", example={})
async def karpenter_get_status(ctx: CallContext, req: ClusterOnly) -> KarpenterStatus:
    """Managed Karpenter on a cluster (default: the active one): ENABLED, DISABLED, IN_PROGRESS (with the
    current step), FAILED (with the reason and a hint) or NOT_STARTED; cluster autoscaling as SageMaker
    reports it; the NodePool and HyperpodNodeClass (Ready, nodes, resources); the managed groups' counts.
    Poll with wait_seconds(15) until terminal is true."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    state = state_of(row)
    ops = []
    for kind in ("karpenter_enable", "karpenter_disable"):
        found, _ = await blocking(ctx.app.runner.store.list_operations, target=cluster_target(tag), kind=kind, limit=1)
        ops.extend(found)
    ops.sort(key=lambda o: o.created_at, reverse=True)
    op = ops[0] if ops else None
    sm = ctx.app.aws.client("sagemaker", row.region)
    cluster = await blocking(describe_hyperpod, sm, hyperpod_name(row)) or {}
    pool, nodeclass = await blocking(kube_view, ctx.app, row, state)
    managed = set(state.get("instanceGroups") or []) if state.get("enabled") else set()
    groups = [
        {
            "name": g["InstanceGroupName"],
            "currentCount": g.get("CurrentCount", 0),
            "targetCount": g.get("TargetCount", 0),
            "status": g.get("Status"),
        }
        for g in cluster.get("InstanceGroups", [])
        if g["InstanceGroupName"] in managed
    ]
    if op is None:
        status, message = "NOT_STARTED", "Karpenter has not been enabled by InstantStart on this cluster"
    elif op.status.value in ("PENDING", "RUNNING"):
        stage = next((s for s in op.stages if s.status.value == "RUNNING"), None)
        status = "IN_PROGRESS"
        message = f"{op.kind}: {stage.name + ': ' + stage.message if stage else op.status.value}"
    elif op.status.value == "SUCCEEDED":
        status = "ENABLED" if op.kind == "karpenter_enable" else "DISABLED"
        message = f"{op.kind} succeeded"
    else:
        status, message = "FAILED", f"{op.kind} {op.status.value}"
    return KarpenterStatus(
        cluster_tag=tag,
        state=status,
        terminal=status != "IN_PROGRESS",
        enabled=bool(state.get("enabled")),
        message=message,
        operation_id=op.operation_id if op else None,
        error=op.error.model_dump(by_alias=True) if op and op.error and status == "FAILED" else None,
        autoscaling=cluster.get("AutoScaling"),
        node_pool=pool,
        node_class=nodeclass,
        instance_groups=groups,
        settings=state.get("settings") if state.get("enabled") else None,
    )
