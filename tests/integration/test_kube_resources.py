"""cluster_list_workloads through REST and MCP against the twin: pods, services, deployments of the active cluster."""

from __future__ import annotations

import json
from typing import Any

from instantstart.twin_process import TwinProcess
from tests.support.faces import mcp_http
from tests.support.servers import Running
from tests.support.waits import until, wait_terminal


async def test_workloads_of_the_active_cluster_over_rest_and_mcp(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        none = client.get("/api/v1/clusters/workloads")
        assert none.status_code == 412 and none.json()["error"]["code"] == "PRECONDITION_FAILED"
        ref = client.post(
            "/api/v1/clusters",
            json={"clusterTag": "wl", "instanceType": "ml.g6.4xlarge", "instanceCount": 1,
                  "availabilityZone": "us-west-2c"},
        )
        assert ref.status_code == 202, ref.text
        assert wait_terminal(client, ref.json()["operationId"], timeout=300)["status"] == "SUCCEEDED"

        def metrics_server_ready() -> dict[str, Any] | None:
            # Verification covers nodes, GPUs, the storage claim and the dependencies stage's record, not the
            # add-on's replicas, which start on the nodes that joined just before: wait for them, do not race them.
            listing: dict[str, Any] = client.get("/api/v1/clusters/workloads").json()
            by_name = {(d["namespace"], d["name"]): d for d in listing["deployments"]}
            found = by_name.get(("kube-system", "metrics-server"))
            return listing if found and found["replicas"] >= 1 and found["readyReplicas"] == found["replicas"] else None

        result = until(metrics_server_ready, "metrics-server's replicas Ready in cluster_list_workloads")
        status = client.get("/api/v1/clusters/status").json()
        only = client.get("/api/v1/clusters/workloads", params={"namespace": "kube-system"}).json()
        bad = client.get("/api/v1/clusters/workloads", params={"namespace": "Not_A_Namespace"})
        server_pod = next(p for p in result["pods"] if p["name"].startswith("metrics-server") and p["node"])
        described = client.get("/api/v1/diagnostics/node", params={"nodeId": server_pod["node"]})
    assert result["clusterTag"] == "wl" and result["namespace"] is None and not result["truncated"]
    deployments = {(d["namespace"], d["name"]): d for d in result["deployments"]}
    metrics = deployments[("kube-system", "metrics-server")]
    assert metrics["replicas"] >= 1 and metrics["readyReplicas"] == metrics["replicas"]
    services = {(s["namespace"], s["name"]): s for s in result["services"]}
    assert "443/TCP" in services[("default", "kubernetes")]["ports"]
    nodes = {n["name"] for n in status["nodes"]}
    running = [p for p in result["pods"] if p["phase"] == "Running"]
    assert running and all(p["node"] in nodes for p in running)
    assert all(p["ready"].count("/") == 1 for p in result["pods"])
    assert only["namespace"] == "kube-system" and only["pods"]
    assert {p["namespace"] for p in only["pods"] + only["services"] + only["deployments"]} == {"kube-system"}
    assert bad.status_code == 422
    assert bad.json()["error"]["details"]["fields"][0]["field"] == "namespace"
    # node_describe reads the same API server's Node and the pods bound to it (wire dicts, no client models).
    assert described.status_code == 200, described.text
    node = described.json()
    assert node["kubernetesFound"] and node["nodeName"] == server_pod["node"]
    assert ("kube-system", server_pod["name"]) in {(p["namespace"], p["name"]) for p in node["pods"]}
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["conditions"])
    assert node["labels"]["node.kubernetes.io/instance-type"] == "ml.g6.4xlarge" and node["gpus"]["allocatable"] >= 1
    async with mcp_http(cp) as mcp:
        answer = await mcp.call_tool("cluster_list_workloads", {"namespace": "default"})
        payload = json.loads(answer.content[0].text)
    assert not answer.is_error, payload
    assert [(s["namespace"], s["name"]) for s in payload["services"]] == [("default", "kubernetes")]
