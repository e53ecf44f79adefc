"""Self-managed inference on the twin through MCP: deploy vLLM on one GPU, poll to ready, list, call the model;
the guardrails refuse a missing gpuCount, TP above gpuCount, no free GPU and a CPU-only instance type."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.waits import until

COMMAND = "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280 --tensor-parallel-size 1"


def test_deploy_vllm_poll_list_call_and_the_guardrails(cp: Running, twin: TwinProcess, tmp_path: Any) -> None:
    with cp.client() as client:
        make_hyperpod(client, "inf1")  # one ml.g6.4xlarge node: 1 GPU
    # Refused before anything is created.
    refused = mcp_raw(cp, [
        ("inference_deploy_container", {"deploymentCommand": COMMAND}),
        ("inference_deploy_container", {"deploymentCommand": COMMAND.replace("size 1", "size 2"), "gpuCount": 1}),
        ("inference_deploy_container", {"deploymentCommand": COMMAND, "gpuCount": 1,
                                        "instanceTypes": ["ml.c5.xlarge"]}),
    ])
    missing, too_parallel, cpu_only, _description = refused
    assert missing["isError"] and missing["payload"]["error"]["code"] == "INVALID_INPUT"
    assert "gpuCount" in missing["payload"]["error"]["message"]
    assert too_parallel["isError"] and "tensor parallel 2 x pipeline parallel 1 = 2" in (
        too_parallel["payload"]["error"]["message"]) and "gpuCount is 1" in too_parallel["payload"]["error"]["message"]
    assert cpu_only["isError"] and "ml.c5.xlarge has no NVIDIA GPU" in cpu_only["payload"]["error"]["message"]
    core = kube(twin, tmp_path, "inf1")
    assert not k8s.AppsV1Api(core.api_client).list_namespaced_deployment("default").items

    [ref] = mcp_calls(cp, [("inference_deploy_container", {
        "deploymentCommand": COMMAND, "gpuCount": 1, "serviceType": "clusterip", "deploymentName": "qwen"})])
    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["result"]["service"] == "qwen-service" and view["result"]["model"] == "Qwen/Qwen3-0.6B"
    pod = core.list_namespaced_pod("default", label_selector="app.kubernetes.io/name=qwen").items[0]
    assert pod.spec.containers[0].resources.requests["nvidia.com/gpu"] == "1"
    assert pod.spec.node_name.startswith("hyperpod-i-")

    # The list is served from the cluster's watches, which see the Deployment's ready replica a moment after the
    # operation does: wait for it there, as an agent polling the list would.
    until(lambda: [s["replicasReady"] for s in mcp_calls(cp, [("inference_list_services", {})])[0]["services"]]
          == [1], "the model server listed from the watches with its replica ready")
    listed, answer, public = mcp_calls(cp, [
        ("inference_list_services", {}),
        ("inference_call_model", {"service_name": "qwen", "prompt": "Say hello", "max_tokens": 32}),
        ("inference_list_public_services", {}),
    ])
    [service] = listed["services"]
    assert service["name"] == "qwen" and service["engine"] == "vllm" and service["model"] == "Qwen/Qwen3-0.6B"
    assert service["replicasReady"] == service["replicasDesired"] == 1 and service["gpusPerReplica"] == 1
    assert service["url"] == "http://qwen-service.default.svc.cluster.local:8000"
    assert answer["answer"] and "Say hello" in answer["answer"] and answer["usage"]["completion_tokens"] > 0
    assert public["count"] == 0

    # The only GPU is taken now: a second model is refused, saying where GPUs are (none free).
    [busy, _] = mcp_raw(cp, [("inference_deploy_container", {"deploymentCommand": COMMAND, "gpuCount": 1})])
    assert busy["isError"] and busy["payload"]["error"]["code"] == "PRECONDITION_FAILED"
    assert "ml.g6.4xlarge: 0 of 1 free" in busy["payload"]["error"]["message"]

    [gone] = mcp_calls(cp, [("inference_undeploy", {"deploymentName": "qwen"})])
    assert mcp_wait(cp, gone["operationId"])["status"] == "SUCCEEDED"
    until(lambda: mcp_calls(cp, [("inference_list_services", {})])[0]["count"] == 0,
          "the model server gone from the watched list")
