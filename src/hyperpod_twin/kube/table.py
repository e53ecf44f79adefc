"""meta.k8s.io/v1 Table responses, the columns `kubectl get` prints for each kind."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hyperpod_twin.kube.store import ResourceType

Obj = dict[str, Any]
Column = tuple[str, str, str, Callable[[Obj], Any]]  # name, type, description, value


def human_duration(seconds: float) -> str:
    """kubectl's short age format: 45s, 3m12s, 5h, 2d3h, 40d."""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h{minutes % 60}m" if hours < 8 and minutes % 60 else f"{hours}h"
    days = hours // 24
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d"


def _age(obj: Obj) -> str:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    created = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    return human_duration(time.time() - created)


def _get(obj: Any, *path: str, default: Any = None) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return default
        obj = obj.get(part)
    return default if obj is None else obj


def _pod_ready(obj: Obj) -> str:
    containers = _get(obj, "spec", "containers", default=[])
    statuses = _get(obj, "status", "containerStatuses", default=[])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{len(containers)}"


def _pod_status(obj: Obj) -> str:
    if _get(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    for status in _get(obj, "status", "containerStatuses", default=[]):
        waiting = _get(status, "state", "waiting", "reason")
        if waiting:
            return str(waiting)
        terminated = _get(status, "state", "terminated", "reason")
        if terminated and _get(obj, "status", "phase") not in ("Succeeded", "Failed"):
            return str(terminated)
    if _get(obj, "status", "phase") == "Succeeded":
        return "Completed"
    if _get(obj, "status", "phase") == "Failed":
        return str(_get(obj, "status", "reason", default="Error"))
    return str(_get(obj, "status", "phase", default="Pending"))


def _restarts(obj: Obj) -> int:
    return sum(int(s.get("restartCount", 0)) for s in _get(obj, "status", "containerStatuses", default=[]))


def _node_status(obj: Obj) -> str:
    ready = next((c for c in _get(obj, "status", "conditions", default=[]) if c.get("type") == "Ready"), None)
    status = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    if _get(obj, "spec", "unschedulable"):
        status += ",SchedulingDisabled"
    return status


def _roles(obj: Obj) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = [k[len(prefix) :] for k in _get(obj, "metadata", "labels", default={}) if k.startswith(prefix)]
    return ",".join(sorted(roles)) or "<none>"


def _ports(obj: Obj) -> str:
    out = []
    for port in _get(obj, "spec", "ports", default=[]):
        text = f"{port.get('port')}"
        if port.get("nodePort"):
            text += f":{port['nodePort']}"
        out.append(f"{text}/{port.get('protocol', 'TCP')}")
    return ",".join(out) or "<none>"


def _job_status(obj: Obj) -> str:
    for cond in _get(obj, "status", "conditions", default=[]):
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed", "Suspended"):
            return str(cond["type"])
    return "Running"


def _selector(obj: Obj) -> str:
    sel = _get(obj, "spec", "selector", default={})
    labels = sel.get("matchLabels", sel) if isinstance(sel, dict) else {}
    return ",".join(f"{k}={v}" for k, v in labels.items() if isinstance(v, str)) or "<none>"


NAME: Column = ("Name", "string", "Name must be unique within a namespace.", lambda o: o["metadata"]["name"])
AGE: Column = ("Age", "string", "CreationTimestamp of the object.", _age)


def _since(stamp: Any) -> str:
    if not isinstance(stamp, str) or not stamp:
        return "<unknown>"
    try:
        when = datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return "<unknown>"
    return human_duration(time.time() - when)


def _event_object(obj: Obj) -> str:
    ref = obj.get("involvedObject") or obj.get("regarding") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _endpoints(obj: Obj) -> str:
    addresses = [
        f"{a.get('ip')}:{p.get('port')}"
        for subset in obj.get("subsets") or []
        for a in subset.get("addresses") or []
        for p in subset.get("ports") or [{}]
    ]
    if not addresses:
        return "<none>"
    return ",".join(addresses[:3]) + (f" + {len(addresses) - 3} more..." if len(addresses) > 3 else "")

COLUMNS: dict[tuple[str, str], list[Column]] = {
    ("", "pods"): [
        NAME,
        ("Ready", "string", "Ready containers", _pod_ready),
        ("Status", "string", "Pod status", _pod_status),
        ("Restarts", "string", "Container restarts", lambda o: str(_restarts(o))),
        AGE,
        ("IP", "string", "Pod IP", lambda o: _get(o, "status", "podIP", default="<none>")),
        ("Node", "string", "Node", lambda o: _get(o, "spec", "nodeName", default="<none>")),
    ],
    ("", "nodes"): [
        NAME,
        ("Status", "string", "Node status", _node_status),
        ("Roles", "string", "Node roles", _roles),
        AGE,
        ("Version", "string", "Kubelet version", lambda o: _get(o, "status", "nodeInfo", "kubeletVersion", default="")),
    ],
    ("", "namespaces"): [NAME, ("Status", "string", "Phase", lambda o: _get(o, "status", "phase", default="")), AGE],
    ("", "services"): [
        NAME,
        ("Type", "string", "Service type", lambda o: _get(o, "spec", "type", default="ClusterIP")),
        ("Cluster-IP", "string", "Cluster IP", lambda o: _get(o, "spec", "clusterIP", default="<none>")),
        ("External-IP", "string", "External IP", lambda o: "<none>"),
        ("Port(s)", "string", "Ports", _ports),
        AGE,
        ("Selector", "string", "Selector", lambda o: _selector({"spec": {"selector": _get(o, "spec", "selector")}})),
    ],
    ("apps", "deployments"): [
        NAME,
        ("Ready", "string", "Ready replicas", lambda o: f"{_get(o, 'status', 'readyReplicas', default=0)}/"
         f"{_get(o, 'spec', 'replicas', default=1)}"),
        ("Up-to-date", "integer", "Updated replicas", lambda o: _get(o, "status", "updatedReplicas", default=0)),
        ("Available", "integer", "Available replicas", lambda o: _get(o, "status", "availableReplicas", default=0)),
        AGE,
    ],
    ("apps", "replicasets"): [
        NAME,
        ("Desired", "integer", "Desired", lambda o: _get(o, "spec", "replicas", default=1)),
        ("Current", "integer", "Current", lambda o: _get(o, "status", "replicas", default=0)),
        ("Ready", "integer", "Ready", lambda o: _get(o, "status", "readyReplicas", default=0)),
        AGE,
    ],
    ("apps", "daemonsets"): [
        NAME,
        ("Desired", "integer", "Desired", lambda o: _get(o, "status", "desiredNumberScheduled", default=0)),
        ("Current", "integer", "Current", lambda o: _get(o, "status", "currentNumberScheduled", default=0)),
        ("Ready", "integer", "Ready", lambda o: _get(o, "status", "numberReady", default=0)),
        AGE,
    ],
    ("batch", "jobs"): [
        NAME,
        ("Status", "string", "Job status", _job_status),
        ("Completions", "string", "Completions", lambda o: f"{_get(o, 'status', 'succeeded', default=0)}/"
         f"{_get(o, 'spec', 'completions', default=1)}"),
        AGE,
    ],
    ("", "persistentvolumeclaims"): [
        NAME,
        ("Status", "string", "Phase", lambda o: _get(o, "status", "phase", default="Pending")),
        ("Volume", "string", "Bound volume", lambda o: _get(o, "spec", "volumeName", default="")),
        AGE,
    ],
    ("", "persistentvolumes"): [
        NAME,
        ("Capacity", "string", "Capacity", lambda o: _get(o, "spec", "capacity", "storage", default="")),
        ("Status", "string", "Phase", lambda o: _get(o, "status", "phase", default="Available")),
        AGE,
    ],
    ("", "configmaps"): [NAME, ("Data", "integer", "Entries", lambda o: len(o.get("data") or {})), AGE],
    ("", "events"): [
        ("Last Seen", "string", "Time of the last occurrence",
         lambda o: _since(o.get("lastTimestamp") or o.get("eventTime") or _get(o, "metadata", "creationTimestamp"))),
        ("Type", "string", "Event type", lambda o: o.get("type", "")),
        ("Reason", "string", "Reason", lambda o: o.get("reason", "")),
        ("Object", "string", "The object the event is about", _event_object),
        ("Message", "string", "Message", lambda o: o.get("message") or o.get("note", "")),
    ],
    ("", "endpoints"): [NAME, ("Endpoints", "string", "Ready addresses", _endpoints), AGE],
    ("", "serviceaccounts"): [NAME, ("Secrets", "integer", "Secrets", lambda o: len(o.get("secrets") or [])), AGE],
    ("apps", "statefulsets"): [
        NAME,
        ("Ready", "string", "Ready replicas", lambda o: f"{_get(o, 'status', 'readyReplicas', default=0)}/"
         f"{_get(o, 'spec', 'replicas', default=1)}"),
        AGE,
    ],
    ("batch", "cronjobs"): [
        NAME,
        ("Schedule", "string", "Schedule", lambda o: _get(o, "spec", "schedule", default="")),
        ("Suspend", "boolean", "Suspended", lambda o: bool(_get(o, "spec", "suspend", default=False))),
        ("Active", "integer", "Active jobs", lambda o: len(_get(o, "status", "active", default=[]))),
        ("Last Schedule", "string", "Last schedule", lambda o: _since(_get(o, "status", "lastScheduleTime"))),
        AGE,
    ],
    ("storage.k8s.io", "storageclasses"): [
        NAME,
        ("Provisioner", "string", "Provisioner", lambda o: o.get("provisioner", "")),
        ("ReclaimPolicy", "string", "Reclaim policy", lambda o: o.get("reclaimPolicy", "Delete")),
        ("VolumeBindingMode", "string", "Binding mode", lambda o: o.get("volumeBindingMode", "Immediate")),
        AGE,
    ],
    ("apiextensions.k8s.io", "customresourcedefinitions"): [
        NAME,
        ("Created At", "date", "Creation time", lambda o: _get(o, "metadata", "creationTimestamp", default="")),
    ],
    ("", "secrets"): [
        NAME,
        ("Type", "string", "Secret type", lambda o: o.get("type", "Opaque")),
        ("Data", "integer", "Entries", lambda o: len(o.get("data") or {})),
        AGE,
    ],
}


_TOKEN = re.compile(r"\.([A-Za-z0-9_-]+)|\[([^\]]*)\]")
_FILTER = re.compile(r"^\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*['\"]([^'\"]*)['\"]\)$")


def jsonpath(obj: Any, path: str) -> Any:
    """The value of a printer-column JSONPath: fields, [n], [-1:], [*] and [?(@.k=="v")] filters.
    Several matches join with commas, as kubectl prints them."""
    values = [obj]
    text = path if path.startswith((".", "[")) else "." + path
    for match in _TOKEN.finditer(text):
        field, index = match.group(1), match.group(2)
        out: list[Any] = []
        for value in values:
            if field is not None:
                if isinstance(value, dict) and field in value:
                    out.append(value[field])
            elif isinstance(value, list):
                filt = _FILTER.match(index.strip())
                if index.strip() == "*":
                    out.extend(value)
                elif filt is not None:
                    out.extend(v for v in value if str(_get(v, *filt.group(1).split("."), default="")) ==
                               filt.group(2))
                elif ":" in index:
                    start, _, stop = index.partition(":")
                    out.extend(value[int(start) if start else None : int(stop) if stop else None])
                else:
                    with contextlib.suppress(ValueError, IndexError):
                        out.append(value[int(index)])
        values = out
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return ",".join(str(v) for v in values)


def _jsonpath_column(spec: Obj) -> Column:
    path = str(spec.get("jsonPath", ""))

    def value(obj: Obj) -> Any:
        found = jsonpath(obj, path)
        if spec.get("type") == "date" and isinstance(found, str):
            created = datetime.strptime(found, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
            return human_duration(time.time() - created)
        return found

    return (str(spec.get("name", "")), str(spec.get("type", "string")), str(spec.get("description", "")), value)


def columns_for(rtype: ResourceType, printer_columns: list[Obj] | None = None) -> list[Column]:
    """The columns of a type: its own, a CRD's additionalPrinterColumns, or Name + Age."""
    if printer_columns:
        return [NAME, *[_jsonpath_column(c) for c in printer_columns]]
    return COLUMNS.get(rtype.key, [NAME, AGE])


def _partial(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def to_table(
    rtype: ResourceType,
    items: list[Obj],
    list_meta: Obj,
    include_object: str = "Metadata",
    printer_columns: list[Obj] | None = None,
) -> Obj:
    """A Table of `items` with row objects as `include_object` asks (None, Metadata, Object)."""
    cols = columns_for(rtype, printer_columns)
    rows = []
    for obj in items:
        row: Obj = {"cells": [_cell(c[3], obj) for c in cols]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = _partial(obj)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": [
            {"name": n, "type": t, "format": "name" if n == "Name" else "", "description": d,
             "priority": 1 if n in ("IP", "Node", "Selector") else 0}
            for n, t, d, _ in cols
        ],
        "rows": rows,
    }


def _cell(fn: Callable[[Obj], Any], obj: Obj) -> Any:
    try:
        value = fn(obj)
    except (KeyError, TypeError, ValueError):
        return "<unknown>"
    return "<none>" if value is None else value
