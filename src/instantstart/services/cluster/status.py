"""cluster_get_status: the active cluster's status (services/base/cluster_status.py builds it), one build shared by
every poller within a short window."""

from __future__ import annotations

from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.manifests.storage import DEFAULT_CLAIM
from instantstart.services.base.cluster_status import DEFAULT_NODE_LIMIT, collect_status
from instantstart.services.base.facts import facts_of
from instantstart.services.base.registry import get_cluster, resolve_tag
from instantstart.services.base.status_model import ClusterStatus
from instantstart.services.base.watch.state import cached_db, db_cache
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

STATUS_MEMO_SECONDS = 0.25  # one status build shared by every poller within this window (checkedAt says when)


class StatusRequest(WireModel):
    """Which cluster cluster_get_status answers for and what it lists beyond the summary."""

    cluster_tag: ClusterTag | None = Field(
        default=None,
        description="The cluster to report (any managed one: cluster_list_all lists them); default the active "
        "cluster or the one being created. Its watches start, or resume when parked, on this read.",
    )
    node_limit: int = Field(
        default=DEFAULT_NODE_LIMIT, ge=0, le=100, description="How many nodes to list (those needing attention first)."
    )


@operation("cluster_get_status", method="GET", path="/clusters/status", example={})
async def cluster_get_status(ctx: CallContext, req: StatusRequest) -> ClusterStatus:
    """A cluster's health (clusterTag, default the active one) as a summary of bounded size at any cluster
    size: node counts, GPUs per instance type (allocatable total, requested by
    non-terminated pods, available on usable nodes), the HyperPod instance groups' counts against Ready
    nodes, storage claims (bound or not), dependency health, and at most `nodeLimit` nodes (Ready,
    schedulable, HyperPod health and deep-health-check labels, taints), those needing attention first;
    node_list pages through every node with filters. `ready` is true when everything matches; otherwise
    `problems` says what does not. Kubernetes data comes from the cluster's watches (`watch` says how
    fresh it is; stale while a watch is down), HyperPod's from a short cache, so polling it is cheap."""
    app = ctx.app
    tag: str = await cached_db(app, f"tag:{req.cluster_tag or ''}", lambda: resolve_tag(app.db, req.cluster_tag))
    row: ClusterRow = await cached_db(app, f"row:{tag}", lambda: get_cluster(app.db, tag))
    recorded = facts_of(row).storage
    claims = tuple(sorted(recorded)) if isinstance(recorded, dict) and recorded else (DEFAULT_CLAIM,)

    async def build() -> ClusterStatus:
        return await collect_status(app, tag, claims, req.node_limit)

    # Many pollers share one build (and the REST face one encoding of it) per STATUS_MEMO_SECONDS; an
    # operation changing the cluster forgets it at once (the timeline invalidates the status-path cache).
    memo: ClusterStatus = await db_cache(app).get(
        f"status:{tag}:{','.join(claims)}:{req.node_limit}", build, ttl=STATUS_MEMO_SECONDS
    )
    return memo
