"""metrics-server: once its add-on is ACTIVE, NodeMetrics/PodMetrics (metrics.k8s.io) for `kubectl top`."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from hyperpod_twin.kube.store import ResourceType, WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import NODES, PODS, TypeKey
from hyperpod_twin.sim.kobj import Obj

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
NODE_METRICS: TypeKey = (GROUP, "nodes")
POD_METRICS: TypeKey = (GROUP, "pods")
WINDOW = "20.05s"
ALL = "all"
# What a simulated container uses: a share of its requests, or a small idle footprint.
CPU_SHARE, MEMORY_SHARE = 0.25, 0.5
IDLE_CPU, IDLE_MEMORY = 0.005, 16 * 1024**2
# Node overhead besides pods (kubelet, containerd, system daemons).
NODE_CPU, NODE_MEMORY = 0.15, 768 * 1024**2


def register_types(sim: ClusterSim) -> None:
    """Serve metrics.k8s.io/v1beta1 nodes and pods (the metrics-server APIService)."""
    for kind, plural, namespaced in (("NodeMetrics", "nodes", False), ("PodMetrics", "pods", True)):
        if sim.rtype((GROUP, plural)) is None:
            sim.store.register(
                ResourceType(GROUP, VERSION, kind, plural, namespaced, singular="", list_kind=f"{kind}List")
            )


def container_usage(container: Obj) -> dict[str, float]:
    """Simulated usage of one running container (cpu cores, memory bytes)."""
    resources = container.get("resources") or {}
    requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    cpu = kobj.quantity(requests.get("cpu")) * CPU_SHARE if requests.get("cpu") else IDLE_CPU
    memory = kobj.quantity(requests.get("memory")) * MEMORY_SHARE if requests.get("memory") else IDLE_MEMORY
    return {"cpu": cpu, "memory": memory}


def _usage(cpu: float, memory: float) -> dict[str, str]:
    return {"cpu": f"{max(round(cpu * 1e9), 0)}n", "memory": f"{int(memory // 1024)}Ki"}


class MetricsServer(Controller):
    """Keeps one PodMetrics per Running pod and one NodeMetrics per Ready node while the metrics
    API is served; usage is derived from requests (a quarter of CPU, half of memory)."""

    watches = (PODS, NODES)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        return [ALL] if self.sim.rtype(NODE_METRICS) is not None else []

    def resync_keys(self) -> Iterable[Hashable]:
        return [ALL]

    def reconcile(self, key: Hashable) -> None:
        if self.sim.rtype(NODE_METRICS) is None or self.sim.rtype(POD_METRICS) is None:
            return
        now = self.sim.now()
        pods = [p for p in self.sim.list(PODS) if p.get("status", {}).get("phase") == "Running"]
        per_node: dict[str, tuple[float, float]] = {}
        wanted_pods: dict[tuple[str, str], Obj] = {}
        for pod in pods:
            containers = [{"name": c["name"], "usage": container_usage(c)} for c in pod["spec"].get("containers") or []]
            cpu = sum(c["usage"]["cpu"] for c in containers)
            memory = sum(c["usage"]["memory"] for c in containers)
            node = pod["spec"].get("nodeName", "")
            have = per_node.get(node, (0.0, 0.0))
            per_node[node] = (have[0] + cpu, have[1] + memory)
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            wanted_pods[(ns, name)] = {
                "metadata": {"name": name, "namespace": ns, "labels": dict(pod["metadata"].get("labels") or {})},
                "timestamp": now,
                "window": WINDOW,
                "containers": [
                    {"name": c["name"], "usage": _usage(c["usage"]["cpu"], c["usage"]["memory"])} for c in containers
                ],
            }
        wanted_nodes: dict[tuple[str, str], Obj] = {}
        for node in self.sim.list(NODES):
            if not kobj.is_true(node, "Ready"):
                continue
            name = node["metadata"]["name"]
            cpu, memory = per_node.get(name, (0.0, 0.0))
            wanted_nodes[("", name)] = {
                "metadata": {"name": name, "labels": dict(node["metadata"].get("labels") or {})},
                "timestamp": now,
                "window": WINDOW,
                "usage": _usage(cpu + NODE_CPU, memory + NODE_MEMORY),
            }
        self._sync(POD_METRICS, wanted_pods)
        self._sync(NODE_METRICS, wanted_nodes)

    def _sync(self, key: TypeKey, wanted: dict[tuple[str, str], Obj]) -> None:
        current = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in self.sim.list(key)}
        for ident in current:
            if ident not in wanted:
                self.sim.delete(key, ident[0], ident[1])
        for ident, body in wanted.items():
            existing = current.get(ident)
            if existing is None:
                self.sim.create(key, body)
            elif (existing.get("usage"), existing.get("containers")) != (body.get("usage"), body.get("containers")):
                existing.update({k: v for k, v in body.items() if k != "metadata"})
                existing["metadata"].pop("resourceVersion", None)
                self.sim.update(key, existing)
