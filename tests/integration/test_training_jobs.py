"""Training on the twin through MCP: the refusals (each naming what exists), the training operator enabled, a
PyTorch recipe job on 2 nodes Running with the default recovery budget, a killed pod restarted in place and
counted, the log tail, listing and deletion with its pods."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import pytest
from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.support.faces import mcp_http
from tests.support.flows import (
    MCP_POLL_SECONDS,
    add_group,
    kube,
    make_hyperpod,
    mcp_calls,
    mcp_raw,
    mcp_wait,
    tool_payload,
)
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import until

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


DEFAULT_POLICY = {"jobMaxRetryCount": 5, "cleanPodPolicy": "None", "ttlSecondsAfterFinished": 604800,
                  "restartPolicy": {"numRestartBeforeFullJobRestart": 3, "evalPeriodSeconds": 21600,
                                    "maxFullJobRestarts": 1}}


def status_until(cp: Running, name: str, predicate: Any, limit: float = 120) -> dict[str, Any]:
    """Poll job_get_status over MCP until `predicate(status)` holds (within `limit` seconds)."""

    async def run() -> dict[str, Any]:
        deadline = time.monotonic() + limit
        async with mcp_http(cp) as session:
            while True:
                status = tool_payload(await session.call_tool("job_get_status", {"jobName": name}))
                if predicate(status):
                    return status
                if time.monotonic() >= deadline:
                    raise AssertionError(f"{name} never reached the state: {status}")
                await asyncio.sleep(MCP_POLL_SECONDS)

    return asyncio.run(run())


def follow_logs(cp: Running, pod: str, stop_after: int | None = None, **resume: Any) -> list[tuple[str, str]]:
    """Lines from /api/v1/ws/logs until the end message (or `stop_after` lines, then the socket is dropped)."""
    from urllib.parse import urlencode

    from websockets.sync.client import connect

    query = urlencode({"pod": pod, "container": "pytorch-job-container", **resume})
    url = cp.url.replace("http://", "ws://") + "/api/v1/ws/logs?" + query
    lines: list[tuple[str, str]] = []
    with connect(url, additional_headers={"Authorization": f"Bearer {cp.token}"}, open_timeout=30) as socket:
        while True:
            message = json.loads(socket.recv(timeout=60))
            assert message["type"] != "error", message
            if message["type"] == "end":
                return lines
            lines.append((message["ts"], message["text"]))
            if stop_after is not None and len(lines) >= stop_after:
                return lines


def held_streams_and_one_more(cp: Running, pod: str) -> None:
    """Log streams are bounded per client (4 by default; each follows its log in a thread): with 4 open on a
    running container, a fifth is closed at once with 4429 and the limit."""
    from urllib.parse import urlencode

    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url = cp.url.replace("http://", "ws://") + "/api/v1/ws/logs?" + urlencode(
        {"pod": pod, "container": "pytorch-job-container"})
    auth = {"Authorization": f"Bearer {cp.token}"}
    with contextlib.ExitStack() as held:
        for _ in range(4):
            stream = held.enter_context(connect(url, additional_headers=auth, open_timeout=30))
            first = json.loads(stream.recv(timeout=60))
            assert first["type"] == "line", first
        with connect(url, additional_headers=auth, open_timeout=30) as fifth, pytest.raises(ConnectionClosed) as over:
            fifth.recv(timeout=60)
        assert over.value.rcvd is not None and over.value.rcvd.code == 4429, over.value
        assert "log streams for this client (limit 4)" in over.value.rcvd.reason


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
    # Its env takes a key of a Kubernetes Secret by reference: the pods get valueFrom.secretKeyRef, no value.
    core.create_namespaced_secret("default", {"metadata": {"name": "wandb"}, "stringData": {"api-key": "k-123456"}})
    ref = {"secretKeyRef": {"name": "wandb", "key": "api-key"}}
    bad_ref = mcp_raw(cp, [("training_job_submit", {**JOB, "env": {"K": {"secretKeyRef": {"name": "Wandb",
                                                                                          "key": "x"}}}})])[0]
    assert "env.K" in error(bad_ref)["message"] and "name" in error(bad_ref)["message"], error(bad_ref)
    [plain] = mcp_calls(cp, [("training_job_submit", {**JOB, "recovery": budget,
                                                      "env": {"SEED": "7", "WANDB_API_KEY": ref},
                                                      "podAnnotations": RUN_LONG})])
    assert mcp_wait(cp, plain["operationId"])["status"] == "SUCCEEDED"
    shown = status_until(cp, "plain", lambda s: s["job"]["state"] == "Running" and s["pods"])
    pod_env = core.read_namespaced_pod(shown["pods"][0]["name"], "default").spec.containers[0].env
    by_name = {e.name: e for e in pod_env}
    assert by_name["SEED"].value == "7" and by_name["WANDB_API_KEY"].value is None
    key_ref = by_name["WANDB_API_KEY"].value_from.secret_key_ref
    assert (key_ref.name, key_ref.key) == ("wandb", "api-key")
    overridden = {"jobMaxRetryCount": 2, "cleanPodPolicy": "None", "restartPolicy": {
        "numRestartBeforeFullJobRestart": 0, "evalPeriodSeconds": 600, "maxFullJobRestarts": 2}}
    assert as_submitted(shown["runPolicy"], overridden) == overridden
    assert shown["budget"]["jobMaxRetryCount"] == 2 and shown["budget"]["maxFullJobRestarts"] == 2
    assert shown["command"] == ["hyperpodrun", "--nnodes=1", "--nproc-per-node=auto", "train.py", "--epochs", "1"]
    assert shown["image"] == "example/train:1"

    # Past the budget: every kill is a full-job restart (numRestartBeforeFullJobRestart 0); the third failure
    # exhausts jobMaxRetryCount 2 and the job fails with the reason.
    for attempt in (1, 2, 3):
        alive = status_until(cp, "plain", lambda s, a=attempt: s["budget"]["restarts"] == a - 1
                             and s["job"]["state"] == "Running" and len(s["pods"]) == 1
                             and s["pods"][0]["phase"] == "Running")
        core.delete_namespaced_pod(alive["pods"][0]["name"], "default")
    failed = status_until(cp, "plain", lambda s: s["job"]["state"] == "Failed")
    assert failed["budget"]["restarts"] == 2 and failed["budget"]["jobMaxRetryCount"] == 2
    reason = next(c for c in failed["conditions"] if c["type"] == "Failed")
    assert reason["status"] == "True" and "restarts exhausted (2/2)" in reason["message"], reason
    # The last pod the test killed may still be terminating (its twin-clock grace period) when the job reads Failed.
    until(lambda: not core.list_namespaced_pod("default", label_selector="HPJob=plain").items,
          "the failed job's last (killed) pod gone")


    # After an in-place restart a job runs to completion. The twin clock runs 500x: 10,000 twin seconds is ~20 s,
    # time enough to kill the pod while it runs.
    [ref] = mcp_calls(cp, [("training_job_submit", {**JOB, "jobName": "short", "podAnnotations": {
        "twin.instantstart.io/run-seconds": "10000"}})])
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"
    running = status_until(cp, "short", lambda s: s["job"]["state"] == "Running" and len(s["pods"]) == 1
                           and s["pods"][0]["phase"] == "Running")
    core.delete_namespaced_pod(running["pods"][0]["name"], "default")
    done = status_until(cp, "short", lambda s: s["job"]["state"] in ("Completed", "Failed"))
    assert done["job"]["state"] == "Completed", done
    assert done["budget"]["restarts"] == 1 and done["budget"]["inPlaceRestarts"] == 1, done["budget"]

    # Hang detection: a job whose log never shows a step is restarted by the log monitor, with the reason.
    hang = {"name": "hang", "logPattern": r".*step (\d+).*", "expectedStartCutOffInSeconds": 600}
    bad_pattern, no_deadline = (error(r) for r in mcp_raw(cp, [
        ("training_job_submit", {**JOB, "jobName": "stuck", "hangDetection": [
            {**hang, "logPattern": r"step (\d+) of (\d+)"}]}),
        ("training_job_submit", {**JOB, "jobName": "stuck", "hangDetection": [{"name": "hang", "logPattern": "x"}]}),
    ])[:2])
    assert "hangDetection[0].logPattern" in bad_pattern["message"] and "2 capture groups" in bad_pattern["message"]
    assert "can never detect a hang" in no_deadline["message"]
    [stuck] = mcp_calls(cp, [("training_job_submit", {**JOB, "jobName": "stuck", "hangDetection": [hang],
                                                      "podAnnotations": {**RUN_LONG, "twin.instantstart.io/log-lines":
                                                                         "loading the model\nstill loading"}})])
    assert mcp_wait(cp, stuck["operationId"])["status"] == "SUCCEEDED"
    hung = status_until(cp, "stuck", lambda s: s["budget"]["restarts"] >= 1 and any(
        "hang detected by log monitor hang" in (c.get("message") or "") for c in s["conditions"]))
    assert hung["runPolicy"]["logMonitoringConfiguration"] == [hang]

    # Task governance: queue and priority need Kueue (the task governance add-on); then they are checked against
    # the cluster's LocalQueues and WorkloadPriorityClasses and passed through as Kueue labels, with the topology.
    governed = {**JOB, "jobName": "governed", "queueName": "hyperpod-ns-team-a-localqueue", "priority": "training"}
    [no_kueue] = mcp_raw(cp, [("training_job_submit", governed)])[:1]
    assert error(no_kueue)["code"] == "PRECONDITION_FAILED"
    assert "amazon-sagemaker-hyperpod-taskgovernance" in error(no_kueue)["hint"]
    assert '{"taskGovernance": {"enabled": true}}' in error(no_kueue)["hint"]
    # The taskGovernance feature key installs the add-on, which installs Kueue (its CRDs and controller), and then
    # creates the Kueue objects jobs name: a priority class, and the namespace's LocalQueue on its own ClusterQueue.
    [governance] = mcp_calls(cp, [("hyperpod_update_advanced_features", {"taskGovernance": {
        "enabled": True, "priorityClasses": [{"name": "training", "value": 100}],
        "queues": [{"name": "hyperpod-ns-team-a-localqueue", "namespace": "default"}]}})])
    governed_view = mcp_wait(cp, governance["operationId"])
    assert governed_view["status"] == "SUCCEEDED", governed_view
    extensions = k8s.ApiextensionsV1Api(core.api_client)
    assert {c.metadata.name for c in extensions.list_custom_resource_definition().items} >= {
        "localqueues.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io"}
    kueue = ("kueue.x-k8s.io", "v1beta1")
    assert objects.get_cluster_custom_object(*kueue, "workloadpriorityclasses", "training")["value"] == 100
    local = objects.get_namespaced_custom_object(*kueue, "default", "localqueues", "hyperpod-ns-team-a-localqueue")
    cluster_queue = objects.get_cluster_custom_object(*kueue, "clusterqueues", local["spec"]["clusterQueue"])
    assert cluster_queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "default"}}
    [group_spec] = cluster_queue["spec"]["resourceGroups"]
    assert {"cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa"} <= set(group_spec["coveredResources"])
    assert objects.get_cluster_custom_object(*kueue, "resourceflavors", group_spec["flavors"][0]["name"])
    no_queue, no_class, bad_level = (error(r) for r in mcp_raw(cp, [
        ("training_job_submit", {**governed, "queueName": "team-b"}),
        ("training_job_submit", {**governed, "priority": "urgent"}),
        ("training_job_submit", {**governed, "topology": {"level": "kubernetes.io/hostname"}}),
    ])[:3])
    assert "no LocalQueue 'team-b' in namespace default" in no_queue["message"]
    assert "hyperpod-ns-team-a-localqueue" in no_queue["hint"]
    assert "no WorkloadPriorityClass 'urgent'" in no_class["message"] and "training" in no_class["hint"]
    assert "topology.level" in bad_level["message"] and "topology.k8s.aws/network-node-layer-1" in bad_level["hint"]
    [queued] = mcp_calls(cp, [("training_job_submit", {
        **governed, "topology": {"mode": "required", "level": "topology.k8s.aws/network-node-layer-3"}})])
    assert mcp_wait(cp, queued["operationId"])["status"] == "SUCCEEDED"
    body = objects.get_namespaced_custom_object("sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs",
                                                "governed")
    assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "hyperpod-ns-team-a-localqueue"
    assert body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "training"
    template = body["spec"]["replicaSpecs"][0]["template"]["metadata"]
    assert template["annotations"]["kueue.x-k8s.io/podset-required-topology"] == (
        "topology.k8s.aws/network-node-layer-3")
    [gone] = mcp_calls(cp, [("training_job_delete", {"jobName": "governed"})])
    assert mcp_wait(cp, gone["operationId"])["status"] == "SUCCEEDED"

    # Live logs over the WebSocket: a job writing a line about every second; the socket is dropped midway and
    # resumed from the last line's timestamp: every line once, in order, then the end.
    written = [f"step {i}/12 loss={1.0 / i:.3f}" for i in range(1, 13)]
    [chatty] = mcp_calls(cp, [("training_job_submit", {**JOB, "jobName": "chatty", "podAnnotations": {
        "twin.instantstart.io/run-seconds": "6500", "twin.instantstart.io/log-lines": "\n".join(written)}})])
    assert mcp_wait(cp, chatty["operationId"])["status"] == "SUCCEEDED"
    status_until(cp, "chatty", lambda s: s["pods"] and s["pods"][0]["phase"] == "Running")
    got = follow_logs(cp, "chatty-pod-0", stop_after=3)
    assert len(got) == 3 and got[-1][0], got
    held_streams_and_one_more(cp, "chatty-pod-0")
    after, skip = got[-1][0], sum(1 for ts, _ in got if ts == got[-1][0])
    rest = follow_logs(cp, "chatty-pod-0", after=after, skip=skip)
    texts = [text for _, text in got + rest if not text.startswith("[twin]")]
    assert texts == written, texts

    # The KubeRay path: refused until the operator is enabled; then the VERL recipe runs as a RayJob to the end,
    # listed, described and logged like any training job, and deleted with its Ray cluster.
    verl = {"recipe": "verl", "jobName": "rl", "instanceType": "ml.g6.4xlarge", "fields": {"epochs": 2},
            "env": {"WANDB_API_KEY": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}}}
    no_ray, operators = (error(r) for r in mcp_raw(cp, [
        ("training_recipe_submit", verl),
        ("ray_job_submit", {"jobName": "rl", "image": "example/ray:1", "instanceType": "ml.g6.4xlarge",
                            "entrypoint": "python3 a.py && rm -rf /s3"}),
    ])[:2])
    assert no_ray["code"] == "PRECONDITION_FAILED" and '"kuberayOperator": {"enabled": true}' in no_ray["hint"]
    assert "shell operator(s) &&" in operators["message"]
    [ray] = mcp_calls(cp, [("hyperpod_update_advanced_features", {"kuberayOperator": {"enabled": True}})])
    assert mcp_wait(cp, ray["operationId"])["status"] == "SUCCEEDED"
    [rl] = mcp_calls(cp, [("training_recipe_submit", verl)])
    assert rl["statusTool"] == "job_get_status"
    assert mcp_wait(cp, rl["operationId"])["status"] == "SUCCEEDED"
    rayjob = objects.get_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", "rl")
    ray_env = [e for g in [rayjob["spec"]["rayClusterSpec"]["headGroupSpec"],
                           *rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]]
               for e in g["template"]["spec"]["containers"][0]["env"] if e["name"] == "WANDB_API_KEY"]
    assert ray_env and all(e == {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {
        "name": "wandb", "key": "api-key"}}} for e in ray_env), ray_env
    # From the watch: a RayJob just created may be read directly once, until the rayjobs watch (its CRD came with
    # the operator) has it; the wait is for the watched answer, not for luck with the first read.
    ran = status_until(cp, "rl", lambda s: s["job"]["state"] in ("Running", "Completed", "Failed") and s["pods"]
                       and s["source"] == "watch")
    assert ran["job"]["kind"] == "RayJob" and ran["job"]["recipe"] == "verl" and ran["job"]["nodes"] == 1
    assert ran["command"][:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    assert "trainer.total_epochs=2" in ran["command"] and "trainer.n_gpus_per_node=1" in ran["command"]
    assert any("-head-" in p["name"] for p in ran["pods"]) and any("worker" in p["name"] for p in ran["pods"])
    # Its Ray cluster's ports are fenced: a NetworkPolicy owned by the RayJob selects exactly its head and workers.
    net = k8s.NetworkingV1Api(core.api_client)
    policy = net.read_namespaced_network_policy("rl-ray", "default")
    [rayjob] = objects.list_namespaced_custom_object("ray.io", "v1", "default", "rayjobs")["items"]
    assert [(o.kind, o.uid) for o in policy.metadata.owner_references] == [("RayJob", rayjob["metadata"]["uid"])]
    ray_cluster = rayjob["spec"]["rayClusterSpec"]
    for template in (ray_cluster["headGroupSpec"]["template"], ray_cluster["workerGroupSpecs"][0]["template"]):
        assert policy.spec.pod_selector.match_labels.items() <= template["metadata"]["labels"].items()
    assert ran["source"] == "watch", ran["note"]  # the RayJob from its watch, its pods by the Ray cluster's label
    listed = mcp_calls(cp, [("training_job_list", {})])[0]
    assert ("rl", "RayJob") in {(j["name"], j["kind"]) for j in listed["jobs"]}
    done = status_until(cp, "rl", lambda s: s["job"]["state"] in ("Completed", "Failed"))
    assert done["job"]["state"] == "Completed", done["conditions"]
    [gone] = mcp_calls(cp, [("training_job_delete", {"jobName": "rl"})])
    assert mcp_wait(cp, gone["operationId"])["status"] == "SUCCEEDED"
    assert not objects.list_namespaced_custom_object("ray.io", "v1", "default", "rayjobs")["items"]
    assert not [p for p in net.list_namespaced_network_policy("default").items if p.metadata.name == "rl-ray"]
