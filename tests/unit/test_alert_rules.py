"""Alert rules as pure conditions (thresholds, windows, the last launch attempt) and the webhook sender's retry
policy and signature, against a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from instantstart.services.alerts import notify
from instantstart.services.alerts.rules import RULES, Snapshot, thresholds
from tests.support.webhook import Receiver

NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)


def entry(message: str, group: str = "g1", node: str = "i-0abc", hours_ago: float = 1) -> dict[str, Any]:
    return {"namespace": group, "object_name": node, "message": message, "last_at": NOW - timedelta(hours=hours_ago)}


def fired(rule: str, snap: Snapshot, **override: Any) -> dict[str, str]:
    limits = thresholds({rule: override} if override else None)
    return RULES[rule].condition(snap, limits[rule])


def test_replacements_count_per_group_within_a_day_above_the_threshold() -> None:
    events = [entry(f"Replacing i-{n} with i-{n + 1}") for n in range(4)] + [entry("Replacing a with b", "g2")]
    events.append(entry("Replacing old with new", hours_ago=30))  # outside the day
    snap = Snapshot("c", NOW, hyperpod=events)
    assert list(fired("node_replaced", snap)) == ["group/g1"]  # 4 > 3 (default)
    assert sorted(fired("node_replaced", snap, value=0)) == ["group/g1", "group/g2"]
    assert fired("node_replaced", snap, value=4) == {}


def test_the_same_xid_recurring_in_a_group_fires_a_different_one_does_not() -> None:
    snap = Snapshot("c", NOW, hyperpod=[entry("Node i-1 health: Unschedulable (NVRM: Xid 79, fell off)", node="i-1"),
                                        entry("Xid: 79 again", node="i-2"), entry("Xid 48 once")])
    found = fired("xid_recurring", snap)
    assert list(found) == ["group/g1/xid/79"] and "i-1, i-2" in found["group/g1/xid/79"]


def test_capacity_is_stuck_until_a_later_launch_of_the_group() -> None:
    short = entry("InsufficientCapacity: 1 instance(s) for instance group g1 could not be launched.", hours_ago=2)
    assert list(fired("capacity_stuck", Snapshot("c", NOW, hyperpod=[short]))) == ["group/g1"]
    launched = entry("Launching instance i-9 (ml.g6.4xlarge) in us-west-2c", hours_ago=1)
    assert fired("capacity_stuck", Snapshot("c", NOW, hyperpod=[short, launched])) == {}


def test_a_crash_loop_needs_a_restart_and_not_ready_or_a_new_restart() -> None:
    pod = {"namespace": "ns", "name": "p", "restarts": 2, "ready": True, "phase": "Running"}
    assert fired("pod_crash_looping", Snapshot("c", NOW, pods=[pod])) == {}
    assert list(fired("pod_crash_looping", Snapshot("c", NOW, pods=[pod], restarted={"ns/p"}))) == ["pod/ns/p"]
    assert list(fired("pod_crash_looping", Snapshot("c", NOW, pods=[{**pod, "ready": False}]))) == ["pod/ns/p"]


def test_watches_gpu_and_lifecycle_conditions() -> None:
    snap = Snapshot("c", NOW, watches=[{"kind": "pods", "state": "reconnecting", "connected": False,
                                        "lastError": "HTTP 503"}, {"kind": "x", "state": "absent",
                                                                   "connected": False}],
                    gpu_idle={"n1": 1.0, "n2": 50.0},
                    lifecycle=["The lifecycle script s3://b/lifecycle/c/on_create.sh was modified (sha256 …)"])
    assert list(fired("watch_stale", snap)) == ["watch/pods"]
    assert list(fired("gpu_idle", snap)) == ["node/n1"]
    assert list(fired("lifecycle_script_changed", snap)) == ["script/s3://b/lifecycle/c/on_create.sh"]
    assert fired("gpu_idle", snap, value=0.5) == {}


def workload(name: str, *conditions: tuple[str, str, str]) -> dict[str, Any]:
    """A Kueue Workload of a HyperPodPyTorchJob with (type, status, reason) conditions."""
    return {"metadata": {"namespace": "hyperpod-ns-a", "name": name,
                         "ownerReferences": [{"kind": "HyperPodPyTorchJob", "name": f"job-{name}"}]},
            "spec": {"queueName": "hyperpod-ns-a-localqueue"},
            "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": f"{r} message"}
                                      for t, s, r in conditions]}}


def test_a_job_pending_over_quota_fires_admitted_inadmissible_and_finished_do_not() -> None:
    snap = Snapshot("c", NOW, workloads=[
        workload("over", ("QuotaReserved", "False", "Pending")),
        workload("admitted", ("QuotaReserved", "True", "QuotaReserved"), ("Admitted", "True", "Admitted")),
        workload("no-queue", ("QuotaReserved", "False", "Inadmissible")),
        workload("done", ("QuotaReserved", "False", "Pending"), ("Finished", "True", "Succeeded")),
        workload("new"),  # Kueue has not looked at it yet
    ])
    found = fired("job_pending_quota", snap)
    assert list(found) == ["workload/hyperpod-ns-a/over"]
    assert found["workload/hyperpod-ns-a/over"] == (
        "HyperPodPyTorchJob job-over in hyperpod-ns-a waits for quota in queue hyperpod-ns-a-localqueue: "
        "Pending message")
    assert RULES["job_pending_quota"].default.minutes == 60


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[Receiver]:
    found = Receiver(request.param)
    yield found
    found.close()


@pytest.mark.parametrize("receiver", [[500, 429, 200]], indirect=True)
def test_the_webhook_is_retried_with_exponential_backoff_and_signed(receiver: Receiver) -> None:
    pauses: list[float] = []
    record = notify.post_webhook(receiver.url, "k" * 16, b'{"a":1}', backoff=0.5, pause=pauses.append)
    assert record == {"channel": "webhook", "ok": True, "attempts": 3, "status": 200}
    assert pauses == [0.5, 1.0]
    for _, headers, body in receiver.requests:
        assert body == b'{"a":1}'
        assert headers["X-InstantStart-Signature"] == "sha256=" + hmac.new(b"k" * 16, body, hashlib.sha256).hexdigest()


@pytest.mark.parametrize("receiver", [[400]], indirect=True)
def test_a_refused_webhook_is_not_retried(receiver: Receiver) -> None:
    record = notify.post_webhook(receiver.url, None, b"{}", pause=lambda _: None)
    assert record["ok"] is False and record["attempts"] == 1 and record["error"] == "HTTP 400"
    assert "X-InstantStart-Signature" not in receiver.requests[0][1]


@pytest.mark.parametrize("receiver", [[503]], indirect=True)
def test_a_failing_webhook_gives_up_after_the_last_attempt(receiver: Receiver) -> None:
    pauses: list[float] = []
    record = notify.post_webhook(receiver.url, "s" * 8, b"{}", backoff=1, pause=pauses.append)
    assert record["ok"] is False and record["attempts"] == notify.ATTEMPTS and pauses == [1, 2, 4]
