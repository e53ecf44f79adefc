"""`cluster_timeline` (compatibility name `cluster_events`): a cluster's timeline read with filters, bounded; a pure
read of what the cluster's feeds (events watch, HyperPod events poll; monitoring.feeds) recorded."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.services.base.hyperpod_reads import NODE_ID
from instantstart.services.base.registry import get_cluster, resolve_tag
from instantstart.services.base.watch.timeline import writer
from instantstart.services.base.watch.watched import events_attachable
from instantstart.services.monitoring import feeds
from instantstart.store import timeline as store
from instantstart.store.access import AuditRow, actors
from instantstart.store.models import ClusterRow, utcnow
from instantstart.store.usage import SOURCE as USAGE  # pod holds: usage_report's, not this listing's
from instantstart.validation import ClusterTag

MESSAGE_CHARS = 300
DNS_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"


class TimelineRequest(WireModel):
    """Which entries of the timeline: source, object, node or instance group, time window, type; one page."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Default: see cluster_list_all (active).")
    source: Literal["all", "kubernetes", "hyperpod", "operation"] = Field(
        default="all", description="kubernetes (core/v1 events), hyperpod (cluster/node events), operation (ours)."
    )
    object_kind: str | None = Field(
        default=None, pattern=r"^[A-Z][A-Za-z]{1,62}$",
        description="Pod, Node, Job, Deployment, Operation, Stage, Cluster, Instance, InstanceGroup…",
    )
    object_name: str | None = Field(default=None, max_length=300, description="Only entries about this object.")
    object_prefix: str | None = Field(
        default=None, pattern=DNS_NAME,
        description="Only entries about the object named so or `<prefix>-…` (a job or endpoint and its pods).",
    )
    namespace: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    node_id: str | None = Field(
        default=None, pattern=NODE_ID, description="One node (i-… or hyperpod-i-…): its HyperPod and Kubernetes events."
    )
    instance_group_name: str | None = Field(
        default=None, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$", description="HyperPod events of one group."
    )
    since_minutes: int | None = Field(
        default=None, ge=1, le=129600, description="Only entries seen in the last N minutes (default: any age)."
    )
    warnings_only: bool = Field(default=False, description="Kubernetes Warning / HyperPod Error and Warn only.")
    type: Literal["Normal", "Warning"] | None = Field(default=None, description="Normal or Warning.")
    limit: int = Field(default=50, ge=1, le=200, description="At most this many entries, newest first.")
    before: int | None = Field(default=None, ge=1, description="nextBefore of the previous page.")


class Actor(WireModel):
    """Who started an operation (its audit trail entry)."""

    user: str
    token_name: str
    face: str = Field(description="rest, mcp, cli or ui.")
    source: str = Field(description="The caller's address.")


class TimelineEntry(WireModel):
    """One happening."""

    id: int
    source: str
    object_kind: str
    object_name: str
    namespace: str = Field(description="Kubernetes namespace; for a HyperPod entry its instance group.")
    type: str
    reason: str
    message: str
    count: int
    first_at: datetime
    last_at: datetime
    actor: Actor | None = Field(default=None, description="An operation's entry: who started it (audit trail).")


class TimelineResult(WireModel):
    """One page of the timeline, newest first."""

    cluster_tag: str
    entries: list[TimelineEntry]
    next_before: int | None = Field(description="Pass as `before` for older entries; null when none are left.")
    unavailable: list[str] = Field(
        default_factory=list, description="Sources that could not be refreshed now, with the reason."
    )


async def _refresh(ctx: CallContext, row: ClusterRow, req: TimelineRequest) -> list[str]:
    """Wait (bounded) for the cluster's feeds to be current; the sources that are not, with why. Reads nothing
    live and writes nothing: the feeds (monitoring.feeds), started by the cluster registry, record the timeline."""
    app, unavailable = ctx.app, []
    if req.source in ("all", "kubernetes"):
        if events_attachable(row):
            if why := await feeds.events_unavailable(app, row):
                unavailable.append(f"kubernetes: {why}")
        elif req.source == "kubernetes":
            unavailable.append("kubernetes: the cluster's EKS stage has not succeeded yet")
    if req.source in ("all", "hyperpod"):
        if feeds.has_hyperpod(row):
            if why := await feeds.hyperpod_unavailable(app, row.tag):
                unavailable.append(f"hyperpod: {why}")
        elif req.source == "hyperpod":
            unavailable.append("hyperpod: the cluster has no HyperPod cluster yet")
    await to_thread.run_sync(writer(app).flush)  # what the feeds queued before this read is in the store
    return unavailable


async def read_timeline(ctx: CallContext, req: TimelineRequest) -> TimelineResult:
    """The one implementation behind cluster_timeline and cluster_events."""
    app = ctx.app
    tag = await to_thread.run_sync(resolve_tag, app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, app.db, tag)
    if req.instance_group_name and req.source == "all":
        req = req.model_copy(update={"source": "hyperpod"})  # instance groups are HyperPod's
    unavailable = await _refresh(ctx, row, req)
    node = req.node_id.removeprefix("hyperpod-") if req.node_id else None
    since = utcnow() - timedelta(minutes=req.since_minutes) if req.since_minutes else None
    rows = await to_thread.run_sync(lambda: store.query(
        app.db, tag, object_kind=req.object_kind, object_name=req.object_name, object_prefix=req.object_prefix,
        object_names=(node, f"hyperpod-{node}") if node else (),
        namespace=req.instance_group_name or req.namespace, type_="Warning" if req.warnings_only else req.type,
        source=None if req.source == "all" else req.source, exclude_source=USAGE, since=since, before_id=req.before,
        limit=req.limit + 1,
    ))
    page = rows[: req.limit]
    started = await to_thread.run_sync(actors, app.db, [r.object_name for r in page if r.object_kind == "Operation"])
    entries = [
        TimelineEntry(
            id=r.id, source=r.source, object_kind=r.object_kind, object_name=r.object_name, namespace=r.namespace,
            type=r.type, reason=r.reason, message=_short(r.message), count=r.count, first_at=r.first_at,
            last_at=r.last_at, actor=_actor(started.get(r.object_name) if r.object_kind == "Operation" else None),
        )
        for r in page
    ]
    more = len(rows) > req.limit
    return TimelineResult(
        cluster_tag=tag, entries=entries, next_before=page[-1].id if more else None, unavailable=unavailable
    )


def _actor(row: AuditRow | None) -> Actor | None:
    return None if row is None else Actor(user=row.user, token_name=row.token_name, face=row.face, source=row.source)


def _short(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


@operation("cluster_timeline", method="GET", path="/clusters/timeline", example={"limit": 5})
async def cluster_timeline(ctx: CallContext, req: TimelineRequest) -> TimelineResult:
    """Read-only, bounded: at most `limit` (≤200) entries per page, newest first, messages cut to 300
    characters. The timeline of a cluster (default: the active one): Kubernetes events (kept after the API
    server expires them), HyperPod cluster and node events, and the control plane's operations and stage
    transitions. Filter by source, objectKind/objectName/objectPrefix/namespace, nodeId (its HyperPod and Kubernetes
    events), instanceGroupName, sinceMinutes, warningsOnly or type; page with `before`. A cluster read for
    the first time waits (bounded) for its feeds' first pass; a source not current is listed in `unavailable`. An
    operation's entry names who started it (`actor`: user, token name, face, source address; audit trail)."""
    return await read_timeline(ctx, req)


@operation("cluster_events", method="GET", path="/diagnostics/events", example={"sinceMinutes": 30})
async def cluster_events(ctx: CallContext, req: TimelineRequest) -> TimelineResult:
    """Read-only, bounded: the compatibility name of cluster_timeline (same parameters, same answer, same
    code): at most `limit` (≤200) timeline entries, newest first; Kubernetes, HyperPod and operation events
    filtered by nodeId, object, instanceGroupName, sinceMinutes, warningsOnly."""
    return await read_timeline(ctx, req)
