"""hyperpod_update_software: UpdateClusterSoftware with the API's DeploymentConfig (batches, wait, alarms),
progress per batch, and an end that says why (completed, or rolled back by alarm X) with every node's release."""

from __future__ import annotations

from typing import Any

from anyio import to_thread

from instantstart.aws.cloudwatch import alarm_states
from instantstart.aws.hyperpod import HyperPod
from instantstart.catalog import operation
from instantstart.context import CallContext, StageContext
from instantstart.errors import NotFound, ProviderError
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.facts import facts_of
from instantstart.services.base.hyperpod_groups import described
from instantstart.services.base.lifecycle import approved_scripts, verify_groups
from instantstart.services.base.registry import get_cluster, hyperpod_cluster_name, submit_for_cluster
from instantstart.services.capacity.software.models import SoftwareParams, SoftwareRequest, api_request
from instantstart.services.capacity.software.plan import build_plan, chosen_groups, group_nodes, row_for

SOFTWARE_TIMEOUT = 6 * 3600
RUNNING = ("Pending", "InProgress", "RollbackInProgress")
ROLLED_BACK = ("RollbackComplete", "Failed")


def request_of(p: SoftwareParams) -> dict[str, Any]:
    """UpdateClusterSoftware's InstanceGroups and DeploymentConfig as the params hold them."""
    out: dict[str, Any] = {}
    if p.instance_groups:
        out["InstanceGroups"] = p.instance_groups
    if p.deployment_config is not None:
        out["DeploymentConfig"] = p.deployment_config
    return out


def describe_hyperpod_or_fail(sm: HyperPod, name: str) -> dict[str, Any]:
    """DescribeCluster; NotFound when the cluster is gone (blocking)."""
    cluster = sm.describe_cluster(name)
    if cluster is None:
        raise NotFound(f"HyperPod cluster {name} does not exist.")
    return cluster


async def stage_plan(stage: StageContext) -> dict[str, Any]:
    """The batches and what each interrupts, recorded before anything changes (the progress reports on them)."""
    p = stage.params_as(SoftwareParams)
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    plan = await blocking(build_plan, stage.app, row, request_of(p))
    sm = HyperPod(stage.app.aws, p.region)
    name = hyperpod_cluster_name(row)
    # When each node was last updated: a batch that keeps its release (a lifecycle script roll) is done when it moved.
    last = {str(n["InstanceId"]): _iso(n.get("LastSoftwareUpdateTime")) for g in plan.groups
            for n in await blocking(group_nodes, sm, name, g.instance_group) if n.get("InstanceId")}
    return {**plan.model_dump(mode="json", by_alias=True), "lastSoftwareUpdate": last}


def _iso(value: Any) -> str | None:
    return value.isoformat() if hasattr(value, "isoformat") else (None if value is None else str(value))


def batch_states(plan: dict[str, Any], nodes: dict[str, dict[str, Any]], statuses: dict[str, str]) -> list[Any]:
    """Per planned batch: group, number, state (pending, updating, updated, rolling back, rolled back)."""
    out = []
    for group in plan["groups"]:
        name, before, count = group["instanceGroup"], group["currentRelease"], len(group["batches"])
        status = statuses.get(name, "-")
        for batch in group["batches"]:
            live = [nodes.get(n) or {} for n in batch["nodes"]]
            busy = any((n.get("InstanceStatus") or {}).get("Status") == "SystemUpdating" for n in live)
            last = plan.get("lastSoftwareUpdate") or {}
            moved = all(n.get("CurrentImageReleaseVersion") not in (None, before)
                        or _iso(n.get("LastSoftwareUpdateTime")) not in (None, last.get(n.get("InstanceId")))
                        for n in live)
            state = "updating" if busy else "updated" if moved else "pending"
            if status == "RollbackInProgress" and busy:
                state = "rolling back"
            out.append({"group": name, "batch": f"{batch['number']}/{count}", "nodes": batch["nodes"],
                        "state": state, "groupStatus": status})
    return out


def updated_since_plan(sm: HyperPod, name: str, plan: dict[str, Any]) -> bool:
    """Whether a node of the plan was updated after the plan was read (LastSoftwareUpdateTime moved; blocking)."""
    last = plan.get("lastSoftwareUpdate") or {}
    for group in plan["groups"]:
        for node in group_nodes(sm, name, group["instanceGroup"]):
            iid = node.get("InstanceId")
            if iid in last and _iso(node.get("LastSoftwareUpdateTime")) != last[iid]:
                return True
    return False


async def stage_update(stage: StageContext) -> dict[str, Any]:
    """UpdateClusterSoftware once, then every batch's progress until no group's update is pending or running."""
    p = stage.params_as(SoftwareParams)
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    sm = HyperPod(stage.app.aws, p.region)
    name = hyperpod_cluster_name(row)
    request = request_of(p)
    cluster = await blocking(describe_hyperpod_or_fail, sm, name)
    groups = chosen_groups(cluster, request)
    plan = stage.outputs["plan"]
    # A retry or a resumed run asks HyperPod once: an update under way, or nodes updated since the plan, mean an
    # earlier attempt's call went through.
    if not any(g.get("SoftwareUpdateStatus") in RUNNING for g in groups) and not (
        stage.attempt > 1 and await blocking(updated_since_plan, sm, name, plan)
    ):
        # UpdateClusterSoftware re-runs the lifecycle scripts on every instance it updates (HyperPod docs).
        await blocking(verify_groups, stage.app.aws, p.region, groups, only_ours=True,
                       approved=approved_scripts(facts_of(row)))
        await stage.progress(f"UpdateClusterSoftware {name}")
        await blocking(sm.update_cluster_software, name, **request)
    seen: dict[str, Any] = {"states": [], "updatingWhenRollbackStarted": {}}

    async def done() -> tuple[bool, str]:
        now = await blocking(describe_hyperpod_or_fail, sm, name)
        statuses = {str(g["InstanceGroupName"]): str(g.get("SoftwareUpdateStatus", "-"))
                    for g in chosen_groups(now, request)}
        nodes = {str(n["InstanceId"]): n for g in statuses for n in await blocking(group_nodes, sm, name, g)
                 if n.get("InstanceId")}
        states = batch_states(plan, nodes, statuses)
        for s in seen["states"]:  # the batch that was updating when the group's roll back began
            if s["state"] == "updating" and statuses.get(s["group"]) in ("RollbackInProgress", *ROLLED_BACK):
                seen["updatingWhenRollbackStarted"].setdefault(s["group"], s["batch"])
        seen["states"] = states
        busy = [g for g, s in statuses.items() if s in RUNNING]
        text = "; ".join(f"{s['group']} batch {s['batch']} {s['state']}" for s in states)
        return now.get("ClusterStatus") == "InService" and not busy, f"{name} {now.get('ClusterStatus')}: {text}"

    await wait_until(stage, done, limit_seconds=SOFTWARE_TIMEOUT, what=f"software update of {name}")
    return {"batches": seen["states"], "updatingWhenRollbackStarted": seen["updatingWhenRollbackStarted"]}


async def stage_report(stage: StageContext) -> dict[str, Any]:
    """How it ended: completed (every node's release), or the roll back with the alarm that caused it (fails the
    operation, the nodes' releases in the error's details)."""
    p = stage.params_as(SoftwareParams)
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    sm = HyperPod(stage.app.aws, p.region)
    name = hyperpod_cluster_name(row)
    request = request_of(p)
    cluster = await blocking(describe_hyperpod_or_fail, sm, name)
    statuses = {str(g["InstanceGroupName"]): str(g.get("SoftwareUpdateStatus", "-"))
                for g in chosen_groups(cluster, request)}
    nodes = {str(n["InstanceId"]): str(n.get("CurrentImageReleaseVersion"))
             for g in statuses for n in await blocking(group_nodes, sm, name, g) if n.get("InstanceId")}
    rolled = [g for g, s in statuses.items() if s in ROLLED_BACK]
    if not rolled:
        return {"outcome": "completed", "reason": "Completed: every batch of " + ", ".join(statuses) + " updated.",
                "groups": statuses, "nodes": nodes}
    configured = [str(a["AlarmName"]) for a in (p.deployment_config or {}).get("AutoRollbackConfiguration") or []]
    alarms = await blocking(alarm_states, stage.app.aws, p.region, configured)
    firing = [a for a, s in alarms.items() if s.get("state") == "ALARM"]
    during = stage.outputs["update"].get("updatingWhenRollbackStarted") or {}
    cause = (f"alarm {', '.join(firing)} in ALARM" if firing else
             f"HyperPod ({', '.join(statuses[g] for g in rolled)}; alarms watched: {', '.join(configured) or 'none'})")
    where = ", ".join(f"{g}" + (f" during batch {during[g]}" if g in during else "") for g in rolled)
    reason = f"Rolled back by {cause}: the software update of {where} was undone; no node runs the new release."
    raise ProviderError(
        reason,
        hint="Find why the alarm fired (CloudWatch shows its reason), set it back to OK, then run "
             "cluster_update_plan and hyperpod_update_software again.",
        details={"outcome": "rolled_back", "reason": reason, "alarms": alarms, "groups": statuses, "nodes": nodes},
        retryable=False,
    )


KINDS.register(
    OperationKind(
        name="hyperpod_software_update",
        params=SoftwareParams,
        stages=(
            StageSpec("plan", stage_plan, max_attempts=3, backoff_seconds=3),
            StageSpec("update", stage_update, max_attempts=3, timeout_seconds=SOFTWARE_TIMEOUT + 600),
            StageSpec("report", stage_report, max_attempts=3, backoff_seconds=3),
        ),
    )
)


@operation(
    "hyperpod_update_software",
    destructive=True,
    idempotent=False,
    method="POST",
    path="/capacity/software-update",
    completion="operation_get",
    example={},
)
async def hyperpod_update_software(ctx: CallContext, req: SoftwareRequest) -> OperationRef:
    """Patch the HyperPod cluster's instance groups (instanceGroups, default all; clusterArn or clusterTag,
    default the active cluster) to the latest HyperPod release (or imageReleaseVersion) with
    UpdateClusterSoftware. deploymentConfig as the API takes it: rollingUpdatePolicy.maximumBatchSize
    {type INSTANCE_COUNT|CAPACITY_PERCENTAGE, value} (all nodes at once when absent), rollbackMaximumBatchSize,
    waitIntervalInSeconds (0-3600) between batches, autoRollbackConfiguration [{alarmName}] (CloudWatch alarms
    HyperPod watches during and between batches; ALARM rolls the group back). Nodes of a batch are drained (pods
    evicted) and go SystemUpdating. Run cluster_update_plan first to see the batches and the jobs they interrupt.
    Stages: plan, update (progress per batch), report (every node's release). A roll back fails the operation with
    the alarm and the nodes' releases in the error."""
    replayed = await ctx.app.runner.replay("hyperpod_software_update", ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    row = await to_thread.run_sync(row_for, ctx.app.db, req)
    await described(ctx.app, row)
    request = api_request(req)
    return await submit_for_cluster(
        ctx,
        "hyperpod_software_update",
        row.tag,
        SoftwareParams(cluster_tag=row.tag, region=row.region, instance_groups=request.get("InstanceGroups"),
                       deployment_config=request.get("DeploymentConfig")),
        status_tool="operation_get",
        poll_after_seconds=60,
    )
