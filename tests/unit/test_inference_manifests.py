"""Self-managed model servers: command parsing, engine recognition and the objects built from them."""

from __future__ import annotations

from datetime import datetime

import pytest

from instantstart.manifests import inference as inference_manifests
from instantstart.manifests import labels


def test_engines_ports_and_parallelism_are_read_from_the_command() -> None:
    vllm = inference_manifests.tokens("vllm serve Qwen/Qwen3-0.6B --max-model-len 1280 --tensor-parallel-size 2 "
                    "--pipeline-parallel-size 2")
    assert inference_manifests.engine_of(vllm).name == "vllm" and inference_manifests.parallelism(vllm) == (2, 2)
    assert inference_manifests.served_model(vllm) == "Qwen/Qwen3-0.6B"
    sglang = inference_manifests.tokens(
        "python3 -m sglang.launch_server --model-path /s3/models/qwen --tp=4 --port 30001"
    )
    engine = inference_manifests.engine_of(sglang)
    assert engine.name == "sglang" and inference_manifests.parallelism(sglang) == (4, 1)
    assert (
        inference_manifests.listening_port(sglang, engine, 8000) == 30001
        and inference_manifests.served_model(sglang) == "/s3/models/qwen"
    )
    other = inference_manifests.tokens("text-generation-launcher --model-id gpt2")
    assert inference_manifests.engine_of(other).name == "other" and inference_manifests.parallelism(other) == (1, 1)
    assert inference_manifests.engine_of(other, "ghcr.io/vllm-project/vllm:latest").name == "vllm"
    named = inference_manifests.tokens("vllm serve /models/x --served-model-name qwen-small")
    assert inference_manifests.served_model(named) == "qwen-small"
    assert (
        inference_manifests.default_name(inference_manifests.ENGINES["vllm"], datetime(2026, 12, 3, 8, 5, 9))
        == "vllm-model-261203-080509"
    )


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("", "empty"),
        ("vllm serve 'unterminated", "cannot parse"),
        ("vllm serve x; rm -rf /", "shell operators"),
        ("vllm serve x && echo hi", "shell operators"),
        ("vllm serve x --tensor-parallel-size two", "positive whole number"),
    ],
)
def test_unreadable_commands_are_refused(command: str, problem: str) -> None:
    with pytest.raises(inference_manifests.CommandError, match=problem):
        inference_manifests.parallelism(inference_manifests.tokens(command))


def _spec(**overrides: object) -> inference_manifests.ServerSpec:
    values: dict[str, object] = dict(
        name="vllm-model-1", namespace="default", engine="vllm", command=["vllm", "serve", "q"],
        image="vllm/vllm-openai:v0.11.0", gpu_count=2, replicas=1, instance_types=["ml.g6.12xlarge"], port=8000,
        service_type="clusterip", model="q", token_secret="vllm-model-1-hf-token", s3_claim=None,
    )
    values.update(overrides)
    return inference_manifests.ServerSpec.model_validate(values)


def test_the_deployment_requests_its_gpus_and_is_pinned_to_gpu_types() -> None:
    dep = inference_manifests.deployment(_spec())
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"] == {
        "requests": {inference_manifests.GPU: "2"},
        "limits": {inference_manifests.GPU: "2"},
    }
    assert container["command"] == ["vllm", "serve", "q"]  # an argument list: no shell
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    pinned = {"key": labels.INSTANCE_TYPE_LABEL, "operator": "In", "values": ["ml.g6.12xlarge"]}
    assert pinned in terms[0]["matchExpressions"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    # The token only ever as a reference to the Secret.
    refs = [e["valueFrom"]["secretKeyRef"] for e in container["env"]]
    assert refs and all(r == {"name": "vllm-model-1-hf-token", "key": "token"} for r in refs)
    assert all("value" not in e for e in container["env"])
    assert dep["spec"]["selector"] == {"matchLabels": {inference_manifests.LABEL_APP: "vllm-model-1"}}


def test_services_by_type() -> None:
    internal = inference_manifests.service(_spec(), load_balancer_controller=True)
    assert internal["spec"]["type"] == "ClusterIP" and internal["metadata"]["name"] == "vllm-model-1-service"
    external = inference_manifests.service(_spec(service_type="external"), load_balancer_controller=True)
    assert external["spec"]["type"] == "LoadBalancer"
    assert external["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-type"] == "external"
    plain = inference_manifests.service(_spec(service_type="external"), load_balancer_controller=False)
    assert "service.beta.kubernetes.io/aws-load-balancer-type" not in plain["metadata"]["annotations"]
    pool = _spec(service_type="modelpool")
    assert (
        inference_manifests.deployment(pool)["spec"]["template"]["metadata"]["labels"][
            inference_manifests.LABEL_BUSINESS
        ]
        == inference_manifests.UNASSIGNED
    )
    assert inference_manifests.service(pool, load_balancer_controller=False)["spec"]["selector"] == {
        inference_manifests.LABEL_BUSINESS: "vllm-model-1"
    }


def test_vllm_and_sglang_get_an_explicit_port_and_sglang_listens_beyond_loopback() -> None:
    assert inference_manifests.with_port(["vllm", "serve", "q"], inference_manifests.ENGINES["vllm"], 8000)[-2:] == [
        "--port",
        "8000",
    ]
    words = inference_manifests.with_port(
        ["python", "-m", "sglang.launch_server"], inference_manifests.ENGINES["sglang"], 30000
    )
    assert words[-4:] == ["--port", "30000", "--host", "0.0.0.0"]
    assert inference_manifests.with_port(["tgi"], inference_manifests.ENGINES["other"], 8080) == ["tgi"]
