"""Kubernetes reads services make: a Node, the server version, cluster-scoped custom objects and their CRDs."""

from __future__ import annotations

from typing import Any, cast

from instantstart.kube import core_kinds, k8s


def cluster_version(api: k8s.ApiClient) -> tuple[str, int]:
    """(the API server's git version, how many namespaces it lists, up to 50) — a reachability probe."""
    names = k8s.CoreV1Api(api).list_namespace(limit=50).items
    version = k8s.VersionApi(api).get_code().git_version
    return str(version), len(names)


def read_node(api: k8s.ApiClient, name: str) -> dict[str, Any] | None:
    """The Node `name` in its wire (camelCase) form, or None when the API server has none."""
    try:
        return core_kinds.read_node(api, name)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def crds_served(api: k8s.ApiClient, names: tuple[str, ...]) -> bool:
    """Whether every CustomResourceDefinition named (`<plural>.<group>`) is installed."""
    ext = k8s.ApiextensionsV1Api(api)
    for crd in names:
        try:
            ext.read_custom_resource_definition(crd)
        except k8s.ApiException as exc:
            if exc.status == 404:
                return False
            raise
    return True


def read_cluster_object(api: k8s.ApiClient, group: str, version: str, plural: str, name: str) -> dict[str, Any] | None:
    """A cluster-scoped custom object, or None when absent."""
    try:
        found = k8s.CustomObjectsApi(api).get_cluster_custom_object(group, version, plural, name)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return cast("dict[str, Any]", found)


def ensure_cluster_object(
    api: k8s.ApiClient, group: str, version: str, plural: str, body: dict[str, Any]
) -> dict[str, Any]:
    """Look first; create the cluster-scoped object, or replace it when its spec differs."""
    custom = k8s.CustomObjectsApi(api)
    name = body["metadata"]["name"]
    found = read_cluster_object(api, group, version, plural, name)
    if found is None:
        return cast("dict[str, Any]", custom.create_cluster_custom_object(group, version, plural, body))
    if found.get("spec") == body["spec"]:
        return found
    resource_version = (found.get("metadata") or {}).get("resourceVersion")
    if resource_version:
        body = {**body, "metadata": {**body["metadata"], "resourceVersion": resource_version}}
    return cast("dict[str, Any]", custom.replace_cluster_custom_object(group, version, plural, name, body))


def delete_cluster_object(api: k8s.ApiClient, group: str, version: str, plural: str, name: str) -> None:
    """Delete a cluster-scoped custom object; absent is fine."""
    try:
        k8s.CustomObjectsApi(api).delete_cluster_custom_object(group, version, plural, name)
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise
