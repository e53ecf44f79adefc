"""node_list: every node of a cluster from its watches, filtered and paginated (the detail cluster_get_status omits)."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.errors import InvalidInput
from instantstart.services.base.registry import get_cluster, resolve_tag
from instantstart.services.base.status_model import NodeStatus, WatchFreshness
from instantstart.services.base.watch.digest import node_status, unhealthy
from instantstart.services.base.watch.view import node_state

DEFAULT_LIMIT = 20
MAX_LIMIT = 200


class NodeListRequest(WireModel):
    """Which nodes, and which page."""

    cluster_tag: str | None = Field(default=None, description="Default: the active cluster.")
    instance_group: str | None = Field(default=None, description="Only nodes of this HyperPod instance group.")
    instance_type: str | None = Field(default=None, description="Only this instance type, e.g. ml.p5.48xlarge.")
    ready: bool | None = Field(default=None, description="Only Ready (true) or not Ready (false) nodes.")
    schedulable: bool | None = Field(default=None, description="Only schedulable (true) or unschedulable nodes.")
    health_status: str | None = Field(default=None, description="Only this node-health-status label value.")
    unhealthy_only: bool = Field(default=False, description="Only nodes needing attention.")
    name_contains: str | None = Field(default=None, max_length=253)
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="Nodes per page.")
    after: str | None = Field(default=None, description="nextAfter of the previous page (node names are the order).")


class NodeListResult(WireModel):
    """One page of nodes, ordered by name."""

    cluster_tag: str
    nodes: list[NodeStatus]
    total: int = Field(description="Nodes matching the filters, on every page.")
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")
    watch: WatchFreshness


def _matches(req: NodeListRequest, row: dict[str, Any]) -> bool:
    return (
        (req.instance_group is None or row["instanceGroup"] == req.instance_group)
        and (req.instance_type is None or row["instanceType"] == req.instance_type)
        and (req.ready is None or row["ready"] == req.ready)
        and (req.schedulable is None or row["schedulable"] == req.schedulable)
        and (req.health_status is None or row["healthStatus"] == req.health_status)
        and (not req.unhealthy_only or unhealthy(row))
        and (req.name_contains is None or req.name_contains in row["name"])
    )


@operation("node_list", method="GET", path="/clusters/nodes", example={"limit": 5})
async def node_list(ctx: CallContext, req: NodeListRequest) -> NodeListResult:
    """The Kubernetes nodes of a cluster (default: the active one), one page at a time, ordered by name:
    Ready, schedulable, HyperPod health and deep-health-check labels, fault reasons, taints, instance type
    and group, GPUs allocatable and requested. Filter by instanceGroup, instanceType, ready, schedulable,
    healthStatus, unhealthyOnly or nameContains; pass the answer's nextAfter as `after` for the next page.
    Served from the cluster's watches (`watch` says how fresh)."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    if not row.eks_cluster_name:
        raise InvalidInput(f"Cluster {tag} has no EKS cluster yet.", hint="Run the EKS stage (cluster_create_eks).")
    digest, _, fresh = await node_state(ctx.app, row)
    matching = [r for r in digest.by_name if _matches(req, r)]
    start = 0
    if req.after:
        start = next((i for i, r in enumerate(matching) if r["name"] > req.after), len(matching))
    page = matching[start : start + req.limit]
    more = start + req.limit < len(matching)
    return NodeListResult(
        cluster_tag=tag,
        nodes=[node_status(r) for r in page],
        total=len(matching),
        next_after=page[-1]["name"] if page and more else None,
        watch=WatchFreshness.model_validate(fresh.as_dict()),
    )
