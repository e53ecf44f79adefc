"""The original argument names of inference_deploy_container and inference_call_model, through MCP on the twin:
gpuMemory picks the smallest cluster type whose GPUs hold it, a comma-separated instanceTypes is a preference list,
cpuRequest/memoryRequest become the container's requests, local_port is accepted and ignored with a note; and each
one's refusals name the field, why, and the cluster's types."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.support.flows import add_group, kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import shared_control_plane

TAG = "orig1"
COMMAND = "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280"


def _prepare(client: Any) -> None:
    make_hyperpod(client, TAG)  # one ml.g6.4xlarge: 1 L4, 24 GiB
    view = add_group(client, instanceGroupName="big", instanceType="ml.g6e.xlarge", instanceCount=1,
                     availabilityZone="us-west-2c")  # one ml.g6e.xlarge: 1 L40S, 48 GiB
    assert view["status"] == "SUCCEEDED", view


shared_cp = shared_control_plane(_prepare, status_cache_seconds=0.5)


@pytest.fixture(scope="module")
def core(shared_cp: Running, twin_process: TwinProcess, tmp_path_factory: pytest.TempPathFactory) -> k8s.CoreV1Api:
    """An admin client of the shared cluster."""
    return kube(twin_process, tmp_path_factory.mktemp("kube"), TAG)


def _error(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"], result
    error: dict[str, Any] = result["payload"]["error"]
    return error


def _affinity_types(core: k8s.CoreV1Api, name: str) -> list[str]:
    dep = k8s.AppsV1Api(core.api_client).read_namespaced_deployment(name, "default")
    [term] = dep.spec.template.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution \
        .node_selector_terms
    [types] = [e.values for e in term.match_expressions if e.key == "node.kubernetes.io/instance-type"]
    return list(types)


def test_the_original_sizing_arguments_are_refused_with_reasons(shared_cp: Running, core: k8s.CoreV1Api) -> None:
    base = {"deploymentCommand": COMMAND, "gpuCount": 1}
    huge, unheld, absent, both, bad_cpu, bare_memory, too_many_cpus, _ = mcp_raw(shared_cp, [
        ("inference_deploy_container", {**base, "gpuMemory": 500}),
        ("inference_deploy_container", {**base, "gpuMemory": "64Gi"}),
        ("inference_deploy_container", {**base, "instanceTypes": "ml.p5.4xlarge, ml.g5.xlarge"}),
        ("inference_deploy_container", {**base, "instanceTypes": "ml.g6.4xlarge", "gpuMemory": 40}),
        ("inference_deploy_container", {**base, "cpuRequest": "four"}),
        ("inference_deploy_container", {**base, "memoryRequest": "16"}),
        ("inference_deploy_container", {**base, "instanceTypes": "ml.g6e.xlarge", "cpuRequest": "4"}),
    ])
    assert _error(huge)["code"] == "INVALID_INPUT"
    assert "gpuMemory" in _error(huge)["message"] and "180 GiB on ml.p6-b200.48xlarge" in _error(huge)["message"]
    cluster_types = "ml.g6.4xlarge (24 GiB per GPU), ml.g6e.xlarge (48 GiB per GPU)"
    assert _error(unheld)["code"] == "PRECONDITION_FAILED" and cluster_types in _error(unheld)["message"]
    assert "ml.p4de.24xlarge" in _error(unheld)["hint"]  # a type that would hold 64 GiB per GPU
    assert _error(absent)["code"] == "PRECONDITION_FAILED"
    assert "none of instanceTypes (ml.p5.4xlarge, ml.g5.xlarge)" in _error(absent)["message"]
    assert cluster_types in _error(absent)["message"]
    assert _error(both)["code"] == "PRECONDITION_FAILED" and "less than 40 GiB" in _error(both)["message"]
    assert _error(bad_cpu)["code"] == "INVALID_INPUT" and "cpuRequest" in _error(bad_cpu)["message"]
    assert "Kubernetes quantity" in _error(bad_cpu)["message"]
    assert _error(bare_memory)["code"] == "INVALID_INPUT" and "memoryRequest" in _error(bare_memory)["message"]
    assert '"16Gi"' in _error(bare_memory)["hint"]
    assert _error(too_many_cpus)["code"] == "INVALID_INPUT"
    assert "cpuRequest: 4 is more than a ml.g6e.xlarge node gives pods (3 of its 4 vCPUs" in (
        _error(too_many_cpus)["message"])
    assert not k8s.AppsV1Api(core.api_client).list_namespaced_deployment("default").items


def test_gpu_memory_and_a_preference_list_choose_the_type_and_requests_are_the_callers(
    shared_cp: Running, core: k8s.CoreV1Api
) -> None:
    # 40 GiB per GPU: only the L40S type holds it, though the L4 type has a free GPU too.
    # A preference list: the first type the cluster has (ml.p5.4xlarge is not in it) is used.
    [big] = mcp_calls(shared_cp, [("inference_deploy_container", {
        "deploymentCommand": COMMAND, "gpuCount": 1, "deploymentName": "big", "gpuMemory": "40Gi", "cpuRequest": "2",
        "memoryRequest": "8Gi"})])
    assert mcp_wait(shared_cp, big["operationId"])["status"] == "SUCCEEDED"
    [pref] = mcp_calls(shared_cp, [("inference_deploy_container", {
        "deploymentCommand": COMMAND, "gpuCount": 1, "deploymentName": "pref",
        "instanceTypes": "ml.p5.4xlarge,ml.g6.4xlarge, ml.g6e.xlarge", "cpuRequest": "1500m"})])
    assert mcp_wait(shared_cp, pref["operationId"])["status"] == "SUCCEEDED"
    assert _affinity_types(core, "big") == ["ml.g6e.xlarge"]
    assert _affinity_types(core, "pref") == ["ml.g6.4xlarge"]
    nodes = {n.metadata.name: n.metadata.labels["node.kubernetes.io/instance-type"]
             for n in core.list_node().items}
    for name, instance_type in (("big", "ml.g6e.xlarge"), ("pref", "ml.g6.4xlarge")):
        [pod] = core.list_namespaced_pod("default", label_selector=f"app.kubernetes.io/name={name}").items
        assert nodes[pod.spec.node_name] == instance_type
    [big_pod] = core.list_namespaced_pod("default", label_selector="app.kubernetes.io/name=big").items
    requests = big_pod.spec.containers[0].resources.requests
    assert (requests["cpu"], requests["memory"], requests["nvidia.com/gpu"]) == ("2", "8192Mi", "1")
    [pref_pod] = core.list_namespaced_pod("default", label_selector="app.kubernetes.io/name=pref").items
    assert pref_pod.spec.containers[0].resources.requests["cpu"] == "1500m"

    [answer] = mcp_calls(shared_cp, [("inference_call_model", {"service_name": "pref", "prompt": "Say hello",
                                                               "max_tokens": 16, "local_port": 8080})])
    assert answer["answer"] and answer["route"] == "service-proxy"
    assert "local_port 8080 was ignored: no port-forward is needed" in answer["note"]
    [plain] = mcp_calls(shared_cp, [("inference_call_model", {"service_name": "pref", "prompt": "hi",
                                                              "max_tokens": 8})])
    assert plain["note"] is None
