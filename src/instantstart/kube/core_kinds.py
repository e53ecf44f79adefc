"""The gateway's calls on core and built-in kinds (Nodes, Pods and their logs, Services, Secrets, ServiceAccounts,
Namespaces, volumes and claims, Deployments, DaemonSets, Jobs, CRDs, CSI drivers): one function per request, the
request exactly as the client sends it, so services never name the client's API classes. Answers come back as the
API server's wire JSON (`wire.Obj`, camelCase keys), decoded straight from the response: the client's model
classes are never built, so a list of a thousand Pods costs one `json.loads`, not a tree of model objects."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from instantstart.kube import k8s
from instantstart.kube.gateway import Api
from instantstart.kube.wire import Obj, ObjList


def _wire(call: Callable[..., Any], *args: Any, **options: Any) -> Obj:
    """`call`'s answer as the API server sent it, JSON-decoded (errors still raise the client's ApiException)."""
    response = call(*args, _preload_content=False, **options)
    try:
        data = response.data
    finally:
        response.release_conn()
    value: Obj = json.loads(data) if data else {}
    return value


def list_nodes(api: Api, **query: Any) -> ObjList:
    """GET /api/v1/nodes."""
    return _wire(k8s.CoreV1Api(api).list_node, **query)


def read_node(api: Api, name: str, **options: Any) -> Obj:
    """GET the Node `name`."""
    return _wire(k8s.CoreV1Api(api).read_node, name, **options)


def list_pods(api: Api, namespace: str | None, **query: Any) -> ObjList:
    """GET the Pods of `namespace` (every namespace when None)."""
    core = k8s.CoreV1Api(api)
    if namespace is None:
        return _wire(core.list_pod_for_all_namespaces, **query)
    return _wire(core.list_namespaced_pod, namespace, **query)


def create_pod(api: Api, namespace: str, body: Any, **options: Any) -> Obj:
    """POST a Pod into `namespace`."""
    return _wire(k8s.CoreV1Api(api).create_namespaced_pod, namespace, body, **options)


def patch_pod(api: Api, name: str, namespace: str, body: Any, **options: Any) -> Obj:
    """PATCH the Pod `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).patch_namespaced_pod, name, namespace, body, **options)


def delete_pod(api: Api, name: str, namespace: str, **options: Any) -> Obj:
    """DELETE the Pod `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).delete_namespaced_pod, name, namespace, **options)


def delete_pods(api: Api, namespace: str, **query: Any) -> ObjList:
    """DELETE the Pods of `namespace` the selectors in `query` pick (one collection request)."""
    return _wire(k8s.CoreV1Api(api).delete_collection_namespaced_pod, namespace, **query)


def read_pod_log(api: Api, name: str, namespace: str, **query: Any) -> str:
    """GET the log of the Pod `namespace/name` (container, tail_lines, ... in `query`)."""
    return str(k8s.CoreV1Api(api).read_namespaced_pod_log(name, namespace, **query))


def list_services(api: Api, namespace: str | None, **query: Any) -> ObjList:
    """GET the Services of `namespace` (every namespace when None)."""
    core = k8s.CoreV1Api(api)
    if namespace is None:
        return _wire(core.list_service_for_all_namespaces, **query)
    return _wire(core.list_namespaced_service, namespace, **query)


def read_service(api: Api, name: str, namespace: str, **options: Any) -> Obj:
    """GET the Service `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).read_namespaced_service, name, namespace, **options)


def delete_service(api: Api, name: str, namespace: str, **options: Any) -> Obj:
    """DELETE the Service `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).delete_namespaced_service, name, namespace, **options)


def list_secrets(api: Api, namespace: str, **query: Any) -> ObjList:
    """GET the Secrets of `namespace`."""
    return _wire(k8s.CoreV1Api(api).list_namespaced_secret, namespace, **query)


def read_secret(api: Api, name: str, namespace: str, **options: Any) -> Obj:
    """GET the Secret `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).read_namespaced_secret, name, namespace, **options)


def read_service_account(api: Api, name: str, namespace: str, **options: Any) -> Obj:
    """GET the ServiceAccount `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).read_namespaced_service_account, name, namespace, **options)


def create_service_account(api: Api, namespace: str, body: Any, **options: Any) -> Obj:
    """POST a ServiceAccount into `namespace`."""
    return _wire(k8s.CoreV1Api(api).create_namespaced_service_account, namespace, body, **options)


def patch_service_account(api: Api, name: str, namespace: str, body: Any, **options: Any) -> Obj:
    """PATCH the ServiceAccount `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).patch_namespaced_service_account, name, namespace, body, **options)


def delete_service_account(api: Api, name: str, namespace: str, **options: Any) -> Obj:
    """DELETE the ServiceAccount `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).delete_namespaced_service_account, name, namespace, **options)


def read_namespace(api: Api, name: str, **options: Any) -> Obj:
    """GET the Namespace `name`."""
    return _wire(k8s.CoreV1Api(api).read_namespace, name, **options)


def list_volumes(api: Api, **query: Any) -> ObjList:
    """GET /api/v1/persistentvolumes."""
    return _wire(k8s.CoreV1Api(api).list_persistent_volume, **query)


def read_volume(api: Api, name: str, **options: Any) -> Obj:
    """GET the PersistentVolume `name`."""
    return _wire(k8s.CoreV1Api(api).read_persistent_volume, name, **options)


def patch_volume(api: Api, name: str, body: Any, **options: Any) -> Obj:
    """PATCH the PersistentVolume `name`."""
    return _wire(k8s.CoreV1Api(api).patch_persistent_volume, name, body, **options)


def delete_volume(api: Api, name: str, **options: Any) -> Obj:
    """DELETE the PersistentVolume `name`."""
    return _wire(k8s.CoreV1Api(api).delete_persistent_volume, name, **options)


def list_claims(api: Api, **query: Any) -> ObjList:
    """GET the PersistentVolumeClaims of every namespace."""
    return _wire(k8s.CoreV1Api(api).list_persistent_volume_claim_for_all_namespaces, **query)


def read_claim(api: Api, name: str, namespace: str, **options: Any) -> Obj:
    """GET the PersistentVolumeClaim `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).read_namespaced_persistent_volume_claim, name, namespace, **options)


def patch_claim(api: Api, name: str, namespace: str, body: Any, **options: Any) -> Obj:
    """PATCH the PersistentVolumeClaim `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).patch_namespaced_persistent_volume_claim, name, namespace, body, **options)


def delete_claim(api: Api, name: str, namespace: str, **options: Any) -> Obj:
    """DELETE the PersistentVolumeClaim `namespace/name`."""
    return _wire(k8s.CoreV1Api(api).delete_namespaced_persistent_volume_claim, name, namespace, **options)


def list_deployments(api: Api, namespace: str | None, **query: Any) -> ObjList:
    """GET the Deployments of `namespace` (every namespace when None)."""
    apps = k8s.AppsV1Api(api)
    if namespace is None:
        return _wire(apps.list_deployment_for_all_namespaces, **query)
    return _wire(apps.list_namespaced_deployment, namespace, **query)


def read_deployment(api: Api, name: str, namespace: str, **options: Any) -> Obj:
    """GET the Deployment `namespace/name`."""
    return _wire(k8s.AppsV1Api(api).read_namespaced_deployment, name, namespace, **options)


def patch_deployment(api: Api, name: str, namespace: str, body: Any, **options: Any) -> Obj:
    """PATCH the Deployment `namespace/name`."""
    return _wire(k8s.AppsV1Api(api).patch_namespaced_deployment, name, namespace, body, **options)


def read_daemon_set(api: Api, name: str, namespace: str, **options: Any) -> Obj:
    """GET the DaemonSet `namespace/name`."""
    return _wire(k8s.AppsV1Api(api).read_namespaced_daemon_set, name, namespace, **options)


def list_jobs(api: Api, **query: Any) -> ObjList:
    """GET the batch Jobs of every namespace."""
    return _wire(k8s.BatchV1Api(api).list_job_for_all_namespaces, **query)


def list_crds(api: Api, **query: Any) -> ObjList:
    """GET the CustomResourceDefinitions."""
    return _wire(k8s.ApiextensionsV1Api(api).list_custom_resource_definition, **query)


def read_crd(api: Api, name: str, **options: Any) -> Obj:
    """GET the CustomResourceDefinition `name` (`<plural>.<group>`)."""
    return _wire(k8s.ApiextensionsV1Api(api).read_custom_resource_definition, name, **options)


def read_csi_driver(api: Api, name: str, **options: Any) -> Obj:
    """GET the CSIDriver `name`."""
    return _wire(k8s.StorageV1Api(api).read_csi_driver, name, **options)

