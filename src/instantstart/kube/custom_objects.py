"""The gateway's calls on custom objects (group/version/plural), namespaced or cluster-wide, as the client sends
them; objects come back as wire dicts."""

from __future__ import annotations

from typing import Any, cast

from instantstart.kube import k8s
from instantstart.kube.gateway import Api
from instantstart.kube.wire import Obj, ObjList


def list_custom(api: Api, group: str, version: str, plural: str, namespace: str | None, **query: Any
                ) -> ObjList:
    """GET the custom objects of `namespace` (every namespace, or cluster-scoped ones, when None)."""
    custom = k8s.CustomObjectsApi(api)
    if namespace is None:
        return cast("Obj", custom.list_cluster_custom_object(group, version, plural, **query))
    return cast("Obj", custom.list_namespaced_custom_object(group, version, namespace, plural, **query))


def get_custom(api: Api, group: str, version: str, namespace: str, plural: str, name: str, **options: Any
               ) -> Obj:
    """GET the custom object `namespace/name`."""
    custom = k8s.CustomObjectsApi(api)
    return cast("Obj", custom.get_namespaced_custom_object(group, version, namespace, plural, name, **options))


def create_custom(api: Api, group: str, version: str, namespace: str, plural: str, body: dict[str, Any],
                  **options: Any) -> Obj:
    """POST a custom object into `namespace`."""
    custom = k8s.CustomObjectsApi(api)
    return cast("Obj", custom.create_namespaced_custom_object(group, version, namespace, plural, body, **options))


def delete_custom(api: Api, group: str, version: str, namespace: str, plural: str, name: str, **options: Any
                  ) -> Obj:
    """DELETE the custom object `namespace/name` (the answer: the object as deleted, or a Status)."""
    custom = k8s.CustomObjectsApi(api)
    return cast("Obj", custom.delete_namespaced_custom_object(group, version, namespace, plural, name, **options))
