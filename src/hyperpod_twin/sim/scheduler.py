"""The twin's kube-scheduler: binds pending pods to nodes by requests, selectors, affinity and taints, in priority
order, preempting lower-priority pods for a pod that fits nowhere (sim/preemption.py)."""

from __future__ import annotations

import copy
import threading
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.kinds import NODES, PODS, PVCS
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.preemption import preempt, priority

if TYPE_CHECKING:
    from hyperpod_twin.sim.core import ClusterSim

ALL = "all"
_IGNORED_RESOURCES = ("hugepages-1Gi", "hugepages-2Mi")


PodKey = tuple[str, str]


class _Usage(dict[str, Counter[str]]):
    """Each node's summed requests, copied from the scheduler's index on first use (a reconcile reads the
    few nodes its pending pods may go to, not all of them)."""

    def __init__(self, index: dict[str, Counter[str]]) -> None:
        super().__init__()
        self._index = index

    def __missing__(self, node: str) -> Counter[str]:
        found = self[node] = Counter(self._index.get(node) or {})
        return found


def needs_scheduling(pod: Obj) -> bool:
    """A live pod with no node yet."""
    return (
        not pod.get("spec", {}).get("nodeName")
        and kobj.pod_is_active(pod)
        and pod.get("status", {}).get("phase", "Pending") == "Pending"
    )


def _uses_node(pod: Obj) -> bool:
    return bool(pod.get("spec", {}).get("nodeName")) and not kobj.pod_is_terminal(pod)


class Scheduler(Controller):
    """Filters nodes the way kube-scheduler's default plugins do, scores by least allocation, binds.

    A pod that fits nowhere gets PodScheduled=False (reason Unschedulable) with kube's message,
    e.g. ``0/2 nodes are available: 2 Insufficient nvidia.com/gpu.``, and a FailedScheduling
    Event; it is retried whenever a node, a pod or a claim changes.
    """

    watches = (PODS, NODES, PVCS)

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        # What every node holds and which pods wait, kept from the pod watch events (a reconcile per event
        # must not sum the requests of every pod of a 2,000-node cluster): pod → (node, requests); node →
        # summed requests, pod count and pods; pending pods.
        self._lock = threading.Lock()
        self._bound: dict[PodKey, tuple[str, dict[str, float]]] = {}
        self._used: dict[str, Counter[str]] = {}
        self._count: Counter[str] = Counter()
        self._placed: dict[str, dict[PodKey, Obj]] = {}
        self._pending: dict[PodKey, Obj] = {}

    def _index(self, pod: Obj, deleted: bool, *, only_new: bool = False) -> None:
        md = pod["metadata"]
        key = (md.get("namespace", "default"), md["name"])
        with self._lock:
            if only_new and (key in self._bound or key in self._pending):
                return
            old = self._bound.pop(key, None)
            if old is not None:
                self._used[old[0]].subtract(old[1])
                self._count[old[0]] -= 1
                self._placed[old[0]].pop(key, None)
            self._pending.pop(key, None)
            if deleted:
                return
            if _uses_node(pod):
                node = pod["spec"]["nodeName"]
                requests = kobj.pod_requests(pod)
                self._bound[key] = (node, requests)
                self._used.setdefault(node, Counter()).update(requests)
                self._count[node] += 1
                self._placed.setdefault(node, {})[key] = pod
            elif needs_scheduling(pod):
                self._pending[key] = pod

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        if event.rtype.key == PODS:
            pod = event.object
            self._index(pod, event.type == "DELETED")
            if event.type == "DELETED" or needs_scheduling(pod) or kobj.pod_is_terminal(pod):
                return [ALL]
            return []
        return [ALL]

    def resync_keys(self) -> Iterable[Hashable]:
        for pod in self.sim.view(PODS):
            self._index(pod, False, only_new=True)
        return [ALL]

    def reconcile(self, key: Hashable) -> None:
        # The pending pods (copied) and the nodes' usage from the index; nodes as stored (no copies).
        with self._lock:
            pending = [copy.deepcopy(pod) for _, pod in sorted(self._pending.items())]
            if not pending:
                return
            used: dict[str, Counter[str]] = _Usage(self._used)
            counts: Counter[str] = Counter(self._count)
            placed: dict[str, list[Obj]] = {node: list(pods.values()) for node, pods in self._placed.items() if pods}
        nodes = self.sim.view(NODES)
        by_name: dict[str, Obj] = {}
        pending.sort(key=lambda p: (-int(p["spec"].get("priority") or 0), p["metadata"].get("creationTimestamp", "")))
        # Pods that preempted others hold the room on their nominated node against pods of no higher priority.
        nominated: dict[str, list[Obj]] = {}
        for waiting in pending:
            node_name = (waiting.get("status") or {}).get("nominatedNodeName")
            if node_name:
                nominated.setdefault(node_name, []).append(waiting)
        for pod in pending:
            if pod["spec"].get("schedulingGates"):
                self._unschedulable(pod, "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")
                continue
            claim_problem = self._claims_problem(pod)
            if claim_problem:
                self._unschedulable(pod, "Unschedulable", claim_problem)
                continue
            requests = kobj.pod_requests(pod)
            fits: list[tuple[float, str, Obj]] = []
            reasons: Counter[str] = Counter()
            candidates = nodes
            named = _named_nodes(pod)
            if named is not None:  # kube-scheduler's NodeAffinity PreFilter: only the nodes named by matchFields
                by_name = by_name or {n["metadata"]["name"]: n for n in nodes}
                candidates = [by_name[n] for n in sorted(named) if n in by_name]
                if len(nodes) > len(candidates):
                    reasons["node(s) didn't match Pod's node affinity/selector"] += len(nodes) - len(candidates)
            for node in candidates:
                name = node["metadata"]["name"]
                held = [p for p in nominated.get(name, []) if p is not pod and priority(p) >= priority(pod)]
                taken = used[name].copy()
                for holder in held:
                    taken.update(kobj.pod_requests(holder))
                problems = self._filter(pod, node, requests, taken, counts[name] + len(held))
                if not problems:
                    problems = _pod_affinity_problems(pod, node, nodes, placed)
                if problems:
                    reasons.update(problems)
                else:
                    fits.append((self._score(pod, node, requests, used[name]), name, node))
            if not fits:
                self._unschedulable(pod, "Unschedulable", _fit_error(len(nodes), reasons))
                preempt(self.sim, self._filter, pod, nodes, used, counts, placed)
                continue
            fits.sort(key=lambda f: (-f[0], f[1]))
            _, name, node = fits[0]
            if self._bind(pod, name):
                for holders in nominated.values():
                    if pod in holders:
                        holders.remove(pod)
                used[name].update(requests)
                counts[name] += 1
                placed.setdefault(name, []).append(pod)

    # -- filters -----------------------------------------------------------------------------------
    def _filter(self, pod: Obj, node: Obj, requests: dict[str, float], used: Counter[str], count: int) -> list[str]:
        spec = pod.get("spec", {})
        taints = node.get("spec", {}).get("taints") or []
        tolerations = spec.get("tolerations") or []
        for taint in taints:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not kobj.tolerates(tolerations, taint):
                return [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"]
        if node.get("spec", {}).get("unschedulable"):
            return ["node(s) were unschedulable"]
        if not self._affinity_ok(pod, node):
            return ["node(s) didn't match Pod's node affinity/selector"]
        problems: list[str] = []
        alloc = node.get("status", {}).get("allocatable") or {}
        if count + 1 > kobj.quantity(alloc.get("pods", 110)):
            problems.append("Too many pods")
        for resource, amount in sorted(requests.items()):
            if amount <= 0 or resource in _IGNORED_RESOURCES:
                continue
            if used[resource] + amount > kobj.quantity(alloc.get(resource, 0)) + 1e-9:
                problems.append(f"Insufficient {resource}")
        return problems

    @staticmethod
    def _affinity_ok(pod: Obj, node: Obj) -> bool:
        spec = pod.get("spec", {})
        if not kobj.match_map(spec.get("nodeSelector"), node["metadata"].get("labels")):
            return False
        required = (
            ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            or {}
        ).get("nodeSelectorTerms")
        if required:
            return any(kobj.node_selector_term_matches(term, node) for term in required)
        return True

    def _claims_problem(self, pod: Obj) -> str:
        ns = pod["metadata"].get("namespace", "default")
        for volume in pod.get("spec", {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            pvc = self.sim.get(PVCS, ns, claim)
            if pvc is None:
                return f'persistentvolumeclaim "{claim}" not found'
            if pvc.get("status", {}).get("phase") != "Bound":
                total = len(self.sim.view(NODES))
                return f"0/{total} nodes are available: pod has unbound immediate PersistentVolumeClaims."
        return ""

    # -- scoring -----------------------------------------------------------------------------------
    @staticmethod
    def _score(pod: Obj, node: Obj, requests: dict[str, float], used: Counter[str]) -> float:
        alloc = node.get("status", {}).get("allocatable") or {}
        fractions = []
        for resource in ("cpu", "memory"):
            total = kobj.quantity(alloc.get(resource, 0))
            if total > 0:
                fractions.append(1 - (used[resource] + requests.get(resource, 0.0)) / total)
        score = 100 * (sum(fractions) / len(fractions) if fractions else 0.0)
        preferred = (
            ((pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
                "preferredDuringSchedulingIgnoredDuringExecution"
            )
        ) or []
        for term in preferred:
            if kobj.node_selector_term_matches(term.get("preference") or {}, node):
                score += float(term.get("weight", 0))
        return score

    # -- writes ------------------------------------------------------------------------------------
    def _bind(self, pod: Obj, node_name: str) -> bool:
        current = self.sim.get(PODS, pod["metadata"].get("namespace", "default"), pod["metadata"]["name"])
        if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"] or not needs_scheduling(current):
            return False
        current["spec"]["nodeName"] = node_name
        status = current.setdefault("status", {})
        status.setdefault("phase", "Pending")
        kobj.set_condition(status, "PodScheduled", "True", self.sim.now())
        self.sim.save(PODS, current)
        ns, name = current["metadata"]["namespace"], current["metadata"]["name"]
        self.sim.event(
            current, "Scheduled", f"Successfully assigned {ns}/{name} to {node_name}", source="default-scheduler"
        )
        return True

    def _unschedulable(self, pod: Obj, reason: str, message: str) -> None:
        cond = kobj.condition(pod, "PodScheduled")
        if cond and cond.get("status") == "False" and cond.get("message") == message:
            return
        status = copy.deepcopy(pod.get("status") or {})
        status.setdefault("phase", "Pending")
        kobj.set_condition(status, "PodScheduled", "False", self.sim.now(), reason, message)
        self.sim.patch_status(PODS, pod, status)
        if reason == "Unschedulable":
            self.sim.event(pod, "FailedScheduling", message, "Warning", source="default-scheduler")


def _term_matches(term: Obj, pod: Obj, node: Obj, nodes: list[Obj], placed: dict[str, list[Obj]]) -> bool:
    """Whether a pod matching the term's selector runs in `node`'s topology domain."""
    key = term.get("topologyKey", "")
    domain = (node["metadata"].get("labels") or {}).get(key)
    if domain is None:
        return False
    namespaces = set(term.get("namespaces") or [pod["metadata"].get("namespace", "default")])
    selector = term.get("labelSelector") or {}
    for other in nodes:
        if (other["metadata"].get("labels") or {}).get(key) != domain:
            continue
        for candidate in placed.get(other["metadata"]["name"], []):
            same_ns = candidate["metadata"].get("namespace") in namespaces or term.get("namespaceSelector") == {}
            if same_ns and kobj.match_labels(selector, candidate["metadata"].get("labels")):
                return True
    return False


def _pod_affinity_problems(pod: Obj, node: Obj, nodes: list[Obj], placed: dict[str, list[Obj]]) -> list[str]:
    """Required inter-pod affinity and anti-affinity (any topologyKey), as kube-scheduler filters them."""
    affinity = pod.get("spec", {}).get("affinity") or {}
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    for term in (affinity.get("podAntiAffinity") or {}).get(required) or []:
        if _term_matches(term, pod, node, nodes, placed):
            return ["node(s) didn't match pod anti-affinity rules"]
    for term in (affinity.get("podAffinity") or {}).get(required) or []:
        if _term_matches(term, pod, node, nodes, placed):
            continue
        # The first pod of a group that selects itself may go anywhere (kube-scheduler's rule).
        selector = term.get("labelSelector") or {}
        anywhere = any(
            kobj.match_labels(selector, other["metadata"].get("labels")) for group in placed.values() for other in group
        )
        if anywhere or not kobj.match_labels(selector, pod["metadata"].get("labels")):
            return ["node(s) didn't match pod affinity rules"]
    return []


def _fit_error(total: int, reasons: Counter[str]) -> str:
    """kube-scheduler's FitError text: reasons with their node counts, sorted."""
    if total == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


def _named_nodes(pod: Obj) -> set[str] | None:
    """The node names a pod's required node affinity restricts it to through `matchFields` metadata.name In
    (a DaemonSet pod's pin), when every term does; None when some term can match other nodes."""
    required = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        fields = [f for f in term.get("matchFields") or []
                  if f.get("key") == "metadata.name" and f.get("operator") == "In"]
        if not fields:
            return None
        allowed = set(fields[0].get("values") or [])
        for more in fields[1:]:
            allowed &= set(more.get("values") or [])
        names |= allowed
    return names
