"""Recording accelerator usage: every pod holding GPUs or Neuron devices on a node, from when it started to when it
ended, with who submitted it, kept in the timeline (store.usage) for usage_report.

The pods watch of each registered cluster (pinned by monitoring.feeds) records each change at once, from the pod's
own times (status.startTime; its containers' finishedAt, else its deletion deadline); a sampler refreshes the holds
still running every `usage_sample_seconds` and closes, at their last sample, those whose pod went while the control
plane could not see it (a restart, a lost watch): that interval bounds the report's error.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from datetime import datetime
from typing import Any

import anyio
from anyio import to_thread

from instantstart.context import AppContext, Slot
from instantstart.kube.informers import ChangeListener
from instantstart.services.base.watch.state import informer_key
from instantstart.services.base.watch.timeline import writer
from instantstart.store import usage as store
from instantstart.store.models import utcnow
from instantstart.store.teams import NAMESPACE_PREFIX
from instantstart.store.timeline import Entry

log = logging.getLogger(__name__)
Obj = dict[str, Any]
TEAM_NAMESPACE_PREFIX = NAMESPACE_PREFIX  # HyperPod task governance names a team's namespace so


def team_of(namespace: str) -> str:
    """The team a namespace belongs to: `hyperpod-ns-<team>` is team <team> (HyperPod task governance's naming);
    any other namespace belongs to no team (""). The one place usage maps namespaces to teams."""
    return namespace.removeprefix(TEAM_NAMESPACE_PREFIX) if namespace.startswith(TEAM_NAMESPACE_PREFIX) else ""


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def holding(view: Obj | None) -> bool:
    """Whether a pod (its projection) is on a node, started, and asks for accelerators."""
    return bool(view and view.get("node") and view.get("uid") and _time(view.get("started"))
                and (int(view.get("gpu") or 0) or int(view.get("neuron") or 0)))


def hold_entry(tag: str, view: Obj, user: str, now: datetime, *, gone: bool = False) -> Entry:
    """The usage entry of a holding pod: open while it runs; closed at its containers' end when it finished, or
    at its deletion deadline (else now) when it is `gone`."""
    start = _time(view["started"]) or now
    ended = view.get("phase") in ("Succeeded", "Failed")
    end = now
    if ended or gone:
        end = _time(view.get("finished")) or _time(view.get("deleting")) or now
    hold = store.PodHold(int(view.get("gpu") or 0), int(view.get("neuron") or 0), str(view["node"]), user)
    return store.pod_entry(tag, str(view["uid"]), view["namespace"], view["name"], hold, start, end,
                           open_=not (ended or gone))


class Submitters:
    """Who submitted each pod's workload, looked up once per pod (store.usage.submitter)."""

    def __init__(self, app: AppContext, tag: str) -> None:
        self.app, self.tag = app, tag
        self.known: dict[str, str] = {}

    def of(self, view: Obj) -> str:
        """The pod's submitter ("" when not submitted through InstantStart)."""
        uid = str(view["uid"])
        if uid not in self.known:
            self.known[uid] = store.submitter(self.app.db, self.tag, view["namespace"], view["name"])
        return self.known[uid]

    def forget(self, uid: str) -> None:
        """The pod is gone: no more lookups for it."""
        self.known.pop(uid, None)


SUBMITTERS: Slot[dict[str, Submitters]] = Slot("pod submitters")  # per application: {cluster tag: its lookups}


def submitters_of(app: AppContext, tag: str) -> Submitters:
    """The cluster's submitter look-ups, shared by its pods listener and its sampler."""
    return app.owned.get(SUBMITTERS, dict).setdefault(tag, Submitters(app, tag))


def pod_holds(app: AppContext, tag: str) -> ChangeListener:
    """Pods-watch listener: record a holding pod's hold at each change, closed when it ends or goes."""
    submitters = submitters_of(app, tag)

    def on_change(_kind: str, _key: str, old: Obj | None, new: Obj | None) -> None:
        view = new if new is not None else old
        if view is None or not holding(view):
            return
        entry = hold_entry(tag, view, submitters.of(view), utcnow(), gone=new is None)
        writer(app).put(entry)
        if new is None:
            submitters.forget(str(view["uid"]))

    return on_change


def sample(app: AppContext, tag: str, region: str, eks_cluster: str) -> bool:
    """One sample (blocking): refresh the running holds, close the recorded ones whose pod is gone. False (nothing
    done) while the cluster's pods watch is not current."""
    inf = app.informers.peek(informer_key(region, eks_cluster, "pods"))
    if inf is None or not inf.synced.is_set() or not inf.health.connected:
        return False
    _, items = inf.snapshot()
    now, w, submitters = utcnow(), writer(app), submitters_of(app, tag)
    live = set()
    for view in items.values():
        if holding(view):
            live.add(str(view["uid"]))
            w.put(hold_entry(tag, view, submitters.of(view), now))
    w.flush()
    for uid, _key, row in store.open_holds(app.db, tag):
        if uid not in live:  # gone unseen: held until its last sample
            w.put(store.pod_entry(tag, uid, row.namespace, row.name, row.hold, row.start, row.end, open_=False))
    return True


async def _sample_forever(app: AppContext, tag: str, region: str, eks_cluster: str) -> None:
    while True:
        try:
            await to_thread.run_sync(sample, app, tag, region, eks_cluster)
        except Exception:  # one bad pass never ends the sampler
            log.exception("usage sample of %s failed", tag)
        await anyio.sleep(app.settings.usage_sample_seconds)


def start_sampler(app: AppContext, tag: str, region: str, eks_cluster: str) -> asyncio.Task[None]:
    """The cluster's usage sampler (on the event loop; cancel the task to stop it)."""
    loop = asyncio.get_running_loop()
    # A fresh context: the sampler outlives the call that started it and must not log under its request id.
    return loop.create_task(_sample_forever(app, tag, region, eks_cluster), context=contextvars.Context())
