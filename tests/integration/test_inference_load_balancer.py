"""An external model server reached through its load balancer address, end to end on the twin: the twin gives the
LoadBalancer Service an address (status.loadBalancer.ingress) that answers and admits only its source ranges;
inference_list_public_services reports it; inference_call_model reaches a public server there with the API key from
its Secret (nothing through the API server's proxy), an internal one when asked (`via`), is dropped outside the
source ranges, and follows no address of a Service InstantStart did not create (uid)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.support.crash import twin_writes
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import shared_control_plane
from tests.support.waits import until

TAG = "lb1"
COMMAND = "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280"
KEY = "lb-Key-Only-In-A-Secret-4417"

shared_cp = shared_control_plane(lambda client: make_hyperpod(client, TAG, acceleratedInstanceCount=2),
                                 status_cache_seconds=0.5)


@pytest.fixture(scope="module")
def cluster(shared_cp: Running, twin_process: TwinProcess, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Running, TwinProcess, k8s.CoreV1Api]:
    """A public server `pub` (keyed, admitting loopback, where this control plane calls from) and an internal one
    `inner` whose source ranges leave the control plane out, both Ready."""
    core = kube(twin_process, tmp_path_factory.mktemp("kube"), TAG)
    for args in ({"deploymentName": "pub", "loadBalancerScheme": "internet-facing", "apiKey": KEY,
                  "sourceRanges": ["127.0.0.0/8"]},
                 {"deploymentName": "inner", "sourceRanges": ["10.0.0.0/16"]}):
        [ref] = mcp_calls(shared_cp, [("inference_deploy_container", {
            "deploymentCommand": COMMAND, "gpuCount": 1, "serviceType": "external", **args})])
        view = mcp_wait(shared_cp, ref["operationId"])
        assert view["status"] == "SUCCEEDED", view
        assert KEY not in json.dumps(view)
        assert str(view["result"]["loadBalancerUrl"]).startswith("http://127.")  # the twin's address, reported
    return shared_cp, twin_process, core


def _public_urls(cp: Running) -> dict[str, str | None]:
    [public] = mcp_calls(cp, [("inference_list_public_services", {})])
    return {s["name"]: s["url"] for s in public["services"]}


def _proxied(twin: TwinProcess) -> int:
    return sum(n for k, n in twin_writes(twin).items() if k.startswith("kube:") and "/proxy" in k)


def _error(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"], result
    error: dict[str, Any] = result["payload"]["error"]
    return error


def test_a_public_server_is_called_at_its_load_balancer_address_with_its_key(
    cluster: tuple[Running, TwinProcess, k8s.CoreV1Api]
) -> None:
    cp, twin, core = cluster
    until(lambda: all(str(u).startswith("http://127.") for u in _public_urls(cp).values()),
          "both load balancers have an address in the public list")
    urls = _public_urls(cp)
    svc = core.read_namespaced_service("pub-service", "default")
    [ingress] = svc.status.load_balancer.ingress
    assert urls["pub"] == f"http://{ingress.ip}:8000"
    [deployed] = [v for v in mcp_calls(cp, [("operation_list", {"kind": "inference_deploy"})])[0]["operations"]
                  if v["params"]["name"] == "pub"]
    assert deployed["result"]["loadBalancerUrl"] == urls["pub"]

    # The address answers as the engine does: the key is demanded there, and it passes with it.
    chat = {"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    assert httpx.post(f"{urls['pub']}/v1/chat/completions", json=chat, timeout=30).status_code == 401
    keyed = httpx.post(f"{urls['pub']}/v1/chat/completions", json=chat, timeout=30,
                       headers={"Authorization": f"Bearer {KEY}"})
    assert keyed.status_code == 200, keyed.text

    before = _proxied(twin)
    [answer] = mcp_calls(cp, [("inference_call_model", {"service_name": "pub", "prompt": "Say hello",
                                                        "max_tokens": 16})])
    assert answer["route"] == "load-balancer" and "Say hello" in answer["answer"]
    assert KEY not in json.dumps(answer)
    assert _proxied(twin) == before  # not through the API server's proxy

    # The internal server: called through the service proxy by default; at its address the control plane
    # (127.0.0.1) is outside its source ranges, so the connection is dropped.
    [inner] = mcp_calls(cp, [("inference_call_model", {"service_name": "inner", "prompt": "hi", "max_tokens": 8})])
    assert inner["route"] == "service-proxy" and inner["answer"]
    [dropped, _] = mcp_raw(cp, [("inference_call_model", {"service_name": "inner", "prompt": "hi",
                                                          "via": "load-balancer"})])
    assert _error(dropped)["code"] == "PROVIDER_ERROR" and "sourceRanges" in _error(dropped)["hint"]
    host = urlsplit(str(urls["inner"])).hostname
    assert host is not None and host in _error(dropped)["message"]


def test_the_address_of_a_service_instantstart_did_not_create_is_not_followed(
    cluster: tuple[Running, TwinProcess, k8s.CoreV1Api]
) -> None:
    cp, twin, core = cluster
    # A tenant replaces pub's Service with its own of the same name (same labels, another uid).
    old = core.read_namespaced_service("pub-service", "default")
    core.delete_namespaced_service("pub-service", "default", _preload_content=False)
    core.create_namespaced_service("default", {
        "metadata": {"name": "pub-service", "labels": old.metadata.labels, "annotations": old.metadata.annotations},
        "spec": {"type": "LoadBalancer", "selector": old.spec.selector,
                 "ports": [{"name": "http", "port": 8000, "targetPort": 8000}]}})
    until(lambda: bool(core.read_namespaced_service("pub-service", "default").status.load_balancer.ingress),
          "the tenant's Service has a load balancer address")
    before = _proxied(twin)
    [refused, _] = mcp_raw(cp, [("inference_call_model", {"service_name": "pub", "prompt": "hi"})])
    assert _error(refused)["code"] == "PRECONDITION_FAILED"
    assert "is not the Service InstantStart created" in _error(refused)["message"]
    assert KEY not in json.dumps(refused)
    assert _proxied(twin) == before
