"""Generic Kubernetes object access for manifests: server-side apply, read, delete (any kind)."""

from __future__ import annotations

from typing import Any

from instantstart.errors import Conflict
from instantstart.kube import k8s
from instantstart.manifests.labels import LABEL_MANAGED, MANAGER

FIELD_MANAGER = MANAGER


def _dynamic() -> Any:
    """`kubernetes.dynamic`, imported on first use (as the client itself, see `kube.k8s`)."""
    return k8s.load("kubernetes.dynamic")


def _client(api: k8s.ApiClient) -> Any:
    # The dynamic client is untyped; everything it returns is treated as Any and converted at the edge.
    return _dynamic().DynamicClient(api)


def _resource(api: k8s.ApiClient, body: dict[str, Any], client: Any = None) -> Any:
    return (client or _client(api)).resources.get(api_version=body["apiVersion"], kind=body["kind"])


def _read(client: Any, resource: Any, body: dict[str, Any]) -> dict[str, Any] | None:
    meta = body["metadata"]
    try:
        found = client.get(resource, name=meta["name"], namespace=meta.get("namespace"))
    except _dynamic().exceptions.NotFoundError:
        return None
    value: dict[str, Any] = found.to_dict()
    return value


def read_object(api: k8s.ApiClient, body: dict[str, Any]) -> dict[str, Any] | None:
    """The live object named by `body` (apiVersion, kind, metadata.name/namespace), or None."""
    client = _client(api)
    return _read(client, _resource(api, body, client), body)


def created_by_us(live: dict[str, Any]) -> bool:
    """Whether a live object is InstantStart's: it carries our managed-by label, or our field manager has
    applied to it before (managedFields)."""
    meta = live.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_MANAGED) == FIELD_MANAGER:
        return True
    return any((entry or {}).get("manager") == FIELD_MANAGER for entry in meta.get("managedFields") or [])


def refuse_takeover(live: dict[str, Any]) -> None:
    """Conflict naming who manages and owns `live`, an object InstantStart did not create."""
    meta = live.get("metadata") or {}
    managers = sorted({str(e.get("manager")) for e in meta.get("managedFields") or [] if (e or {}).get("manager")})
    owners = [f"{r.get('kind')}/{r.get('name')}" for r in meta.get("ownerReferences") or []]
    label = (meta.get("labels") or {}).get(LABEL_MANAGED)
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    what = f"{live.get('kind')} {where}{meta.get('name')}"
    who = "; ".join(part for part in (
        f"managed by {', '.join(managers)}" if managers else "",
        f"owned by {', '.join(owners)}" if owners else "",
        f"labelled {LABEL_MANAGED}={label}" if label else "",
    ) if part) or "no managers recorded"
    raise Conflict(
        f"{what} already exists and InstantStart did not create it ({who}); it is left unchanged.",
        hint=f"Choose another name, or delete {what} if nothing uses it. To hand it to InstantStart on purpose,"
        f" label it {LABEL_MANAGED}={FIELD_MANAGER}.",
        details={"object": what, "managers": managers, "ownerReferences": owners},
    )


def apply_object(api: k8s.ApiClient, body: dict[str, Any], *, adopt: bool = False) -> dict[str, Any]:
    """Server-side apply `body` with field manager instantstart (conflicts forced: we own these fields). An
    existing object InstantStart did not create (`created_by_us`) is refused with Conflict naming its owner, unless
    the call site adopts it explicitly (`adopt=True`)."""
    client = _client(api)
    resource = _resource(api, body, client)
    if not adopt:
        live = _read(client, resource, body)
        if live is not None and not created_by_us(live):
            refuse_takeover(live)
    meta = body["metadata"]
    applied = client.server_side_apply(
        resource,
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
