"""Watch bookmarks and timeouts, selector transitions, proxies via Endpoints and to pods, Tables."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import kubernetes
import pytest
from kubernetes.client import ApiException

from hyperpod_twin.kube.runtime import ProxyResponse
from tests.support.twin_kube import Cluster


@pytest.fixture
def ns(cluster: Cluster) -> Iterator[str]:
    name = "s-" + uuid.uuid4().hex[:8]
    kubernetes.client.CoreV1Api(cluster.api).create_namespace({"metadata": {"name": name}})
    yield name
    kubernetes.client.CoreV1Api(cluster.api).delete_namespace(name)


def test_bookmarks_and_timeout(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    cluster.server.bookmark_interval = 0.2
    try:
        response = cluster.raw("GET", f"/api/v1/namespaces/{ns}/configmaps",
                               [("watch", "1"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", "1")])
        response.read()
    finally:
        cluster.server.bookmark_interval = 5.0
    events = [json.loads(line) for line in response.data.decode().splitlines()]
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "a"
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and bookmarks[0]["object"]["metadata"]["resourceVersion"]
    assert bookmarks[0]["object"]["kind"] == "ConfigMap"


def test_watch_list_initial_events(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "one"}})
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    response = cluster.raw("GET", f"/api/v1/namespaces/{ns}/configmaps", [
        ("watch", "1"), ("sendInitialEvents", "true"), ("allowWatchBookmarks", "true"),
        ("resourceVersionMatch", "NotOlderThan"), ("resourceVersion", rv), ("timeoutSeconds", "1")])
    response.read()
    events = [json.loads(line) for line in response.data.decode().splitlines()]
    assert [e["type"] for e in events[:2]] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    bad = cluster.raw("GET", f"/api/v1/namespaces/{ns}/configmaps", [("watch", "1"), ("sendInitialEvents", "true")])
    assert bad.status == 422


def test_objects_leaving_a_selector_are_deleted_from_the_watch(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "m", "labels": {"pick": "yes"}}})
    core.patch_namespaced_config_map("m", ns, {"metadata": {"labels": {"pick": "no"}}})
    core.patch_namespaced_config_map("m", ns, {"metadata": {"labels": {"pick": "yes"}}})
    response = cluster.raw("GET", f"/api/v1/namespaces/{ns}/configmaps",
                           [("watch", "1"), ("resourceVersion", rv), ("labelSelector", "pick=yes"),
                            ("timeoutSeconds", "1")])
    response.read()
    kinds = [json.loads(line)["type"] for line in response.data.decode().splitlines()]
    assert kinds == ["ADDED", "DELETED", "ADDED"]


def test_resumed_watch_reports_an_object_leaving_the_selection(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "m", "labels": {"pick": "yes"}}})
    rv = core.list_namespaced_config_map(ns, label_selector="pick=yes").metadata.resource_version
    core.patch_namespaced_config_map("m", ns, {"metadata": {"labels": {"pick": "no"}}})
    response = cluster.raw("GET", f"/api/v1/namespaces/{ns}/configmaps",
                           [("watch", "1"), ("resourceVersion", rv), ("labelSelector", "pick=yes"),
                            ("timeoutSeconds", "1")])
    response.read()
    assert [json.loads(line)["type"] for line in response.data.decode().splitlines()] == ["DELETED"]


def test_service_proxy_uses_endpoints_and_pod_proxy(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespaced_service(ns, {"metadata": {"name": "api"}, "spec": {
        "ports": [{"name": "web", "port": 8080, "targetPort": 9000}]}})  # no selector: Endpoints decide
    core.create_namespaced_endpoints(ns, {"metadata": {"name": "api"}, "subsets": [{
        "addresses": [{"ip": "10.1.0.5", "targetRef": {"kind": "Pod", "name": "api-0", "namespace": ns}}],
        "ports": [{"name": "web", "port": 9000}]}]})

    def handler(method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> ProxyResponse:
        return ProxyResponse(200, f"{method} {path}?{query}".encode(), {"Content-Type": "text/plain"})

    cluster.runtime.pod_http.register(ns, "api-0", 9000, handler)
    response = cluster.raw("GET", f"/api/v1/namespaces/{ns}/services/api:web/proxy/health", [("deep", "1")])
    response.read()
    assert response.status == 200 and response.data == b"GET /health?deep=1"
    core.create_namespaced_pod(ns, {"metadata": {"name": "api-0"}, "spec": {"containers": [
        {"name": "c", "image": "x", "ports": [{"containerPort": 9000}]}]}})
    response = cluster.raw("GET", f"/api/v1/namespaces/{ns}/pods/api-0:9000/proxy/ready")
    response.read()
    assert response.data == b"GET /ready?"
    cluster.runtime.pod_http.unregister_pod(ns, "api-0")
    with pytest.raises(ApiException) as gone:
        core.connect_get_namespaced_service_proxy_with_path("api:web", ns, "health")
    assert gone.value.status == 503 and json.loads(gone.value.body)["reason"] == "ServiceUnavailable"


def test_apply_needs_a_field_manager_and_tables_render(cluster: Cluster, ns: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t", "namespace": ns}}
    response = cluster.raw("PATCH", f"/api/v1/namespaces/{ns}/configmaps/t", body=body,
                           content_type="application/apply-patch+yaml")
    assert response.status == 422
    response = cluster.raw("PATCH", f"/api/v1/namespaces/{ns}/configmaps/t", [("fieldManager", "me")], body=body,
                           content_type="application/apply-patch+yaml")
    assert response.status == 201
    method, url, headers, _, _ = cluster.api.param_serialize(
        "GET", f"/api/v1/namespaces/{ns}/configmaps",
        header_params={"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"}, auth_settings=["BearerToken"])
    table_response = cluster.api.call_api(method, url, header_params=headers)
    table_response.read()
    table = json.loads(table_response.data)
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert table["rows"][0]["cells"][:2] == ["t", 0]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
