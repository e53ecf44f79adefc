"""Model calls and model exposure against the twin, with a tenant who can write custom resources and Services in the
namespace: an InferenceEndpointConfig whose invocationEndpoint climbs out of the service proxy (`../`, `%2e%2e`, `?`),
a Service with a forged owner reference and a name shared by a managed and a self-managed model are refused and no
request reaches the API server (its record of POSTs shows none, while a legitimate call shows up in it); an external
model server is an internal or ranged load balancer, and a public one demands an API key from a Secret (called at its
address, where the source ranges apply)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s

from hyperpod_twin.sim.crds import crd_manifests
from instantstart.twin_process import TwinProcess
from tests.support.crash import twin_writes
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import shared_control_plane
from tests.support.waits import until

TAG = "sec1"
COMMAND = "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280"
KEY = "k3y-Only-In-A-Secret-7731"
GROUP, VERSION = "inference.sagemaker.aws.amazon.com", "v1"

# Two 1-GPU nodes: one internal model server (the legitimate target) and one public one; the tenants' configs
# ask for 100m CPU each so that the public server (sized to its whole node) still fits beside them.
shared_cp = shared_control_plane(lambda client: make_hyperpod(client, TAG, acceleratedInstanceCount=2),
                                 status_cache_seconds=0.5)


@pytest.fixture(scope="module")
def cluster(shared_cp: Running, twin_process: TwinProcess, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Running, TwinProcess, k8s.CoreV1Api]:
    """The control plane, the twin and an admin client; the inference operator's CRDs and a stand-in AWS Load
    Balancer Controller Deployment installed, and `qwen` served behind an internal, ranged load balancer."""
    core = kube(twin_process, tmp_path_factory.mktemp("kube"), TAG)
    extensions = k8s.ApiextensionsV1Api(core.api_client)
    for crd in crd_manifests("inference-operator"):
        extensions.create_custom_resource_definition(crd)
    k8s.AppsV1Api(core.api_client).create_namespaced_deployment("kube-system", {
        "metadata": {"name": "aws-load-balancer-controller"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "lbc"}},
                 "template": {"metadata": {"labels": {"app": "lbc"}},
                              "spec": {"containers": [{"name": "c", "image": "public.ecr.aws/eks/lbc:v2.13.2"}]}}}})
    [ref] = mcp_calls(shared_cp, [("inference_deploy_container", {
        "deploymentCommand": COMMAND, "gpuCount": 1, "deploymentName": "qwen", "serviceType": "external",
        "sourceRanges": ["10.0.0.0/16"]})])
    view = mcp_wait(shared_cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["result"]["exposure"] == {"reach": "internal", "loadBalancer": "internal",
                                          "sourceRanges": ["10.0.0.0/16"], "apiKeySecret": None}
    return shared_cp, twin_process, core


def proxied(twin: TwinProcess) -> dict[str, int]:
    """The POSTs through a proxy subresource (service, pod or node) the twin's API servers answered."""
    return {k: n for k, n in twin_writes(twin).items() if k.startswith("kube:") and "/proxy" in k}


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    """The error of a refused MCP call."""
    assert result["isError"], result
    error: dict[str, Any] = result["payload"]["error"]
    return error


def tenant_iec(core: k8s.CoreV1Api, name: str, path: str) -> None:
    """An InferenceEndpointConfig as a tenant writes it, straight through the Kubernetes API."""
    k8s.CustomObjectsApi(core.api_client).create_namespaced_custom_object(GROUP, VERSION, "default",
                                                                          "inferenceendpointconfigs", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceEndpointConfig",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"modelName": name, "instanceType": "ml.g6.4xlarge", "replicas": 1, "invocationEndpoint": path,
                 "modelSourceConfig": {"modelSourceType": "huggingface",
                                       "huggingFaceModel": {"modelId": "Qwen/Qwen3-0.6B"}},
                 "worker": {"image": "vllm/vllm-openai:v0.11.0", "resources": {"requests": {"cpu": "100m"}},
                            "modelInvocationPort": {"containerPort": 8000, "name": "http"},
                            "modelVolumeMount": {"name": "model-weights", "mountPath": "/opt/ml/model"}}}})


def service_to_qwen(core: k8s.CoreV1Api, name: str, owners: list[dict[str, str]] | None = None) -> None:
    """A Service a tenant makes in front of the qwen pods (so a call through it would be answered)."""
    core.create_namespaced_service("default", {
        "metadata": {"name": name, "ownerReferences": owners or []},
        "spec": {"selector": {"app.kubernetes.io/name": "qwen"},
                 "ports": [{"name": "http", "port": 8000, "targetPort": 8000}]}})


CLIMBING = {
    "climb-dots": "../../../../../nodes/hyperpod-i-0/proxy/run/default/qwen/server",
    "climb-encoded": "%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/nodes/hyperpod-i-0/proxy/run/default/qwen/server",
    "climb-query": "v1/chat/completions?x=/../../../../nodes",
    "climb-mixed": "v1/../../../../../../api/v1/namespaces/kube-system/secrets",
}


def test_a_tenant_invocation_path_that_climbs_out_of_the_service_is_refused_and_nothing_is_sent(
    cluster: tuple[Running, TwinProcess, k8s.CoreV1Api]
) -> None:
    cp, twin, core = cluster
    # The record catches a call: a legitimate one shows up in it.
    before = proxied(twin)
    [answer] = mcp_calls(cp, [("inference_call_model", {"service_name": "qwen", "prompt": "Hi", "max_tokens": 8})])
    assert "Hi" in answer["answer"] and answer["route"] == "service-proxy"
    grown = {k for k, n in proxied(twin).items() if n > before.get(k, 0)}
    assert grown == {"kube:eks-cluster-sec1:POST /api/v1/namespaces/default/services/qwen-service:8000/proxy/"
                     "v1/chat/completions"}, grown

    for name, path in CLIMBING.items():
        tenant_iec(core, name, path)
    # The operator made each config's Service: only the path stands between the call and the API server.
    for name in CLIMBING:
        assert core.read_namespaced_service(name, "default").metadata.owner_references[0].name == name
    before = twin_writes(twin)
    results = mcp_raw(cp, [("inference_call_model", {"service_name": name, "prompt": "run"}) for name in CLIMBING])
    for name, result in zip(CLIMBING, results[:-1], strict=True):
        error = error_of(result)
        assert error["code"] == "PRECONDITION_FAILED", (name, error)
        assert f"InferenceEndpointConfig default/{name}: spec.invocationEndpoint" in error["message"]
        assert "Nothing was sent" in error["message"] and error["details"]["field"] == "spec.invocationEndpoint"
    after = twin_writes(twin)
    assert {k: n for k, n in after.items() if k.startswith("kube:") and n > before.get(k, 0)} == {}


def test_a_forged_owner_reference_and_an_ambiguous_name_are_refused(
    cluster: tuple[Running, TwinProcess, k8s.CoreV1Api]
) -> None:
    cp, twin, core = cluster
    # A Service claiming (by kind and name) to belong to a config it does not belong to, made before the config,
    # so the operator leaves its name alone; it leads to the qwen pods.
    forged = [{"apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceEndpointConfig", "name": "orphan",
               "uid": "00000000-0000-4000-8000-000000000000"}]
    service_to_qwen(core, "orphan", forged)
    tenant_iec(core, "orphan", "v1/chat/completions")
    # A managed config and a self-managed Service of one name.
    tenant_iec(core, "chat", "v1/chat/completions")
    service_to_qwen(core, "chat-service")
    before = proxied(twin)
    orphan, chat, _ = mcp_raw(cp, [
        ("inference_call_model", {"service_name": "orphan", "prompt": "hi"}),
        ("inference_call_model", {"service_name": "chat", "prompt": "hi"}),
    ])
    assert error_of(orphan)["code"] == "PRECONDITION_FAILED" and "has no Service yet" in error_of(orphan)["message"]
    assert error_of(chat)["code"] == "CONFLICT"
    assert "InferenceEndpointConfig default/chat" in error_of(chat)["message"]
    assert "Service default/chat-service" in error_of(chat)["message"] and "kind" in error_of(chat)["hint"]
    assert proxied(twin) == before
    # Saying which one is enough.
    [picked] = mcp_calls(cp, [("inference_call_model", {"service_name": "chat", "kind": "self-managed",
                                                        "prompt": "picked", "max_tokens": 8})])
    assert picked["service"] == "chat-service" and "picked" in picked["answer"]


def test_a_public_model_server_is_ranged_and_keyed_and_its_key_stays_in_the_secret(
    cluster: tuple[Running, TwinProcess, k8s.CoreV1Api]
) -> None:
    cp, twin, core = cluster
    unranged, keyless, _ = mcp_raw(cp, [
        ("inference_deploy_container", {"deploymentCommand": COMMAND, "gpuCount": 1, "serviceType": "external"}),
        ("inference_deploy_container", {"deploymentCommand": COMMAND, "gpuCount": 1, "serviceType": "external",
                                        "sourceRanges": ["203.0.113.0/24"], "loadBalancerScheme": "internet-facing"}),
    ])
    assert error_of(unranged)["code"] == "INVALID_INPUT" and "sourceRanges" in error_of(unranged)["message"]
    assert error_of(keyless)["code"] == "INVALID_INPUT" and "apiKey" in error_of(keyless)["message"]

    [ref] = mcp_calls(cp, [("inference_deploy_container", {
        "deploymentCommand": COMMAND, "gpuCount": 1, "deploymentName": "pub", "serviceType": "external",
        "sourceRanges": ["203.0.113.0/24"], "loadBalancerScheme": "internet-facing", "apiKey": KEY})])
    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["result"]["exposure"] == {"reach": "public", "loadBalancer": "internet-facing",
                                          "sourceRanges": ["203.0.113.0/24"], "apiKeySecret": "pub-api-key"}
    svc = core.read_namespaced_service("pub-service", "default")
    assert svc.spec.type == "LoadBalancer" and svc.spec.load_balancer_source_ranges == ["203.0.113.0/24"]
    assert svc.metadata.annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internet-facing"
    internal = core.read_namespaced_service("qwen-service", "default")
    assert internal.metadata.annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert internal.spec.load_balancer_source_ranges == ["10.0.0.0/16"]
    dep = k8s.AppsV1Api(core.api_client).read_namespaced_deployment("pub", "default")
    container = dep.spec.template.spec.containers[0]
    assert container.command[-2:] == ["--api-key", "$(MODEL_SERVER_API_KEY)"]
    [env] = [e for e in container.env if e.name == "MODEL_SERVER_API_KEY"]
    assert env.value is None and env.value_from.secret_key_ref.name == "pub-api-key"
    assert KEY not in json.dumps(core.api_client.sanitize_for_serialization(dep))
    assert KEY not in json.dumps(view)

    # The simulated vLLM enforces the key: through the API server's proxy no Authorization header reaches it
    # (the API server authenticates the caller with it), so the call goes to the load balancer with the key, and
    # nothing through the proxy; this control plane (127.0.0.1) is outside its source ranges: dropped there.
    status = core.api_client.call_api(*core.api_client.param_serialize(
        method="POST", resource_path="/api/v1/namespaces/default/services/pub-service:8000/proxy/v1/chat/completions",
        header_params={"Content-Type": "application/json"}, auth_settings=["BearerToken"],
        body={"messages": [{"role": "user", "content": "hi"}]}))
    status.read()
    assert status.status == 401
    until(lambda: bool(core.read_namespaced_service("pub-service", "default").status.load_balancer.ingress),
          "the load balancer has an address")
    before = proxied(twin)
    [keyed, _] = mcp_raw(cp, [("inference_call_model", {"service_name": "pub", "prompt": "hi"})])
    assert error_of(keyed)["code"] == "PROVIDER_ERROR" and "sourceRanges" in error_of(keyed)["hint"]
    assert KEY not in json.dumps(keyed)
    assert proxied(twin) == before
    [public] = mcp_calls(cp, [("inference_list_public_services", {})])
    assert {(s["name"], s["loadBalancer"], tuple(s["sourceRanges"])) for s in public["services"]} == {
        ("qwen", "internal", ("10.0.0.0/16",)), ("pub", "internet-facing", ("203.0.113.0/24",))}
