"""The kubelet's pods-by-node index: which pods each node holds, kept current from the pod watch events."""

from __future__ import annotations

import threading

from hyperpod_twin.sim.kobj import Obj


class PodsByNode:
    """The pods bound to each node, so a Node event reads its node's pods, not every pod."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._node_of: dict[tuple[str, str], str] = {}
        self._on_node: dict[str, set[tuple[str, str]]] = {}

    def file(self, pod: Obj, deleted: bool, *, only_new: bool = False) -> None:
        """Keep the pods-by-node index (a Node event reads its node's pods, not every pod) current."""
        md = pod["metadata"]
        key = (md.get("namespace", "default"), md["name"])
        node = "" if deleted else str(pod.get("spec", {}).get("nodeName") or "")
        with self._lock:
            if only_new and key in self._node_of:
                return
            old = self._node_of.pop(key, "")
            if old:
                held = self._on_node.get(old)
                if held is not None:
                    held.discard(key)
                    if not held:
                        del self._on_node[old]
            if node:
                self._node_of[key] = node
                self._on_node.setdefault(node, set()).add(key)

    def on(self, node_name: str) -> list[tuple[str, str]]:
        """The (namespace, name) of the pods bound to `node_name`, sorted."""
        with self._lock:
            return sorted(self._on_node.get(node_name, ()))
