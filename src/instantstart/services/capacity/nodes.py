"""HyperPod nodes: reboot, replace and delete by i-… or hyperpod-i-… id, each to its terminal state; software."""

from __future__ import annotations

from typing import Any, Literal

from anyio import to_thread
from pydantic import Field

from instantstart.aws.hyperpod import HyperPod
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import NotFound, PreconditionFailed, ProviderError
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.reads import read_node
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.facts import facts_of
from instantstart.services.base.hyperpod_reads import NODE_ID, instance_id
from instantstart.services.base.lifecycle import approved_scripts
from instantstart.services.base.registry import (
    ClusterParams,
    get_cluster,
    hyperpod_cluster_name,
    resolve_tag,
    submit_for_cluster,
)
from instantstart.services.capacity.node_guards import refuse_unowned, verify_node_script
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

NODE_TIMEOUT = 3600
SOFTWARE_TIMEOUT = 6 * 3600
NodeAction = Literal["reboot", "replace", "delete"]


class NodeRequest(WireModel):
    """One HyperPod node, by EC2 instance id (i-…) or Kubernetes Node name (hyperpod-i-…)."""

    cluster_tag: ClusterTag | None = None
    node_id: str = Field(pattern=NODE_ID, description="i-0123456789abcdef0 or hyperpod-i-0123456789abcdef0")


class NodeActionParams(ClusterParams):
    """Params of node_reboot, node_replace and node_delete: the node (EC2 instance id) and the action."""

    node_id: str
    action: NodeAction


def kube_node(app: AppContext, row: ClusterRow, name: str) -> dict[str, Any] | None:
    """The Kubernetes Node `hyperpod-<id>` as the API server has it (None when absent; blocking)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    return kube_call(f"read Node {name}", read_node, api, name)


def node_ready(node: dict[str, Any] | None) -> bool:
    """Whether a Kubernetes Node reports Ready=True."""
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def submit_node_op(ctx: CallContext, req: NodeRequest, action: NodeAction) -> OperationRef:
    """Check the node exists in the cluster, then submit node_<action> (a replayed clientToken returns the
    operation it started, even once the node is gone)."""
    replayed = await ctx.app.runner.replay(f"node_{action}", ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    node = instance_id(req.node_id)
    cluster = hyperpod_cluster_name(row)
    found = await blocking(HyperPod(ctx.app.aws, row.region).describe_node, cluster, node)
    if found is None:
        raise NotFound(
            f"Invalid input: nodeId: node {node} is not in {cluster}",
            hint="cluster_get_status lists the nodes (Kubernetes names hyperpod-i-…).",
            details={"fields": [{"field": "nodeId", "message": "no such node"}]},
        )
    if action in ("replace", "delete"):
        await blocking(refuse_unowned, ctx.app, row.region, cluster, action)
    if action == "replace":  # refused at once (the stage checks again just before the call)
        await blocking(verify_node_script, ctx.app.aws, row.region, cluster, found, approved_scripts(facts_of(row)))
    return await submit_for_cluster(
        ctx,
        f"node_{action}",
        tag,
        NodeActionParams(cluster_tag=tag, region=row.region, node_id=node, action=action),
        status_tool="operation_get",
        poll_after_seconds=15,
    )


def batch(sm: HyperPod, cluster: str, node: str, action: str) -> None:
    """One Batch{Reboot,Replace,Delete}ClusterNodes call; a per-node failure fails the stage for good (blocking)."""
    for failure in sm.batch_node_action(cluster, node, action):
        code = failure.get("ErrorCode") or failure.get("Code") or "FAILED"
        error = PreconditionFailed if "Status" in code else ProviderError
        raise error(
            f"HyperPod refused to {action} {node}: {code}: {failure.get('Message', '')}",
            hint="A node must be Running to reboot or replace it; wait for its current action to finish.",
            retryable=False,
        )


async def stage_request(stage: StageContext) -> dict[str, Any]:
    """Issue the batch call once (a node already on its way is not asked twice)."""
    p = stage.params_as(NodeActionParams)
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    sm = HyperPod(stage.app.aws, p.region)
    cluster = hyperpod_cluster_name(row)
    node = await blocking(sm.describe_node, cluster, p.node_id)
    if node is None:
        if p.action == "delete":
            return {"nodeId": p.node_id, "group": None, "before": []}
        raise NotFound(f"Node {p.node_id} is not in {cluster}.")
    group = str(node.get("InstanceGroupName"))
    listed = await blocking(sm.list_nodes, cluster, group)
    mates = [n for n in listed if n["InstanceGroupName"] == group]
    status = (node.get("InstanceStatus") or {}).get("Status")
    message = (node.get("InstanceStatus") or {}).get("Message") or ""
    already = (p.action == "reboot" and status == "Pending" and "reboot" in message.lower()) or (
        p.action != "reboot" and status == "ShuttingDown"
    )
    launched = _stamp(node.get("LaunchTime"))
    if already and p.action == "replace":
        # Asked before a restart: the replacement may exist already, so only what ran before the old node counts.
        mates = [n for n in mates if _stamp(n.get("LaunchTime")) <= launched]
    if not already:
        if p.action == "replace":
            await blocking(verify_node_script, stage.app.aws, p.region, cluster, node, approved_scripts(facts_of(row)))
        await stage.progress(f"{p.action} {p.node_id} ({group}, {status})")
        await blocking(batch, sm, cluster, p.node_id, p.action)
    # A node still provisioning has no InstanceId yet (listed only with IncludeNodeLogicalIds, which we do
    # not ask for); .get keeps the reader safe either way.
    return {"nodeId": p.node_id, "group": group, "before": [n["InstanceId"] for n in mates if n.get("InstanceId")]}


def _stamp(value: Any) -> float:
    """A boto3 timestamp (datetime or epoch seconds) as epoch seconds; 0 when absent."""
    if value is None:
        return 0.0
    return float(value.timestamp()) if hasattr(value, "timestamp") else float(value)


async def stage_settle(stage: StageContext) -> dict[str, Any]:
    """Poll the node (and its Kubernetes Node) to the action's terminal state."""
    p = stage.params_as(NodeActionParams)
    app = stage.app
    asked = stage.outputs["request"]
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    sm = HyperPod(app.aws, p.region)
    cluster = hyperpod_cluster_name(row)
    node_id, action = p.node_id, p.action
    result: dict[str, Any] = {"nodeId": node_id, "action": action}

    async def settled() -> tuple[bool, str]:
        node = await blocking(sm.describe_node, cluster, node_id)
        if action == "reboot":
            status = ((node or {}).get("InstanceStatus") or {}).get("Status", "gone")
            if node is None or status == "Failure":
                raise ProviderError(f"Node {node_id} did not come back from the reboot ({status}).", retryable=False)
            kube = await blocking(kube_node, app, row, f"hyperpod-{node_id}")
            done = status == "Running" and node_ready(kube)
            return done, f"{node_id}: {status}, Kubernetes Node {'Ready' if node_ready(kube) else 'not Ready'}"
        if node is not None:
            return False, f"{node_id}: {(node.get('InstanceStatus') or {}).get('Status')}"
        if action == "delete":
            kube = await blocking(kube_node, app, row, f"hyperpod-{node_id}")
            return kube is None, f"{node_id} terminated" + ("" if kube is None else "; Kubernetes Node still listed")
        # replace: the old instance is gone; a new one in the same group must be Running and Ready.
        listed = await blocking(sm.list_nodes, cluster, asked["group"])
        fresh = [
            n
            for n in listed
            if n["InstanceGroupName"] == asked["group"]
            and n.get("InstanceId")
            and n["InstanceId"] not in asked["before"]
        ]
        if not fresh:
            return False, f"{node_id} terminated; waiting for its replacement"
        new = max(fresh, key=lambda n: _stamp(n.get("LaunchTime")))
        status = new["InstanceStatus"]["Status"]
        kube = await blocking(kube_node, app, row, f"hyperpod-{new['InstanceId']}")
        result["newNodeId"] = new["InstanceId"]
        return status == "Running" and node_ready(kube), f"replacement {new['InstanceId']}: {status}"

    await wait_until(stage, settled, limit_seconds=NODE_TIMEOUT, what=f"{action} of node {node_id}")
    if action == "replace":
        result["note"] = "The replacement is new hardware: instance volumes of the old node were lost."
    return result


def _register(action: NodeAction) -> None:
    KINDS.register(
        OperationKind(
            name=f"node_{action}",
            params=NodeActionParams,
            stages=(
                StageSpec("request", stage_request, max_attempts=3, backoff_seconds=3),
                StageSpec(
                    "settle", stage_settle, max_attempts=3, timeout_seconds=NODE_TIMEOUT + 300, backoff_seconds=3
                ),
            ),
        )
    )


_register("reboot")
_register("replace")
_register("delete")


@operation(
    "hyperpod_node_reboot",
    destructive=True,
    idempotent=False,
    method="POST",
    path="/capacity/nodes/reboot",
    completion="operation_get",
    example={"nodeId": "i-0123456789abcdef0"},
)
async def hyperpod_node_reboot(ctx: CallContext, req: NodeRequest) -> OperationRef:
    """Soft-reboot one HyperPod node (i-… or hyperpod-i-…); it must be Running. Finished when the
    node is Running again and its Kubernetes Node is Ready (volumes are kept)."""
    return await submit_node_op(ctx, req, "reboot")


@operation(
    "hyperpod_node_replace",
    destructive=True,
    idempotent=False,
    method="POST",
    path="/capacity/nodes/replace",
    completion="operation_get",
    example={"nodeId": "i-0123456789abcdef0"},
)
async def hyperpod_node_replace(ctx: CallContext, req: NodeRequest) -> OperationRef:
    """WARNING: instance volumes (root, EBS secondary, NVMe) of the node are lost. Replace one
    HyperPod node (i-… or hyperpod-i-…) with new hardware of the same group configuration; it must be
    Running; its group's lifecycle script must be InstantStart's (SHA-256; CONFLICT with the fix otherwise).
    Finished when the old instance is gone and the replacement (newNodeId in the result) is Running with a
    Ready Kubernetes Node."""
    return await submit_node_op(ctx, req, "replace")


@operation(
    "hyperpod_node_delete",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/capacity/nodes/delete",
    completion="operation_get",
    example={"nodeId": "i-0123456789abcdef0"},
)
async def hyperpod_node_delete(ctx: CallContext, req: NodeRequest) -> OperationRef:
    """Terminate one HyperPod node (i-… or hyperpod-i-…); its group's target count drops by one so
    no replacement is launched. Finished when the instance and its Kubernetes Node are gone."""
    return await submit_node_op(ctx, req, "delete")
