"""usage_report on the twin adds up to what the pods actually held: a member's training job (2 GPUs, run for a
known twin-clock time) attributed to her and her team, pods made outside InstantStart (no user), a pod deleted
while running (held until its deletion deadline); GPU-hours and node-hours per team and user compared with the pods'
own start and end times as the twin's API server shows them (within one sampling interval), a member seeing only
her own usage, the CSV through the CLI (`-o csv`), and the refusals; the job's operation in the cluster timeline
names who started it (the audit trail's actor)."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from typer.testing import CliRunner

from instantstart.cli.main import build_app
from instantstart.services.base.registry import get_cluster
from instantstart.services.monitoring import usage_feed
from instantstart.settings import Settings
from instantstart.store import teams as teams_store
from instantstart.store import timeline
from instantstart.store import usage as usage_store
from instantstart.store.models import utcnow
from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_wait
from tests.support.servers import Running
from tests.support.waits import until, wait_terminal

TAG = "usage28"
TYPE = "ml.g6.12xlarge"  # 4 GPUs on the one node
RUN = "twin.instantstart.io/run-seconds"
TEAM_A, TEAM_B = "hyperpod-ns-team-a", "hyperpod-ns-team-b"


def as_user(running: Running, token: str) -> Running:
    return dataclasses.replace(running, token=token)


def call(running: Running, name: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    with running.client() as client:
        response = client.post(f"/api/v1/tools/{name}", json=args)
    return response.status_code, response.json()


def pod(name: str, gpus: int, run_seconds: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {RUN: str(run_seconds)}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def when(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def held(core: k8s.CoreV1Api) -> list[tuple[str, str, int, datetime, datetime]]:
    """(namespace, pod, GPUs, start, end) of every finished GPU pod as the API server shows it."""
    found = []
    for p in core.list_pod_for_all_namespaces().items:
        gpus = int((p.spec.containers[0].resources.limits or {}).get("nvidia.com/gpu", 0))
        finished = p.status.container_statuses[0].state.terminated if p.status.container_statuses else None
        if gpus and p.status.start_time and finished:
            found.append((p.metadata.namespace, p.metadata.name, gpus, when(p.status.start_time),
                          when(finished.finished_at)))
    return found


def run_cli(running: Running, args: list[str]) -> str:
    """The `instantstart` CLI in-process against the running server (its token file in the data directory)."""
    app = build_app(Settings(data_dir=running.data_dir, server_url=running.url))
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_usage_report_adds_up_to_what_the_pods_held(cp: Running, twin: TwinProcess, tmp_path: Path) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG, acceleratedInstanceType=TYPE)
    [enable] = mcp_calls(cp, [("hyperpod_update_advanced_features", {"trainingOperator": {"enabled": True}})])
    assert mcp_wait(cp, enable["operationId"])["status"] == "SUCCEEDED"
    core = kube(twin, tmp_path, TAG)
    for ns in (TEAM_A, TEAM_B):
        core.create_namespace({"metadata": {"name": ns}})
    assert call(cp, "user_create", {"name": "alice", "role": "member"})[0] == 200
    alice = as_user(cp, call(cp, "token_create", {"name": "main", "user": "alice"})[1]["token"])

    # Alice submits a 2-GPU training job in team A's namespace; 2 pods are made outside InstantStart.
    status, ref = call(alice, "training_job_submit", {
        "jobName": "a-train", "namespace": TEAM_A, "image": "example/train:1", "command": "train.py",
        "instanceType": TYPE, "gpusPerNode": 2, "podAnnotations": {RUN: "1800"}})
    assert status == 202 or status == 200, ref
    with cp.client() as client:
        assert wait_terminal(client, ref["operationId"], timeout=120)["status"] == "SUCCEEDED"
    # The audit trail kept with the timeline: the job's operation entries name who started it, with which token.
    _, ops = call(cp, "cluster_timeline", {"objectKind": "Operation", "objectName": ref["operationId"]})
    assert ops["entries"] and {(e["actor"]["user"], e["actor"]["tokenName"], e["actor"]["face"], e["actor"]["source"])
                               for e in ops["entries"]} == {("alice", "main", "rest", "127.0.0.1")}
    core.create_namespaced_pod(TEAM_B, pod("b-burn", 1, 3600))
    core.create_namespaced_pod("default", pod("loose", 1, 600))
    core.create_namespaced_pod(TEAM_B, pod("b-long", 1, 10_000_000))  # runs until deleted

    def ended(names: set[str]) -> bool:
        phases = {p.metadata.name: p.status.phase for p in core.list_pod_for_all_namespaces().items}
        return all(phases.get(n) in ("Succeeded", "Failed") for n in names)

    until(lambda: ended({"a-train-pod-0", "b-burn", "loose"}), "the finite pods ended", timeout=120)
    until(lambda: core.read_namespaced_pod("b-long", TEAM_B).status.phase == "Running", "b-long running")
    gone = core.delete_namespaced_pod("b-long", TEAM_B)  # held until its deletion deadline (grace period)
    until(lambda: not [p for p in core.list_namespaced_pod(TEAM_B).items if p.metadata.name == "b-long"],
          "b-long gone", timeout=60)

    truth = [*held(core), (TEAM_B, "b-long", 1, when(gone.status.start_time), when(gone.metadata.deletion_timestamp))]
    assert {n for _, n, *_ in truth} == {"a-train-pod-0", "b-burn", "loose", "b-long"}
    since = min(s for *_, s, _ in truth) - timedelta(hours=1)
    end = max(e for *_, e in truth) + timedelta(hours=1)
    period = {"since": since.isoformat(), "until": end.isoformat()}
    expected: dict[str, float] = defaultdict(float)
    users = {"a-train-pod-0": "alice"}
    for ns, name, gpus, start, stop in truth:
        expected[ns.removeprefix("hyperpod-ns-") if ns.startswith("hyperpod-ns-") else ""] += (
            gpus * (stop - start).total_seconds() / 3600)
        expected["user:" + users.get(name, "")] += gpus * (stop - start).total_seconds() / 3600

    def report(who: Running = cp, **extra: Any) -> dict[str, Any]:
        status, body = call(who, "usage_report", {**period, **extra})
        assert status == 200, body
        return body

    done = until(lambda: (r := report())["total"]["pods"] == 4 and r, "the report holds the four pods", timeout=60)
    tolerance = done["sampleSeconds"] / 3600 * 4  # one sampling interval of every GPU the cluster has
    assert done["scope"] == "all" and done["clusterTag"] == TAG and not done["unavailable"]
    teams = {t["team"]: t for t in done["byTeam"]}
    assert set(teams) == {"team-a", "team-b", ""}
    for team, row in teams.items():
        assert abs(row["gpuHours"] - expected[team]) <= tolerance, (team, row, expected)
    by_user = {u["user"]: u for u in done["byUser"]}
    assert set(by_user) == {"alice", ""}
    for user, row in by_user.items():
        assert abs(row["gpuHours"] - expected["user:" + user]) <= tolerance, (user, row, expected)
    # One node: team B's two pods overlapped on it, so its node-hours are the union of their holds.
    b_spans = sorted((s, e) for ns, _, _, s, e in truth if ns == TEAM_B)
    union = (max(e for _, e in b_spans) - b_spans[0][0]) if b_spans[1][0] <= b_spans[0][1] else sum(
        (e - s for s, e in b_spans), timedelta())
    assert abs(teams["team-b"]["nodeHours"] - union.total_seconds() / 3600) <= tolerance
    total = sum(v for k, v in expected.items() if not k.startswith("user:"))
    assert abs(done["total"]["gpuHours"] - total) <= tolerance

    # A member sees her own usage only; a team filter narrows it.
    mine = report(alice)
    assert mine["scope"] == "own" and {u["user"] for u in mine["byUser"]} == {"alice"}
    assert [t["team"] for t in mine["byTeam"]] == ["team-a"]
    assert [t["team"] for t in report(team="team-b")["byTeam"]] == ["team-b"]
    # ... and her teams' usage once she is a member of one (the team record as team_create stores it).
    teams_store.save_team(cp.context.db, teams_store.Team(
        name="team-b", cluster_tag=TAG, quota_id="", settings={}, members=["alice"], created_by="test",
        created_at=utcnow()))
    theirs = report(alice)
    assert sorted(t["team"] for t in theirs["byTeam"]) == ["team-a", "team-b"]
    assert abs(next(t for t in theirs["byTeam"] if t["team"] == "team-b")["gpuHours"] - teams["team-b"]["gpuHours"]) \
        <= tolerance
    assert "" not in {t["team"] for t in theirs["byTeam"]}  # the loose pod in no team's namespace stays hidden
    teams_store.delete_team(cp.context.db, "team-b", TAG)

    # The CSV: through the CLI's -o csv, the same rows.
    text = run_cli(cp, ["usage", "report", "--since", period["since"], "--until", period["until"], "-o", "csv"])
    lines = list(csv.DictReader(io.StringIO(text)))
    assert {(r["team"], r["user"]) for r in lines} == {(r["team"], r["user"]) for r in done["rows"]}
    assert abs(sum(float(r["gpu_hours"]) for r in lines) - done["total"]["gpuHours"]) <= 0.001

    # A hold recorded before a restart whose pod went while nobody watched: counted until now while open, then
    # closed by the sampler at its last sample (the report's precision is one sampling interval).
    now = utcnow()
    timeline.record(cp.context.db, [usage_store.pod_entry(
        TAG, "uid-unseen", "hyperpod-ns-ghosts", "ghost-0", usage_store.PodHold(1, 0, "n-ghost", "alice"),
        now - timedelta(hours=2), now - timedelta(hours=1), open_=True)])
    window = {"since": (now - timedelta(hours=3)).isoformat(), "until": (now + timedelta(hours=1)).isoformat(),
              "team": "ghosts"}
    assert report(**window)["total"]["gpuHours"] >= 2.0  # still open: up to now
    row = get_cluster(cp.context.db, TAG)
    assert usage_feed.sample(cp.context, TAG, row.region, row.eks_cluster_name)
    assert report(**window)["total"]["gpuHours"] == 1.0  # closed at its last sample

    # Refusals name the field; viewers may not read who used what.
    status, bad = call(cp, "usage_report", {"since": period["until"], "until": period["since"]})
    assert status == 422 and bad["error"]["details"]["fields"][0]["field"] == "since"
    assert call(cp, "user_create", {"name": "vic", "role": "viewer"})[0] == 200
    vic = as_user(cp, call(cp, "token_create", {"name": "main", "user": "vic"})[1]["token"])
    status, denied = call(vic, "usage_report", {})
    assert status == 403 and denied["error"]["details"]["requiredRole"] == "member"
