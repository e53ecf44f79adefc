"""Control of the twin's Kubernetes API servers for tests: cut watches, block them or the whole API, hold write
replies, compact history, expire Events, and register many Nodes in one request (a fleet built fast).

Reached through `POST /_twin/kube/{cluster}/{action}` (the AWS side's control endpoints publish
`twin.kube.control`; this module answers it for the clusters the Kubernetes plugin runs).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.store_errors import NotFoundError, StoreError

EVENT_TTL_SECONDS = 3600.0  # kube-apiserver's default --event-ttl
ACTIONS = ("watches/cut", "watches/block", "api/block", "writes/hold", "history/compact", "events/expire",
           "nodes/create")
MAX_NODES_PER_CALL = 5000


def _stamp(event: dict[str, Any]) -> float:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        value = event.get(key)
        if value:
            return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    created = (event.get("metadata") or {}).get("creationTimestamp") or "1970-01-01T00:00:00Z"
    return dt.datetime.fromisoformat(str(created).replace("Z", "+00:00")).timestamp()


def expire_events(runtime: ClusterRuntime, older_than: float, now: float | None = None) -> list[str]:
    """Delete the core/v1 Events last seen more than `older_than` seconds ago, as the API server's
    event TTL does; returns "namespace/name" of each."""
    store = runtime.store
    rtype = store.find_type("", "events")
    if rtype is None:
        return []
    now = dt.datetime.now(dt.UTC).timestamp() if now is None else now
    items, _ = store.list(rtype, None, None)
    gone = []
    for event in items:
        if now - _stamp(event) >= older_than:
            md = event["metadata"]
            try:
                store.delete(rtype, md.get("namespace", ""), md["name"])
            except NotFoundError:
                continue
            gone.append(f"{md.get('namespace', '')}/{md['name']}")
    return gone


def create_nodes(runtime: ClusterRuntime, body: dict[str, Any]) -> dict[str, Any]:
    """`nodes/create {"nodes": [Node, ...]}`: each Node stored as a POST /api/v1/nodes would (one ADDED event to
    the watches each), in one request instead of one per Node; a bench builds thousands of them in seconds."""
    nodes = body.get("nodes")
    if not isinstance(nodes, list) or not nodes or len(nodes) > MAX_NODES_PER_CALL:
        raise ValueError(f"nodes/create needs 'nodes': a list of 1 to {MAX_NODES_PER_CALL} Node objects")
    rtype = runtime.store.find_type("", "nodes")
    if rtype is None:
        raise ValueError("this API server serves no nodes")
    created = 0
    for i, node in enumerate(nodes):
        if not isinstance(node, dict) or not (node.get("metadata") or {}).get("name"):
            raise ValueError(f"nodes[{i}].metadata.name: required (created before it: {created})")
        try:
            runtime.store.create(rtype, node)
        except StoreError as exc:
            raise ValueError(f"nodes[{i}]: {exc} (created before it: {created})") from exc
        created += 1
    return {"cluster": runtime.name, "created": created}


def control(runtimes: dict[str, ClusterRuntime], cluster: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
    """Run one control action on cluster `cluster`'s API server; ValueError names what is wrong."""
    runtime = runtimes.get(cluster)
    if runtime is None:
        raise ValueError(f"no running Kubernetes API server for EKS cluster {cluster!r} (known: {sorted(runtimes)})")
    if action == "watches/cut":
        runtime.store.cut_watches()
        return {"cluster": cluster, "cut": True}
    if action == "watches/block":
        runtime.store.watches_blocked = bool(body.get("blocked", True))
        if runtime.store.watches_blocked:
            runtime.store.cut_watches()
        return {"cluster": cluster, "blocked": runtime.store.watches_blocked}
    if action == "writes/hold":
        resource = str(body.get("resource") or "")
        if body.get("held", True):
            if not resource:
                raise ValueError("writes/hold needs 'resource': a resource plural, e.g. hyperpodpytorchjobs")
            runtime.store.held_writes.add(resource)
            runtime.store.writes_released.clear()
        else:
            runtime.store.held_writes.clear()
            runtime.store.writes_released.set()
        return {"cluster": cluster, "held": sorted(runtime.store.held_writes)}
    if action == "api/block":  # every resource request answers 503 and the open watches drop
        runtime.store.api_blocked = bool(body.get("blocked", True))
        if runtime.store.api_blocked:
            runtime.store.cut_watches()
        return {"cluster": cluster, "apiBlocked": runtime.store.api_blocked}
    if action == "history/compact":
        return {"cluster": cluster, "compactedBelow": runtime.store.compact()}
    if action == "events/expire":
        older = float(body.get("olderThanSeconds", EVENT_TTL_SECONDS))
        return {"cluster": cluster, "expired": expire_events(runtime, older)}
    if action == "nodes/create":
        return create_nodes(runtime, body)
    raise ValueError(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")


def attach(twin: Any) -> None:
    """Answer `twin.kube.control` for the clusters of the Kubernetes plugin (attached after it)."""

    def on_control(cluster: str, action: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        try:
            return control(twin.kube_runtimes, cluster, action, body)
        except ValueError as exc:
            return {"error": str(exc)}

    twin.bus.subscribe("twin.kube.control", on_control)
