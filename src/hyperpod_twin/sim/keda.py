"""KEDA: ScaledObjects scale their target's replicas between min and max from their trigger's metric."""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj, promql
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.kinds import DEPLOYMENTS, PODS, STATEFULSETS, TypeKey, nsname
from hyperpod_twin.sim.kobj import Obj

if TYPE_CHECKING:
    from hyperpod_twin.sim.core import ClusterSim

SCALEDOBJECTS: TypeKey = ("keda.sh", "scaledobjects")
HPAS: TypeKey = ("autoscaling", "horizontalpodautoscalers")
_TARGETS: dict[str, TypeKey] = {"Deployment": DEPLOYMENTS, "StatefulSet": STATEFULSETS}
_THRESHOLD_KEYS = ("threshold", "targetValue", "value", "queueLength", "desiredReplicas")
DEFAULT_SCALE_DOWN_WINDOW = 300.0  # the HPA's default scale-down stabilization (seconds)


def _threshold(trigger: Obj) -> float:
    meta = trigger.get("metadata") or {}
    for key in _THRESHOLD_KEYS:
        try:
            value = float(meta[key])
        except (KeyError, TypeError, ValueError):
            continue
        if value > 0:
            return value
    return 1.0


def _activation(trigger: Obj) -> float:
    meta = trigger.get("metadata") or {}
    try:
        return float(meta.get("activationThreshold", meta.get("activationTargetValue", 0)))
    except (TypeError, ValueError):
        return 0.0


def desired_replicas(so: Obj, metric: float) -> int:
    """What KEDA + its HPA would settle on for `metric` (per the first trigger's threshold)."""
    spec = so.get("spec") or {}
    minimum = int(spec.get("minReplicaCount", 0))
    maximum = int(spec.get("maxReplicaCount", 100))
    triggers = spec.get("triggers") or [{}]
    if metric <= _activation(triggers[0]):
        idle = spec.get("idleReplicaCount")
        return int(idle) if idle is not None else minimum
    wanted = math.ceil(metric / _threshold(triggers[0]))
    return max(min(wanted, maximum), minimum, 1)


def _scale_down_window(so: Obj) -> float:
    behavior = (((so.get("spec") or {}).get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get(
        "behavior"
    ) or {}
    window = (behavior.get("scaleDown") or {}).get("stabilizationWindowSeconds")
    return float(window) if window is not None else DEFAULT_SCALE_DOWN_WINDOW


class KedaOperator(Controller):
    """Polls each ScaledObject's first trigger every pollingInterval: a `prometheus` trigger's query is
    evaluated over the /metrics the simulated pods of its namespace expose (routers, model servers; see
    promql.py), or the `twin.instantstart.io/metric-value` annotation gives the value outright (it wins;
    applied at once). The target Deployment/StatefulSet's spec.replicas follows ceil(metric / threshold)
    within [min, max]; a polled scale-down waits out the HPA's stabilization window (the highest
    recommendation of the window, 300 s unless advanced.horizontalPodAutoscalerConfig sets it); status
    carries Ready/Active and the target's GVKR."""

    watches = (SCALEDOBJECTS,)

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        self._polls: set[Hashable] = set()
        self._recommendations: dict[Hashable, list[tuple[float, int]]] = {}

    def _poll_later(self, key: Hashable, so: Obj) -> None:
        if key in self._polls:
            return
        self._polls.add(key)

        def poll() -> None:
            self._polls.discard(key)
            self.sim.enqueue(self, key)

        self.sim.after(float((so.get("spec") or {}).get("pollingInterval", 30)), poll)

    def _metric(self, so: Obj, ns: str) -> tuple[float | None, str]:
        """(value, error): the annotation, else the prometheus trigger's query over the pods' metrics."""
        if kobj.METRIC_VALUE in (so["metadata"].get("annotations") or {}):
            return kobj.float_annotation(so, kobj.METRIC_VALUE, 0.0), ""
        trigger = ((so.get("spec") or {}).get("triggers") or [{}])[0]
        query = (trigger.get("metadata") or {}).get("query")
        if trigger.get("type") != "prometheus" or not query:
            return 0.0, ""
        series = promql.scrape(self.sim.list(PODS, ns), self.sim.runtime.pod_http.handlers_of)
        try:
            value = promql.evaluate(str(query), series)
        except promql.QueryError as exc:
            return None, str(exc)
        return (value if value is not None else 0.0), ""  # ignoreNullValues (default true): empty is 0

    def _stabilized(self, key: Hashable, so: Obj, want: int) -> int:
        now = self.sim.clock.now()
        window = _scale_down_window(so)
        recs = [(t, w) for t, w in self._recommendations.get(key, []) if t >= now - window] + [(now, want)]
        self._recommendations[key] = recs
        return max(w for _, w in recs)

    def resync_keys(self) -> Iterable[Hashable]:
        return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in self.sim.list(SCALEDOBJECTS)]

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        if event.type == "DELETED":
            return []
        return super().keys_for(event)

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        so = self.sim.get(SCALEDOBJECTS, ns, name)
        if so is None or so["metadata"].get("deletionTimestamp"):
            return
        ref = (so.get("spec") or {}).get("scaleTargetRef") or {}
        kind = ref.get("kind", "Deployment")
        now = self.sim.now()
        status = copy.deepcopy(so.get("status") or {})
        target_key = _TARGETS.get(kind)
        target = self.sim.get(target_key, ns, ref.get("name", "")) if target_key else None
        if target is None or target_key is None:
            kobj.set_condition(
                status,
                "Ready",
                "False",
                now,
                "ScaledObjectCheckFailed",
                f"ScaledObject doesn't have correct scaleTargetRef specification: {kind}/{ref.get('name')} not found",
            )
            self.sim.patch_status(SCALEDOBJECTS, so, status)
            return
        polled = kobj.METRIC_VALUE not in (so["metadata"].get("annotations") or {})
        if polled:
            self._poll_later(key, so)
        value, error = self._metric(so, ns)
        if value is None:
            self.sim.event(so, "KEDAScalerFailed", error, "Warning", source="keda-operator")
            return
        metric = value
        want = desired_replicas(so, metric)
        if polled:
            want = self._stabilized(key, so, want)
        status.setdefault("originalReplicaCount", target.get("spec", {}).get("replicas", 1))
        if target.get("spec", {}).get("replicas") != want:
            before = target.get("spec", {}).get("replicas")
            target["spec"]["replicas"] = want
            target["metadata"].pop("resourceVersion", None)
            self.sim.update(target_key, target)
            self.sim.event(
                so,
                "KEDAScaleTargetActivated" if want else "KEDAScaleTargetDeactivated",
                f"Scaled {kind.lower()} {ns}/{ref.get('name')} from {before} to {want}",
                source="keda-operator",
            )
        group = "apps"
        status.update(
            {
                "scaleTargetKind": f"apps/v1.{kind}",
                "scaleTargetGVKR": {"group": group, "kind": kind, "resource": target_key[1], "version": "v1"},
                "hpaName": f"keda-hpa-{name}",
                "externalMetricNames": [f"s0-{(so['spec'].get('triggers') or [{}])[0].get('type', 'metric')}"],
            }
        )
        active = want > int((so.get("spec") or {}).get("minReplicaCount", 0)) or metric > 0
        if active:
            status["lastActiveTime"] = now
        kobj.set_condition(
            status,
            "Ready",
            "True",
            now,
            "ScaledObjectReady",
            "ScaledObject is defined correctly and is ready for scaling",
        )
        kobj.set_condition(
            status,
            "Active",
            "True" if active else "False",
            now,
            "ScalerActive" if active else "ScalerNotActive",
            f"metric value {metric:g}",
        )
        kobj.set_condition(
            status, "Fallback", "False", now, "NoFallbackFound", "No fallbacks are active on this scaled object"
        )
        self.sim.patch_status(SCALEDOBJECTS, so, status, volatile=("lastActiveTime",))
        self._hpa(so, kind, ref.get("name", ""), want, metric)

    def _hpa(self, so: Obj, kind: str, target: str, replicas: int, metric: float) -> None:
        """The HorizontalPodAutoscaler KEDA manages for a ScaledObject (`keda-hpa-<name>`)."""
        ns, name = so["metadata"]["namespace"], so["metadata"]["name"]
        spec = so.get("spec") or {}
        trigger = (spec.get("triggers") or [{}])[0]
        metric_name = f"s0-{trigger.get('type', 'metric')}"
        body: Obj = {
            "metadata": {
                "name": f"keda-hpa-{name}",
                "namespace": ns,
                "labels": {"app.kubernetes.io/managed-by": "keda-operator", "scaledobject.keda.sh/name": name},
                "ownerReferences": [kobj.owner_ref(so)],
            },
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target},
                "minReplicas": max(int(spec.get("minReplicaCount", 0)), 1),
                "maxReplicas": int(spec.get("maxReplicaCount", 100)),
                "metrics": [
                    {
                        "type": "External",
                        "external": {
                            "metric": {
                                "name": metric_name,
                                "selector": {"matchLabels": {"scaledobject.keda.sh/name": name}},
                            },
                            "target": {"type": "AverageValue", "averageValue": str(_threshold(trigger))},
                        },
                    }
                ],
            },
        }
        status: Obj = {
            "currentReplicas": replicas,
            "desiredReplicas": replicas,
            "currentMetrics": [
                {
                    "type": "External",
                    "external": {"metric": {"name": metric_name}, "current": {"averageValue": f"{metric:g}"}},
                }
            ],
        }
        current = self.sim.get(HPAS, ns, f"keda-hpa-{name}")
        if current is None:
            created = self.sim.create(HPAS, body)
            if created is not None:
                self.sim.patch_status(HPAS, created, status)
            return
        if current.get("spec") != body["spec"]:
            current["spec"] = body["spec"]
            current["metadata"].pop("resourceVersion", None)
            current = self.sim.update(HPAS, current)
        self.sim.patch_status(HPAS, current, status)
