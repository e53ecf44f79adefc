"""The timeline of each cluster, written: Kubernetes events (from the events watch), HyperPod cluster and node
events, and the control plane's own operations and stage transitions, stored with retention
(`timeline_read` serves it as `cluster_timeline`, alias `cluster_events`)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from anyio import to_thread

from instantstart.aws import hyperpod as hp_api
from instantstart.context import AppContext, Slot
from instantstart.kube.informers import ChangeListener
from instantstart.readonly import refuse_write
from instantstart.services.base.target import cluster_of
from instantstart.services.base.watch.state import db_cache, register_listener
from instantstart.store import timeline as store
from instantstart.store.models import utcnow

log = logging.getLogger(__name__)
PRUNE_EVERY = 600.0


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
        """Queue an entry (refused inside a read-only operation: the feeds record, reads only read)."""
        refuse_write("record a timeline entry")
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


WRITER: Slot[TimelineWriter] = Slot("timeline writer")


def writer(app: AppContext) -> TimelineWriter:
    """The application's timeline writer (one per application context)."""
    return app.owned.get(WRITER, lambda: TimelineWriter(app))


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


def on_operation(app: AppContext, view: Any) -> None:
    """Record an operation's state and each stage's status as timeline entries (deduplicated by state)."""
    tag = cluster_of(view.target)
    if tag is None:
        return
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
    """Record every operation change of this application in the timeline (the runner's listener) and every
    cluster's Kubernetes events (the events watch's listener, kept on this application's context)."""
    register_listener(app, "events", kubernetes_events)

    async def listener(operation_id: str) -> None:
        db_cache(app).invalidate()  # status reads see the change at once
        try:
            view = await to_thread.run_sync(app.runner.store.get, operation_id)
        except Exception:
            log.exception("timeline: operation %s not readable", operation_id)
            return
        on_operation(app, view)

    app.runner.add_listener(listener)


HYPERPOD_WARNINGS = ("Error", "Warn", "Warning")


async def record_hyperpod_events(
    app: AppContext, tag: str, region: str, name: str, node: str | None = None, group: str | None = None
) -> None:
    """Pull the HyperPod cluster's latest events (of one node or instance group when given; one
    ListClusterEvents per cache interval) into the timeline; an unreadable source raises (translated)."""
    request: dict[str, Any] = {"ClusterName": name, "MaxResults": 100, "SortOrder": "Descending"}
    if node:
        request["NodeId"] = node
    if group:
        request["InstanceGroupName"] = group

    async def fetch() -> list[dict[str, Any]]:
        return await to_thread.run_sync(hp_api.query_events, app.aws, region, request)

    events: list[dict[str, Any]] = await app.cache.get(f"hpevents:{region}:{name}:{node}:{group}", fetch)
    w = writer(app)
    for e in events:
        when = _when(e.get("EventTime"))
        kind = str(e.get("ResourceType") or "Cluster")
        details = e.get("EventDetails") or {}
        w.put(store.Entry(
            cluster_tag=tag, dedupe_key=f"hp:{e.get('EventId')}", source="hyperpod", object_kind=kind,
            object_name=str(e.get("InstanceId") or e.get("InstanceGroupName") or name),
            namespace=str(e.get("InstanceGroupName") or ""),  # a HyperPod entry's "namespace": its instance group
            type="Warning" if e.get("EventLevel") in HYPERPOD_WARNINGS else "Normal", reason=kind,
            message=str(e.get("Description") or details)[:1000], count=1, first_at=when, last_at=when,
        ))
