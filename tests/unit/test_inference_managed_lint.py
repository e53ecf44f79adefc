"""Managed inference: every lint rule refuses its failing example with its code; a good config renders the IEC."""

from __future__ import annotations

from typing import Any

import pytest

from instantstart.services.inference.managed import ManagedRequest, lint_request

GOOD: dict[str, Any] = {
    "name": "qwen", "modelName": "qwen", "image": "vllm/vllm-openai:v0.11.0", "instanceType": "ml.g6.12xlarge",
    "gpuCount": 2, "replicas": 2, "invocationPort": 8000,
    "args": ["--model", "/opt/ml/model", "--served-model-name", "qwen", "--tensor-parallel-size", "2"],
    "servedModelName": "qwen",
    "modelSource": {"type": "s3", "s3Bucket": "my-models", "s3Region": "us-west-2", "modelLocation": "qwen3"},
    "kvCache": {"enableL1": True, "enableL2": True, "l2Backend": "tieredstorage"},
    "routingStrategy": "prefixaware", "tlsOutputS3Uri": "s3://my-certs/tls",
}


def request(**changes: Any) -> ManagedRequest:
    """GOOD with some fields replaced (None removes one)."""
    body = {**GOOD, **changes}
    return ManagedRequest.model_validate({k: v for k, v in body.items() if v is not None})


def test_a_good_config_has_no_finding_and_renders_the_endpoint_config() -> None:
    verdict = lint_request(request())
    assert verdict.ok and verdict.findings == []
    spec = verdict.manifest["spec"]
    assert verdict.manifest["kind"] == "InferenceEndpointConfig" and spec["instanceType"] == "ml.g6.12xlarge"
    assert spec["modelSourceConfig"] == {"modelSourceType": "s3", "modelLocation": "qwen3",
                                         "s3Storage": {"bucketName": "my-models", "region": "us-west-2"}}
    assert spec["kvCacheSpec"] == {"enableL1Cache": True, "enableL2Cache": True,
                                   "l2CacheSpec": {"l2CacheBackend": "tieredstorage"}}
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "prefixaware"}
    assert spec["worker"]["modelInvocationPort"] == {"containerPort": 8000, "name": "http"}
    assert spec["worker"]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert spec["tlsConfig"] == {"tlsCertificateOutputS3Uri": "s3://my-certs/tls"}


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"invocationPort": 8080}, "IEC001", "invocationPort"),
        ({"image": "lmsysorg/sglang:v0.5.3", "args": ["--model-path", "/opt/ml/model"], "kvCache": None},
         "IEC001", "invocationPort"),  # SGLang listens on 30000
        ({"servedModelName": "qwen-chat"}, "IEC002", "servedModelName"),
        ({"name": "q" * 64}, "IEC003", "name"),
        ({"endpointName": "e" * 64}, "IEC003", "endpointName"),
        ({"modelName": "qwen_3"}, "IEC003", "modelName"),
        ({"image": "lmsysorg/sglang:v0.5.3", "args": ["--model-path", "/opt/ml/model", "--port", "8000"]},
         "IEC004", "kvCache"),
        ({"kvCache": {"enableL2": True}}, "IEC005", "kvCache.l2Backend"),
        ({"kvCache": {"enableL2": True, "l2Backend": "redis"}}, "IEC005", "kvCache.l2Url"),
        ({"kvCache": {"enableL2": True, "l2Backend": "redis", "l2Url": "http://redis"}}, "IEC005", "kvCache.l2Url"),
        ({"kvCache": {"l2Backend": "redis", "l2Url": "redis://r:6379"}}, "IEC005", "kvCache.enableL2"),
        ({"kvCache": None, "routingStrategy": "kvaware"}, "IEC006", "routingStrategy"),
        ({"instanceType": "ml.g6.4xlarge"}, "IEC007", "gpuCount"),  # 1 GPU, gpuCount 2
        ({"instanceType": "ml.c5.xlarge"}, "IEC007", "instanceType"),
        ({"gpuCount": 1, "instanceType": "ml.g6.4xlarge"}, "IEC007", "gpuCount"),  # TP 2 > 1 GPU
        ({"modelSource": {"type": "s3", "s3Bucket": "b"}}, "IEC008", "s3Region"),
        ({"modelSource": {"type": "huggingface", "huggingFaceModelId": "qwen"}}, "IEC008", "huggingFaceModelId"),
        ({"tlsOutputS3Uri": "https://bucket/tls"}, "IEC009", "tlsOutputS3Uri"),
        ({"autoscaling": {"minReplicas": 3, "maxReplicas": 2, "prometheus": {"query": "up", "targetValue": 1}}},
         "IEC011", "autoscaling.minReplicas"),
        ({"autoscaling": {"maxReplicas": 4}}, "IEC011", "autoscaling"),  # no trigger
        ({"autoscaling": {"maxReplicas": 4, "prometheus": {"query": "up", "targetValue": 1,
                                                            "serverAddress": "http://prometheus.monitoring:9090"}}},
         "IEC011", "autoscaling.prometheus.serverAddress"),  # the operator's CRD takes an AMP workspace URL only
    ],
)
def test_each_rule_refuses_its_example_with_its_code_and_a_fix(changes: dict[str, Any], code: str, field: str) -> None:
    verdict = lint_request(request(**changes))
    assert not verdict.ok
    hits = [f for f in verdict.findings if f.code == code and f.field == field]
    assert hits, verdict.findings
    assert all(f.fix and f.message and f.severity == "error" for f in hits)


def test_routing_with_one_replica_is_only_a_warning() -> None:
    verdict = lint_request(request(replicas=1))
    assert verdict.ok
    assert [(f.code, f.severity) for f in verdict.findings] == [("IEC006", "warning")]


SCALING: dict[str, Any] = {
    "minReplicas": 1, "maxReplicas": 4, "pollingInterval": 15, "cooldownPeriod": 120,
    "prometheus": {"query": 'sum(vllm:num_requests_waiting{app="qwen"})', "targetValue": 5,
                   "serverAddress": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-45ef"},
    "cloudwatch": {"namespace": "AWS/SageMaker", "metricName": "Invocations", "targetValue": 100,
                   "dimensions": [{"name": "EndpointName", "value": "qwen"}], "metricStat": "Sum",
                   "metricCollectionPeriod": 60},
}


def test_autoscaling_renders_the_operators_autoscaling_spec_and_replicas_outside_it_warn() -> None:
    verdict = lint_request(request(autoscaling=SCALING))
    assert verdict.ok and verdict.findings == []
    assert verdict.manifest["spec"]["autoScalingSpec"] == {
        "minReplicaCount": 1, "maxReplicaCount": 4, "pollingInterval": 15, "cooldownPeriod": 120,
        "prometheusTrigger": {"query": 'sum(vllm:num_requests_waiting{app="qwen"})', "targetValue": 5.0,
                              "metricType": "Average", "serverAddress": SCALING["prometheus"]["serverAddress"]},
        "cloudWatchTrigger": {"namespace": "AWS/SageMaker", "metricName": "Invocations", "targetValue": 100.0,
                              "metricStat": "Sum", "metricType": "Average", "metricCollectionPeriod": 60,
                              "dimensions": [{"name": "EndpointName", "value": "qwen"}]},
    }
    outside = lint_request(request(autoscaling={**SCALING, "minReplicas": 3}))
    assert outside.ok and [(f.code, f.field, f.severity) for f in outside.findings] == [
        ("IEC011", "replicas", "warning")]
    assert "autoScalingSpec" not in lint_request(request()).manifest["spec"]


def test_the_invocation_path_defaults_to_the_operators_own() -> None:
    # The CRD's default: vLLM and SGLang answer an OpenAI chat body on /invocations, and InvokeEndpoint posts there.
    assert lint_request(request()).manifest["spec"]["invocationEndpoint"] == "invocations"
    chosen = lint_request(request(invocationEndpoint="v1/chat/completions"))
    assert chosen.manifest["spec"]["invocationEndpoint"] == "v1/chat/completions"
