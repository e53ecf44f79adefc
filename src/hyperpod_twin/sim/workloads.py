"""Deployment and ReplicaSet controllers: rollouts by pod-template hash, replica counts, status."""

from __future__ import annotations

import copy
from collections.abc import Hashable

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import OwnerController
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import DEPLOYMENTS, PODS, REPLICASETS, nsname
from hyperpod_twin.sim.kobj import Obj

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def replicas_of(obj: Obj) -> int:
    """spec.replicas with Kubernetes' default of 1."""
    value = obj.get("spec", {}).get("replicas")
    return 1 if value is None else int(value)


class ReplicaSetController(OwnerController):
    """Keeps spec.replicas live pods per ReplicaSet; replaces failed ones; reports counts."""

    primary = REPLICASETS
    owns = {PODS: "ReplicaSet"}

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        rs = self.sim.get(REPLICASETS, ns, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        pods = self.sim.owned(PODS, rs)
        for pod in pods:
            if pod.get("status", {}).get("phase") == "Failed":  # replaced below, as the RS controller does
                self.sim.delete_pod(ns, pod["metadata"]["name"])
        active = [p for p in pods if kobj.pod_is_active(p)]
        want = replicas_of(rs)
        template = rs.get("spec", {}).get("template") or {}
        for _ in range(want - len(active)):
            created = self.sim.create(PODS, kobj.pod_from_template(template, rs))
            if created is not None:
                self.sim.event(
                    rs,
                    "SuccessfulCreate",
                    f"Created pod: {created['metadata']['name']}",
                    source="replicaset-controller",
                )
                active.append(created)
        if len(active) > want:
            # Delete the least useful first: unscheduled, then not ready, then the lower
            # controller.kubernetes.io/pod-deletion-cost, then newest (the ReplicaSet controller's ranking).
            active.sort(
                key=lambda p: (
                    bool(p["spec"].get("nodeName")),
                    kobj.pod_is_ready(p),
                    _deletion_cost(p),
                    _neg(p["metadata"].get("creationTimestamp", "")),
                )
            )
            for pod in active[: len(active) - want]:
                self.sim.delete_pod(ns, pod["metadata"]["name"])
                self.sim.event(
                    rs, "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}", source="replicaset-controller"
                )
            active = active[len(active) - want :]
        ready = sum(1 for p in active if kobj.pod_is_ready(p))
        status = {
            "replicas": len(active),
            "fullyLabeledReplicas": len(active),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        self.sim.patch_status(REPLICASETS, rs, status)


def _deletion_cost(pod: Obj) -> int:
    value = str((pod["metadata"].get("annotations") or {}).get(DELETION_COST, "0"))
    return int(value) if value.lstrip("-").isdigit() else 0


def _neg(stamp: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in stamp)


class DeploymentController(OwnerController):
    """Creates a ReplicaSet per pod template, rolls replicas over to it (RollingUpdate or Recreate),
    and reports replicas/updated/ready/available with the Available and Progressing conditions."""

    primary = DEPLOYMENTS
    owns = {REPLICASETS: "Deployment"}

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        self._progress: dict[tuple[str, str], tuple[str, int, float]] = {}  # rs, available, since

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        dep = self.sim.get(DEPLOYMENTS, ns, name)
        if dep is None or dep["metadata"].get("deletionTimestamp"):
            return
        spec = dep.get("spec", {})
        want = replicas_of(dep)
        template = copy.deepcopy(spec.get("template") or {})
        tmpl_hash = kobj.template_hash(template)
        owned = self.sim.owned(REPLICASETS, dep)
        current = next((rs for rs in owned if rs["metadata"].get("labels", {}).get(HASH_LABEL) == tmpl_hash), None)
        old = [rs for rs in owned if rs is not current]
        revision = max([int(kobj.annotation(rs, REVISION, "0") or 0) for rs in owned] + [0])
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        if not spec.get("paused"):
            if current is None:
                revision += 1
                current = self._new_rs(dep, template, tmpl_hash, revision, 0)
            if current is not None:
                old_live = sum(len(self.sim.owned(PODS, rs)) for rs in old)
                target = 0 if recreate and old_live else want
                if replicas_of(current) != target:
                    current["spec"]["replicas"] = target
                    annotations = current["metadata"].setdefault("annotations", {})
                    annotations[DESIRED] = str(want)
                    current["metadata"].pop("resourceVersion", None)
                    current = self.sim.update(REPLICASETS, current)
                new_available = int((current.get("status") or {}).get("availableReplicas", 0))
                for rs in old:
                    # RollingUpdate: old ReplicaSets go to zero once the new one is fully available.
                    if replicas_of(rs) != 0 and (recreate or new_available >= want):
                        rs["spec"]["replicas"] = 0
                        rs["metadata"].pop("resourceVersion", None)
                        self.sim.update(REPLICASETS, rs)
                        self.sim.event(
                            dep,
                            "ScalingReplicaSet",
                            f"Scaled down replica set {rs['metadata']['name']} from {replicas_of(rs)} to 0",
                            source="deployment-controller",
                        )
                self._prune_history(dep, old)
        self._status(dep, current, old, want)

    def _new_rs(self, dep: Obj, template: Obj, tmpl_hash: str, revision: int, replicas: int) -> Obj | None:
        labels = {**((template.get("metadata") or {}).get("labels") or {}), HASH_LABEL: tmpl_hash}
        template.setdefault("metadata", {})["labels"] = labels
        selector = copy.deepcopy(dep["spec"].get("selector") or {"matchLabels": dict(labels)})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = tmpl_hash
        rs_name = f"{dep['metadata']['name']}-{tmpl_hash}"
        created = self.sim.create(
            REPLICASETS,
            {
                "metadata": {
                    "name": rs_name,
                    "namespace": dep["metadata"]["namespace"],
                    "labels": labels,
                    "annotations": {REVISION: str(revision), DESIRED: str(replicas_of(dep))},
                    "ownerReferences": [kobj.owner_ref(dep)],
                },
                "spec": {
                    "replicas": replicas,
                    "selector": selector,
                    "template": template,
                    "minReadySeconds": dep["spec"].get("minReadySeconds", 0),
                },
            },
        )
        if created is not None:
            self.sim.event(
                dep,
                "ScalingReplicaSet",
                f"Scaled up replica set {rs_name} from 0 to {replicas_of(dep)}",
                source="deployment-controller",
            )
            dep_now = self.sim.get(DEPLOYMENTS, dep["metadata"]["namespace"], dep["metadata"]["name"])
            if dep_now is not None and kobj.annotation(dep_now, REVISION) != str(revision):
                dep_now["metadata"].setdefault("annotations", {})[REVISION] = str(revision)
                dep_now["metadata"].pop("resourceVersion", None)
                self.sim.update(DEPLOYMENTS, dep_now)
        return created

    def _prune_history(self, dep: Obj, old: list[Obj]) -> None:
        limit = int(dep["spec"].get("revisionHistoryLimit", 10))
        idle = [rs for rs in old if replicas_of(rs) == 0 and not self.sim.owned(PODS, rs)]
        idle.sort(key=lambda rs: int(kobj.annotation(rs, REVISION, "0") or 0))
        for rs in idle[: max(len(idle) - limit, 0)]:
            self.sim.delete(REPLICASETS, rs["metadata"]["namespace"], rs["metadata"]["name"])

    def _status(self, dep: Obj, current: Obj | None, old: list[Obj], want: int) -> None:
        dep = self.sim.get(DEPLOYMENTS, dep["metadata"]["namespace"], dep["metadata"]["name"]) or dep
        all_rs = [rs for rs in [current, *old] if rs is not None]
        statuses = [rs.get("status") or {} for rs in all_rs]
        replicas = sum(int(s.get("replicas", 0)) for s in statuses)
        ready = sum(int(s.get("readyReplicas", 0)) for s in statuses)
        available = sum(int(s.get("availableReplicas", 0)) for s in statuses)
        updated = int((current.get("status") or {}).get("replicas", 0)) if current else 0
        now = self.sim.now()
        status = copy.deepcopy(dep.get("status") or {})
        status.update(
            {
                "observedGeneration": dep["metadata"].get("generation", 1),
                "replicas": replicas,
                "updatedReplicas": updated,
                "readyReplicas": ready,
                "availableReplicas": available,
                "unavailableReplicas": max(want - available, 0),
            }
        )
        for field_name in ("readyReplicas", "availableReplicas", "updatedReplicas", "replicas"):
            if status[field_name] == 0:
                status.pop(field_name)  # Kubernetes omits zero counts
        max_unavailable = _max_unavailable(dep, want)
        if available >= want - max_unavailable:
            kobj.set_condition(
                status, "Available", "True", now, "MinimumReplicasAvailable", "Deployment has minimum availability."
            )
        else:
            kobj.set_condition(
                status,
                "Available",
                "False",
                now,
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )
        rs_name = current["metadata"]["name"] if current else ""
        key = (dep["metadata"]["namespace"], dep["metadata"]["name"])
        if current is not None and updated == want and available >= want and replicas == want:
            self._progress.pop(key, None)
            kobj.set_condition(
                status,
                "Progressing",
                "True",
                now,
                "NewReplicaSetAvailable",
                f'ReplicaSet "{rs_name}" has successfully progressed.',
            )
        elif self._stalled(dep, key, rs_name, available):
            kobj.set_condition(
                status,
                "Progressing",
                "False",
                now,
                "ProgressDeadlineExceeded",
                f'ReplicaSet "{rs_name}" has timed out progressing.',
            )
        else:
            kobj.set_condition(
                status, "Progressing", "True", now, "ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.'
            )
        self.sim.patch_status(DEPLOYMENTS, dep, status)

    def _stalled(self, dep: Obj, key: tuple[str, str], rs_name: str, available: int) -> bool:
        """Whether the rollout made no progress (new available pods) for progressDeadlineSeconds."""
        deadline = float(dep.get("spec", {}).get("progressDeadlineSeconds", 600))
        now = self.sim.clock.now()
        seen = self._progress.get(key)
        if seen is None or seen[0] != rs_name or seen[1] != available:
            self._progress[key] = (rs_name, available, now)
            self.sim.requeue(self, key, deadline + 0.01)
            return False
        return now - seen[2] >= deadline


def _max_unavailable(dep: Obj, want: int) -> int:
    strategy = dep.get("spec", {}).get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    if isinstance(value, str) and value.endswith("%"):
        return int(want * int(value[:-1]) // 100)
    return int(value)
