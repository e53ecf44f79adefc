"""Teams = HyperPod task governance, over MCP as each team's member: two teams with 2 GPUs each on one twin
cluster (one ml.g5.12xlarge, 4 GPUs); team a borrows b's idle GPUs, b submits, a's borrowed job is preempted and
requeued; job_get_status explains each state (admitted, borrowing, pending over quota, preempted). Every way a
member submits a workload (training, Ray, recipes, model servers) stays in their team's namespace. usage_report for
the run adds up, per team, to what the pods held as the API server's watch saw it (the preempted pod included), and
alice sees team a's usage."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import watch

from instantstart.twin_process import TwinProcess
from tests.support.faces import mcp_http
from tests.support.flows import MCP_POLL_SECONDS, kube, make_hyperpod, mcp_calls, mcp_wait
from tests.support.servers import Running
from tests.support.waits import until

TAG = "teams1"
RUN_LONG = {"twin.instantstart.io/run-seconds": "1000000"}
JOB = {"image": "example/train:1", "command": "train.py", "instanceType": "ml.g5.12xlarge", "gpusPerNode": 2,
       "vcpu": 8, "memoryGiB": 32,
       "podAnnotations": RUN_LONG}


def as_user(cp: Running, token: str) -> Running:
    return dataclasses.replace(cp, token=token)


def call(cp: Running, tool: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """One MCP tool call as cp's token holder: (is_error, payload)."""

    async def run() -> tuple[bool, dict[str, Any]]:
        async with mcp_http(cp) as session:
            result = await session.call_tool(tool, args)
            return bool(result.is_error), json.loads(result.content[0].text)

    return asyncio.run(run())


def make_user(cp: Running, name: str, role: str) -> str:
    with cp.client() as client:
        assert client.post("/api/v1/tools/user_create", json={"name": name, "role": role}).status_code == 200
        created = client.post("/api/v1/tools/token_create", json={"name": "main", "user": name})
        assert created.status_code == 200, created.text
        return str(created.json()["token"])


def queue_until(cp: Running, job: str, state: str, limit: float = 120) -> dict[str, Any]:
    """Poll job_get_status over MCP (as cp's user) until the job's queue state is `state`."""

    async def run() -> dict[str, Any]:
        deadline = time.monotonic() + limit
        async with mcp_http(cp) as session:
            while True:
                result = await session.call_tool("job_get_status", {"jobName": job, "namespace": namespace(job)})
                status = json.loads(result.content[0].text)
                assert not result.is_error, status
                if (status.get("queue") or {}).get("state") == state:
                    return dict(status)
                if time.monotonic() >= deadline:
                    raise AssertionError(f"{job} never reached queue state {state}: {status.get('queue')}")
                await asyncio.sleep(MCP_POLL_SECONDS)

    return asyncio.run(run())


def namespace(job: str) -> str:
    return f"hyperpod-ns-{job[0]}"


def submit(cp: Running, job: str, **extra: Any) -> None:
    failed, ref = call(cp, "training_job_submit", {**JOB, "jobName": job, **extra})
    assert not failed, ref
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"


class Holds:
    """Every GPU pod's hold as the API server's watch shows it as the test goes: uid → (namespace, name, GPUs,
    start, end), start when it runs, end at its deletion deadline (a preempted pod's too) or when it finished."""

    def __init__(self, core: k8s.CoreV1Api) -> None:
        self.seen: dict[str, list[Any]] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(core,), daemon=True)
        self.thread.start()

    def _run(self, core: k8s.CoreV1Api) -> None:
        """Watch until stopped, resuming from the last resourceVersion when the server ends a watch."""
        version = None
        while not self.stopped.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(core.list_pod_for_all_namespaces, timeout_seconds=2,
                                      **({"resource_version": version} if version else {})):
                    self._see(event["object"])
                    version = event["object"].metadata.resource_version
            except urllib3.exceptions.ProtocolError:
                continue
            except k8s.ApiException as exc:
                if exc.status != 410:  # 410 Gone: too old a resourceVersion, list afresh
                    raise
                version = None

    def _see(self, p: Any) -> None:
        gpus = int((p.spec.containers[0].resources.limits or {}).get("nvidia.com/gpu", 0))
        if not gpus or not p.status.start_time:
            return
        hold = self.seen.setdefault(p.metadata.uid, [p.metadata.namespace, p.metadata.name, gpus,
                                                     p.status.start_time, None])
        statuses = p.status.container_statuses or []
        finished = statuses[0].state.terminated if statuses else None
        if hold[4] is None and p.metadata.deletion_timestamp is not None:
            hold[4] = p.metadata.deletion_timestamp
        elif hold[4] is None and finished is not None:
            hold[4] = finished.finished_at

    def stop(self) -> dict[str, tuple[str, str, int, datetime, datetime]]:
        self.stopped.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        return {uid: (ns, name, gpus, start, end) for uid, (ns, name, gpus, start, end) in self.seen.items()}


def test_two_teams_borrow_reclaim_and_preemption_over_mcp(cp: Running, twin: TwinProcess, tmp_path: Any) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG, acceleratedInstanceType="ml.g5.12xlarge")
    operator, alice, bob = (make_user(cp, n, r) for n, r in (("opal", "operator"), ("alice", "member"),
                                                            ("bob", "member")))
    ops = as_user(cp, operator)
    quota = {"instanceType": "ml.g5.12xlarge", "accelerators": 2, "sharing": "LendAndBorrow", "borrowLimitPercent": 100}
    denied, refusal = call(as_user(cp, alice), "team_create", {"name": "a", "quota": quota, "members": ["alice"]})
    assert denied and refusal["error"]["details"]["requiredRole"] == "operator"
    failed, early = call(ops, "team_create", {"name": "a", "quota": quota, "members": ["alice"]})
    assert failed and early["error"]["code"] == "PRECONDITION_FAILED"
    assert '{"taskGovernance": {"enabled": true}}' in early["error"]["hint"]
    [features] = mcp_calls(cp, [("hyperpod_update_advanced_features", {
        "trainingOperator": {"enabled": True}, "taskGovernance": {"enabled": True}})])
    assert mcp_wait(cp, features["operationId"])["status"] == "SUCCEEDED"
    # The cluster's scheduler config: created with team a, changed (UpdateClusterSchedulerConfig) with team b.
    for team, member, weight in (("a", "alice", 50), ("b", "bob", 60)):
        scheduler = {"priorityClasses": [{"name": "training", "weight": weight}], "fairShare": True}
        failed, ref = call(ops, "team_create", {"name": team, "quota": quota, "members": [member],
                                                "scheduler": scheduler})
        assert not failed, ref
        assert mcp_wait(ops, ref["operationId"])["status"] == "SUCCEEDED"
    failed, listed = call(as_user(cp, bob), "team_list", {})
    assert not failed
    assert [(t["name"], t["namespace"], t["queue"], t["members"], t["quotaStatus"]) for t in listed["teams"]] == [
        ("a", "hyperpod-ns-a", "hyperpod-ns-a-localqueue", ["alice"], "Created"),
        ("b", "hyperpod-ns-b", "hyperpod-ns-b-localqueue", ["bob"], "Created")]
    objects = k8s.CustomObjectsApi(kube(twin, tmp_path, TAG).api_client)
    cq = objects.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", "hyperpod-ns-a-clusterqueue")
    assert cq["spec"]["cohort"] and cq["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    assert objects.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "workloadpriorityclasses",
                                             "training-priority")["value"] == 60  # team b's update reached Kueue

    core = kube(twin, tmp_path, TAG)
    holds = Holds(kube(twin, tmp_path, TAG))

    def running(ns: str) -> list[str]:
        return sorted(p.metadata.name for p in core.list_namespaced_pod(ns).items
                      if p.status.phase == "Running" and p.metadata.deletion_timestamp is None)

    # alice's jobs go to team a's namespace and queue by default; the first fits a's own 2 GPUs.
    as_alice, as_bob = as_user(cp, alice), as_user(cp, bob)
    submit(as_alice, "a1")
    first = queue_until(as_alice, "a1", "admitted")
    assert first["queue"]["queue"] == "hyperpod-ns-a-localqueue" and first["job"]["namespace"] == "hyperpod-ns-a"
    assert "within the team's quota" in first["queue"]["explanation"]
    # The second borrows b's idle GPUs.
    submit(as_alice, "a2")
    borrowed = queue_until(as_alice, "a2", "borrowing")
    assert "borrowed capacity" in borrowed["queue"]["explanation"]
    assert borrowed["queue"]["inUse"] == {"nvidia.com/gpu": 4.0} and borrowed["queue"]["quota"] == {
        "nvidia.com/gpu": 2.0}
    until(lambda: running("hyperpod-ns-a") == ["a1-pod-0", "a2-pod-0"], "a1 and the borrowing a2 running")
    # A third is over quota: a's 2 GPUs plus a borrow limit of 100 % are in use.
    submit(as_alice, "a3")
    pending = queue_until(as_alice, "a3", "pending")
    assert "over the team's quota" in pending["queue"]["explanation"]
    assert "request > maximum capacity" in pending["queue"]["explanation"]
    # alice may not submit into team b's namespace.
    denied, outside = call(as_alice, "training_job_submit", {**JOB, "jobName": "sneak", "namespace": "hyperpod-ns-b"})
    assert denied and outside["error"]["code"] == "FORBIDDEN" and "hyperpod-ns-a" in outside["error"]["hint"]
    denied, server = call(as_alice, "inference_deploy_container", {
        "deploymentCommand": "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280", "gpuCount": 1,
        "namespace": "hyperpod-ns-b"})
    assert denied and server["error"]["code"] == "FORBIDDEN", server
    # Every other way a member submits a workload follows the same rule (services/teams/placement.py).
    elsewhere = {"namespace": "hyperpod-ns-b", "instanceType": "ml.g5.12xlarge"}
    for tool, args in (
            ("ray_job_submit", {"jobName": "rl", "image": "example/ray:1", "entrypoint": "python3 train.py"}),
            ("training_recipe_submit", {"recipe": "verl", "jobName": "rl2"}),
            ("inference_jumpstart_deploy", {"modelId": "huggingface-llm-qwen2-5-7b-instruct"}),
            ("inference_managed_deploy", {"name": "qwen", "modelName": "qwen", "image": "vllm/vllm-openai:v0.11.0",
                                          "gpuCount": 1, "modelSource": {"type": "huggingface",
                                                                         "huggingFaceModelId": "Qwen/Qwen3-0.6B"}})):
        denied, refused = call(as_alice, tool, {**args, **elsewhere})
        assert denied and refused["error"]["code"] == "FORBIDDEN", (tool, refused)
        assert "hyperpod-ns-a" in refused["error"]["hint"], (tool, refused)

    # bob needs b's quota back: a's borrowing job is preempted and requeued, b's is admitted.
    submit(as_bob, "b1")
    preempted = queue_until(as_alice, "a2", "preempted")
    assert "Preempted and requeued" in preempted["queue"]["explanation"]
    assert "reclamation within the cohort" in preempted["queue"]["explanation"]
    types = {c["type"]: c for c in preempted["queue"]["conditions"]}
    assert types["Requeued"]["status"] == "True" and types["Preempted"]["reason"] == "InCohortReclamation"
    admitted = queue_until(as_bob, "b1", "admitted")
    assert admitted["job"]["namespace"] == "hyperpod-ns-b"
    assert queue_until(as_alice, "a1", "admitted")["queue"]["inUse"] == {"nvidia.com/gpu": 2.0}
    until(lambda: (running("hyperpod-ns-a"), running("hyperpod-ns-b")) == (["a1-pod-0"], ["b1-pod-0"]),
          "a1 and b1 running, a2's pod gone")

    # The operator changes b's quota (UpdateComputeQuota → its ClusterQueue) and deletes team a (its queues go).
    failed, ref = call(ops, "team_update", {"name": "b", "quota": {**quota, "accelerators": 1}})
    assert not failed and mcp_wait(ops, ref["operationId"])["status"] == "SUCCEEDED", ref

    def gpu_quota() -> str:
        cq = objects.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues",
                                               "hyperpod-ns-b-clusterqueue")
        flavor = cq["spec"]["resourceGroups"][0]["flavors"][0]
        return str(next(r["nominalQuota"] for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"))

    until(lambda: gpu_quota() == "1", "team b's ClusterQueue at 1 GPU")
    failed, ref = call(ops, "team_delete", {"name": "a"})
    assert not failed and mcp_wait(ops, ref["operationId"])["status"] == "SUCCEEDED", ref
    failed, left = call(as_bob, "team_list", {})
    assert [t["name"] for t in left["teams"]] == ["b"]
    # b1 holds 2 GPUs of a quota now 1: one is borrowed (a's lapsed quota no longer lends, Kueue evicts nothing
    # already admitted).
    assert left["teams"][0]["usage"] == {"admittedWorkloads": 1, "pendingWorkloads": 0,
                                         "inUse": {"nvidia.com/gpu": 2.0}, "borrowed": {"nvidia.com/gpu": 1.0}}
    until(lambda: [q["metadata"]["name"] for q in objects.list_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta1", "clusterqueues")["items"]] == ["hyperpod-ns-b-clusterqueue"], "a's queue gone")

    # usage_report for this run adds up to what the pods held (within one sampling interval), the preempted a2 pod
    # included: the jobs are deleted so every hold has ended, then each team's GPU-hours are compared with the
    # holds the watch saw (start while running, end at the deletion deadline).
    for job in ("a1", "a2", "a3", "b1"):
        failed, ref = call(ops, "training_job_delete", {"jobName": job, "namespace": namespace(job)})
        assert not failed, ref
        assert mcp_wait(ops, ref["operationId"])["status"] == "SUCCEEDED", ref
    until(lambda: not core.list_namespaced_pod("hyperpod-ns-a").items + core.list_namespaced_pod(
        "hyperpod-ns-b").items, "every pod of the teams gone", timeout=60)
    until(lambda: all(h[4] is not None for h in list(holds.seen.values())), "every hold's end seen")
    truth = holds.stop()
    names = sorted(name for _, name, *_ in truth.values())
    assert {"a1-pod-0", "a2-pod-0", "b1-pod-0"} <= set(names), names
    expected: dict[str, float] = defaultdict(float)
    for ns, _, gpus, start, end in truth.values():
        expected[ns.removeprefix("hyperpod-ns-")] += gpus * (end - start).total_seconds() / 3600
    period = {"since": (min(h[3] for h in truth.values()) - timedelta(hours=1)).isoformat(),
              "until": (max(h[4] for h in truth.values()) + timedelta(hours=1)).isoformat()}

    def report(who: Running) -> dict[str, Any]:
        failed, body = call(who, "usage_report", period)
        assert not failed, body
        return body

    pods = len(truth)
    done = until(lambda: (r := report(ops))["total"]["pods"] == pods and r, f"the report holds the {pods} pods")
    tolerance = done["sampleSeconds"] / 3600 * 4  # one sampling interval of every GPU of the cluster's node
    assert done["scope"] == "all"
    by_team = {t["team"]: t["gpuHours"] for t in done["byTeam"]}
    assert set(by_team) == {"a", "b"}, done["byTeam"]
    for team, hours in by_team.items():
        assert abs(hours - expected[team]) <= tolerance, (team, hours, expected)
    # alice, a member, sees team a's usage (her jobs), not b's.
    mine = report(as_alice)
    assert mine["scope"] == "own" and [t["team"] for t in mine["byTeam"]] == ["a"], mine["byTeam"]
    assert abs(mine["byTeam"][0]["gpuHours"] - expected["a"]) <= tolerance
