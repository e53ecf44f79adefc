"""Inference on one shared two-GPU-node twin cluster through MCP: model pool (a warm worker moves to a service by
relabelling: same pod UID, no restart; scale-in refuses to remove bound workers and names them), managed endpoints
(KV cache + prefix-aware routing to DeploymentComplete), the SGLang router and KEDA autoscaling of the workers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import shared_control_plane, twin_client

TAG = "pool1"
COMMAND = "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280"
POOL = "app.kubernetes.io/name=pool"


# One control plane and one HyperPod cluster with two 1-GPU nodes for the module.
shared_cp = shared_control_plane(lambda client: make_hyperpod(client, TAG, acceleratedInstanceCount=2),
                                 status_cache_seconds=0.5)


@pytest.fixture(scope="module")
def shared(shared_cp: Running, twin_process: TwinProcess) -> tuple[Running, TwinProcess]:
    """The module's control plane and the twin it runs on."""
    return shared_cp, twin_process


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    """The error of a refused MCP call."""
    assert result["isError"], result
    error: dict[str, Any] = result["payload"]["error"]
    return error


def live(pods: list[Any]) -> list[Any]:
    """The pods not being deleted (no deletionTimestamp)."""
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def test_pool_assign_moves_the_same_pod_scale_in_spares_bound_workers_release(
    shared: tuple[Running, TwinProcess], tmp_path: Path
) -> None:
    cp, twin = shared
    core = kube(twin, tmp_path, TAG)
    [ref] = mcp_calls(cp, [("inference_deploy_container", {
        "deploymentCommand": COMMAND, "gpuCount": 1, "replicas": 2, "serviceType": "modelpool",
        "deploymentName": "pool"})])
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"
    before = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod("default", label_selector=POOL).items}
    assert len(before) == 2

    [assign] = mcp_calls(cp, [("inference_pool_assign", {"service": "chat", "pool": "pool"})])
    view = mcp_wait(cp, assign["operationId"])
    assert view["status"] == "SUCCEEDED", view
    [moved] = view["result"]["assign"]["moved"]
    assert before[moved["pod"]] == moved["uid"] and moved["service"] == "chat"
    assert view["result"]["assign"]["unassignedLeft"] == 1
    # The same pods (UIDs), never restarted; only the label changed, and chat-service routes to that pod.
    pods = {p.metadata.name: p for p in core.list_namespaced_pod("default", label_selector=POOL).items}
    assert {n: p.metadata.uid for n, p in pods.items()} == before
    assert all(cs.restart_count == 0 for p in pods.values() for cs in p.status.container_statuses)
    assert pods[moved["pod"]].metadata.labels["business"] == "chat"
    endpoints = core.read_namespaced_endpoints("chat-service", "default")
    assert [a.ip for s in endpoints.subsets for a in s.addresses] == [pods[moved["pod"]].status.pod_ip]
    [answer] = mcp_calls(cp, [("inference_call_model", {"service_name": "chat", "prompt": "Hi", "max_tokens": 8})])
    assert answer["model"] == "Qwen/Qwen3-0.6B" and answer["answer"]

    # Refusals: not enough warm workers; a scale-in that would remove the bound worker names it.
    too_many, to_zero, _ = mcp_raw(cp, [
        ("inference_pool_assign", {"service": "chat", "count": 2}),
        ("inference_scale", {"deploymentName": "pool", "replicas": 0}),
    ])
    assert error_of(too_many)["code"] == "PRECONDITION_FAILED" and "1 warm unassigned" in error_of(too_many)["message"]
    refused = error_of(to_zero)
    assert refused["code"] == "PRECONDITION_FAILED"
    assert f"{moved['pod']} (service chat)" in refused["message"] and "inference_pool_release" in refused["hint"]

    # Scale-in to 1 removes the unassigned worker, never the bound one.
    [scale] = mcp_calls(cp, [("inference_scale", {"deploymentName": "pool", "replicas": 1})])
    view = mcp_wait(cp, scale["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert [(p["pod"], p["uid"], p["service"]) for p in view["result"]["scale"]["pods"]] == [
        (moved["pod"], moved["uid"], "chat")]

    [release] = mcp_calls(cp, [("inference_pool_release", {"service": "chat"})])
    view = mcp_wait(cp, release["operationId"])
    assert view["status"] == "SUCCEEDED", view
    # The scale-in's pod may still be terminating (its grace period runs on the twin clock): the pool is its live
    # pods, as inference_pool_* and inference_scale count them.
    [back] = live(core.list_namespaced_pod("default", label_selector=POOL).items)
    assert back.metadata.uid == moved["uid"] and back.metadata.labels["business"] == "unassigned"
    assert not [s for s in core.list_namespaced_service("default").items if s.metadata.name == "chat-service"]
    [gone] = mcp_calls(cp, [("inference_undeploy", {"deploymentName": "pool"})])
    assert mcp_wait(cp, gone["operationId"])["status"] == "SUCCEEDED"


MANAGED: dict[str, Any] = {
    "name": "qwen-managed", "modelName": "qwen-managed", "image": "vllm/vllm-openai:v0.11.0",
    "instanceType": "ml.g6.4xlarge", "gpuCount": 1, "replicas": 2,
    "args": ["--model", "/opt/ml/model", "--served-model-name", "qwen-managed"],
    "modelSource": {"type": "huggingface", "huggingFaceModelId": "Qwen/Qwen3-0.6B"},
    "kvCache": {"enableL1": True, "enableL2": True, "l2Backend": "tieredstorage"},
    "routingStrategy": "prefixaware",
    "autoscaling": {"minReplicas": 1, "maxReplicas": 4, "prometheus": {
        "query": 'sum(vllm:num_requests_waiting{app="qwen-managed"})', "targetValue": 5,
        "serverAddress": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-45ef"}},
}


def test_managed_endpoint_with_kv_cache_and_prefix_routing_becomes_ready_lists_and_deletes(
    shared: tuple[Running, TwinProcess], tmp_path: Path
) -> None:
    cp, twin = shared
    no_operator, bad, _ = mcp_raw(cp, [
        ("inference_managed_deploy", MANAGED),
        ("inference_managed_deploy", {**MANAGED, "invocationPort": 8080}),
    ])
    assert error_of(no_operator)["code"] == "PRECONDITION_FAILED"
    assert "inferenceOperator" in error_of(no_operator)["hint"]
    assert error_of(bad)["code"] == "INVALID_INPUT" and "[IEC001]" in error_of(bad)["message"]
    assert error_of(bad)["details"]["fields"][0]["code"] == "IEC001"
    with cp.client() as client:
        ref = client.post("/api/v1/capacity/advanced-features", json={"inferenceOperator": {"enabled": True}})
        assert ref.status_code == 202, ref.text
    assert mcp_wait(cp, ref.json()["operationId"])["status"] == "SUCCEEDED"

    [deploy] = mcp_calls(cp, [("inference_managed_deploy", MANAGED)])
    view = mcp_wait(cp, deploy["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["result"]["state"] == "DeploymentComplete"
    [listed] = mcp_calls(cp, [("inference_managed_list", {})])
    [endpoint] = listed["endpoints"]
    assert endpoint["name"] == "qwen-managed" and endpoint["state"] == "DeploymentComplete"
    assert endpoint["routingStrategy"] == "prefixaware" and endpoint["replicas"] == 2
    assert endpoint["kvCache"] == {"enableL1Cache": True, "enableL2Cache": True,
                                   "l2CacheSpec": {"l2CacheBackend": "tieredstorage"}}
    core = kube(twin, tmp_path, TAG)
    pods = core.list_namespaced_pod("default", label_selector="app=qwen-managed").items
    assert len(pods) == 2 and all(p.spec.containers[0].resources.requests["nvidia.com/gpu"] == "1" for p in pods)
    # The config as the operator reads it: the autoscaling rendered, the operator's own invocation path by default.
    config = k8s.CustomObjectsApi(core.api_client).get_namespaced_custom_object(
        "inference.sagemaker.aws.amazon.com", "v1", "default", "inferenceendpointconfigs", "qwen-managed")
    assert config["spec"]["invocationEndpoint"] == "invocations"
    scaling = config["spec"]["autoScalingSpec"]  # the API server fills in the CRD's defaults (cooldownPeriod …)
    assert (scaling["minReplicaCount"], scaling["maxReplicaCount"], scaling["cooldownPeriod"]) == (1, 4, 300)
    assert {k: scaling["prometheusTrigger"][k] for k in ("query", "targetValue", "serverAddress")} == {
        "query": 'sum(vllm:num_requests_waiting{app="qwen-managed"})', "targetValue": 5,
        "serverAddress": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-45ef"}
    # No SageMaker endpoint registered: the call goes to the Service the operator made (named like the config).
    [answer] = mcp_calls(cp, [("inference_call_model", {"service_name": "qwen-managed", "prompt": "Hi managed",
                                                        "max_tokens": 16})])
    assert answer["route"] == "service-proxy" and answer["service"] == "qwen-managed"
    assert answer["model"] == "qwen-managed" and "Hi managed" in answer["answer"]

    [gone] = mcp_calls(cp, [("inference_managed_delete", {"name": "qwen-managed"})])
    assert mcp_wait(cp, gone["operationId"])["status"] == "SUCCEEDED"
    assert mcp_calls(cp, [("inference_managed_list", {})])[0]["count"] == 0


def test_router_fronts_the_workers_and_autoscaling_targets_the_workers_never_the_router(
    shared: tuple[Running, TwinProcess], tmp_path: Path
) -> None:
    cp, twin = shared
    [ref] = mcp_calls(cp, [("inference_deploy_container", {
        "deploymentCommand": COMMAND, "gpuCount": 1, "deploymentName": "chatw"})])
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"
    [router] = mcp_calls(cp, [("inference_router_deploy", {"deploymentName": "chatw", "policy": "round_robin"})])
    view = mcp_wait(cp, router["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["result"]["router"]["service"] == "chatw-router-service"
    assert "app.kubernetes.io/name=chatw" in view["result"]["router"]["command"]
    [answer] = mcp_calls(cp, [("inference_call_model", {"service_name": "chatw-router", "prompt": "Hi",
                                                        "max_tokens": 8})])
    assert answer["answer"] and answer["model"] == "Qwen/Qwen3-0.6B"

    scaling = {"deploymentName": "chatw", "serverAddress": "http://prometheus.monitoring:9090",
               "query": "sum(vllm:num_requests_waiting)", "threshold": 5, "minReplicas": 1, "maxReplicas": 2}
    on_router, no_keda, _ = mcp_raw(cp, [
        ("inference_autoscaling_apply", {**scaling, "deploymentName": "chatw-router"}),
        ("inference_autoscaling_apply", scaling),
    ])
    assert error_of(on_router)["code"] == "INVALID_INPUT" and "deploymentName=chatw" in error_of(on_router)["hint"]
    assert error_of(no_keda)["code"] == "PRECONDITION_FAILED" and "KEDA" in error_of(no_keda)["message"]
    assert '{"keda": {"enabled": true}}' in error_of(no_keda)["hint"]
    # The feature key installs KEDA (its helm chart): the test creates no KEDA object itself.
    [keda] = mcp_calls(cp, [("hyperpod_update_advanced_features", {"keda": {"enabled": True}})])
    view = mcp_wait(cp, keda["operationId"])
    assert view["status"] == "SUCCEEDED", view
    [applied] = mcp_calls(cp, [("inference_autoscaling_apply", scaling)])
    view = mcp_wait(cp, applied["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["result"]["apply"]["target"] == "chatw" and view["result"]["apply"]["maxReplicas"] == 2
    custom = k8s.CustomObjectsApi(kube(twin, tmp_path, TAG).api_client)
    apps = k8s.AppsV1Api(custom.api_client)

    def scalers() -> list[str]:
        found = custom.list_namespaced_custom_object("keda.sh", "v1alpha1", "default", "scaledobjects")
        return [so["metadata"]["name"] for so in found["items"]]

    def deployments() -> set[str]:
        return {d.metadata.name for d in apps.list_namespaced_deployment("default").items}

    # Remove only the autoscaler: the workers and the router stay.
    [off] = mcp_calls(cp, [("inference_undeploy", {"deploymentName": "chatw", "scope": "autoscaling"})])
    view = mcp_wait(cp, off["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["result"]["delete"]["deleted"] == ["ScaledObject/chatw-scaler"]
    assert scalers() == [] and {"chatw", "chatw-router"} <= deployments()
    [again, _] = mcp_raw(cp, [("inference_undeploy", {"deploymentName": "chatw", "scope": "autoscaling"})])
    assert error_of(again)["code"] == "INVALID_INPUT" and "no KEDA ScaledObject" in error_of(again)["message"]

    # Without a query the ScaledObject follows the router's in-flight requests.
    [default] = mcp_calls(cp, [("inference_autoscaling_apply", {k: v for k, v in scaling.items() if k != "query"})])
    assert mcp_wait(cp, default["operationId"])["status"] == "SUCCEEDED"
    so = custom.get_namespaced_custom_object("keda.sh", "v1alpha1", "default", "scaledobjects", "chatw-scaler")
    assert so["spec"]["triggers"][0]["metadata"]["query"] == (
        'sum(sgl_router_running_requests{namespace="default",app_kubernetes_io_name="chatw-router"})')

    # Undeploying the router removes it alone (Deployment, Service, RBAC); the workers keep answering.
    [router_gone] = mcp_calls(cp, [("inference_undeploy", {"deploymentName": "chatw-router"})])
    view = mcp_wait(cp, router_gone["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert set(view["result"]["delete"]["deleted"]) == {
        "ServiceAccount/chatw-router", "Role/chatw-router", "RoleBinding/chatw-router", "Deployment/chatw-router",
        "Service/chatw-router-service"}
    assert deployments() == {"chatw"} and scalers() == ["chatw-scaler"]
    [direct] = mcp_calls(cp, [("inference_call_model", {"service_name": "chatw", "prompt": "Hi", "max_tokens": 4})])
    assert direct["answer"]

    # Undeploying the workers takes their autoscaler with them, and finishes when their pods are gone.
    [gone] = mcp_calls(cp, [("inference_undeploy", {"deploymentName": "chatw"})])
    view = mcp_wait(cp, gone["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert "ScaledObject/chatw-scaler" in view["result"]["delete"]["deleted"]
    assert scalers() == [] and deployments() == set()
    left = kube(twin, tmp_path, TAG).list_namespaced_pod("default", label_selector="app.kubernetes.io/name=chatw")
    assert not left.items


def jumpstart_models(twin: TwinProcess, tmp_path: Path) -> list[str]:
    """The JumpStartModels on the cluster."""
    custom = k8s.CustomObjectsApi(kube(twin, tmp_path, TAG).api_client)
    found = custom.list_namespaced_custom_object("inference.sagemaker.aws.amazon.com", "v1", "default",
                                                 "jumpstartmodels")
    return [o["metadata"]["name"] for o in found["items"]]


def test_jumpstart_model_checked_against_the_hub_registers_an_endpoint_or_serves_through_its_service(
    shared: tuple[Running, TwinProcess], tmp_path: Path
) -> None:
    cp, twin = shared
    jumpstart = {"modelId": "deepseek-llm-r1-distill-qwen-1-5b", "instanceType": "ml.g6.4xlarge",
                 "endpointName": "ds-js", "name": "ds-js"}
    cpu_only, unsupported, unknown, contradictory, _ = mcp_raw(cp, [
        ("inference_jumpstart_deploy", {**jumpstart, "instanceType": "ml.c5.xlarge"}),
        # The hub lists Qwen2.5 7B Instruct on 4- and 8-GPU types only: the cluster's ml.g6.4xlarge is refused.
        ("inference_jumpstart_deploy", {**jumpstart, "modelId": "huggingface-llm-qwen2-5-7b-instruct"}),
        ("inference_jumpstart_deploy", {**jumpstart, "modelId": "not-a-jumpstart-model"}),
        ("inference_jumpstart_deploy", {**jumpstart, "sagemakerEndpoint": False}),
    ])
    assert error_of(cpu_only)["code"] == "INVALID_INPUT" and "no NVIDIA GPU" in error_of(cpu_only)["message"]
    refused = error_of(unsupported)
    supported = ["ml.g5.12xlarge", "ml.g5.24xlarge", "ml.g5.48xlarge", "ml.g6.12xlarge", "ml.g6.24xlarge",
                 "ml.g6.48xlarge", "ml.p4d.24xlarge"]
    assert refused["code"] == "INVALID_INPUT" and f"supported: {', '.join(supported)}." in refused["message"]
    assert "ml.g6.4xlarge is not supported by JumpStart model huggingface-llm-qwen2-5-7b-instruct" in (
        refused["message"])
    assert refused["details"]["fields"] == [{"field": "instanceType", "message": "not supported by the model",
                                             "allowed": supported}]
    assert error_of(unknown)["code"] == "INVALID_INPUT" and "SageMakerPublicHub" in error_of(unknown)["message"]
    assert error_of(contradictory)["details"]["fields"][0]["field"] == "endpointName"
    assert jumpstart_models(twin, tmp_path) == []  # nothing was applied

    [ref] = mcp_calls(cp, [("inference_jumpstart_deploy", jumpstart)])
    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["result"]["endpointName"] == "ds-js" and view["result"]["state"] == "DeploymentComplete"
    assert view["result"]["modelVersion"] == "1.1.1"  # the version whose types were checked is the one deployed
    listed = {e["name"]: e for e in mcp_calls(cp, [("inference_managed_list", {})])[0]["endpoints"]}
    assert listed["ds-js"]["kind"] == "JumpStartModel" and listed["ds-js"]["endpointState"] == "CreationCompleted"
    assert listed["ds-js"]["modelName"] == "deepseek-llm-r1-distill-qwen-1-5b"
    core = kube(twin, tmp_path, TAG)
    [pod] = core.list_namespaced_pod("default", label_selector="app=ds-js").items
    assert pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"  # every GPU of an ml.g6.4xlarge

    # A registered endpoint answers through SageMaker runtime InvokeEndpoint, not the service proxy.
    [answer] = mcp_calls(cp, [("inference_call_model", {"service_name": "ds-js", "prompt": "Hello JumpStart",
                                                        "max_tokens": 32})])
    assert answer["route"] == "sagemaker-runtime" and answer["service"] == "ds-js"
    assert "Hello JumpStart" in answer["answer"] and answer["usage"]["completion_tokens"] > 0
    runtime = twin_client(twin, "sagemaker-runtime")
    with pytest.raises(ClientError, match=r"ValidationException.*Endpoint nope of account"):
        runtime.invoke_endpoint(EndpointName="nope", ContentType="application/json", Body=b"{}")
    refused_call = runtime.invoke_endpoint  # a model the server does not serve is the model's own 404 (ModelError)
    with pytest.raises(runtime.exceptions.ModelError, match="Received client error \\(404\\)"):
        refused_call(EndpointName="ds-js", ContentType="application/json",
                     Body=json.dumps({"model": "other", "messages": [{"role": "user", "content": "hi"}]}).encode())
    [gone] = mcp_calls(cp, [("inference_managed_delete", {"name": "ds-js"})])
    assert mcp_wait(cp, gone["operationId"])["status"] == "SUCCEEDED"
    assert "ds-js" not in {e["name"] for e in mcp_calls(cp, [("inference_managed_list", {})])[0]["endpoints"]}

    # Without a SageMaker endpoint: nothing registered; the model answers through the Service the operator made.
    [ref] = mcp_calls(cp, [("inference_jumpstart_deploy", {
        "modelId": "deepseek-llm-r1-distill-qwen-1-5b", "instanceType": "ml.g6.4xlarge", "name": "ds-svc",
        "sagemakerEndpoint": False})])
    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["result"]["endpointName"] is None and view["result"]["route"] == "service-proxy"
    listed = {e["name"]: e for e in mcp_calls(cp, [("inference_managed_list", {})])[0]["endpoints"]}
    assert listed["ds-svc"]["endpointName"] is None and listed["ds-svc"]["endpointState"] is None
    [answer] = mcp_calls(cp, [("inference_call_model", {"service_name": "ds-svc", "prompt": "Hello Service",
                                                        "max_tokens": 16})])
    assert answer["route"] == "service-proxy" and answer["service"] == "ds-svc"
    assert "Hello Service" in answer["answer"]
    [gone] = mcp_calls(cp, [("inference_managed_delete", {"name": "ds-svc"})])
    assert mcp_wait(cp, gone["operationId"])["status"] == "SUCCEEDED"
