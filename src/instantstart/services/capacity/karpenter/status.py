"""karpenter_get_status: where managed Karpenter stands on a cluster (operation, autoscaling, NodePool, groups)."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws.hyperpod import HyperPod
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.kube.calls import kube_api
from instantstart.operations.models import OperationView
from instantstart.operations.waiting import blocking
from instantstart.services.base.registry import get_cluster, hyperpod_cluster_name, resolve_tag
from instantstart.services.base.target import cluster_target
from instantstart.services.capacity.karpenter.nodepool import OBJECTS, read_object, ready
from instantstart.services.capacity.karpenter.state import state_of
from instantstart.services.capacity.karpenter.toggle import ClusterOnly
from instantstart.store.models import ClusterRow


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
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    out: list[dict[str, Any] | None] = []
    for key, group, plural in OBJECTS:
        name = state.get(key)
        obj = read_object(api, group, plural, name) if name else None
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


FEATURES_KIND = "advanced_features_update"
"""hyperpod_update_advanced_features runs a karpenter key sent with other keys as its `karpenter` stage."""


def toggle_state(op: OperationView | None) -> tuple[str, str]:
    """ENABLED, DISABLED, IN_PROGRESS, FAILED or NOT_STARTED, with a message, from the latest toggle operation."""
    if op is None:
        return "NOT_STARTED", "Karpenter has not been enabled by InstantStart on this cluster"
    if op.kind == FEATURES_KIND:
        step = next(s for s in op.stages if s.name == "karpenter")
        on = bool(((op.params.get("features") or {}).get("karpenter") or {}).get("enabled"))
        if step.status.value in ("PENDING", "RUNNING") and op.status.value in ("PENDING", "RUNNING"):
            return "IN_PROGRESS", f"{op.kind}: karpenter: {step.message or step.status.value}"
        if step.status.value == "SUCCEEDED":
            return ("ENABLED" if on else "DISABLED"), f"{op.kind} (karpenter) succeeded"
        return "FAILED", f"{op.kind} (karpenter) {step.status.value}"
    if op.status.value in ("PENDING", "RUNNING"):
        stage = next((s for s in op.stages if s.status.value == "RUNNING"), None)
        return "IN_PROGRESS", f"{op.kind}: {stage.name + ': ' + stage.message if stage else op.status.value}"
    if op.status.value == "SUCCEEDED":
        return ("ENABLED" if op.kind == "karpenter_enable" else "DISABLED"), f"{op.kind} succeeded"
    return "FAILED", f"{op.kind} {op.status.value}"


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
    found, _ = await blocking(ctx.app.runner.store.list_operations, target=cluster_target(tag), kind=FEATURES_KIND,
                              limit=20)
    ops.extend(o for o in found if "karpenter" in ((o.params or {}).get("features") or {}))
    ops.sort(key=lambda o: o.created_at, reverse=True)
    op = ops[0] if ops else None
    sm = HyperPod(ctx.app.aws, row.region)
    cluster = await blocking(sm.describe_cluster, hyperpod_cluster_name(row)) or {}
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
    status, message = toggle_state(op)
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
