"""Watch-fed custom resources: training jobs (HyperPodPyTorchJob, RayJob), Ray clusters and managed endpoints
(InferenceEndpointConfig, JumpStartModel), through the same informers as nodes and pods.

Each kind is watched cluster-wide once its CRD exists (an operator add-on that is off is no error: the informer
reports "absent" and checks again with backoff). Objects are kept as pruned copies in their own shape, holding
only the fields the list and status tools read, so the tools build their answers from a watched object or a
directly read one with the same code. `read` says whether the watches can answer now; when they cannot (not
synced yet, disconnected), the caller reads directly and says so, and serves the last watched state marked
stale only when the direct read fails too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from instantstart.context import AppContext
from instantstart.errors import ProviderError
from instantstart.kube.calls import kube_error
from instantstart.manifests import inference_endpoint as iec
from instantstart.manifests import ray_job as r
from instantstart.manifests import training as m
from instantstart.services.cluster.status_model import WatchFreshness
from instantstart.services.monitoring.state import informer, register_kinds
from instantstart.store.models import ClusterRow

Obj = dict[str, Any]
T = TypeVar("T")
_KEPT_LABELS = (m.LABEL_RECIPE, m.LABEL_MANAGED)
_CONDITION_KEYS = ("type", "status", "reason", "message", "lastTransitionTime")


def _meta(md: Obj) -> Obj:
    labels = {k: v for k, v in (md.get("labels") or {}).items() if k in _KEPT_LABELS}
    return {"name": md.get("name", ""), "namespace": md.get("namespace", ""),
            "creationTimestamp": md.get("creationTimestamp"), "labels": labels}


def _conditions(status: Obj) -> list[Obj]:
    return [{k: c[k] for k in _CONDITION_KEYS if k in c} for c in status.get("conditions") or []]


def _some(source: Obj, *keys: str) -> Obj:
    return {k: source[k] for k in keys if k in source}


def pytorchjob_view(obj: Obj) -> Obj:
    """A HyperPodPyTorchJob pruned to what training_job_list and job_get_status read."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    specs = spec.get("replicaSpecs") or []
    replicas: list[Obj] = [_some(s, "replicas") for s in specs]
    if specs:
        tmpl = (specs[0].get("template") or {}).get("spec") or {}
        container = (tmpl.get("containers") or [{}])[0]
        selector = _some(tmpl.get("nodeSelector") or {}, m.INSTANCE_TYPE_LABEL)
        replicas[0]["template"] = {"spec": {"nodeSelector": selector,
                                            "containers": [_some(container, "image", "command")]}}
    return {
        "kind": m.KIND,
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {"replicaSpecs": replicas, "runPolicy": spec.get("runPolicy") or {}},
        "status": {"conditions": _conditions(status), "restartCount": status.get("restartCount"),
                   "restartStatus": _some(status.get("restartStatus") or {}, "fullJobRestartCount")},
    }


def rayjob_view(obj: Obj) -> Obj:
    """A RayJob pruned to what training_job_list and job_get_status read."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    cluster = spec.get("rayClusterSpec") or {}
    head = ((cluster.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    groups = cluster.get("workerGroupSpecs") or []
    workers: list[Obj] = [_some(g, "groupName", "replicas") for g in groups]
    if groups:
        tmpl = (groups[0].get("template") or {}).get("spec") or {}
        workers[0]["template"] = {"spec": {"nodeSelector": _some(tmpl.get("nodeSelector") or {},
                                                                 m.INSTANCE_TYPE_LABEL)}}
    kept = _some(spec, "entrypoint", "backoffLimit", "shutdownAfterJobFinishes", "ttlSecondsAfterFinished",
                 "activeDeadlineSeconds")
    head_container = _some((head.get("containers") or [{}])[0], "image")
    return {
        "kind": r.KIND,
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {**kept, "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": [head_container]}}},
                                            "workerGroupSpecs": workers}},
        "status": _some(status, "jobDeploymentStatus", "jobStatus", "message", "reason", "failed", "rayClusterName"),
    }


def raycluster_view(obj: Obj) -> Obj:
    """A RayCluster: its worker groups and how many workers are ready."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {
        "kind": "RayCluster",
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {"workerGroupSpecs": [_some(g, "groupName", "replicas", "minReplicas", "maxReplicas")
                                      for g in spec.get("workerGroupSpecs") or []]},
        "status": _some(status, "state", "readyWorkerReplicas", "availableWorkerReplicas", "desiredWorkerReplicas"),
    }


def _endpoint_status(status: Obj) -> Obj:
    sagemaker = ((status.get("endpoints") or {}).get("sagemaker") or {})
    return {"conditions": _conditions(status), **_some(status, "state"),
            "endpoints": {"sagemaker": _some(sagemaker, "state", "name")}}


def endpoint_config_view(obj: Obj) -> Obj:
    """An InferenceEndpointConfig pruned to what inference_managed_list reads."""
    spec = obj.get("spec") or {}
    routing = _some(spec.get("intelligentRoutingSpec") or {}, "routingStrategy")
    return {
        "kind": iec.KIND,
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {**_some(spec, "modelName", "instanceType", "replicas", "kvCacheSpec", "endpointName"),
                 "intelligentRoutingSpec": routing},
        "status": _endpoint_status(obj.get("status") or {}),
    }


def jumpstart_view(obj: Obj) -> Obj:
    """A JumpStartModel pruned to what inference_managed_list reads."""
    spec = obj.get("spec") or {}
    return {
        "kind": iec.JUMPSTART_KIND,
        "metadata": _meta(obj.get("metadata") or {}),
        "spec": {"model": _some(spec.get("model") or {}, "modelId"),
                 "server": _some(spec.get("server") or {}, "instanceType"),
                 **_some(spec, "replicas", "sageMakerEndpoint")},
        "status": _endpoint_status(obj.get("status") or {}),
    }


CUSTOM_KINDS = {
    "hyperpodpytorchjobs": (f"/apis/{m.GROUP}/{m.VERSION}/{m.PLURAL}", pytorchjob_view),
    "rayjobs": (f"/apis/{r.GROUP}/{r.VERSION}/{r.PLURAL}", rayjob_view),
    "rayclusters": (f"/apis/{r.GROUP}/{r.VERSION}/rayclusters", raycluster_view),
    "inferenceendpointconfigs": (f"/apis/{iec.GROUP}/{iec.VERSION}/{iec.PLURAL}", endpoint_config_view),
    "jumpstartmodels": (f"/apis/{iec.GROUP}/{iec.VERSION}/{iec.JUMPSTART_PLURAL}", jumpstart_view),
}
TRAINING_KINDS = ("hyperpodpytorchjobs", "rayjobs")
ENDPOINT_KINDS = ("inferenceendpointconfigs", "jumpstartmodels")


def register() -> None:
    """Register the custom resource kinds with the watch-fed state (live: the WebSocket pushes their changes).
    Called by services.load_all at start-up, so the import order of modules cannot change what is watched."""
    register_kinds(CUSTOM_KINDS, live=True)


@dataclass
class WatchRead:
    """What the watches of some kinds hold: `items` per kind when every watch is current, else None."""

    items: dict[str, list[Obj]] | None
    watches: list[Obj] = field(default_factory=list)
    age_seconds: float | None = None
    last: dict[str, list[Obj]] = field(default_factory=dict)  # the last state held, current or not

    @property
    def current(self) -> bool:
        """Whether the watches can answer now."""
        return self.items is not None

    def why_not(self) -> str:
        """Which watch cannot answer and why, in words."""
        parts = [f"{w['kind']} is {w['state']}" + (f" ({w['lastError']})" if w["lastError"] else "")
                 for w in self.watches if not w["current"]]
        return "; ".join(parts) or "every watch is current"

    def freshness(self, served_from_watch: bool) -> WatchFreshness:
        """The wire form: stale only when the last watched state is served while a watch is down."""
        return WatchFreshness(synced=self.current, stale=served_from_watch and not self.current,
                              data_age_seconds=(self.age_seconds or 0.0) if served_from_watch else None,
                              watches=self.watches)


def read(app: AppContext, row: ClusterRow, kinds: tuple[str, ...], namespace: str | None = None) -> WatchRead:
    """The cluster's watched objects of `kinds` (informers started on first read, never waited for), filtered
    to `namespace` when given."""
    infs = [informer(app, row.tag, row.region, row.eks_cluster_name, kind) for kind in kinds]
    now = time.time()
    watches: list[Obj] = []
    last: dict[str, list[Obj]] = {}
    ages: list[float] = []
    all_current = True
    for kind, inf in zip(kinds, infs, strict=True):
        current = inf.current()
        all_current = all_current and current
        health = inf.health.as_dict(now)
        watches.append({**health, "current": current})
        if health["dataAgeSeconds"] is not None:
            ages.append(health["dataAgeSeconds"])
        _, items = inf.snapshot()
        last[kind] = [o for o in items.values() if namespace in (None, o["metadata"]["namespace"])]
    return WatchRead(items=dict(last) if all_current else None, watches=watches,
                     age_seconds=round(max(ages), 1) if ages else None, last=last)


def wake(app: AppContext, row: ClusterRow, kinds: tuple[str, ...]) -> None:
    """Make the informers of `kinds` that found their CRD absent check again now (a direct read found it)."""
    for kind in kinds:
        inf = informer(app, row.tag, row.region, row.eks_cluster_name, kind)
        if inf.health.state == "absent":
            inf.wake()


@dataclass
class Served(Generic[T]):
    """An answer built from the watches or from a direct read, and how current it is."""

    value: T
    source: str  # "watch" or "direct"
    watch: WatchFreshness
    note: str | None


def serve(app: AppContext, row: ClusterRow, kinds: tuple[str, ...], namespace: str | None,
             build: Callable[[dict[str, list[Obj]]], T], direct: Callable[[], T],
             found: Callable[[T], bool]) -> Served[T]:
    """`build(items per kind)` from the watches when they are current; otherwise `direct()` (blocking), said so
    in `note`; when that read fails too and the watches hold an earlier state, that state marked stale.
    `found(value)` tells whether a direct read found objects (the informers that saw no CRD check again)."""
    seen = read(app, row, kinds, namespace)
    if seen.items is not None:
        return Served(build(seen.items), "watch", seen.freshness(True), None)
    why = seen.why_not()
    try:
        value = direct()
    except Exception as raised:
        exc = kube_error(raised, "read directly")
        held = any(w["state"] in ("synced", "reconnecting") and w["dataAgeSeconds"] is not None for w in seen.watches)
        if not isinstance(exc, ProviderError) or not held:
            raise exc from raised
        note = (f"Kubernetes data is stale: {why}, and the direct read failed ({exc.message}); showing the "
                f"watched state of {seen.age_seconds or 0:.0f}s ago.")
        return Served(build(seen.last), "watch", seen.freshness(True), note)
    if found(value):
        wake(app, row, kinds)
    return Served(value, "direct", seen.freshness(False), f"read directly from the API server: {why}.")
