"""Watch-fed state of a managed cluster: its informers (cache-only ones started on read and stopped when idle; the
events feed, whose listener writes the timeline, started by monitoring.feeds) and what is derived.

Reads never wait for a refresh: after the first sync, a read serves the last state the watches hold,
with how fresh it is; totals are derived incrementally (accelerator requests per node) or memoised by
the versions they were computed from (the node digest), so a read costs O(what changed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from anyio import to_thread

from instantstart.context import AppContext, ListenerFactory
from instantstart.describe_cache import DbReadCache
from instantstart.kube.calls import kube_api
from instantstart.kube.informers import ChangeListener, Informer, InformerOptions, Projection
from instantstart.services.base.watch.projections import (
    claim_view,
    deployment_view,
    event_view,
    node_view,
    pod_view,
    service_view,
)

Obj = dict[str, Any]
FIRST_SYNC_SECONDS = 10.0

WATCHED_KINDS: dict[str, tuple[str, Projection]] = {
    "nodes": ("/api/v1/nodes", node_view),
    "pods": ("/api/v1/pods", pod_view),
    "pvcs": ("/api/v1/persistentvolumeclaims", claim_view),
    "services": ("/api/v1/services", service_view),
    "deployments": ("/apis/apps/v1/deployments", deployment_view),
    "events": ("/api/v1/events", event_view),
}
STATUS_KINDS = ("nodes", "pods", "pvcs")

LIVE_KINDS: set[str] = {"nodes", "pods", "services", "deployments"}


def register_kinds(kinds: Mapping[str, tuple[str, Projection]], *, live: bool = False) -> None:
    """Watch `kinds` too ({kind: (collection path, projection)}), e.g. a domain's custom resources; `live`: their
    changes reach the application's change_hooks (the WebSocket). Called at start-up (services.load_all), never
    on import."""
    WATCHED_KINDS.update(kinds)
    if live:
        LIVE_KINDS.update(kinds)


def register_listener(app: AppContext, kind: str, make: ListenerFactory) -> None:
    """Give every informer of `kind` the application starts from now on the listener `make(app, cluster tag)`
    (once, however often registered). Kept on the application context (AppContext.listener_factories), so two
    applications in one process never share one."""
    found = app.listener_factories.setdefault(kind, [])
    if make not in found:
        found.append(make)


class Allocations:
    """Accelerators requested by live pods per node, kept up to date from pod changes (O(change))."""

    def __init__(self) -> None:
        self.by_node: dict[str, dict[str, int]] = {}
        self.version = 0
        self._lock = threading.Lock()

    @staticmethod
    def _counts(pod: Obj | None) -> tuple[str | None, int, int]:
        if pod is None or not pod.get("node") or pod.get("phase") in ("Succeeded", "Failed"):
            return None, 0, 0
        return pod["node"], int(pod.get("gpu") or 0), int(pod.get("neuron") or 0)

    def on_change(self, _type: str, _key: str, old: Obj | None, new: Obj | None) -> None:
        """Informer listener: move the pod's contribution from its old state to its new one."""
        before, after = self._counts(old), self._counts(new)
        if before == after:
            return
        with self._lock:
            for (node, gpu, neuron), sign in ((before, -1), (after, 1)):
                if node is None or (gpu == 0 and neuron == 0):
                    continue
                slot = self.by_node.setdefault(node, {"gpu": 0, "neuron": 0})
                slot["gpu"] += sign * gpu
                slot["neuron"] += sign * neuron
                if slot == {"gpu": 0, "neuron": 0}:
                    del self.by_node[node]
            self.version += 1

    def snapshot(self) -> tuple[int, dict[str, dict[str, int]]]:
        """(version, {node: {gpu, neuron}}) taken atomically."""
        with self._lock:
            return self.version, {k: dict(v) for k, v in self.by_node.items()}


class PodLabels:
    """Pod keys per (namespace, label, value) for the labels that tie a pod to its job (projections.JOB_POD_LABELS),
    kept up to date from pod changes (O(change)): a job's pods are found without scanning every pod."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str, str], set[str]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _entries(pod: Obj | None) -> set[tuple[str, str, str]]:
        if pod is None:
            return set()
        return {(pod["namespace"], label, value) for label, value in (pod.get("labels") or {}).items()}

    def on_change(self, _type: str, key: str, old: Obj | None, new: Obj | None) -> None:
        """Informer listener: move the pod's key from its old labels to its new ones."""
        before, after = self._entries(old), self._entries(new)
        if before == after:
            return
        with self._lock:
            for entry in before - after:
                held = self.keys.get(entry)
                if held is not None:
                    held.discard(key)
                    if not held:
                        del self.keys[entry]
            for entry in after - before:
                self.keys.setdefault(entry, set()).add(key)

    def pods(self, namespace: str, label: str, value: str) -> list[str]:
        """Keys of the pods in `namespace` labelled `label`=`value`, sorted."""
        with self._lock:
            return sorted(self.keys.get((namespace, label, value), ()))


@dataclass
class PodState:
    """What the pods informer derives: accelerator requests per node and pods by job label."""

    allocations: Allocations = field(default_factory=Allocations)
    labels: PodLabels = field(default_factory=PodLabels)


def informer_key(region: str, eks_cluster: str, kind: str) -> str:
    """The key of a cluster's informer of `kind` in the application's informers."""
    return f"{region}:{eks_cluster}:{kind}"


def informer(app: AppContext, tag: str, region: str, eks_cluster: str, kind: str, *, pinned: bool = False,
             touch: bool = True) -> Informer:
    """The running informer of `kind` for the cluster, started when absent (marks it read unless `touch` is False);
    `pinned`: never stopped for being unread (a feed the cluster registry starts, see monitoring.feeds)."""

    if kind not in WATCHED_KINDS:
        raise KeyError(f"no watch is registered for {kind!r} (registered: {', '.join(sorted(WATCHED_KINDS))}); "
                       "services.load_all registers the custom resource kinds at start-up")

    def factory() -> Informer:
        path, project = WATCHED_KINDS[kind]
        listeners: list[ChangeListener] = [make(app, tag) for make in app.listener_factories.get(kind, [])]
        derived = None
        if kind == "pods":
            derived = PodState()
            listeners[:0] = [derived.allocations.on_change, derived.labels.on_change]
        if kind in LIVE_KINDS:

            def changed(*_: Any) -> None:
                # The WebSocket hub's hook pushes a snapshot at once instead of at its next interval.
                for hook in list(app.change_hooks):
                    hook(app, tag, kind)

            listeners.append(changed)
        created = Informer(
            kind, path, lambda: kube_api(app.kube, eks_cluster, region), project, tuple(listeners), InformerOptions()
        )
        created.derived = derived
        return created

    return app.informers.get(informer_key(region, eks_cluster, kind), factory, pinned=pinned, touch=touch)


@dataclass
class Freshness:
    """How current watch-fed data is: synced or not, stale (a watch is down) and the data's age."""

    synced: bool
    stale: bool
    age_seconds: float | None
    watches: list[Obj] = field(default_factory=list)

    def as_dict(self) -> Obj:
        """Wire form."""
        return {
            "synced": self.synced,
            "stale": self.stale,
            "dataAgeSeconds": self.age_seconds,
            "watches": self.watches,
        }

    def stale_note(self, eks_cluster: str) -> str | None:
        """The sentence every watch-fed read gives while a watch is down (None while the data is current)."""
        if not self.stale:
            return None
        return (f"Kubernetes data is stale: a watch of {eks_cluster} is disconnected; showing the state of "
                f"{self.age_seconds or 0:.0f}s ago.")


def freshness(informers: list[Informer]) -> Freshness:
    """Freshness of the data the given informers hold. A custom resource whose CRD is not installed ("absent":
    no such objects) is current, not stale; one that found it absent and then lost the API server holds that
    last state (nothing), stale like any other watch that is down, not "never synced"."""
    now = time.time()
    watches = [i.health.as_dict(now) for i in informers]
    ages = [w["dataAgeSeconds"] for w in watches if w["dataAgeSeconds"] is not None]
    stale = any(not w["connected"] and w["state"] != "absent" for w in watches)
    return Freshness(
        synced=all(i.settled.is_set() for i in informers),  # listed once, or found its collection absent
        stale=stale,
        age_seconds=max(ages) if ages and stale else (0.0 if ages else None),
        watches=watches,
    )


async def watched(app: AppContext, tag: str, region: str, eks_cluster: str, kinds: tuple[str, ...]) -> list[Informer]:
    """The cluster's informers of `kinds`, started if needed; the first read of a cluster waits (bounded)
    for the initial list (or for a custom resource's CRD to be found absent), every later read returns at once
    with whatever the watches hold."""
    found = [informer(app, tag, region, eks_cluster, kind) for kind in kinds]
    pending = [i for i in found if not i.settled.is_set()]
    if pending:
        deadline = time.monotonic() + FIRST_SYNC_SECONDS

        def wait_all() -> None:
            for i in pending:
                i.settled.wait(max(deadline - time.monotonic(), 0.0))

        await to_thread.run_sync(wait_all)
    return found


def memoised(inf: Informer, name: str, versions: tuple[int, ...], compute: Callable[[], Any]) -> Any:
    """`compute()` once per combination of `versions`, kept on the informer."""
    hit = inf.memo.get(name)
    if hit is not None and hit[0] == versions:
        return hit[1]
    value = compute()
    inf.memo[name] = (versions, value)
    return value


def db_cache(app: AppContext) -> DbReadCache:
    """The application's cache of status-path database reads (cluster row, active tag, latest operation):
    one read per key per second however many pollers, forgotten at once when an operation changes."""
    return app.db_reads


async def cached_db(app: AppContext, key: str, read: Callable[[], Any]) -> Any:
    """`read()` (blocking, a database read) through the status-path cache."""

    async def fetch() -> Any:
        return await to_thread.run_sync(read)

    return await db_cache(app).get(key, fetch)
