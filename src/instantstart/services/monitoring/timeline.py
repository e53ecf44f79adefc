"""The timeline of each cluster: Kubernetes events (from the events watch), HyperPod cluster and node events, and
the control plane's own operations and stage transitions, stored with retention; `cluster_timeline` reads it
(the live `cluster_events` diagnostic is separate, to be folded together)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws import hyperpod as hp_api
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.kube.informers import ChangeListener
from instantstart.services.core.registry import get_cluster, resolve_tag
from instantstart.services.monitoring.state import LISTENER_FACTORIES, db_cache, informer
from instantstart.store import timeline as store
from instantstart.store.models import utcnow

log = logging.getLogger(__name__)
PRUNE_EVERY = 600.0
MESSAGE_CHARS = 300


def _when(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=utcnow().tzinfo)
    if value:
        try:
            return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            pass
    return utcnow()


class TimelineWriter:
    """Batches timeline entries into the database from one thread (writers never block a watch or a request)."""

    def __init__(self, app: AppContext) -> None:
        self.app = app
        self.pending: queue.Queue[store.Entry] = queue.Queue()
        self._pruned = 0.0
        self._idle = threading.Event()
        self._idle.set()
        self._thread = threading.Thread(target=self._run, name="timeline-writer", daemon=True)
        self._thread.start()

    def put(self, entry: store.Entry) -> None:
        """Queue an entry."""
        self._idle.clear()
        self.pending.put(entry)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until what is queued now is written (readers call this first)."""
        if not self.pending.empty() or not self._idle.is_set():
            self._idle.wait(timeout)

    def _run(self) -> None:
        while True:
            batch = [self.pending.get()]
            while len(batch) < 500:
                try:
                    batch.append(self.pending.get_nowait())
                except queue.Empty:
                    break
            try:
                store.record(self.app.db, batch)
                if time.monotonic() - self._pruned > PRUNE_EVERY:
                    self._pruned = time.monotonic()
                    days = self.app.settings.timeline_retention_days
                    store.prune(self.app.db, utcnow() - timedelta(days=days))
            except Exception:
                log.exception("timeline write failed (%d entries dropped)", len(batch))
            if self.pending.empty():
                self._idle.set()


_WRITERS: dict[int, TimelineWriter] = {}
_LOCK = threading.Lock()


def writer(app: AppContext) -> TimelineWriter:
    """The application's timeline writer (one per application context)."""
    with _LOCK:
        found = _WRITERS.get(id(app))
        if found is None or found.app is not app:
            found = _WRITERS[id(app)] = TimelineWriter(app)
        return found


def kubernetes_events(app: AppContext, tag: str) -> ChangeListener:
    """Events-watch listener: every new or repeated Kubernetes event becomes (or updates) a timeline entry.
    An event deleted by the API server's TTL is kept: deletions are ignored."""

    def on_change(kind: str, _key: str, _old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            return
        writer(app).put(store.Entry(
            cluster_tag=tag, dedupe_key=f"k8s:{new['uid']}", source="kubernetes", object_kind=new["objectKind"],
            object_name=new["objectName"], namespace=new["objectNamespace"], type=new["type"], reason=new["reason"],
            message=new["message"], count=new["count"], first_at=_when(new["first"]), last_at=_when(new["last"]),
        ))

    return on_change


LISTENER_FACTORIES.setdefault("events", []).append(kubernetes_events)


def on_operation(app: AppContext, view: Any) -> None:
    """Record an operation's state and each stage's status as timeline entries (deduplicated by state)."""
    target = view.target or ""
    if not target.startswith("cluster:"):
        return
    tag = target.removeprefix("cluster:")
    status = view.status.value
    now = utcnow()
    failed = "Warning" if status == "FAILED" else "Normal"
    error = view.error.message if view.error else ""
    w = writer(app)
    w.put(store.Entry(
        cluster_tag=tag, dedupe_key=f"op:{view.operation_id}:{status}", source="operation", object_kind="Operation",
        object_name=view.operation_id, namespace="", type=failed, reason=f"{view.kind} {status}",
        message=error[:1000], count=1, first_at=now, last_at=now,
    ))
    for stage in view.stages:
        if stage.status.value == "PENDING":
            continue
        w.put(store.Entry(
            cluster_tag=tag, dedupe_key=f"op:{view.operation_id}:{stage.name}:{stage.status.value}",
            source="operation", object_kind="Stage", object_name=f"{view.kind}/{stage.name}", namespace="",
            type="Warning" if stage.status.value == "FAILED" else "Normal",
            reason=f"stage {stage.status.value}", message=(stage.message or "")[:1000], count=1,
            first_at=now, last_at=now,
        ))


def attach(app: AppContext) -> None:
    """Record every operation change of this application in the timeline (the runner's listener)."""

    async def listener(operation_id: str) -> None:
        db_cache(app).invalidate()  # status reads see the change at once
        try:
            view = await to_thread.run_sync(app.runner.store.get, operation_id)
        except Exception:
            log.exception("timeline: operation %s not readable", operation_id)
            return
        on_operation(app, view)

    app.runner.add_listener(listener)


async def record_hyperpod_events(app: AppContext, tag: str, region: str, name: str) -> None:
    """Pull the HyperPod cluster's latest events (one ListClusterEvents per cache interval) into the timeline."""

    async def fetch() -> list[dict[str, Any]]:
        return await to_thread.run_sync(hp_api.list_events, app.aws, region, name)

    events: list[dict[str, Any]] = await app.cache.get(f"hpevents:{region}:{name}", fetch)
    w = writer(app)
    for e in events:
        when = _when(e.get("EventTime"))
        kind = str(e.get("ResourceType") or "Cluster")
        details = e.get("EventDetails") or {}
        w.put(store.Entry(
            cluster_tag=tag, dedupe_key=f"hp:{e.get('EventId')}", source="hyperpod", object_kind=kind,
            object_name=str(e.get("InstanceId") or e.get("InstanceGroupName") or name), namespace="",
            type="Normal", reason=kind, message=str(e.get("Description") or details)[:1000], count=1,
            first_at=when, last_at=when,
        ))


class TimelineRequest(WireModel):
    """Which entries of the timeline."""

    cluster_tag: str | None = Field(default=None, description="Default: the active cluster.")
    object_kind: str | None = Field(default=None, description="Pod, Node, Job, Operation, Stage, Cluster, Instance…")
    object_name: str | None = Field(default=None, description="Only entries about this object.")
    type: str | None = Field(default=None, description="Normal or Warning.")
    source: str | None = Field(default=None, description="kubernetes, hyperpod or operation.")
    limit: int = Field(default=20, ge=1, le=200)
    before: int | None = Field(default=None, description="nextBefore of the previous page.")


class TimelineEntry(WireModel):
    """One happening."""

    id: int
    source: str
    object_kind: str
    object_name: str
    namespace: str
    type: str
    reason: str
    message: str
    count: int
    first_at: datetime
    last_at: datetime


class TimelineResult(WireModel):
    """One page of the timeline, newest first."""

    cluster_tag: str
    entries: list[TimelineEntry]
    next_before: int | None = Field(description="Pass as `before` for older entries; null when none are left.")


@operation("cluster_timeline", method="GET", path="/clusters/timeline", example={"limit": 5})
async def cluster_timeline(ctx: CallContext, req: TimelineRequest) -> TimelineResult:
    """The timeline of a cluster (default: the active one), newest first: Kubernetes events (kept after the
    API server expires them, an hour by default), HyperPod cluster and node events, and the control plane's
    operations and stage transitions. Filter by objectKind/objectName (a node, pod, job or endpoint), type
    (Warning) or source; page with `before`. Entries are kept for the timeline retention setting."""
    app = ctx.app
    tag = await to_thread.run_sync(resolve_tag, app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, app.db, tag)
    if row.eks_cluster_name:
        informer(app, tag, row.region, row.eks_cluster_name, "events")  # keep the events watch running
    if row.hyperpod_cluster_name:
        await record_hyperpod_events(app, tag, row.region, row.hyperpod_cluster_name)
    await to_thread.run_sync(writer(app).flush)
    rows = await to_thread.run_sync(lambda: store.query(
        app.db, tag, object_kind=req.object_kind, object_name=req.object_name, type_=req.type, source=req.source,
        before_id=req.before, limit=req.limit + 1,
    ))
    page = rows[: req.limit]
    entries = [
        TimelineEntry(
            id=r.id, source=r.source, object_kind=r.object_kind, object_name=r.object_name, namespace=r.namespace,
            type=r.type, reason=r.reason, message=r.message[:MESSAGE_CHARS], count=r.count, first_at=r.first_at,
            last_at=r.last_at,
        )
        for r in page
    ]
    return TimelineResult(cluster_tag=tag, entries=entries, next_before=page[-1].id if len(rows) > req.limit else None)
