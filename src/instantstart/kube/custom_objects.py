"""The gateway's calls on custom objects (group/version/plural), namespaced or cluster-wide, as the client sends
them; objects come back as wire dicts."""

from __future__ import annotations

from typing import Any, cast

from instantstart.kube import k8s
from instantstart.kube.gateway import Api


def list_custom(api: Api, group: str, version: str, plural: str, namespace: str | None, **query: Any
                ) -> dict[str, Any]:
    """GET the custom objects of `namespace` (every namespace, or cluster-scoped ones, when None)."""
    custom = k8s.CustomObjectsApi(api)
    if namespace is None:
        return cast("dict[str, Any]", custom.list_cluster_custom_object(group, version, plural, **query))
    return cast("dict[str, Any]", custom.list_namespaced_custom_object(group, version, namespace, plural, **query))


def get_custom(api: Api, group: str, version: str, namespace: str, plural: str, name: str, **options: Any
               ) -> dict[str, Any]:
    """GET the custom object `namespace/name`."""
    custom = k8s.CustomObjectsApi(api)
    return cast("dict[str, Any]", custom.get_namespaced_custom_object(group, version, namespace, plural, name,
                                                                      **options))


def create_custom(api: Api, group: str, version: str, namespace: str, plural: str, body: dict[str, Any],
                  **options: Any) -> dict[str, Any]:
    """POST a custom object into `namespace`."""
    custom = k8s.CustomObjectsApi(api)
    return cast("dict[str, Any]", custom.create_namespaced_custom_object(group, version, namespace, plural, body,
                                                                         **options))


def delete_custom(api: Api, group: str, version: str, namespace: str, plural: str, name: str, **options: Any
                  ) -> Any:
    """DELETE the custom object `namespace/name`."""
    return k8s.CustomObjectsApi(api).delete_namespaced_custom_object(group, version, namespace, plural, name,
                                                                     **options)
