"""usage_report's arithmetic and its records: holds clipped to the period, GPU-hours, node-hours with overlapping
pods of a team on one node counted once, team from the namespace, the submitter of a pod's workload, a pod's hold
replaced by its latest observation (closed at its containers' end), holds kept out of the timeline's listing, and
the CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest

from instantstart.errors import InvalidInput
from instantstart.services.base.watch.projections import pod_view
from instantstart.services.monitoring.usage import UsageRequest, as_csv, group, node_seconds, period, spans
from instantstart.services.monitoring.usage_feed import hold_entry, holding, team_of
from instantstart.store import timeline
from instantstart.store import usage as store
from instantstart.store.db import Database

T0 = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def hold(ns: str, user: str, node: str, gpu: int, start: float, end: float, *, open_: bool = False) -> store.HoldRow:
    return store.HoldRow(ns, f"p-{start}", store.PodHold(gpu, 0, node, user), at(start), at(end), open_)


def test_team_of_maps_task_governance_namespaces_and_nothing_else() -> None:
    assert team_of("hyperpod-ns-team-a") == "team-a"
    assert team_of("default") == "" and team_of("hyperpod-ns") == ""


def test_gpu_hours_clip_to_the_period_and_node_hours_count_a_node_once() -> None:
    rows = [
        hold("hyperpod-ns-a", "alice", "n1", 2, 0, 60),     # 2 GPUs for 1 h
        hold("hyperpod-ns-a", "alice", "n1", 1, 30, 90),    # overlaps on n1: node-hours 1.5 h, not 2
        hold("hyperpod-ns-b", "bob", "n2", 4, -60, 30),     # starts before the period: 30 min counted
        hold("hyperpod-ns-b", "bob", "n2", 1, 200, 300),    # after the period: not counted
        hold("default", "", "n3", 1, 100, 110, open_=True),  # still running: until now (clipped to until)
    ]
    found = spans(rows, at(0), at(180), now=at(150))
    teams = {g.team: g for g in group(found, lambda s: (s.team,), ("team",))}
    assert teams["a"].gpu_hours == 3.0 and teams["a"].node_hours == 1.5 and teams["a"].pods == 2
    assert teams["b"].gpu_hours == 2.0 and teams["b"].node_hours == 0.5 and teams["b"].pods == 1
    assert teams[""].gpu_hours == round(50 / 60, 4)  # open: 100 → now (150)
    users = group(found, lambda s: (s.user,), ("user",))
    assert [u.user for u in users] == ["alice", "bob", ""]  # most GPU-hours first
    assert node_seconds([]) == 0.0


def test_the_period_defaults_and_refusals() -> None:
    now = at(0)
    assert period(UsageRequest(), now) == (now - timedelta(days=7), now)
    with pytest.raises(InvalidInput) as empty:
        period(UsageRequest(since=at(10), until=at(5)), now)
    assert empty.value.details["fields"][0]["field"] == "since"
    with pytest.raises(InvalidInput) as naive:
        period(UsageRequest(since=datetime(2026, 1, 1)), now)
    assert "time zone" in naive.value.message


def test_the_csv_has_a_header_and_one_line_per_row() -> None:
    found = spans([hold("hyperpod-ns-a", "alice", "n1", 2, 0, 30)], at(0), at(60), now=at(60))
    rows = group(found, lambda s: (s.team, s.namespace, s.user), ("team", "namespace", "user"))
    parsed = list(csv.reader(io.StringIO(as_csv(rows))))
    assert parsed == [["team", "namespace", "user", "gpu_hours", "neuron_device_hours", "node_hours", "pods"],
                      ["a", "hyperpod-ns-a", "alice", "1.0", "0.0", "0.5", "1"]]


def _pod(phase: str, *, finished: str | None = None, deleting: str | None = None) -> dict[str, object]:
    state = {"terminated": {"finishedAt": finished}} if finished else {"running": {"startedAt": "x"}}
    return {
        "metadata": {"name": "train-a-worker-0", "namespace": "hyperpod-ns-a", "uid": "u1",
                     **({"deletionTimestamp": deleting} if deleting else {})},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
        "status": {"phase": phase, "startTime": "2026-12-01T00:00:00Z", "containerStatuses": [{"state": state}]},
    }


def test_a_pods_hold_is_recorded_open_then_replaced_closed_at_its_end(database_url: str) -> None:
    db = Database(database_url)
    db.migrate()
    store.record_workload(db, "c1", "hyperpod-ns-a", "train", "bob", at(-10))
    store.record_workload(db, "c1", "hyperpod-ns-a", "train-a", "alice", at(-5))  # the longer prefix wins
    user = store.submitter(db, "c1", "hyperpod-ns-a", "train-a-worker-0")
    assert user == "alice" and store.submitter(db, "c1", "hyperpod-ns-a", "other-0") == ""
    running = pod_view(_pod("Running"))
    assert holding(running) and not holding(pod_view({**_pod("Pending"), "status": {}}))
    timeline.record(db, [hold_entry("c1", running, user, at(30))])
    [(uid, _, row)] = store.open_holds(db, "c1")
    assert uid == "u1" and row.open and row.end == at(30) and row.hold == store.PodHold(2, 0, "n1", "alice")
    done = pod_view(_pod("Succeeded", finished="2026-12-01T00:20:00Z"))
    timeline.record(db, [hold_entry("c1", done, user, at(40))])  # observed later, ended earlier: its end wins
    [closed], more = store.holds(db, "c1", at(0), at(60))
    assert not more and not closed.open and closed.end == at(20) and store.open_holds(db, "c1") == []
    gone = pod_view(_pod("Running", deleting="2026-12-01T00:25:00Z"))
    assert hold_entry("c1", gone, user, at(50), gone=True).last_at == at(25)
    # Holds and submitters are usage's: the timeline's listing leaves them out.
    assert timeline.query(db, "c1", exclude_source=store.SOURCE) == []
