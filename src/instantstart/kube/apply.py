"""Generic Kubernetes object access for manifests: server-side apply, read, delete (any kind)."""

from __future__ import annotations

from typing import Any

from instantstart.kube import k8s

FIELD_MANAGER = "instantstart"


def _dynamic() -> Any:
    """`kubernetes.dynamic`, imported on first use (as the client itself, see `kube.k8s`)."""
    return k8s.load("kubernetes.dynamic")


def _client(api: k8s.ApiClient) -> Any:
    # The dynamic client is untyped; everything it returns is treated as Any and converted at the edge.
    return _dynamic().DynamicClient(api)


def _resource(api: k8s.ApiClient, body: dict[str, Any]) -> Any:
    return _client(api).resources.get(api_version=body["apiVersion"], kind=body["kind"])


def read_object(api: k8s.ApiClient, body: dict[str, Any]) -> dict[str, Any] | None:
    """The live object named by `body` (apiVersion, kind, metadata.name/namespace), or None."""
    client = _client(api)
    resource = _resource(api, body)
    meta = body["metadata"]
    try:
        found = client.get(resource, name=meta["name"], namespace=meta.get("namespace"))
    except _dynamic().exceptions.NotFoundError:
        return None
    value: dict[str, Any] = found.to_dict()
    return value


def apply_object(api: k8s.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    """Server-side apply `body` with field manager instantstart (conflicts forced: we own these fields)."""
    client = _client(api)
    meta = body["metadata"]
    applied = client.server_side_apply(
        _resource(api, body),
        body=body,
        name=meta["name"],
        namespace=meta.get("namespace"),
        field_manager=FIELD_MANAGER,
        force_conflicts=True,
    )
    value: dict[str, Any] = applied.to_dict()
    return value


def delete_object(api: k8s.ApiClient, body: dict[str, Any]) -> bool:
    """Delete the object named by `body`; False when it was already gone."""
    client = _client(api)
    meta = body["metadata"]
    try:
        client.delete(_resource(api, body), name=meta["name"], namespace=meta.get("namespace"))
    except _dynamic().exceptions.NotFoundError:
        return False
    return True


def drifted(live: dict[str, Any], desired: dict[str, Any]) -> list[str]:
    """Top-level fields (and labels/annotations) where the live object differs from the desired one."""
    problems = []
    for key, value in desired.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata":
            for sub in ("labels", "annotations"):
                want = value.get(sub) or {}
                have = (live.get("metadata") or {}).get(sub) or {}
                if any(have.get(k) != v for k, v in want.items()):
                    problems.append(f"metadata.{sub}")
            continue
        if live.get(key) != value:
            problems.append(key)
    return problems
