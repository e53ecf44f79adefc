"""The Priority admission plugin: a new pod's priorityClassName resolves to spec.priority and
spec.preemptionPolicy (no name: the globalDefault class, else priority 0); an unknown class is forbidden."""

from __future__ import annotations

from typing import Any

from hyperpod_twin.kube.status import ApiError
from hyperpod_twin.kube.store import ObjectStore

Obj = dict[str, Any]
PRIORITY_CLASSES = ("scheduling.k8s.io", "priorityclasses")
PREEMPT = "PreemptLowerPriority"
# What every cluster has (kube-apiserver creates them at start).
SYSTEM_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def system_classes() -> list[Obj]:
    """The built-in PriorityClass objects."""
    described = {
        "system-node-critical": "Used for system critical pods that must not be moved from their current node.",
        "system-cluster-critical": "Used for system critical pods that must run in the cluster, but can be moved "
        "to another node if necessary.",
    }
    return [
        {"metadata": {"name": name}, "value": value, "globalDefault": False, "preemptionPolicy": PREEMPT,
         "description": described[name]}
        for name, value in SYSTEM_CLASSES.items()
    ]


def _classes(store: ObjectStore) -> list[Obj]:
    rtype = store.find_type(*PRIORITY_CLASSES)
    if rtype is None:
        return []
    items, _ = store.list(rtype, None, None)
    return list(items)


def admit_priority(store: ObjectStore, pod: Obj) -> None:
    """Set the pod's priority and preemptionPolicy from its PriorityClass (403 Forbidden when it names none that
    exists, or gives a priority that differs from the class's)."""
    spec = pod.setdefault("spec", {})
    name = spec.get("priorityClassName")
    classes = _classes(store)
    found: Obj | None
    if name:
        found = next((c for c in classes if c["metadata"]["name"] == name), None)
        if found is None:
            raise ApiError(403, f'pods "{pod["metadata"].get("name") or pod["metadata"].get("generateName", "")}" '
                           f"is forbidden: no PriorityClass with name {name} was found", "Forbidden")
    else:
        found = next((c for c in classes if c.get("globalDefault")), None)
        if found is not None:
            spec["priorityClassName"] = found["metadata"]["name"]
    value = int(found.get("value", 0)) if found is not None else 0
    given = spec.get("priority")
    if given is not None and int(given) != value:
        raise ApiError(403, f'pods "{pod["metadata"].get("name", "")}" is forbidden: the integer value of priority '
                       f"({given}) must not be provided in pod spec; priority admission controller computed {value} "
                       "from the given PriorityClass name", "Forbidden")
    spec["priority"] = value
    spec.setdefault("preemptionPolicy", (found or {}).get("preemptionPolicy") or PREEMPT)

