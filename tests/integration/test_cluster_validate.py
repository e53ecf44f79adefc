"""cluster_validate on a 4-node twin cluster (ml.g5.12xlarge: 4 GPUs, 1 EFA each) with one slow node and one
node without EFA: DCGM and EFA checks per node, nccl-tests per ring pair and across all nodes (MPIJobs run by the
twin's MPI operator), the straggler and the EFA-less node each named with its fix; over MCP; objects cleaned up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import SSL_CONTEXT, Running
from tests.support.waits import until

TAG = "val4"
TYPE = "ml.g5.12xlarge"
MPIJOB_CRD = Path(__file__).parents[2] / "src/hyperpod_twin/charts/hyperpod-dependencies/crds/kubeflow.org_mpijobs.yaml"


def hardware(twin: TwinProcess, node: str, **faults: Any) -> None:
    """Inject hardware faults on a node through the twin's control endpoint."""
    instance = node.removeprefix("hyperpod-")
    response = httpx.post(f"{twin.endpoint_url}/_twin/nodes/{instance}/hardware", json=faults, timeout=30,
                          verify=SSL_CONTEXT)
    assert response.status_code == 200, response.text


def validate(cp: Running, **args: Any) -> dict[str, Any]:
    """cluster_validate over MCP, to its terminal state; the operation view."""
    [ref] = mcp_calls(cp, [("cluster_validate", args)])
    assert ref["statusTool"] == "operation_get"
    return mcp_wait(cp, ref["operationId"], limit=240)


def test_validation_names_the_straggler_and_the_node_without_efa(cp: Running, twin: TwinProcess,
                                                                 tmp_path: Path) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG, acceleratedInstanceType=TYPE, acceleratedInstanceCount=4)
    core = kube(twin, tmp_path, TAG)
    nodes = until(lambda: sorted(n.metadata.name for n in core.list_node().items
                                 if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []))
                  or None, "four Ready nodes", timeout=60)
    assert len(nodes) == 4, nodes
    healthy_a, slow, no_efa, healthy_b = nodes
    hardware(twin, slow, slow=True)
    hardware(twin, no_efa, efa=False)
    bad = httpx.post(f"{twin.endpoint_url}/_twin/nodes/{slow.removeprefix('hyperpod-')}/hardware",
                     json={"slow": "yes"}, timeout=30, verify=SSL_CONTEXT)
    assert bad.status_code == 400 and "slow must be true or false" in bad.text

    # Without the MPI operator's CRD the node checks still run; the NCCL part says why it was skipped.
    first = validate(cp)
    assert first["status"] == "SUCCEEDED", first
    assert "MPIJob CRD is not installed" in first["result"]["ncclSkipped"] and not first["result"]["passed"]
    assert {n["node"]: n["efa"] for n in first["result"]["nodes"]}[no_efa] == "missing"

    ext = k8s.ApiextensionsV1Api(core.api_client)
    ext.create_custom_resource_definition(yaml.safe_load(MPIJOB_CRD.read_text()))
    view = validate(cp)
    assert view["status"] == "SUCCEEDED", view
    result = view["result"]
    by_node = {n["node"]: n for n in result["nodes"]}
    assert sorted(by_node) == nodes and result["ncclSkipped"] is None
    assert result["stragglers"] == sorted([slow, no_efa]) and result["failedNodes"] == sorted([slow, no_efa])
    assert not result["passed"] and result["summary"].startswith("2 of 4 nodes passed")
    for node in (healthy_a, healthy_b):
        assert by_node[node]["verdict"] == "passed" and by_node[node]["dcgm"] == "passed"
        assert by_node[node]["efa"] == "ok" and by_node[node]["efaDevices"] == 1 and by_node[node]["gpus"] == 4
    [slow_problem] = by_node[slow]["problems"]
    assert slow_problem["check"] == "nccl" and slow_problem["problem"].startswith("straggler")
    assert slow_problem["nextStep"]["tool"] == "hyperpod_node_reboot"
    assert slow_problem["nextStep"]["arguments"] == {"nodeId": slow}
    [efa_problem] = by_node[no_efa]["problems"]
    assert efa_problem["check"] == "efa" and efa_problem["nextStep"]["tool"] == "hyperpod_node_replace"
    assert efa_problem["nextStep"]["arguments"] == {"nodeId": no_efa}

    # Per pair: every node in two ring pairs; EFA where both ends have it, sockets with the EFA-less node.
    pairs = {tuple(p["nodes"]): p for p in result["pairs"]}
    assert len(pairs) == 4 and all(p["status"] == "passed" for p in pairs.values())
    assert pairs[(healthy_a, slow)]["transport"] == "efa" and pairs[(slow, no_efa)]["transport"] == "socket"
    assert pairs[(healthy_b, healthy_a)]["busbwGbps"] > 3 * pairs[(healthy_a, slow)]["busbwGbps"]
    assert result["allNodes"]["nodes"] == nodes and result["allNodes"]["transport"] == "socket"
    assert by_node[healthy_a]["bestPairBusbwGbps"] == pairs[(healthy_b, healthy_a)]["busbwGbps"]

    # The check pods and the MPIJobs (with their pods) are gone.
    until(lambda: not [p for p in core.list_namespaced_pod("default").items
                       if (p.metadata.labels or {}).get("instantstart.io/validation")], "validation pods deleted",
          timeout=60)
    jobs = k8s.CustomObjectsApi(core.api_client).list_namespaced_custom_object("kubeflow.org", "v2beta1", "default",
                                                                               "mpijobs")
    assert jobs["items"] == []

    # Two chosen nodes, one with a GPU failing DCGM's memory test: replace it; one pair, no all-node run.
    hardware(twin, healthy_b, gpu="fail")
    two = validate(cp, nodes=[healthy_b, healthy_a])["result"]
    assert [n["node"] for n in two["nodes"]] == [healthy_a, healthy_b] and len(two["pairs"]) == 1
    assert two["allNodes"] is None and two["failedNodes"] == [healthy_b]
    [gpu_problem] = {n["node"]: n for n in two["nodes"]}[healthy_b]["problems"]
    assert gpu_problem["check"] == "dcgm" and gpu_problem["problem"] == "DCGM diagnostic failed: GPU Memory"
    assert gpu_problem["nextStep"] == {"tool": "hyperpod_node_replace", "arguments": {"nodeId": healthy_b},
                                       "why": gpu_problem["nextStep"]["why"]}

    # A node that is not in the cluster is refused before anything is recorded, naming the field and the nodes.
    [refused, description] = mcp_raw(cp, [("cluster_validate", {"nodes": ["hyperpod-i-0123456789abcdef0"]})])
    assert refused["isError"] and refused["payload"]["error"]["code"] == "NOT_FOUND"
    assert "nodes" in refused["payload"]["error"]["message"] and healthy_a in refused["payload"]["error"]["hint"]
    assert "hyperpod_node_replace" in description
