"""The alert evaluator: every interval, load (database) → gather each cluster's snapshot (watches in memory, AWS
reads; no database session held) → evaluate the rules → apply (guarded: only open an alert that is not open, only
resolve one still open) → notify. The clock is injectable so tests advance time instead of waiting an hour."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from anyio import to_thread

from instantstart.context import AppContext, Slot
from instantstart.services.alerts import gather, notify
from instantstart.services.alerts.rules import DAY, RULES, Snapshot, Threshold, thresholds
from instantstart.services.base.registry import get_cluster, list_clusters
from instantstart.services.base.watch.state import WATCHED_KINDS, PodState, informer, informer_key
from instantstart.services.base.watch.timeline import writer
from instantstart.services.base.watch.watched import events_attachable
from instantstart.store import alerts as store
from instantstart.store import timeline as timeline_store
from instantstart.store.models import ClusterRow, utcnow
from instantstart.store.state import read_state

log = logging.getLogger(__name__)
RULES_KEY = "alerts:rules"
Key = tuple[str, str, str]  # rule, cluster, subject


@dataclass
class Evaluator:
    """Opens and resolves alerts. `clock` gives the current time; `holding` remembers since when each condition has
    held (a condition that stops holding for one evaluation starts over)."""

    app: AppContext
    clock: Callable[[], datetime] = utcnow
    backoff: float = 0.5
    holding: dict[Key, datetime] = field(default_factory=dict)
    restarts: dict[tuple[str, str], int] = field(default_factory=dict)  # (cluster, ns/name) → restarts last seen

    async def snapshot(self, row: ClusterRow, now: datetime) -> Snapshot:
        """What the rules read of one cluster (timeline rows, watched pods and watches, lifecycle scripts)."""
        app = self.app
        await to_thread.run_sync(writer(app).flush)
        entries = await to_thread.run_sync(lambda: timeline_store.query(
            app.db, row.tag, source="hyperpod", since=now - DAY, limit=1000))
        snap = Snapshot(row.tag, now, hyperpod=[
            {"namespace": e.namespace, "object_name": e.object_name, "message": e.message, "last_at": e.last_at}
            for e in sorted(entries, key=lambda e: (e.last_at, e.id))])  # one poll's batch is stored newest first
        allocated: list[str] = []
        pods_key = informer_key(row.region, row.eks_cluster_name, "pods")
        app.informers.reap()  # park what nobody read first, so the check below sees it (never restarts it)
        if not events_attachable(row):
            snap.unknown |= {"pod_crash_looping", "gpu_idle", "watch_stale"}
        elif pods_key in app.informers.parked:  # nobody read the cluster for a while: its pods are not watched
            snap.unknown |= {"pod_crash_looping", "gpu_idle"}
        else:  # not a read: the evaluator never keeps a cluster's pods watched by itself (see Informers.reap)
            pods = informer(app, row.tag, row.region, row.eks_cluster_name, "pods", touch=False)
            if not pods.settled.is_set():  # just started (a restarted server): no pod is known yet
                snap.unknown |= {"pod_crash_looping", "gpu_idle"}
            snap.pods = list(pods.snapshot()[1].values())
            if isinstance(pods.derived, PodState):
                allocated = sorted(n for n, c in pods.derived.allocations.snapshot()[1].items() if c["gpu"] > 0)
            seen = {}
            for pod in snap.pods:
                key, count = (row.tag, f"{pod['namespace']}/{pod['name']}"), int(pod.get("restarts") or 0)
                if count > self.restarts.get(key, count):
                    snap.restarted.add(key[1])
                seen[key] = count
            # Only the pods that exist now are remembered (deleted pods are forgotten).
            self.restarts = {k: v for k, v in self.restarts.items() if k[0] != row.tag} | seen
            for kind in WATCHED_KINDS:
                inf = app.informers.peek(informer_key(row.region, row.eks_cluster_name, kind))
                if inf is not None and inf.settled.is_set():
                    snap.watches.append(inf.health.as_dict())
        lifecycle = await gather.lifecycle(app, row)
        if lifecycle is None:
            snap.unknown.add("lifecycle_script_changed")
        snap.lifecycle = lifecycle or []
        snap.gpu_idle = await gather.gpu_utilisation(app, row, allocated)
        if snap.gpu_idle is None:
            snap.unknown.add("gpu_idle")
        workloads = await gather.kueue_workloads(app, row) if events_attachable(row) else None
        if workloads is None:
            snap.unknown.add("job_pending_quota")
        snap.workloads = workloads or []
        return snap

    def held(self, key: Key, limit: Threshold, now: datetime) -> bool:
        """Whether the condition `key` (holding now) has held for the rule's minutes."""
        since = self.holding.setdefault(key, now)
        return now - since >= timedelta(minutes=limit.minutes)

    async def run_once(self) -> tuple[list[store.AlertRow], list[store.AlertRow]]:
        """One evaluation of every rule on every registered cluster; returns (opened, resolved)."""
        app, now = self.app, self.clock()

        def load() -> tuple[list[ClusterRow], dict[str, Threshold], list[store.AlertRow]]:
            rows = [get_cluster(app.db, c.cluster_tag) for c in list_clusters(app.db).clusters]
            return rows, thresholds(read_state(app.db, RULES_KEY)), store.open_alerts(app.db)

        rows, limits, current = await to_thread.run_sync(load)
        holds: dict[Key, str] = {}
        checked: set[tuple[str, str]] = set()  # (rule, cluster) evaluated now: their open alerts may resolve
        for row in rows:
            try:
                snap = await self.snapshot(row, now)
            except Exception:
                log.exception("alerts: cluster %s not evaluated", row.tag)
                continue
            for name, rule in RULES.items():
                if name in snap.unknown:
                    continue
                checked.add((name, row.tag))
                if limits[name].enabled:
                    for subject, message in rule.condition(snap, limits[name]).items():
                        holds[(name, row.tag, subject)] = message
        for key in list(self.holding):
            if key not in holds:
                del self.holding[key]
        opening = [(*key, msg) for key, msg in holds.items() if self.held(key, limits[key[0]], now)]
        known = {r.tag for r in rows}
        # Unknown now (a source not read): an open alert stays open; the cluster left the registry: it resolves.
        closing = [a.id for a in current if (a.rule, a.cluster_tag, a.subject) not in holds
                   and ((a.rule, a.cluster_tag) in checked or a.cluster_tag not in known)]
        opened, resolved = await to_thread.run_sync(store.apply, app.db, opening, closing, now)
        await self.notify([(a, "open") for a in opened] + [(a, "resolve") for a in resolved])
        return opened, resolved

    async def notify(self, events: list[tuple[store.AlertRow, str]]) -> None:
        """Deliver each event to the channels, then record the deliveries on the alert."""
        if not events:
            return
        channels = await to_thread.run_sync(notify.load_channels, self.app)
        for alert, event in events:
            records = await to_thread.run_sync(functools.partial(
                notify.deliver, self.app, channels, alert, event, backoff=self.backoff))
            if records:
                await to_thread.run_sync(store.add_deliveries, self.app.db, alert.id, records)


LOOP: Slot[tuple[Evaluator, asyncio.Task[None]]] = Slot("alert loop")  # per application: its evaluator and task


async def _loop(evaluator: Evaluator, interval: float) -> None:
    while True:
        try:
            await evaluator.run_once()
        except Exception:  # one bad pass never ends the loop
            log.exception("alert evaluation failed")
        await asyncio.sleep(interval)


def start(app: AppContext, evaluator: Evaluator | None = None) -> Evaluator:
    """Start the application's evaluator loop (idempotent) every `alert_interval_seconds`; returns it."""
    found = app.owned.peek(LOOP)
    if found is not None and not found[1].done():
        return found[0]
    evaluator = evaluator or Evaluator(app)
    interval = app.settings.alert_interval_seconds
    # A fresh context: the loop outlives the call that started it and must not log under its request id.
    task = asyncio.get_running_loop().create_task(_loop(evaluator, interval), context=contextvars.Context())
    app.owned.put(LOOP, (evaluator, task))
    return evaluator


async def stop(app: AppContext) -> None:
    """Stop the application's evaluator loop."""
    found = app.owned.pop(LOOP)
    if found is not None:
        found[1].cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await found[1]
