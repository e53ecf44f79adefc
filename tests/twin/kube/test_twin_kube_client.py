"""Contract tests through the official kubernetes Python client: the calls the control plane makes."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from hyperpod_twin.kube.runtime import ProxyResponse
from tests.support.twin_kube import Cluster

Obj = dict[str, Any]


@pytest.fixture
def ns(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test."""
    name = "t-" + uuid.uuid4().hex[:8]
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as err:
        assert err.status == 404


def _deployment(name: str, replicas: int = 1) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "main", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"},
                                                                       {"name": "B", "value": "2"}]},
                        {"name": "side", "image": "busybox:1.36"},
                    ]
                },
            },
        },
    }


def test_discovery_version_and_openapi(cluster: Cluster) -> None:
    version = kubernetes.client.VersionApi(cluster.api).get_code()
    assert version.major == "1" and version.git_version.startswith("v1.")
    groups = {g.name for g in kubernetes.client.ApisApi(cluster.api).get_api_versions().groups}
    assert {"apps", "batch", "rbac.authorization.k8s.io", "apiextensions.k8s.io", "storage.k8s.io",
            "coordination.k8s.io"} <= groups
    core = {r.name for r in kubernetes.client.CoreV1Api(cluster.api).get_api_resources().resources}
    assert {"pods", "pods/log", "pods/status", "services/proxy", "namespaces", "nodes", "secrets",
            "configmaps", "events", "endpoints", "serviceaccounts", "persistentvolumes",
            "persistentvolumeclaims"} <= core
    apps = {r.name for r in kubernetes.client.AppsV1Api(cluster.api).get_api_resources().resources}
    assert {"deployments", "deployments/scale", "deployments/status", "replicasets", "daemonsets",
            "statefulsets"} <= apps
    response = cluster.raw("GET", "/openapi/v3")
    response.read()
    index = json.loads(response.data)
    assert "apis/apps/v1" in index["paths"]
    response = cluster.raw("GET", index["paths"]["apis/apps/v1"]["serverRelativeURL"].split("?")[0])
    response.read()
    doc = json.loads(response.data)
    patch_op = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch_op["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}


def test_initial_objects(cluster: Cluster) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    svc = core.read_namespaced_service("kubernetes", "default")
    assert svc.spec.ports[0].port == 443
    assert core.read_namespaced_service_account("default", "kube-system").metadata.uid


def test_crud_errors_and_optimistic_concurrency(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}, "data": {"k": "v"}})
    meta = created.metadata
    assert meta.uid and meta.resource_version and meta.creation_timestamp
    with pytest.raises(ApiException) as dup:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}})
    body = json.loads(dup.value.body)
    assert dup.value.status == 409 and body["reason"] == "AlreadyExists" and body["kind"] == "Status"
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("nope", ns)
    body = json.loads(missing.value.body)
    assert missing.value.status == 404 and body["details"] == {"name": "nope", "kind": "configmaps"}
    stale = created.to_dict()
    fresh = core.replace_namespaced_config_map("cfg", ns, {**stale, "data": {"k": "v2"}})
    assert int(fresh.metadata.resource_version) > int(meta.resource_version)
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_config_map("cfg", ns, {**stale, "data": {"k": "v3"}})
    assert conflict.value.status == 409 and json.loads(conflict.value.body)["reason"] == "Conflict"
    with pytest.raises(ApiException) as no_ns:
        core.create_namespaced_config_map("does-not-exist", {"metadata": {"name": "x"}})
    assert no_ns.value.status == 404
    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "Bad_Name"}})
    assert invalid.value.status == 422


def test_selectors_limit_and_continue(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    for i in range(5):
        core.create_namespaced_config_map(
            ns, {"metadata": {"name": f"cm-{i}", "labels": {"tier": "a" if i < 3 else "b", "n": str(i)}}}
        )
    names = lambda items: [i.metadata.name for i in items]  # noqa: E731
    assert names(core.list_namespaced_config_map(ns, label_selector="tier=a").items) == ["cm-0", "cm-1", "cm-2"]
    assert names(core.list_namespaced_config_map(ns, label_selector="tier!=a,n").items) == ["cm-3", "cm-4"]
    assert names(core.list_namespaced_config_map(ns, label_selector="n in (1,4)").items) == ["cm-1", "cm-4"]
    assert names(core.list_namespaced_config_map(ns, label_selector="n notin (0,1,2,3)").items) == ["cm-4"]
    assert names(core.list_namespaced_config_map(ns, field_selector="metadata.name=cm-2").items) == ["cm-2"]
    page = core.list_namespaced_config_map(ns, limit=2, label_selector="n")
    assert names(page.items) == ["cm-0", "cm-1"] and page.metadata.remaining_item_count == 3
    rest = core.list_namespaced_config_map(ns, limit=10, _continue=page.metadata._continue, label_selector="n")
    assert names(rest.items) == ["cm-2", "cm-3", "cm-4"] and not rest.metadata._continue
    with pytest.raises(ApiException) as bad:
        core.list_namespaced_config_map(ns, label_selector="a in (")
    assert bad.value.status == 400


def test_patches_keep_sibling_fields(cluster: Cluster, ns: str) -> None:
    apps = kubernetes.client.AppsV1Api(cluster.api)
    apps.create_namespaced_deployment(ns, _deployment("web"))
    # The client sends a dict body to patch_* as strategic merge patch.
    patched = apps.patch_namespaced_deployment(
        "web", ns, {"spec": {"template": {"spec": {"containers": [
            {"name": "main", "image": "nginx:1.26", "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]}
        ]}}}}
    )
    containers = {c.name: c for c in patched.spec.template.spec.containers}
    assert set(containers) == {"main", "side"}
    assert containers["main"].image == "nginx:1.26"
    assert [(e.name, e.value) for e in containers["main"].env] == [("A", "1"), ("B", "20"), ("C", "3")]
    assert patched.metadata.generation == 2
    # $patch: delete removes one list element by its merge key.
    patched = apps.patch_namespaced_deployment(
        "web", ns, {"spec": {"template": {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}}}
    )
    assert [c.name for c in patched.spec.template.spec.containers] == ["main"]
    # JSON patch and merge patch through the generic client.
    dyn = kubernetes.dynamic.DynamicClient(cluster.api)
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    out = deployments.patch(name="web", namespace=ns, body=[{"op": "replace", "path": "/spec/replicas", "value": 4}],
                            content_type="application/json-patch+json")
    assert out.spec.replicas == 4
    out = deployments.patch(name="web", namespace=ns, body={"metadata": {"labels": {"team": "ml"}}},
                            content_type="application/merge-patch+json")
    assert dict(out.metadata.labels) == {"app": "web", "team": "ml"}
    with pytest.raises(ApiException) as failed_test:
        deployments.patch(name="web", namespace=ns, body=[{"op": "test", "path": "/spec/replicas", "value": 9}],
                          content_type="application/json-patch+json")
    assert failed_test.value.status == 422


def test_server_side_apply_with_managers_and_conflicts(cluster: Cluster, ns: str) -> None:
    dyn = kubernetes.dynamic.DynamicClient(cluster.api)
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    body = _deployment("ssa", replicas=2)
    body["metadata"]["namespace"] = ns
    first = deployments.server_side_apply(body=body, name="ssa", namespace=ns, field_manager="instantstart")
    assert first.spec.replicas == 2
    assert first.metadata.managedFields[0]["manager"] == "instantstart"
    again = deployments.server_side_apply(body=body, name="ssa", namespace=ns, field_manager="instantstart")
    assert again.metadata.resourceVersion == first.metadata.resourceVersion  # no change, no write
    rival = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ssa", "namespace": ns},
             "spec": {"replicas": 5}}
    with pytest.raises(ApiException) as conflict:
        deployments.server_side_apply(body=rival, name="ssa", namespace=ns, field_manager="autoscaler")
    assert conflict.value.status == 409 and "spec.replicas" in conflict.value.body
    forced = deployments.server_side_apply(body=rival, name="ssa", namespace=ns, field_manager="autoscaler",
                                           force_conflicts=True)
    assert forced.spec.replicas == 5
    # The first manager drops a label it used to own: the server removes it.
    body["metadata"]["labels"] = {}
    body["spec"].pop("replicas")
    after = deployments.server_side_apply(body=body, name="ssa", namespace=ns, field_manager="instantstart")
    assert not (after.metadata.labels or {}).get("app")
    assert after.spec.replicas == 5
    # A plain write takes ownership of what it changes; applying another value then conflicts with it.
    kubernetes.client.AppsV1Api(cluster.api).patch_namespaced_deployment_scale(
        "ssa", ns, {"spec": {"replicas": 7}}, field_manager="keda")
    managers = {m["manager"]: m["operation"] for m in deployments.get(name="ssa", namespace=ns).metadata.managedFields}
    assert managers["keda"] == "Update"
    with pytest.raises(ApiException) as taken:
        deployments.server_side_apply(body=rival, name="ssa", namespace=ns, field_manager="autoscaler")
    assert taken.value.status == 409 and 'conflict with \\"keda\\"' in taken.value.body


def test_status_and_scale_subresources(cluster: Cluster, ns: str) -> None:
    apps = kubernetes.client.AppsV1Api(cluster.api)
    apps.create_namespaced_deployment(ns, _deployment("sub", replicas=1))
    # A status in the main resource is ignored; the status subresource changes only status.
    apps.patch_namespaced_deployment("sub", ns, {"status": {"readyReplicas": 7}, "spec": {"paused": True}})
    current = apps.read_namespaced_deployment("sub", ns)
    assert current.status is None or current.status.ready_replicas is None
    apps.patch_namespaced_deployment_status("sub", ns, {"status": {"readyReplicas": 1, "replicas": 1},
                                                        "spec": {"replicas": 9}})
    current = apps.read_namespaced_deployment("sub", ns)
    assert current.status.ready_replicas == 1 and current.spec.replicas == 1 and current.spec.paused
    scale = apps.read_namespaced_deployment_scale("sub", ns)
    assert scale.spec.replicas == 1 and scale.status.selector == "app=sub"
    apps.patch_namespaced_deployment_scale("sub", ns, {"spec": {"replicas": 3}})
    assert apps.read_namespaced_deployment("sub", ns).spec.replicas == 3


def test_watch_from_resource_version_and_gone(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    listed = core.list_namespaced_config_map(ns)
    start_rv = listed.metadata.resource_version
    seen: list[tuple[str, str, str]] = []
    ready = threading.Event()

    def watch() -> None:
        w = kubernetes.watch.Watch()
        ready.set()
        for event in w.stream(core.list_namespaced_config_map, ns, resource_version=start_rv,
                              label_selector="watched=yes", timeout_seconds=60):
            obj = event["object"]
            seen.append((event["type"], obj.metadata.name, (obj.data or {}).get("k", "")))
            if event["type"] == "DELETED":
                w.stop()

    thread = threading.Thread(target=watch)
    thread.start()
    assert ready.wait(60)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "w", "labels": {"watched": "yes"}}, "data": {"k": "1"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "ignored"}})
    core.patch_namespaced_config_map("w", ns, {"data": {"k": "2"}})
    core.delete_namespaced_config_map("w", ns)
    thread.join(60)
    assert seen == [("ADDED", "w", "1"), ("MODIFIED", "w", "2"), ("DELETED", "w", "2")]
    # Far too old a resourceVersion: the watch reports 410 Expired, which clients handle by relisting.
    cluster.runtime.store.history_limit = 5
    for i in range(8):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"churn-{i}"}})
    raw = cluster.raw("GET", f"/api/v1/namespaces/{ns}/configmaps",
                      [("watch", "true"), ("resourceVersion", "1"), ("timeoutSeconds", "2")])
    raw.read()
    first = json.loads(raw.data.decode().splitlines()[0])
    cluster.runtime.store.history_limit = 5000
    assert first["type"] == "ERROR" and first["object"]["code"] == 410


def test_pod_logs_follow_tail_and_errors(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]}})
    with pytest.raises(ApiException) as waiting:
        core.read_namespaced_pod_log("p", ns, container="a")
    assert waiting.value.status == 400 and "waiting to start" in waiting.value.body
    core.patch_namespaced_pod_status("p", ns, {"status": {"phase": "Running"}})
    logs = cluster.runtime.logs
    for i in range(5):
        logs.append(ns, "p", "a", f"line {i}")
    logs.append(ns, "p", "b", "from b")
    with pytest.raises(ApiException) as ambiguous:
        core.read_namespaced_pod_log("p", ns)
    assert ambiguous.value.status == 400 and "choose one of" in ambiguous.value.body
    assert core.read_namespaced_pod_log("p", ns, container="a", tail_lines=2) == "line 3\nline 4\n"
    stamped = core.read_namespaced_pod_log("p", ns, container="b", timestamps=True)
    assert stamped.endswith(" from b\n") and stamped[:4].isdigit()
    stream = core.read_namespaced_pod_log("p", ns, container="a", follow=True, tail_lines=1,
                                          _preload_content=False)
    received: list[str] = []

    def read() -> None:
        for chunk in stream.stream(64):
            received.extend(chunk.decode().splitlines())

    reader = threading.Thread(target=read)
    reader.start()
    logs.append(ns, "p", "a", "line 5")
    logs.append(ns, "p", "a", "line 6")
    logs.close(ns, "p", "a")
    reader.join(10)
    assert received == ["line 4", "line 5", "line 6"]


def test_service_proxy_reaches_a_ready_pod(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespaced_service(ns, {"metadata": {"name": "llm"}, "spec": {
        "selector": {"app": "llm"}, "ports": [{"name": "http", "port": 80, "targetPort": "serve"}]}})
    with pytest.raises(ApiException) as none_ready:
        core.connect_get_namespaced_service_proxy_with_path("llm:http", ns, "v1/models")
    assert none_ready.value.status == 503
    core.create_namespaced_pod(ns, {"metadata": {"name": "llm-0", "labels": {"app": "llm"}}, "spec": {"containers": [
        {"name": "vllm", "image": "vllm/vllm-openai", "ports": [{"name": "serve", "containerPort": 8000}]}]}})
    core.patch_namespaced_pod_status("llm-0", ns, {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}})
    calls: list[tuple[str, str, bytes]] = []

    def handler(method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> ProxyResponse:
        calls.append((method, path, body))
        return ProxyResponse(200, json.dumps({"object": "list", "path": path}).encode())

    cluster.runtime.pod_http.register(ns, "llm-0", 8000, handler)
    for spec in ("llm", "llm:http", "http:llm:80"):
        answer = core.connect_get_namespaced_service_proxy_with_path(spec, ns, "v1/models")
        assert "v1/models" in str(answer)
    raw = cluster.raw("POST", f"/api/v1/namespaces/{ns}/services/llm:80/proxy/v1/chat/completions",
                      body={"messages": []})
    raw.read()
    assert raw.status == 200 and json.loads(raw.data)["path"] == "/v1/chat/completions"
    assert calls[-1][0] == "POST" and json.loads(calls[-1][2]) == {"messages": []}


def test_deletion_propagation_and_finalizers(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)

    def owned(name: str, owner: Any) -> Obj:
        return {"metadata": {"name": name, "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid}]}}

    for policy in ("Background", "Foreground", "Orphan"):
        owner = core.create_namespaced_config_map(ns, {"metadata": {"name": f"owner-{policy.lower()}"}})
        child = core.create_namespaced_config_map(ns, owned(f"child-{policy.lower()}", owner))
        core.create_namespaced_config_map(ns, owned(f"grandchild-{policy.lower()}", child))
        core.delete_namespaced_config_map(owner.metadata.name, ns, propagation_policy=policy)
        left = {c.metadata.name for c in core.list_namespaced_config_map(ns).items}
        if policy == "Orphan":
            assert {f"child-{policy.lower()}", f"grandchild-{policy.lower()}"} <= left
            assert not core.read_namespaced_config_map(f"child-{policy.lower()}", ns).metadata.owner_references
        else:
            assert not {f"child-{policy.lower()}", f"grandchild-{policy.lower()}"} & left
    core.create_namespaced_config_map(ns, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    core.delete_namespaced_config_map("held", ns)
    held = core.read_namespaced_config_map("held", ns)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", ns, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("held", ns)
    assert gone.value.status == 404


def test_dry_run_changes_nothing(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    dry = core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}}, dry_run="All")
    assert dry.metadata.uid
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("dry", ns)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "real"}, "data": {"k": "v"}})
    core.patch_namespaced_config_map("real", ns, {"data": {"k": "changed"}}, dry_run="All")
    core.delete_namespaced_config_map("real", ns, dry_run="All")
    assert core.read_namespaced_config_map("real", ns).data == {"k": "v"}


def test_namespace_deletion_removes_its_objects(cluster: Cluster) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_secret("doomed", {"metadata": {"name": "s"}, "stringData": {"password": "x"}})
    assert core.read_namespaced_secret("s", "doomed").data == {"password": "eA=="}
    core.delete_namespace("doomed")
    with pytest.raises(ApiException):
        core.read_namespace("doomed")
    assert not cluster.runtime.store.list(cluster.runtime.store.types[("", "secrets")], "doomed")[0]
    with pytest.raises(ApiException) as protected:
        core.delete_namespace("kube-system")
    assert protected.value.status == 403


def test_crd_then_custom_resources(cluster: Cluster, ns: str) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(cluster.api)
    ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
                 "versions": [
                     {"name": "v1beta1", "served": True, "storage": False,
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
                     {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
                 ]},
    })
    ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {
                         "spec": {"type": "object", "properties": {"size": {"type": "integer"},
                                                                   "labels": {"type": "object",
                                                                              "additionalProperties": {
                                                                                  "type": "string"}}}},
                         "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
    })
    pruned = kubernetes.client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        "example.com", "v1", ns, "gizmos", {"apiVersion": "example.com/v1", "kind": "Gizmo",
                                           "metadata": {"name": "z"}, "spec": {"size": 2, "colour": "red",
                                                                               "labels": {"a": "b"}}})
    assert pruned["spec"] == {"size": 2, "labels": {"a": "b"}}  # structural schema pruning
    strict = cluster.raw("POST", f"/apis/example.com/v1/namespaces/{ns}/gizmos", [("fieldValidation", "Strict")],
                         body={"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "y"},
                               "spec": {"colour": "red"}})
    strict.read()
    assert strict.status == 400 and 'unknown field \\"spec.colour\\"' in strict.data.decode()
    warned = cluster.raw("POST", f"/api/v1/namespaces/{ns}/configmaps",
                         body={"metadata": {"name": "w"}, "data": {"k": "v"}, "dta": {"typo": "x"}})
    warned.read()
    assert warned.status == 201 and warned.headers["Warning"] == '299 - "unknown field \\"dta\\""'
    assert "dta" not in json.loads(warned.data)
    ext.delete_custom_resource_definition("gizmos.example.com")
    crd = ext.read_custom_resource_definition("gadgets.example.com")
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"
    custom = kubernetes.client.CustomObjectsApi(cluster.api)
    made = custom.create_namespaced_custom_object("example.com", "v1", ns, "gadgets", {
        "apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"size": 1}})
    assert made["metadata"]["generation"] == 1
    custom.patch_namespaced_custom_object_status("example.com", "v1", ns, "gadgets", "g1", {"status": {"ok": True}})
    old = custom.get_namespaced_custom_object("example.com", "v1beta1", ns, "gadgets", "g1")
    assert old["apiVersion"] == "example.com/v1beta1" and old["status"] == {"ok": True}
    smp = cluster.raw("PATCH", f"/apis/example.com/v1/namespaces/{ns}/gadgets/g1", body={"spec": {}},
                      content_type="application/strategic-merge-patch+json")
    assert smp.status == 415
    listed = custom.list_namespaced_custom_object("example.com", "v1", ns, "gadgets")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["g1"]
    ext.delete_custom_resource_definition("gadgets.example.com")
    with pytest.raises(ApiException) as gone:
        custom.list_namespaced_custom_object("example.com", "v1", ns, "gadgets")
    assert gone.value.status == 404
    assert ("example.com", "gadgets") not in cluster.runtime.store.types
