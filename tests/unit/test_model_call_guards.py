"""Model calls and model exposure, the pure parts: the invocation path rule (one validator for the managed deploy,
the call and the service proxy), owner matching by uid, the answer as clipped data, and the external Service
(internal or internet-facing, source ranges, the API key only by Secret reference)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from hyperpod_twin.sim.model_server import ModelServer
from instantstart.errors import InstantStartError, InvalidInput, PreconditionFailed
from instantstart.kube.proxy import proxy_resource
from instantstart.manifests import inference as inference_manifests
from instantstart.manifests import inference_endpoint as iec
from instantstart.services.inference.call import MAX_ANSWER, CallRequest, Target, _managed_target, _result, owned_by
from instantstart.services.inference.deploy import DeployRequest, _command
from instantstart.services.inference.managed import ManagedRequest
from instantstart.validation import invocation_path

CLIMBING = [
    "../../../../nodes/hyperpod-i-0/proxy/run/default/p/c",
    "v1/../../../../nodes/n/proxy/run",
    "%2e%2e/%2e%2e/nodes/n/proxy/run",
    "%2E%2E/x",
    "v1/chat/completions?x=1",
    "v1/chat#frag",
    ".",
    "..",
    "v1/./chat",
    "v1//chat",
    "v1\\..\\x",
    "v1/chat/completions/",
    "",
    "a/b/c/d/e/f/g/h/i",
    "v1/chät",
    "v1/chat completions",
]


@pytest.mark.parametrize("path", ["v1/chat/completions", "/v1/chat/completions", "invocations", "predictions/my_model"])
def test_invocation_paths_a_model_server_uses_pass(path: str) -> None:
    assert invocation_path(path) == path.removeprefix("/")
    resource = proxy_resource("default", "qwen-service", 8000, path)
    assert resource == f"/api/v1/namespaces/default/services/qwen-service:8000/proxy/{path.removeprefix('/')}"


@pytest.mark.parametrize("path", CLIMBING)
def test_a_path_that_could_leave_the_service_is_refused_by_the_validator_and_by_the_proxy_itself(path: str) -> None:
    with pytest.raises(ValueError, match="segments of letters, digits"):
        invocation_path(path)
    with pytest.raises(InvalidInput, match="Nothing was sent") as caught:
        proxy_resource("default", "qwen-service", 8000, path)
    assert caught.value.details["fields"][0]["field"] == "path"


@pytest.mark.parametrize(("namespace", "service", "port", "field"), [
    ("default", "../nodes", 8000, "service"), ("default", "a%2fb", 8000, "service"), ("kube-system/x", "s", 80,
                                                                                    "namespace"),
    ("default", "s", 0, "port"), ("default", "s", 70000, "port"), ("default", "s", "http/../x", "port"),
])
def test_the_proxy_refuses_names_and_ports_that_are_not_labels(namespace: str, service: str, port: Any,
                                                                field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        proxy_resource(namespace, service, port, "v1/chat/completions")
    assert caught.value.details["fields"][0]["field"] == field


def test_a_managed_deploy_validates_its_invocation_endpoint_with_the_same_rule() -> None:
    base = {"name": "qwen", "modelName": "qwen", "image": "vllm/vllm-openai:v0.11.0", "instanceType": "ml.g6.4xlarge",
            "gpuCount": 1, "modelSource": {"type": "huggingface", "huggingFaceModelId": "Qwen/Qwen3-0.6B"}}
    assert ManagedRequest.model_validate({**base, "invocationEndpoint": "/invocations"}).invocation_endpoint == (
        "invocations")
    for bad in ("../../nodes/x/proxy/run", "%2e%2e/x", "v1?x"):
        with pytest.raises(ValidationError, match="invocationEndpoint"):
            ManagedRequest.model_validate({**base, "invocationEndpoint": bad})
    spec = iec.EndpointSpec(name="q", namespace="default", model_name="q", image="vllm/vllm-openai:v0.11.0",
                            instance_type="ml.g6.4xlarge", gpu_count=1, source_type="huggingface",
                            hugging_face_model_id="Qwen/Qwen3-0.6B", invocation_endpoint="../x")
    assert [f.field for f in iec.lint(spec, 1) if f.code == "IEC010"] == ["invocationEndpoint"]


def _registered(endpoint: str, arn_name: str, path: str = "v1/chat/completions") -> dict[str, Any]:
    arn = f"arn:aws:sagemaker:us-west-2:123456789012:endpoint/{arn_name}"
    return {"apiVersion": f"{iec.GROUP}/v1", "kind": iec.KIND, "metadata": {"name": "q", "namespace": "default"},
            "spec": {"endpointName": endpoint, "invocationEndpoint": path},
            "status": {"endpoints": {"sagemaker": {"state": "CreationCompleted", "endpointArn": arn}}}}


def test_a_managed_target_follows_only_a_valid_path_and_the_endpoint_the_operator_registered() -> None:
    target = _managed_target(None, _registered("Qwen-JS", "qwen-js"))  # type: ignore[arg-type]
    assert target.endpoint == "Qwen-JS" and target.path == "v1/chat/completions"
    with pytest.raises(PreconditionFailed, match=re.escape("spec.endpointName 'someone-elses-endpoint'")):
        _managed_target(None, _registered("someone-elses-endpoint", "qwen-js"))  # type: ignore[arg-type]
    with pytest.raises(PreconditionFailed, match=re.escape("spec.invocationEndpoint '../../nodes/n/proxy/run'")):
        _managed_target(None, _registered("qwen-js", "qwen-js", "../../nodes/n/proxy/run"))  # type: ignore[arg-type]


def test_service_name_is_a_dns_label() -> None:
    for bad in ("../x", "Qwen", "a/b", "q" * 64):
        with pytest.raises(ValidationError, match="service_name"):
            CallRequest.model_validate({"service_name": bad, "prompt": "hi"})


def _service(*refs: dict[str, str]) -> dict[str, Any]:
    """A Service as the API server sends it, owned by `refs` (ownerReferences)."""
    owners = [{"apiVersion": r["apiVersion"], "kind": r["kind"], "name": r["name"], "uid": r["uid"]} for r in refs]
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "qwen", "ownerReferences": owners}}


def test_an_owner_is_matched_by_uid_not_by_kind_and_name() -> None:
    obj = {"apiVersion": f"{iec.GROUP}/v1", "kind": iec.KIND, "metadata": {"name": "qwen", "uid": "u-1"}}
    ref = {"apiVersion": f"{iec.GROUP}/v1", "kind": iec.KIND, "name": "qwen"}
    assert owned_by(_service({**ref, "uid": "u-1"}), obj)
    assert not owned_by(_service({**ref, "uid": "forged"}), obj)  # the kind and name alone prove nothing
    assert not owned_by(_service({**ref, "uid": "u-1", "apiVersion": "evil.example.com/v1"}), obj)
    assert not owned_by(_service(), obj)
    assert not owned_by(_service({**ref, "uid": ""}), {**obj, "metadata": {"name": "qwen"}})


def test_the_answer_is_clipped_data() -> None:
    target = Target(label="default/q", namespace="default", path="v1/chat/completions", model="q", service="q",
                    port=8000)
    text = "x" * (MAX_ANSWER + 10)
    answer = {"model": "m" * 1000, "choices": [{"message": {"content": text}, "finish_reason": "f" * 500}],
              "usage": {"prompt_tokens": 3, "evil": {"nested": 1}, "flag": True, "completion_tokens": 9}}
    result = _result(target, "q", answer)
    assert len(result.answer) == MAX_ANSWER and result.answer_truncated
    assert len(result.model or "") == 256 and len(result.finish_reason or "") == 64
    assert result.usage == {"prompt_tokens": 3, "completion_tokens": 9}
    odd = _result(target, "q", {"choices": ["not a dict"], "usage": ["x"]})
    assert odd.answer == "" and odd.usage == {} and not odd.answer_truncated


def _spec(**overrides: Any) -> inference_manifests.ServerSpec:
    values: dict[str, Any] = dict(
        name="pub", namespace="default", engine="vllm", command=["vllm", "serve", "q", "--port", "8000"],
        image="vllm/vllm-openai:v0.11.0", gpu_count=1, replicas=1, instance_types=["ml.g6.4xlarge"], port=8000,
        service_type="external", model="q", token_secret=None, s3_claim=None, source_ranges=["203.0.113.0/24"],
    )
    values.update(overrides)
    return inference_manifests.ServerSpec.model_validate(values)


def test_an_external_service_is_internal_by_default_and_ranged() -> None:
    spec = _spec()
    with_lbc = inference_manifests.service(spec, load_balancer_controller=True)
    assert with_lbc["metadata"]["annotations"][inference_manifests.LB_SCHEME] == "internal"
    assert with_lbc["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    in_tree = inference_manifests.service(
        spec, load_balancer_controller=False
    )  # the in-tree controller is internet-facing else
    assert in_tree["metadata"]["annotations"][inference_manifests.LB_INTERNAL_LEGACY] == "true"
    assert in_tree["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert inference_manifests.exposure(spec) == {
        "reach": "internal",
        "loadBalancer": "internal",
        "sourceRanges": ["203.0.113.0/24"],
        "apiKeySecret": None,
    }
    public = _spec(load_balancer_scheme="internet-facing", api_key_secret="pub-api-key")
    assert inference_manifests.service(public, load_balancer_controller=True)["metadata"]["annotations"][
        inference_manifests.LB_SCHEME
    ] == ("internet-facing")
    assert (
        inference_manifests.LB_INTERNAL_LEGACY
        not in inference_manifests.service(public, load_balancer_controller=False)["metadata"]["annotations"]
    )
    assert (
        inference_manifests.exposure(public)["reach"] == "public"
        and inference_manifests.exposure(public)["apiKeySecret"] == "pub-api-key"
    )
    assert inference_manifests.exposure(_spec(service_type="clusterip"))["reach"] == "cluster"
    for svc, scheme in (
        (with_lbc, "internal"),
        (in_tree, "internal"),
        (inference_manifests.service(public, load_balancer_controller=True), "internet-facing"),
        (inference_manifests.service(public, load_balancer_controller=False), None),
        (inference_manifests.service(_spec(service_type="clusterip"), load_balancer_controller=True), None),
    ):
        assert inference_manifests.load_balancer_scheme(svc["spec"]["type"], svc["metadata"]["annotations"]) == scheme


def test_the_api_key_reaches_the_server_only_by_secret_reference() -> None:
    container = inference_manifests.deployment(_spec(api_key_secret="pub-api-key"))["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert container["command"][-2:] == ["--api-key", f"$({inference_manifests.API_KEY_ENV})"]
    [ref] = [e for e in container["env"] if e["name"] == inference_manifests.API_KEY_ENV]
    assert ref == {
        "name": inference_manifests.API_KEY_ENV,
        "valueFrom": {"secretKeyRef": {"name": "pub-api-key", "key": "api-key"}},
    }
    secret = inference_manifests.api_key_secret("pub", "default", "k3y-value-123")
    assert secret["metadata"]["name"] == "pub-api-key" and secret["stringData"] == {"api-key": "k3y-value-123"}
    assert "k3y-value-123" not in json.dumps(inference_manifests.deployment(_spec(api_key_secret="pub-api-key")))


COMMAND = "vllm serve Qwen/Qwen3-0.6B"


@pytest.mark.parametrize(("changes", "field"), [
    ({"serviceType": "external"}, "sourceRanges"),
    ({"serviceType": "external", "sourceRanges": ["10.0.0.0/16"], "loadBalancerScheme": "internet-facing"},
     "apiKey"),
    ({"sourceRanges": ["10.0.0.0/16"]}, "sourceRanges"),
    ({"apiKey": "k3y-value-123"}, "apiKey"),
    ({"loadBalancerScheme": "internet-facing"}, "loadBalancerScheme"),
    ({"deploymentCommand": COMMAND + " --api-key plain-text-key"}, "deploymentCommand"),
    ({"deploymentCommand": "text-generation-launcher --model-id q", "dockerImage": "ghcr.io/tgi:3",
      "serviceType": "external", "sourceRanges": ["10.0.0.0/16"], "apiKey": "k3y-value-123"}, "apiKey"),
])
def test_a_load_balancer_is_never_public_by_accident(changes: dict[str, Any], field: str) -> None:
    req = DeployRequest.model_validate({"deploymentCommand": COMMAND, "gpuCount": 1, **changes})
    with pytest.raises(InstantStartError) as caught:
        _command(req)
    assert caught.value.details["fields"][0]["field"] == field
    assert "plain-text-key" not in str(caught.value) and "k3y-value-123" not in str(caught.value)


def test_the_whole_internet_is_not_a_source_range_and_a_ranged_public_server_with_a_key_passes() -> None:
    with pytest.raises(ValidationError, match="sourceRanges"):
        DeployRequest.model_validate({"deploymentCommand": COMMAND, "gpuCount": 1, "serviceType": "external",
                                      "sourceRanges": ["0.0.0.0/0"]})
    req = DeployRequest.model_validate({"deploymentCommand": COMMAND, "gpuCount": 1, "serviceType": "external",
                                        "sourceRanges": ["203.0.113.0/24"], "loadBalancerScheme": "internet-facing",
                                        "apiKey": "k3y-value-123"})
    assert isinstance(req.api_key, SecretStr) and _command(req)[0].name == "vllm"


def _ask(server: ModelServer, route: str, headers: dict[str, str]) -> int:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    return server("POST" if route != "/health" else "GET", route, "", headers, body).status


def test_the_simulated_servers_enforce_their_api_key_as_the_engines_do() -> None:
    vllm = ModelServer("vllm", "q", lambda: 0.0, key="k3y-value-123")
    assert _ask(vllm, "/v1/chat/completions", {}) == 401
    assert _ask(vllm, "/v1/chat/completions", {"authorization": "Bearer wrong"}) == 401
    assert _ask(vllm, "/v1/chat/completions", {"authorization": "Bearer k3y-value-123"}) == 200
    assert _ask(vllm, "/health", {}) == 200  # vLLM guards /v1 only
    sglang = ModelServer("sglang", "q", lambda: 0.0, key="k3y-value-123")
    assert _ask(sglang, "/generate", {}) == 401 and _ask(sglang, "/health", {}) == 200
    assert _ask(ModelServer("vllm", "q", lambda: 0.0), "/v1/chat/completions", {}) == 200
