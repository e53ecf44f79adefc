"""Kubernetes objects as services hold them: the API server's wire JSON (camelCase keys) as plain dicts, and small
typed readers of the fields services look at, so no service chains `.get(...)` through metadata, spec and status.

Every gateway function (`core_kinds`, `custom_objects`, `apply`, the informers) hands out these dicts; a missing or
null field reads as the empty value of its type, as the API server omits empty fields."""

from datetime import datetime
from typing import Any, TypeAlias

Obj: TypeAlias = dict[str, Any]
"""One object (a Pod, a Deployment, a Status, ...) in its wire form."""

ObjList: TypeAlias = dict[str, Any]
"""A list answer in its wire form: {"kind": "...List", "metadata": {...}, "items": [Obj, ...]}."""


def section(obj: Obj | None, key: str) -> Obj:
    """obj[key] as a dict (`metadata`, `spec`, `status`, ...), {} when absent or null."""
    value = (obj or {}).get(key)
    return value if isinstance(value, dict) else {}


def items(listed: ObjList | None) -> list[Obj]:
    """The objects of a list answer ([] when it has none)."""
    return list((listed or {}).get("items") or [])


def metadata(obj: Obj | None) -> Obj:
    """The object's metadata ({} when absent)."""
    return section(obj, "metadata")


def spec(obj: Obj | None) -> Obj:
    """The object's spec ({} when absent)."""
    return section(obj, "spec")


def status(obj: Obj | None) -> Obj:
    """The object's status ({} when absent)."""
    return section(obj, "status")


def name(obj: Obj | None) -> str:
    """metadata.name ("" when absent)."""
    return str(metadata(obj).get("name") or "")


def namespace(obj: Obj | None) -> str:
    """metadata.namespace ("" for cluster-scoped objects)."""
    return str(metadata(obj).get("namespace") or "")


def uid(obj: Obj | None) -> str | None:
    """metadata.uid (None when absent: an object not read from the server)."""
    value = metadata(obj).get("uid")
    return None if value is None else str(value)


def labels(obj: Obj | None) -> dict[str, str]:
    """metadata.labels ({} when none)."""
    return dict(metadata(obj).get("labels") or {})


def annotations(obj: Obj | None) -> dict[str, str]:
    """metadata.annotations ({} when none)."""
    return dict(metadata(obj).get("annotations") or {})


def owner_references(obj: Obj | None) -> list[Obj]:
    """metadata.ownerReferences ([] when none)."""
    return list(metadata(obj).get("ownerReferences") or [])


def deleting(obj: Obj | None) -> bool:
    """Whether the object carries a deletionTimestamp (it is being deleted)."""
    return bool(metadata(obj).get("deletionTimestamp"))


def conditions(obj: Obj | None) -> list[Obj]:
    """status.conditions ([] when none)."""
    return list(status(obj).get("conditions") or [])


def phase(pod: Obj | None) -> str | None:
    """A Pod's status.phase (None before the API server set one)."""
    value = status(pod).get("phase")
    return None if value is None else str(value)


def container_statuses(pod: Obj | None) -> list[Obj]:
    """A Pod's status.containerStatuses ([] when none)."""
    return list(status(pod).get("containerStatuses") or [])


def restarts(pod: Obj | None) -> int:
    """The restarts of every container of a Pod, summed."""
    return sum(int(c.get("restartCount") or 0) for c in container_statuses(pod))


def node_name(pod: Obj | None) -> str | None:
    """The Node a Pod is bound to (None while unscheduled)."""
    value = spec(pod).get("nodeName")
    return None if value is None else str(value)


def replicas(workload: Obj | None, default: int = 0) -> int:
    """A Deployment's (or StatefulSet's) spec.replicas, `default` when unset."""
    value = spec(workload).get("replicas")
    return default if value is None else int(value)


def ready_replicas(workload: Obj | None) -> int:
    """A Deployment's status.readyReplicas (0 when none is ready yet)."""
    return int(status(workload).get("readyReplicas") or 0)


def ingress(service: Obj | None) -> list[Obj]:
    """A Service's status.loadBalancer.ingress ([] while no load balancer is provisioned)."""
    return list(section(status(service), "loadBalancer").get("ingress") or [])


def ports(service: Obj | None) -> list[Obj]:
    """A Service's spec.ports ([] when none)."""
    return list(spec(service).get("ports") or [])


def service_type(service: Obj | None) -> str | None:
    """A Service's spec.type (None when the server omitted it)."""
    value = spec(service).get("type")
    return None if value is None else str(value)


def allocatable(node: Obj | None) -> dict[str, str]:
    """A Node's status.allocatable ({} when not reported yet)."""
    return dict(status(node).get("allocatable") or {})


def created_at(obj: Obj | None) -> datetime | None:
    """metadata.creationTimestamp as an aware datetime (None when absent: an object not read from the server)."""
    value = metadata(obj).get("creationTimestamp")
    return datetime.fromisoformat(str(value)) if value else None
