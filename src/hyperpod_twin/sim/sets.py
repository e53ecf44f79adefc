"""DaemonSet (a pod per eligible node) and StatefulSet (ordered, stably named pods with claims) controllers."""

from __future__ import annotations

import copy
import threading
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import OwnerController
from hyperpod_twin.sim.kinds import DAEMONSETS, NODES, PODS, nsname
from hyperpod_twin.sim.kobj import Obj

if TYPE_CHECKING:
    from hyperpod_twin.sim.core import ClusterSim

# Tolerations the DaemonSet controller adds to every daemon pod (as kube does).
_DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


@dataclass(frozen=True)
class _NodeKey:
    """Work key: reconcile one DaemonSet on one node (a Node or a daemon pod changed)."""

    namespace: str
    name: str
    node: str


@dataclass(frozen=True)
class _StatusKey:
    """Work key: write one DaemonSet's status from the controller's per-node bookkeeping."""

    namespace: str
    name: str


DsKey = tuple[str, str]


@dataclass
class _DsState:
    """What the controller knows of one DaemonSet between reconciles: the nodes that admit it, the nodes
    that have its pod, and the nodes whose pod is Ready (the status counts, without a pass over all nodes)."""

    uid: str = ""
    generation: int = 0
    eligible: set[str] = field(default_factory=set)
    scheduled: set[str] = field(default_factory=set)
    ready: set[str] = field(default_factory=set)


class DaemonSetController(OwnerController):
    """One pod per node that the template's selector, affinity and tolerations admit; the pod is
    pinned with a matchFields node affinity (as the real controller does) and scheduled normally.

    A Node event or a daemon pod event reconciles each DaemonSet on that one node; only a change of a
    DaemonSet itself (a new generation) or the start-up resync reconciles it over every node. Daemon pods
    are indexed by DaemonSet and pinned node, kept current from the watch events."""

    primary = DAEMONSETS
    owns = {PODS: "DaemonSet"}
    watches = (DAEMONSETS, PODS, NODES)

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        self._lock = threading.Lock()
        # (namespace, DaemonSet) → pinned node → pod name → pod (the event's copy), and pod → where it is filed.
        self._pods: dict[DsKey, dict[str, dict[str, Obj]]] = {}
        self._where: dict[DsKey, tuple[DsKey, str]] = {}
        self._gone: set[str] = set()  # uids of daemon pods deleted before the seed (it must not revive them)
        self._seeded = False
        self._state: dict[DsKey, _DsState] = {}

    # -- index ---------------------------------------------------------------------------------------
    def _file(self, pod: Obj, deleted: bool) -> list[tuple[DsKey, str]]:
        """File (or unfile) a daemon pod in the index; the (DaemonSet, node) places it touched."""
        ref = kobj.controller_of(pod)
        if not ref or ref.get("kind") != "DaemonSet":
            return []
        md = pod["metadata"]
        ns = md.get("namespace", "default")
        pod_key = (ns, md["name"])
        ds_key = (ns, str(ref["name"]))
        node = _pinned_node(pod)
        with self._lock:
            old = self._where.pop(pod_key, None)
            if old is not None:
                self._pods.get(old[0], {}).get(old[1], {}).pop(md["name"], None)
            if deleted:
                if not self._seeded:
                    self._gone.add(str(md.get("uid", "")))
            else:
                self._pods.setdefault(ds_key, {}).setdefault(node, {})[md["name"]] = pod
                self._where[pod_key] = (ds_key, node)
        if old is not None and old != (ds_key, node):
            return [old, (ds_key, node)]  # moved (a pin does not change; kept for safety)
        return [(ds_key, node)]

    def _seed(self) -> None:
        """File the daemon pods that exist already (a restarted simulator); newer event copies win."""
        for pod in self.sim.view(PODS):
            ref = kobj.controller_of(pod)
            if not ref or ref.get("kind") != "DaemonSet":
                continue
            md = pod["metadata"]
            with self._lock:
                if str(md.get("uid", "")) in self._gone:
                    continue
                where = self._where.get((md.get("namespace", "default"), md["name"]))
                if where is not None:
                    filed = self._pods.get(where[0], {}).get(where[1], {}).get(md["name"])
                    if filed is not None and int(filed["metadata"].get("resourceVersion") or 0) >= int(
                        md.get("resourceVersion") or 0
                    ):
                        continue
            self._file(pod, deleted=False)
        with self._lock:
            self._seeded = True
            self._gone.clear()

    def _pods_on(self, ds_key: DsKey, node: str) -> list[Obj]:
        with self._lock:
            return [pod for _, pod in sorted(self._pods.get(ds_key, {}).get(node, {}).items())]

    def _nodes_with_pods(self, ds_key: DsKey) -> list[str]:
        with self._lock:
            return [node for node, pods in self._pods.get(ds_key, {}).items() if pods]

    # -- events → keys -------------------------------------------------------------------------------
    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        kind = event.rtype.key
        if kind == NODES:
            node = event.object["metadata"]["name"]
            return [_NodeKey(*_ds_key(ds), node) for ds in self.sim.view(DAEMONSETS)]
        if kind == PODS:
            places = self._file(event.object, deleted=event.type == "DELETED")
            return [_NodeKey(ds_key[0], ds_key[1], node) for ds_key, node in places]
        md = event.object["metadata"]
        ds_key = _ds_key(event.object)
        state = self._state.get(ds_key)
        if (
            event.type == "MODIFIED"
            and state is not None
            and state.uid == md.get("uid")
            and state.generation == int(md.get("generation", 1))
            and not md.get("deletionTimestamp")
        ):
            return []  # a status (or metadata) write: the pods do not depend on it
        return [ds_key]

    def resync_keys(self) -> Iterable[Hashable]:
        self._seed()
        return super().resync_keys()

    # -- reconcile -----------------------------------------------------------------------------------
    def reconcile(self, key: Hashable) -> None:
        if isinstance(key, _NodeKey):
            self._reconcile_node(key)
        elif isinstance(key, _StatusKey):
            self._write_status((key.namespace, key.name))
        else:
            self._reconcile_all(nsname(key))

    def _daemonset(self, ds_key: DsKey) -> Obj | None:
        ds = self.sim.peek(DAEMONSETS, *ds_key)
        if ds is None or ds["metadata"].get("deletionTimestamp"):
            self._state.pop(ds_key, None)
            return None
        return ds

    def _reconcile_all(self, ds_key: DsKey) -> None:
        ds = self._daemonset(ds_key)
        if ds is None:
            return
        md = ds["metadata"]
        state = _DsState(uid=str(md.get("uid", "")), generation=int(md.get("generation", 1)))
        self._state[ds_key] = state
        # Read-only views (no copies): every node, and every node that holds one of its pods (gone ones too).
        nodes = {n["metadata"]["name"]: n for n in self.sim.view(NODES)}
        for node in sorted({*nodes, *self._nodes_with_pods(ds_key)}):
            self._sync(ds, state, node, nodes.get(node))
        self._write_status(ds_key)

    def _reconcile_node(self, key: _NodeKey) -> None:
        ds_key = (key.namespace, key.name)
        state = self._state.get(ds_key)
        ds = self._daemonset(ds_key)
        if ds is None:
            return
        if state is None or state.uid != ds["metadata"].get("uid"):
            self._reconcile_all(ds_key)  # not yet reconciled in full (its ADDED event is still queued)
            return
        self._sync(ds, state, key.node, self.sim.peek(NODES, "", key.node) if key.node else None)
        self.sim.enqueue(self, _StatusKey(*ds_key))  # coalesced: one status write per burst of node events

    def _sync(self, ds: Obj, state: _DsState, node_name: str, node: Obj | None) -> None:
        """Make one node hold exactly one healthy pod of `ds` if it admits it, none otherwise."""
        ns = ds["metadata"]["namespace"]
        ds_key = _ds_key(ds)
        template = ds.get("spec", {}).get("template") or {}
        tspec = template.get("spec") or {}
        tolerations = [*(tspec.get("tolerations") or []), *_DAEMON_TOLERATIONS]
        eligible = node is not None and self._eligible(node, tspec, tolerations)
        kept: Obj | None = None
        for pod in self._pods_on(ds_key, node_name):
            if not kobj.is_owned_by(pod, ds):
                continue  # a former DaemonSet of the same name's pod: the garbage collector's
            failed = pod.get("status", {}).get("phase") == "Failed"
            if failed or not eligible or kept is not None:
                self.sim.delete_pod(ns, pod["metadata"]["name"])
            else:
                kept = pod
        if eligible and kept is None:
            kept = self._create(ds, template, tolerations, node_name)
            if kept is None:  # refused (admission, a name taken): retried, as the real controller backs off
                self.sim.requeue(self, _NodeKey(ns, ds["metadata"]["name"], node_name), 1.0)
        for group, member in (
            (state.eligible, eligible),
            (state.scheduled, kept is not None),
            (state.ready, kept is not None and kobj.pod_is_ready(kept)),
        ):
            if member:
                group.add(node_name)
            else:
                group.discard(node_name)

    def _create(self, ds: Obj, template: Obj, tolerations: list[Obj], node_name: str) -> Obj | None:
        tmpl = copy.deepcopy(template)
        spec = tmpl.setdefault("spec", {})
        spec["tolerations"] = tolerations
        spec["affinity"] = {
            **(spec.get("affinity") or {}),
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                    ]
                }
            },
        }
        created = self.sim.create(
            PODS,
            kobj.pod_from_template(
                tmpl,
                ds,
                labels={
                    "controller-revision-hash": kobj.template_hash(template),
                    "pod-template-generation": str(ds["metadata"].get("generation", 1)),
                },
            ),
        )
        if created is not None:
            self._file(created, deleted=False)
        return created

    def _write_status(self, ds_key: DsKey) -> None:
        state = self._state.get(ds_key)
        ds = self._daemonset(ds_key)
        if ds is None or state is None:
            return
        eligible, scheduled, ready = len(state.eligible), len(state.scheduled), len(state.ready)
        status = {
            "currentNumberScheduled": scheduled,
            "desiredNumberScheduled": eligible,
            "numberMisscheduled": 0,
            "numberReady": ready,
            "numberAvailable": ready,
            "numberUnavailable": eligible - ready,
            "updatedNumberScheduled": scheduled,
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        self.sim.patch_status(DAEMONSETS, ds, status)

    @staticmethod
    def _eligible(node: Obj, tspec: Obj, tolerations: list[Obj]) -> bool:
        if not kobj.match_map(tspec.get("nodeSelector"), node["metadata"].get("labels")):
            return False
        terms = (
            ((tspec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            or {}
        ).get("nodeSelectorTerms")
        if terms and not any(kobj.node_selector_term_matches(t, node) for t in terms):
            return False
        for taint in node.get("spec", {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not kobj.tolerates(tolerations, taint):
                return False
        return True


def _ds_key(ds: Obj) -> DsKey:
    return ds["metadata"].get("namespace", "default"), ds["metadata"]["name"]


def _pinned_node(pod: Obj) -> str:
    if pod.get("spec", {}).get("nodeName"):
        return str(pod["spec"]["nodeName"])
    terms = (
        ((pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for term in terms:
        for match in term.get("matchFields") or []:
            if match.get("key") == "metadata.name" and match.get("values"):
                return str(match["values"][0])
    return ""
