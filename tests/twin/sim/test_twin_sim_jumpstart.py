"""The twin's JumpStart operator: a replica takes every GPU of its instance type (a JumpStartModel has no resources
field), and a model without a SageMaker endpoint name is served through its Service only."""

from __future__ import annotations

import json
from typing import Any

from hyperpod_twin.sim.plugin import install_crds
from tests.support.sim import SimCluster

GROUP, PLURAL = "inference.sagemaker.aws.amazon.com", "jumpstartmodels"


def jumpstart(name: str, instance_type: str, endpoint: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"model": {"modelId": "huggingface-llm-qwen2-5-7b-instruct", "acceptEula": False},
                            "server": {"instanceType": instance_type}, "replicas": 1}
    if endpoint is not None:
        spec["sageMakerEndpoint"] = {"name": endpoint}
    return {"apiVersion": f"{GROUP}/v1", "kind": "JumpStartModel",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_a_jumpstart_replica_takes_the_instances_gpus_and_needs_no_endpoint(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "inference-operator")
    cluster.add_node("i-0a000000000000001", instance_type="ml.g5.12xlarge")  # 4 A10G
    cluster.create(GROUP, PLURAL, jumpstart("qwen", "ml.g5.12xlarge", endpoint=""))  # "": none (the CRD default)
    cluster.advance(6)
    model = cluster.get(GROUP, PLURAL, "qwen")
    assert model["status"]["state"] == "DeploymentComplete"
    assert "endpoints" not in model["status"]  # nothing registered with SageMaker
    [pod] = cluster.list("", "pods", "default")
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert {e["name"]: e["value"] for e in container["env"]}["SM_NUM_GPUS"] == "4"
    assert cluster.get("", "services", "qwen")["spec"]["ports"][0]["port"] == 8080
    handler = cluster.sim.runtime.pod_http.lookup("default", pod["metadata"]["name"], 8080)
    assert handler is not None
    body = json.dumps({"messages": [{"role": "user", "content": "hi through the service"}]}).encode()
    answer = json.loads(handler("POST", "/invocations", "", {}, body).body)
    assert "hi through the service" in answer["choices"][0]["message"]["content"]


def test_a_second_replica_does_not_fit_on_the_same_instance(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "inference-operator")
    cluster.add_node("i-0a000000000000002", instance_type="ml.g5.12xlarge")
    obj = jumpstart("two", "ml.g5.12xlarge", endpoint="two")
    obj["spec"]["replicas"] = 2
    cluster.create(GROUP, PLURAL, obj)
    cluster.advance(6)
    pods = cluster.list("", "pods", "default")
    assert len(pods) == 2
    assert sorted(bool(p["spec"].get("nodeName")) for p in pods) == [False, True]  # 4 GPUs each: one node, one pod
    assert cluster.get(GROUP, PLURAL, "two")["status"]["state"] == "DeploymentInProgress"
