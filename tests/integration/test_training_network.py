"""job_get_status says which network a multi-node job's NCCL chose, from its pods' NCCL_DEBUG=INFO lines: a 2-node
job with a node whose EFA is missing logs NET/Socket and is flagged; the same job with the EFA devices requested on
healthy nodes logs NET/OFI and is not; a single-node job reads no logs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.integration.test_training_jobs import RUN_LONG, status_until
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_wait
from tests.support.servers import SSL_CONTEXT, Running

TAG = "net2"
TYPE = "ml.g5.12xlarge"  # 4 GPUs and 1 EFA device per node
HPJOB = ("sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs")


def efa(twin: TwinProcess, node: str, works: bool) -> None:
    """Break or mend a node's EFA provider through the twin's hardware control endpoint."""
    response = httpx.post(f"{twin.endpoint_url}/_twin/nodes/{node.removeprefix('hyperpod-')}/hardware",
                          json={"efa": works}, timeout=30, verify=SSL_CONTEXT)
    assert response.status_code == 200, response.text


def test_job_status_flags_a_multi_node_job_on_sockets(cp: Running, twin: TwinProcess, tmp_path: Path) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG, acceleratedInstanceType=TYPE, acceleratedInstanceCount=2)
    [enable] = mcp_calls(cp, [("hyperpod_update_advanced_features", {"trainingOperator": {"enabled": True}})])
    assert mcp_wait(cp, enable["operationId"])["status"] == "SUCCEEDED"
    core = kube(twin, tmp_path, TAG)
    nodes = sorted(n.metadata.name for n in core.list_node().items)
    efa(twin, nodes[1], works=False)

    job = {"jobName": "ring", "image": "example/train:1", "command": "train.py", "instanceType": TYPE, "nodes": 2,
           "env": {"NCCL_DEBUG": "INFO"}, "podAnnotations": RUN_LONG}
    [ref] = mcp_calls(cp, [("training_job_submit", job)])
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"
    flagged = status_until(cp, "ring", lambda s: s["job"]["state"] == "Running" and s["network"]["transport"] != (
        "unknown"))
    network = flagged["network"]
    assert network["transport"] == "socket" and set(network["pods"]) == {"ring-pod-0", "ring-pod-1"}
    assert "socket" in network["pods"].values()
    assert "Multi-node job without EFA" in network["warning"] and "NET/Socket" in network["warning"]
    assert "vpc.amazonaws.com/efa" in network["warning"] and "cluster_validate" in network["warning"]

    # The same job asking for the EFA devices, on mended nodes: NCCL selects the EFA provider; no warning.
    objects = k8s.CustomObjectsApi(core.api_client)
    submitted: dict[str, Any] = objects.get_namespaced_custom_object(*HPJOB, "ring")
    [gone] = mcp_calls(cp, [("training_job_delete", {"jobName": "ring"})])
    assert mcp_wait(cp, gone["operationId"])["status"] == "SUCCEEDED"
    efa(twin, nodes[1], works=True)
    with_efa = {"apiVersion": submitted["apiVersion"], "kind": submitted["kind"], "metadata": {"name": "ring-efa"},
                "spec": copy.deepcopy(submitted["spec"])}
    container = with_efa["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    for part in ("limits", "requests"):
        container.setdefault("resources", {}).setdefault(part, {})["vpc.amazonaws.com/efa"] = "1"
    objects.create_namespaced_custom_object(*HPJOB, with_efa)
    fine = status_until(cp, "ring-efa", lambda s: s["job"]["state"] == "Running" and s["network"]["transport"] != (
        "unknown") and len(s["network"]["pods"]) == 2)
    assert fine["network"] == {"transport": "efa", "pods": {"ring-efa-pod-0": "efa", "ring-efa-pod-1": "efa"},
                               "warning": None}
    [gone] = mcp_calls(cp, [("training_job_delete", {"jobName": "ring-efa"})])
    assert mcp_wait(cp, gone["operationId"])["status"] == "SUCCEEDED"

    # One node: NCCL uses no network between nodes, nothing is read.
    [single] = mcp_calls(cp, [("training_job_submit", {**job, "jobName": "solo", "nodes": 1})])
    assert mcp_wait(cp, single["operationId"])["status"] == "SUCCEEDED"
    solo = status_until(cp, "solo", lambda s: s["job"]["state"] == "Running")
    assert solo["network"] == {"transport": "single-node", "pods": {}, "warning": None}
