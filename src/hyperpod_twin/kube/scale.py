"""The `scale` subresource: where a kind keeps its replica counts and selector, and the Scale view of it."""

from __future__ import annotations

from typing import Any

from hyperpod_twin.kube.controllers import ControlPlane
from hyperpod_twin.kube.store import ResourceType

Obj = dict[str, Any]


def scale_paths(control: ControlPlane, rtype: ResourceType) -> tuple[list[str], list[str], list[str]]:
    """Spec replicas, status replicas and label selector paths (a CRD's scale subresource, else apps/v1's)."""
    info = control.crds.get(rtype.key)
    if info and info.scale:

        def split(path: str) -> list[str]:
            return [p for p in str(path).lstrip(".").split(".") if p]

        return (
            split(info.scale.get("specReplicasPath", ".spec.replicas")),
            split(info.scale.get("statusReplicasPath", ".status.replicas")),
            split(info.scale.get("labelSelectorPath", "")),
        )
    return ["spec", "replicas"], ["status", "replicas"], ["status", "selector"]


def scale_of(control: ControlPlane, rtype: ResourceType, obj: Obj) -> Obj:
    """The autoscaling/v1 Scale of an object."""
    spec_path, status_path, selector_path = scale_paths(control, rtype)
    selector = dig(obj, selector_path) if selector_path else None
    if rtype.group == "apps":
        labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: v
            for k, v in obj["metadata"].items()
            if k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        },
        "spec": {"replicas": dig(obj, spec_path) or 0},
        "status": {"replicas": dig(obj, status_path) or 0, **({"selector": selector} if selector else {})},
    }


def dig(obj: Any, path: list[str]) -> Any:
    """The value at `path` in nested dicts, or None."""
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj
