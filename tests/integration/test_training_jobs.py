"""Training on the twin through MCP: the refusals (each naming what exists), the training operator enabled, a
PyTorch recipe job on 2 nodes Running with the default recovery budget, a killed pod restarted in place and
counted, the log tail, listing and deletion with its pods."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.support.faces import mcp_http
from tests.support.flows import add_group, kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait, tool_payload
from tests.support.servers import Running
from tests.support.twin import twin_client

TAG = "train1"
RUN_LONG = {"twin.instantstart.io/run-seconds": "1000000"}  # the twin's pods run until stopped
JOB = {"jobName": "plain", "image": "example/train:1", "command": "train.py --epochs 1",
       "instanceType": "ml.g6.4xlarge"}
def as_submitted(actual: Any, submitted: Any) -> Any:
    """`actual` restricted to the keys that were submitted: the API server adds the CRD's schema defaults
    (e.g. ttlSecondsAfterFinished, scaleUpSnoozeTimeInSeconds), as a real one does."""
    if isinstance(submitted, dict) and isinstance(actual, dict):
        return {k: as_submitted(actual.get(k), v) for k, v in submitted.items()}
    return actual


DEFAULT_POLICY = {"jobMaxRetryCount": 5, "cleanPodPolicy": "All", "restartPolicy": {
    "numRestartBeforeFullJobRestart": 3, "evalPeriodSeconds": 21600, "maxFullJobRestarts": 1}}


def status_until(cp: Running, name: str, predicate: Any, limit: int = 120) -> dict[str, Any]:
    """Poll job_get_status over MCP (wait_seconds in between) until `predicate(status)` holds."""

    async def run() -> dict[str, Any]:
        async with mcp_http(cp) as session:
            status: dict[str, Any] = {}
            for _ in range(limit):
                status = tool_payload(await session.call_tool("job_get_status", {"jobName": name}))
                if predicate(status):
                    return status
                await session.call_tool("wait_seconds", {"seconds": 1})
        raise AssertionError(f"{name} never reached the state: {status}")

    return asyncio.run(run())


def error(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"], result
    found: dict[str, Any] = result["payload"]["error"]
    return found


def test_recipe_job_on_two_nodes_recovers_in_place_and_the_refusals(
    cp: Running, twin: TwinProcess, tmp_path: Any
) -> None:
    sm: Any = twin_client(twin, "sagemaker")
    with cp.client() as client:
        make_hyperpod(client, TAG)
        # A Spot group (no nodes needed) of another type, for the elastic refusal.
        spot = add_group(client, instanceGroupName="spot-g", instanceType="ml.g6.8xlarge", instanceCount=0,
                         availabilityZone="us-west-2c", isSpot=True)
        assert spot["status"] == "SUCCEEDED", spot
    [group] = [g["InstanceGroupName"] for g in sm.describe_cluster(ClusterName=f"hp-cluster-{TAG}")["InstanceGroups"]
               if g["InstanceType"] == "ml.g6.4xlarge"]

    # The operator is not enabled yet: refused with the feature key to enable.
    [no_operator, _] = mcp_raw(cp, [("training_job_submit", JOB)])
    assert error(no_operator)["code"] == "PRECONDITION_FAILED"
    assert '"trainingOperator": {"enabled": true}' in error(no_operator)["hint"]

    # One operation at a time per cluster: enable the operator, create the S3 claim, add a second node.
    [enable] = mcp_calls(cp, [("hyperpod_update_advanced_features", {"trainingOperator": {"enabled": True}})])
    assert mcp_wait(cp, enable["operationId"])["status"] == "SUCCEEDED"
    [storage] = mcp_calls(cp, [("s3_storage_create", {})])
    assert mcp_wait(cp, storage["operationId"])["status"] == "SUCCEEDED"
    [scale] = mcp_calls(cp, [("hyperpod_scale_instance_group", {"name": group, "targetCount": 2})])
    assert mcp_wait(cp, scale["operationId"])["status"] == "SUCCEEDED"

    refused = mcp_raw(cp, [
        ("training_job_submit", {**JOB, "gpusPerNode": 2}),
        ("training_job_submit", {**JOB, "instanceType": "ml.p5.48xlarge"}),
        ("training_job_submit", {**JOB, "jobName": "My_Job"}),
        ("training_job_submit", {**JOB, "instanceType": "ml.g6.8xlarge", "elastic": {"minReplicas": 1,
                                                                                     "maxReplicas": 2}}),
        ("training_job_submit", {**JOB, "command": "torchrun --nproc-per-node 1 train.py"}),
        ("training_recipe_submit", {"recipe": "ms-swift", "jobName": "swift", "instanceType": "ml.g6.4xlarge",
                                    "fields": {"dataset": "/tmp/train.jsonl"}}),
    ])
    too_many, no_nodes, bad_name, elastic_spot, launcher, outside = (error(r) for r in refused[:6])
    assert "gpusPerNode: 2 GPUs per node, but ml.g6.4xlarge has 1" in too_many["message"]
    assert "No nodes of ml.p5.48xlarge" in no_nodes["message"]
    assert f"{group} (ml.g6.4xlarge, 2 node(s), OnDemand)" in no_nodes["message"]
    assert "spot-g (ml.g6.8xlarge, 0 node(s), Spot)" in no_nodes["message"]
    assert "jobName: 'My_Job' is not a DNS label" in bad_name["message"]
    assert "elastic training on Spot capacity is refused" in elastic_spot["message"] and "spot-g" in (
        elastic_spot["message"])
    assert "starts with the launcher 'torchrun'" in launcher["message"] and "hyperpodrun" in launcher["hint"]
    assert "fields.dataset: '/tmp/train.jsonl' is not under /s3" in outside["message"]
    core = kube(twin, tmp_path, TAG)
    objects = k8s.CustomObjectsApi(core.api_client)
    assert not objects.list_namespaced_custom_object("sagemaker.amazonaws.com", "v1", "default",
                                                     "hyperpodpytorchjobs")["items"]

    [ref] = mcp_calls(cp, [("training_recipe_submit", {
        "recipe": "pytorch", "jobName": "ddp", "instanceType": "ml.g6.4xlarge", "nodes": 2,
        "fields": {"epochs": 2}, "podAnnotations": RUN_LONG})])
    assert ref["statusTool"] == "job_get_status"
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"
    running = status_until(cp, "ddp", lambda s: s["job"]["state"] == "Running")
    assert as_submitted(running["runPolicy"], DEFAULT_POLICY) == DEFAULT_POLICY
    assert running["budget"] == {"restarts": 0, "jobMaxRetryCount": 5, "fullJobRestarts": 0,
                                 "maxFullJobRestarts": 1, "inPlaceRestarts": 0}
    assert [p["name"] for p in running["pods"]] == ["ddp-pod-0", "ddp-pod-1"]
    assert all(p["phase"] == "Running" for p in running["pods"])
    assert len({p["node"] for p in running["pods"]}) == 2  # one pod per node
    assert running["command"][:3] == ["hyperpodrun", "--nnodes=2", "--nproc-per-node=auto"]
    assert running["job"]["recipe"] == "pytorch" and running["job"]["nodes"] == 2

    # A pod dies: the operator restarts it in place and counts it against the budget.
    core.delete_namespaced_pod("ddp-pod-1", "default")
    again = status_until(cp, "ddp", lambda s: s["budget"]["restarts"] == 1 and s["job"]["state"] == "Running"
                         and len(s["pods"]) == 2 and all(p["phase"] == "Running" for p in s["pods"]))
    assert again["budget"]["inPlaceRestarts"] == 1 and again["budget"]["fullJobRestarts"] == 0
    restarting = next(c for c in again["conditions"] if c["type"] == "Restarting")
    assert restarting["status"] == "False"  # it restarted and is Running again
    assert next(p for p in again["pods"] if p["name"] == "ddp-pod-1")["phase"] == "Running"

    batch = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "download"}, "spec": {"template": {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}}
    k8s.BatchV1Api(core.api_client).create_namespaced_job("default", batch, _preload_content=False)
    logs, listed, everything = mcp_calls(cp, [
        ("training_job_logs", {"jobName": "ddp", "tail": 5}),
        ("training_job_list", {}),
        ("job_list_all", {}),
    ])
    assert logs["pod"] == "ddp-pod-0" and logs["pods"] == ["ddp-pod-0", "ddp-pod-1"]
    assert 1 <= len(logs["lines"]) <= 5
    assert any("hyperpodrun --nnodes=2 --nproc-per-node=auto /s3/code/train.py" in line for line in logs["lines"])
    assert [(j["name"], j["state"], j["restartCount"]) for j in listed["jobs"]] == [("ddp", "Running", 1)]
    assert {(j["name"], j["kind"]) for j in everything["jobs"]} == {("ddp", "HyperPodPyTorchJob"), ("download", "Job")}

    [taken] = mcp_raw(cp, [("training_recipe_submit", {"recipe": "pytorch", "jobName": "ddp",
                                                        "instanceType": "ml.g6.4xlarge"})])[:1]
    assert error(taken)["code"] == "CONFLICT" and "ddp already exists" in error(taken)["message"]

    [gone] = mcp_calls(cp, [("training_job_delete", {"jobName": "ddp"})])
    assert mcp_wait(cp, gone["operationId"])["status"] == "SUCCEEDED"
    assert not core.list_namespaced_pod("default", label_selector="HPJob=ddp").items
    [after, missing] = mcp_raw(cp, [("training_job_list", {}), ("job_get_status", {"jobName": "ddp"})])[:2]
    assert after["payload"]["count"] == 0
    assert error(missing)["code"] == "NOT_FOUND" and "Jobs here: none" in error(missing)["hint"]

    # A plain job with its budget overridden field by field: job_get_status shows it back.
    budget = {"jobMaxRetryCount": 2, "numRestartBeforeFullJobRestart": 0, "evalPeriodSeconds": 600,
              "maxFullJobRestarts": 2, "cleanPodPolicy": "None"}
    [plain] = mcp_calls(cp, [("training_job_submit", {**JOB, "recovery": budget, "env": {"SEED": "7"},
                                                      "podAnnotations": RUN_LONG})])
    assert mcp_wait(cp, plain["operationId"])["status"] == "SUCCEEDED"
    shown = status_until(cp, "plain", lambda s: s["job"]["state"] == "Running")
    overridden = {"jobMaxRetryCount": 2, "cleanPodPolicy": "None", "restartPolicy": {
        "numRestartBeforeFullJobRestart": 0, "evalPeriodSeconds": 600, "maxFullJobRestarts": 2}}
    assert as_submitted(shown["runPolicy"], overridden) == overridden
    assert shown["budget"]["jobMaxRetryCount"] == 2 and shown["budget"]["maxFullJobRestarts"] == 2
    assert shown["command"] == ["hyperpodrun", "--nnodes=1", "--nproc-per-node=auto", "train.py", "--epochs", "1"]
    assert shown["image"] == "example/train:1"
